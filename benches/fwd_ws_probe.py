"""The fused forward kernel with Triton's warp specialization (fused.Config.specialized: the
copies and the products in warps of their own, sm_90, four warps) against the default
tile, on the stride-1 2-D cases where the fused forward trails cuDNN: float32 inputs
rounded beforehand (a planar input's copy, the input gradient), float32 rounded in
registers (channels_last inputs), and bfloat16. Kernel time, TFLOP/s, the output's largest
difference from the default's, and cuDNN's channels_last forward for scale.

    PYTHONPATH=. python benches/fwd_ws_probe.py
"""
import math
import sys

import torch
import torch.nn.functional as F
import triton.testing

from gemmconv import cases, fused
from gemmconv.shapes import Geometry

NAMES = ["2d-3x7-512", "2d-64to128", "2d-1024", "2d-3x7-padded"]
MODES = [("float32 rounded", torch.float32, False), ("float32 in registers", torch.float32, True),
         ("bfloat16", torch.bfloat16, False)]


def bench(fn):
    return triton.testing.do_bench(fn, warmup=5, rep=40, return_mode="median")


def main():
    print(torch.cuda.get_device_name(), "triton", triton.__version__, flush=True)
    for case in (c for c in cases.BENCH if c.name in NAMES):
        geo = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
        taps = fused.transposed_taps(geo)
        flops = 2 * case.batch * case.in_channels * case.out_channels * math.prod(case.kernel_size) \
            * math.prod(case.size)
        for label, dtype, in_registers in MODES:
            x, w, b = case.tensors(dtype, "cuda")
            xl = x.contiguous(memory_format=torch.channels_last)
            t_cudnn = bench(lambda: F.conv_transpose2d(xl, w, b, **case.kwargs))
            rows = fused.channels_innermost(x, dtype == torch.float32 and not in_registers)
            weights = fused.tap_weights(w)
            out = torch.empty(case.batch, *F.conv_transpose2d(x[:1], w, None, **case.kwargs).shape[2:],
                              case.out_channels, device="cuda", dtype=dtype)
            extent = fused._padded(out.shape[1:-1], 1)
            default = fused.config(case.batch, extent, case.in_channels, case.out_channels, 1,
                                   x.element_size(), rounds=in_registers)
            run = lambda cfg: fused.implicit_gemm(rows, weights, b, taps, out, cfg=cfg,
                                                  round_input=in_registers)
            run(default)
            want = out.clone()
            line = []
            variants = [("default", default)]
            for stages in (3, 4):
                variants.append((f"ws {math.prod(default.box)}x{default.bn}/{stages}s",
                                 default._replace(warps=4, stages=stages, specialized=True)))
            if math.prod(default.box) == 64:
                box = fused._box(case.batch, extent, 128)
                variants.append((f"ws 128x{default.bn}/3s", default._replace(
                    box=box, warps=4, stages=3, specialized=True)))
            for name, cfg in variants:
                try:
                    out.fill_(float("nan"))
                    t = bench(lambda: run(cfg))
                    diff = ((out.float() - want.float()).abs().max() / want.float().abs().max()).item()
                    line.append(f"{name} {t:.3f} ms {flops / t / 1e9:.0f} TF/s diff {diff:.0e}")
                except Exception as e:   # a tile the compiler refuses
                    line.append(f"{name} failed: {str(e).splitlines()[0][:80]}")
            print(f"{case.name} {label} | cudnn CL {t_cudnn:.3f} ms | default {default.box} bn "
                  f"{default.bn} {default.warps}w{default.stages}s | " + " | ".join(line), flush=True)


if __name__ == "__main__":
    sys.exit(main())
