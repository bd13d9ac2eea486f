"""col2im.cu's tf32_weight_gradient through gemmconv's own launch (fused.rows_weight_gradient,
NVRTC through CuPy), on its own: right against float64 on cases.MMA_WEIGHT_GRADIENT and
bitwise repeatable, then timed against torch's weight gradient and the mma_wgrad.cu probe's
best form on 2d-1024 and 2d-3x7-512, and torch's training step against gemmconv's (which
takes it). Needs an H100 or H200; about 60 s:
``PYTHONPATH=. python benches/rows_wgrad_probe.py``."""
import torch

import gemmconv
from gemmconv import _cuda, cases, fused
from gemmconv.cases import BENCH
from gemmconv.measure import timers
from gemmconv.shapes import Geometry, conv_transpose_args
from mma_wgrad_emulate import reference
from mma_wgrad_probe import FORMS, Probe, channels_last, error
from wgmma_shift_probe import build   # (benches/ is on the path when run as a script)


def rows(t: torch.Tensor) -> torch.Tensor:
    """A channels_last (N, C, H, W) tensor's rows (N, H, W, C), as they lie."""
    return t.permute(0, 2, 3, 1)


def edges(gen) -> None:
    for case in cases.MMA_WEIGHT_GRADIENT:
        kernel, padding, dilation = case.kernel_size, case.padding, case.dilation
        x = torch.randn(case.batch, case.in_channels, *case.size, device="cuda", generator=gen,
                        dtype=torch.float64)
        grad = torch.randn(case.batch, case.out_channels, *case.output_size, device="cuda",
                           generator=gen, dtype=torch.float64)
        want = reference(x, grad, kernel, padding, dilation)
        g = Geometry(kernel, (1, 1), padding, dilation)
        xr, gr = rows(channels_last(x)), rows(channels_last(grad))
        first, again = (fused.rows_weight_gradient(xr, gr, g) for _ in range(2))
        torch.cuda.synchronize()
        form = _cuda.rows_weight_gradient_form(kernel, dilation, case.out_channels)
        print(f"{case.name}: form {form}, error "
              f"{error(first, want):.1e}, bitwise again {bool(torch.equal(first, again))}",
              flush=True)


def timed(gen) -> None:
    probe_module = build(__file__.replace("rows_wgrad_probe.py", "mma_wgrad.cu"))
    for case in BENCH:
        if case.name not in ("2d-1024", "2d-3x7-512"):
            continue
        kernel, padding, dilation = case.kernel_size, case.padding, case.dilation
        x = channels_last(torch.randn(case.batch, case.in_channels, *case.size, device="cuda",
                                      generator=gen)).requires_grad_()
        w = channels_last(torch.randn(case.in_channels, case.out_channels, *kernel,
                                      device="cuda", generator=gen)).requires_grad_()
        b = torch.randn(case.out_channels, device="cuda", generator=gen).requires_grad_()
        a = conv_transpose_args("conv_transpose2d", 2, x, w, b, 1, padding, 0, 1, dilation)
        grad = channels_last(torch.randn(a.output_shape, device="cuda", generator=gen))
        want = reference(x.detach().double(), grad.double(), kernel, padding, dilation)
        g = Geometry(kernel, (1, 1), padding, dilation)
        ours = lambda: fused.rows_weight_gradient(rows(x.detach()), rows(grad), g)
        best = max((f for f in FORMS if f[0] == kernel[1]), key=lambda f: f[3])
        probe = Probe(probe_module, x.detach(), grad, kernel, padding, dilation, best)

        def torch_step():
            out = torch.nn.functional.conv_transpose2d(x, w, b, padding=padding,
                                                       dilation=dilation)
            return torch.autograd.grad(out, (x, w, b), grad)

        def gemmconv_step():
            out = gemmconv.conv_transpose2d(x, w, b, padding=padding, dilation=dilation)
            return torch.autograd.grad(out, (x, w, b), grad)

        calls = {"torch wgrad": lambda: torch.ops.aten.convolution_backward(
                     grad, x.detach(), w.detach(), None, [1, 1], list(padding), list(dilation),
                     True, [0, 0], 1, [False, True, False]),
                 "col2im.cu wgrad": ours, f"probe {best}": probe,
                 "torch step": torch_step, "gemmconv step": gemmconv_step}
        errors = {"col2im.cu wgrad": error(ours(), want), f"probe {best}": error(probe(), want),
                  "gemmconv step": error(gemmconv_step()[1], want),
                  "torch step": error(torch_step()[1], want)}
        del want
        ms = timers(torch.device("cuda"), calls, 15)
        print(f"{case.name} float32 channels_last, form "
              f"{_cuda.rows_weight_gradient_form(kernel, dilation, case.out_channels)}:",
              flush=True)
        for name in calls:
            e = f"  error {errors[name]:.1e}" if name in errors else ""
            ref = "torch wgrad" if "wgrad" in name or "probe" in name else "torch step"
            print(f"  {name:18s} {ms[name]:7.3f} ms  {ms[ref] / ms[name]:5.2f}x {ref}{e}",
                  flush=True)


def main() -> None:
    gen = torch.Generator("cuda").manual_seed(0)
    edges(gen)
    timed(gen)


if __name__ == "__main__":
    main()
