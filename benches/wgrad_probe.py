"""H200 probe of the fused backward's parts (session 23, fused.backward): where the time of
the weight gradient kernel goes, per tile, with or without wgmma in its PTX, next to cuDNN's
weight and input gradients; the input gradient through the forward's kernel; the copies.

    PYTHONPATH=. python benches/wgrad_probe.py
"""
import math
import sys

import torch
import torch.nn.functional as F
import triton.testing

from gemmconv import _triton, fused
from gemmconv.shapes import Geometry

CASES = [("2d-1024", 8, 64, 64, (3, 3), (1024, 1024)), ("2d-64to128", 64, 64, 128, (3, 5), (128, 256)),
         ("2d-512x1024", 8, 32, 32, (3, 3), (512, 1024)), ("1d-65536", 64, 128, 128, (3,), (65536,))]
TILES = [(64, 64, 4, 4), (64, 64, 4, 3), (128, 64, 8, 3), (64, 128, 4, 3), (128, 128, 8, 3), (64, 32, 4, 4)]


def bench(fn):
    return triton.testing.do_bench(fn, warmup=5, rep=40, return_mode="median")


def wgmma():
    found = []
    for cache in _triton.weight_gradient.device_caches.values():
        for kernel in cache[0].values():
            ptx = kernel.asm.get("ptx", "")
            found.append("wgmma" if "wgmma" in ptx else ("mma.sync" if "mma.sync" in ptx else "no mma"))
    return ",".join(found)


def main():
    print(torch.cuda.get_device_name(), flush=True)
    for name, n, cin, cout, k, grid in CASES:
        for dtype in (torch.float32, torch.bfloat16):
            nd = len(k)
            conv = F.conv_transpose1d if nd == 1 else F.conv_transpose2d
            geo = Geometry(k, (1,) * nd, (0,) * nd, (1,) * nd)
            x = torch.randn(n, cin, *grid, device="cuda", dtype=dtype, requires_grad=True)
            w = torch.randn(cin, cout, *k, device="cuda", dtype=dtype, requires_grad=True)
            y = conv(x, w)
            gy = torch.randn_like(y)
            t_w = bench(lambda: torch.autograd.grad(y, w, gy, retain_graph=True))
            t_x = bench(lambda: torch.autograd.grad(y, x, gy, retain_graph=True))
            flops = 2 * n * cin * cout * math.prod(k) * math.prod(grid)
            fp32 = dtype == torch.float32
            t_rows = bench(lambda: fused.channels_innermost(gy, fp32))
            rows = fused.channels_innermost(gy, fp32)
            xd = x.detach()
            t_pitch = bench(lambda: fused._planar(xd))
            wt = fused.tap_weights(w.detach(), transpose=True)
            gx = torch.empty_like(xd)
            taps = fused.convolution_taps(geo)
            t_gx = bench(lambda: fused.implicit_gemm(rows, wt, None, taps, gx.movedim(1, -1), round_input=False))
            print(f"{name} {str(dtype)[6:]} | cudnn grad_w {t_w:.3f} grad_x {t_x:.3f} | copies: rows {t_rows:.3f} "
                  f"pitched x {t_pitch:.3f} | fused grad_x kernel {t_gx:.3f} ({flops / t_gx / 1e9:.0f} TF/s)", flush=True)
            box = fused.grad_config(fused._padded(grid, 1), cin, cout, x.element_size()).box
            for bm, bn, warps, stages in TILES:
                cfg = fused.GradConfig(box, bm, bn, warps, stages)
                try:
                    t = bench(lambda: fused.weight_gradient(xd, rows, geo, cfg=cfg, rounded=True))
                    print(f"   grad_w {cfg} {t:7.3f} ms {flops / t / 1e9:6.1f} TF/s {t_w / t:5.2f}x cudnn | {wgmma()}",
                          flush=True)
                except Exception as e:
                    print(f"   grad_w {cfg} failed: {str(e).splitlines()[0][:150]}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
