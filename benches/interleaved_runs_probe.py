"""How many runs of channels a thread of the channels-innermost im2col and col2im should
take (_cuda.INTERLEAVED_RUNS caps it; col2im.cu's interleaved_lanes). Session 57's A: after
154 wrote the channels_last backward's grouped columns in an ungrouped layer's order, the
im2col of 3d-strided-grouped's output gradient took 0.702 ms against 0.415 planar. A warp's
threads cover consecutive taps of one grid position, and a thread's R runs lie C / R
channels apart, so one store instruction writes a tap's C / R channels at a stride of C:
with groups, a run j is a group's block, and consecutive taps' blocks are back to back.
(E and F then found that the kernel's stride, not those bytes, decides: _cuda.interleaved_runs.)

Per bench case (2-D and 3-D), column groups (1, and the layer's groups), and R in 1, 2, 4:
each kernel's time over the benchmark's tensors of the backward's im2col (the output
gradient's columns at the input's grid) and the forward's col2im, with the bytes it moves
and their rate next to the measured copy bandwidth.

    PYTHONPATH=. [DTYPE=bfloat16] python benches/interleaved_runs_probe.py [CASE ...]
"""
import os
import sys

import torch

from gemmconv import _cuda, cases
from gemmconv import columns as cols
from gemmconv.measure import timers
from gemmconv.shapes import Geometry

NAMES = sys.argv[1:] or ["3d-strided-grouped", "3d-stride2-grouped", "2d-strided-grouped",
                         "2d-1024", "2d-64to128", "2d-3x7-512", "3d-96cube", "3d-64cube"]
device = torch.device("cuda")
dtype = getattr(torch, os.environ.get("DTYPE", "float32"))
_cuda.STRIDED_IM2COL_BYTES = 0    # each R as asked (interleaved_runs may take two for im2col)


def timed(fn) -> float:
    fn()
    return timers(device, {0: fn}, 10)[0]


big = torch.empty(2**28, device=device)
copy_ms = timed(lambda: big.clone())
rate = 2 * big.numel() * 4 / copy_ms / 1e9    # TB/s, read + write
print(f"copy: {rate:.2f} TB/s (read + write); {dtype}", flush=True)
for name in NAMES:
    case = next(c for c in cases.BENCH if c.name == name)
    g = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
    image, grid, c = case.output_size, case.size, case.out_channels
    grad = torch.randn(case.batch, *image, c, device=device, dtype=dtype)
    for column_groups in sorted({1, case.groups}):
        columns = grad.new_empty(case.batch, *grid, column_groups, g.taps, c // column_groups)
        out = torch.empty_like(grad)
        moved = (columns.numel() + grad.numel()) * grad.element_size()
        for runs in (1, 2, 4):
            _cuda.INTERLEAVED_RUNS = runs
            _cuda._launches.clear()
            up = timed(lambda: cols.im2col_interleaved(grad, g, grid, column_groups, out=columns))
            down = timed(lambda: cols.col2im_interleaved(columns, None, g, image, out=out))
            print(f"{name:20s} column groups {column_groups} R {runs}: im2col {up:6.3f} ms "
                  f"({moved / up / 1e9:5.2f} TB/s), col2im {down:6.3f} ms "
                  f"({moved / down / 1e9:5.2f} TB/s); floor {moved / rate / 1e12 * 1e3:6.3f} ms",
                  flush=True)
