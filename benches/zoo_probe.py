"""Where convert(model) loses on the zoo's losing variants: per variant, torch's model and
the converted one timed back to back in turns (measure.timers), each one's GPU kernel time
a call (profiler), busy-host time a call (a sleep kernel queued ahead), and how the
converted model's transposed convolutions ran in a step: by a replay launched as a graph,
a replay launched kernel by kernel, or no replay (the generic routes).

    PYTHONPATH=. python benches/zoo_probe.py [MODEL:MODE:PRECISION:LAYOUT ...]
"""
import collections
import contextlib
import copy
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from gemmconv import bench, graphs, measure, ops, zoo
from gemmconv import nn as gnn

sys.path.insert(0, "benches")
from overhead import busy_host_us  # noqa: E402

VARIANTS = [f"vae-decoder:{m}:{p}:{l}" for m in ("forward", "train")
            for p in bench.PRECISIONS for l in ("NCHW", "channels_last")] + [
    "dcgan:forward:bf16-autocast:channels_last", "dcgan:train:bf16-autocast:NCHW",
    "dcgan:train:bf16-autocast:channels_last", "hifigan:train:bf16-autocast:NCHW",
    "depthwise:forward:bf16-autocast:channels_last", "depthwise:train:float32:NCHW"]


class Counts:
    """How the converted model's calls ran: graph launches, replays launched one by one,
    and calls with no replay, forward and backward."""

    def __init__(self):
        self.counts = collections.Counter()

    @contextlib.contextmanager
    def watching(self):
        launch, forward, backward = graphs.launch, ops._replayed, ops._replayed_backward

        def counted_launch(owner, *args):
            ran = launch(owner, *args)
            side = "bwd" if isinstance(owner, ops._BackwardReplay) else "fwd"
            self.counts[f"{side} graph" if ran else f"{side} launches"] += 1
            return ran

        def counted(fn, side):
            def call(*args):
                out = fn(*args)
                if out is None:
                    self.counts[f"{side} no replay"] += 1
                return out
            return call
        graphs.launch, ops._replayed = counted_launch, counted(forward, "fwd")
        ops._replayed_backward = counted(backward, "bwd")
        try:
            yield
        finally:
            graphs.launch, ops._replayed, ops._replayed_backward = launch, forward, backward


def kernels(run, calls=10) -> list:
    """The CUDA kernels of ``calls`` calls of ``run`` after one untimed (profiler events,
    totals over the calls)."""
    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            run()
        torch.cuda.synchronize()
    return list(prof.key_averages())


def top_kernels(events: list, calls=10, rows=6) -> str:
    events = sorted(events, key=lambda e: -e.self_device_time_total)[:rows]
    return "\n".join(f"      {e.self_device_time_total / calls:8.1f} us {e.count // calls:3d}x "
                     f"{e.key[:90]}" for e in events)


def runners(spec: str) -> dict:
    """Steps of torch's model and the converted one (bench.model_step) for ``spec``,
    MODEL:MODE:PRECISION:LAYOUT as bench --models names them."""
    name, mode, precision, layout = spec.split(":")
    base, x, cast, grad_mode, _ = bench.model_setup(zoo.by_name([name])[0], False,
                                                    torch.device("cuda"), precision, layout, mode)
    ours = gnn.convert(copy.deepcopy(base))
    with cast, grad_mode:
        grad = torch.randn_like(base(x), dtype=torch.float32) if mode == "train" else None
    return {key: bench.model_step(model, x, cast, grad_mode, grad)
            for key, model in (("torch", base), ("ours", ours))}


def probe(spec: str) -> None:
    runs = runners(spec)
    times = measure.timers(torch.device("cuda"), runs, 10, back_to_back=True)
    counts = Counts()
    for _ in range(3):
        runs["ours"]()
    with counts.watching():
        runs["ours"]()
    host = {k: busy_host_us(r, calls=10) for k, r in runs.items()}
    events = {k: kernels(r) for k, r in runs.items()}
    gpu = {k: sum(e.self_device_time_total for e in v) / 10 / 1e3 for k, v in events.items()}
    print(f"{spec:48s} ms: torch {times['torch']:.3f} ours {times['ours']:.3f} "
          f"({times['torch'] / times['ours']:.2f}x) | GPU torch {gpu['torch']:.3f} ours "
          f"{gpu['ours']:.3f} | busy host us torch {host['torch']:.0f} ours {host['ours']:.0f} "
          f"| {dict(counts.counts)}", flush=True)
    for k, v in events.items():
        print(f"    {k}:\n{top_kernels(v)}", flush=True)


def main() -> int:
    print(torch.cuda.get_device_name(), flush=True)
    for spec in sys.argv[1:] or VARIANTS:
        probe(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
