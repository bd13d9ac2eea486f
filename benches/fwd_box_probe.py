"""The fused forward kernel's box of positions: filling W first (fused._box, sessions 22-29)
against the box that pads the grids least (fused._fitted_box, session 30). Positions past a
grid's end cost the tensor cores as much as real ones: 2d-64to128's 260-wide output took 48%
more products in boxes of 128 along W, 2d-3x7-512's 518-wide one 24%, the 3-D cases' 66-98
wide ones 31-94%. Per case and operand layout, the kernel's time with each box (input already
channels innermost, weights reordered, the output written as the route writes it), whether
both give the same bits, and cuDNN's forward in both layouts for scale.

    PYTHONPATH=. python benches/fwd_box_probe.py [names,...]

Planar outputs also try the fitted box without the runs along W that fused.config asks
there (run A: 2d-64to128's planar output in boxes of 4 x 8 positions and 4 samples, runs of
32 bytes, took 13% longer than rows of 128).
"""
import math
import sys

import torch
import torch.nn.functional as F
import triton.testing

from gemmconv import cases, fused
from gemmconv.shapes import Geometry

NAMES = sys.argv[1].split(",") if len(sys.argv) > 1 else [
    "2d-1024", "2d-3x7-512", "2d-64to128", "2d-512x1024", "2d-3x7-padded", "3d-3x5x7",
    "3d-64cube", "3d-32to64", "3d-96cube"]


def bench(fn):
    return triton.testing.do_bench(fn, warmup=5, rep=40, return_mode="median")


def main():
    print(torch.cuda.get_device_name(), "triton", triton.__version__, flush=True)
    for case in (c for c in cases.BENCH if c.name in NAMES):
        conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[case.nd - 1]
        fmt = torch.channels_last if case.nd == 2 else torch.channels_last_3d
        geo = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
        taps = fused.transposed_taps(geo)
        # float32 planar: the input copied and rounded first; float32 and bfloat16
        # channels_last: the kernel reads the input as it lies (float32 rounded in registers).
        for dtype, planar in ((torch.float32, True), (torch.float32, False), (torch.bfloat16, False)):
            if case.nd == 3 and dtype == torch.float32:
                continue
            x, w, b = case.tensors(dtype, "cuda", distribution=torch.rand)
            if not planar:
                x = x.to(memory_format=fmt)
            ref = conv(x, w, b, **case.kwargs)
            t_cudnn = bench(lambda: conv(x, w, b, **case.kwargs))
            rows = fused.channels_innermost(x, True) if planar else x.movedim(1, -1)
            weights = fused.tap_weights(w)
            out = torch.empty_like(ref)
            extent = fused._padded(ref.shape[2:], 1)
            fp32 = dtype == torch.float32
            default = fused.config(case.batch, extent, case.in_channels, case.out_channels, 1,
                                   x.element_size(), rounds=fp32 and not planar, planar=planar)
            old = default._replace(box=fused._box(case.batch, extent, math.prod(default.box)))
            tiles = [("W first", old), ("fitted", default)]
            if planar:   # the planar output's runs along W, against any run
                tiles.append(("fitted, any run", default._replace(box=fused._fitted_box(
                    case.batch, extent, math.prod(default.box)))))
            cells, results = [], []
            for name, cfg in tiles:
                padded = math.prod(-(-s // b) * b for s, b in zip((case.batch, *extent), cfg.box))
                run = lambda: fused.implicit_gemm(rows, weights, b, taps, out.movedim(1, -1),
                                                  cfg=cfg, round_input=fp32 and not planar)
                out.fill_(float("nan"))
                t = bench(run)
                results.append(out.clone())
                cells.append(f"{name} {cfg.box} pads {padded / case.batch / math.prod(extent) - 1:.1%} "
                             f"{t:.3f} ms {case.flops / t / 1e9:.0f} TF/s")
            same = all(torch.equal(results[0], r) for r in results[1:])
            err = ((results[1].double() - ref.double()).abs().max() / ref.double().abs().max()).item()
            print(f"{case.name} {str(dtype)[6:]} {'planar' if planar else 'channels_last'} | "
                  f"cuDNN {t_cudnn:.3f} ms | " + " | ".join(cells)
                  + f" | same bits {same} | vs cuDNN {err:.1e}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
