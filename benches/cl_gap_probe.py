"""Why some channels_last forwards of the 17 cases trail our planar ones by more than their
kernels do (session 56, B: 3d-strided-grouped's kernels 0.985 ms channels_last against
0.889 planar, its calls 1.44-1.66 ms against 1.07). Per case and layout: a call timed from
an idle GPU and the steady time a call in a row (measure.timers), the host's time to
return from a call (GPU idle before), the same with the GPU busy; then cProfile of the
channels_last call by own time.

    PYTHONPATH=. python benches/cl_gap_probe.py [CASE ...]
"""
import cProfile
import pstats
import statistics
import sys
import time

import torch

import gemmconv
from gemmconv import cases
from gemmconv.measure import timers

NAMES = sys.argv[1:] or ["3d-3x5x7", "3d-strided-grouped", "3d-stride2-grouped", "3d-96cube",
                         "2d-64to128"]


def host_us(fn, busy: bool) -> float:
    torch.cuda.synchronize()
    if busy:
        torch.cuda._sleep(200_000_000)
    t0 = time.perf_counter()
    fn()
    t = (time.perf_counter() - t0) * 1e6
    torch.cuda.synchronize()
    return t


for name in NAMES:
    case = next(c for c in cases.BENCH if c.name == name)
    x, w, b = case.tensors(torch.float32, "cuda")
    f = getattr(gemmconv, f"conv_transpose{case.nd}d")
    fmt = torch.channels_last if case.nd == 2 else torch.channels_last_3d
    for layout in ("planar", "channels_last"):
        xi = x if layout == "planar" else x.contiguous(memory_format=fmt)
        call = lambda: f(xi, w, b, **case.kwargs)
        for _ in range(3):
            call()
        one = timers(torch.device("cuda"), {0: call}, 15)[0]
        row = timers(torch.device("cuda"), {0: call}, 5, back_to_back=True)[0]
        idle = statistics.median(host_us(call, False) for _ in range(15))
        busy = statistics.median(host_us(call, True) for _ in range(15))
        print(f"{name:20s} {layout:14s} one call {one:7.3f} ms, in a row {row:7.3f} ms; "
              f"host {idle:7.1f} us idle, {busy:7.1f} us busy", flush=True)
    xi = x.contiguous(memory_format=fmt)
    profiler = cProfile.Profile()
    torch.cuda.synchronize()
    profiler.enable()
    for _ in range(5):
        f(xi, w, b, **case.kwargs)
    profiler.disable()
    torch.cuda.synchronize()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(12)
