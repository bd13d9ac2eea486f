"""A depthwise layer's training step, back to back (measure.timers), in variants that
split its time: torch's step and forward; ours: step, forward, the step with the backward
on the column routes, and the forward (no grad) followed by a direct call of the backward
kernel (no autograd); then the kernels of our step (torch.profiler).

    PYTHONPATH=. python benches/depthwise_step_probe.py [--channels-last] [--bf16]
"""
import copy
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import gemmconv
from gemmconv import depthwise, measure, ops
from gemmconv.shapes import conv_transpose_args


def main() -> None:
    fmt = torch.channels_last if "--channels-last" in sys.argv else torch.contiguous_format
    dtype = torch.bfloat16 if "--bf16" in sys.argv else torch.float32
    device = torch.device("cuda")
    print(torch.cuda.get_device_name(), fmt, dtype, flush=True)
    for shape in [(16, 256, 16, 16), (16, 128, 32, 32)]:
        c = shape[1]
        theirs = torch.nn.ConvTranspose2d(c, c, 4, 2, 1, groups=c, bias=False).cuda().to(dtype)
        theirs = theirs.to(memory_format=fmt)
        ours = gemmconv.convert(copy.deepcopy(theirs))
        x = torch.randn(shape, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
        x.requires_grad_()
        grad = torch.randn_like(theirs(x))
        a = conv_transpose_args("conv_transpose2d", 2, x, ours.weight, None, 2, 1, 0, c, 1)
        grad_x = torch.empty_like(x)

        def direct():
            with torch.no_grad():
                ours(x)
            return depthwise.backward(grad, x.detach(), ours.weight.detach(), a, grad_x, True)

        fns = {
            "torch step": lambda: torch.autograd.grad(theirs(x), [x, theirs.weight], grad),
            "torch forward": lambda: theirs(x),
            "ours step": lambda: torch.autograd.grad(ours(x), [x, ours.weight], grad),
            "ours forward": lambda: ours(x),
            "ours forward no grad + backward kernel": direct,
        }
        ms = measure.timers(device, fns, 20, back_to_back=True)
        takes = depthwise.backward_takes
        depthwise.backward_takes = lambda *args: False
        ops._backward_replays.clear()
        ms.update({f"{k} (backward by the column routes)": v for k, v in measure.timers(
            device, {k: fns[k] for k in ("torch step", "ours step")}, 20, back_to_back=True).items()})
        depthwise.backward_takes = takes
        ops._backward_replays.clear()
        for k, v in ms.items():
            print(f"{shape} {k:50s} {v * 1e3:8.1f} us", flush=True)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                fns["ours step"]()
            torch.cuda.synchronize()
        for e in prof.key_averages():
            if e.device_type == DeviceType.CUDA:
                print(f"   {e.count / 5:4.1f}x {e.device_time_total / 5:8.1f} us  {e.key[:90]}")


if __name__ == "__main__":
    main()
