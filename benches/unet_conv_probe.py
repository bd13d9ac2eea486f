"""The 2-D U-Net's convolutions (gemmconv/zoo.py's unet2d, batch 8: padded 3x3 layers
without bias, and the 1x1 head with one) by the column route and by the fused one, each
against torch's in the same run. The zoo's per-layer reports (session 77, S; H100) read
them on the fused route, which takes every 2-D convolution of at least
fused.CONVOLUTION_MIN_COLUMNS (2^23) column elements, at 0.35-1.77x of torch's forward
and 0.26-1.01x of its training step (float32 both layouts, bfloat16 NCHW): the deep layers
(512-1024 channels on 16x16-32x32) and the planar 1x1 head, whose columns are its input,
lost most. This probe times both routes side by side, and the cost model's choice
("default"): session 78 drew fused.CONVOLUTION_MAX_OUT_CHANNELS and the pointwise rule of
fused.convolution_takes from its rows (results/s78/D).
``PYTHONPATH=. python3 benches/unet_conv_probe.py [float32|bfloat16] [planar|channels_last]``
prints, per layer: its column elements, then for the forward and for the training step
(forward and the three gradients) the milliseconds by torch, by the column route
(CONVOLUTION_MIN_COLUMNS None), by the fused one (floor 0, no ceiling on the output
channels: where fused.convolution_takes still refuses the call, the column route again,
and the reason is printed) and by the cost model's defaults, each the median of
gemmconv.measure.timers' samples in turns, with its speedup over torch; and each route's
forward error against float64."""
import sys
import unittest.mock

import torch
import torch.nn.functional as F

import gemmconv
from gemmconv import fused, ops
from gemmconv.measure import timers
from gemmconv.shapes import conv_args
from vae_convolutions import gradient, tensors

DTYPE = getattr(torch, sys.argv[1] if len(sys.argv) > 1 else "float32")
LAYOUT = sys.argv[2] if len(sys.argv) > 2 else "planar"
BATCH = 8
LAYERS = [(3, 64, 256, 3), (64, 64, 256, 3), (64, 128, 128, 3), (128, 128, 128, 3),
          (128, 256, 64, 3), (256, 256, 64, 3), (256, 512, 32, 3), (512, 512, 32, 3),
          (512, 1024, 16, 3), (1024, 1024, 16, 3), (1024, 512, 32, 3), (512, 256, 64, 3),
          (256, 128, 128, 3), (128, 64, 256, 3), (64, 2, 256, 1)]   # (C_in, C_out, side, k)
# fused.CONVOLUTION_MIN_COLUMNS and CONVOLUTION_MAX_OUT_CHANNELS by route
ROUTES = {"columns": (None, 0), "fused": (0, 1 << 62),
          "default": (fused.CONVOLUTION_MIN_COLUMNS, fused.CONVOLUTION_MAX_OUT_CHANNELS)}


def routed(bounds, call):
    """``call`` with the fused route's floor and ceiling at ``bounds``, its forward replays
    kept apart (a call's replay is planned once, by the bounds of its first call)."""
    replays = {}
    floor, ceiling = bounds

    def patched():
        with unittest.mock.patch.object(fused, "CONVOLUTION_MIN_COLUMNS", floor), \
                unittest.mock.patch.object(fused, "CONVOLUTION_MAX_OUT_CHANNELS", ceiling), \
                unittest.mock.patch.object(ops, "_conv_replays", replays):
            return call()
    return patched


device = torch.device("cuda")
print(f"{DTYPE} {LAYOUT}, batch {BATCH}; ms (speedup over torch)")
for cin, cout, side, k in LAYERS:
    x, w, b = tensors(cin, cout, side, DTYPE, LAYOUT, BATCH, k)
    b = b if k == 1 else None
    pad = k // 2
    grad = gradient(cout, side, DTYPE, LAYOUT, BATCH)
    leaves = [t.requires_grad_() for t in (x, w, b) if t is not None]
    a = conv_args("conv2d", 2, x, w, b, 1, pad, 1, 1)
    takes = routed(ROUTES["fused"], lambda: fused.convolution_takes(a, x, w))()
    why = None if takes else \
        fused.convolution_unavailable(a, x, w) or "the cost model keeps it off the kernel"

    def forward(conv):
        def call():
            with torch.no_grad():
                return conv(x, w, b, padding=pad)
        return call

    def step(conv):
        return lambda: torch.autograd.grad(conv(x, w, b, padding=pad), leaves, grad)
    ref = F.conv2d(x.double(), w.double(), None if b is None else b.double(), padding=pad)
    cells = []
    for mode, make in (("forward", forward), ("step", step)):
        calls = {"torch": make(F.conv2d)}
        calls.update({name: routed(bounds, make(gemmconv.conv2d))
                      for name, bounds in ROUTES.items()})
        if mode == "forward":
            errors = [((calls[name]().double() - ref).norm() / ref.norm()).item()
                      for name in ROUTES]
        times = timers(device, calls, 10)
        cells.append(f"{mode} " + " ".join(
            f"{name} {ms:.3f} ({times['torch'] / ms:.2f}x)" for name, ms in times.items()))
    columns = BATCH * side * side * cin * k * k   # (fused.CONVOLUTION_MIN_COLUMNS's measure)
    print(f"conv {cin:4d}->{cout:4d} k{k} {side:3d}x{side:<3d} {columns / 2**20:6.1f}M  " +
          "  ".join(cells) + "  errors " + " ".join(f"{e:.1e}" for e in errors) +
          ("" if why is None else f"  [fused: {why}]"))
