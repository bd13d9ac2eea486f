"""A/B of the row kernel's text on a training step (session 42): 3d-3x5x7's bfloat16 step,
whose input gradient takes two rows a program on columns of 5 taps, read 1.69 ms before the
kernel took ROWS (results/s42/C) and 1.96-2.05 after (G, I). Times the step with the kernel
as it was (rows_ab_probe.before) and as it is, in turns in one process, three rounds, with
gemmconv's CUDA graphs off (a graph would keep the kernel it captured).

    PYTHONPATH=. python benches/rows_step_ab.py [CASE] [--dtype float32]
"""
import argparse
import sys

import torch

import gemmconv
from gemmconv import _triton, cases, fused
from gemmconv.measure import timer

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from rows_ab_probe import before  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("case", nargs="?", default="3d-3x5x7")
    parser.add_argument("--dtype", default="bfloat16")
    opts = parser.parse_args()
    case = next(c for c in cases.BENCH if c.name == opts.case)
    x, w, b = (t.requires_grad_() for t in case.tensors(getattr(torch, opts.dtype), "cuda"))
    op = getattr(gemmconv, f"conv_transpose{case.nd}d")
    g = torch.randn_like(op(x, w, b, **case.kwargs))

    def step():
        x.grad = w.grad = b.grad = None
        op(x, w, b, **case.kwargs).backward(g)

    gemmconv.set_graph_memory_limit(0)
    kernels = {"before": before, "now": _triton.implicit_gemm_rows}
    grads = {}
    print(torch.cuda.get_device_name(), case.name, opts.dtype, flush=True)
    for turn in range(3):
        line = []
        for label, kernel in kernels.items():
            _triton.implicit_gemm_rows = kernel
            fused._gemm_plan.cache_clear()
            step()
            grads.setdefault(label, x.grad.clone())
            line.append(f"{label} {timer(x.device, step, 20):.3f}")
        print(f"turn {turn}: " + " | ".join(line), flush=True)
    _triton.implicit_gemm_rows = kernels["now"]
    print("input gradients equal:", torch.equal(grads["before"], grads["now"]))


if __name__ == "__main__":
    main()
