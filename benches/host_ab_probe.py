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

With ``--layers``: each transposed convolution of DCGAN and the VAE decoder (float32
channels_last, on the input the model gives it), its training step paired (torch, ours),
and per step the GPU's kernel time (torch.profiler) and the host's time with the GPU kept
busy, torch's and ours: whether a layer that loses waits on its kernels or on the host.

    PYTHONPATH=. python benches/host_ab_probe.py [REPEATS] [--layers]
"""
import copy
import sys

import torch

from gemmconv import bench, measure
from gemmconv import nn as gnn

sys.path.insert(0, "benches")
from probe_lib import LAYERS, layer_pair, zoo_setup  # noqa: E402


def report(title: str, fns: dict, repeats: int) -> None:
    timed = measure.timed(torch.device("cuda"), fns, repeats, "torch")
    print(f"== {title}: " + ", ".join(f"{k} {timed.ms[k] * 1e3:.0f} us {timed.speedup[k]:.3f}x"
                                      for k in fns), flush=True)


def layers(repeats: int) -> None:
    """See the module's docstring (--layers)."""
    from layer import kernel_times
    from probe_lib import busy_us
    from sync_probe import sleep_cycles
    cycles = sleep_cycles()
    device = torch.device("cuda")
    for name in ("dcgan", "vae"):
        setup, _ = zoo_setup(f"{name}:float32:channels_last:train", device)
        for lname, theirs, spec in measure.layer_inputs(setup.model, setup.x, gnn.TRANSPOSED):
            ours = gnn.convert(copy.deepcopy(theirs))
            x_in = spec.draw().requires_grad_(spec.requires_grad)
            g = torch.randn_like(theirs(x_in))

            def step(m):
                leaves = [x_in, *m.parameters()] if spec.requires_grad else [*m.parameters()]
                return lambda: torch.autograd.grad(m(x_in), leaves, g)
            fns = {"torch": step(theirs), "ours": step(ours)}
            timed = measure.timed(device, fns, repeats, "torch")
            gpu = {k: sum(ms for _, ms in kernel_times(fn)) * 1e3 for k, fn in fns.items()}
            host = {k: busy_us(lambda _, fn=fn: fn(), cycles) for k, fn in fns.items()}
            print(f"== {name} {lname} {spec.shape}: step " + ", ".join(
                f"{k} {timed.ms[k] * 1e3:.0f} us ({timed.speedup[k]:.3f}x; kernels "
                f"{gpu[k]:.0f}, host {host[k]:.0f})" for k in fns), flush=True)


def main() -> None:
    repeats = int(sys.argv[1]) if sys.argv[1:] and sys.argv[1].isdigit() else 20
    print(torch.cuda.get_device_name(), flush=True)
    if "--layers" in sys.argv:
        layers(repeats)
        return
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
    for config in ("dcgan:float32:channels_last:train", "vae:float32:channels_last:train"):
        setup, step_of = zoo_setup(config, torch.device("cuda"))
        with setup.cast, setup.grad_mode:
            free = bench.free_layers(copy.deepcopy(setup.model), setup.x)
        models = {"torch": setup.model, "ours": gnn.convert(copy.deepcopy(setup.model)),
                  "free": free}
        report(config, {k: step_of(m) for k, m in models.items()}, repeats)

if __name__ == "__main__":
    main()
