"""col2im and im2col on tensors: plain PyTorch on the CPU, gemmconv/col2im.cu on CUDA.

Shapes, stated once (``P`` planes = samples * channels, ``K`` = prod(kernel_size),
``L`` = prod(grid)):

    columns  (P, K, L)     entry [p, k, i]: tap k of the kernel at grid position i
    image    (P, *image)   planes may be any stride apart; each plane is contiguous

``padding`` defaults to the geometry's; a band of rows passes its own (see
:meth:`gemmconv.shapes.Geometry.band_padding`), which may be negative.

The CPU versions are the readable definition: one strided slice of the image per kernel
tap. The CUDA kernels compute the same sums as a gather, one thread per output element.
"""
from __future__ import annotations

import itertools
import math
from typing import Optional, Sequence

import torch

from .shapes import Geometry


def _window(g: Geometry, grid: Sequence[int], image: Sequence[int], padding: Sequence[int]):
    """A buffer covering every position the taps touch and the whole image: its extent,
    the image's slices in it, and per tap the slices that tap touches across the grid.
    Buffer index r is image position r - padding + lo."""
    los = [min(0, p) for p in padding]
    extent = [max(r, p + i) - lo for r, p, i, lo in zip(g.reach(grid), padding, image, los)]
    image_region = (slice(None),) + tuple(slice(p - lo, p - lo + i)
                                          for p, i, lo in zip(padding, image, los))
    # An empty grid (a band of output rows no tap reaches) gets empty slices, not ones that
    # a negative stop would wrap around.
    taps = [(tap, (slice(None),) + tuple(slice(k * d - lo, k * d - lo + (n - 1) * s + 1 if n
                                               else k * d - lo, s)
                                          for k, d, n, s, lo in zip(tap, g.dilation, grid,
                                                                    g.stride, los)))
            for tap in itertools.product(*map(range, g.kernel_size))]
    return extent, image_region, taps


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def col2im(columns: torch.Tensor, bias: Optional[torch.Tensor], g: Geometry,
           grid: Sequence[int], image: Sequence[int], out: Optional[torch.Tensor] = None,
           padding: Optional[Sequence[int]] = None) -> torch.Tensor:
    """Sums ``columns (P, K, L)`` into ``image (P, *image)``, adding ``bias[p % C]``.

    ``bias`` is ``(C,)`` with ``C`` dividing ``P``, or None. Writes every element of ``out``
    (new if None) and returns it.
    """
    planes, grid, image = columns.shape[0], tuple(grid), tuple(image)
    padding = tuple(g.padding if padding is None else padding)
    if out is None:
        out = columns.new_empty((planes, *image))
    if columns.is_cuda:
        from . import _cuda
        _cuda.col2im(columns, bias, out, g, grid, padding)
        return out

    extent, image_region, taps = _window(g, grid, image, padding)
    cols = columns.view(planes, *g.kernel_size, *grid)
    buffer = columns.new_zeros((planes, *extent), dtype=_accumulation_dtype(columns.dtype))
    for tap, region in taps:
        buffer[region] += cols[(slice(None),) + tap]
    result = buffer[image_region]
    if bias is not None:
        c = bias.shape[0]
        result = result.reshape(planes // c, c, *image) + bias.view(c, *[1] * g.nd)
    return out.copy_(result.view(out.shape))


def im2col(image_tensor: torch.Tensor, g: Geometry, grid: Sequence[int],
           padding: Optional[Sequence[int]] = None,
           out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The columns ``(P, K, L)`` of ``image_tensor (P, *image)``: zero where a tap falls
    outside the image. Writes every element of ``out`` (new if None): contiguous ``(P, K, L)``,
    or ``(P / C, C, K, L)`` blocks of C planes, each block contiguous, any distance apart
    (room between them for rows of the caller's own). Returns ``out``."""
    planes, image, grid = image_tensor.shape[0], tuple(image_tensor.shape[1:]), tuple(grid)
    padding = tuple(g.padding if padding is None else padding)
    if out is None:
        out = image_tensor.new_empty((planes, g.taps, math.prod(grid)))
    elif out.dim() < 3:
        out = out.view(planes, g.taps, -1)
    if image_tensor.is_cuda:
        from . import _cuda
        _cuda.im2col(image_tensor, out, g, grid, padding)
        return out

    extent, image_region, taps = _window(g, grid, image, padding)
    buffer = image_tensor.new_zeros((planes, *extent))
    buffer[image_region] = image_tensor
    blocks = out if out.dim() == 4 else out.unsqueeze(0)          # (P / C, C, K, L)
    cells = blocks.view(*blocks.shape[:3], *grid)
    for t, (_, region) in enumerate(taps):
        cells[:, :, t] = buffer[region].view(*blocks.shape[:2], *grid)
    return out
