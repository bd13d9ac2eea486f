"""Where a small layer's training step goes on the host: a depthwise layer of the zoo's
decoder (the GPU's work a step is under 0.1 ms), back to back (measure.timers), as torch's
module, ours, and two autograd Functions of our own in plain Python, one on torch's
kernels (aten.convolution_backward) and one calling our kernels directly; then the host
time spent inside our backward's Python code (ops._gradients) a step.

    PYTHONPATH=. python benches/autograd_probe.py [--channels-last]
"""
import copy
import sys
import time

import torch
import torch.nn.functional as F

import gemmconv
from gemmconv import depthwise, measure, ops
from gemmconv.shapes import conv_transpose_args


class TorchKernels(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return F.conv_transpose2d(x, w, None, 2, 1, 0, w.shape[0])

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        gx, gw, _ = torch.ops.aten.convolution_backward(
            grad, x, w, None, [2, 2], [1, 1], [1, 1], True, [0, 0], w.shape[0], [True, True, False])
        return gx, gw


class OurKernels(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, a):
        ctx.save_for_backward(x, w)
        ctx.a = a
        return depthwise.forward(x, w, None, a, torch.empty(a.output_shape, device=x.device))

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        gx = torch.empty_like(x)
        return gx, depthwise.backward(grad, x, w, ctx.a, gx, True), None


def main() -> None:
    fmt = torch.channels_last if "--channels-last" in sys.argv else torch.contiguous_format
    device = torch.device("cuda")
    print(torch.cuda.get_device_name(), fmt, flush=True)
    shape = (16, 256, 16, 16)
    c = shape[1]
    theirs = torch.nn.ConvTranspose2d(c, c, 4, 2, 1, groups=c, bias=False).cuda().to(memory_format=fmt)
    ours = gemmconv.convert(copy.deepcopy(theirs))
    x = torch.randn(shape, device="cuda").contiguous(memory_format=fmt).requires_grad_()
    grad = torch.randn_like(theirs(x))
    w = theirs.weight
    a = conv_transpose_args("conv_transpose2d", 2, x, w, None, 2, 1, 0, c, 1)
    fns = {
        "torch module step": lambda: torch.autograd.grad(theirs(x), [x, w], grad),
        "ours module step": lambda: torch.autograd.grad(ours(x), [x, ours.weight], grad),
        "Function, torch's kernels": lambda: torch.autograd.grad(TorchKernels.apply(x, w), [x, w], grad),
        "Function, our kernels": lambda: torch.autograd.grad(OurKernels.apply(x, w, a), [x, w], grad),
        "torch module forward": lambda: theirs(x),
        "ours module forward": lambda: ours(x),
    }
    for k, v in measure.timers(device, fns, 20, back_to_back=True).items():
        print(f"{k:32s} {v * 1e3:8.1f} us", flush=True)
    inside = [0.0]
    gradients = ops._gradients

    def timed(ctx, grad_output):
        t0 = time.perf_counter()
        out = gradients(ctx, grad_output)
        inside[0] += time.perf_counter() - t0
        return out

    ops._gradients = timed
    step = fns["ours module step"]
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    inside[0] = 0.0
    t0 = time.perf_counter()
    for _ in range(200):
        step()
    torch.cuda.synchronize()
    total = time.perf_counter() - t0
    print(f"ours module step: {total / 200 * 1e6:.1f} us a step, of which in ops._gradients "
          f"{inside[0] / 200 * 1e6:.1f} us")


if __name__ == "__main__":
    main()
