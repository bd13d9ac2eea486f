"""col2im and im2col on tensors: plain PyTorch on the CPU, gemmconv/col2im.cu on CUDA.

Shapes, stated once (``P`` planes = samples * channels, ``K`` = prod(kernel_size),
``L`` = prod(grid)):

    columns  (P, K, L)               entry [p, k, i]: tap k of the kernel at grid position i
             or (S, C, K, *grid)     the same for plane p = s * C + c, in any strides but
                                     the innermost grid dim's (1)
    image    (P, *image)             planes may be any stride apart; each plane is contiguous

Channels innermost (channels_last images, ``G`` groups), where every dim but the samples'
is dense:

    columns  (S, *grid, G, K, C / G)   entry [s, i, g, k, j]: tap k at grid position i, of
                                       channel g * C / G + j
    image    (S, *image, C)            an (S, C, *image) tensor in channels_last order,
                                       permuted

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


def blocks(columns: torch.Tensor, channels: int, taps: int, grid: Sequence[int]) -> torch.Tensor:
    """``columns`` as a view ``(S, C, K, *grid)``: as it is where it has that many dims,
    else ``(P, K, L)`` or ``(S, C, K, L)`` with ``channels`` planes a block."""
    if columns.dim() == 3:
        columns = columns.view(columns.shape[0] // channels, channels, taps, columns.shape[-1])
    if columns.dim() == 3 + len(grid):
        return columns
    # The grid dims split out of the last by strides given outright: a view may give a
    # dimension of size one (a single tap) another stride, and the kernels derive a
    # channel's columns from the tap stride.
    inner = [columns.stride(3)]
    for size in reversed(grid[1:]):
        inner.insert(0, inner[0] * size)
    return columns.as_strided((*columns.shape[:3], *grid), (*columns.stride()[:3], *inner))


def _window(g: Geometry, grid: Sequence[int], image: Sequence[int], padding: Sequence[int]):
    """A buffer covering every position the taps touch and the whole image: its extent,
    the image's slices in it, and per tap the slices that tap touches across the grid (the
    spatial dims' only).
    Buffer index r is image position r - padding + lo."""
    los = [min(0, p) for p in padding]
    extent = [max(r, p + i) - lo for r, p, i, lo in zip(g.reach(grid), padding, image, los)]
    image_region = tuple(slice(p - lo, p - lo + i) for p, i, lo in zip(padding, image, los))
    # An empty grid (a band of output rows no tap reaches) gets empty slices, not ones that
    # a negative stop would wrap around.
    taps = [(tap, tuple(slice(k * d - lo, k * d - lo + (n - 1) * s + 1 if n else k * d - lo, s)
                        for k, d, n, s, lo in zip(tap, g.dilation, grid, g.stride, los)))
            for tap in itertools.product(*map(range, g.kernel_size))]
    return extent, image_region, taps


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype sums of ``dtype`` tensors are accumulated in: float32 at least."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def col2im(columns: torch.Tensor, bias: Optional[torch.Tensor], g: Geometry,
           grid: Sequence[int], image: Sequence[int], out: Optional[torch.Tensor] = None,
           padding: Optional[Sequence[int]] = None) -> torch.Tensor:
    """Sums ``columns`` into ``image (P, *image)``, adding ``bias[p % C]``.

    ``bias`` is ``(C,)`` or None; ``C`` divides ``P``, and is the block size of columns
    given as ``(S, C, K, *grid)``. Writes every element of ``out`` (new if None) and
    returns it.
    """
    columns, image, padding = _col2im_operands(columns, bias, g, grid, image, padding)
    planes = columns.shape[0] * columns.shape[1]
    if out is None:
        out = columns.new_empty((planes, *image))
    if columns.is_cuda:
        from . import _cuda
        _cuda.col2im(columns, bias, out, g, padding)
        return out

    extent, image_region, taps = _window(g, grid, image, padding)
    cols = columns.unflatten(2, g.kernel_size)
    buffer = columns.new_zeros((*columns.shape[:2], *extent),
                               dtype=accumulation_dtype(columns.dtype))
    for tap, region in taps:
        buffer[(..., *region)] += cols[(slice(None), slice(None), *tap)]
    result = buffer[(..., *image_region)]
    if bias is not None:
        result = result + bias.view(-1, *[1] * g.nd)
    return out.copy_(result.reshape(out.shape))


def _col2im_operands(columns: torch.Tensor, bias: Optional[torch.Tensor], g: Geometry,
                     grid: Sequence[int], image: Sequence[int],
                     padding: Optional[Sequence[int]]) -> tuple:
    """col2im's columns as blocks ``(S, C, K, *grid)``, its image size and padding."""
    grid, image = tuple(grid), tuple(image)
    padding = tuple(g.padding if padding is None else padding)
    if bias is not None:
        block = bias.shape[0]
    elif columns.dim() == 3 and columns.stride(0) == g.taps * columns.stride(1):
        # No bias: one block of every plane, so that the kernel's threads may take several
        # planes each (_cuda.col2im_planes).
        block = columns.shape[0] or 1
    else:
        block = 1
    return blocks(columns, block, g.taps, grid), image, padding


def col2im_launch(columns: torch.Tensor, bias: Optional[torch.Tensor], g: Geometry,
                  grid: Sequence[int], image: Sequence[int], out: torch.Tensor,
                  padding: Optional[Sequence[int]] = None):
    """The CUDA launch :func:`col2im` makes on these arguments (``_cuda.Launch``), for
    callers that replay it (``_cuda.run_col2im``)."""
    from . import _cuda
    columns, _, padding = _col2im_operands(columns, bias, g, grid, image, padding)
    return _cuda.col2im_launch(columns, out, g, padding)


