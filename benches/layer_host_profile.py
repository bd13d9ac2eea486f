"""Where a layer's training step spends its host time, channels_last against planar.

layer_step_probe.py (session 37, J, H100) timed the VAE decoder's first up-conv's float32
step at 0.546 ms a call channels_last against 0.255 planar, its kernels 0.07 ms either way:
the host's time. Per layout: ms a call back to back, the host's time a call with the GPU
kept busy, and cProfile over the steps (autograd's device threads off, so that it sees
the backward), by own time.

    PYTHONPATH=. python benches/layer_host_profile.py [float32|bfloat16]
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


def main(dtype="float32"):
    dt = getattr(torch, dtype)
    cycles = sleep_cycles() // 4
    for layout in ("planar", "channels_last"):
        torch.manual_seed(0)
        m = gnn.ConvTranspose2d(512, 512, 3, 2, 1, output_padding=1).to("cuda", dt)
        x = torch.randn(16, 512, 4, 4, device="cuda", dtype=dt)
        if layout == "channels_last":
            m, x = m.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
        x.requires_grad_()
        grad = torch.randn_like(m(x))

        def step():
            torch.autograd.grad(m(x), [x, *m.parameters()], grad)
        ms = timers(torch.device("cuda"), {0: step}, 15, warmup=4, back_to_back=True)[0]
        host = min(host_time(step, 10, cycles) for _ in range(5)) * 1e3
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
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
        print(f"== {dtype} {layout}: {ms:.4f} ms a call back to back; host, GPU busy: "
              f"{host:.4f} ms (device threads off: {single:.4f})")
        print("\n".join(text.getvalue().splitlines()[4:30]), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
