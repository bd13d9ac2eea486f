"""The fused forward kernel of two or three output rows a program (``fused.Config(rows=)``,
``_triton.implicit_gemm_rows``) against the one-row kernel and cuDNN, on the stride-1 2-D
cases, channels_last: each box of the input loaded once for every row's taps, where the
one-row kernel loads a box a product (session 39 put its bound on that copy into shared
memory). Each tile's kernel time back to back (do_bench, the weights reordered beforehand),
its rate, and its output's largest difference from the one-row kernel's.

    PYTHONPATH=. python benches/two_rows_probe.py [CASES] [--dtype bfloat16] [--planar] [--three]
        [--sweep CHANNELS] [--run BYTES]

With --planar: the input copied channels innermost beforehand and the output written planar,
as the NCHW forward and the training step's input gradient run.
"""
import argparse
import math
import sys

import torch
import torch.nn.functional as F

from gemmconv import cases, fused
from gemmconv.shapes import Geometry

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cl_tile_probe import bench, time_tiles  # noqa: E402

NAMES = ["2d-1024", "2d-3x7-512", "2d-64to128", "2d-512x1024", "2d-3x7-padded"]
# (positions, warps, stages) of the two-row kernel
TILES = [(128, 4, 2), (128, 4, 3), (128, 8, 2), (128, 8, 3), (64, 4, 3), (64, 4, 4),
         (256, 8, 2)]
# (positions, warps, stages) of the two-row kernel at 64 output channels a program, where the
# cases' own tile takes 128 (2d-64to128): cuDNN's float32 kernel there runs a 256 x 64 tile
# at 310 TFLOP/s where ours at 128 x 128 reaches 210 (session 41, A).
NARROW = [(128, 4, 3), (128, 8, 2), (128, 8, 3), (256, 8, 2)]
# (positions, warps, stages, output channels at most) of the kernel of three rows a program:
# five boxes for nine products where two rows load four for six.
THREE = [(128, 8, 2, 64), (128, 4, 2, 64), (128, 8, 2, 128), (64, 4, 2, 64), (64, 4, 3, 64)]
# --sweep 32: 32 channels in and out, the taps along W and the grid varied, with and without
# "same" padding: where session 42 timed float32 planar 2d-3x7-padded's three rows at 1.149
# ms on 64 positions and 4 warps against 1.542 on the chosen 128 and 8, and 2d-512x1024's
# at 0.661 against 0.601 (s42/D).
# --sweep 64: the same shapes at 64 channels (two rows; the tiles of TILES).
def sweep(channels: int) -> list:
    return [cases._c(f"{channels}ch-{n}x{h}x{w}-k3x{k}{'-same' if same else ''}", n, channels,
                     channels, (3, k), (h, w), padding=(1, k // 2) if same else (0, 0))
            for n, h, w in ((8, 512, 1024), (16, 256, 512)) for k in (3, 5, 7)
            for same in (False, True)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="?", default=",".join(NAMES))
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--planar", action="store_true")
    parser.add_argument("--three", action="store_true",
                        help="only the cost model's row tile and three rows' tiles")
    parser.add_argument("--run", type=int, metavar="BYTES",
                        help="only the cost model's tile, against its positions in the box "
                             "that pads the grid least with runs of BYTES along W")
    parser.add_argument("--sweep", type=int, metavar="CHANNELS",
                        help="the sweep's shapes (3 to 7 taps along W) at CHANNELS in and out; "
                             "32 or fewer as --three")
    opts = parser.parse_args()
    dtype, planar, names = getattr(torch, opts.dtype), opts.planar, opts.cases.split(",")
    opts.three |= bool(opts.sweep) and opts.sweep <= 32
    print(torch.cuda.get_device_name(), dtype, "planar" if planar else "channels_last", flush=True)
    for case in sweep(opts.sweep) if opts.sweep else (c for c in cases.BENCH if c.name in names):
        x, w, b = case.tensors(dtype, "cuda")
        if not planar:
            x = x.contiguous(memory_format=torch.channels_last)
        g = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
        taps = fused.transposed_taps(g)
        rows = fused.channels_innermost(x, dtype == torch.float32) if planar else x.movedim(1, -1)
        weights = fused.tap_weights(w)
        ref = F.conv_transpose2d(x, w, b, **case.kwargs)
        out = torch.empty_like(ref)
        t_cudnn = bench(lambda: F.conv_transpose2d(x, w, b, **case.kwargs))
        extent = fused._padded(ref.shape[2:], 1)
        size = x.element_size()
        run_w = 128 // size if planar else 1
        default = fused.config(case.batch, extent, case.in_channels, case.out_channels, 1, size,
                               rounds=not planar, planar=planar)
        chosen = fused.launch_config(case.batch, extent, case.in_channels, case.out_channels,
                                     taps, size, not planar, planar)   # the cost model's
        tiles = {"one row": default}
        flat = (extent[0], 1, extent[2])
        if opts.run:   # the row tile the cost model picks, against one of shorter runs
            box = fused._fitted_box(case.batch, flat, math.prod(chosen.box), opts.run // size)
            tiles = {f"chosen {chosen.box} rows{chosen.rows}": chosen,
                     f"runs of {opts.run} bytes {box}": chosen._replace(box=box)}
        elif opts.three:   # the row tile the cost model picks, against three rows' tiles
            tiles[f"chosen rows{chosen.rows} n{chosen.bn} w{chosen.warps}"] = chosen
        shapes = [] if opts.run else (
            ([] if opts.three else [(2, *t, default.bn) for t in TILES] +
             [(2, *t, 64) for t in NARROW if default.bn > 64]) +
            [(3, *t, min(bn, default.bn)) for *t, bn in THREE])
        for count, bm, warps, stages, bn in dict.fromkeys(shapes):
            tiles[f"rows{count} {bm} n{bn} w{warps} s{stages}"] = fused.Config(
                fused._fitted_box(case.batch, flat, bm, run_w), default.bk, bn, warps,
                stages, rows=count)
        run = lambda cfg: fused.implicit_gemm(rows, weights, b, taps, out.movedim(1, -1),
                                              cfg=cfg, round_input=not planar)
        flop = 2 * ref.numel() * case.in_channels * math.prod(case.kernel_size)
        line = [f"cudnn {t_cudnn:.3f}"]
        for label, times, diff in time_tiles(run, out, tiles, {"": bench}):
            if times is None:
                line.append(f"{label} failed {diff}")
                continue
            ms = times[""]
            line.append(f"{label} {ms:.3f} ({flop / ms / 1e9:.0f} TF/s)"
                        f"{'' if diff < 1e-6 else f' DIFF {diff:.1e}'}")
        print(f"{case.name} ({default.box}, bn {default.bn}, bk {default.bk}) | "
              + " | ".join(line), flush=True)


if __name__ == "__main__":
    sys.exit(main())
