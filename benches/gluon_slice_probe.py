"""Can a Gluon kernel feed wgmma a tile that starts a row into a shared-memory box? The row
kernel's taps along W read the same positions one row further on each (benches/NOTES.md,
session 39): one box with a halo of k_w - 1 rows would serve every W tap if each tap's A
operand could start ``shift`` rows into it. Compiles, offline for sm_90 (no GPU), a kernel
that stores a (2 BM, BK) bfloat16 tile in shared memory and multiplies its rows ``shift``
to ``shift + BM`` by a (BK, BN) tile: the tile read straight by wgmma (an NVMMA layout of
``swizzle`` bytes) or loaded into registers first (``swizzle`` -1: a swizzled layout,
then wgmma with A in registers). Prints, per (swizzle, shift), the wgmma instructions or
that the compiler refused (its own message goes to stderr before: Triton 3.6 says "The
split offset may not touch the tile" for a slice that does not start on a multiple of its
length, whatever the layout; session 48).

    PYTHONPATH=<triton 3.6>:. python benches/gluon_slice_probe.py
"""
import re

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma


@gluon.jit
def shifted_product(a_ptr, b_ptr, c_ptr, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
                    SWIZZLE: gl.constexpr, SHIFT: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    rows = gl.arange(0, 2 * BM, layout=gl.SliceLayout(1, blocked))
    cols = gl.arange(0, BK, layout=gl.SliceLayout(0, blocked))
    a = gl.load(a_ptr + rows[:, None] * BK + cols[None, :])
    if SWIZZLE < 0:
        a_layout: gl.constexpr = gl.SwizzledSharedLayout(vec=8, per_phase=1, max_phase=1,
                                                         order=[1, 0])
    else:
        a_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=SWIZZLE,
                                                      element_bitwidth=16, rank=2)
    a_box = gl.allocate_shared_memory(gl.bfloat16, [2 * BM, BK], a_layout, a)
    k = gl.arange(0, BK, layout=gl.SliceLayout(1, blocked))
    n = gl.arange(0, BN, layout=gl.SliceLayout(0, blocked))
    b = gl.load(b_ptr + k[:, None] * BN + n[None, :])
    b_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16,
                                                  rank=2)
    b_tile = gl.allocate_shared_memory(gl.bfloat16, [BK, BN], b_layout, b)
    fence_async_shared()
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                  instr_shape=[16, BN, 16])
    acc = gl.zeros([BM, BN], gl.float32, mma)
    tap = a_box.slice(SHIFT, BM, dim=0)
    if SWIZZLE < 0:
        acc = warpgroup_mma(tap.load(gl.DotOperandLayout(0, mma, 2)), b_tile, acc)
    else:
        acc = warpgroup_mma(tap, b_tile, acc)
    m = gl.arange(0, BM, layout=gl.SliceLayout(1, blocked))
    gl.store(c_ptr + m[:, None] * BN + n[None, :], gl.convert_layout(acc, blocked))


def main() -> None:
    sig = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*fp32"}
    names = list(shifted_product.arg_names)
    for swizzle, shift in [(0, 1), (0, 8), (128, 8), (-1, 1), (-1, 64), (0, 64)]:
        consts = {"BM": 64, "BN": 64, "BK": 16, "SWIZZLE": swizzle, "SHIFT": shift}
        full = {**sig, **{k: "constexpr" for k in consts}}
        source = GluonASTSource(shifted_product, {n: full[n] for n in names},
                                constexprs={(names.index(k),): v for k, v in consts.items()})
        try:
            kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                                    options=dict(num_warps=4))
            found = sorted(set(re.findall(r"wgmma\.mma_async\.\S+", kernel.asm["ptx"])))
            print(f"swizzle {swizzle:4}, shift {shift:3}: compiled, {found}", flush=True)
        except Exception as e:   # (the compiler's diagnostic went to stderr)
            print(f"swizzle {swizzle:4}, shift {shift:3}: refused ({str(e).splitlines()[0]})",
                  flush=True)


if __name__ == "__main__":
    main()
