"""col2im and im2col on tensors: plain PyTorch on the CPU, gemmconv/col2im.cu on CUDA.

Shapes, stated once (``P`` planes = samples * channels, ``K`` = prod(kernel_size),
``L`` = prod(grid)):

    columns  (P, K, L)     entry [p, k, i]: tap k of the kernel at grid position i
    image    (P, *image)

The CPU versions are the readable definition: one strided slice of the image per kernel
tap. The CUDA kernels compute the same sums as a gather, one thread per output element.
"""
from __future__ import annotations

import itertools

import torch

from .shapes import Geometry


def _tap_slices(g: Geometry, grid: tuple[int, ...]):
    """(tap index, slices of the padded image that tap touches across the grid), per tap."""
    for tap in itertools.product(*map(range, g.kernel_size)):
        yield tap, (slice(None),) + tuple(
            slice(k * d, k * d + (n - 1) * s + 1, s)
            for k, d, n, s in zip(tap, g.dilation, grid, g.stride))


def _padded_extent(g: Geometry, grid: tuple[int, ...], image: tuple[int, ...]) -> list[int]:
    # Index r of the padded buffer is image position r - padding; it must hold every
    # position a tap touches and the whole image.
    return [max(r, p + i) for r, p, i in zip(g.reach(grid), g.padding, image)]


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def col2im(columns: torch.Tensor, bias: torch.Tensor | None, g: Geometry,
           grid: tuple[int, ...], image: tuple[int, ...],
           out: torch.Tensor | None = None) -> torch.Tensor:
    """Sums ``columns (P, K, L)`` into ``image (P, *image)``, adding ``bias[p % C]``.

    ``bias`` is ``(C,)`` with ``C`` dividing ``P``, or None. Writes every element of ``out``
    (contiguous, new if None) and returns it.
    """
    planes = columns.shape[0]
    if out is None:
        out = columns.new_empty((planes, *image))
    if columns.is_cuda:
        from . import _cuda
        _cuda.col2im(columns, bias, out, g, grid, image)
        return out

    cols = columns.view(planes, *g.kernel_size, *grid)
    buffer = columns.new_zeros((planes, *_padded_extent(g, grid, image)),
                               dtype=_accumulation_dtype(columns.dtype))
    for tap, region in _tap_slices(g, grid):
        buffer[region] += cols[(slice(None),) + tap]
    result = buffer[(slice(None),) + tuple(slice(p, p + i) for p, i in zip(g.padding, image))]
    if bias is not None:
        c = bias.shape[0]
        result = result.reshape(planes // c, c, *image) + bias.view(c, *[1] * g.nd)
    return out.copy_(result.view_as(out))


def im2col(image_tensor: torch.Tensor, g: Geometry, grid: tuple[int, ...]) -> torch.Tensor:
    """The columns ``(P, K, L)`` of ``image_tensor (P, *image)``: zero where a tap falls
    outside the image."""
    planes, image = image_tensor.shape[0], tuple(image_tensor.shape[1:])
    image_tensor = image_tensor.contiguous()
    if image_tensor.is_cuda:
        from . import _cuda
        out = image_tensor.new_empty((planes, g.taps, *grid))
        _cuda.im2col(image_tensor, out, g, grid, image)
        return out.view(planes, g.taps, -1)

    buffer = image_tensor.new_zeros((planes, *_padded_extent(g, grid, image)))
    buffer[(slice(None),) + tuple(slice(p, p + i) for p, i in zip(g.padding, image))] = image_tensor
    return torch.stack([buffer[region] for _, region in _tap_slices(g, grid)], 1).view(
        planes, g.taps, -1)
