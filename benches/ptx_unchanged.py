"""Whether the weight-gradient kernel compiles for sm_90 to the same PTX as at a git
revision, with the constexprs added since set as the package launches them by default: a
check, on a machine without a GPU, that a change left the default path's code as it was.
The PTX is compared without its debug sections and line directives (they hold file paths
and line numbers).

    PYTHONPATH=. python benches/ptx_unchanged.py REV NAME=VALUE ...
    e.g. benches/ptx_unchanged.py bbaa2bd DOWN_H=False      (session 61, DOWN_H off)
         benches/ptx_unchanged.py 8b8969d                   (session 62: X_LAST renamed)

A constexpr renamed since (RENAMED: its name now, and before) goes to the kernel at REV
under its old name; one added since (DOWN_H before session 61) is left out there.

(With the Triton the device runs: ``pip install --no-deps --target DIR triton==3.6.0`` and
``PYTHONPATH=DIR:.``.)
"""
import ast
import importlib.util
import io
import re
import subprocess
import sys
import tarfile
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

# X_LAST was called SHARED_LAST from 689d30b to 38d4b86 (session 62), with SHARED_ROWS.
RENAMED = {"X_LAST": "SHARED_LAST", "SHARED_LAST": "X_LAST"}

# (name, descriptors {name: (dtype, block)}, constexprs, warps, stages): the forms as
# fused._grad_plan launches them.
CONFIGS = [
    ("float32 moved copies, 3 taps", dict(g_desc=("fp32", (1, 1, 1, 64, 32)), x_desc=("fp32", (1, 64, 1, 1, 32))),
     dict(B0=1, B1=1, B2=32, BM=64, BN=64, PRECISION="tf32", TP=3, ROUND=False, MOVED=True,
          MOVED_X=False, X_LAST=False, SWAP=False, DOWN_H=True), 4, 4),
    ("float32 input moved, swapped", dict(g_desc=("fp32", (1, 64, 1, 1, 32)), x_desc=("fp32", (1, 1, 1, 32, 32))),
     dict(B0=1, B1=1, B2=32, BM=64, BN=32, PRECISION="tf32", TP=4, ROUND=False, MOVED=True,
          MOVED_X=True, X_LAST=False, SWAP=True, DOWN_H=True), 4, 4),
    ("bfloat16 rows, 128 x 128", dict(g_desc=("bf16", (1, 1, 2, 32, 128)), x_desc=("bf16", (1, 128, 1, 2, 32))),
     dict(B0=1, B1=2, B2=32, BM=128, BN=128, PRECISION="tf32", TP=1, ROUND=False, MOVED=False,
          MOVED_X=False, X_LAST=False, SWAP=False, DOWN_H=True), 8, 3),
    ("float32 rows, channels_last input", dict(g_desc=("fp32", (1, 1, 1, 32, 64)), x_desc=("fp32", (1, 1, 1, 32, 64))),
     dict(B0=1, B1=1, B2=32, BM=64, BN=64, PRECISION="tf32", TP=2, ROUND=True, MOVED=False,
          MOVED_X=False, X_LAST=True, SWAP=False, DOWN_H=True), 4, 4),
]


def kernels(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ptx(fn, descriptors: dict, constants: dict, warps: int, stages: int) -> list:
    sig = {n: f"tensordesc<{dt}[{','.join(map(str, block))}]>" for n, (dt, block) in descriptors.items()}
    sig.update({"out_ptr": "*fp32", "offsets_ptr": "*i32"})
    constants = {RENAMED.get(n, n) if n not in fn.arg_names else n: v for n, v in constants.items()}
    constants = {n: v for n, v in constants.items() if n in fn.arg_names}   # (added since REV)
    sig.update({n: "constexpr" for n in constants})
    sig = {n: sig.get(n, "i32") for n in fn.arg_names}
    const = {(fn.arg_names.index(k),): v for k, v in constants.items()}
    kernel = triton.compile(ASTSource(fn, sig, constexprs=const), target=GPUTarget("cuda", 90, 32),
                            options=dict(num_warps=warps, num_stages=stages))
    code = kernel.asm["ptx"].split(".section")[0]
    code = re.sub(r"//.*|^\s*\.(loc|file)\b.*$", "", code, flags=re.M)   # source positions
    return [line for line in code.splitlines() if line.strip()]


def main() -> None:
    rev, added = sys.argv[1], dict(a.split("=", 1) for a in sys.argv[2:])
    added = {k: ast.literal_eval(v) for k, v in added.items()}
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", rev, "gemmconv/_triton.py"], check=True,
                                 capture_output=True).stdout
        tarfile.open(fileobj=io.BytesIO(archive)).extractall(tmp)
        old = kernels(f"{tmp}/gemmconv/_triton.py", "triton_at_rev")
        new = kernels("gemmconv/_triton.py", "triton_now")
        for name, descriptors, constants, warps, stages in CONFIGS:
            before = ptx(old.weight_gradient, descriptors, constants, warps, stages)
            after = ptx(new.weight_gradient, descriptors, dict(constants, **added), warps, stages)
            same = before == after
            print(f"{name}: {'the same PTX' if same else 'DIFFERENT PTX'} ({len(after)} lines)")


if __name__ == "__main__":
    main()
