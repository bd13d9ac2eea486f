"""Host time of a training step of U-Net's up-conv (ConvTranspose2d(512, 256, 2, stride 2)
on (8, 512, 32, 32)) under bfloat16 autocast, channels_last, as the zoo runs it: per step
back to back, torch against gemmconv's module, then gemmconv's step by function (cProfile,
which inflates small calls; read the shares). In session 29's zoo (H100) this layer's step
took 1.03 ms against torch's 0.34.

    PYTHONPATH=. python benches/train_host_profile.py
"""
import cProfile
import pstats
import sys

import torch

from gemmconv import nn as gnn

sys.path.insert(0, "benches")
from overhead import per_call_us  # noqa: E402


def main() -> int:
    print(torch.cuda.get_device_name(), flush=True)
    torch.manual_seed(0)
    theirs = torch.nn.ConvTranspose2d(512, 256, 2, 2).cuda().to(memory_format=torch.channels_last)
    ours = gnn.ConvTranspose2d(512, 256, 2, 2).cuda().to(memory_format=torch.channels_last)
    x = torch.randn(8, 512, 32, 32, device="cuda").contiguous(memory_format=torch.channels_last)
    x.requires_grad_()
    g = torch.randn(8, 256, 64, 64, device="cuda", dtype=torch.bfloat16).contiguous(
        memory_format=torch.channels_last)

    def step(m):
        with torch.autocast("cuda", torch.bfloat16):
            out = m(x)
        out.backward(g)

    for label, m in (("torch", theirs), ("gemmconv", ours)):
        print(f"{label}: {per_call_us(lambda: step(m), 200):.0f} us a step", flush=True)
    profiler = cProfile.Profile()
    profiler.runcall(lambda: [step(ours) for _ in range(200)])
    torch.cuda.synchronize()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(28)
    stats.sort_stats("cumulative").print_stats(28)
    return 0


if __name__ == "__main__":
    sys.exit(main())
