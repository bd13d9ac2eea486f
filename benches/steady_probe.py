"""A module's steady call (ops.module_conv_transpose's kept replay), piece by piece, planar
against channels_last (session 50: in the VAE decoder's forward our channels_last layers
cost the host about 30 us more a call than our planar ones).

Per VAE decoder layer shape (batch 2, so that the GPU keeps up with the host), the host
microseconds a call, over many calls in a row: torch's module; ours; and the pieces of
ours: the autocast pass, the plain-tensor check, the steady key, the output's allocation,
the replay's launch (graphed), and in training the call with its C++ node (_Steady.with_node:
the replay and the node's attach) and a whole step (forward and backward), torch's and ours;
and ours with the C++ forward refused (session 51's code: the forward's launch in Python).

    PYTHONPATH=. python benches/steady_probe.py [--profile]

With --profile, cProfile's top functions over a steady call's loop, with and without grad,
of the middle shape in channels_last (where the grad-mode call cost 20-70 us more).
"""
import contextlib
import cProfile
import pstats
import sys
import time
import types

import torch

from gemmconv import _node
from gemmconv import channels_last as cl
from gemmconv import nn as gnn
from gemmconv import ops

CALLS = 2000
SHAPES = [((512, 512), (2, 512, 4, 4)), ((256, 128), (2, 256, 16, 16)),
          ((64, 32), (2, 64, 64, 64))]


@contextlib.contextmanager
def python_forward():
    """Steady forwards launched in Python (the extension's forward refused)."""
    module = _node.load()
    refused = types.SimpleNamespace(load=lambda: types.SimpleNamespace(
        forward=lambda *args: None, Table=module.Table, attach=module.attach))
    ops._node = refused
    try:
        yield
    finally:
        ops._node = _node


def per_call(fn) -> float:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(CALLS):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6 / CALLS


def profiled(fn, title: str) -> None:
    per_call(fn)
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(CALLS):
        fn()
    profile.disable()
    torch.cuda.synchronize()
    print(f"== cProfile, {title}, {CALLS} calls", flush=True)
    pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(22)


def main(args: list[str]) -> None:
    print(torch.cuda.get_device_name(), flush=True)
    if "--profile" in args:
        (cin, cout), shape = SHAPES[1]
        ours = gnn.ConvTranspose2d(cin, cout, 3, 2, 1, output_padding=1).cuda().to(
            memory_format=torch.channels_last)
        x = torch.randn(shape, device="cuda").contiguous(memory_format=torch.channels_last)
        with torch.no_grad():
            profiled(lambda: ours(x), "no grad")
        xg = x.detach().requires_grad_()
        profiled(lambda: ours(xg), "grad")
        grad = torch.randn_like(ours(xg))
        params = list(ours.parameters())
        profiled(lambda: torch.autograd.grad(ours(xg), [xg, *params], grad),
                 "grad, forward and autograd.grad")
        return
    for (cin, cout), shape in SHAPES:
        for layout in ("planar", "channels_last"):
            kwargs = dict(kernel_size=3, stride=2, padding=1, output_padding=1)
            theirs = torch.nn.ConvTranspose2d(cin, cout, **kwargs).cuda()
            ours = gnn.ConvTranspose2d(cin, cout, **kwargs).cuda()
            x = torch.randn(shape, device="cuda")
            if layout == "channels_last":
                x = x.contiguous(memory_format=torch.channels_last)
                theirs, ours = (m.to(memory_format=torch.channels_last) for m in (theirs, ours))
            w, b = ours.weight, ours.bias
            with torch.no_grad():
                for _ in range(3):
                    ours(x)
                key = ops._steady_key(ours, x, w, b)
                steady = ops._steady[ours][key]
                a = steady.a
                interleaved = cl.suggested(x, w)
                times = {
                    "torch's module": per_call(lambda: theirs(x)),
                    "ours": per_call(lambda: ours(x)),
                    "autocast": per_call(lambda: ops._autocast(x, w, b)),
                    "plain check": per_call(lambda: ops._eager(x, w, b)),
                    "steady key": per_call(lambda: ops._steady_key(ours, x, w, b)),
                    "output's allocation": per_call(lambda: cl.empty(x, a.output_shape,
                                                                     interleaved)),
                    "replay (graphed)": per_call(lambda: steady.replay.graphed(x, w, b, a)),
                }
            xg = x.detach().requires_grad_()
            times["torch's module, grad"] = per_call(lambda: theirs(xg))
            times["ours, grad"] = per_call(lambda: ours(xg))
            with python_forward():
                with torch.no_grad():
                    times["ours, Python forward"] = per_call(lambda: ours(x))
                times["ours, grad, Python forward"] = per_call(lambda: ours(xg))
            node = _node.load()
            if node is not None:
                times["with_node"] = per_call(lambda: steady.with_node(node, xg, w, b, *key[:2]))
            grad = torch.randn_like(ours(xg))
            times["torch's step"] = per_call(lambda: theirs(xg).backward(grad))
            times["our step"] = per_call(lambda: ours(xg).backward(grad))
            print(f"== {layout} {shape} -> {cout}: " + ", ".join(
                f"{k} {v:.1f}" for k, v in times.items()) + " (us a call)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
