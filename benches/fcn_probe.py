"""FCN-32s's k64 s32 transposed convolution (8, 21, 16, 16) -> (8, 21, 512, 512), forward:
torch against gemmconv with the generic col2im taking one plane (or channel) a thread, as
before session 25, and several (_cuda.generic_col2im_planes), per call and by kernel,
float32 and bfloat16, NCHW and channels_last, with each one's error against float64.

    PYTHONPATH=. python benches/fcn_probe.py
"""
import sys

import torch
import torch.nn.functional as F

from gemmconv import _cuda, ops

sys.path.insert(0, "benches")
from layer import kernel_times  # noqa: E402
from overhead import per_call_us  # noqa: E402


def main():
    gen = torch.Generator().manual_seed(0)
    x64 = torch.randn(8, 21, 16, 16, generator=gen, dtype=torch.float64)
    w64 = torch.randn(21, 21, 64, 64, generator=gen, dtype=torch.float64) / 64
    ref = F.conv_transpose2d(x64.cuda(), w64.cuda(), None, 32, 16)
    print("dtype layout | torch us (error) | planes a thread: us a call (error) [col2im kernel us]")
    for dtype, last in ((torch.float32, False), (torch.bfloat16, False), (torch.float32, True),
                        (torch.bfloat16, True)):
        x, w = x64.to("cuda", dtype), w64.to("cuda", dtype)
        if last:
            x, w = (t.contiguous(memory_format=torch.channels_last) for t in (x, w))
        err = lambda out: ((out.double() - ref).abs().max() / ref.abs().max()).item()
        theirs = lambda: F.conv_transpose2d(x, w, None, 32, 16)
        row = [f"{str(dtype)[6:]} {'CL' if last else 'NCHW'} | {per_call_us(theirs, 30):.0f} "
               f"({err(theirs()):.1e})"]
        for planes in (1, _cuda.GENERIC_PLANES):
            _cuda.GENERIC_PLANES = planes
            for cache in (_cuda._launches, ops._replays):   # the replays keep their launches
                cache.clear()
            ours = lambda: ops.conv_transpose2d(x, w, None, 32, 16)
            out = ours()
            kernels = [(name, ms) for name, ms in kernel_times(ours, 10) if "col2im" in name]
            row.append(f"{planes}: {per_call_us(ours, 30):.0f} ({err(out):.1e}) "
                       f"[{sum(ms for _, ms in kernels) * 1e3:.0f}]")
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
