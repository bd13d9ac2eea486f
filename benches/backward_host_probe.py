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
import cProfile
import pstats
import sys
import time

import torch

from gemmconv import nn as gnn
from gemmconv import ops
from gemmconv.shapes import conv_transpose_args

sys.path.insert(0, "benches")
from sync_probe import sleep_cycles  # noqa: E402

LAYERS = {   # (module arguments, input shape)
    "dcgan": (dict(in_channels=256, out_channels=128, kernel_size=4, stride=2, padding=1,
                   bias=False), (128, 256, 8, 8)),
    "vae": (dict(in_channels=256, out_channels=128, kernel_size=3, stride=2, padding=1,
                 output_padding=1), (16, 256, 16, 16)),
}
N = 40


def busy_us(fn, cycles: int, prepare=None) -> float:
    """Host us a call of ``fn(i)``, N calls with the GPU busy; ``prepare(i)`` runs first,
    untimed, for each."""
    best = float("inf")
    for _ in range(3):
        args = [prepare(i) if prepare else i for i in range(N)]
        torch.cuda.synchronize()
        torch.cuda._sleep(cycles)
        t0 = time.perf_counter()
        for a in args:
            fn(a)
        best = min(best, (time.perf_counter() - t0) / N * 1e6)
        torch.cuda.synchronize()
    return best


def main() -> None:
    print(torch.cuda.get_device_name(), flush=True)
    cycles = sleep_cycles()
    for name, (kwargs, shape) in LAYERS.items():
        for layout in ("planar", "channels_last"):
            torch.manual_seed(0)
            theirs = torch.nn.ConvTranspose2d(**kwargs).cuda()
            ours = gnn.ConvTranspose2d(**kwargs).cuda()
            ours.load_state_dict(theirs.state_dict())
            x = torch.randn(shape, device="cuda")
            if layout == "channels_last":
                x = x.contiguous(memory_format=torch.channels_last)
                theirs, ours = (m.to(memory_format=torch.channels_last) for m in (theirs, ours))
            x.requires_grad_()
            g = torch.randn_like(theirs(x))
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
            print(f"== {name} {layout} {tuple(shape)}, host us a call: " + " | ".join(row)
                  + f" | backward fn: ours {core:.0f}, torch {aten:.0f}", flush=True)
            if layout == "channels_last":
                outs = [ours(x) for _ in range(200)]
                with torch.autograd.set_multithreading_enabled(False):
                    torch.cuda.synchronize()
                    torch.cuda._sleep(cycles * 4)
                    prof = cProfile.Profile()
                    prof.enable()
                    for out in outs:
                        torch.autograd.grad(out, [x, *ours.parameters()], g)
                    prof.disable()
                    torch.cuda.synchronize()
                stats = pstats.Stats(prof).stats
                top = sorted(stats.items(), key=lambda kv: -kv[1][2])[:25]
                print(f"  cProfile of ours' grad only (device threads off): "
                      f"{sum(v[2] for v in stats.values()) / 200 * 1e6:.0f} us own time a call")
                for (file, line, func), (cc, nc, tt, ct, _) in top:
                    where = file.split("site-packages/")[-1].split("/work/main/")[-1]
                    print(f"    {tt / 200 * 1e6:7.1f} {nc / 200:5.1f}  {func} ({where}:{line})")


if __name__ == "__main__":
    main()
