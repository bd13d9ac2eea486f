"""Where a zoo model's training step spends its host time, by function.

sync_probe.py found that no call waits for the GPU, yet DCGAN's training step costs 2.5x
torch's host time (5.0 against 2.1 ms), its forward only 1.7x. This probe:
- lists each converted layer's replays: whether its forward and backward have one
  (ops._replays, ops._backward_replays), and for those without, the call;
- times the host per step with autograd's device threads on and off, in turns;
- profiles the steps with the device threads off (so that cProfile sees the backward),
  torch's model beside ours, by own time and by cumulative time.

    PYTHONPATH=. python benches/host_profile.py [model] [float32|bfloat16] [NCHW|CL]
"""
import io
import pstats
import sys

import torch

sys.path.insert(0, "benches")
from lt_probe import model_step, zoo_pair  # noqa: E402
from overhead import profiled  # noqa: E402
from sync_probe import host_time, sleep_cycles  # noqa: E402

from gemmconv import ops  # noqa: E402


def profile(fn, steps: int, cycles: int, sort: str, lines: int) -> str:
    text = io.StringIO()
    pstats.Stats(profiled(fn, steps, cycles), stream=text).sort_stats(sort).print_stats(lines)
    return text.getvalue()


def replays() -> str:
    lines = []
    for name, cache in (("forward", ops._replays), ("backward", ops._backward_replays)):
        for key, replay in cache.items():
            a = key[1] if name == "backward" else key[0]
            what = "none" if replay is None else type(replay).__name__
            lines.append(f"  {name}: {what} | batch {a.batch} {a.in_channels}->{a.out_channels} "
                         f"grid {a.grid} k {a.geometry.kernel_size} s {a.geometry.stride} "
                         f"key {key[:1] if name == 'backward' else ''}")
    return "\n".join(lines)


def main(name="dcgan", dtype="float32", layout="NCHW"):
    dt = getattr(torch, dtype)
    cycles = sleep_cycles()
    base, ours, x, cast = zoo_pair(name, dt, layout == "CL")
    print(f"{name} {dtype} {layout}")
    steps = {"torch": model_step(base, x, cast, "train"), "ours": model_step(ours, x, cast, "train")}
    for fn in steps.values():
        for _ in range(3):
            fn()
    print("replays after warm-up:\n" + replays())
    print("host us a step, device threads on / off, GPU busy:")
    for label, fn in steps.items():
        times = {True: [], False: []}
        for _ in range(3):
            for threads in (True, False):
                with torch.autograd.set_multithreading_enabled(threads):
                    times[threads].append(host_time(fn, 3, cycles))
        print(f"  {label}: {min(times[True]) * 1e6:.0f} / {min(times[False]) * 1e6:.0f}")
    with torch.autograd.set_multithreading_enabled(False):
        for label, fn in steps.items():
            print(f"\n=== {label}, 10 steps, by own time")
            print(profile(fn, 10, cycles, "tottime", 30))
        print("\n=== ours, 10 steps, by cumulative time")
        print(profile(steps["ours"], 10, cycles, "cumulative", 60))


if __name__ == "__main__":
    main(*sys.argv[1:])
