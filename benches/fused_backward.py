"""H200 probe of a fused backward for stride-1 planar calls (session 23): the weight gradient
with no columns in memory (fused.weight_gradient, a few tiles, float32 tiles rounded to TF32
in registers or not) and the input gradient through the forward's kernel (a copy of the
output gradient channels innermost, then the convolution's taps), against cuDNN's and our
current backward, with errors against float64.

    PYTHONPATH=. python benches/fused_backward.py
"""
import math
import sys

import torch
import torch.nn.functional as F
import triton.testing

import gemmconv
from gemmconv import fused
from gemmconv.shapes import Geometry

CASES = [("2d-1024", 8, 64, 64, (3, 3), (1024, 1024), 0, 1), ("2d-3x7-512", 8, 64, 64, (3, 7), (512, 512), 0, 1),
         ("2d-64to128", 64, 64, 128, (3, 5), (128, 256), 0, 1), ("2d-512x1024", 8, 32, 32, (3, 3), (512, 1024), 0, 1),
         ("2d-3x7-padded", 8, 32, 32, (3, 7), (512, 1024), (1, 3), 1), ("1d-65536", 64, 128, 128, (3,), (65536,), 0, 1),
         ("1d-dil3", 32, 32, 64, (5,), (131072,), 0, 3)]
TILES = [(64, 64, 4, 3), (64, 64, 4, 4), (128, 64, 8, 3), (64, 128, 8, 3), (128, 128, 8, 3), (32, 64, 4, 4)]


def bench(fn):
    return triton.testing.do_bench(fn, warmup=5, rep=40, return_mode="median")


def err(a, ref):
    return ((a.double() - ref).abs().max() / ref.abs().max()).item()


def main():
    print(torch.cuda.get_device_name(), flush=True)
    for name, n, cin, cout, k, grid, p, d in CASES:
        for dtype in (torch.float32, torch.bfloat16):
            try:
                probe(name, n, cin, cout, k, grid, p, d, dtype)
            except Exception as e:
                print(f"{name} {dtype} failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)


def probe(name, n, cin, cout, k, grid, p, d, dtype):
    nd = len(k)
    p, d = (p if isinstance(p, tuple) else (p,) * nd), (d,) * nd
    conv = F.conv_transpose1d if nd == 1 else F.conv_transpose2d
    ours = gemmconv.conv_transpose1d if nd == 1 else gemmconv.conv_transpose2d
    geo = Geometry(k, (1,) * nd, p, d)
    x = torch.randn(n, cin, *grid, device="cuda", dtype=dtype, requires_grad=True)
    w = (torch.randn(cin, cout, *k, device="cuda", dtype=dtype) / (cin * math.prod(k)) ** .5).requires_grad_()
    y = conv(x, w, None, 1, p, 0, 1, d)
    gy = torch.randn_like(y)
    ref_gx, ref_gw = torch.autograd.grad(conv(x[:2].double(), w.double(), None, 1, p, 0, 1, d), (x, w), gy[:2].double())
    gw_torch = torch.autograd.grad(conv(x[:2], w, None, 1, p, 0, 1, d), w, gy[:2])[0]
    t_torch_w = bench(lambda: torch.autograd.grad(y, w, gy, retain_graph=True))
    t_torch_x = bench(lambda: torch.autograd.grad(y, x, gy, retain_graph=True))
    t_torch_both = bench(lambda: torch.autograd.grad(y, (x, w), gy, retain_graph=True))
    y_ours = ours(x, w, None, 1, p, 0, 1, d)
    t_ours_both = bench(lambda: torch.autograd.grad(y_ours, (x, w), gy, retain_graph=True))
    flops = 2 * n * cin * cout * math.prod(k) * math.prod(grid)
    print(f"{name} {str(dtype)[6:]} | cudnn grad_w {t_torch_w:.3f} grad_x {t_torch_x:.3f} both {t_torch_both:.3f} "
          f"| ours now both {t_ours_both:.3f} | err cudnn grad_w {err(gw_torch, ref_gw):.1e} | {flops / 1e12:.2f} TFLOP each",
          flush=True)
    xs, gys = x.detach(), gy
    box = fused.grad_config(fused._padded(grid, 1), cin, cout, x.element_size()).box
    best = None
    for bm, bn, warps, stages in TILES:
        cfg = fused.GradConfig(box, bm, bn, warps, stages)
        for rnd in ((True, False) if dtype == torch.float32 else (True,)):
            try:
                run = lambda: fused.weight_gradient(xs, gys, geo, cfg=cfg, round_input=rnd)
                e = err(fused.weight_gradient(xs[:2], gys[:2], geo, cfg=cfg, round_input=rnd), ref_gw)
                t = bench(run)
            except Exception as ex:
                print(f"   grad_w {cfg} failed: {str(ex).splitlines()[0][:150]}", flush=True)
                continue
            best = min(best or (t, cfg), (t, cfg))
            print(f"   grad_w bm {bm:3d} bn {bn:3d} w{warps} s{stages} {'round' if rnd else 'trunc'} {t:7.3f} ms "
                  f"{flops / t / 1e9:6.1f} TF/s {t_torch_w / t:5.2f}x cudnn err {e:.1e}", flush=True)
    wt = fused.tap_weights(w.detach(), transpose=True)
    taps = fused.convolution_taps(geo)
    gx = torch.empty_like(xs)

    def grad_x():
        rows = fused.channels_innermost(gys, dtype == torch.float32)
        fused.implicit_gemm(rows, wt, None, taps, gx.movedim(1, -1), round_input=False)
    grad_x()
    e = err(gx[:2], ref_gx)
    t = bench(grad_x)
    print(f"   grad_x fused (copy + kernel) {t:.3f} ms {t_torch_x / t:5.2f}x cudnn err {e:.1e}", flush=True)
    if best:
        both = best[0] + t
        print(f"   fused both {both:.3f} ms: {t_torch_both / both:5.2f}x cudnn, {t_ours_both / both:5.2f}x ours now", flush=True)


if __name__ == "__main__":
    sys.exit(main())
