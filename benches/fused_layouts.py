"""H200 probe of the fused kernel's tile orientation (session 23): positions x channels (the
session-22 kernel) against channels x positions (``Config.transposed``), each storing into
channels-innermost and planar outputs, float32 with the input's tiles rounded in registers
or rounded beforehand; next to cuDNN NCHW and channels_last, and the NCHW -> NHWC copy a
planar input would need.

    PYTHONPATH=. python benches/fused_layouts.py
"""
import math
import sys

import torch
import torch.nn.functional as F
import triton.testing

from gemmconv import fused
from gemmconv.shapes import Geometry

sys.path.insert(0, "benches")
from fused_probe import LAYERS, weights_of  # noqa: E402

PICK = ["2d-1024", "2d-3x7-512", "2d-64to128", "2d-512x1024", "2d-3x7-padded", "1d-65536",
        "1d-dil3", "dcgan-3", "dcgan-4", "vae-5", "unet-4", "hifigan-3"]
# bm, bn, warps, stages of the transposed tile
TILES = [(128, 64, 4, 4), (256, 64, 4, 3), (256, 64, 8, 3), (128, 128, 8, 4), (256, 128, 8, 3),
         (128, 32, 4, 4)]


def bench(fn):
    return triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")


def main():
    dev = torch.device("cuda")
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    for name, n, cin, cout, k, grid, s, p, op, d in LAYERS:
        if name not in PICK:
            continue
        for dtype in (torch.float32, torch.bfloat16):
            try:
                probe(name, n, cin, cout, k, grid, s, p, op, d, dtype, dev)
            except Exception as e:
                print(f"{name} {dtype} failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)


def probe(name, n, cin, cout, k, grid, s, p, op, d, dtype, dev):
    nd = len(k)
    expand = lambda v: v if isinstance(v, tuple) else (v,) * nd
    s, p, op, d = map(expand, (s, p, op, d))
    conv = F.conv_transpose1d if nd == 1 else F.conv_transpose2d
    taps = fused.transposed_taps(Geometry(k, s, p, d))
    x = torch.randn(n, cin, *grid, device=dev, dtype=dtype)
    w = torch.randn(cin, cout, *k, device=dev, dtype=dtype) / (cin * len(taps.index[0])) ** .5
    b = torch.randn(cout, device=dev, dtype=dtype)
    x_cl = x.contiguous(memory_format=torch.channels_last) if nd == 2 else x
    ref = conv(x[:1].double(), w.double(), b.double(), s, p, op, 1, d)
    image = ref.shape[2:]
    scale = ref.abs().max().item()
    fp32 = dtype == torch.float32
    wt = weights_of(fused.round_tf32(w) if fp32 else w)
    rows = x.movedim(1, -1).contiguous()
    rows_rounded = fused.round_tf32(rows) if fp32 else rows
    t_nchw = bench(lambda: conv(x, w, b, s, p, op, 1, d))
    t_cl = bench(lambda: conv(x_cl, w, b, s, p, op, 1, d))
    t_copy = bench(lambda: x.movedim(1, -1).contiguous())
    flops = 2 * n * cin * cout * math.prod(k) * math.prod(grid)
    print(f"{name} {str(dtype)[6:]} | cudnn NCHW {t_nchw:.3f} CL {t_cl:.3f} | NCHW->NHWC copy {t_copy:.3f} "
          f"| {flops / 1e12:.2f} TFLOP", flush=True)
    extent = [-(-i // st) for i, st in zip(fused._padded(image, 1), fused._padded(s, 1))]
    default = fused.config(n, extent, cin, cout, len(taps.count), x.element_size())
    bk = default.bk
    cfgs = [default] + [fused.Config(fused._box(n, extent, bm), bk, bn, wp, st, True)
                        for bm, bn, wp, st in TILES if bn <= max(32, fused._pow2(cout))]
    cl_out = torch.empty(n, *image, cout, device=dev, dtype=dtype)
    planar = torch.empty(n, cout, *image, device=dev, dtype=dtype)
    for out, layout in ((cl_out, "CL out"), (planar.movedim(1, -1), "planar out")):
        for cfg in cfgs:
            for pre in ((False, True) if fp32 else (False,)):
                src = rows_rounded if pre else rows
                run = lambda: fused.implicit_gemm(src, wt, b, taps, out, cfg=cfg, round_input=not pre)
                try:
                    out.fill_(float("nan"))
                    run()
                    got = out[:1].movedim(-1, 1).double()
                    err = (got - ref).abs().max().item() / scale
                    t = bench(run)
                except Exception as e:
                    print(f"   {layout} {cfg} failed: {str(e).splitlines()[0][:150]}", flush=True)
                    continue
                tag = "T" if cfg.transposed else "P"
                print(f"   {layout:10s} {tag} bm {math.prod(cfg.box):3d} bn {cfg.bn:3d} w{cfg.warps} s{cfg.stages}"
                      f" {'pre-rounded' if pre else 'in-kernel  '} {t:7.3f} ms {flops / t / 1e9:6.1f} TF/s"
                      f" | {t_cl / t:5.2f}x CL {t_nchw / t:5.2f}x NCHW (+copy {t_nchw / (t + t_copy):5.2f}x)"
                      f" err {err:.1e}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
