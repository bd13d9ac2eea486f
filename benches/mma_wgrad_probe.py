"""The float32 channels_last weight gradient on TF32 mma.sync (benches/mma_wgrad.cu): right
against float64, and how fast against torch's and gemmconv's, on the stride-1 2-D cases
whose channels_last float32 training loses (2d-1024, 2d-3x7-512, 2d-64to128). Needs an
H100 or H200 and nvcc; about 60 s.

    PYTHONPATH=. python benches/mma_wgrad_probe.py [--edges]

First, mma_wgrad_emulate.py's edge shapes on the GPU in each form that takes their k_w,
partial sums poisoned with NaN: the largest error relative to the float64 reference's
largest entry, and the partial sums' elements left unwritten. Then the cases: milliseconds
of torch's weight gradient alone (cuDNN, channels_last, TF32 as torch's defaults), of
gemmconv's (its backward asked for the weight's only), of the probe in each form (its
partial sums' fixed-order sum included), and of torch's and gemmconv's whole backwards;
each weight gradient's error against float64.
"""
import os
import sys

import cupy
import torch

from gemmconv import ops
from gemmconv.cases import BENCH
from gemmconv.measure import timers
from gemmconv.shapes import Geometry, conv_transpose_args
from mma_wgrad_emulate import SHAPES, reference
from wgmma_shift_probe import build   # (benches/ is on the path when run as a script)

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mma_wgrad.cu")
P, C, PITCH = 32, 64, 72   # as in the .cu
# The .cu's forms: (k_w, row taps a block, ring depth, output rows a stage).
FORMS = [(3, 3, 3, 1), (3, 3, 4, 1), (3, 1, 4, 1), (3, 3, 3, 2), (3, 3, 2, 4), (5, 1, 4, 1),
         (5, 1, 3, 2), (5, 1, 4, 2), (7, 1, 3, 1), (7, 1, 3, 2), (1, 2, 4, 2), (2, 2, 4, 1)]


def shared_bytes(kernel_w: int, dilation: tuple, form: tuple) -> int:
    _, th, ring, rows = form
    boxes = rows + (th - 1) * dilation[0]
    return ring * (rows * P + boxes * (P + (kernel_w - 1) * dilation[1])) * PITCH * 4


