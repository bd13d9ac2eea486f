"""Where a layer's training step spends its host time, channels_last against planar.

layer_step_probe.py (session 37, J, H100) timed the VAE decoder's first up-conv's float32
step at 0.546 ms a call channels_last against 0.255 planar, its kernels 0.07 ms either way:
the host's time. Per layout: ms a call back to back, the host's time a call with the GPU
kept busy, and cProfile over the steps (autograd's device threads off, so that it sees
the backward), by own time.

Also DCGAN's second k4 s2 up-conv, (128, 256, 8, 8) -> 128 with no bias (``dcgan``), where
session 43's A2 put the bfloat16 channels_last step at 0.43 ms against torch's 0.29 on
0.08 ms of kernels either way; torch's module's host time beside ours.

    PYTHONPATH=. python benches/layer_host_profile.py [float32|bfloat16] [vae|dcgan]
"""
import cProfile
import io
import pstats
import sys

import torch

sys.path.insert(0, "benches")
from sync_probe import host_time, sleep_cycles  # noqa: E402

from gemmconv import nn as gnn  # noqa: E402
from gemmconv.measure import timers  # noqa: E402


LAYERS = {   # (module arguments, input shape)
    "vae": (dict(in_channels=512, out_channels=512, kernel_size=3, stride=2, padding=1,
                 output_padding=1), (16, 512, 4, 4)),
    "dcgan": (dict(in_channels=256, out_channels=128, kernel_size=4, stride=2, padding=1,
                   bias=False), (128, 256, 8, 8)),
}


def main(dtype="float32", layer="vae"):
    dt = getattr(torch, dtype)
    cycles = sleep_cycles() // 4
    kwargs, shape = LAYERS[layer]
    for layout in ("planar", "channels_last"):
        torch.manual_seed(0)
        m = gnn.ConvTranspose2d(**kwargs).to("cuda", dt)
        theirs = torch.nn.ConvTranspose2d(**kwargs).to("cuda", dt)
        x = torch.randn(shape, device="cuda", dtype=dt)
        if layout == "channels_last":
            m, x = m.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
            theirs = theirs.to(memory_format=torch.channels_last)
        x.requires_grad_()
        grad = torch.randn_like(m(x))

        def step(m=m):
            torch.autograd.grad(m(x), [x, *m.parameters()], grad)
        ms = timers(torch.device("cuda"), {0: step}, 15, warmup=4, back_to_back=True)[0]
        host = min(host_time(step, 10, cycles) for _ in range(5)) * 1e3
        torch_host = min(host_time(lambda: step(theirs), 10, cycles) for _ in range(5)) * 1e3
        with torch.autograd.set_multithreading_enabled(False):
            single = min(host_time(step, 10, cycles) for _ in range(5)) * 1e3
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(50):
                step()
            prof.disable()
            torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(30)
        print(f"== {dtype} {layer} {layout}: {ms:.4f} ms a call back to back; host, GPU "
              f"busy: {host:.4f} ms (device threads off: {single:.4f}; torch's module "
              f"{torch_host:.4f})")
        print("\n".join(text.getvalue().splitlines()[4:42]), flush=True)
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(30)
        print("\n".join(text.getvalue().splitlines()[4:42]), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
