"""The float32 weight gradient from the input's moved copies (fused.moves_input) against
the output gradient's, on the training step of the stride-1 2-D cases.

The float32 fused backward reads copies of one operand moved along W (a box of the copy
engine starts on 16 bytes). Session 41 put 2.05 of 2d-64to128's 14.02 ms step in the output
gradient's copies (128 channels of 130 x 260); the input's (64 channels of 128 x 256) hold
half as many elements. Per case, in turns in one process: a training step (forward, then
the gradients of input, weight and bias) of gemmconv with the rule forced each way, and
torch's, back to back; then the GPU kernels of each of ours.

    PYTHONPATH=. python benches/moved_input_probe.py [case ...]
"""
import sys

import torch

sys.path.insert(0, "benches")
from process_probe import kernels  # noqa: E402

from gemmconv import cases, fused  # noqa: E402
from gemmconv.bench import OURS, TORCH  # noqa: E402
from gemmconv.measure import timers  # noqa: E402

DEVICE = torch.device("cuda")


def step(conv, case, leaves, grad, moved=None):
    rule = fused.moves_input

    def fn():
        if moved is not None:
            fused.moves_input = lambda a, element_size: moved
        try:
            out = conv(*leaves, **case.kwargs)
            torch.autograd.grad(out, leaves, grad)
        finally:
            fused.moves_input = rule
    return fn


def main(names):
    for case in [c for c in cases.BENCH if c.nd == 2 and set(c.stride) == {1}
                 and any(n in c.name for n in names or ["2d"])]:
        x, w, b = case.tensors(torch.float32, DEVICE)
        leaves = [t.requires_grad_() for t in (x, w, b)]
        grad = torch.randn(case.batch, case.out_channels, *case.output_size, device=DEVICE)
        fns = {"torch": step(TORCH[2], case, leaves, grad),
               "input moved": step(OURS[2], case, leaves, grad, True),
               "output gradient moved": step(OURS[2], case, leaves, grad, False)}
        ms = timers(DEVICE, fns, 10, back_to_back=True)
        print(f"{case.name}: " + " | ".join(f"{k} {v:.3f} ms" for k, v in ms.items())
              + f" (rule: {'input' if fused.moves_input(_args(case, x, w, b), 4) else 'output gradient'})",
              flush=True)
        for k in ("input moved", "output gradient moved"):
            pieces = kernels(fns[k], 5)
            print(f"    {k}: {sum(pieces.values()):.3f} ms: " + ", ".join(
                f"{n[:30]} {v:.3f}" for n, v in list(pieces.items())[:5]), flush=True)


def _args(case, x, w, b):
    from gemmconv.shapes import conv_transpose_args
    return conv_transpose_args("conv_transpose2d", 2, x, w, b, case.stride, case.padding,
                               case.output_padding, case.groups, case.dilation)


if __name__ == "__main__":
    main(sys.argv[1:])
