"""The fused forward kernel's tile for channels_last float32 inputs (the kernel rounds its
input tiles to TF32, since session 31 with cvt.rna). fused.config takes 64 positions a tile
where the output channels tile is 128 wide, for the rounding in registers beside the
accumulator; with one instruction an element for the rounding, other tiles may now win.
Each tile's kernel time (the weights reordered beforehand, the output channels_last) back
to back (do_bench) and, with --idle, also launched alone from an idle GPU as the bench's
timer does; its output's largest difference from the default tile's; and cuDNN's
channels_last forward.

    PYTHONPATH=. python benches/cl_tile_probe.py [CASES] [--idle] [--bf16-planar]

With --bf16-planar: bfloat16 planar tensors, the input copied channels innermost first and
the output written planar, as the training step's forward and input gradient run.
"""
import sys

import torch
import torch.nn.functional as F
import triton.testing

from gemmconv import cases, fused
from gemmconv.measure import timer
from gemmconv.shapes import Geometry

NAMES = ["2d-64to128", "2d-3x7-512", "2d-1024"]
# (positions, output channels, warps, stages)
TILES = [(64, 128, 4, 3), (64, 128, 4, 5), (64, 128, 8, 4), (128, 128, 8, 3), (128, 128, 8, 4),
         (128, 64, 4, 3), (128, 64, 4, 5), (128, 64, 8, 4), (64, 64, 4, 4), (256, 64, 8, 3),
         (128, 32, 4, 4)]
TILES_16 = [(128, 64, 4, 3), (128, 64, 4, 5), (128, 64, 4, 6), (128, 64, 8, 4), (256, 64, 8, 3),
            (256, 64, 8, 4), (64, 64, 4, 4), (64, 128, 4, 4), (128, 128, 8, 3), (128, 128, 8, 4)]


def bench(fn):
    return triton.testing.do_bench(fn, warmup=5, rep=40, return_mode="median")


def labelled_tiles(default: fused.Config, specs: list, batch: int, extent: tuple, c_out: int,
                   run: int = 1) -> dict:
    """``{"default": default}`` and a tile of each ``(positions, output channels, warps,
    stages)`` of ``specs`` no wider than ``c_out`` needs, its box fitted to ``extent`` with
    runs of ``run`` along W (fused._fitted_box), labelled "64x128 w4 s5"."""
    tiles = {"default": default}
    for bm, bn, warps, stages in specs:
        if bn <= max(16, fused._pow2(c_out)):
            tiles[f"{bm}x{bn} w{warps} s{stages}"] = fused.Config(
                fused._fitted_box(batch, tuple(extent), bm, run), default.bk, bn, warps, stages)
    return tiles


def time_tiles(run, out: torch.Tensor, tiles: dict, clocks: dict) -> list:
    """Each of ``tiles`` (label: config, the reference first) run by ``run(cfg)`` into
    ``out``, NaN-filled before, and timed by each of ``clocks`` (name: a timer of a call, in
    ms): ``[(label, {name: ms}, its output's largest difference from the reference's,
    relative)]``, or ``(label, None, why)`` for a tile the compiler refuses (registers,
    shared memory)."""
    rows, want = [], None
    for label, cfg in tiles.items():
        try:
            out.fill_(float("nan"))
            if want is None:
                run(cfg)
                want = out.clone()
            times = {name: clock(lambda: run(cfg)) for name, clock in clocks.items()}
            rows.append((label, times, ((out - want).abs().max() / want.abs().max()).item()))
        except Exception as e:
            rows.append((label, None, str(e).splitlines()[0][:80]))
    return rows


def main():
    idle, planar = "--idle" in sys.argv, "--bf16-planar" in sys.argv
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    dtype = torch.bfloat16 if planar else torch.float32
    names = args[0].split(",") if args else NAMES
    print(torch.cuda.get_device_name(), "triton", triton.__version__, flush=True)
    for case in (c for c in cases.BENCH if c.name in names):
        x, w, b = case.tensors(dtype, "cuda")
        if not planar:
            x = x.contiguous(memory_format=torch.channels_last)
        taps = fused.transposed_taps(Geometry(case.kernel_size, case.stride, case.padding,
                                              case.dilation))
        rows = fused.channels_innermost(x) if planar else x.movedim(1, -1)
        weights = fused.tap_weights(w)
        ref = F.conv_transpose2d(x, w, b, **case.kwargs)
        out = torch.empty_like(ref)
        t_cudnn = bench(lambda: F.conv_transpose2d(x, w, b, **case.kwargs))
        extent = fused._padded(ref.shape[2:], 1)
        size, run_w = x.element_size(), (128 // x.element_size() if planar else 1)
        default = fused.config(case.batch, extent, case.in_channels, case.out_channels, 1, size,
                               planar=planar)
        run = lambda cfg: fused.implicit_gemm(rows, weights, b, taps, out.movedim(1, -1), cfg=cfg)
        line = [f"cudnn {t_cudnn:.3f}"]
        clocks = {"": bench}
        if idle:
            clocks["idle"] = lambda fn: timer(torch.device("cuda"), fn, 10)
            line[0] += f" idle {clocks['idle'](lambda: F.conv_transpose2d(x, w, b, **case.kwargs)):.3f}"
        tiles = labelled_tiles(default, TILES_16 if planar else TILES, case.batch, extent,
                               case.out_channels, run_w)
        for label, times, diff in time_tiles(run, out, tiles, clocks):
            if times is None:
                line.append(f"{label} failed {diff}")
                continue
            if idle:
                label += f" idle {times['idle']:.3f}"
            line.append(f"{label} {times['']:.3f}{'' if diff < 1e-6 else f' DIFF {diff:.1e}'}")
        print(f"{case.name} {'planar bfloat16' if planar else 'channels_last float32'} ({default.box}, bn {default.bn}, "
              f"w{default.warps} s{default.stages}) | " + " | ".join(line), flush=True)


if __name__ == "__main__":
    sys.exit(main())
