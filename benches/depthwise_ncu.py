"""One forward and one backward of the zoo decoder's largest depthwise layer, (16, 32, 128,
128) k4 s2, by the depthwise kernels directly (a few warm-up calls first), for ncu:

    ncu --kernel-name regex:depthwise --launch-skip 4 --launch-count 2 ... \\
        python benches/depthwise_ncu.py [--channels-last] [--bf16]
"""
import sys

import torch

from gemmconv import depthwise
from gemmconv.shapes import conv_transpose_args


def main() -> None:
    fmt = torch.channels_last if "--channels-last" in sys.argv else torch.contiguous_format
    dtype = torch.bfloat16 if "--bf16" in sys.argv else torch.float32
    x = torch.randn(16, 32, 128, 128, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
    w = torch.randn(32, 1, 4, 4, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
    a = conv_transpose_args("conv_transpose2d", 2, x, w, None, 2, 1, 0, 32, 1)
    out = torch.empty(a.output_shape, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
    grad = torch.randn_like(out)
    grad_x = torch.empty_like(x)
    for _ in range(3):
        depthwise.forward(x, w, None, a, out)
        depthwise.backward(grad, x, w, a, grad_x, True)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
