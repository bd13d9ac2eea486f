"""The fused forward kernel's tile for float32 inputs already rounded to TF32 (a planar
input's copy, fused.channels_innermost; the input gradient's output-gradient copy), on the
17 cases that take it planar. fused.config kept 64 positions a tile where the output
channels tile is 128 wide, for the rounding in registers that such inputs do not need; it
now takes 128 there (the default below), against the other tiles, 64 x 128 among them.
Each tile's kernel time (the input copied and the weights reordered beforehand, the output
written planar as the route writes it), its output's largest difference from the default
tile's, and cuDNN's NCHW forward for scale.

    PYTHONPATH=. python benches/fwd_tile_probe.py
"""
import math
import sys

import torch
import torch.nn.functional as F
import triton.testing

from gemmconv import cases, fused
from gemmconv.shapes import Geometry

sys.path.insert(0, "benches")
from cl_tile_probe import bench, time_tiles  # noqa: E402

NAMES = ["2d-64to128", "1d-65536", "2d-3x7-512", "2d-1024"]
TILES = [(64, 128, 4, 4), (128, 128, 4, 3), (128, 128, 8, 3), (128, 64, 4, 4), (128, 64, 8, 4),
         (256, 64, 8, 3)]


def main():
    print(torch.cuda.get_device_name(), "triton", triton.__version__, flush=True)
    for case in (c for c in cases.BENCH if c.name in NAMES):
        conv = F.conv_transpose1d if case.nd == 1 else F.conv_transpose2d
        x, w, b = case.tensors(torch.float32, "cuda")
        geo = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
        taps = fused.transposed_taps(geo)
        rows, weights = fused.channels_innermost(x, True), fused.tap_weights(w)
        ref = conv(x, w, b, **case.kwargs)
        out = torch.empty_like(ref)
        flops = 2 * case.batch * case.in_channels * case.out_channels * math.prod(case.kernel_size) \
            * math.prod(case.size)
        t_cudnn = bench(lambda: conv(x, w, b, **case.kwargs))
        default = fused.config(case.batch, fused._padded(ref.shape[2:], 1), case.in_channels,
                               case.out_channels, 1, 4, rounds=False)
        run = lambda cfg: fused.implicit_gemm(rows, weights, b, taps, out.movedim(1, -1),
                                              cfg=cfg, round_input=False)
        tiles = {"default": default}
        for bm, bn, warps, stages in TILES:
            if bn <= max(16, fused._pow2(case.out_channels)):
                tiles[f"{bm}x{bn}/{warps}w{stages}s"] = fused.Config(
                    fused._box(case.batch, fused._padded(ref.shape[2:], 1), bm), default.bk, bn,
                    warps, stages)
        line = []
        for name, times, diff in time_tiles(run, out, tiles, {"": bench}):
            if times is None:
                line.append(f"{name} failed: {diff}")
            else:
                t = times[""]
                line.append(f"{name} {t:.3f} ms {flops / t / 1e9:.0f} TF/s diff {diff:.0e}")
        print(f"{case.name} | cudnn NCHW {t_cudnn:.3f} ms | default {default.box} bn {default.bn} "
              f"| " + " | ".join(line), flush=True)


if __name__ == "__main__":
    sys.exit(main())
