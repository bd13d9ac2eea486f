"""col2im.cu's index arithmetic, checked on the host, where CI has nvcc but no GPU.

tests/host/harness.cu is compiled by nvcc for sm_90 (so every kernel instantiation the
library launches must compile) into a shared library whose entry point runs the kernels' own
per-element functions on the CPU. Its results must match the PyTorch path in
gemmconv/columns.py over many geometries and all four dtypes.
"""
import ctypes
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from gemmconv import cases
from gemmconv.columns import col2im, im2col
from gemmconv.shapes import Geometry
from helpers import generator, rel_error

ROOT = Path(__file__).resolve().parents[1]
DTYPES = {torch.float32: (0, 1e-6), torch.float64: (1, 1e-14), torch.float16: (2, 2e-3),
          torch.bfloat16: (3, 1.5e-2)}


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        if os.environ.get("GEMMCONV_REQUIRE_NVCC"):
            pytest.fail("nvcc not found but GEMMCONV_REQUIRE_NVCC is set")
        pytest.skip("nvcc not found")
    library = tmp_path_factory.mktemp("harness") / "harness.so"
    subprocess.run([nvcc, "-arch=sm_90", "-std=c++17", "-O2", "-shared", "-Xcompiler", "-fPIC",
                    "-o", str(library), str(ROOT / "tests/host/harness.cu")], check=True)
    lib = ctypes.CDLL(str(library))
    lib.gemmconv_host.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                  ctypes.POINTER(ctypes.c_longlong)] + [ctypes.c_void_p] * 3
    return lib


def _run(lib, op, dtype, g, fields, src, bias, dst):
    array = (ctypes.c_longlong * len(fields))(*fields)
    pointer = lambda t: None if t is None else t.data_ptr()
    assert lib.gemmconv_host(op, DTYPES[dtype][0], g.nd, array, pointer(src), pointer(bias),
                             pointer(dst)) == 0


GEOMETRIES = cases.random_cases(120, seed=3) + cases.EDGE


def _geometry(case):
    return Geometry(case.kernel_size, case.stride, case.padding, case.dilation)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", GEOMETRIES, ids=lambda c: c.name)
def test_host_col2im_matches_torch(harness, case, dtype):
    g, planes = _geometry(case), max(case.batch, 1) * case.out_channels
    gen = generator(case.name, "col2im", str(dtype))
    columns = torch.randn(planes, g.taps, math.prod(case.size), generator=gen).to(dtype)
    bias = torch.randn(case.out_channels, generator=gen).to(dtype) if case.bias else None
    image = torch.full((planes, *case.output_size), float("nan"), dtype=dtype)
    _run(harness, 0, dtype, g, g.fields(planes, case.out_channels, case.size, case.output_size),
         columns, bias, image)
    ref = col2im(columns.double(), None if bias is None else bias.double(), g, case.size,
                 case.output_size)
    assert rel_error(image, ref) < DTYPES[dtype][1]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", GEOMETRIES, ids=lambda c: c.name)
def test_host_im2col_matches_torch(harness, case, dtype):
    g, planes = _geometry(case), max(case.batch, 1) * case.out_channels
    image = torch.randn(planes, *case.output_size,
                        generator=generator(case.name, "im2col", str(dtype))).to(dtype)
    columns = torch.full((planes, g.taps, math.prod(case.size)), float("nan"), dtype=dtype)
    _run(harness, 1, dtype, g, g.fields(planes, 1, case.size, case.output_size), image, None,
         columns)
    assert torch.equal(columns, im2col(image, g, case.size))        # a pure copy: exact
