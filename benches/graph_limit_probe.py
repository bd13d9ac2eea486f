"""Is the 3-D U-Net's ups.1 training step slow because its backward gets no CUDA graph?
(Session 53: ConvTranspose3d(256, 256, 2, stride=2) on (2, 256, 16, 16, 16), planar, took
1.11 ms a step against torch's 0.51, float32 and bfloat16 alike, where its forward takes
0.09 ms and its channels_last step 0.30. Its backward is a _GraphedBackward whose
graph_bytes, about 706 MB in float32 (564 of them for split-K partial products this shape
does not take), is over the default graph memory limit of 512 MiB, so it runs eagerly.)

Per layer: torch's module and gemmconv's, forward and the gradients of the input and the
parameters, timed in turns (measure.timed) with the default graph memory limit, then with
a limit of 2 GiB; with the graphs kept after each.

    PYTHONPATH=. python benches/graph_limit_probe.py
"""
import copy

import torch

import gemmconv
from gemmconv import channels_last as cl, graphs, measure

LAYERS = [   # (module, input shape, dtype, channels_last)
    (lambda: torch.nn.ConvTranspose3d(256, 256, 2, stride=2), (2, 256, 16, 16, 16), torch.float32, False),
    (lambda: torch.nn.ConvTranspose3d(256, 256, 2, stride=2), (2, 256, 16, 16, 16), torch.bfloat16, False),
    (lambda: torch.nn.ConvTranspose3d(128, 128, 2, stride=2), (2, 128, 32, 32, 32), torch.bfloat16, False),
    (lambda: torch.nn.ConvTranspose2d(128, 64, 2, stride=2), (8, 128, 128, 128), torch.float32, True),
]


def steps(build, shape, dtype, channels_last) -> dict:
    torch.manual_seed(0)
    theirs = build().cuda().to(dtype)
    x = torch.randn(shape, device="cuda", dtype=dtype)
    if channels_last:
        fmt = cl.memory_format(x.dim())
        theirs, x = theirs.to(memory_format=fmt), x.contiguous(memory_format=fmt)
    ours = gemmconv.convert(copy.deepcopy(theirs), types=(type(theirs),))
    x.requires_grad_()
    grad = torch.randn_like(theirs(x))

    def step_of(module):
        return lambda: torch.autograd.grad(module(x), [x, *module.parameters()], grad)
    return {"torch": step_of(theirs), "ours": step_of(ours)}


def main() -> None:
    device = torch.device("cuda")
    print(torch.cuda.get_device_name(), flush=True)
    default = graphs.get_graph_memory_limit()
    for build, shape, dtype, channels_last in LAYERS:
        fns = steps(build, shape, dtype, channels_last)
        layer = build()
        x = torch.empty(shape, device="meta", dtype=dtype)
        if channels_last:
            x = x.contiguous(memory_format=cl.memory_format(x.dim()))
        how = gemmconv.explain(x, torch.empty(layer.weight.shape, device="meta", dtype=dtype),
                               torch.empty(layer.bias.shape, device="meta", dtype=dtype),
                               stride=layer.stride).backward
        print(f"{layer} {shape}: backward {how.split('); ')[-1]}", flush=True)
        for limit in (default, 2 << 30):
            graphs.set_graph_memory_limit(limit)
            t = measure.timed(device, fns, 15, "torch")
            print(f"{build()} {shape} {dtype} {'channels_last' if channels_last else 'planar'}, "
                  f"graph limit {limit >> 20} MiB: torch {t.ms['torch']:.3f} ms, ours "
                  f"{t.ms['ours']:.3f} ({t.speedup['ours']:.2f}x); graphs kept {graphs.kept()}",
                  flush=True)
        graphs.set_graph_memory_limit(default)


if __name__ == "__main__":
    main()
