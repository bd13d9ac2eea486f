"""How Triton 3.6 lowers a shift along a tensor-core tile's rows, on sm_90, with no GPU.

The W taps of a stride-1 call read one box moved one position (one row of the tile) per
tap, and a box cannot start off 16 bytes along its innermost dim: hence the float32 weight
gradient's moved copies and the planar 16-bit forward's channels-innermost copy
(benches/NOTES.md, sessions 41, 62, 66). Could the shift be made in registers instead,
with tl.gather? Two places, compiled here offline:

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
def operand(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            SHIFT: tl.constexpr):
    rows = tl.arange(0, BM)
    k = tl.arange(0, BK)
    n = tl.arange(0, BN)
    # The halo: BM rows from 0 and BM rows from BM / 2 would cover any SHIFT < BM / 2, but
    # a gather reads one tensor, so the tile is loaded BM + BM rows tall and cut.
    tall = tl.arange(0, 2 * BM)
    a = tl.load(a_ptr + tall[:, None] * BK + k[None, :])
    index = (rows + SHIFT)[:, None] + tl.zeros((BM, BK), tl.int32)
    moved = tl.gather(a, index, axis=0)
    b = tl.load(b_ptr + k[:, None] * BN + n[None, :])
    acc = tl.dot(moved, b)
    tl.store(c_ptr + rows[:, None] * BN + n[None, :], acc)


@triton.jit
def accumulator(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                SHIFT: tl.constexpr):
    rows = tl.arange(0, BM)
    k = tl.arange(0, BK)
    n = tl.arange(0, BN)
    total = tl.zeros((BM, BN), tl.float32)
    for tap in tl.static_range(3):
        a = tl.load(a_ptr + tap * BM * BK + rows[:, None] * BK + k[None, :])
        b = tl.load(b_ptr + tap * BK * BN + k[:, None] * BN + n[None, :])
        product = tl.dot(a, b)
        # Output row r takes the product's row r - tap SHIFT (clamped: a probe of the
        # lowering, not of the edges).
        index = tl.maximum(rows - tap * SHIFT, 0)[:, None] + tl.zeros((BM, BN), tl.int32)
        total += tl.gather(product, index, axis=0)
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
    for fn in (operand, accumulator):
        for dtype in ("bf16", "fp32"):
            out = "fp32"
            try:
                kernel = compile_(fn, {}, {"a_ptr": dtype, "b_ptr": dtype, "c_ptr": out},
                                  {"BM": 128, "BN": 64, "BK": 32, "SHIFT": 1}, warps=4,
                                  stages=1)
                report(f"{fn.__name__} {dtype}", kernel)
            except Exception as e:   # (the compiler's own message went to stderr)
                print(f"{fn.__name__} {dtype}: refused ({str(e).splitlines()[0][:200]})",
                      flush=True)


if __name__ == "__main__":
    main()
