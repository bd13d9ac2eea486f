"""Does the copy engine load a box whose innermost start is not on 16 bytes? Triton's
interpreter asserts that it is (so CI cannot test such loads), and the float32 weight
gradient copies the output gradient once per remainder of its taps' offsets along W
(fused.shifted_copies) on that premise; the hardware was never asked (benches/NOTES.md,
sessions 23, 27 and 28). Each dtype, each start along W from -3 to 20, boxes of 8 rows of
32 elements from a tensor whose rows are whole 16-byte units, against torch's slice
(zero outside). Seconds of device time.

    PYTHONPATH=. python benches/tma_offset_probe.py
"""
import sys

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def _box(desc, out_ptr, row, col, BR: tl.constexpr, BC: tl.constexpr):
    tile = desc.load([row, col])
    r = tl.arange(0, BR)[:, None]
    c = tl.arange(0, BC)[None, :]
    tl.store(out_ptr + r * BC + c, tile)


def main() -> int:
    print(torch.cuda.get_device_name(), "triton", triton.__version__, flush=True)
    wrong = 0
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(64, 96, device="cuda").to(dtype)
        desc = TensorDescriptor(x, list(x.shape), list(x.stride()), [8, 32])
        padded = torch.zeros(64, 96 + 64, device="cuda", dtype=dtype)
        padded[:, 32:128] = x
        results = []
        for col in range(-3, 21):
            out = torch.full((8, 32), float("nan"), device="cuda", dtype=dtype)
            try:
                _box[(1,)](desc, out, 5, col, BR=8, BC=32)
                torch.cuda.synchronize()
                same = torch.equal(out, padded[5:13, 32 + col:64 + col])
                results.append(f"{col}:{'ok' if same else 'WRONG'}")
                wrong += not same
            except Exception as e:   # a launch or an illegal address
                results.append(f"{col}:{type(e).__name__}")
                wrong += 1
        print(str(dtype), " ".join(results), flush=True)
    print("every start loads its box" if not wrong else f"{wrong} starts did not", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
