"""Where a training step's backward spends the host's time outside our code (session 31:
torch.autograd.grad over our call took 1.2-1.5 ms of host time where fused.backward called
directly took 0.4-0.6, step_pieces.py). With the GPU kept busy by a sleep: the whole
autograd.grad call, the time inside our Function's backward (ops._Eager.backward, timed
from inside, on the engine's thread), the time from the grad call to its start, and from
its end to the grad call's return; then the same for torch's own op (its whole call).

    PYTHONPATH=. python benches/engine_probe.py CASE [DTYPE]
"""
import statistics
import sys
import time

import torch

from gemmconv import bench, cases, ops

SLEEP = 50_000_000


def main() -> int:
    case = next(c for c in cases.BENCH if c.name == sys.argv[1])
    dtype = getattr(torch, sys.argv[2]) if len(sys.argv) > 2 else torch.float32
    work = bench.Workload(case, dtype, torch.device("cuda"), True)
    grad = work.grad_out.to(dtype)
    stamps = {}
    inner = ops._Eager.backward

    def timed(ctx, grad_output):
        stamps["enter"] = time.perf_counter()
        result = inner(ctx, grad_output)
        stamps["leave"] = time.perf_counter()
        return result

    ops._Eager.backward = staticmethod(timed)
    print(torch.cuda.get_device_name(), case.name, dtype, flush=True)
    for impl in ("torch", "gemmconv"):
        fn = (bench.TORCH if impl == "torch" else bench.OURS)[case.nd]
        out = fn(work.x, work.w, work.b, **case.kwargs)
        for _ in range(3):
            torch.autograd.grad(out, work.leaves, grad, retain_graph=True)
        torch.cuda.synchronize()
        rows = []
        for _ in range(20):
            torch.cuda._sleep(SLEEP)
            stamps.clear()
            start = time.perf_counter()
            torch.autograd.grad(out, work.leaves, grad, retain_graph=True)
            end = time.perf_counter()
            torch.cuda.synchronize()
            if stamps:
                rows.append(((end - start) * 1e6, (stamps["enter"] - start) * 1e6,
                             (stamps["leave"] - stamps["enter"]) * 1e6,
                             (end - stamps["leave"]) * 1e6))
            else:
                rows.append(((end - start) * 1e6,))
        medians = [statistics.median(r[i] for r in rows) for i in range(len(rows[0]))]
        labels = ["grad call", "to our backward", "in our backward", "after it"]
        print(f"{impl}: host us " + ", ".join(f"{l} {m:.0f}" for l, m in zip(labels, medians)),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
