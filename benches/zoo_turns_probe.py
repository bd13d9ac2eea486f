"""Why does the zoo read a converted model slower than convert(sample=)'s own whole-model
timing did? (Session 53: the 2-D U-Net's bfloat16 channels_last forward, every transposed
convolution swapped, read 1.04x in convert's timing and 0.97-0.98x in the zoo's, G.)

The two timings differ in three ways, each timed here against torch's model in turns
(measure.timed, as both time):
- the zoo times five models in turns (torch's, its copy, and three converted), convert one
  model whose classes it switches: "five models" against "two models";
- convert's steps run inside the caller's autocast region, where torch's autocast keeps
  its casts of the weights from step to step; each zoo step opens and closes a region of
  its own, which drops them: "one autocast region";
- alone, back to back, each model's step with no other in between.
With each, what the steady calls' forwards did (node.forwards(): launched from C++, or in
Python) and the graphs graphs.launch kept.

C read the U-Net's converted step alone at 3.82 ms against torch's 3.23, where in turns it
read 3.24-3.38. With ``--alone``: torch's model and the converted one alone, back to back,
twice each in alternation, with what their launches did; then each step's host time (the
GPU kept busy) and its kernels' time (profiler), with its largest kernels.

    PYTHONPATH=. python benches/zoo_turns_probe.py [REPEATS] [--alone] [model:precision:layout:mode ...]
"""
import collections
import copy
import sys

import torch

from gemmconv import _node, bench, graphs, measure, zoo
from gemmconv import nn as gnn

sys.path.insert(0, "benches")
from layer import cuda_events  # noqa: E402
from probe_lib import busy_us, launches_counted, zoo_setup  # noqa: E402

CONFIGS = ["unet2d:bf16-autocast:channels_last:forward",
           "unet2d:bf16-autocast:NCHW:forward"]


def report(label: str, t: measure.Timed, node) -> None:
    times = ", ".join(f"{k} {t.ms[k]:.3f} ms {t.speedup[k]:.3f}x" for k in t.ms)
    print(f"  {label:22s} {times}; C++ forwards {node.forwards()}; graphs kept "
          f"{graphs.kept()}", flush=True)
    node.reset_outcomes()


def kernels(step, steps: int = 5) -> None:
    """Prints the kernels' time a step of ``step`` (profiler: layer.cuda_events) and its
    largest kernels."""
    times: dict = collections.defaultdict(float)
    counts: collections.Counter = collections.Counter()
    events = cuda_events(step, steps)
    for e in events:
        times[e.name[:100]] += e.device_time / steps / 1e3
        counts[e.name[:100]] += 1
    print(f"    kernels {sum(times.values()):.3f} ms a step, {len(events) // steps} a step",
          flush=True)
    for name, ms in sorted(times.items(), key=lambda kv: -kv[1])[:8]:
        print(f"    {ms:8.3f} ms {counts[name] // steps:3d}x {name}", flush=True)


def each_alone(config: str, repeats: int, node) -> None:
    """``config``'s torch model and its blind conversion, each alone (see the module docs)."""
    device = torch.device("cuda")
    setup, step_of = zoo_setup(config, device)
    steps = {"torch": step_of(setup.model),
             "every": step_of(gnn.convert(copy.deepcopy(setup.model)))}
    print(f"== {config}, alone", flush=True)
    for k in ("every", "torch", "every", "torch"):
        node.reset_outcomes()
        with launches_counted() as outcomes:
            ms = measure.timers(device, {k: steps[k]}, repeats, back_to_back=True)[k]
        print(f"  {k:6s} {ms:.3f} ms; C++ forwards {node.forwards()}; Python launches "
              f"{dict(outcomes)}; graphs kept {graphs.kept()}", flush=True)
    for k, step in steps.items():
        host_ms = busy_us(lambda _: step(), 60_000_000, calls=3) / 1e3
        print(f"  {k}: host {host_ms:.3f} ms a step with the GPU busy", flush=True)
        kernels(step)


def main(args: list[str]) -> None:
    repeats = int(args.pop(0)) if args and args[0].isdigit() else 15
    device = torch.device("cuda")
    node = _node.load()
    print(torch.cuda.get_device_name(), "C++ node built:", node is not None, flush=True)
    if "--alone" in args:
        for config in [a for a in args if a != "--alone"] or CONFIGS:
            each_alone(config, repeats, node)
        return
    for config in args or CONFIGS:
        name, precision, layout, mode = config.split(":")
        work = bench.ModelWorkload(zoo.by_name([name])[0], False, device, precision, layout,
                                   mode, repeats=10)
        print(f"== {config}: convert(sample=) read {work.reports['chosen'].model_speedup}",
              flush=True)
        runners = work.runners
        node.reset_outcomes()
        report("five models", measure.timed(device, runners, repeats, "torch"), node)
        pair = {k: runners[k] for k in ("torch", "every")}
        report("two models", measure.timed(device, pair, repeats, "torch"), node)
        dtype = bench.PRECISIONS[precision]
        if dtype is not None:
            with torch.autocast("cuda", dtype=dtype):
                report("one autocast region", measure.timed(device, pair, repeats, "torch"),
                       node)
        for k in ("torch", "every"):
            ms = measure.timers(device, {k: runners[k]}, repeats, back_to_back=True)[k]
            print(f"  alone: {k} {ms:.3f} ms", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
