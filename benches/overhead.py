"""Host time per call: torch and gemmconv on inputs too small for the GPU to matter.

    PYTHONPATH=. python benches/overhead.py [--profile] [--train] [--channels-last]

Each call's Python work (argument checks, the custom-op dispatch, chunk planning, kernel and
cuBLAS launches) runs before the GPU sees its first kernel, so on small problems it adds to
the measured time. Reports microseconds per call over back-to-back calls; --profile prints
where gemmconv's host time goes (cProfile, by own time and by cumulative time). --train
times training steps of the modules instead (forward and backward), --channels-last on
channels_last inputs and modules (the 2-D and 3-D calls).
"""
import argparse
import contextlib
import copy
import cProfile
import pstats
import statistics
import time

import torch
import torch.nn.functional as F

import gemmconv

CALLS = [
    (2, (2, 8, 16, 16), (8, 8, 3, 3), {}),
    (3, (2, 8, 6, 6, 6), (8, 2, 3, 3, 3), dict(stride=2, padding=1, groups=4)),
    (1, (2, 8, 64), (8, 8, 5), dict(dilation=3)),
    (1, (2, 8, 64), (8, 16, 3), dict(stride=2, padding=1, dilation=2)),
]


def per_call_us(fn, calls: int = 300) -> float:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def busy_host_us(fn, sleep_cycles: int = 50_000_000, calls: int = 20) -> float:
    """Median host microseconds of ``fn`` with a sleep kernel queued ahead, so that the GPU
    stays busy through the call and nothing in it waits for the GPU: host time alone."""
    samples = []
    for _ in range(calls):
        torch.cuda._sleep(sleep_cycles)
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(samples)


def profiled(fn, calls: int, sleep_cycles: int) -> cProfile.Profile:
    """cProfile over ``calls`` calls of ``fn`` with a sleep kernel queued ahead, so that the
    GPU stays busy through them and nothing the host does waits for it."""
    torch.cuda.synchronize()
    torch.cuda._sleep(sleep_cycles)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    torch.cuda.synchronize()
    return profiler


@contextlib.contextmanager
def patched(owner, name: str, value):
    """``owner.name`` set to ``value`` inside the block, with the library's kept decisions
    and launch plans forgotten on the way in and out: a replay keeps its first call's
    route (gemmconv.ops), the fused route's launches their first call's tiles, and a graph
    its replay's launches (gemmconv.graphs)."""
    from gemmconv import fused, graphs, ops

    def forget():
        ops._replays.clear()
        ops._backward_replays.clear()
        fused.forget_plans()
        graphs.forget()

    original = getattr(owner, name)
    setattr(owner, name, value)
    forget()
    try:
        yield
    finally:
        setattr(owner, name, original)
        forget()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--channels-last", action="store_true")
    args = parser.parse_args()
    if args.train:
        return train(args)
    for nd, x_shape, w_shape, kwargs in CALLS:
        x, w = torch.rand(x_shape, device="cuda"), torch.rand(w_shape, device="cuda")
        b = torch.rand(w_shape[1] * kwargs.get("groups", 1), device="cuda")
        ours = lambda: getattr(gemmconv, f"conv_transpose{nd}d")(x, w, b, **kwargs)
        theirs = lambda: getattr(F, f"conv_transpose{nd}d")(x, w, b, **kwargs)
        print(f"{nd}-D {kwargs}: torch {per_call_us(theirs):6.1f} us, "
              f"gemmconv {per_call_us(ours):6.1f} us per call", flush=True)
        # The same call through modules, whose weight and bias are Parameters, with autograd
        # recording (the training forward) and without.
        module = getattr(torch.nn, f"ConvTranspose{nd}d")(
            x_shape[1], w_shape[1] * kwargs.get("groups", 1), w_shape[2:], **kwargs).cuda()
        swapped = gemmconv.convert(torch.nn.Sequential(copy.deepcopy(module)))
        for mode, context in (("no_grad", torch.no_grad), ("grad", contextlib.nullcontext)):
            with context():
                print(f"    modules, {mode}: torch {per_call_us(lambda: module(x)):6.1f} us, "
                      f"gemmconv {per_call_us(lambda: swapped(x)):6.1f} us per call", flush=True)
        if args.profile:
            profiler = cProfile.Profile()
            profiler.runcall(lambda: [ours() for _ in range(200)])
            stats = pstats.Stats(profiler)
            stats.sort_stats("tottime").print_stats(15)
            stats.sort_stats("cumulative").print_stats(30)


def train(args) -> None:
    """Host time of training steps: forward and backward of one module."""
    for nd, x_shape, w_shape, kwargs in CALLS:
        if args.channels_last and nd == 1:
            continue
        x = torch.rand(x_shape, device="cuda")
        module = getattr(torch.nn, f"ConvTranspose{nd}d")(
            x_shape[1], w_shape[1] * kwargs.get("groups", 1), w_shape[2:], **kwargs).cuda()
        if args.channels_last:
            fmt = torch.channels_last if nd == 2 else torch.channels_last_3d
            x, module = x.contiguous(memory_format=fmt), module.to(memory_format=fmt)
        x.requires_grad_()
        swapped = gemmconv.convert(torch.nn.Sequential(copy.deepcopy(module)))
        grad = torch.ones_like(module(x))
        step = lambda m: lambda: m(x).backward(grad)
        print(f"{nd}-D {kwargs} training step{' channels_last' if args.channels_last else ''}: "
              f"torch {per_call_us(step(module)):6.1f} us, gemmconv "
              f"{per_call_us(step(swapped)):6.1f} us per step", flush=True)
        if args.profile:
            profiler = cProfile.Profile()
            ours = step(swapped)
            profiler.runcall(lambda: [ours() for _ in range(200)])
            stats = pstats.Stats(profiler)
            stats.sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
