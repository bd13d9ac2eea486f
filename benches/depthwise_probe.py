"""The depthwise kernel (gemmconv/depthwise.py) against its floor and cuDNN, per layer of the
zoo's depthwise decoder, dtype, layout and program size: the kernel's time a call, its
fraction of copy bandwidth (input read and output written once), and torch's time on the
same call (medians back to back, measure.timers).

    PYTHONPATH=. python benches/depthwise_probe.py [ELEMENTS ...]

ELEMENTS: the program sizes to try (depthwise.PROGRAM_ELEMENTS; default 512 1024 2048 4096).
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
    sizes = [int(v) for v in sys.argv[1:]] or [512, 1024, 2048, 4096]
    device = torch.device("cuda")
    copy = bench.ceilings(device, torch.float32).bandwidth
    print(torch.cuda.get_device_name(), f"copy {copy / 1e12:.2f} TB/s", flush=True)
    print(f"{'input':20s} {'dtype':9s} {'layout':13s} {'torch ms':>9s} "
          + " ".join(f"{'ours@' + str(s):>10s}" for s in sizes) + "  floor ms")
    for shape in LAYERS:
        for dtype in (torch.float32, torch.bfloat16):
            for layout in ("planar", "channels_last"):
                c = shape[1]
                x = torch.randn(shape, device=device, dtype=dtype)
                w = torch.randn(c, 1, 4, 4, device=device, dtype=dtype)
                if layout == "channels_last":
                    x = x.contiguous(memory_format=torch.channels_last)
                    w = w.contiguous(memory_format=torch.channels_last)
                a = conv_transpose_args("conv_transpose2d", 2, x, w, None, 2, 1, 0, c, 1)
                out = torch.empty(a.output_shape, device=device, dtype=dtype,
                                  memory_format=torch.channels_last if layout == "channels_last"
                                  else torch.contiguous_format)
                theirs = per_call_ms(lambda: F.conv_transpose2d(x, w, None, 2, 1, 0, c))
                ours = []
                for elements in sizes:
                    depthwise.PROGRAM_ELEMENTS = elements
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
