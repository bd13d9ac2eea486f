"""The VAE decoder's 3x3 convolutions' training steps (gemmconv/zoo.py, batch 16) with
their backward as ops.py runs it eagerly (launched one by one, every call), with the whole
backward as one CUDA graph (``ops._ConvBackwardReplay``, ``ops.GRAPHED_CONV_BACKWARD``
on), and as a ``gemmconv.nn.Conv2d`` module's steady calls (``ops.STEADY_CONVOLUTIONS`` and
the graphed backward on: the C++ node) against a ``torch.nn.Conv2d``'s, each against
torch's step in the same run.
``PYTHONPATH=. python3 benches/conv_wgrad_replay_probe.py [float32|bfloat16] [planar|channels_last]``
prints, per layer: the milliseconds of a step (forward and the three gradients) by torch
and by each variant (median of gemmconv.measure.timers' samples in turns), the speedups
over torch's functional step, and each one's weight gradient's error against float64.
Session 74: these steps read 0.23-0.58x, their forward and input gradient graphed, the
weight gradient eager; session 76: the weight gradient by the transposed convolution's
backward replay (``ops.CONV_WEIGHT_GRAD_REPLAYED``) 0.50-0.86x where the eager one read
0.43-0.92x, and a step's host time about five times its kernels'
(benches/conv_step_profile.py); session 77: the graphed backward 0.85-1.16x up to 32x32
(and 1.09x, 0.92x on the bfloat16 64x64 layer), slower than eager on the layers whose bound
was over the graphs' limit (64x64 in float32, the 128x128 ones), which launched their
copies eagerly; with the bound tightened, 0.83-1.13x on all six, and as steady modules
1.07-1.63x. The routes may take the fused or depthwise kernels where their cost models
send them, so the errors are printed, not compared bit for bit."""
import sys
import unittest.mock

import torch
import torch.nn.functional as F

import gemmconv
from gemmconv import ops
from gemmconv.measure import timers
from vae_convolutions import LAYERS, gradient, tensors

DTYPE = getattr(torch, sys.argv[1] if len(sys.argv) > 1 else "float32")
LAYOUT = sys.argv[2] if len(sys.argv) > 2 else "planar"


def switched(switch, step):
    """``step`` with ops' ``switch`` on."""
    def patched():
        with unittest.mock.patch.object(ops, switch, True):
            return step()
    return patched


device = torch.device("cuda")
print(f"{DTYPE} {LAYOUT}; ms a training step (speedup over torch), weight gradient's error "
      "against float64")
for cin, cout, side in LAYERS:
    x, w, b = tensors(cin, cout, side, DTYPE, LAYOUT)
    leaves = [t.requires_grad_() for t in (x, w, b)]
    grad = gradient(cout, side, DTYPE, LAYOUT)

    def step(conv):
        return lambda: torch.autograd.grad(conv(x, w, b, padding=1), leaves, grad)

    def module_step(cls):
        module = cls(cin, cout, 3, padding=1, device=x.device, dtype=DTYPE)
        with torch.no_grad():
            module.weight.copy_(w)
            module.bias.copy_(b)
        params = [x, module.weight, module.bias]
        return lambda: torch.autograd.grad(module(x), params, grad)
    calls = {"torch": step(F.conv2d), "eager": step(gemmconv.conv2d),
             "graphed backward": switched("GRAPHED_CONV_BACKWARD", step(gemmconv.conv2d)),
             "torch module": module_step(torch.nn.Conv2d),
             "steady module": switched("STEADY_CONVOLUTIONS", switched(
                 "GRAPHED_CONV_BACKWARD", module_step(gemmconv.nn.Conv2d)))}
    leaves64 = [t.detach().double().requires_grad_() for t in leaves]
    want = torch.autograd.grad(F.conv2d(*leaves64, padding=1), leaves64[1], grad.double())[0]
    errors = {name: ((call()[1].double() - want).norm() / want.norm()).item()
              for name, call in calls.items()}
    times = timers(device, calls, 20)
    row = "  ".join(f"{name} {ms:.3f} ({times['torch'] / ms:.2f}x, {errors[name]:.1e})"
                    for name, ms in times.items())
    print(f"conv {cin:3d}->{cout:3d} {side:3d}x{side:<3d}  {row}")
