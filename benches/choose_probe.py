"""What convert(model, sample=) measured where its choice disagreed with the zoo's timing.

Session 37 (H100, F): DCGAN's float32 NCHW forward with every layer swapped ran 1.62x
torch's in the zoo's turns, yet convert(sample=) kept torch's layers (0/5, 1.00x). Here:
convert(sample=)'s report (each layer alone, and the whole model three ways), the share of
our calls a CUDA graph ran during it, then the model with every layer swapped and torch's,
timed in turns as the zoo does.

    PYTHONPATH=. python benches/choose_probe.py [model:mode:precision:layout]
"""
import copy
import sys

import torch

sys.path.insert(0, "benches")
from lt_probe import model_step, zoo_config  # noqa: E402

from gemmconv import graphs  # noqa: E402
from gemmconv import nn as gnn  # noqa: E402
from gemmconv.measure import timers  # noqa: E402


def main(config="dcgan:forward:float32:NCHW"):
    base, every, x, cast, mode = zoo_config(config)
    answers, launch = [], graphs.launch
    graphs.launch = lambda *args: answers.append(launch(*args)) or answers[-1]
    chosen = copy.deepcopy(base).train(mode == "train")
    with torch.set_grad_enabled(mode == "train"), cast():
        report = gnn.convert(chosen, sample=x)
    graphs.launch = launch
    print(report)
    print(f"graphs ran {sum(answers)} of {len(answers)} of our calls during convert(sample=)")
    fns = {"torch": model_step(base, x, cast, mode), "every": model_step(every, x, cast, mode),
           "chosen": model_step(chosen, x, cast, mode)}
    ms = timers(torch.device("cuda"), fns, 20, back_to_back=True)
    print("in turns: " + ", ".join(f"{k} {v:.3f} ms" for k, v in ms.items()))


if __name__ == "__main__":
    main(*sys.argv[1:])
