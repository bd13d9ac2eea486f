"""Host time of a training step's forward and backward, ours and torch's, with the GPU kept
busy by a sleep queued first (so nothing waits for it): what the step costs the host where
run H found the GPU idle for 0.4-0.75 ms of 3d-3x5x7's bfloat16 step.

    PYTHONPATH=. python benches/step_host.py CASE [DTYPE]
"""
import sys

import torch

from gemmconv import bench, cases

sys.path.insert(0, "benches")
from overhead import busy_host_us  # noqa: E402


def main() -> int:
    case = next(c for c in cases.BENCH if c.name == sys.argv[1])
    dtype = getattr(torch, sys.argv[2]) if len(sys.argv) > 2 else torch.float32
    work = bench.Workload(case, dtype, torch.device("cuda"), True)
    grad = work.grad_out.to(dtype)
    print(torch.cuda.get_device_name(), case.name, dtype, flush=True)
    for impl in ("torch", "gemmconv"):
        fn = (bench.TORCH if impl == "torch" else bench.OURS)[case.nd]
        forward = lambda: fn(work.x, work.w, work.b, **case.kwargs)
        out = forward()
        backward = lambda: torch.autograd.grad(out, work.leaves, grad, retain_graph=True)
        for _ in range(3):
            forward(), backward()
        torch.cuda.synchronize()
        step = work.runner(impl)
        print(f"{impl}: host us forward {busy_host_us(forward):.0f}, backward {busy_host_us(backward):.0f}, "
              f"step {busy_host_us(step):.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
