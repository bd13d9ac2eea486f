"""Where the GPU idles in one case's step: torch.profiler's timeline of a training step
(host and GPU), the GPU's idle gaps over 20 us and what the host ran meanwhile. Run H had
3d-3x5x7's bfloat16 step at 1.32 ms of kernels against 1.7-2.1 ms a step.

    PYTHONPATH=. python benches/step_gaps.py CASE [DTYPE]
"""
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from gemmconv import bench, cases


def main() -> int:
    case = next(c for c in cases.BENCH if c.name == sys.argv[1])
    dtype = getattr(torch, sys.argv[2]) if len(sys.argv) > 2 else torch.float32
    work = bench.Workload(case, dtype, torch.device("cuda"), True)
    run = work.runner("gemmconv")
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    events = prof.events()
    kernels = sorted((e for e in events if e.device_type == DeviceType.CUDA),
                     key=lambda e: e.time_range.start)
    host = [e for e in events if e.device_type == DeviceType.CPU]
    first = min(e.time_range.start for e in host)
    print(torch.cuda.get_device_name(), case.name, dtype, flush=True)
    print(f"first kernel starts {kernels[0].time_range.start - first:.0f} us after the step's "
          f"first host op; last kernel ends {kernels[-1].time_range.end - first:.0f} us after it")
    busy = 0.0
    for before, after in zip(kernels, kernels[1:]):
        busy += before.time_range.end - before.time_range.start
        gap = after.time_range.start - before.time_range.end
        if gap > 20:
            ops = sorted({e.name for e in host if e.time_range.start < after.time_range.start
                          and e.time_range.end > before.time_range.end})
            print(f"  {gap:6.0f} us idle after {before.name[:40]} before {after.name[:40]}: "
                  f"{', '.join(ops)[:300]}")
    busy += kernels[-1].time_range.end - kernels[-1].time_range.start
    print(f"kernels {busy:.0f} us", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
