"""Should the forward read planar 16-bit inputs as they lie? (fused.PLANAR_INPUT)
Written in session 66. A planar input reaches the fused kernel through a copy channels
innermost (fused.channels_innermost), about a fifth of bfloat16 2d-1024's planar forward
(2.75 ms against 1.55 channels_last, H100, results/s65/G). With PLANAR_INPUT the kernel
reads the planar input itself, its boxes one run along W (fused.reads_planar), whose
transpose reaches the tensor cores from shared memory (benches/ttgir_check.py). Those boxes
pad some grids more than the copy's tiles (2d-64to128's 260 columns take three runs of
128), and their starts along W are not whole 16-byte units (the taps' shifts), which the
copy engine has not been asked for before: the errors against float64 say whether it
takes them.

Per case (the 1-D and 2-D cases of the table of one group by default), planar, in
bfloat16: the forward, then the training step, of torch and of ours in turns
(measure.speedups), with the copy and with the input read as it lies, each with its error
against float64 and "(read planar)" where fused.reads_planar took the call; and the grid's
positions the run boxes pad, against the copy's tile.

    PYTHONPATH=. python benches/planar_input_probe.py [CASE ...]
    (SMOKE=1: on the CPU, the cases scaled down, to check the script itself.)
"""
import math
import os
import sys

import torch

from gemmconv import cases, fused
from gemmconv.shapes import Geometry

sys.path.insert(0, "benches")
from step_variants import step_row  # noqa: E402

NAMES = sys.argv[1:] or [c.name for c in cases.BENCH if c.groups == 1 and c.nd < 3]
smoke = os.environ.get("SMOKE") == "1"
device = torch.device("cpu" if smoke else "cuda")


def padding(case, planar_input: bool) -> float:
    """The positions a forward's boxes cover over the phase grids', less one."""
    taps = fused.transposed_taps(Geometry(case.kernel_size, case.stride, case.padding, case.dilation))
    extent = fused._extent(fused._padded(case.output_size, 1), taps)
    cfg = fused.launch_config(case.batch, extent, case.in_channels, case.out_channels, taps, 2,
                              False, True, planar_input)
    if cfg.rows > 1:   # (the rows kernel's boxes are one row high, its programs ROWS rows)
        extent = (extent[0], cfg.rows * -(-extent[1] // cfg.rows), extent[2])
    sizes = (case.batch, *extent)
    covered = math.prod(-(-s // b) * b for s, b in zip(sizes, cfg.box))
    return covered / math.prod(sizes) - 1


takes = lambda a, x, w, interleaved: fused.reads_planar(a, x)   # noqa: E731
for name in NAMES:
    case = next(c for c in cases.BENCH if c.name == name)
    case = case.scaled(512) if smoke else case
    print(f"{case.name}: boxes pad the grid by {padding(case, False):.1%} (copy) and "
          f"{padding(case, True):.1%} (read planar)", flush=True)
    for backward in (False, True):
        print(("  training " if backward else "  forward  ")
              + step_row(case, torch.bfloat16, device, False, fused, "PLANAR_INPUT",
                         (("copy", False), ("read planar", True)), takes, "read planar",
                         smoke, backward), flush=True)
