"""The VAE decoder's 3x3 stride-1 convolutions (gemmconv/zoo.py, batch 16) by three routes,
each against torch's in the same run: gemmconv.conv2d as it runs by default (in session 76,
before the fused route took layers of fused.CONVOLUTION_MIN_COLUMNS: im2col and a GEMM,
graphed up to ops.GRAPHED_CONV_MAX_COLUMNS; benches/unet_conv_probe.py pins each route), fused.convolution launched (the backward's
input-gradient kernel with the bias, no columns in memory: ops._ConvFusedReplay's),
and fused.convolution captured in a CUDA graph (its kernels without the host's launches).
``PYTHONPATH=. python3 benches/conv_fused_probe.py [float32|bfloat16] [planar|channels_last]``
prints, per layer: its column elements (the measure of fused.CONVOLUTION_MIN_COLUMNS, the
route's floor, None until set from these rows), the milliseconds of each (median of
gemmconv.measure.timers' samples in turns), their speedups over torch, and each one's
error against float64 (norm of the difference over the reference's). Session 74 measured the column route, graphed, at
0.24-0.75x on the 64x64 and 128x128 layers: their columns' traffic, which this route has
not. Two larger layers of the same form follow (a U-Net's widths at 128x128 and 256x256),
past the graph's limit: the column route launched eagerly there."""
import sys

import torch
import torch.nn.functional as F

import gemmconv
from gemmconv import fused
from gemmconv.measure import timers
from gemmconv.shapes import conv_args
from vae_convolutions import LAYERS, tensors

DTYPE = getattr(torch, sys.argv[1] if len(sys.argv) > 1 else "float32")
LAYOUT = sys.argv[2] if len(sys.argv) > 2 else "planar"
device = torch.device("cuda")
print(f"{DTYPE} {LAYOUT}; ms a call (speedup over torch), error against float64")
for cin, cout, side in LAYERS + [(128, 128, 128), (64, 64, 256)]:
    x, w, b = tensors(cin, cout, side, DTYPE, LAYOUT)
    a = conv_args("conv2d", 2, x, w, b, 1, 1, 1, 1)
    why = fused.convolution_unavailable(a, x, w)
    out = torch.empty_like(F.conv2d(x, w, b, padding=1))
    calls = {"torch": lambda: F.conv2d(x, w, b, padding=1),
             "columns": lambda: gemmconv.conv2d(x, w, b, padding=1)}
    if why is None:
        calls["fused"] = lambda: fused.convolution(x, w, b, a, out)
        for _ in range(2):   # (compiles, plans)
            calls["fused"]()
        graph = torch.cuda.CUDAGraph()
        side_stream = torch.cuda.Stream()
        side_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side_stream):
            calls["fused"]()
        torch.cuda.current_stream().wait_stream(side_stream)
        with torch.cuda.graph(graph):
            calls["fused"]()
        calls["fused graphed"] = graph.replay
    ref = F.conv2d(x.double(), w.double(), b.double(), padding=1)
    errors = {}
    for name, call in calls.items():
        got = call()
        got = out if got is None else got
        errors[name] = ((got.double() - ref).norm() / ref.norm()).item()
    times = timers(device, calls, 20)
    row = "  ".join(f"{name} {ms:.3f} ({times['torch'] / ms:.2f}x, {errors[name]:.1e})"
                    for name, ms in times.items())
    columns = a.batch * side * side * cin * 9   # (fused.CONVOLUTION_MIN_COLUMNS's measure)
    print(f"conv {cin:3d}->{cout:3d} {side:3d}x{side:<3d} {columns / 2**20:6.1f}M columns  {row}" +
          ("" if why is None else f"  [fused: {why}]"))
