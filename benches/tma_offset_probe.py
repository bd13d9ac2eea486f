"""Does the copy engine load a box whose innermost start is not on 16 bytes? Triton's
interpreter asserts that it is (so CI cannot test such loads), and the float32 weight
gradient copies the output gradient once per remainder of its taps' offsets along W
(fused.shifted_copies) on that premise (benches/NOTES.md, sessions 23, 27 and 28; session
29's run asked in one process and lost the context at the first start). Each dtype, starts
along W from -3 to 13 (STARTS), boxes of 8 rows of 32 elements from a tensor whose rows are
whole 16-byte units, against torch's slice (zero outside), each start in a process of its
own. Under a minute of device time. Session 39 (H100, results/s39/A): float32 loaded at
starts 0, 4, 8 only, bfloat16 at 0 and 8; every other start stopped the GPU with an
illegal instruction. So the moved copies stay.

    PYTHONPATH=. python benches/tma_offset_probe.py
"""
import subprocess
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


STARTS = [0, 4, 8, -3, -1, 1, 2, 3, 5, 13]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def one(dtype_name: str, col: int) -> str:
    """Loads the box at ``col`` and checks it: "ok", "WRONG", or the error's name."""
    dtype = DTYPES[dtype_name]
    x = torch.randn(64, 96, device="cuda").to(dtype)
    desc = TensorDescriptor(x, list(x.shape), list(x.stride()), [8, 32])
    padded = torch.zeros(64, 96 + 64, device="cuda", dtype=dtype)
    padded[:, 32:128] = x
    out = torch.full((8, 32), float("nan"), device="cuda", dtype=dtype)
    _box[(1,)](desc, out, 5, col, BR=8, BC=32)
    torch.cuda.synchronize()
    return "ok" if torch.equal(out, padded[5:13, 32 + col:64 + col]) else "WRONG"


def main() -> int:
    """Each start in a process of its own: a start the copy engine refuses can end the CUDA
    context (session 29's run N: the first start tried, -3, gave "an illegal instruction"
    and left nothing for the others)."""
    if len(sys.argv) == 3:
        try:
            print(one(sys.argv[1], int(sys.argv[2])), flush=True)
        except Exception as e:   # a launch or an illegal address or instruction
            print(type(e).__name__, str(e).splitlines()[0][:60], flush=True)
        return 0
    print(torch.cuda.get_device_name(), "triton", triton.__version__, flush=True)
    wrong = 0
    for name in DTYPES:
        results = []
        for col in STARTS:
            run = subprocess.run([sys.executable, __file__, name, str(col)], capture_output=True,
                                 text=True, timeout=60)
            said = (run.stdout.strip().splitlines() or [f"exit {run.returncode}"])[-1]
            results.append(f"{col}:{said}")
            wrong += said != "ok"
        print(name, " | ".join(results), flush=True)
    print("every start loads its box" if not wrong else f"{wrong} starts did not", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
