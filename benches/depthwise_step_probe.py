"""Host time of a depthwise layer's training step (the zoo decoder's layers): forward,
backward and both, ours and torch's, with the GPU kept busy (overhead.busy_host_us), then
where our step's host time goes (cProfile, by own time), and the step's GPU kernels.

    PYTHONPATH=. python benches/depthwise_step_probe.py [--channels-last] [--bf16]
"""
import copy
import pstats
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import gemmconv

sys.path.insert(0, "benches")
from overhead import busy_host_us, profiled  # noqa: E402


def main() -> None:
    fmt = torch.channels_last if "--channels-last" in sys.argv else torch.contiguous_format
    dtype = torch.bfloat16 if "--bf16" in sys.argv else torch.float32
    print(torch.cuda.get_device_name(), fmt, dtype, flush=True)
    for shape in [(16, 256, 16, 16), (16, 128, 32, 32)]:
        c = shape[1]
        theirs = torch.nn.ConvTranspose2d(c, c, 4, 2, 1, groups=c, bias=False).cuda().to(dtype)
        theirs = theirs.to(memory_format=fmt)
        ours = gemmconv.convert(copy.deepcopy(theirs))
        x = torch.randn(shape, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
        x.requires_grad_()
        for name, module in (("torch", theirs), ("ours", ours)):
            out = module(x)
            grad = torch.randn_like(out)
            leaves = [x, module.weight]
            forward = lambda: module(x)   # noqa: E731
            backward = lambda: torch.autograd.grad(out, leaves, grad, retain_graph=True)   # noqa: E731
            step = lambda: torch.autograd.grad(module(x), leaves, grad)   # noqa: E731
            for _ in range(3):
                forward(), backward(), step()
            torch.cuda.synchronize()
            print(f"{shape} {name}: host us forward {busy_host_us(forward):.0f}, backward "
                  f"{busy_host_us(backward):.0f}, step {busy_host_us(step):.0f}", flush=True)
            if name == "ours":
                stats = pstats.Stats(profiled(step, 50, 200_000_000))
                stats.sort_stats("tottime").print_stats(14)
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(5):
                        step()
                    torch.cuda.synchronize()
                for e in prof.key_averages():
                    if e.device_type == DeviceType.CUDA:
                        print(f"   {e.count / 5:4.1f}x {e.device_time_total / 5:8.1f} us  {e.key[:90]}")


if __name__ == "__main__":
    main()
