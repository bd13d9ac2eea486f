"""How far the zoo's models could go: torch against convert(model) and against the model
with its transposed convolutions free (bench.free_layers: no kernels, only an autograd
Function's host time), in turns, back to back, every configuration of each model.

Issue 22 asks convert(model) for 1.2x a configuration; where the free layers' speedup (the
bound) is below that, no implementation of the transposed convolutions reaches it. The
with-sample variants of ``bench --models --bound`` are left out: they take most of its time.

    PYTHONPATH=. python benches/bound_probe.py [model ...]
"""
import copy
import math
import sys

import torch

from gemmconv import bench, zoo
from gemmconv import nn as gnn
from gemmconv.measure import timers


def main(names):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rows = []
    for entry in zoo.by_name(names or None):
        for precision, layout, mode in bench.model_configs(entry):
            model, x, cast, grad_mode, _ = bench.model_setup(entry, device.type == "cpu", device,
                                                            precision,
                                                            layout, mode)
            with cast, grad_mode:
                grad = torch.randn_like(model(x)) if mode == "train" else None
                free = bench.free_layers(copy.deepcopy(model), x)
            variants = {"torch": model, "every": gnn.convert(copy.deepcopy(model)), "free": free}
            fns = {k: bench.model_step(m, x, cast, grad_mode, grad) for k, m in variants.items()}
            ms = timers(device, fns, 10, back_to_back=True)
            rows.append((entry.name, mode, precision, layout, ms))
            print(f"{entry.name:<12} {mode:<8} {precision:<14} {layout:<14} torch "
                  f"{ms['torch']:8.3f} ms | convert {ms['every']:8.3f} "
                  f"{ms['torch'] / ms['every']:5.2f}x | free {ms['free']:8.3f} "
                  f"{ms['torch'] / ms['free']:5.2f}x", flush=True)
            del variants, fns, model, free
            torch.cuda.empty_cache()
    for variant, name in (("every", "convert(model)"), ("free", "bound (layers free)")):
        speedups = [ms["torch"] / ms[variant] for *_, ms in rows]
        print(f"{name}: geometric mean {math.exp(sum(map(math.log, speedups)) / len(speedups)):.2f}x, "
              f"min {min(speedups):.2f}x, max {max(speedups):.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
