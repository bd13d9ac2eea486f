"""Compiles the fused route's Triton kernels for an H100/H200 (sm_90) on a machine without a
GPU, and reports what the compiler made of each: the wgmma instructions in its PTX, whether
the tensor cores' A operand comes from registers (a tile loaded, then converted, rather than
read from shared memory where the copy engine put it), the layout conversions, and the
registers, spills and shared memory of its cubin. No device time: run it before a GPU call.

    PYTHONPATH=. python benches/ttgir_check.py

(With the Triton the device runs: ``pip install --no-deps --target DIR triton==3.6.0`` and
``PYTHONPATH=DIR:.``.)
"""
import os
import re
import shutil
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from gemmconv import _triton, fused

TARGET = GPUTarget("cuda", 90, 32)


def compile_(fn, descriptors: dict, pointers: dict, constants: dict, warps: int, stages: int):
    """``fn`` compiled for sm_90: descriptors as {name: (dtype, block)}, pointers {name:
    dtype}, the constexprs; every other argument an i32."""
    sig = {name: f"tensordesc<{dt}[{','.join(map(str, block))}]>"
           for name, (dt, block) in descriptors.items()}
    sig.update({name: f"*{dt}" for name, dt in pointers.items()})
    sig.update({name: "constexpr" for name in constants})
    sig.update({name: "i32" for name in fn.arg_names if name not in sig})
    sig = {name: sig[name] for name in fn.arg_names}
    const = {(fn.arg_names.index(k),): v for k, v in constants.items()}
    return triton.compile(ASTSource(fn, sig, constexprs=const), target=TARGET,
                          options=dict(num_warps=warps, num_stages=stages))


def cuobjdump() -> str:
    """The cuobjdump on PATH, else the one Triton's wheel carries."""
    return shutil.which("cuobjdump") or os.path.join(
        os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")


def resources(kernel) -> str:
    """Registers, spills and shared memory from the cubin (cuobjdump)."""
    tool = cuobjdump()
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        out = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True,
                             text=True).stdout
    found = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+)", out)
    return f"{found[1]} registers, stack {found[2]}, shared {found[3]}" if found else out.strip()


def report(name: str, kernel) -> None:
    ttgir, ptx = kernel.asm["ttgir"], kernel.asm["ptx"]
    mma = sorted(set(re.findall(r"wgmma\.mma_async\.\S+", ptx)))
    print(f"{name}: {len(re.findall('wgmma.mma_async', ptx))} wgmma {mma}; A from registers: "
          f"{'dot_op<{opIdx = 0' in ttgir}; layout conversions {ttgir.count('convert_layout')}, "
          f"shared-memory loads {ttgir.count('ttg.local_load')}; {resources(kernel)}", flush=True)


def main() -> None:
    print("triton", triton.__version__)
    for dt, bk in (("fp32", 32), ("bf16", 64)):
        for bm, bn, warps, stages in ((64, 64, 4, 4), (128, 128, 8, 3)):
            box = (1, 1, bk)
            common = dict(B0=box[0], B1=box[1], B2=box[2], BM=bm, BN=bn, PRECISION="tf32")
            x = ("x_desc", (dt, (1, bn, *box)))
            for taps in (1, 3, 4):
                rows = compile_(_triton.weight_gradient,
                                dict([("g_desc", (dt, (1, *box, bm))), x]),
                                dict(out_ptr="fp32", offsets_ptr="i32"),
                                dict(common, TP=taps, ROUND=dt == "fp32", MOVED=False,
                                     MOVED_X=False, X_LAST=False, SWAP=False, DOWN_H=fused.BOXES_DOWN_H), warps, stages)
                report(f"weight_gradient {dt} {bm}x{bn} {taps} taps, rows", rows)
                moved = compile_(_triton.weight_gradient,
                                 dict([("g_desc", (dt, _moved_block(box, bm))), x]),
                                 dict(out_ptr="fp32", offsets_ptr="i32"),
                                 dict(common, TP=taps, ROUND=False, MOVED=True, MOVED_X=False,
                                      X_LAST=False, SWAP=False, DOWN_H=fused.BOXES_DOWN_H), warps, stages)
                report(f"weight_gradient moved {dt} {bm}x{bn} {taps} taps", moved)
                moved = compile_(_triton.weight_gradient,
                                 dict([("g_desc", (dt, (1, bm, *box))),
                                       ("x_desc", (dt, _moved_block(box, bn)))]),
                                 dict(out_ptr="fp32", offsets_ptr="i32"),
                                 dict(common, TP=taps, ROUND=False, MOVED=True, MOVED_X=True,
                                      X_LAST=False, SWAP=bn < bm, DOWN_H=fused.BOXES_DOWN_H), warps, stages)
                report(f"weight_gradient moved {dt} {bm}x{bn} {taps} taps, the input moved", moved)
                if dt != "fp32":
                    continue
                # A channels_last input's rows (X_LAST), with the output gradient's rows
                # (rounded in registers): fused.float32_weight_form's "rows".
                kernel = compile_(_triton.weight_gradient,
                                  dict([("g_desc", (dt, (1, *box, bm))),
                                        ("x_desc", (dt, (1, *box, bn)))]),
                                  dict(out_ptr="fp32", offsets_ptr="i32"),
                                  dict(common, TP=taps, ROUND=True, MOVED=False, MOVED_X=False,
                                       X_LAST=True, SWAP=False, DOWN_H=fused.BOXES_DOWN_H), warps, stages)
                report(f"weight_gradient rows {dt} {bm}x{bn} {taps} taps, channels_last input",
                       kernel)
        for kernel, pointers in ((_triton.shifted_rows, ("x_ptr", "out_ptr", "shifts_ptr")),
                                 (_triton.channels_innermost, ("x_ptr", "out_ptr", "sums_ptr")),
                                 (_triton.pitched, ("x_ptr", "out_ptr"))):
            types = {name: {"shifts_ptr": "i32", "sums_ptr": "fp32"}.get(name, dt)
                     for name in pointers}
            rows = 16 if kernel is _triton.shifted_rows else 32      # as fused.py launches them
            blocks = dict(BR=rows, BW=128) if "BW" in kernel.arg_names else dict(BC=64, BP=64)
            flags = {name: value for name, value in (("ROUND", dt == "fp32"), ("SUMS", False))
                     if name in kernel.arg_names}
            for rows_last in ((False, True) if kernel is _triton.shifted_rows else (None,)):
                more = {} if rows_last is None else dict(ROWS_LAST=rows_last)
                copy = compile_(kernel, {}, types, dict(blocks, **more, **flags), 4, 1)
                report(f"{kernel.__name__} {dt}" + (", channels_last source" if rows_last else ""),
                       copy)
        for bn in (64, 128):
            forward = compile_(_triton.implicit_gemm,
                               dict(x_desc=(dt, (1, 1, 1, 128, bk)), w_desc=(dt, (1, bn, bk))),
                               dict(out_ptr=dt, bias_ptr=dt, offsets_ptr="i32", index_ptr="i32",
                                    count_ptr="i32"),
                               dict(BB=1, B0=1, B1=1, B2=128, BK=bk, BN=bn, ROUND=False,
                                    HAS_BIAS=True, PRECISION="tf32"), 4, 4)
            report(f"implicit_gemm {dt} 128x{bn}", forward)


def _moved_block(box: tuple, bm: int) -> tuple:
    """The box of the output gradient's moved copies (fused.shifted_copies' layout)."""
    return (1, *box[:2], bm, box[2])


if __name__ == "__main__":
    main()