class Probe:
    """One form bound to one call's tensors: calling it launches the kernel and sums its
    partials into ``(C_in, C_out, k_h, k_w)`` float32."""

    def __init__(self, module, x, grad, kernel, padding, dilation, form, blocks=None):
        n, c_in, h, w = x.shape
        _, c_out, out_h, out_w = grad.shape
        kw, th, ring, rows = form
        self.kernel = module.get_function(f"wgrad_k{kw}_t{th}_s{ring}_r{rows}")
        self.shared = shared_bytes(kw, dilation, form)
        self.kernel.max_dynamic_shared_size_bytes = self.shared
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        per_sm = max(1, min(65536 // (32 * kw * th * 200), 227 * 1024 // self.shared))
        tiles = (c_in // C) * (c_out // C) * -(-kernel[0] // th)
        self.grid = (blocks or max(1, sms * per_sm // tiles), -(-kernel[0] // th),
                     (c_in // C) * (c_out // C))
        self.block = (32 * kw * th,)
        self.partial = torch.empty(self.grid[0], kernel[0], kw, c_in, c_out, device=x.device)
        i32 = cupy.int32
        self.args = (cupy.asarray(x), cupy.asarray(grad), cupy.asarray(self.partial), i32(n),
                     i32(h), i32(w), i32(c_in), i32(out_h), i32(out_w), i32(c_out),
                     i32(kernel[0]), i32(padding[0]), i32(padding[1]), i32(dilation[0]),
                     i32(dilation[1]))

    def launch(self) -> None:
        self.kernel(self.grid, self.block, self.args, shared_mem=self.shared)

    def __call__(self) -> torch.Tensor:
        self.launch()
        return self.partial.sum(0).permute(2, 3, 0, 1)


def error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.double() - want).abs().max() / want.abs().max())


def channels_last(t: torch.Tensor) -> torch.Tensor:
    return t.float().contiguous(memory_format=torch.channels_last)


def edges(module, gen) -> None:
    for n, c_in, c_out, kernel, size, padding, dilation, blocks in SHAPES:
        image = Geometry(kernel, (1, 1), padding, dilation).image_size(size, (0, 0))
        x = torch.randn(n, c_in, *size, device="cuda", generator=gen, dtype=torch.float64)
        grad = torch.randn(n, c_out, *image, device="cuda", generator=gen, dtype=torch.float64)
        want = reference(x, grad, kernel, padding, dilation)
        for form in (f for f in FORMS if f[0] == kernel[1]):
            probe = Probe(module, channels_last(x), channels_last(grad), kernel, padding,
                          dilation, form, blocks)
            probe.partial.fill_(float("nan"))
            got = probe()
            torch.cuda.synchronize()
            print(f"edge {(n, c_in, c_out, kernel, size, padding, dilation)} form {form} "
                  f"grid {probe.grid}: error {error(got, want):.1e}, unwritten "
                  f"{int(probe.partial.isnan().sum())} of {probe.partial.numel()}", flush=True)


def timed(module, gen) -> None:
    for case in BENCH:
        if case.name not in ("2d-1024", "2d-3x7-512", "2d-64to128"):
            continue
        kernel, padding, dilation = case.kernel_size, case.padding, case.dilation
        x = channels_last(torch.randn(case.batch, case.in_channels, *case.size, device="cuda",
                                      generator=gen))
        w = channels_last(torch.randn(case.in_channels, case.out_channels, *kernel,
                                      device="cuda", generator=gen))   # (a model's, converted)
        a = conv_transpose_args("conv_transpose2d", 2, x, w, None, 1, padding, 0, 1, dilation)
        grad = channels_last(torch.randn(a.output_shape, device="cuda", generator=gen))
        want = reference(x.double(), grad.double(), kernel, padding, dilation)

        def torch_backward(mask):
            return lambda: torch.ops.aten.convolution_backward(
                grad, x, w, None, [1, 1], list(padding), list(dilation), True, [0, 0], 1, mask)

        def ours(need):
            return lambda: ops._conv_transpose_backward(grad, x, w, a, need)

        calls = {"torch wgrad": torch_backward([False, True, False]),
                 "gemmconv wgrad": ours([False, True, False])}
        for form in FORMS:
            if form[0] == kernel[1] and shared_bytes(kernel[1], dilation, form) <= 227 * 1024:
                calls["probe k{}t{}s{}r{}".format(*form)] = Probe(module, x, grad, kernel, padding,
                                                               dilation, form)
        errors = {"torch wgrad": error(calls["torch wgrad"]()[1], want),
                  "gemmconv wgrad": error(calls["gemmconv wgrad"]()[1], want)}
        for name, call in calls.items():
            if name.startswith("probe"):
                call.partial.fill_(float("nan"))
                errors[name] = error(call(), want)
        calls["torch backward"] = torch_backward([True, True, True])
        calls["gemmconv backward"] = ours([True, True, True])
        del want
        ms = timers(torch.device("cuda"), calls, 15)
        flops = 2 * x.numel() * case.out_channels * kernel[0] * kernel[1] \
            * a.image[0] * a.image[1] / (case.size[0] * case.size[1])
        print(f"{case.name} {tuple(x.shape)} k{kernel} float32 channels_last, weight "
              f"gradient ({flops / 1e9:.0f} GFLOP):", flush=True)
        for name in calls:
            e = f"  error {errors[name]:.1e}" if name in errors else ""
            print(f"  {name:18s} {ms[name]:7.3f} ms  {flops / ms[name] / 1e9:5.0f} TFLOP/s"
                  f"  {ms['torch wgrad'] / ms[name]:5.2f}x torch's{e}", flush=True)


def main() -> None:
    module = build(SOURCE)
    gen = torch.Generator("cuda").manual_seed(0)
    edges(module, gen)
    if "--edges" not in sys.argv:
        timed(module, gen)


if __name__ == "__main__":
    main()
