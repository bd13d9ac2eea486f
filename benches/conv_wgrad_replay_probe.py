"""The VAE decoder's 3x3 convolutions' training steps (gemmconv/zoo.py, batch 16) with
their backward as ops.py runs it by default (launched one by one, every call), with the
weight gradient by the transposed convolution's backward replay (``ops._conv_weight_grad``
with ``ops.CONV_WEIGHT_GRAD_REPLAYED`` on: the same product with the input and the output
gradient in each other's roles, replayed and graphed), and with the whole backward as one
CUDA graph (``ops._ConvBackwardReplay``, ``ops.GRAPHED_CONV_BACKWARD`` on), each against
torch's step in the same run.
``PYTHONPATH=. python3 benches/conv_wgrad_replay_probe.py [float32|bfloat16] [planar|channels_last]``
prints, per layer: the milliseconds of a step (forward and the three gradients) by torch
and by each of the three (median of gemmconv.measure.timers' samples in turns), the
speedups over torch, and each one's weight gradient's error against float64. Session 74:
these steps read 0.23-0.58x, their forward and input gradient graphed, the weight
gradient eager; session 76: the replayed weight gradient 0.50-0.86x where the eager one
read 0.43-0.92x, and a step's host time about five times its kernels'
(benches/conv_step_profile.py). The replay may take the fused or depthwise weight gradient
where the transposed convolution's would (their cost models), so the errors are printed,
not compared bit for bit."""
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
    calls = {"torch": step(F.conv2d), "eager wgrad": step(gemmconv.conv2d),
             "replayed wgrad": switched("CONV_WEIGHT_GRAD_REPLAYED", step(gemmconv.conv2d)),
             "graphed backward": switched("GRAPHED_CONV_BACKWARD", step(gemmconv.conv2d))}
    leaves64 = [t.detach().double().requires_grad_() for t in leaves]
    want = torch.autograd.grad(F.conv2d(*leaves64, padding=1), leaves64[1], grad.double())[0]
    errors = {name: ((call()[1].double() - want).norm() / want.norm()).item()
              for name, call in calls.items()}
    times = timers(device, calls, 20)
    row = "  ".join(f"{name} {ms:.3f} ({times['torch'] / ms:.2f}x, {errors[name]:.1e})"
                    for name, ms in times.items())
    print(f"conv {cin:3d}->{cout:3d} {side:3d}x{side:<3d}  {row}")
