"""The host's time of the zoo's host-bound steps, against the floor a Python layer has.

bound_probe.py (session 45, A, H100) put DCGAN's float32 NCHW step at 2.907 ms with torch's
layers, 3.093 with ours and 1.706 with the transposed convolutions free (bench.free_layers:
an autograd Function handing out drawn tensors). Its GPU work is a fraction of that: the
steps wait for the host. Here, with the GPU kept busy (a sleep kernel queued first), so
that only the host's time counts:

- each model's step (torch's layers, ours, free), ms;
- each transposed convolution of it alone, forward (no grad) and step (forward and
  ``autograd.grad``), us, torch's module, ours and free;
- cProfile of the converted model's steps (autograd's device threads off, so that it sees
  the backward), own time in us a step, by function.

    PYTHONPATH=. python benches/host_floor_probe.py [model:precision:layout ...]
"""
import copy
import cProfile
import pstats
import sys

import torch

sys.path.insert(0, "benches")
from sync_probe import host_time, sleep_cycles  # noqa: E402

from gemmconv import bench, zoo  # noqa: E402
from gemmconv import nn as gnn  # noqa: E402
from gemmconv.measure import layer_inputs  # noqa: E402


def best_us(fn, cycles: int, repeats: int = 20) -> float:
    return min(host_time(fn, repeats, cycles) for _ in range(5)) * 1e6


def layer_calls(module: torch.nn.Module, x: torch.Tensor, cast, train: bool) -> dict:
    """Forward and step of ``module`` on ``x`` under ``cast``."""
    leaves = [x] * x.requires_grad + [p for p in module.parameters()]
    grad = []

    def forward():
        with cast, torch.no_grad():
            module(x)

    def step():
        with cast:
            out = module(x)
        if not grad:
            grad.append(torch.randn_like(out))
        torch.autograd.grad(out, leaves, grad[0])
    return {"forward": forward, "step": step} if train else {"forward": forward}


def main(configs):
    device = torch.device("cuda")
    cycles = sleep_cycles() // 4
    for config in configs or ["dcgan:float32:NCHW", "dcgan:float32:channels_last",
                              "dcgan:bf16-autocast:channels_last", "vae:float32:channels_last"]:
        name, precision, layout = config.split(":")
        entry = zoo.by_name([name])[0]
        model, x, cast, grad_mode, fmt = bench.model_setup(entry, False, device, precision,
                                                           layout, "train")
        with cast, grad_mode:
            grad = torch.randn_like(model(x))
            free = bench.free_layers(copy.deepcopy(model), x)
        every = gnn.convert(copy.deepcopy(model))
        variants = {"torch": model, "ours": every, "free": free}
        steps = {k: bench.model_step(m, x, cast, grad_mode, grad) for k, m in variants.items()}
        for fn in steps.values():
            for _ in range(5):
                fn()
        host = {k: best_us(fn, cycles, 10) / 1e3 for k, fn in steps.items()}
        print(f"== {entry.name} {precision} {layout} train step, host ms (GPU busy): "
              + ", ".join(f"{k} {v:.3f}" for k, v in host.items()), flush=True)

        with cast:
            found = layer_inputs(model, x, gnn.TRANSPOSED)
        layers = dict(zip(every.modules(), free.modules()))
        by_module = dict(zip(model.modules(), every.modules()))
        for lname, module, spec in found:
            xi = spec.draw()
            ours = by_module[module]
            row = []
            for kind, m in (("torch", module), ("ours", ours), ("free", layers[ours])):
                calls = layer_calls(m, xi, cast, True)
                for fn in calls.values():
                    for _ in range(5):
                        fn()
                row.append(f"{kind} " + " / ".join(f"{best_us(fn, cycles):.0f}"
                                                   for fn in calls.values()))
            print(f"  {lname} {spec.shape} {spec.dtype} (forward / step us): "
                  + " | ".join(row), flush=True)

        with torch.autograd.set_multithreading_enabled(False):
            for _ in range(5):
                steps["ours"]()
            torch.cuda.synchronize()
            torch.cuda._sleep(cycles * 4)
            prof = cProfile.Profile()
            n = 200
            prof.enable()
            for _ in range(n):
                steps["ours"]()
            prof.disable()
            torch.cuda.synchronize()
        stats = pstats.Stats(prof).stats
        top = sorted(stats.items(), key=lambda kv: -kv[1][2])[:40]
        total = sum(v[2] for v in stats.values()) / n * 1e6
        print(f"  cProfile of ours' step (device threads off): {total:.0f} us own time a step; "
              f"by function, own us a step (calls a step):")
        for (file, line, func), (cc, nc, tt, ct, _) in top:
            where = file.split("site-packages/")[-1].split("/work/main/")[-1]
            print(f"    {tt / n * 1e6:7.1f} {nc / n:5.1f}  {func} ({where}:{line})")
        del model, every, free, variants, steps
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
