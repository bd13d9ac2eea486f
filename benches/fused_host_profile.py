"""Where a fused call's host time goes (run B: 220-540 us a channels_last forward on the
H200's host, of which the weights' reorder 47-195 and the launch 100-150). cProfile over
calls of the library's forward, GPU busy behind a sleep so that nothing waits for it;
the costliest functions by own time and by cumulative time.

    PYTHONPATH=. python benches/fused_host_profile.py [CASE]
"""
import pstats
import sys
import time

import torch

from gemmconv import cases, conv_transpose2d

sys.path.insert(0, "benches")
from overhead import profiled  # noqa: E402


def main() -> int:
    name = sys.argv[1] if len(sys.argv) > 1 else "2d-512x1024"
    case = next(c for c in cases.BENCH if c.name == name)
    x, w, b = case.tensors(torch.float32, "cuda")
    x = x.to(memory_format=torch.channels_last)
    call = lambda: conv_transpose2d(x, w, b, **case.kwargs)
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    calls = 50
    torch.cuda._sleep(2_000_000_000)   # about a second: the GPU stays busy throughout
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    plain = (time.perf_counter() - t0) / calls * 1e6
    profiler = profiled(call, calls, 2_000_000_000)
    print(f"{torch.cuda.get_device_name()} {name} channels_last float32: {plain:.0f} us of host "
          f"time a call (no profiler)", flush=True)
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(35)
    return 0


if __name__ == "__main__":
    sys.exit(main())
