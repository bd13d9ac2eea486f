"""Does the grouped direct kernel (depthwise.GROUPED_MAX_INPUTS, session 63) beat the column
routes on grouped layers of a few input channels a group? Built with no GPU time left: on
the H100 (results/s63/G) 3d-strided-grouped's bfloat16 forward ran 0.87x torch's planar
and 0.72x channels_last on the column routes, whose columns' traffic (0.74 GB each way)
puts their floor near 0.5 ms against torch's 0.6-0.7.

Per grouped case of the table, float32 and bfloat16, planar and channels_last: torch, the
direct kernel, the column routes (GROUPED_MAX_INPUTS = 1), each in one
process by bench.measure (median of 10, errors against float64; torch timed beside each).
Then the direct kernel's program size (depthwise.GROUPED_ELEMENTS) in bfloat16, unless
``--no-sizes``.

    PYTHONPATH=. python benches/grouped_probe.py [--no-sizes] [CASE ...]
"""
import sys

import torch

from gemmconv import bench, cases, depthwise

sys.path.insert(0, "benches")
from overhead import patched  # noqa: E402


def cell(label: str, row) -> str:
    return f"{label} {row.ours_ms:.3f} ({row.speedup:.2f}x, err {row.ours_error:.1e})"


def main() -> int:
    device = torch.device("cuda")
    sizes = "--no-sizes" not in sys.argv
    names = [a for a in sys.argv[1:] if a != "--no-sizes"]
    print(torch.cuda.get_device_name(), flush=True)
    chosen = [c for c in cases.BENCH if c.groups > 1 and c.in_channels // c.groups > 1
              and (not names or c.name in names)]
    for dtype in (torch.float32, torch.bfloat16):
        ceiling = bench.ceilings(device, dtype)
        for case in chosen:
            for interleaved in (False, True):
                direct = bench.measure(case, dtype, device, False, ceiling, 10, interleaved)
                with patched(depthwise, "GROUPED_MAX_INPUTS", 1):
                    columns = bench.measure(case, dtype, device, False, ceiling, 10, interleaved)
                print(f"{case.name} {str(dtype)[6:]} {'CL' if interleaved else 'NCHW'} fwd | "
                      f"torch {direct.torch_ms:.3f} / {columns.torch_ms:.3f} | "
                      f"{cell('direct', direct)} | {cell('columns', columns)} | "
                      f"floor {direct.floor_ms:.3f}", flush=True)
    ceiling = bench.ceilings(device, torch.bfloat16)
    for case in chosen if sizes else []:
        for interleaved in (False, True):
            cells = []
            for elements in (2048, 4096, 8192):
                depthwise._plan.cache_clear()   # (its blocks depend on GROUPED_ELEMENTS)
                with patched(depthwise, "GROUPED_ELEMENTS", elements):
                    row = bench.measure(case, torch.bfloat16, device, False, ceiling, 10,
                                        interleaved)
                cells.append(f"{elements}: {row.ours_ms:.3f} ({row.speedup:.2f}x)")
            depthwise._plan.cache_clear()
            print(f"{case.name} bfloat16 {'CL' if interleaved else 'NCHW'} elements | "
                  + " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
