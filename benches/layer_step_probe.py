"""Where the zoo's transposed convolutions lose their training step: per layer.

Per transposed convolution of a zoo model (its input recorded by a hook), dtype and layout:
torch's module against the converted one, a step (forward, then the gradients of input,
weight and bias) back to back in turns, ms a call; GPU kernel ms a call (torch.profiler);
and ours by kernel.

    PYTHONPATH=. python benches/layer_step_probe.py [model] [float32|bfloat16] [NCHW|CL]
"""
import copy
import sys

import torch

sys.path.insert(0, "benches")
from process_probe import kernels  # noqa: E402
from small_fused_probe import layer_inputs  # noqa: E402

from gemmconv import channels_last as cl  # noqa: E402
from gemmconv import convert, zoo  # noqa: E402
from gemmconv.measure import timers  # noqa: E402


def layer_steps(name: str, dtype: str, layout: str):
    """Per transposed convolution of zoo model ``name`` on the GPU in ``dtype``
    (channels_last where ``layout`` is "CL"): (torch's module, its converted copy, its input
    as recorded, requiring grad, and ``step(m)``: a training step of either, a call)."""
    dt = getattr(torch, dtype)
    entry = zoo.by_name([name])[0]
    model = entry.build(False).to("cuda", dt)
    x = entry.input(False, "cuda").to(dt)
    if layout == "CL":
        model = model.to(memory_format=cl.memory_format(x.dim()))
        x = x.contiguous(memory_format=cl.memory_format(x.dim()))
    for module, inp in layer_inputs(model.eval(), x):
        inp = inp.detach().requires_grad_()
        grad = torch.randn_like(module(inp))

        def step(m, inp=inp, grad=grad):
            def fn():
                torch.autograd.grad(m(inp), [inp, *m.parameters()], grad)
            return fn
        yield module, convert(copy.deepcopy(module), types=(type(module),)), inp, step


def main(name="vae", dtype="float32", layout="CL"):
    print(f"{name} {dtype} {layout}: a layer's training step, ms a call (GPU kernel ms)")
    for module, ours, inp, step in layer_steps(name, dtype, layout):
        fns = {"torch": step(module), "ours": step(ours)}
        ms = timers(torch.device("cuda"), fns, 15, warmup=4, back_to_back=True)
        gpu = {k: kernels(fn) for k, fn in fns.items()}
        print(f"  {tuple(inp.shape)} -> {module.out_channels}: torch {ms['torch']:.4f} "
              f"({sum(gpu['torch'].values()):.4f}) ours {ms['ours']:.4f} "
              f"({sum(gpu['ours'].values()):.4f}) {ms['torch'] / ms['ours']:.2f}x", flush=True)
        for k, v in list(gpu["ours"].items())[:6]:
            print(f"      {v:.4f}  {k}")
        print("    torch: " + "; ".join(f"{v:.4f} {k[:40]}" for k, v in list(gpu["torch"].items())[:4]))


if __name__ == "__main__":
    main(*sys.argv[1:])
