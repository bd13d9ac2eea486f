"""The fused forward on the zoo's small layers, now that it launches as a CUDA graph.

fused.SMALL_OUTPUT keeps calls of at most 2^26 output elements off the fused route: a fused
call's host time (Triton's launch, the weights' reorder) cost small layers more than its
kernel saved (benches/NOTES.md, sessions 25 and 31). Session 37 (H100, B) found the VAE
decoder's float32 channels_last forward losing on GPU time: its layers' GEMM + col2im
took 0.055-0.104 ms where cuDNN's implicit GEMM and bias took 0.034-0.069. With the fused
forward graphed (_FusedReplay.graphed), per layer of the zoo's models (their inputs
recorded by hooks), dtype and layout, forward without grad, back to back in turns:
torch's module, the column route's replay and the fused route's (each graphed), ms a call
and GPU kernel ms a call. Then whole models' forwards, torch's against convert(model)'s
with the cost model as it is, and again with every call the fused kernel can take sent
there (fused.forward_preferred patched).

    PYTHONPATH=. python benches/small_fused_probe.py [model ...]
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
    """(module, input) of each transposed convolution in a forward of ``model`` on ``x``."""
    seen, hooks = [], []
    for m in model.modules():
        if isinstance(m, torch.nn.modules.conv._ConvTransposeNd):
            hooks.append(m.register_forward_hook(lambda m, args, out: seen.append((m, args[0]))))
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return seen


def replays(module, x: torch.Tensor) -> dict:
    """The call's column and fused replays, graphed, where each can take it."""
    w, b = module.weight, module.bias
    a = ops._args_from_lists(x, w, b, module.stride, module.padding, module.output_padding,
                             module.dilation, module.groups)
    interleaved = cl.suggested(x, w)
    out = {}
    if fused._unable(a, x, w) is None:
        fused_replay = ops._FusedReplay(interleaved)
        out["fused"] = lambda: fused_replay.graphed(x, w, b, a)
    takes = fused.takes
    fused.takes = lambda *args: False
    try:
        column_replay, _ = ops._work_out_replay(x, w, b, a, interleaved)
    finally:
        fused.takes = takes
    if isinstance(column_replay, ops._Replay):
        out["columns"] = lambda: column_replay.graphed(x, w, b, a)
    return out


def layers(entry, dtype: torch.dtype, channels_last: bool) -> None:
    model = entry.build(False).to(DEVICE, dtype)
    x = entry.input(False, "cuda").to(dtype)
    if channels_last:
        model = model.to(memory_format=cl.memory_format(x.dim()))
        x = x.contiguous(memory_format=cl.memory_format(x.dim()))
    model.eval()
    for module, inp in layer_inputs(model, x):
        fns = {"torch": lambda module=module, inp=inp: module(inp)}
        with torch.no_grad():
            fns.update(replays(module, inp))
            ms = timers(DEVICE, fns, 15, back_to_back=True)
            gpu = {k: sum(kernels(fn).values()) for k, fn in fns.items()}
        cells = "  ".join(f"{k} {ms[k]:.4f} ({gpu[k]:.4f})" for k in fns)
        ratios = "  ".join(f"{k} {ms['torch'] / ms[k]:.2f}x" for k in fns if k != "torch")
        print(f"  {tuple(inp.shape)} -> {module.out_channels} k{module.kernel_size} "
              f"s{module.stride}: {cells} | {ratios}", flush=True)


def model_forwards(entry, dtype: torch.dtype, channels_last: bool) -> None:
    base = entry.build(False).to(DEVICE).eval()
    x = entry.input(False, "cuda")
    if channels_last:
        base = base.to(memory_format=cl.memory_format(x.dim()))
        x = x.contiguous(memory_format=cl.memory_format(x.dim()))
    ours = convert(copy.deepcopy(base))
    cast = lambda: torch.autocast("cuda", torch.bfloat16, enabled=dtype == torch.bfloat16)

    def forward(m):
        def fn():
            with torch.no_grad(), cast():
                m(x)
        return fn
    preferred = fused.forward_preferred
    row = []
    for label, force in (("as is", False), ("fused", True), ("as is", False)):
        ops._replays.clear()
        graphs.forget()
        answers, launch = [], graphs.launch
        graphs.launch = lambda *args: answers.append(launch(*args)) or answers[-1]
        if force:
            fused.forward_preferred = lambda *args: True
        try:
            ms = timers(DEVICE, {"torch": forward(base), "ours": forward(ours)}, 15,
                        back_to_back=True)
        finally:
            fused.forward_preferred = preferred
            graphs.launch = launch
        row.append(f"{label} {ms['ours']:.3f} against {ms['torch']:.3f} ({ms['torch'] / ms['ours']:.2f}x; "
                   f"graphs ran {sum(answers)} of {len(answers)} calls)")
    print(f"  whole forward: {' | '.join(row)}", flush=True)


def main(names):
    t0 = time.time()
    for entry in zoo.by_name(names or ["vae", "dcgan", "unet2d", "hifigan"]):
        for dtype in (torch.float32, torch.bfloat16):
            for channels_last in (False, True):
                if channels_last and entry.spatial_dims == 1:
                    continue
                print(f"{entry.name} {str(dtype)[6:]} {'channels_last' if channels_last else 'NCHW'} "
                      "(ms a call back to back, GPU kernel ms in brackets)", flush=True)
                layers(entry, dtype, channels_last)
                model_forwards(entry, dtype, channels_last)
                ops._replays.clear()
                graphs.forget()
    print(f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
