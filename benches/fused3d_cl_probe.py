"""Would the fused route win the 3-D channels_last forward? On the H200 (session 31, G) our
3-D stride-1 cases ran 1.4-1.6x slower channels_last than NCHW (3d-64cube 4.67 against
3.20 ms, 3d-96cube 9.41 against 5.82): channels_last has no row products (the NCHW route
takes the outer dim's taps in the GEMM's reduction, over overlapping rows of columns
laid out (D, C, HW); channels_last puts C innermost, where overlapping rows cannot
stack), so its column routes move up to 1.7x the bytes. The fused route keeps the columns
on chip whatever the layout; the cost model keeps 3-D calls off it (fused.preferred). Per
3-D case, channels_last, float32 and bfloat16: torch, the column routes, the fused route
forced, in one process (bench.measure: median of 10, errors against float64).

    PYTHONPATH=. python benches/fused3d_cl_probe.py [CASE ...]
"""
import sys

import torch

from gemmconv import bench, cases, fused

sys.path.insert(0, "benches")
from overhead import patched  # noqa: E402

ORIGINAL = fused.preferred


def three_d_too(a, interleaved):
    return ORIGINAL(a, interleaved) or a.geometry.nd == 3


def main() -> int:
    device = torch.device("cuda")
    names = sys.argv[1:]
    print(torch.cuda.get_device_name(), flush=True)
    chosen = [c for c in cases.BENCH if c.nd == 3 and c.groups == 1 and (not names or c.name in names)]
    for dtype in (torch.float32, torch.bfloat16):
        ceiling = bench.ceilings(device, dtype)
        for case in chosen:
            row = bench.measure(case, dtype, device, False, ceiling, 10, interleaved=True)
            cells = [f"torch {row.torch_ms:.3f}", f"columns {row.ours_ms:.3f} ({row.speedup:.2f}x)"]
            with patched(fused, "preferred", three_d_too):
                forced = bench.measure(case, dtype, device, False, ceiling, 10, interleaved=True)
            cells.append(f"fused {forced.ours_ms:.3f} ({forced.speedup:.2f}x, err "
                         f"{forced.ours_error:.1e} vs {row.ours_error:.1e})")
            print(f"{case.name} {str(dtype)[6:]} CL fwd | " + " | ".join(cells)
                  + f" | floor {row.floor_ms:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
