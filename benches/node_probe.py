"""Does the C++ autograd node (gemmconv/_node.py) win back a converted model's training step?
(Session 50: DCGAN's channels_last step read 0.90x torch's with autograd's device threads
on, 1.10x with them off: the Python node on the device thread.)

Per configuration, paired against torch's model in turns (measure.timed): the converted
model as it runs (its steady calls through the C++ node), and the same with the node
refused (every call's node the Python Function, as before the node), in one process.

    PYTHONPATH=. python benches/node_probe.py [REPEATS] [model:precision:layout:mode ...]

On a machine without a GPU it runs the zoo's reduced sizes (a check that it runs).
"""
import copy
import sys
import types

import torch

from gemmconv import _node, measure, ops
from gemmconv import nn as gnn

sys.path.insert(0, "benches")
from probe_lib import zoo_setup  # noqa: E402

CONFIGS = ["dcgan:float32:channels_last:train", "dcgan:float32:NCHW:train",
           "vae:float32:channels_last:train", "vae:float32:NCHW:train",
           "vae:bf16-autocast:channels_last:train", "dcgan:bf16-autocast:channels_last:train"]
_REFUSED = types.SimpleNamespace(load=lambda: None)


def python_node(step):
    """``step`` with the C++ node refused: module calls take the Python Function."""
    def run():
        ops._node = _REFUSED
        try:
            return step()
        finally:
            ops._node = _node
    return run


def main(args: list[str]) -> None:
    repeats = int(args.pop(0)) if args and args[0].isdigit() else 15
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(torch.cuda.get_device_name() if device.type == "cuda" else "CPU, reduced sizes",
          flush=True)
    print("C++ node built:", _node.load() is not None, flush=True)
    for config in args or CONFIGS:
        setup, step_of = zoo_setup(config, device)
        ours = step_of(gnn.convert(copy.deepcopy(setup.model)))
        steps = {"torch": step_of(setup.model), "ours, C++ node": ours,
                 "ours, Python node": python_node(ours)}
        timed = measure.timed(device, steps, repeats, "torch")
        print(f"== {config}: torch {timed.ms['torch']:.3f} ms a step", flush=True)
        for k in steps:
            if k != "torch":
                print(f"  {k:18s} {timed.ms[k]:.3f} ms {timed.speedup[k]:.3f}x", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
