"""Per-kernel CUDA time of one layer, torch against gemmconv, from torch.profiler.

    python benches/layer.py "ConvTranspose2d(21, 21, 64, stride=32, padding=16, bias=False)" \
        --input 8,21,16,16 [--backward] [--channels-last] [--dtype bfloat16]

The layer is written as torch.nn would construct it (any torch.nn class gemmconv swaps).
"""
from __future__ import annotations

import argparse
import collections

import torch

import gemmconv
from gemmconv.measure import timers


def cuda_events(step, repeats: int) -> list:
    """The profiler's CUDA events (kernels, copies) of ``repeats`` calls of ``step``, after
    three calls untraced."""
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            step()
        torch.cuda.synchronize()
    return [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def kernel_times(step, repeats: int = 10) -> list[tuple[str, float]]:
    """CUDA milliseconds per call of each kernel ``step`` launches, costliest first."""
    totals: dict[str, float] = collections.defaultdict(float)
    for event in cuda_events(step, repeats):
        totals[event.name[:90]] += event.device_time / 1e3 / repeats
    return sorted(totals.items(), key=lambda kv: -kv[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("layer")
    parser.add_argument("--input", required=True)
    parser.add_argument("--backward", action="store_true")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    layer = eval(args.layer, {n: getattr(torch.nn, n) for n in dir(torch.nn)}).cuda()
    dtype = getattr(torch, args.dtype)
    x = torch.randn(*map(int, args.input.split(",")), device="cuda", dtype=dtype)
    layer = layer.to(dtype)
    if args.channels_last:
        fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        x, layer = x.contiguous(memory_format=fmt), layer.to(memory_format=fmt)
    x.requires_grad_(args.backward)
    steps = {}
    for impl in ("torch", "gemmconv"):
        module = layer if impl == "torch" else gemmconv.convert(
            __import__("copy").deepcopy(layer), types=(type(layer),))

        def step(module=module):
            out = module(x)
            if args.backward:
                torch.autograd.grad(out, [x, *module.parameters()], torch.ones_like(out))
        steps[impl] = step
    times = timers(torch.device("cuda"), steps, 20)
    for impl, step in steps.items():
        print(f"== {impl}: {times[impl]:.3f} ms a call")
        for name, ms in kernel_times(step):
            print(f"  {ms:8.3f}  {name}")


if __name__ == "__main__":
    main()
