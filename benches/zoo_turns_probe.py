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

    PYTHONPATH=. python benches/zoo_turns_probe.py [REPEATS] [model:precision:layout:mode ...]
"""
import sys

import torch

from gemmconv import _node, bench, graphs, measure, zoo

CONFIGS = ["unet2d:bf16-autocast:channels_last:forward",
           "unet2d:bf16-autocast:NCHW:forward"]


def report(label: str, t: measure.Timed, node) -> None:
    times = ", ".join(f"{k} {t.ms[k]:.3f} ms {t.speedup[k]:.3f}x" for k in t.ms)
    print(f"  {label:22s} {times}; C++ forwards {node.forwards()}; graphs kept "
          f"{graphs.kept()}", flush=True)
    node.reset_outcomes()


def main(args: list[str]) -> None:
    repeats = int(args.pop(0)) if args and args[0].isdigit() else 15
    device = torch.device("cuda")
    node = _node.load()
    print(torch.cuda.get_device_name(), "C++ node built:", node is not None, flush=True)
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
            alone = measure.timers(device, {k: runners[k]}, repeats, back_to_back=True)[k]
            print(f"  alone: {k} {alone:.3f} ms", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
