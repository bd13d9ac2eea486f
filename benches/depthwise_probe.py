"""The depthwise kernels (gemmconv/depthwise.py) against their floor and cuDNN, per layer of
the zoo's depthwise decoder, dtype, layout and program size: the kernel's time a call, and
torch's on the same call (medians back to back, measure.timers), with the floor: the input
read and the output written once (forward), or the output gradient and input read and the
input gradient written once (backward: both gradients; torch's by autograd.grad).

    PYTHONPATH=. python benches/depthwise_probe.py [--backward] [ELEMENTS ...]

ELEMENTS: the program sizes to try (depthwise.PROGRAM_ELEMENTS and INTERLEAVED_ELEMENTS, or
BACKWARD_ELEMENTS;
default 512 1024 2048 4096), as ELEMENTS[:WARPS] (PROGRAM_WARPS), or with --backward
ELEMENTS[:PROGRAMS[:WARPS]] (BACKWARD_PROGRAMS, BACKWARD_WARPS).
"""
import sys

import torch
import torch.nn.functional as F

from gemmconv import bench, depthwise, measure
from gemmconv.shapes import conv_transpose_args

LAYERS = [(16, 256, 16, 16), (16, 128, 32, 32), (16, 64, 64, 64), (16, 32, 128, 128)]


def per_call_ms(fn) -> float:
    """Median milliseconds a call, back to back (measure.timers)."""
    return measure.timers(torch.device("cuda"), {0: fn}, 10, back_to_back=True)[0]


def main() -> int:
    backward = "--backward" in sys.argv
    sizes = [v for v in sys.argv[1:] if v != "--backward"] or ["512", "1024", "2048", "4096"]
    device = torch.device("cuda")
    copy = bench.ceilings(device, torch.float32).bandwidth
    print(torch.cuda.get_device_name(), f"copy {copy / 1e12:.2f} TB/s",
          "backward" if backward else "forward", flush=True)
    print(f"{'input':20s} {'dtype':9s} {'layout':13s} {'torch ms':>9s} "
          + " ".join(f"{'@' + s:>10s}" for s in sizes) + "  floor ms")
    for shape in LAYERS:
        for dtype in (torch.float32, torch.bfloat16):
            for layout in ("planar", "channels_last"):
                c = shape[1]
                fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
                x = torch.randn(shape, device=device, dtype=dtype).contiguous(memory_format=fmt)
                w = torch.randn(c, 1, 4, 4, device=device, dtype=dtype).contiguous(memory_format=fmt)
                a = conv_transpose_args("conv_transpose2d", 2, x, w, None, 2, 1, 0, c, 1)
                out = torch.empty(a.output_shape, device=device, dtype=dtype, memory_format=fmt)
                ours = []
                if backward:
                    gy = torch.randn(a.output_shape, device=device, dtype=dtype).contiguous(memory_format=fmt)
                    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
                    y = F.conv_transpose2d(xg, wg, None, 2, 1, 0, c)
                    theirs = per_call_ms(lambda: torch.autograd.grad(y, [xg, wg], gy, retain_graph=True))
                    grad_x = torch.empty_like(x)
                    for size in sizes:
                        elements, programs, warps = (size.split(":") + ["", ""])[:3]
                        depthwise.BACKWARD_ELEMENTS = int(elements)
                        depthwise.BACKWARD_PROGRAMS = int(programs or depthwise.BACKWARD_PROGRAMS)
                        depthwise.BACKWARD_WARPS = int(warps or depthwise.BACKWARD_WARPS)
                        depthwise._backward_plan.cache_clear()
                        ours.append(per_call_ms(lambda: depthwise.backward(gy, x, w, a, grad_x, True)))
                    grad_w = depthwise.backward(gy, x, w, a, grad_x, True)
                    xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
                    want = torch.autograd.grad(F.conv_transpose2d(xd, wd, None, 2, 1, 0, c),
                                               [xd, wd], gy.double())
                    error = max(float((m.double() - t).norm() / t.norm())
                                for m, t in zip((grad_x, grad_w), want))
                    floor = (2 * x.numel() + gy.numel()) * x.element_size() / copy * 1e3
                else:
                    theirs = per_call_ms(lambda: F.conv_transpose2d(x, w, None, 2, 1, 0, c))
                    for size in sizes:
                        elements, warps = (size.split(":") + [""])[:2]
                        depthwise.PROGRAM_ELEMENTS = depthwise.INTERLEAVED_ELEMENTS = int(elements)
                        depthwise.PROGRAM_WARPS = int(warps or depthwise.PROGRAM_WARPS)
                        depthwise._plan.cache_clear()
                        ours.append(per_call_ms(lambda: depthwise.forward(x, w, None, a, out)))
                    want = F.conv_transpose2d(x.double(), w.double(), None, 2, 1, 0, c)
                    error = float((out.double() - want).norm() / want.norm())
                    floor = (x.numel() + out.numel()) * x.element_size() / copy * 1e3
                print(f"{str(shape):20s} {str(dtype)[6:]:9s} {layout:13s} {theirs:9.3f} "
                      + " ".join(f"{t:10.3f}" for t in ours) + f"  {floor:8.3f}  err {error:.1e}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
