"""Which of a model's layers lose in the model, where each wins alone (session 49: the VAE
decoder's float32 channels_last forward read 0.89-0.91x with its five transposed
convolutions swapped, each of them 1.04-1.62x timed alone by convert's report).

Per configuration, timed in turns and paired against torch's model (measure.timed, back to
back): the model with every transposed convolution ours, with only layer i ours (each i),
and with every one ours but layer i. A layer that costs its neighbours, or that its
neighbours make dearer, shows in its own row; the sum of the single swaps against the
whole says whether the losses add up or come from the mix.

    PYTHONPATH=. python benches/in_model_probe.py [REPEATS] [model:precision:layout:mode ...]

On a machine without a GPU it runs the zoo's reduced sizes (a check that it runs).
"""
import copy
import sys

import torch

from gemmconv import measure
from gemmconv import nn as gnn

sys.path.insert(0, "benches")
from probe_lib import zoo_setup  # noqa: E402


def swapped(model: torch.nn.Module, names: set) -> torch.nn.Module:
    """A deep copy of ``model`` with the transposed convolutions named in ``names`` made
    gemmconv's (their class changed, as gemmconv.nn.convert changes it)."""
    model = copy.deepcopy(model)
    ours = {torch.nn.ConvTranspose1d: gnn.ConvTranspose1d,
            torch.nn.ConvTranspose2d: gnn.ConvTranspose2d,
            torch.nn.ConvTranspose3d: gnn.ConvTranspose3d}
    for name, module in model.named_modules():
        if name in names:
            module.__class__ = ours[type(module)]
    return model


def main(args: list[str]) -> None:
    repeats = int(args.pop(0)) if args and args[0].isdigit() else 12
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    small = device.type == "cpu"
    print(torch.cuda.get_device_name() if not small else "CPU, reduced sizes", flush=True)
    for config in args or ["vae:float32:channels_last:forward"]:
        setup, step_of = zoo_setup(config, device)
        base = setup.model
        with setup.cast:
            layers = [lname for lname, _, _ in measure.layer_inputs(base, setup.x,
                                                                   gnn.TRANSPOSED)]
        variants = {"torch": base, "every": swapped(base, set(layers))}
        for lname in layers:
            variants[f"only {lname}"] = swapped(base, {lname})
            variants[f"all but {lname}"] = swapped(base, set(layers) - {lname})
        steps = {k: step_of(m) for k, m in variants.items()}
        timed = measure.timed(device, steps, repeats, "torch")
        print(f"== {config}: torch {timed.ms['torch']:.3f} ms a step", flush=True)
        for k in variants:
            if k != "torch":
                print(f"  {k:24s} {timed.ms[k]:.3f} ms {timed.speedup[k]:.3f}x", flush=True)
        alone = sum(timed.ms[f"only {lname}"] - timed.ms["torch"] for lname in layers)
        print(f"  the single swaps' differences summed: {alone * 1e3:+.0f} us; every layer "
              f"swapped: {(timed.ms['every'] - timed.ms['torch']) * 1e3:+.0f} us", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
