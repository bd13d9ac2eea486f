"""Where a small layer's backward spends the host's time, ours against torch's. Session
48's B (host_floor_probe.py, H100) put our float32 channels_last layer steps 70-230 us above
torch's on DCGAN's and the VAE decoder's layers, the forwards only 7-25 us above. Per layer
and layout, host us a call with the GPU kept busy (a sleep kernel queued first, so that no
call waits for the GPU):

- ``step``: forward and ``autograd.grad`` of input, weight and bias, through the module;
- ``forward``: the module's forward with grad enabled (the autograd node recorded);
- ``grad only``: ``autograd.grad`` on a fresh forward's output (step minus forward, taken
  apart: the forwards run first, untimed);
- ``backward fn``: our backward's core, ``ops._conv_transpose_backward``, called directly
  (torch's: ``aten.convolution_backward``), no autograd;
- then cProfile of our ``grad only`` with autograd's device threads off.

    PYTHONPATH=. python benches/backward_host_probe.py
"""
import sys

import torch

from gemmconv import ops
from gemmconv.shapes import conv_transpose_args

sys.path.insert(0, "benches")
from probe_lib import busy_us, layer_cases, profiled  # noqa: E402
from sync_probe import sleep_cycles  # noqa: E402


def main() -> None:
    print(torch.cuda.get_device_name(), flush=True)
    cycles = sleep_cycles()
    for name, layout, theirs, ours, x, g in layer_cases():
        row = []
        for label, m in (("torch", theirs), ("ours", ours)):
            leaves = [x, *m.parameters()]
            for _ in range(5):
                torch.autograd.grad(m(x), leaves, g)

            def step(_):
                torch.autograd.grad(m(x), leaves, g)

            forward = lambda _: m(x)   # noqa: E731
            grad_only = lambda out: torch.autograd.grad(out, leaves, g)   # noqa: E731
            row.append(f"{label} step {busy_us(step, cycles):.0f} / forward "
                       f"{busy_us(forward, cycles):.0f} / grad only "
                       f"{busy_us(grad_only, cycles, lambda i: m(x)):.0f}")
        a = conv_transpose_args("conv_transpose2d", 2, x, ours.weight, ours.bias,
                                ours.stride, ours.padding, ours.output_padding,
                                ours.groups, ours.dilation)
        need = [True, True, ours.bias is not None]
        for _ in range(5):
            ops._conv_transpose_backward(g, x, ours.weight, a, need)
        core = busy_us(lambda _: ops._conv_transpose_backward(g, x, ours.weight, a, need),
                       cycles)
        aten = busy_us(lambda _: torch.ops.aten.convolution_backward(
            g, x, theirs.weight, [theirs.out_channels] if theirs.bias is not None else None,
            list(theirs.stride), list(theirs.padding), list(theirs.dilation), True,
            list(theirs.output_padding), 1, need), cycles)
        print(f"== {name} {layout} {tuple(x.shape)}, host us a call: " + " | ".join(row)
              + f" | backward fn: ours {core:.0f}, torch {aten:.0f}", flush=True)
        if layout == "channels_last":
            outs = [ours(x) for _ in range(200)]

            def grads():
                for out in outs:
                    torch.autograd.grad(out, [x, *ours.parameters()], g)
            with torch.autograd.set_multithreading_enabled(False):
                profiled(grads, 200, cycles * 4, "ours' grad only (device threads off)")


if __name__ == "__main__":
    main()
