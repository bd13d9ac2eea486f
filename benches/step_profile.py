"""Per-kernel GPU time of one case's training step (or forward), ours and torch's, under
torch.profiler: where the step of a case near 1.0x goes.

    PYTHONPATH=. python benches/step_profile.py CASE [DTYPE] [--forward]
"""
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from gemmconv import bench, cases


def main() -> int:
    name = sys.argv[1]
    dtype = getattr(torch, sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[2].startswith("-") \
        else torch.float32
    case = next(c for c in cases.BENCH if c.name == name)
    work = bench.Workload(case, dtype, torch.device("cuda"), "--forward" not in sys.argv)
    print(torch.cuda.get_device_name(), case.name, dtype, flush=True)
    for impl in ("torch", "gemmconv"):
        run = work.runner(impl)
        run(), run()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                run()
            torch.cuda.synchronize()
        kernels = [e for e in prof.key_averages() if e.device_type == DeviceType.CUDA]
        total = sum(e.device_time_total for e in kernels) / 5 / 1e3
        print(f"{impl}: {total:.3f} ms of kernels a step", flush=True)
        for e in sorted(kernels, key=lambda e: -e.device_time_total)[:12]:
            print(f"  {e.device_time_total / 5 / 1e3:8.3f} ms  {e.count // 5:3d}x  {e.key[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
