"""Does a call wait for the GPU? Host time per call with the GPU idle and with it busy.

A call that only enqueues work takes the same host time whether the GPU is idle or busy
with a long kernel queued ahead of it. A call that waits somewhere (a synchronous copy, an
allocation that syncs, a library call that blocks) takes the busy kernel's time on top.
Session 25 measured DCGAN's forward at 905-1866 us between processes against torch's
720-728: that spread is what a hidden wait behind the GPU's queue would also give.

Per zoo model (full size, GPU), in float32 and bfloat16 autocast, NCHW and channels_last,
forward (eval, no grad) and training step: host time of R calls enqueued back to back, the
GPU idle, then with a ~0.2 s sleep kernel queued first; torch's model against
``convert(model)``'s. Where ours waits, cProfile names the function that waited.

    PYTHONPATH=. python benches/sync_probe.py [model ...]
"""
import cProfile
import io
import pstats
import sys
import time

import torch

sys.path.insert(0, "benches")
from lt_probe import model_step, zoo_pair  # noqa: E402

SLEEP_S = 0.2


def sleep_cycles() -> int:
    """Cycles of torch.cuda._sleep that take about SLEEP_S."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    torch.cuda.synchronize()
    return int(10_000_000 * SLEEP_S * 1e3 / start.elapsed_time(end))


def host_time(fn, repeats: int, busy_cycles: int = 0) -> float:
    """Host seconds a call of ``fn`` takes to return, ``repeats`` back to back, after a
    sleep kernel of ``busy_cycles`` was queued (0: on an idle GPU)."""
    torch.cuda.synchronize()
    if busy_cycles:
        torch.cuda._sleep(busy_cycles)
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / repeats


def busy_profile(fn, busy_cycles: int) -> cProfile.Profile:
    """cProfile of ``fn()``, run after a sleep kernel of ``busy_cycles`` was queued, so that
    a call that waits for the GPU shows where."""
    torch.cuda.synchronize()
    torch.cuda._sleep(busy_cycles)
    profile = cProfile.Profile()
    profile.enable()
    fn()
    profile.disable()
    torch.cuda.synchronize()
    return profile


def where_it_waits(fn, busy_cycles: int) -> str:
    text = io.StringIO()
    pstats.Stats(busy_profile(fn, busy_cycles), stream=text).sort_stats("tottime").print_stats(8)
    return text.getvalue()


def main(names):
    cycles = sleep_cycles()
    print(f"sleep kernel: {cycles} cycles ~ {SLEEP_S * 1e3:.0f} ms")
    print("model mode dtype layout | host us a call, GPU idle / busy: torch | ours | verdict")
    for name in names:
        for dtype in (torch.float32, torch.bfloat16):
            for channels_last in (False, True):
                if name == "hifigan" and channels_last:
                    continue
                base, ours, x, cast = zoo_pair(name, dtype, channels_last)
                for mode in ("eval", "train"):
                    row, waits = [], []
                    for m in (base, ours):
                        fn = model_step(m, x, cast, mode)
                        for _ in range(3):
                            fn()
                        repeats = 3 if name in ("dcgan", "vae-decoder", "hifigan") else 1
                        idle = min(host_time(fn, repeats) for _ in range(3))
                        busy = min(host_time(fn, repeats, cycles) for _ in range(3))
                        row.append(f"{idle * 1e6:8.0f} / {busy * 1e6:8.0f}")
                        waits.append(busy > idle + SLEEP_S / repeats / 2)
                    verdict = ("ours WAITS" if waits[1] else "ours enqueues") + \
                        ("; torch WAITS" if waits[0] else "")
                    layout = "CL" if channels_last else "NCHW"
                    print(f"{name} {mode} {str(dtype)[6:]} {layout} | {row[0]} | {row[1]} | {verdict}",
                          flush=True)
                    if waits[1]:
                        print(where_it_waits(model_step(ours, x, cast, mode), cycles))
                del base, ours, x
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:] or ["dcgan", "vae-decoder", "hifigan", "unet2d", "unet3d", "depthwise"])
