"""The fused backward as a CUDA graph (ops._FusedBackward.graphed, change 131) against its
kernels launched one by one, on the training step of the cases whose backward takes the
fused kernels.

Session 30 put 1.6 ms of the H200's host time into 3d-3x5x7's bfloat16 backward, whose
kernels took 1.3 ms a step: the step waits for the host. Per case and dtype, in turns in
one process: a training step (forward, then the gradients of input, weight and bias) of
torch, of gemmconv, and of gemmconv with the fused backward's graph turned off (its
kernels launched as before), each from an idle GPU and back to back.

    PYTHONPATH=. python benches/fused_graph_probe.py [case ...]
"""
import sys

import torch

from gemmconv import cases, fused, graphs, ops
from gemmconv.bench import OURS, TORCH
from gemmconv.measure import timers
from gemmconv.shapes import conv_transpose_args

DEVICE = torch.device("cuda")


def step(conv, case, leaves, grad, graphed=True):
    def fn():
        kept = ops._FusedBackward.graphed
        if not graphed:
            ops._FusedBackward.graphed = ops._FusedBackward.run
        try:
            out = conv(*leaves, **case.kwargs)
            torch.autograd.grad(out, leaves, grad)
        finally:
            ops._FusedBackward.graphed = kept
    return fn


answers = []   # each fused backward's answer from graphs.launch: True where a graph ran it
_launch = graphs.launch


def _counted(owner, *args):
    answer = _launch(owner, *args)
    if isinstance(owner, ops._FusedBackward):
        answers.append(answer)
    return answer


def main(names):
    graphs.launch = _counted
    for dtype in (torch.bfloat16, torch.float32):
        for case in [c for c in cases.BENCH if set(c.stride) == {1} and c.groups == 1
                     and any(n in c.name for n in names or [""])]:
            x, w, b = case.tensors(dtype, DEVICE)
            a = conv_transpose_args(f"conv_transpose{case.nd}d", case.nd, x, w, b, case.stride,
                                    case.padding, case.output_padding, case.groups,
                                    case.dilation)
            if not fused.backward_takes(a, x, w, False, ops.get_workspace_limit()):
                continue
            leaves = [t.requires_grad_() for t in (x, w, b)]
            grad = torch.randn(a.output_shape, device=DEVICE, dtype=dtype)
            fns = {"torch": step(TORCH[case.nd], case, leaves, grad),
                   "graphed": step(OURS[case.nd], case, leaves, grad),
                   "launched": step(OURS[case.nd], case, leaves, grad, graphed=False)}
            mb = ops._FusedBackward().graph_bytes(grad, x, a) / 2**20
            for back_to_back in (False, True):
                answers.clear()
                ms = timers(DEVICE, fns, 10, back_to_back=back_to_back)
                print(f"{case.name} {str(dtype)[6:]} {'back to back' if back_to_back else 'from idle'}"
                      f" (graph {mb:.0f} MB): " + " | ".join(f"{k} {v:.3f} ms" for k, v in ms.items())
                      + f" | graphed {ms['torch'] / ms['graphed']:.2f}x, launched "
                      f"{ms['torch'] / ms['launched']:.2f}x; graphs ran {sum(answers)} of "
                      f"{len(answers)}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
