"""Float32 channels_last training steps of bench cases, torch against gemmconv as its rules
pick routes, with ``--rows BYTES`` raising fused.CHANNELS_LAST_FLOAT32_ROWS (so that calls
of more output channels, 2d-64to128's 128, take the fused backward, whose weight gradient
is col2im.cu's tf32_weight_gradient in blocks of two output tiles), and ``--balanced``
setting _cuda.WGRAD_BALANCED (that kernel's tiles dealt to balanced warps: 3x3 in 12, 3x5
of two output tiles in 8, 3x7 in 14).
Also the weight gradient alone, torch's against fused.rows_weight_gradient. Errors against
float64 of the weight gradient. Needs a GPU; about 30 s a case:
``PYTHONPATH=. python benches/cl128_probe.py [--rows 512] [--balanced] [CASE ...]``."""
import argparse

import torch

import gemmconv
from gemmconv import _cuda, fused
from gemmconv.cases import BENCH
from gemmconv.measure import timers
from gemmconv.shapes import Geometry, conv_transpose_args


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--balanced", action="store_true")
    parser.add_argument("cases", nargs="*", default=["2d-64to128"])
    args = parser.parse_args()
    if args.rows is not None:
        fused.CHANNELS_LAST_FLOAT32_ROWS = args.rows
    _cuda.WGRAD_BALANCED = args.balanced
    gen = torch.Generator("cuda").manual_seed(0)
    cl = lambda t: t.contiguous(memory_format=torch.channels_last)
    for case in BENCH:
        if case.name not in args.cases:
            continue
        kernel, padding, dilation = case.kernel_size, case.padding, case.dilation
        x = cl(torch.randn(case.batch, case.in_channels, *case.size, device="cuda",
                           generator=gen)).requires_grad_()
        w = cl(torch.randn(case.in_channels, case.out_channels, *kernel, device="cuda",
                           generator=gen)).requires_grad_()
        b = torch.randn(case.out_channels, device="cuda", generator=gen).requires_grad_()
        a = conv_transpose_args("conv_transpose2d", 2, x, w, b, 1, padding, 0, 1, dilation)
        grad = cl(torch.randn(a.output_shape, device="cuda", generator=gen))
        want = torch.ops.aten.convolution_backward(
            grad.double(), x.detach().double(), w.detach().double(), None, [1, 1],
            list(padding), list(dilation), True, [0, 0], 1, [False, True, False])[1]
        why = fused.backward_unavailable(a, x, w, interleaved=True)
        g = Geometry(kernel, (1, 1), padding, dilation)

        def step(module):
            out = module.conv_transpose2d(x, w, b, padding=padding, dilation=dilation)
            return torch.autograd.grad(out, (x, w, b), grad)

        rows = lambda t: t.detach().permute(0, 2, 3, 1)
        calls = {"torch step": lambda: step(torch.nn.functional),
                 "gemmconv step": lambda: step(gemmconv),
                 "torch wgrad": lambda: torch.ops.aten.convolution_backward(
                     grad, x.detach(), w.detach(), None, [1, 1], list(padding), list(dilation),
                     True, [0, 0], 1, [False, True, False])[1],
                 "mma wgrad": lambda: fused.rows_weight_gradient(rows(x), rows(grad), g)}
        err = lambda got: float((got.double() - want).abs().max() / want.abs().max())
        errors = {"torch step": err(calls["torch step"]()[1]),
                  "gemmconv step": err(calls["gemmconv step"]()[1]),
                  "mma wgrad": err(calls["mma wgrad"]())}
        want = None   # (its memory, before the timings)
        ms = timers(torch.device("cuda"), calls, 15)
        form = _cuda.rows_weight_gradient_form(kernel, dilation, case.out_channels)
        print(f"{case.name} float32 channels_last, rows limit {fused.CHANNELS_LAST_FLOAT32_ROWS}:"
              f" fused backward {'no: ' + why if why else 'yes'}; mma form {form}", flush=True)
        for name in calls:
            ref = "torch step" if "step" in name else "torch wgrad"
            e = f"  error {errors[name]:.1e}" if name in errors else ""
            print(f"  {name:14s} {ms[name]:7.3f} ms  {ms[ref] / ms[name]:5.2f}x {ref}{e}",
                  flush=True)


if __name__ == "__main__":
    main()
