"""The strided backward on the fused kernels (fused.strided_backward) against the column
routes, on the zoo's strided up-sampling layers and whole models.

DCGAN's and the VAE decoder's training steps lose to torch's on their strided layers' backward:
im2col of the output gradient and two GEMMs against cuDNN's dgrad and wgrad (benches/NOTES.md,
session 37: DCGAN's float32 channels_last k4 s2 steps 0.184 and 0.253 ms of kernels against
0.138 and 0.179). strided_backward reads the output gradient's phase planes instead of
columns. Per strided layer of each model (inputs recorded by hooks), dtype and layout, a
training step of the layer alone (forward, then the gradients of input, weight and bias),
back to back, in turns with torch's module: ours with the cost model's rule off, then every
call the kernels can take sent there (fused.strided_backward_preferred patched), then off
again; ms a step and GPU kernel ms a step. Then each model's whole training step, torch's
against convert(model)'s, with the rule off, on, off.

    PYTHONPATH=. python benches/strided_backward_probe.py [model ...]
"""
import copy
import sys
import time

import torch

sys.path.insert(0, "benches")
from process_probe import kernels  # noqa: E402

from gemmconv import channels_last as cl  # noqa: E402
from gemmconv import convert, fused, graphs, ops, zoo  # noqa: E402
from gemmconv.measure import timers  # noqa: E402

DEVICE = torch.device("cuda")


def layer_inputs(model: torch.nn.Module, x: torch.Tensor) -> list:
    """(module, input) of each strided transposed convolution in a forward of ``model``."""
    seen, hooks = [], []
    for m in model.modules():
        if isinstance(m, torch.nn.modules.conv._ConvTransposeNd) and set(m.stride) != {1}:
            hooks.append(m.register_forward_hook(lambda m, args, out: seen.append((m, args[0]))))
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return seen


def step(module, x: torch.Tensor, grad: torch.Tensor):
    leaves = [t for t in (x, module.weight, module.bias) if t is not None]

    def fn():
        torch.autograd.grad(module(x), leaves, grad)
    return fn


def in_turns(fns: dict, on: bool) -> tuple:
    """``(ms, gpu ms, ours's kernels)`` a call of each of ``fns``, the rule forced on or off
    (results/s43/A's first run of this probe left it as it was for "off", which took the
    strided backward too)."""
    rule = fused.strided_backward_preferred
    ops._backward_replays.clear()
    graphs.forget()
    fused.strided_backward_preferred = lambda *args: on
    try:
        ms = timers(DEVICE, fns, 15, back_to_back=True)
        each = {k: kernels(fn) for k, fn in fns.items()}
    finally:
        fused.strided_backward_preferred = rule
    return ms, {k: sum(v.values()) for k, v in each.items()}, each["ours"]


def layers(entry, dtype: torch.dtype, channels_last: bool) -> None:
    model = entry.build(False).to(DEVICE, dtype)
    x = entry.input(False, "cuda").to(dtype)
    if channels_last:
        model = model.to(memory_format=cl.memory_format(x.dim()))
        x = x.contiguous(memory_format=cl.memory_format(x.dim()))
    for module, inp in layer_inputs(model, x):
        inp = inp.detach().requires_grad_()
        ours = convert(copy.deepcopy(module))
        a = ops._args_from_lists(inp, module.weight, module.bias, module.stride, module.padding,
                                 module.output_padding, module.dilation, module.groups)
        takes = fused.backward_unavailable(a, inp, module.weight, cl.suggested(inp, module.weight))
        grad = torch.randn_like(module(inp))
        fns = {"torch": step(module, inp, grad), "ours": step(ours, inp, grad)}
        cells, pieces = [], {}
        for label, on in (("off", False), ("on", True), ("off", False)):
            ms, gpu, pieces[label] = in_turns(fns, on)
            cells.append(f"{label} {ms['ours']:.4f} ({gpu['ours']:.4f}) / torch "
                         f"{ms['torch']:.4f} ({gpu['torch']:.4f}) {ms['torch'] / ms['ours']:.2f}x")
        print(f"  {tuple(inp.shape)} -> {module.out_channels} k{module.kernel_size} "
              f"s{module.stride} [{'fused can' if takes is None else takes[:40]}]: "
              + " | ".join(cells), flush=True)
        for label in ("off", "on"):
            print(f"    {label}: " + ", ".join(f"{k[:40]} {v:.4f}" for k, v in
                                            list(pieces[label].items())[:6]), flush=True)


def model_steps(entry, dtype: torch.dtype, channels_last: bool) -> None:
    base = entry.build(False).to(DEVICE).train()
    x = entry.input(False, "cuda")
    if channels_last:
        base = base.to(memory_format=cl.memory_format(x.dim()))
        x = x.contiguous(memory_format=cl.memory_format(x.dim()))
    ours = convert(copy.deepcopy(base))

    def train(m):
        def fn():
            with torch.autocast("cuda", torch.bfloat16, enabled=dtype == torch.bfloat16):
                out = m(x)
            out.float().square().mean().backward()
        return fn
    row = []
    for label, on in (("off", False), ("on", True), ("off", False)):
        ms, *_ = in_turns({"torch": train(base), "ours": train(ours)}, on)
        row.append(f"{label} {ms['ours']:.3f} against {ms['torch']:.3f} "
                   f"({ms['torch'] / ms['ours']:.2f}x)")
    print(f"  whole training step: {' | '.join(row)}", flush=True)


def main(names):
    t0 = time.time()
    for entry in zoo.by_name(names or ["dcgan", "vae"]):
        for dtype in (torch.float32, torch.bfloat16):
            for channels_last in (False, True):
                if channels_last and entry.spatial_dims == 1:
                    continue
                print(f"{entry.name} {str(dtype)[6:]} {'channels_last' if channels_last else 'NCHW'} "
                      "(a step: ms back to back, GPU kernel ms in brackets)", flush=True)
                layers(entry, dtype, channels_last)
                model_steps(entry, dtype, channels_last)
    print(f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
