"""Do our layers make their neighbours' host time dearer?

Session 36 (H100): in the converted VAE decoder's step, torch's own ops around our layers
cost the host more than in torch's model (cudnn_batch_norm 140 against 101 us a call,
cudaLaunchKernel 12.6 against 8.5), under the profiler, whose overhead is not uniform.
This probe measures without it, host time only (the GPU kept busy by a sleep kernel, so
that no call waits for it):

1. micro: 20 small torch launches (``a.add_(1)``) after nothing, after a kept CUDA graph's
   replay, after two plain launches, after a Python call that allocates as ours do; each
   less the host time of what precedes it alone. If a graph's replay makes the launches
   after it dearer, the replay's row exceeds the plain row.
2. models: per configuration, in turns, back to back (the zoo's timer) and host time with
   the GPU busy: torch's model, convert(model), convert(model) with graphs off, and a shim
   (torch's ConvTranspose2d inside a Python module of ours: what a Python layer alone
   costs its neighbours); each also with Python's garbage collector off.

    PYTHONPATH=. python benches/context_probe.py vae-decoder:forward:float32:channels_last ...
"""
import copy
import gc
import statistics
import sys

import torch

sys.path.insert(0, "benches")
from lt_probe import model_step, zoo_config  # noqa: E402
from sync_probe import host_time, sleep_cycles  # noqa: E402

from gemmconv import graphs  # noqa: E402
from gemmconv.measure import timers  # noqa: E402

ROUNDS = 7


def busy_host_us(fns: dict, repeats: int, cycles: int) -> dict:
    """Median host us a call of each of ``fns`` (``repeats`` back to back behind a sleep
    kernel), in turns over ROUNDS rounds."""
    times = {k: [] for k in fns}
    for r in range(ROUNDS):
        for k in list(fns)[r % len(fns):] + list(fns)[:r % len(fns)]:
            times[k].append(host_time(fns[k], repeats, cycles) * 1e6)
    return {k: statistics.median(v) for k, v in times.items()}


def micro(cycles: int) -> None:
    a = torch.zeros(1024, device="cuda")
    b = torch.zeros(1024, device="cuda")
    for nodes in (2, 8):
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            b.add_(1)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            for _ in range(nodes):
                b.add_(1)

        def launches():
            for _ in range(20):
                a.add_(1)

        def plain():
            for _ in range(nodes):
                b.add_(1)

        def python_like_ours():
            # keys and small objects, as a replayed call builds
            key = tuple((i, (1, 2), "x") for i in range(40))
            return {key: [object() for _ in range(20)]}

        fns = {"20 launches": launches, "graph": graph.replay, "graph + 20": lambda: (graph.replay(), launches()),
               f"{nodes} plain": plain, f"{nodes} plain + 20": lambda: (plain(), launches()),
               "python": python_like_ours, "python + 20": lambda: (python_like_ours(), launches())}
        us = busy_host_us(fns, 30, cycles)   # 30 x 22 launches: short of the launch queue's ~1000
        alone = us["20 launches"]
        print(f"micro, graph of {nodes} nodes: host us a call, GPU busy (median of {ROUNDS} rounds of 30)")
        for k, v in us.items():
            print(f"  {k:>16}: {v:8.2f}")
        print(f"  20 launches after: nothing {alone:.2f} | the graph {us['graph + 20'] - us['graph']:.2f} | "
              f"{nodes} plain launches {us[f'{nodes} plain + 20'] - us[f'{nodes} plain']:.2f} | "
              f"python {us['python + 20'] - us['python']:.2f}")


class Shim(torch.nn.ConvTranspose2d):
    """torch's ConvTranspose2d behind a Python forward: what a Python layer alone costs."""

    def forward(self, input, output_size=None):
        return torch.nn.functional.conv_transpose2d(
            input, self.weight, self.bias, self.stride, self.padding, self.output_padding,
            self.groups, self.dilation)


def shimmed(model: torch.nn.Module) -> torch.nn.Module:
    model = copy.deepcopy(model)
    for m in model.modules():
        if type(m) is torch.nn.ConvTranspose2d:
            m.__class__ = Shim
    return model


def models(configs: list, cycles: int) -> None:
    device = torch.device("cuda")
    for config in configs:
        base, ours, x, cast, mode = zoo_config(config)
        variants = {"torch": base, "ours": ours, "shim": shimmed(base)}
        fns = {k: model_step(m, x, cast, mode) for k, m in variants.items()}
        print(f"\n{config}")
        for gc_on in (True, False):
            if not gc_on:
                gc.collect()
                gc.disable()
            for graphed in (True, False):
                graphs.set_graph_memory_limit(512 << 20 if graphed else 0)
                graphs.forget()   # (a limit of 0 let go of every graph, never to capture it again)
                for fn in fns.values():
                    for _ in range(3):   # a second call at the same addresses captures graphs
                        fn()
                ms = timers(device, fns, 15, back_to_back=True)
                host = busy_host_us(fns, 5 if mode == "eval" else 1, cycles)   # well within the launch queue
                row = " | ".join(f"{k} {ms[k]:.3f} ms ({ms['torch'] / ms[k]:.2f}x), host {host[k] / 1e3:.3f}"
                                 for k in fns)
                print(f"  gc {'on ' if gc_on else 'off'} graphs {'on ' if graphed else 'off'}: {row}")
            gc.enable()
        graphs.set_graph_memory_limit(512 << 20)


def main(configs):
    cycles = sleep_cycles()
    micro(cycles)
    models(configs, cycles)


if __name__ == "__main__":
    main(sys.argv[1:] or ["vae-decoder:forward:float32:channels_last"])
