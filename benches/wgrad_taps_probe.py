"""The 16-bit fused weight gradient (``_triton.weight_gradient``, the output gradient's
tiles through registers) with 1 to 4 taps a program sharing the input's box, on the
table's stride-1 cases, against cuDNN's weight gradient through torch: kernel ms back to
back (do_bench), the rate, and each tiling's largest difference from one tap a program's
(the same sums in the same order: 0 expected).

    PYTHONPATH=. python benches/wgrad_taps_probe.py [CASES] [--dtype bfloat16]
"""
import argparse
import math
import sys

import torch
import torch.nn.functional as F

from gemmconv import cases, fused
from gemmconv.shapes import Geometry

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cl_tile_probe import bench  # noqa: E402

NAMES = ["2d-1024", "2d-3x7-512", "2d-64to128", "2d-512x1024", "2d-3x7-padded", "1d-65536",
         "1d-dil3", "3d-3x5x7", "3d-64cube", "3d-32to64", "3d-96cube"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="?", default=",".join(NAMES))
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    opts = parser.parse_args()
    dtype = getattr(torch, opts.dtype)
    print(torch.cuda.get_device_name(), dtype, flush=True)
    for case in (c for c in cases.BENCH if c.name in opts.cases.split(",")):
        conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[case.nd - 1]
        geo = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
        x = torch.randn(case.batch, case.in_channels, *case.size, device="cuda", dtype=dtype)
        w = torch.randn(case.in_channels, case.out_channels, *case.kernel_size, device="cuda",
                        dtype=dtype, requires_grad=True)
        y = conv(x, w, padding=case.padding, dilation=case.dilation)
        gy = torch.randn_like(y)
        t_cudnn = bench(lambda: torch.autograd.grad(y, w, gy, retain_graph=True))
        fold = fused.folded_taps(geo, case.out_channels, x.element_size())
        geometry = fused.narrowed(geo) if fold > 1 else geo
        rows = fused.channels_innermost(gy)
        if fold > 1:
            rows = fused.folded_rows(rows, geo, x.shape[-1])
        flops = 2 * case.batch * case.in_channels * case.out_channels * \
            math.prod(case.kernel_size) * math.prod(case.size)
        own = fused.grad_config(fused._padded(case.size, 1), case.in_channels, rows.shape[-1],
                                x.element_size())
        line = [f"{case.name} fold {fold} {own} | cudnn {t_cudnn:.3f}"]
        first = None
        for taps in (1, 2, 3, 4):
            cfg = own._replace(taps=taps)
            try:
                run = lambda: fused.weight_gradient(x, rows, geometry, cfg=cfg, rounded=True,
                                                    dtype=torch.float32)
                got = run()
                first = got if first is None else first
                t = bench(run)
                line.append(f"taps {taps} {t:.3f} ({flops / t / 1e9:.0f} TF/s) diff "
                            f"{(got - first).abs().max().item():.1e}")
            except Exception as e:   # noqa: BLE001 (a probe: report and go on)
                line.append(f"taps {taps} failed {str(e).splitlines()[0][:80]}")
        print(" | ".join(line), flush=True)


if __name__ == "__main__":
    sys.exit(main())
