"""What convert(model, sample=) measured where its choice disagreed with the zoo's timing.

Session 37 (H100, F): DCGAN's float32 NCHW forward with every layer swapped ran 1.62x
torch's in the zoo's turns, yet convert(sample=) kept torch's layers (0/5, 1.00x). Here:
convert(sample=)'s report (each layer alone, and the whole model three ways), the share of
our calls a CUDA graph ran during it (graphs.launch's, and the C++ extension's forwards and
backwards: session 52), then the model with every layer swapped and torch's, timed in turns
as the zoo does, and beside them one more copy timed as convert times its candidates (its
layers' classes set for each step: measure._model_step), torch's classes and ours.
(Session 52, H200: DCGAN's float32 NCHW training step with every layer swapped read 1.29x
in the zoo's turns, 0.93x in convert's own whole-model timing, which kept torch's.)

    PYTHONPATH=. python benches/choose_probe.py [model:mode:precision:layout]
"""
import copy
import sys

import torch

sys.path.insert(0, "benches")
from lt_probe import model_step, zoo_config  # noqa: E402

from gemmconv import _node, graphs, measure  # noqa: E402
from gemmconv import nn as gnn  # noqa: E402
from gemmconv.measure import timers  # noqa: E402


def swapped_step(m: torch.nn.Module, x: torch.Tensor, cast, mode: str, ours: bool):
    """A call of ``m`` as convert's whole-model timing makes it: its transposed convolutions'
    classes set for the step (torch's, or with ``ours`` gemmconv's)."""
    m.train(mode == "train")
    classes = {module: gnn.SWAPS[type(module)] if ours else type(module)
               for module in m.modules() if type(module) in gnn.TRANSPOSED}
    step = measure._model_step(m, x, classes, mode == "train")

    def fn():
        with torch.set_grad_enabled(mode == "train"), cast():
            step()
    return fn


def main(config="dcgan:forward:float32:NCHW"):
    base, every, x, cast, mode = zoo_config(config)
    answers, launch = [], graphs.launch
    graphs.launch = lambda *args: answers.append(launch(*args)) or answers[-1]
    node = _node.load()
    node.reset_outcomes()
    chosen = copy.deepcopy(base).train(mode == "train")
    with torch.set_grad_enabled(mode == "train"), cast():
        report = gnn.convert(chosen, sample=x)
    graphs.launch = launch
    print(report)
    print(f"graphs.launch ran a graph on {sum(answers)} of {len(answers)} calls during "
          f"convert(sample=); C++ forwards {node.forwards()}; C++ backwards {node.outcomes()}")
    swapped = copy.deepcopy(base)
    fns = {"torch": model_step(base, x, cast, mode), "every": model_step(every, x, cast, mode),
           "chosen": model_step(chosen, x, cast, mode),
           "torch, classes set a step": swapped_step(swapped, x, cast, mode, False),
           "every, classes set a step": swapped_step(swapped, x, cast, mode, True)}
    node.reset_outcomes()
    ms = timers(torch.device("cuda"), fns, 20, back_to_back=True)
    print("in turns: " + ", ".join(f"{k} {v:.3f} ms" for k, v in ms.items()))
    print(f"C++ forwards {node.forwards()}; C++ backwards {node.outcomes()}")


if __name__ == "__main__":
    main(*sys.argv[1:])