def im2col(image_tensor: torch.Tensor, g: Geometry, grid: Sequence[int],
           padding: Optional[Sequence[int]] = None,
           out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The columns of ``image_tensor (P, *image)``: zero where a tap falls outside the
    image. Writes every element of ``out`` (new ``(P, K, L)`` if None), which may also be
    ``(S, C, K, L)`` or ``(S, C, K, *grid)`` in any strides (see the module's shapes: room
    between blocks for rows of the caller's own, or another order). Returns ``out``."""
    planes, image, grid = image_tensor.shape[0], tuple(image_tensor.shape[1:]), tuple(grid)
    padding = tuple(g.padding if padding is None else padding)
    if out is None:
        out = image_tensor.new_empty((planes, g.taps, math.prod(grid)))
    view = _im2col_view(out, planes, g, grid)
    if image_tensor.is_cuda:
        from . import _cuda
        _cuda.im2col(image_tensor, view, g, padding)
        return out

    extent, image_region, taps = _window(g, grid, image, padding)
    buffer = image_tensor.new_zeros((*view.shape[:2], *extent))
    buffer[(..., *image_region)] = image_tensor.view(*view.shape[:2], *image)
    for t, (_, region) in enumerate(taps):
        view[:, :, t] = buffer[(..., *region)]
    return out


def _im2col_view(out: torch.Tensor, planes: int, g: Geometry, grid: tuple) -> torch.Tensor:
    """im2col's ``out`` as blocks ``(S, C, K, *grid)``."""
    flat = out.dim() < 3   # (P, K L), its sizes named: with no planes, -1 infers nothing
    return blocks(out.view(planes, g.taps, math.prod(grid)) if flat else out, 1, g.taps, grid)


def im2col_launch(image_tensor: torch.Tensor, g: Geometry, grid: Sequence[int],
                  out: torch.Tensor, padding: Optional[Sequence[int]] = None):
    """The CUDA launch :func:`im2col` makes on these arguments (``_cuda.Launch``; the image's
    planes contiguous), for callers that replay it (``_cuda.run_im2col``)."""
    from . import _cuda
    padding = tuple(g.padding if padding is None else padding)
    view = _im2col_view(out, image_tensor.shape[0], g, tuple(grid))
    return _cuda.im2col_launch(image_tensor, view, g, padding)


def _planar(columns: torch.Tensor) -> torch.Tensor:
    """Channels-innermost columns ``(S, *grid, G, K, C / G)`` as ``(S * C, K, L)``, copied."""
    nd = columns.dim() - 4
    samples, groups, taps, per_group = columns.shape[0], *columns.shape[-3:]
    order = (0, nd + 1, nd + 3, nd + 2, *range(1, nd + 1))    # (S, G, C / G, K, *grid)
    cells = math.prod(columns.shape[1:nd + 1])   # (named, as _im2col_view's)
    return columns.permute(order).reshape(samples * groups * per_group, taps, cells)


def col2im_interleaved(columns: torch.Tensor, bias: Optional[torch.Tensor], g: Geometry,
                       image: Sequence[int], out: Optional[torch.Tensor] = None,
                       padding: Optional[Sequence[int]] = None) -> torch.Tensor:
    """:func:`col2im` with channels innermost: ``columns (S, *grid, G, K, C / G)`` summed
    into ``out (S, *image, C)`` (new if None), plus ``bias (C,)``. Returns ``out``."""
    samples, grid = columns.shape[0], tuple(columns.shape[1:1 + g.nd])
    channels = columns.shape[-3] * columns.shape[-1]
    padding = tuple(g.padding if padding is None else padding)
    if out is None:
        out = columns.new_empty((samples, *image, channels))
    if columns.is_cuda:
        from . import _cuda
        _cuda.col2im_interleaved(columns, bias, out, g, padding)
        return out
    planes = col2im(_planar(columns), None, g, grid, image, padding=padding)
    result = planes.view(samples, channels, *image).movedim(1, -1)
    return out.copy_(result if bias is None else result + bias)


def im2col_interleaved(image_tensor: torch.Tensor, g: Geometry, grid: Sequence[int],
                       groups: int = 1, padding: Optional[Sequence[int]] = None,
                       out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """:func:`im2col` with channels innermost: the columns ``(S, *grid, G, K, C / G)`` of
    ``image_tensor (S, *image, C)`` into ``out`` (new if None). Returns ``out``."""
    samples, image, channels = image_tensor.shape[0], image_tensor.shape[1:-1], image_tensor.shape[-1]
    padding = tuple(g.padding if padding is None else padding)
    if out is None:
        out = image_tensor.new_empty((samples, *grid, groups, g.taps, channels // groups))
    if image_tensor.is_cuda:
        from . import _cuda
        _cuda.im2col_interleaved(image_tensor, out, g, padding)
        return out
    planes = image_tensor.movedim(-1, 1).reshape(samples * channels, *image)
    columns = im2col(planes, g, grid, padding=padding)           # (S C, K, L)
    columns = columns.view(samples, groups, channels // groups, g.taps, *grid)
    nd = g.nd
    return out.copy_(columns.permute(0, *range(4, 4 + nd), 1, 3, 2))
