"""col2im.cu's tf32_weight_gradient (the mma_wgrad.cu probe's kernel as gemmconv would ship
it: NVRTC through CuPy, the index functions shared with the host harness), before any route
takes it. Right against float64 on mma_wgrad_emulate.py's edge shapes (partial sums
poisoned with NaN), then timed against torch's weight gradient and the probe's best form on
2d-1024 and 2d-3x7-512, and the training step it would give: torch's step against
gemmconv's forward + its backward without the weight gradient + this kernel and its sum.
Needs an H100 or H200; about 60 s: ``PYTHONPATH=. python benches/rows_wgrad_probe.py``."""
import ctypes

import torch

import gemmconv
from gemmconv import _cuda, ops
from gemmconv.cases import BENCH
from gemmconv.measure import timers
from gemmconv.shapes import Geometry, conv_transpose_args
from mma_wgrad_emulate import SHAPES, reference
from mma_wgrad_probe import FORMS, Probe, channels_last, error
from wgmma_shift_probe import build   # (benches/ is on the path when run as a script)

STRIP, TILE, PITCH, MAX_WARPS = 32, 64, 72, 9   # as col2im.cu's kWgrad*


def form(kernel: tuple, dilation: tuple) -> tuple:
    """(row taps a block, output rows a stage, ring depth): the probe's best forms
    (results/s69/WF), the rows and ring cut until they fit 227 KB."""
    kh, kw = kernel
    taps = max(1, min(kh, 3, MAX_WARPS // kw))
    for rows, stages in ((4, 2), (2, 3), (1, 4)) if taps == 3 else ((2, 3), (1, 4)):
        if shared_bytes(kernel, dilation, taps, rows, stages) <= 227 * 1024:
            return taps, rows, stages
    raise ValueError(f"no form fits {kernel} {dilation}")


def shared_bytes(kernel, dilation, taps, rows, stages) -> int:
    box_rows = STRIP + (kernel[1] - 1) * dilation[1]
    return stages * (rows * STRIP + (rows + (taps - 1) * dilation[0]) * box_rows) * PITCH * 4


class Kernel:
    """tf32_weight_gradient in one form, bound to one call's tensors."""

    def __init__(self, x, grad, kernel, padding, dilation, blocks=None):
        n, c_in, h, w = x.shape
        _, c_out, out_h, out_w = grad.shape
        taps, rows, stages = form(kernel, dilation)
        name = f"gemmconv::tf32_weight_gradient<{taps}, {rows}, {stages}>"
        self.module = _cuda._compile(x.device.index, {"wgrad": name})
        self.function = self.module["wgrad"]
        self.shared = shared_bytes(kernel, dilation, taps, rows, stages)
        lib = _cuda.driver()
        lib.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        assert lib.cuFuncSetAttribute(self.function, 8, self.shared) == 0   # max dynamic shared
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        warps = taps * kernel[1]
        per_sm = max(1, min(MAX_WARPS // warps, 227 * 1024 // self.shared))
        tiles = -(-kernel[0] // taps) * (c_in // TILE) * (c_out // TILE)
        self.grid = (blocks or max(1, sms * per_sm // tiles), -(-kernel[0] // taps),
                     (c_in // TILE) * (c_out // TILE))
        self.threads = 32 * warps
        self.partial = torch.empty(self.grid[0], *kernel, c_in, c_out, device=x.device)
        self.shape = (ctypes.c_int * 13)(n, h, w, c_in, out_h, out_w, c_out, *kernel, *padding,
                                         *dilation)
        self.pointers = (ctypes.c_uint64 * 3)(x.data_ptr(), grad.data_ptr(),
                                              self.partial.data_ptr())
        first = ctypes.addressof(self.pointers)
        self.params = (ctypes.c_void_p * 4)(ctypes.addressof(self.shape), first, first + 8,
                                            first + 16)
        self.device = x.device

    def __call__(self) -> torch.Tensor:
        code = _cuda.driver().cuLaunchKernel(self.function, *self.grid, self.threads, 1, 1,
                                             self.shared, _cuda.raw_stream(self.device),
                                             self.params, None)
        _cuda._launch_status(code)
        return self.partial.sum(0).permute(2, 3, 0, 1)


def edges(gen) -> None:
    for n, c_in, c_out, kernel, size, padding, dilation, blocks in SHAPES:
        image = Geometry(kernel, (1, 1), padding, dilation).image_size(size, (0, 0))
        x = torch.randn(n, c_in, *size, device="cuda", generator=gen, dtype=torch.float64)
        grad = torch.randn(n, c_out, *image, device="cuda", generator=gen, dtype=torch.float64)
        want = reference(x, grad, kernel, padding, dilation)
        k = Kernel(channels_last(x), channels_last(grad), kernel, padding, dilation, blocks)
        k.partial.fill_(float("nan"))
        got = k()
        first = got.clone()
        again = k()
        torch.cuda.synchronize()
        print(f"edge {(n, c_in, c_out, kernel, size, padding, dilation)} form "
              f"{form(kernel, dilation)} grid {k.grid}: error {error(got, want):.1e}, unwritten "
              f"{int(k.partial.isnan().sum())}, bitwise again {bool(torch.equal(first, again))}",
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
        ours = Kernel(x.detach(), grad, kernel, padding, dilation)
        best = max((f for f in FORMS if f[0] == kernel[1]), key=lambda f: f[3])
        probe = Probe(probe_module, x.detach(), grad, kernel, padding, dilation, best)

        def torch_step():
            out = torch.nn.functional.conv_transpose2d(x, w, b, padding=padding,
                                                       dilation=dilation)
            return torch.autograd.grad(out, (x, w, b), grad)

        def our_step():   # gemmconv's forward, its backward less the weight's, this kernel
            out = gemmconv.conv_transpose2d(x.detach(), w.detach(), b.detach(),
                                            padding=padding, dilation=dilation)
            grads = ops._conv_transpose_backward(grad, x.detach(), w.detach(), a,
                                                 [True, False, True])
            return out, grads, ours()

        def gemmconv_step():
            out = gemmconv.conv_transpose2d(x, w, b, padding=padding, dilation=dilation)
            return torch.autograd.grad(out, (x, w, b), grad)

        calls = {"torch wgrad": lambda: torch.ops.aten.convolution_backward(
                     grad, x.detach(), w.detach(), None, [1, 1], list(padding), list(dilation),
                     True, [0, 0], 1, [False, True, False]),
                 "col2im.cu wgrad": ours, f"probe {best}": probe,
                 "torch step": torch_step, "gemmconv step": gemmconv_step,
                 "step with it": our_step}
        errors = {"col2im.cu wgrad": error(ours(), want), f"probe {best}": error(probe(), want),
                  "gemmconv step": error(gemmconv_step()[1], want),
                  "torch step": error(torch_step()[1], want)}
        del want
        ms = timers(torch.device("cuda"), calls, 15)
        print(f"{case.name} float32 channels_last, form {form(kernel, dilation)}:", flush=True)
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
