"""What ops._GraphedBackward's graphs save a training step: zoo models' steps with it and
with its calls launched kernel by kernel (as before it, when they had no replay), and
torch's, timed in turns in one process.

    PYTHONPATH=. python benches/graphed_backward_probe.py vae-decoder:train:float32:NCHW ...
"""
import sys

import torch

from gemmconv import bench, graphs, ops, zoo
from gemmconv.measure import timers


def main(configs):
    device = torch.device("cuda")
    off = [False]
    launch = graphs.launch

    def patched(owner, *args):
        return False if off[0] and isinstance(owner, ops._GraphedBackward) else launch(owner, *args)
    graphs.launch = patched   # (ops calls graphs.launch)

    def ungraphed(fn):
        def run():
            off[0] = True
            try:
                return fn()   # (autograd.grad returns once the backward ran)
            finally:
                off[0] = False
        return run

    for config in configs:
        name, mode, precision, layout = config.split(":")
        entry = zoo.by_name([name])[0]
        work = bench.ModelWorkload(entry, False, device, precision, layout, mode, repeats=10)
        runners = {"torch": work.runners["torch"], "graphed": work.runners["every"],
                   "ungraphed": ungraphed(work.runners["every"])}
        kinds = sorted({type(r).__name__ for r in ops._backward_replays.values()})
        for round_ in range(2):
            t = timers(device, runners, 20, back_to_back=True)
            print(f"{config} ({round_}): torch {t['torch']:.3f} ms; converted, graphed "
                  f"{t['graphed']:.3f} ({t['torch'] / t['graphed']:.2f}x), ungraphed "
                  f"{t['ungraphed']:.3f} ({t['torch'] / t['ungraphed']:.2f}x); backward replays "
                  f"{kinds}", flush=True)
        ops._replays.clear()
        ops._backward_replays.clear()


if __name__ == "__main__":
    main(sys.argv[1:] or ["vae-decoder:train:float32:NCHW"])
