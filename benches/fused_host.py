"""Where a small layer's time goes on the fused route (session 22's DCGAN question): host time
per call of torch, the column routes and the fused route, and the fused call's host stages.

    PYTHONPATH=. python benches/fused_host.py [NAMES]
"""
import sys

import torch
import torch.nn.functional as F

from gemmconv import conv_transpose2d, fused
from gemmconv.shapes import conv_transpose_args

sys.path.insert(0, "benches")
from overhead import patched, per_call_us  # noqa: E402

CALLS = 300


def per_call(fn):
    """Milliseconds per call, back to back (host-bound where above the kernels' time)."""
    return per_call_us(fn, CALLS) / 1e3


def kernel_ms(fn):
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    begin.record()
    for _ in range(CALLS):
        fn()
    end.record()
    torch.cuda.synchronize()
    return begin.elapsed_time(end) / CALLS


def main():
    layers = [("dcgan-2", 128, 512, 256, 4, 4, 2, 1), ("dcgan-3", 128, 256, 128, 4, 8, 2, 1),
              ("dcgan-4", 128, 128, 64, 4, 16, 2, 1), ("vae-3", 16, 256, 128, 3, 16, 2, 1),
              # the 2-D U-Net's up-convs (session 31: below SMALL_OUTPUT, on the column routes)
              ("unet-0", 8, 1024, 512, 2, 16, 2, 0), ("unet-1", 8, 512, 256, 2, 32, 2, 0),
              ("unet-2", 8, 256, 128, 2, 64, 2, 0), ("unet-3", 8, 128, 64, 2, 128, 2, 0)]
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else None
    for name, n, cin, cout, k, size, s, p in layers:
        if names and name not in names:
            continue
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(n, cin, size, size, device="cuda", dtype=dtype).contiguous(
                memory_format=torch.channels_last)
            w = torch.randn(cin, cout, k, k, device="cuda", dtype=dtype)
            op = 1 if k == 3 else 0
            t_torch = per_call(lambda: F.conv_transpose2d(x, w, None, s, p, op))
            t_cols = per_call(lambda: conv_transpose2d(x, w, None, s, p, op))
            with patched(fused, "preferred", lambda a, interleaved: True):
                t_fused = per_call(lambda: conv_transpose2d(x, w, None, s, p, op))
                k_fused = kernel_ms(lambda: conv_transpose2d(x, w, None, s, p, op))
                a = conv_transpose_args("conv_transpose2d", 2, x, w, None, s, p, op, 1, 1)
                out = torch.empty(a.output_shape, device="cuda", dtype=dtype,
                                  memory_format=torch.channels_last)
                rows, taps = x.movedim(1, -1), fused.transposed_taps(a.geometry)
                tw = fused.tap_weights(w)
                t_weights = per_call(lambda: fused.tap_weights(w))
                t_launch = per_call(lambda: fused.implicit_gemm(rows, tw, None, taps, out.movedim(1, -1)))
                k_launch = kernel_ms(lambda: fused.implicit_gemm(rows, tw, None, taps, out.movedim(1, -1)))
            print(f"{name:8s} {str(dtype)[6:]:9s} per call ms: torch {t_torch:.3f} columns {t_cols:.3f} "
                  f"fused {t_fused:.3f} (events {k_fused:.3f}) | tap_weights {t_weights:.3f}, "
                  f"launch alone {t_launch:.3f} (events {k_launch:.3f})", flush=True)


if __name__ == "__main__":
    main()
