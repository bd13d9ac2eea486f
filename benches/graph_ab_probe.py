"""Do our CUDA graphs cost a model whose GPU, not its host, sets the pace? (Session 50: the
VAE decoder's float32 channels_last forward reads 0.89-0.91x converted, each layer alone
1.04-1.62x; session 49's profile put 94 us a step of idle GPU right before our graphs'
kernels.)

Per configuration, paired against torch's model in turns (measure.timed, back to back):
the converted model as it runs, and the same with gemmconv.graphs.paused() around each
step (every call launches its kernels one by one; the kept graphs stay kept).

    PYTHONPATH=. python benches/graph_ab_probe.py [REPEATS] [model:precision:layout:mode ...]

On a machine without a GPU it runs the zoo's reduced sizes (a check that it runs).
"""
import copy
import sys

import torch

from gemmconv import graphs, measure
from gemmconv import nn as gnn

sys.path.insert(0, "benches")
from probe_lib import graphs_paused, zoo_setup  # noqa: E402

CONFIGS = ["vae:float32:channels_last:forward", "vae:float32:channels_last:train",
           "vae:float32:NCHW:forward", "dcgan:float32:channels_last:forward",
           "dcgan:float32:channels_last:train", "vae:bf16-autocast:channels_last:forward"]


def main(args: list[str]) -> None:
    repeats = int(args.pop(0)) if args and args[0].isdigit() else 15
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(torch.cuda.get_device_name() if device.type == "cuda" else "CPU, reduced sizes",
          flush=True)
    for config in args or CONFIGS:
        setup, step_of = zoo_setup(config, device)
        ours = gnn.convert(copy.deepcopy(setup.model))
        graphed = step_of(ours)
        steps = {"torch": step_of(setup.model), "ours": graphed,
                 "ours, no graphs": graphs_paused(graphed)}
        timed = measure.timed(device, steps, repeats, "torch")
        print(f"== {config}: torch {timed.ms['torch']:.3f} ms a step; graphs kept "
              f"{graphs.kept()}", flush=True)
        for k in steps:
            if k != "torch":
                print(f"  {k:18s} {timed.ms[k]:.3f} ms {timed.speedup[k]:.3f}x", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
