"""Would the fused kernels win the 3-D stride-1 cases in 16-bit types? The cost model keeps
3-D calls off the fused route (fused.preferred): in float32 their forward ran faster on the
column routes (session 22: 16-48 output channels idle most of a 64-wide tile). The bfloat16
training step of 3d-3x5x7 and 3d-32to64 is where the 17 cases lose to cuDNN (0.92-0.93x on
the H200, session 29). Per case, in one process: torch against the column routes, the
fused forward and backward, and the fused backward behind the column routes' forward.

    PYTHONPATH=. python benches/fused3d_probe.py
"""
import sys

import torch

from gemmconv import bench, cases, fused

sys.path.insert(0, "benches")
from overhead import patched  # noqa: E402

CASES = [c for c in cases.BENCH if c.nd == 3 and set(c.stride) == {1} and c.groups == 1]
ORIGINAL = fused.preferred


def three_d_too(a, interleaved):
    return ORIGINAL(a, interleaved) or (a.geometry.nd == 3 and set(a.geometry.stride) == {1})


def forward_as_before(a, x, weight, interleaved=False):
    return ORIGINAL(a, interleaved) and fused.unavailable(a, x, weight, interleaved) is None


def main() -> int:
    device = torch.device("cuda")
    print(torch.cuda.get_device_name(), flush=True)
    for dtype in (torch.bfloat16, torch.float32):
        ceiling = bench.ceilings(device, dtype)
        for backward in (False, True):
            if dtype == torch.float32 and not backward:
                continue
            for case in CASES:
                row = bench.measure(case, dtype, device, backward, ceiling, 10)
                cells = [f"torch {row.torch_ms:.3f}", f"columns {row.ours_ms:.3f} ({row.speedup:.2f}x)"]
                with patched(fused, "preferred", three_d_too):
                    both = bench.measure(case, dtype, device, backward, ceiling, 10)
                    cells.append(f"fused {both.ours_ms:.3f} ({both.speedup:.2f}x, err {both.ours_error:.1e})")
                    if backward:
                        with patched(fused, "takes", forward_as_before):
                            back = bench.measure(case, dtype, device, backward, ceiling, 10)
                        cells.append(f"fused backward only {back.ours_ms:.3f} ({back.speedup:.2f}x)")
                print(f"{case.name} {str(dtype)[6:]} {'train' if backward else 'fwd'} | "
                      + " | ".join(cells) + f" | floor {row.floor_ms:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
