"""The 16-bit fused backward with W's taps folded into the output gradient's channels
(fused.folded_rows), against the column routes it replaces, on the 3-D stride-1 cases of
few output channels: 3d-3x5x7 (16 channels, 7 taps along W) and 3d-96cube (24, 3 taps).
Their bfloat16 training step, torch against gemmconv with the fold (the library's choice)
and without it (folded_taps 1: these calls' backward then stays on the column routes).

    PYTHONPATH=. python benches/fold_probe.py
"""
import sys

import torch

from gemmconv import bench, cases, fused

sys.path.insert(0, "benches")
from overhead import patched  # noqa: E402

NAMES = ("3d-3x5x7", "3d-96cube")


def main() -> int:
    device = torch.device("cuda")
    print(torch.cuda.get_device_name(), flush=True)
    ceiling = bench.ceilings(device, torch.bfloat16)
    original = fused.folded_taps
    for case in (c for c in cases.BENCH if c.name in NAMES):
        cells = []
        for name, folding in (("folded", original), ("columns", lambda *args: 1),
                              ("folded again", original)):
            with patched(fused, "folded_taps", folding):
                row = bench.measure(case, torch.bfloat16, device, True, ceiling, 10)
            cells.append(f"{name} {row.ours_ms:.3f} ({row.speedup:.2f}x, err {row.ours_error:.1e})")
        print(f"{case.name} bfloat16 train | torch {row.torch_ms:.3f} (err {row.torch_error:.1e}) | "
              + " | ".join(cells) + f" | floor {row.floor_ms:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
