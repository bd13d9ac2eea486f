"""Where a small layer's training step spends the host's time, phase by phase (session 49's
A, live_probe.py: DCGAN's second layer, float32 channels_last, a step costs ours 400-520 us
of host time against torch's 230-290, while our backward called directly takes 23-48).

With the GPU kept busy (a sleep kernel first, so that no call waits for it), each step
is cut by time stamps into: the module's forward; autograd.grad until our backward starts
(on autograd's device thread); our backward (``ops._gradients``: saved tensors, the plan,
the launches); from its return until autograd.grad returns (the engine's checks, the
gradient's accumulation); and letting the output go (the graph freed). Median us of each
over the steps, torch's module (no backward stamps: its node is C++) and ours, device
threads on and off. Then our backward's pieces on one call, timed one by one. With
``--models``: DCGAN's and the VAE decoder's float32 channels_last steps, torch's and
converted, back to back.

    PYTHONPATH=. python benches/step_phases_probe.py [--models]
"""
import statistics
import sys
import time

import torch

from gemmconv import ops

sys.path.insert(0, "benches")
from probe_lib import layer_pair  # noqa: E402
from sync_probe import sleep_cycles  # noqa: E402

STEPS = 200
STAMPS: list = []
_gradients = ops._gradients


def _stamped_gradients(ctx, grad_output):
    STAMPS.append(("backward in", time.perf_counter()))
    grads = _gradients(ctx, grad_output)
    STAMPS.append(("backward out", time.perf_counter()))
    return grads


def phases(m: torch.nn.Module, x: torch.Tensor, g: torch.Tensor, cycles: int) -> dict:
    """Median us of each phase of ``STEPS`` steps of ``m`` on ``x``."""
    leaves = [x, *m.parameters()]
    cuts = []
    for _ in range(10):
        torch.autograd.grad(m(x), leaves, g)
    torch.cuda.synchronize()
    torch.cuda._sleep(cycles)
    for _ in range(STEPS):
        STAMPS.clear()
        t0 = time.perf_counter()
        out = m(x)
        t1 = time.perf_counter()
        torch.autograd.grad(out, leaves, g)
        t2 = time.perf_counter()
        del out
        t3 = time.perf_counter()
        stamps = dict(STAMPS)
        cut = {"forward": t1 - t0}
        if stamps:
            cut["grad to ours"] = stamps["backward in"] - t1
            cut["ours"] = stamps["backward out"] - stamps["backward in"]
            cut["ours to return"] = t2 - stamps["backward out"]
        else:
            cut["grad"] = t2 - t1
        cut["free"] = t3 - t2
        cut["step"] = t3 - t0
        cuts.append(cut)
    torch.cuda.synchronize()
    return {k: statistics.median(c[k] for c in cuts) * 1e6 for k in cuts[0]}


def pieces(ours: torch.nn.Module, x: torch.Tensor, g: torch.Tensor, cycles: int) -> None:
    """Our backward's pieces, each timed alone on the graph of one forward."""
    out = ours(x)
    node = out.grad_fn
    leaves = [x, *ours.parameters()]

    def timed(label, fn, repeats=200):
        torch.cuda.synchronize()
        torch.cuda._sleep(cycles)
        t0 = time.perf_counter()
        for _ in range(repeats):
            fn()
        us = (time.perf_counter() - t0) / repeats * 1e6
        torch.cuda.synchronize()
        print(f"    {label:44s} {us:7.1f}", flush=True)
    timed("node.saved_tensors", lambda: node.saved_tensors)
    timed("node.needs_input_grad", lambda: node.needs_input_grad)
    timed("ops._gradients(node, g)", lambda: ops._gradients(node, g))
    timed("node.apply(g) (BackwardCFunction.apply)", lambda: node.apply(g))
    timed("autograd.grad(out, leaves, g, retain_graph)",
          lambda: torch.autograd.grad(out, leaves, g, retain_graph=True))
    timed("autograd.grad(out, [weight], g, retain_graph)",
          lambda: torch.autograd.grad(out, [ours.weight], g, retain_graph=True))
    timed("torch.empty_like(x)", lambda: torch.empty_like(x))
    timed("forward, no grad", lambda: ours(x.detach()))


def models() -> None:
    """The zoo's DCGAN and VAE decoder float32 channels_last steps, torch's and converted,
    back to back (live_probe.row's live mode), three times in turns."""
    import copy
    from gemmconv import nn as gnn
    from live_probe import row
    from probe_lib import zoo_config
    for config in ("dcgan:float32:channels_last:train", "vae:float32:channels_last:train"):
        base, step = zoo_config(config, torch.device("cuda"))
        converted = gnn.convert(copy.deepcopy(base))
        print(f"== {config}", flush=True)
        for _ in range(3):
            for label, m in (("torch", base), ("ours", converted)):
                row(label, step(m), 0, ("live",))


def main() -> None:
    print(torch.cuda.get_device_name(), flush=True)
    if sys.argv[1:] == ["--models"]:
        models()
        return
    cycles = sleep_cycles()   # 0.2 s: more than STEPS steps take
    ops._gradients = _stamped_gradients
    for layout in ("channels_last", "planar"):
        theirs, ours, x = layer_pair("dcgan", layout)
        g = torch.randn_like(theirs(x))
        for threads in (True, False):
            with torch.autograd.set_multithreading_enabled(threads):
                for label, m in (("torch", theirs), ("ours", ours)):
                    cut = phases(m, x, g, cycles)
                    print(f"== dcgan {layout}, device threads {'on' if threads else 'off'}, "
                          f"{label}: " + ", ".join(f"{k} {v:.1f}" for k, v in cut.items()),
                          flush=True)
        if layout == "channels_last":
            ops._gradients = _gradients
            pieces(ours, x, g, cycles)
            ops._gradients = _stamped_gradients


if __name__ == "__main__":
    main()
