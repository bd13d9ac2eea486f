"""Whether a wgmma A operand can start a row or a few into a 128-byte-swizzled tile in
shared memory (benches/wgmma_shift.cu says why it matters): builds that kernel with nvcc
for sm_90a, runs it with and without the descriptor's base offset, and compares each
shift's product with float64's. Needs an H100 or H200 and nvcc; about 10 s.

    PYTHONPATH=. python benches/wgmma_shift_probe.py

Prints, per shift and form, the largest error relative to the product's largest entry:
about 1e-6 where the operand started where it was meant to (bfloat16 inputs, float32
sums), order 1 where it did not; every element unwritten where the tiles missed the
1024-byte boundaries the swizzle assumes. Then the tensor cores' rate with taps 0, 1 and
2 rows apart: whether a start off the swizzle's repeat costs time.
"""
import os
import shutil
import subprocess
import tempfile

import cupy
import torch

from gemmconv.measure import timer

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wgmma_shift.cu")
SHIFTS = 17   # 0-16: every row of one 8-row swizzle repeat, and past it


def build(source: str = SOURCE) -> cupy.RawModule:
    """``source`` (a .cu beside this file) built with nvcc for sm_90a and loaded."""
    cubin = os.path.join(tempfile.mkdtemp(), os.path.basename(source) + "bin")
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    subprocess.run([nvcc, "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-o", cubin,
                    source], check=True)
    return cupy.RawModule(path=cubin)


def rates(module: cupy.RawModule, inputs: tuple) -> None:
    """TFLOP/s of shifted_rate with taps 0, 1 and 2 rows apart, each form of the base
    offset: 8 blocks an SM, 2,000 steps of 12 wgmmas each, the median of five timings
    (measure.timer). ``inputs``: A and B as the kernels take them."""
    kernel = module.get_function("shifted_rate")
    blocks, steps = 8 * torch.cuda.get_device_properties(0).multi_processor_count, 2000
    out = cupy.asarray(torch.empty(blocks, device="cuda"))
    flops = blocks * steps * 12 * 64 * 64 * 16 * 2
    for shift in (0, 1, 2):
        for with_base_offset in (1, 0):
            args = inputs + (out, cupy.int32(steps), cupy.int32(shift),
                             cupy.int32(with_base_offset))
            ms = timer(torch.device("cuda"), lambda: kernel((blocks,), (128,), args), 5)
            print(f"taps {shift} rows apart, base offset {'set' if with_base_offset else '0'}: "
                  f"{ms:.3f} ms, {flops / ms / 1e9:.0f} TFLOP/s", flush=True)


def main() -> None:
    module = build()
    kernel = module.get_function("shifted_products")
    gen = torch.Generator("cuda").manual_seed(0)
    a = torch.randn(128, 64, device="cuda", generator=gen).to(torch.bfloat16)
    b = torch.randn(64, 64, device="cuda", generator=gen).to(torch.bfloat16)   # (N, K)
    inputs = (cupy.asarray(a.view(torch.int16)), cupy.asarray(b.view(torch.int16)))
    want = torch.stack([a[s:s + 64].double() @ b.double().T for s in range(SHIFTS)])
    for with_base_offset in (1, 0):
        out = torch.full((SHIFTS, 64, 64), float("nan"), device="cuda")
        kernel((1,), (128,), inputs + (cupy.asarray(out), cupy.int32(SHIFTS),
                                       cupy.int32(with_base_offset)))
        torch.cuda.synchronize()
        errors = ((out.double() - want).abs().amax(dim=(1, 2))
                  / want.abs().amax(dim=(1, 2))).tolist()
        unwritten = int(out.isnan().sum())
        print(f"base offset {'(start >> 7) & 7' if with_base_offset else '0'}: "
              f"{unwritten} elements unwritten; error by shift: "
              + " ".join(f"{s}:{e:.1e}" for s, e in enumerate(errors)), flush=True)
    rates(module, inputs)


if __name__ == "__main__":
    main()
