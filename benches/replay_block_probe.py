"""Does a CUDA graph's replay wait for the GPU? Host time of k launches queued behind a
long sleep kernel: k replays of a small graph (three kernels) against the same three
kernels launched k times. A launch that only enqueues takes microseconds whatever the GPU
is doing; one that waits takes the sleep on top (session 33's cProfile of a converted VAE
decoder, GPU busy, put 10 ms a call in ``CUDAGraph.replay``).

    PYTHONPATH=. python benches/replay_block_probe.py
"""
import time

import torch

from sync_probe import sleep_cycles


def main():
    x = torch.randn(1 << 16, device="cuda")
    y = torch.empty_like(x)

    def work():
        torch.mul(x, 2.0, out=y)
        y.add_(1.0)
        y.relu_()

    work()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        graph.capture_begin()
        work()
        graph.capture_end()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    cycles = sleep_cycles()
    for k in (1, 10, 100, 300, 1000, 3000):
        row = []
        for label, fn in (("launches", work), ("replays", graph.replay)):
            torch.cuda.synchronize()
            torch.cuda._sleep(cycles)
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            host = time.perf_counter() - t0
            torch.cuda.synchronize()
            row.append(f"{label} {host * 1e6 / k:8.1f} us each ({host * 1e3:7.1f} ms)")
        print(f"k={k:5d}: " + " | ".join(row), flush=True)


if __name__ == "__main__":
    main()
