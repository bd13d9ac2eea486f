"""The float32 weight gradient of a stride-1 2-D case of the table (2d-1024 by default) by
fused.weight_gradient in its moved form, as the fused backward calls it (a few calls: the
first plans and compiles), for ncu on its kernel:

    ncu --clock-control none --kernel-name regex:weight_gradient --launch-skip 2 \\
        --launch-count 1 ... python benches/wgrad_ncu.py [CASE] [--channels-last] [--along-w]

(``--along-w``: a split's boxes walked W first, not H first as the package walks them,
fused.BOXES_DOWN_H. Session 62 ran it with ``--down-h`` for H first, then not the default.)
"""
import sys

import torch

from gemmconv import cases, fused
from gemmconv.shapes import Geometry, conv_transpose_args


def main() -> None:
    names = [a for a in sys.argv[1:] if not a.startswith("--")] or ["2d-1024"]
    case = next(c for c in cases.BENCH if c.name == names[0])
    x, w, _ = case.tensors(torch.float32, "cuda")
    g = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
    grad = torch.randn(x.shape[0], case.out_channels, *case.output_size, device="cuda")
    if "--channels-last" in sys.argv:
        x, grad = (t.contiguous(memory_format=torch.channels_last) for t in (x, grad))
    a = conv_transpose_args("conv_transpose2d", 2, x, w, None, case.stride, case.padding,
                            case.output_padding, case.groups, case.dilation)
    moved = fused.moves_input(a, 4)
    fused.BOXES_DOWN_H = "--along-w" not in sys.argv
    for _ in range(4):
        fused.weight_gradient(x, grad, g, shifted=True, moved_input=moved)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
