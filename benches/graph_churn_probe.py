"""Do the zoo's timed turns launch our graphs, or capture new ones?

A graph is kept per call and per the addresses of its tensors (gemmconv/graphs.py). The
zoo times torch's model and the converted ones in turns (measure.timers), so between two
turns of one model the others allocate and free: if that moves a layer's tensors, its
timed calls find no graph at their addresses and run their kernels one by one, or capture
one (a second sighting). Session 36 found the VAE decoder's float32 step at 5.3 ms of host
time, as torch's (GPU kept busy), and 3.7 of GPU time against torch's 4.1, where the zoo's
turns timed it at 7.6 against torch's 5.9.

Per configuration: the zoo's turns with graphs (counting, in the timed turns only, the
graph launches replayed, run without a graph and captured, and the graphs kept per call),
then the same turns with graphs off (set_graph_memory_limit(0)), then torch's model and
the converted one alone, back to back.

    PYTHONPATH=. python benches/graph_churn_probe.py vae-decoder:train:float32:NCHW ...
"""
import collections
import sys

import torch

from gemmconv import bench, graphs, zoo
from gemmconv.measure import timers


def counted() -> collections.Counter:
    """Counts graphs.launch's outcomes and graphs._capture's calls from here on."""
    count = collections.Counter()
    launch, capture = graphs.launch, graphs._capture

    def counting_launch(owner, addresses, run, nbytes, device, stream):
        replayed = (id(owner), stream, *addresses) in graphs._graphs
        ran = launch(owner, addresses, run, nbytes, device, stream)
        count["replayed" if replayed else "captured" if ran else "no graph"] += 1
        return ran

    def counting_capture(*args, **kwargs):
        count["captures"] += 1
        return capture(*args, **kwargs)

    graphs.launch, graphs._capture = counting_launch, counting_capture   # (ops calls graphs.launch)
    return count


def main(configs):
    device = torch.device("cuda")
    count = counted()
    for config in configs:
        name, mode, precision, layout = config.split(":")
        entry = zoo.by_name([name])[0]
        work = bench.ModelWorkload(entry, False, device, precision, layout, mode, repeats=10)
        runners = {k: work.runners[k] for k in ("torch", "every")}
        for label, limit in (("graphs on", 512 << 20), ("graphs off", 0)):
            graphs.set_graph_memory_limit(limit)
            count.clear()
            kept = graphs.kept()
            times = timers(device, runners, 20, back_to_back=True)
            print(f"{config} turns, {label}: torch {times['torch']:.3f} ms, every "
                  f"{times['every']:.3f} ms ({times['torch'] / times['every']:.2f}x); launches "
                  f"{dict(count)}; graphs kept {kept} -> {graphs.kept()}", flush=True)
        graphs.set_graph_memory_limit(512 << 20)
        graphs.forget()   # (the limit of 0 let every graph go, never to be captured again)
        for label in ("torch", "every"):
            alone = timers(device, {label: runners[label]}, 20, back_to_back=True)[label]
            print(f"{config} alone: {label} {alone:.3f} ms", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["vae-decoder:train:float32:NCHW"])
