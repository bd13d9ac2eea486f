"""Does timing torch and gemmconv call by call in turns cost our small cases their CUDA
graphs? Session 48's M (the case table timed in turns, each call from an idle GPU) read
2d-stride5-dil2's bfloat16 training step at 1.536 ms, where session 47's D (each side's
calls in a row) read 0.940. Per case: graphs.launch's outcomes and each side's median ms,
timed in turns (measure.timed, as bench.measure now) and in a row (measure.timer each, as
before).

    PYTHONPATH=. python benches/turns_probe.py [CASES] [--forward] [--dtype float32]
"""
import sys

import torch

from gemmconv import bench, cases, graphs, measure

sys.path.insert(0, "benches")
from probe_lib import launches_counted  # noqa: E402


def main() -> None:
    device = torch.device("cuda")
    print(torch.cuda.get_device_name(), flush=True)
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    names = (args[0] if args else "2d-stride5-dil2,3d-3x5x7").split(",")
    backward = "--forward" not in sys.argv
    dtype = torch.float32 if "float32" in sys.argv else torch.bfloat16
    what = f"{dtype} {'training' if backward else 'forward'}"
    for case in (c for c in cases.BENCH if c.name in names):
        work = bench.Workload(case, dtype, device, backward)
        fns = {impl: work.runner(impl) for impl in ("torch", "gemmconv")}
        for label in ("in turns", "in a row", "in turns", "in a row"):
            with launches_counted() as outcomes:
                if label == "in turns":
                    ms = measure.timed(device, fns, 10, "torch", back_to_back=False).ms
                else:
                    ms = {k: measure.timer(device, f, 10) for k, f in fns.items()}
            print(f"== {case.name} {what}, {label}: torch {ms['torch']:.3f} ms, ours "
                  f"{ms['gemmconv']:.3f} | graphs: "
                  + ", ".join(f"{k} {v}" for k, v in outcomes.items())
                  + f" (kept {graphs.kept()})", flush=True)


if __name__ == "__main__":
    main()
