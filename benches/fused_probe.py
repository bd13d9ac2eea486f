"""First H200 probe of the fused route (gemmconv/fused.py): its error against float64 next to
cuDNN's, and its time next to cuDNN's (NCHW and channels_last) and the current routes', on
the stride-1 cases and the zoo's layers, for a few tile configurations.

    PYTHONPATH=. python benches/fused_probe.py [--quick]
"""
import argparse
import math
import sys

import torch
import torch.nn.functional as F
import triton.testing

from gemmconv import conv_transpose1d, conv_transpose2d, fused
from gemmconv.shapes import Geometry

# name, batch, cin, cout, kernel, grid, stride, padding, output_padding, dilation
LAYERS = [
    ("2d-1024", 8, 64, 64, (3, 3), (1024, 1024), 1, 0, 0, 1),
    ("2d-3x7-512", 8, 64, 64, (3, 7), (512, 512), 1, 0, 0, 1),
    ("2d-64to128", 64, 64, 128, (3, 5), (128, 256), 1, 0, 0, 1),
    ("2d-512x1024", 8, 32, 32, (3, 3), (512, 1024), 1, 0, 0, 1),
    ("2d-3x7-padded", 8, 32, 32, (3, 7), (512, 1024), 1, (1, 3), 0, 1),
    ("1d-65536", 64, 128, 128, (3,), (65536,), 1, 0, 0, 1),
    ("1d-dil3", 32, 32, 64, (5,), (131072,), 1, 0, 0, 3),
    ("dcgan-1", 128, 100, 512, (4, 4), (1, 1), 1, 0, 0, 1),
    ("dcgan-2", 128, 512, 256, (4, 4), (4, 4), 2, 1, 0, 1),
    ("dcgan-3", 128, 256, 128, (4, 4), (8, 8), 2, 1, 0, 1),
    ("dcgan-4", 128, 128, 64, (4, 4), (16, 16), 2, 1, 0, 1),
    ("vae-1", 16, 512, 512, (3, 3), (4, 4), 2, 1, 1, 1),
    ("vae-3", 16, 256, 128, (3, 3), (16, 16), 2, 1, 1, 1),
    ("vae-5", 16, 64, 32, (3, 3), (64, 64), 2, 1, 1, 1),
    ("hifigan-1", 16, 512, 256, (16,), (32,), 8, 4, 0, 1),
    ("hifigan-2", 16, 256, 128, (16,), (256,), 8, 4, 0, 1),
    ("hifigan-3", 16, 128, 64, (4,), (2048,), 2, 1, 0, 1),
    ("unet-1", 8, 1024, 512, (2, 2), (16, 16), 2, 0, 0, 1),
    ("unet-4", 8, 128, 64, (2, 2), (128, 128), 2, 0, 0, 1),
]
SWEEP = {"2d-1024", "2d-64to128", "dcgan-3", "dcgan-4", "1d-dil3", "hifigan-1", "hifigan-2",
         "vae-3", "unet-1"}
CONFIGS = [dict(bm=128, bn=64, warps=4, stages=4), dict(bm=128, bn=128, warps=4, stages=3),
           dict(bm=128, bn=128, warps=8, stages=4), dict(bm=64, bn=64, warps=4, stages=4),
           dict(bm=64, bn=128, warps=4, stages=4), dict(bm=256, bn=128, warps=8, stages=3),
           dict(bm=128, bn=256, warps=8, stages=3)]


def bench(fn):
    return triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median")


def weights_of(w: torch.Tensor) -> torch.Tensor:
    """(C_in, C_out, *kernel) as (taps, C_out, C_in)."""
    return w.reshape(*w.shape[:2], -1).permute(2, 1, 0).contiguous()


