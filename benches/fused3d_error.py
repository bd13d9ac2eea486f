"""Each gradient's error against float64 on the 3-D stride-1 cases in bfloat16: torch, the
column routes, the fused backward. fused3d_probe.py found the fused training step's largest
error at 4.6-6.8e-3 on 3d-96cube and 3d-32to64 against torch's 1.9-2.1e-3 (H100, session
29); this says which gradient, under uniform [0, 1) inputs (the bench's) and normal ones.

    PYTHONPATH=. python benches/fused3d_error.py
"""
import sys

import torch
import torch.nn.functional as F

from gemmconv import cases, fused, ops
from gemmconv.shapes import conv_transpose_args

CASES = [c for c in cases.BENCH if c.nd == 3 and set(c.stride) == {1} and c.groups == 1]


def rel(got, ref):
    return float((got.double() - ref).norm() / ref.norm())


def main() -> int:
    print(torch.cuda.get_device_name(), flush=True)
    for case in CASES:
        for draw in (torch.rand, torch.randn):
            gen = torch.Generator().manual_seed(0)
            x, w, b = case.tensors(torch.bfloat16, "cuda", gen, distribution=draw)
            xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
            out = F.conv_transpose3d(xd, wd, None, **case.kwargs)
            g64 = draw(out.shape, generator=gen, dtype=torch.float64).cuda()
            g = g64.bfloat16()
            ref = torch.autograd.grad(out, (xd, wd), g.double())   # the rounded gradient: no rounding in the error
            a = conv_transpose_args("conv_transpose3d", 3, x, w, None, case.stride, case.padding,
                                    case.output_padding, case.groups, case.dilation)
            xt, wt = x.clone().requires_grad_(), w.clone().requires_grad_()
            theirs = torch.autograd.grad(F.conv_transpose3d(xt, wt, None, **case.kwargs), (xt, wt), g)
            columns = ops._backward(g, x, w, a, [True, True, False])
            mine = fused.backward(g, x, w, a, (True, True))
            cells = [f"{name} input {rel(r[0], ref[0]):.1e} weight {rel(r[1], ref[1]):.1e}"
                     for name, r in (("torch", theirs), ("columns", columns), ("fused", mine))]
            print(f"{case.name} {draw.__name__} | " + " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
