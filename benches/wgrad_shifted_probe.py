"""The float32 fused weight gradient from copies of the output gradient moved along W
(session 27, fused.weight_gradient(shifted=True)), its default tile and others (taps a
program: _triton.weight_gradient's moved form, fused.taps_a_program), on the 17 cases that take the
fused backward in float32 planar (stride 1, 2-D): the kernel's time and TFLOP/s and
the copies', next to cuDNN's weight gradient; its error against cuDNN in full float32; then
the training step, torch against ours with the float32 backward on the column routes (as
before) and on the fused kernels, in turns in one process.

    PYTHONPATH=. python benches/wgrad_shifted_probe.py
"""
import math
import sys

import torch
import torch.nn.functional as F
import triton.testing

from gemmconv import _triton, cases, fused, ops
from gemmconv.measure import timers
from gemmconv.shapes import Geometry, conv_transpose_args

sys.path.insert(0, "benches")
from overhead import patched  # noqa: E402

# Other tiles than the default (fused.grad_config, fused.taps_a_program): taps a program.
TILES = [dict(taps=1), dict(taps=2), dict(taps=3), dict(taps=4), dict(stages=3, taps=3)]
CASES = [c for c in cases.BENCH if set(c.stride) == {1} and c.nd == 2 and c.groups == 1]


def bench(fn):
    return triton.testing.do_bench(fn, warmup=3, rep=25, return_mode="median")


def wgmma():
    found = set()
    for cache in _triton.weight_gradient.device_caches.values():
        for kernel in cache[0].values():
            ptx = kernel.asm.get("ptx", "")
            found.add("wgmma" if "wgmma" in ptx else ("mma.sync" if "mma.sync" in ptx else "no mma"))
    return ",".join(sorted(found))


def main():
    print(torch.cuda.get_device_name(), "triton", triton.__version__, flush=True)
    for case in CASES:
        conv = F.conv_transpose1d if case.nd == 1 else F.conv_transpose2d
        x, w, b = (None if t is None else t.requires_grad_()
                   for t in case.tensors(torch.float32, "cuda"))
        y = conv(x, w, b, **case.kwargs)
        gy = torch.randn_like(y)
        geo = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
        flops = 2 * case.batch * case.in_channels * case.out_channels * math.prod(case.kernel_size) \
            * math.prod(case.size)
        t_cudnn = bench(lambda: torch.autograd.grad(y, w, gy, retain_graph=True))
        xd = x.detach()
        shifts, _ = fused.shifted_taps(geo, 4)
        t_copies = bench(lambda: fused.shifted_copies(gy, shifts, True))
        t_x = bench(lambda: fused._planar(xd))
        t_ours = bench(lambda: fused.weight_gradient(xd, gy, geo, shifted=True))
        kernel = t_ours - t_copies - t_x
        cfg = fused.grad_config(fused._padded(case.size, 1), case.in_channels, case.out_channels, 4,
                                math.prod(case.kernel_size))
        tiles = []
        for change in TILES:
            other = cfg._replace(**change)
            t = bench(lambda: fused.weight_gradient(xd, gy, geo, cfg=other, shifted=True))
            tiles.append(f"{other.bm}x{other.bn}/{other.warps}w{other.stages}s/{other.taps}t "
                         f"{t_cudnn / t:.2f}x")
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            exact, = torch.autograd.grad(conv(x, w, b, **case.kwargs), w, gy)
        got = fused.weight_gradient(xd, gy, geo, shifted=True)
        err = ((got - exact).norm() / exact.norm()).item()
        print(f"{case.name} | cudnn grad_w {t_cudnn:.3f} ms | ours ({cfg.taps} taps) {t_ours:.3f} ms "
              f"({t_cudnn / t_ours:.2f}x): copies {t_copies:.3f} ({len(shifts)} moved) + input "
              f"{t_x:.3f} + kernel {kernel:.3f} ({flops / kernel / 1e9:.0f} TF/s, {wgmma()}) "
              f"| err {err:.1e} | other tiles: {', '.join(tiles)}", flush=True)

        ours_x, ours_w, ours_b = (None if t is None else t.detach().clone().requires_grad_()
                                  for t in (x, w, b))
        leaves = [t for t in (ours_x, ours_w, ours_b) if t is not None]
        theirs = [t for t in (x, w, b) if t is not None]
        ours_fn = getattr(ops, f"conv_transpose{case.nd}d")

        def columns():
            with patched(fused, "backward_unavailable",
                         lambda *args, **kw: "float32 (probe: column routes)"):
                torch.autograd.grad(ours_fn(ours_x, ours_w, ours_b, **case.kwargs), leaves, gy)

        steps = {"torch": lambda: torch.autograd.grad(conv(x, w, b, **case.kwargs), theirs, gy),
                 "columns": columns,
                 "fused": lambda: torch.autograd.grad(ours_fn(ours_x, ours_w, ours_b, **case.kwargs),
                                                      leaves, gy)}
        a = conv_transpose_args(f"conv_transpose{case.nd}d", case.nd, ours_x, ours_w, ours_b,
                                case.stride, case.padding, case.output_padding, case.groups,
                                case.dilation)
        assert fused.backward_takes(a, ours_x, ours_w), "the fused backward should take it"
        t = timers(torch.device("cuda"), steps, 10)
        print(f"{case.name} | training step ms: torch {t['torch']:.3f}, ours on columns "
              f"{t['columns']:.3f} ({t['torch'] / t['columns']:.2f}x), fused {t['fused']:.3f} "
              f"({t['torch'] / t['fused']:.2f}x)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
