"""Where a small convolution's training step goes: the VAE decoder's 512-channel 8x8 and
64-channel 64x64 3x3 layers (benches/vae_convolutions.py), gemmconv.conv2d against
F.conv2d. ``PYTHONPATH=. python3 benches/conv_step_profile.py [float32|bfloat16]
[planar|channels_last]`` prints, per layer and call: the milliseconds of a step timed
back to back (host-bound where the GPU waits) and with the GPU's kernel time alone
(torch.profiler's sum of device time a step), then cProfile's 25 costliest functions of
gemmconv's step by own time and by cumulative time (the host's share)."""
import cProfile
import pstats
import sys
import time

import torch
import torch.nn.functional as F

import gemmconv
from vae_convolutions import gradient, tensors

DTYPE = getattr(torch, sys.argv[1] if len(sys.argv) > 1 else "float32")
LAYOUT = sys.argv[2] if len(sys.argv) > 2 else "planar"
STEPS = 100


def step_of(conv, x, w, b, grad):
    leaves = (x, w, b)
    return lambda: torch.autograd.grad(conv(x, w, b, padding=1), leaves, grad)


def wall_ms(step):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(STEPS):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e3 / STEPS


def kernel_ms(step):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            step()
        torch.cuda.synchronize()
    total = sum(e.self_device_time_total for e in prof.key_averages())
    return total / 1e3 / 20


for cin, cout, side in [(512, 512, 8), (64, 64, 64)]:
    x, w, b = tensors(cin, cout, side, DTYPE, LAYOUT)
    for t in (x, w, b):
        t.requires_grad_()
    grad = gradient(cout, side, DTYPE, LAYOUT)
    print(f"== conv {cin}->{cout} {side}x{side} {DTYPE} {LAYOUT}")
    for name, conv in (("torch", F.conv2d), ("gemmconv", gemmconv.conv2d)):
        step = step_of(conv, x, w, b, grad)
        for _ in range(10):
            step()
        print(f"{name:9s} step {wall_ms(step):.3f} ms back to back, kernels {kernel_ms(step):.3f} ms")
    step = step_of(gemmconv.conv2d, x, w, b, grad)
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(STEPS):
        step()
    torch.cuda.synchronize()
    profile.disable()
    stats = pstats.Stats(profile)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumtime").print_stats(30)
