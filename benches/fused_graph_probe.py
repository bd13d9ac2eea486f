"""Fused forwards launched as CUDA graphs, against launched directly (graphs.launch
declining every call), beside torch, in turns in one process. Until change 126 calls above
2^26 output elements launched directly (session 41's run R timed that cap, lifted here).

Session 41's layer.py on 2d-64to128 channels_last (H100, float32): our call took 2.703 ms
from an idle GPU, its kernel 2.456; torch's 2.640. The 0.25 ms between is the host's work
before the launch (the weights' reorder, the plan's lookup, the descriptors, Triton's
launcher), which a graph of the call replaces by one launch. Per case and layout: ms a call
from an idle GPU (as the bench times), torch / launched / graphed, and whether the graphed
output matched the launched one bit for bit.

    PYTHONPATH=. python benches/fused_graph_probe.py [--dtype bfloat16] [CASES]
"""
import argparse

import torch

from gemmconv import cases, channels_last, graphs
from gemmconv.bench import OURS, TORCH
from gemmconv.measure import timers

NAMES = ["2d-1024", "2d-3x7-512", "2d-64to128", "2d-512x1024", "2d-3x7-padded", "3d-64cube",
         "3d-3x5x7", "1d-dil3"]
LAUNCH = graphs.launch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="?", default=",".join(NAMES))
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    opts = parser.parse_args()
    dtype, names = getattr(torch, opts.dtype), opts.cases.split(",")
    print(torch.cuda.get_device_name(), dtype, flush=True)
    print(f"{'case':16} {'layout':14} {'torch':>7} {'launched':>9} {'graphed':>8} "
          f"{'ratio l':>8} {'ratio g':>8} same")
    for case in (c for c in cases.BENCH if c.name in names):
        for layout in ("planar", "channels_last") if case.nd > 1 else ("planar",):
            gen = torch.Generator().manual_seed(0)
            x, w, b = case.tensors(dtype, "cuda", gen, distribution=torch.rand)
            if layout == "channels_last":
                x = x.contiguous(memory_format=channels_last.memory_format(x.dim()))
            theirs, ours = TORCH[case.nd], OURS[case.nd]

            def variant(launch):
                def call():
                    graphs.launch = launch
                    return ours(x, w, b, **case.kwargs)
                return call
            fns = {"torch": lambda: theirs(x, w, b, **case.kwargs),
                   "launched": variant(lambda *args: False), "graphed": variant(LAUNCH)}
            with torch.no_grad():
                outs = [fns[k]().clone() for k in ("launched", "graphed", "graphed", "graphed")]
                same = all(torch.equal(outs[0], o) for o in outs[1:])
                ms = timers(torch.device("cuda"), fns, 20)
            graphs.launch = LAUNCH
            print(f"{case.name:16} {layout:14} {ms['torch']:7.3f} {ms['launched']:9.3f} "
                  f"{ms['graphed']:8.3f} {ms['torch'] / ms['launched']:8.2f} "
                  f"{ms['torch'] / ms['graphed']:8.2f} {same}", flush=True)
            x = w = b = outs = fns = None   # (the next case's memory)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
