"""A small layer's cost, ours and a free layer's against torch's, paired (measure.timed,
back to back): the stick for changes to our host path. The host's speed on the device's
machines drifts by tens of percent within a process (session 49's D: the same step 1.8-2.8
ms), so that one code's medians against another process's say little; the paired speedup
over torch's layer in the same run does. Run the code before and after a change in turns,
a process each, and compare the speedups.

For DCGAN's second layer and the VAE decoder's third (probe_lib.LAYERS), float32, planar
and channels_last: the forward (no grad) and the training step (forward and autograd.grad
of input, weight and bias) of torch's module, ours, and a free one (an autograd Function
handing out drawn tensors: bench.free_layers, the floor of a Python layer); then DCGAN's and
the VAE decoder's float32 channels_last training steps, torch's, converted and free.

    PYTHONPATH=. python benches/host_ab_probe.py [REPEATS]
"""
import copy
import sys

import torch

from gemmconv import bench, measure, zoo
from gemmconv import nn as gnn

sys.path.insert(0, "benches")
from probe_lib import LAYERS, layer_pair  # noqa: E402


def report(title: str, fns: dict, repeats: int) -> None:
    timed = measure.timed(torch.device("cuda"), fns, repeats, "torch")
    print(f"== {title}: " + ", ".join(f"{k} {timed.ms[k] * 1e3:.0f} us {timed.speedup[k]:.3f}x"
                                      for k in fns), flush=True)


def main() -> None:
    repeats = int(sys.argv[1]) if sys.argv[1:] else 20
    print(torch.cuda.get_device_name(), flush=True)
    for name in LAYERS:
        for layout in ("planar", "channels_last"):
            theirs, ours, x = layer_pair(name, layout)
            free = bench.free_layers(torch.nn.Sequential(copy.deepcopy(theirs)), x)
            g = torch.randn_like(theirs(x))
            modules = {"torch": theirs, "ours": ours, "free": free}

            def forward(m):
                def call():
                    with torch.no_grad():
                        return m(x)
                return call

            def step(m):
                leaves = [x, *m.parameters()]
                return lambda: torch.autograd.grad(m(x), leaves, g)
            report(f"{name} {layout} forward", {k: forward(m) for k, m in modules.items()},
                   repeats)
            report(f"{name} {layout} step", {k: step(m) for k, m in modules.items()}, repeats)
    device = torch.device("cuda")
    for config in ("dcgan:float32:channels_last:train", "vae:float32:channels_last:train"):
        name, precision, layout, mode = config.split(":")
        base, x, cast, grad_mode, fmt = bench.model_setup(zoo.by_name([name])[0], False, device,
                                                          precision, layout, mode)
        with cast, grad_mode:
            grad = torch.randn_like(base(x))   # (in the output's layout)
            free = bench.free_layers(copy.deepcopy(base), x)
        models = {"torch": base, "ours": gnn.convert(copy.deepcopy(base)), "free": free}
        report(config, {k: bench.model_step(m, x, cast, grad_mode, grad)
                        for k, m in models.items()}, repeats)

if __name__ == "__main__":
    main()
