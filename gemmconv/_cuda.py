"""The CUDA back end: CuPy, kernel compilation and launches, the cuBLAS handle.

Imported only when a CUDA tensor arrives. Kernels are compiled by NVRTC once per process
for each (device, dtype, number of spatial dims) and launched on PyTorch's current stream
of the tensors' own device.
"""
from __future__ import annotations

import contextlib
import functools
import math
import time
from pathlib import Path

import numpy as np
import torch

from .shapes import Geometry

SOURCE = Path(__file__).with_name("col2im.cu")
CPP_TYPES = {torch.float32: "float", torch.float64: "double",
             torch.float16: "gemmconv::half_t", torch.bfloat16: "gemmconv::bfloat16_t"}
BLOCK = 256
MAX_BLOCKS = 1 << 20  # the kernels loop over the rest

# Seconds spent compiling kernels in this process (reported apart from timings).
compile_seconds = 0.0


@functools.cache
def cupy():
    try:
        import cupy
    except ImportError as error:
        raise ImportError(
            "gemmconv needs CuPy for CUDA tensors: pip install 'gemmconv[cuda13]' "
            "(cupy-cuda13x) or 'gemmconv[cuda12]' (cupy-cuda12x)") from error
    return cupy


@contextlib.contextmanager
def on_device(device: torch.device):
    """Makes ``device`` and PyTorch's current stream on it CuPy's current ones."""
    cp = cupy()
    with cp.cuda.Device(device.index):
        with _external_stream(cp, torch.cuda.current_stream(device).cuda_stream):
            yield cp


class _StreamHandle:
    """The CUDA stream protocol (``__cuda_stream__``) for a raw stream pointer."""

    def __init__(self, pointer: int):
        self.pointer = pointer

    def __cuda_stream__(self):
        return 0, self.pointer


def _external_stream(cp, pointer: int):
    if hasattr(cp.cuda.Stream, "from_external"):
        return cp.cuda.Stream.from_external(_StreamHandle(pointer))
    return cp.cuda.ExternalStream(pointer)


@functools.cache
def _kernels(device_index: int, dtype: torch.dtype, nd: int) -> dict:
    global compile_seconds
    cp = cupy()
    names = {op: f"gemmconv::{op}_kernel<{CPP_TYPES[dtype]}, {nd}>" for op in ("col2im", "im2col")}
    start = time.perf_counter()
    with cp.cuda.Device(device_index):
        module = cp.RawModule(code=SOURCE.read_text(), options=("-std=c++17",),
                              name_expressions=tuple(names.values()))
        kernels = {op: module.get_function(name) for op, name in names.items()}
    compile_seconds += time.perf_counter() - start
    return kernels


def _struct(fields: list[int]) -> np.ndarray:
    # A size-one array is passed to the kernel by value, as the Geometry<ND> struct.
    return np.array([tuple(fields)], dtype=np.dtype([(f"f{i}", "<i8") for i in range(len(fields))]))


def _launch(op: str, device: torch.device, dtype: torch.dtype, nd: int, fields: list[int],
            elements: int, *tensors: torch.Tensor | None) -> None:
    if elements == 0:
        return
    kernel = _kernels(device.index, dtype, nd)[op]
    args = (_struct(fields), *(np.uint64(0 if t is None else t.data_ptr()) for t in tensors))
    blocks = min(math.ceil(elements / BLOCK), MAX_BLOCKS)
    with on_device(device):
        kernel((blocks,), (BLOCK,), args)


def col2im(columns: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor, g: Geometry,
           grid: tuple[int, ...], image: tuple[int, ...]) -> None:
    """``out (P, *image)`` = col2im of contiguous ``columns (P, K, L)``, plus bias."""
    planes = columns.shape[0]
    channels = 1 if bias is None else bias.shape[0]
    bias = None if bias is None else bias.contiguous()
    _launch("col2im", columns.device, columns.dtype, g.nd,
            g.fields(planes, channels, grid, image), out.numel(), columns.contiguous(), bias, out)


def im2col(image_tensor: torch.Tensor, out: torch.Tensor, g: Geometry, grid: tuple[int, ...],
           image: tuple[int, ...]) -> None:
    """``out (P, K, *grid)`` = im2col of contiguous ``image_tensor (P, *image)``."""
    planes = image_tensor.shape[0]
    _launch("im2col", image_tensor.device, image_tensor.dtype, g.nd,
            g.fields(planes, 1, grid, image), out.numel(), image_tensor, out)


def cublas_handle(cp) -> int:
    """CuPy's cuBLAS handle for the current device, bound to the current stream."""
    handle = cp.cuda.device.get_cublas_handle()
    from cupy_backends.cuda.libs import cublas
    cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
    return handle