def uses_wgmma() -> str:
    """Whether the kernels compiled so far issue wgmma (per compiled variant)."""
    from gemmconv import _triton
    found = []
    for cache in _triton.implicit_gemm.device_caches.values():
        for kernel in cache[0].values():
            found.append("wgmma" in kernel.asm.get("ptx", ""))
    return f"{sum(found)}/{len(found)} wgmma"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    dev = torch.device("cuda")
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
    print("case dtype | err fused / cudnn | cudnn NCHW | cudnn CL | ours CL | ours NCHW | fused (cfg) | best ratio vs cudnn CL")
    for name, n, cin, cout, k, grid, s, p, op, d in LAYERS:
        nd = len(k)
        expand = lambda v: v if isinstance(v, tuple) else (v,) * nd
        s, p, op, d = map(expand, (s, p, op, d))
        conv = F.conv_transpose1d if nd == 1 else F.conv_transpose2d
        ours = conv_transpose1d if nd == 1 else conv_transpose2d
        g = Geometry(k, s, p, d)
        taps = fused.transposed_taps(g)
        for dtype in (torch.float32, torch.bfloat16):
            try:
                probe(name, n, cin, cout, k, grid, s, p, op, d, nd, conv, ours, taps, dtype, dev, args)
            except Exception as e:
                print(f"{name} {dtype} failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
    grad_input(dev)


def probe(name, n, cin, cout, k, grid, s, p, op, d, nd, conv, ours, taps, dtype, dev, args):
    x = torch.randn(n, cin, *grid, device=dev, dtype=dtype)
    w = torch.randn(cin, cout, *k, device=dev, dtype=dtype) / (cin * len(taps.index[0])) ** .5
    b = torch.randn(cout, device=dev, dtype=dtype)
    fmt = torch.channels_last if nd == 2 else torch.contiguous_format
    x_cl = x.contiguous(memory_format=fmt) if nd == 2 else x
    ref = conv(x[:1].double(), w.double(), b.double(), s, p, op, 1, d)
    image = ref.shape[2:]
    wt = weights_of(fused.round_tf32(w) if dtype == torch.float32 else w)
    x_rows = x.movedim(1, -1).contiguous()
    out = torch.empty(n, *image, cout, device=dev, dtype=dtype)
    run = lambda cfg=None, r=True: fused.implicit_gemm(x_rows, wt, b, taps, out, cfg=cfg, round_input=r)
    out.fill_(float("nan"))
    run()
    got = out[:1].movedim(-1, 1).double()
    scale = ref.abs().max().item()
    err = (got - ref).abs().max().item() / scale
    cud = conv(x[:1], w, b, s, p, op, 1, d).double()
    err_cudnn = (cud - ref).abs().max().item() / scale
    nan = torch.isnan(out).any().item()
    t_nchw = bench(lambda: conv(x, w, b, s, p, op, 1, d))
    t_cl = bench(lambda: conv(x_cl, w, b, s, p, op, 1, d))
    t_ours_cl = bench(lambda: ours(x_cl, w, b, s, p, op, 1, d))
    t_ours = bench(lambda: ours(x, w, b, s, p, op, 1, d)) if nd == 2 else t_ours_cl
    extent = [-(-i // st) for i, st in zip(fused._padded(image, 1), fused._padded(s, 1))]
    cfgs = [None]
    if name in SWEEP and not args.quick:
        bk = min(128 // x.element_size(), max(16, fused._pow2(cin)))
        cfgs += [fused.Config(fused._box(n, extent, c["bm"]), bk, c["bn"], c["warps"], c["stages"])
                 for c in CONFIGS]
    times = []
    for cfg in cfgs:
        try:
            times.append((bench(lambda: run(cfg)), cfg))
        except Exception as e:   # a config the compiler refuses (shared memory)
            print("   cfg", cfg, "failed:", str(e).splitlines()[0][:120])
    best, cfg = min(times, key=lambda t: t[0])
    default = times[0][0]
    flops = 2 * n * cin * cout * math.prod(k) * math.prod(grid)
    print(f"{name:13s} {str(dtype)[6:]:8s} | {err:.1e}{' NAN' if nan else ''} / {err_cudnn:.1e} | "
          f"{t_nchw:7.3f} | {t_cl:7.3f} | {t_ours_cl:7.3f} | {t_ours:7.3f} | "
          f"{default:7.3f} best {best:7.3f} {cfg} | {t_cl / best:5.2f}x CL, {t_nchw / best:5.2f}x NCHW"
          f" | {flops / best / 1e9:6.1f} TFLOP/s", flush=True)
    for t, c in times[1:]:
        print(f"      {t:7.3f} {c}")
    if dtype == torch.float32:   # what rounding the input's tiles in registers costs
        print(f"      unrounded: default {bench(lambda: run(None, False)):7.3f}, best cfg "
              f"{bench(lambda: run(cfg, False)):7.3f} | {uses_wgmma()}", flush=True)


def grad_input(dev):
    # The stride-1 input gradient through the same kernel (a convolution), against cuDNN's.
    for name, n, cin, cout, k, grid, s, p, op, d in LAYERS[:3]:
        g = Geometry(k, (1, 1), (0, 0), (1, 1))
        x = torch.randn(n, cin, *grid, device=dev)
        w = torch.randn(cin, cout, *k, device=dev) / (cin * 9) ** .5
        y = F.conv_transpose2d(x, w)
        gy = torch.randn_like(y)
        gy_rows = gy.movedim(1, -1).contiguous()
        wt = weights_of(fused.round_tf32(w).transpose(0, 1).contiguous())
        gx = torch.empty(n, *grid, cin, device=dev)
        run = lambda: fused.implicit_gemm(gy_rows, wt, None, fused.convolution_taps(g), gx)
        run()
        ref = F.conv2d(gy.double(), w.double())
        err = ((gx.movedim(-1, 1) - ref).abs().max() / ref.abs().max()).item()
        gy_cl = gy.contiguous(memory_format=torch.channels_last)
        t_cudnn = bench(lambda: F.conv2d(gy, w))
        t_cudnn_cl = bench(lambda: F.conv2d(gy_cl, w))
        print(f"grad-input {name}: err vs TF32 cuDNN {err:.1e} | cudnn {t_cudnn:.3f} CL {t_cudnn_cl:.3f} | fused {bench(run):.3f}")


if __name__ == "__main__":
    sys.exit(main())
