"""Do torch's own launches cost the host more right after a CUDA graph's launch?

Session 36 (N) found torch's ops around our layers costing the host more in a converted
model than in torch's (its BatchNorms 1010 -> 1403 us a step), and session 44 (P) found a
converted layer's step only 13-73 us dearer than torch's module alone, while DCGAN's
model step loses 0.5-0.7 ms. Our small layers launch as CUDA graphs. Here, with the GPU
kept busy (a sleep kernel queued first, so that nothing waits for it), the host's time a
call of a BatchNorm (training mode) and ReLU on DCGAN's activations, alone, after a
one-kernel graph's launch, and after that one kernel launched plainly; each preceding
launch's own time, timed alone, taken off.

    PYTHONPATH=. python benches/after_graph_probe.py
"""
import sys

import torch

sys.path.insert(0, "benches")
from sync_probe import host_time, sleep_cycles  # noqa: E402

CALLS = 100


def main():
    print(torch.cuda.get_device_name(), flush=True)
    cycles = sleep_cycles() // 4
    for shape in ((128, 256, 8, 8), (128, 128, 16, 16)):
        for fmt in (torch.contiguous_format, torch.channels_last):
            x = torch.randn(shape, device="cuda").contiguous(memory_format=fmt)
            bn = torch.nn.BatchNorm2d(shape[1]).cuda().to(memory_format=fmt)
            buf = torch.zeros(1 << 16, device="cuda")
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                buf.add_(1)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                buf.add_(1)
            ops = lambda: torch.relu_(bn(x))   # noqa: E731
            fns = {"ops": ops, "graph": graph.replay, "kernel": lambda: buf.add_(1),
                   "graph + ops": lambda: (graph.replay(), ops()),
                   "kernel + ops": lambda: (buf.add_(1), ops())}
            for fn in fns.values():
                fn()
            runs = {k: [] for k in fns}
            for _ in range(7):   # in turns
                for k, fn in fns.items():
                    runs[k].append(host_time(fn, CALLS, cycles) * 1e6)   # us a call
            us = {k: sorted(v)[len(v) // 2] for k, v in runs.items()}
            print(f"{shape} {'channels_last' if fmt == torch.channels_last else 'NCHW'}: "
                  f"BatchNorm + ReLU alone {us['ops']:.1f} us; after a graph's launch "
                  f"{us['graph + ops'] - us['graph']:.1f} (the launch alone {us['graph']:.1f}); "
                  f"after a plain kernel {us['kernel + ops'] - us['kernel']:.1f} (alone "
                  f"{us['kernel']:.1f})", flush=True)


if __name__ == "__main__":
    main()
