"""How Triton 3.6 lowers a shift along a tensor-core tile's rows, on sm_90, with no GPU.

The W taps of a stride-1 call read one box moved one position (one row of the tile) per
tap, and a box cannot start off 16 bytes along its innermost dim: hence the float32 weight
gradient's moved copies and the planar 16-bit forward's channels-innermost copy
(benches/NOTES.md, sessions 41, 62, 66). Could the shift be made in registers instead,
with tl.gather? Two places, compiled here offline (the kernel ``shifted``):

- ``operand``: an A tile (BM + 16 rows loaded, a halo) shifted by ``SHIFT`` rows, then fed
  to tl.dot: the shift before the product;
- ``accumulator``: the product's accumulator shifted by ``SHIFT`` rows before it is
  added to a running sum: the shift after the product (one product a W tap, its rows
  moved to the output positions it serves).

For each, per dtype: the wgmma instructions in the PTX, whether the gather went through
shared memory (st.shared / ld.shared with bar.sync around it) or warp shuffles
(shfl.sync), the layout conversions in the TTGIR, and registers and spills.

    PYTHONPATH=<triton 3.6>:. python benches/gather_shift_probe.py
"""
import re
import sys

import triton
import triton.language as tl

sys.path.insert(0, "benches")
from ttgir_check import compile_, resources  # noqa: E402


@triton.jit
def shifted(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            SHIFT: tl.constexpr, AFTER: tl.constexpr):
    """The shift before the product (an A tile loaded 2 BM rows tall, the halo, and BM of
    its rows gathered from row SHIFT on), or with AFTER each of three taps' products
    shifted by tap x SHIFT rows (clamped at the top: a probe of the lowering, not of the
    edges) and summed."""
    rows = tl.arange(0, BM)
    k = tl.arange(0, BK)
    n = tl.arange(0, BN)
    if AFTER:
        total = tl.zeros((BM, BN), tl.float32)
        for tap in tl.static_range(3):
            a = tl.load(a_ptr + tap * BM * BK + rows[:, None] * BK + k[None, :])
            b = tl.load(b_ptr + tap * BK * BN + k[:, None] * BN + n[None, :])
            index = tl.maximum(rows - tap * SHIFT, 0)[:, None] + tl.zeros((BM, BN), tl.int32)
            total += tl.gather(tl.dot(a, b), index, axis=0)
    else:
        tall = tl.arange(0, 2 * BM)
        a = tl.load(a_ptr + tall[:, None] * BK + k[None, :])
        index = (rows + SHIFT)[:, None] + tl.zeros((BM, BK), tl.int32)
        b = tl.load(b_ptr + k[:, None] * BN + n[None, :])
        total = tl.dot(tl.gather(a, index, axis=0), b)
    tl.store(c_ptr + rows[:, None] * BN + n[None, :], total)


def report(name: str, kernel) -> None:
    ptx, ttgir = kernel.asm["ptx"], kernel.asm["ttgir"]
    mma = sorted(set(re.findall(r"wgmma\.mma_async\.\S+|mma\.sync\.\S+", ptx)))
    counts = {op: len(re.findall(op, ptx)) for op in
              (r"st\.shared", r"ld\.shared", r"bar\.sync", r"shfl\.sync")}
    converts = len(re.findall(r"ttg\.convert_layout", ttgir))
    gathers = len(re.findall(r"tt\.gather", ttgir))
    print(f"{name}: {mma or 'no tensor-core instruction'}; PTX "
          + ", ".join(f"{op.replace(chr(92), '')} {c}" for op, c in counts.items())
          + f"; TTGIR gathers {gathers}, layout conversions {converts}; {resources(kernel)}",
          flush=True)


def main() -> None:
    for form, after in (("operand", False), ("accumulator", True)):
        for dtype in ("bf16", "fp32"):
            try:
                kernel = compile_(shifted, {}, {"a_ptr": dtype, "b_ptr": dtype, "c_ptr": "fp32"},
                                  {"BM": 128, "BN": 64, "BK": 32, "SHIFT": 1, "AFTER": after},
                                  warps=4, stages=1)
                report(f"{form} {dtype}", kernel)
            except Exception as e:   # (the compiler's own message went to stderr)
                print(f"{form} {dtype}: refused ({str(e).splitlines()[0][:200]})", flush=True)


if __name__ == "__main__":
    main()
