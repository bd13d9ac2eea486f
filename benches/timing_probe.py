"""Does the model bench's timer favour one of two identical models? Each zoo model's torch
version is timed against two deep copies of itself, in the fixed order torch, every layer
swapped (gemmconv.convert), copy A, copy B, by session 26's timer (no call ahead of a
sample, every round in that order) and by measure.timers (an untimed call ahead of each
sample, each round starting at the next model). An unbiased timer gives copy A and copy B
1.00x. Several passes of each, in turns.

    PYTHONPATH=. python benches/timing_probe.py [model ...]
"""
import copy
import statistics
import sys

import torch

import gemmconv
from gemmconv import bench, measure, zoo


def old_timers(fns: dict, repeats: int, warmup: int = 2) -> dict:
    """Session 26's measure.timers, back to back: per-call counts as now, but no call
    ahead of a sample, and every round in the dict's order."""
    def sample(fn, calls):
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / calls

    torch.cuda.synchronize()
    calls = {}
    for key, fn in fns.items():
        for _ in range(warmup - 1):
            fn()
        calls[key] = max(1, min(1000, int(measure.MIN_SAMPLE_MS / max(sample(fn, 1), 1e-3))))
    times = {key: [] for key in fns}
    for _ in range(repeats):
        for key, fn in fns.items():
            times[key].append(sample(fn, calls[key]))
    return {key: statistics.median(t) for key, t in times.items()}


def runners(entry, precision: str, layout: str, mode: str) -> dict:
    base, x, cast, grad_mode, _ = bench.model_setup(entry, False, torch.device("cuda"),
                                                    precision, layout, mode)
    models = {"torch": base, "every": gemmconv.convert(copy.deepcopy(base)),
              "copy A": copy.deepcopy(base), "copy B": copy.deepcopy(base)}
    with cast, grad_mode:
        grad = torch.ones_like(base(x)) if mode == "train" else None
    return {k: bench.model_step(m, x, cast, grad_mode, grad) for k, m in models.items()}


def main() -> None:
    names = sys.argv[1:] or ["dcgan", "vae"]
    print("model mode precision layout | timer pass | torch ms | every, copy A, copy B: "
          "torch's time over theirs", flush=True)
    for entry in zoo.by_name(names):
        for precision, layout, mode in bench.model_configs(entry):
            fns = runners(entry, precision, layout, mode)
            for p in range(2):
                for name, timer in (("old", lambda: old_timers(fns, 10)),
                                    ("new", lambda: measure.timers(torch.device("cuda"), fns, 10,
                                                                   back_to_back=True))):
                    t = timer()
                    print(f"{entry.name} {mode} {precision} {layout} | {name} {p} | "
                          f"{t['torch']:.3f} | " + " ".join(
                              f"{t['torch'] / t[k]:.2f}x" for k in ("every", "copy A", "copy B")),
                          flush=True)


if __name__ == "__main__":
    main()
