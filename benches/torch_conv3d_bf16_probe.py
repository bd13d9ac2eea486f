"""torch's CPU bfloat16 conv3d weight gradient on a 2x2x2 grid (32 -> 64 channels, 3x3x3,
padding 1) reads uninitialized memory: filled with 3e35 before each call, its error against
float64 comes out near 1e35 (torch 2.13.0+cpu); at 1, 3, 4 or 8 per side, or in float32,
it is 2e-3 (bfloat16 rounding) or 1e-7. The reduced 3-D U-Net of the zoo hit it at 16^3.

    python benches/torch_conv3d_bf16_probe.py
"""
import torch

torch.manual_seed(0)
for side in (1, 2, 3, 4, 8):
    for dtype in (torch.bfloat16, torch.float32):
        w = torch.randn(64, 32, 3, 3, 3, dtype=dtype, requires_grad=True)
        x = torch.randn(2, 32, side, side, side, dtype=dtype)
        g = torch.randn(2, 64, side, side, side, dtype=dtype)
        w64 = w.detach().double().requires_grad_()
        ref, = torch.autograd.grad(torch.nn.functional.conv3d(x.double(), w64, padding=1),
                                   (w64,), g.double())
        worst = 0.0
        for _ in range(4):
            junk = [torch.full((1 << 14,), 3e35) for _ in range(200)]
            del junk   # freed blocks the next allocations may reuse
            grad, = torch.autograd.grad(torch.nn.functional.conv3d(x, w, padding=1), (w,), g)
            worst = max(worst, ((grad.double() - ref).abs().max() / ref.abs().max()).item())
        print(f"{side}^3 {str(dtype)[6:]:9s} worst relative error {worst:.1e}")
