"""Why our small layers' steps take longer on a running GPU than the host's time they take
with the GPU kept busy. Session 48's J (graph_step_probe.py, H100), DCGAN's second layer in
float32 channels_last, a step (forward and autograd.grad): ours 311 us of host time with a
sleep kernel queued first and 0.439 ms a step back to back; torch's 338 us and 0.335 ms.
Its kernels take less time than torch's, so something costs the host more while the GPU
runs. Per call, us, in four modes:

- ``busy``: the host's time with a sleep kernel queued first (nothing runs meanwhile);
- ``live``: back to back, wall time to the last call's end (the step's rate);
- ``live host``: back to back, the host's time to issue the calls (before the sync);
- ``idle``: each call from an idle GPU (a sync before each), host time of the call.

For: graphs of one and of four tiny kernels and the same kernels launched one by one;
that layer's forward and step, torch's and ours, ours also with no graphs; and the CUDA
graphs' replay calls alone, summed over each run (``replay us``). Then DCGAN's float32
channels_last training step, whole, torch's and converted, with Python's garbage collector
on and off, and autograd's device threads on and off.

    PYTHONPATH=. python benches/live_probe.py
"""
import copy
import gc
import statistics
import sys
import time

import torch

from gemmconv import graphs
from gemmconv import nn as gnn

sys.path.insert(0, "benches")
from probe_lib import launches_counted, layer_pair, zoo_config  # noqa: E402
from sync_probe import SLEEP_S, sleep_cycles  # noqa: E402

CALLS = 100
REPLAYED = [0.0, 0]   # seconds in CUDAGraph.replay, calls
_replay = torch.cuda.CUDAGraph.replay


def _timed_replay(self):
    t0 = time.perf_counter()
    _replay(self)
    REPLAYED[0] += time.perf_counter() - t0
    REPLAYED[1] += 1


torch.cuda.CUDAGraph.replay = _timed_replay


def per_call(fn, mode: str, cycles: int) -> tuple[float, float, str]:
    """(us a call, us of graph replays a call, graphs.launch's outcomes) of ``fn()`` in
    ``mode`` (MODES), medians of 5 runs of CALLS calls, the outcomes summed over them;
    ``cycles``: the sleep kernel's, long enough for a run's calls."""
    runs = []
    with launches_counted() as outcomes:
        for _ in range(5):
            run_once(fn, mode, cycles, runs)
    return (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
            ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()) if k != "replayed"))


def run_once(fn, mode: str, cycles: int, runs: list) -> None:
    torch.cuda.synchronize()
    REPLAYED[:] = [0.0, 0]
    if mode == "idle":
        total = 0.0
        for _ in range(CALLS):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            total += time.perf_counter() - t0
    else:
        if mode == "busy":
            torch.cuda._sleep(cycles)
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        if mode == "live":
            torch.cuda.synchronize()
        total = time.perf_counter() - t0
    torch.cuda.synchronize()
    runs.append((total / CALLS * 1e6, REPLAYED[0] / CALLS * 1e6))


MODES = ("live", "busy", "live host", "idle")


def row(label: str, fn, cycles_a_second: float, modes=MODES) -> None:
    """``fn``'s us a call in each of ``modes``, the busy mode's sleep twice the live calls'
    time."""
    for _ in range(10):
        fn()
    cells, cycles = [], 0
    for mode in modes:
        median, replay, outcomes = per_call(fn, mode, cycles)
        if mode == "live":
            cycles = int(2 * median * 1e-6 * CALLS * cycles_a_second)
        cells.append(f"{mode} {median:6.1f}" + (f" (replay {replay:5.1f})" if replay else "")
                     + (f" [{outcomes}]" if outcomes else ""))
    print(f"  {label:28s} " + " | ".join(cells) + f"; graphs kept {graphs.kept()}", flush=True)


def tiny(cycles: float) -> None:
    y = torch.zeros(1024, device="cuda")
    for k in (1, 4):
        def kernels(k=k):
            for _ in range(k):
                y.add_(1)
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            kernels()
            graph.capture_begin()
            kernels()
            graph.capture_end()
        torch.cuda.current_stream().wait_stream(stream)
        row(f"{k} tiny kernels, a graph", graph.replay, cycles)
        row(f"{k} tiny kernels, one by one", kernels, cycles)


def layer(cycles: float) -> None:
    theirs, ours, x = layer_pair("dcgan", "channels_last")
    g = torch.randn_like(theirs(x))
    leaves = [x, *ours.parameters()]
    for label, m in (("torch", theirs), ("ours", ours)):
        def forward(m=m):
            with torch.no_grad():
                m(x)

        def step(m=m):
            torch.autograd.grad(m(x), [x, *m.parameters()], g)
        row(f"{label} forward", forward, cycles)
        row(f"{label} step", step, cycles)
    limit = graphs.get_graph_memory_limit()
    graphs.set_graph_memory_limit(0)
    try:
        row("ours step, no graphs", lambda: torch.autograd.grad(ours(x), leaves, g), cycles)
    finally:
        graphs.set_graph_memory_limit(limit)


def crowded(cycles: float) -> None:
    """Does a graph's launch, or a step, cost more with many other graphs kept?"""
    y = torch.zeros(1024, device="cuda")
    theirs, ours, x = layer_pair("dcgan", "channels_last")
    g = torch.randn_like(theirs(x))
    base, step = zoo_config("dcgan:float32:channels_last:train", torch.device("cuda"))
    converted = gnn.convert(copy.deepcopy(base))
    kept, stream = [], torch.cuda.Stream()
    for crowd in (0, 100, 400, 1000):
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            while len(kept) < crowd:
                graph = torch.cuda.CUDAGraph()
                graph.capture_begin()
                y.add_(1)
                graph.capture_end()
                kept.append(graph)
        torch.cuda.current_stream().wait_stream(stream)
        print(f"== {crowd} other graphs kept", flush=True)
        row("a graph of 1 tiny kernel", kept[0].replay if kept else lambda: None, cycles)
        row("torch layer step", lambda: torch.autograd.grad(theirs(x), [x, *theirs.parameters()], g), cycles)
        row("ours layer step", lambda: torch.autograd.grad(ours(x), [x, *ours.parameters()], g), cycles)
        row("torch dcgan step", step(base), cycles, ("live",))
        row("ours dcgan step", step(converted), cycles, ("live",))


def model(cycles: float) -> None:
    device = torch.device("cuda")
    for config in ("dcgan:float32:channels_last:train", "vae:float32:channels_last:train"):
        base, step = zoo_config(config, device)
        converted = gnn.convert(copy.deepcopy(base))
        print(f"== {config}", flush=True)
        for label, m in (("torch", base), ("ours", converted)):
            fn = step(m)
            row(label, fn, cycles)
            gc.disable()
            try:
                row(f"{label}, gc off", fn, cycles)
            finally:
                gc.enable()
            with torch.autograd.set_multithreading_enabled(False):
                row(f"{label}, device threads off", fn, cycles)


def main() -> None:
    print(torch.cuda.get_device_name(), flush=True)
    cycles = sleep_cycles() / SLEEP_S
    if sys.argv[1:] == ["--crowded"]:
        crowded(cycles)
        return
    print("== tiny graphs", flush=True)
    tiny(cycles)
    print("== dcgan channels_last layer (128, 256, 8, 8)", flush=True)
    layer(cycles)
    model(cycles)


if __name__ == "__main__":
    main()
