"""Transposed convolution on channels_last tensors, with no layout copies.

A channels_last tensor ``(N, C, *spatial)`` is, in memory, a matrix of positions by
channels. So one GEMM over all samples' positions makes the columns, positions by (group,
tap, channel), in columns.py's channels-innermost layout. col2im then sums them into a
channels_last output. (``G`` groups, ``K = prod(kernel_size)``, ``L = prod(input spatial)``):

    input    (N, C_in, *grid), channels_last      as x (N L, G, C_in / G)
    weight   (C_in, C_out / G, *kernel)           as w (G, C_in / G, K C_out / G), a copy
    columns  (N, *grid, G, K, C_out / G)          = x @ w, group by group
    output   (N, C_out, *image), channels_last    = col2im(columns) + bias

As on the planar routes (ops.py), the forward may first gather some dims' taps by im2col
(shapes.Split), making fewer column bytes where C_in < C_out or kernels are large; or, for
3-D calls, carry W's taps in the GEMM's reduction over overlapping runs of a zero-padded
copy of the input (shapes.PaddedRows, :func:`forward_by_rows`).

Backward: ``columns = im2col(grad_output)`` in the same layout; ``grad_input = columns @
w^T`` and ``grad_weight = x^T @ columns``, each one product over every position.

The weight is reordered so that each tap's output channels lie side by side: col2im and
im2col then move whole runs of channels. That copy is the weight's size, small beside the
columns; the activations are not copied (so the GEMMs, whose first operand is an
activation here, run without gemm.py's trial of that operand's other layout), but where
their rows of channels are not whole 16-byte units and the products are large (see
:func:`padded_channels`): then the input, the weight and the input gradient pass through
copies zero-padded to whole units.
"""
from __future__ import annotations

import functools
import math
from typing import Callable, List, NamedTuple, Optional, Sequence, Union

import torch

from . import columns as cols
from . import gemm
from .shapes import ConvTransposeArgs, PaddedRows

_FORMATS = {4: torch.channels_last, 5: torch.channels_last_3d}


def suggested(*tensors: Optional[torch.Tensor]) -> bool:
    """Whether a call takes the channels_last route, as torch's convolutions decide their
    output's memory format: where any of the tensors (input or weight) is laid out
    channels_last and not also contiguous (tensors of one channel or one position are
    both, and count as contiguous)."""
    for t in tensors:   # (a loop, not any() over a generator: every call pays this)
        if isinstance(t, torch.Tensor) and t.dim() in _FORMATS and not t.is_contiguous() \
                and t.is_contiguous(memory_format=_FORMATS[t.dim()]):
            return True
    return False


def memory_format(dims: int) -> torch.memory_format:
    """channels_last for 4-D tensors, channels_last_3d for 5-D ones."""
    return _FORMATS[dims]


def empty(like: torch.Tensor, shape, interleaved: bool,
          device: Optional[Union[torch.device, str]] = None) -> torch.Tensor:
    """A new tensor of ``shape`` like ``like`` (on ``device`` where given: "meta" for its
    strides alone), channels_last where ``interleaved``."""
    if not interleaved:
        return like.new_empty(shape, device=device)
    return torch.empty(shape, dtype=like.dtype, device=device or like.device,
                       memory_format=_FORMATS[len(shape)])


def _positions(t: torch.Tensor) -> torch.Tensor:
    """A channels_last ``t (N, C, *spatial)`` as the view ``(N, *spatial, C)``, dense."""
    return t.movedim(1, -1)


def ordered(t: torch.Tensor) -> torch.Tensor:
    """``t`` in channels_last order, copied only where it is not."""
    return t.contiguous(memory_format=_FORMATS[t.dim()])


def _weight(weight: torch.Tensor, a: ConvTransposeArgs,
            gathered: Sequence[bool] = ()) -> torch.Tensor:
    """``weight (C_in, C_out / G, *kernel)`` as the GEMM of the split that gathers the
    ``gathered`` dims reads it (shapes.Split): ``(G, Ka C_in / G, Kb C_out / G)``, rows
    (gathered taps flipped, input channel), columns (other taps, output channel), as
    channels-innermost columns order them; contiguous."""
    nd, groups = a.geometry.nd, a.groups
    gathered = tuple(gathered) or (False,) * nd
    taken = [d for d in range(nd) if gathered[d]]
    kept = [d for d in range(nd) if not gathered[d]]
    w = weight.flip([2 + d for d in taken]) if taken else weight
    w = w.reshape(groups, a.in_channels // groups, a.out_channels // groups, *a.geometry.kernel_size)
    w = w.permute(0, *[3 + d for d in taken], 1, *[3 + d for d in kept], 2)
    ka = math.prod(a.geometry.kernel_size[d] for d in taken)
    return w.reshape(groups, ka * a.in_channels // groups, -1)


def dense_weight(w: torch.Tensor, group_channels: int) -> torch.Tensor:
    """``w (G, r, K c)`` (_weight's, ``c = group_channels``) as the weight of one product for
    all groups (gemm.dense_groups), ``(1, G r, K G c)``: block-diagonal over the groups, its
    columns tap by tap, each tap's channels of every group back to back, as an ungrouped
    layer's columns order them. col2im then reads a tap's C_out channels as one run, where
    the grouped order leaves them in G runs a group's taps apart (session 56: its
    channels_last col2im took 0.53 ms on 3d-strided-grouped, the planar one 0.42)."""
    groups, rows, width = w.shape
    taps = width // group_channels
    dense = w.new_zeros(groups, rows, taps, groups, group_channels)
    blocks = w.view(groups, rows, taps, group_channels)
    dense.diagonal(dim1=0, dim2=3).copy_(blocks.permute(1, 2, 3, 0))   # dense[g, :, :, g] = w[g]
    return dense.view(1, groups * rows, width * groups)


def gemm_operands(x: torch.Tensor, weight: torch.Tensor, a: ConvTransposeArgs,
                  channels: int, dense: bool, gathered: Sequence[bool] = ()) -> tuple:
    """The forward GEMM's operands, for :func:`forward` and ops' replay of it: ``x``'s
    positions ``(P, C_in)`` and the reordered weight (:func:`_weight` of the split gathering
    ``gathered``), zero-padded to ``channels`` input channels where that is more
    (:func:`padded_channels`: none gathered), or, where ``dense``, one block-diagonal weight
    for all groups whose columns are an ungrouped layer's (:func:`dense_weight`)."""
    x_rows, w = _positions(x).reshape(-1, a.in_channels), _weight(weight, a, gathered)
    if dense:
        return x_rows, dense_weight(w, a.out_channels // a.groups)
    if channels == a.in_channels:
        return x_rows, w
    return _padded(x_rows, channels), _padded(w, channels, dim=-2)


def padded_channels(a: ConvTransposeArgs, element_size: int) -> int:
    """The input channels the GEMMs run over: C_in, but where a position's channels are not
    whole 16-byte units, the products are large (gemm.LAYOUT_TRIAL_FLOPS) and there is one
    group, C_in rounded up to them, the input and the weight zero-padded to as many. The
    channels are the products' contiguous reduction dim here (the input gradient's
    contiguous output dim), and on a dim of any length cuBLAS takes its kernels for
    unaligned operands: FCN-32s's bfloat16 forward product (21 channels) took 287 us there,
    against 105 on the planar route, where the channels are not contiguous (benches/NOTES.md,
    session 26)."""
    c, unit = a.in_channels, max(1, 16 // element_size)
    flops = 2 * a.batch * math.prod(a.grid) * c * a.column_rows
    if c % unit == 0 or a.groups != 1 or flops < gemm.LAYOUT_TRIAL_FLOPS:
        return c
    return -(-c // unit) * unit


def _padded(t: torch.Tensor, width: int, dim: int = -1) -> torch.Tensor:
    """``t`` zero-padded to ``width`` along ``dim`` (-1 or -2), a dense copy."""
    grow = width - t.shape[dim]
    return torch.nn.functional.pad(t, (0, grow) if dim == -1 else (0, 0, 0, grow))


def _group_rows(rows: torch.Tensor, groups: int) -> torch.Tensor:
    """Rows ``(P, G * c)`` (any row stride) as ``(1, G, P, c)``, each group's a matrix."""
    p, width = rows.shape
    per = width // groups
    return rows.as_strided((1, groups, p, per), (0, per, rows.stride(0), 1),
                           rows.storage_offset())


def _by_groups(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """``out[:, g] = a[:, g] @ b[g]`` for rows ``a (P, G k)`` and ``out (P, G n)`` (any row
    strides) and ``b (G, k, n)``: one product per group, batched; ``b`` may also be the
    block-diagonal ``(1, G k, G n)`` (gemm.dense_groups), one product for all groups. ``a``
    is an activation, so gemm.matmul does not try its other layout."""
    groups = b.shape[0]
    gemm.matmul(_group_rows(a, groups), b.unsqueeze(0), _group_rows(out, groups), False)


class Plan(NamedTuple):
    """A call's chunks (ConvTransposeArgs.forward_chunks or backward_chunks, in grid rows of
    the split's grid), the rows of channels_last positions each covers (start, count), and
    the workspace elements the largest needs."""
    chunks: tuple
    rows: tuple
    workspace: int


@functools.lru_cache(maxsize=256)
def forward_plan(a: ConvTransposeArgs, gathered: tuple, element_size: int, limit: int) -> Plan:
    """The plan of :func:`forward` along the split that gathers ``gathered``, once per call
    shape (host time that small calls wait for)."""
    split = a.split(gathered)
    cells = math.prod(split.grid)
    inner = cells // split.grid[0]
    chunks = tuple(a.forward_chunks(limit, element_size, split))
    rows = tuple(_run_of_rows(n0, n1, i0, i1, cells, inner) for n0, n1, _, _, i0, i1 in chunks)
    per_position = a.groups * (split.scatter_rows + (split.gather_rows if split.gather else 0))
    return Plan(chunks, rows, max((count * per_position for _, count in rows), default=0))


@functools.lru_cache(maxsize=256)
def backward_plan(a: ConvTransposeArgs, element_size: int, limit: int) -> Plan:
    """The plan of :func:`backward`'s im2col and GEMMs, once per call shape. A pointwise
    call (ConvTransposeArgs.pointwise) needs no workspace: its columns are grad_out's own
    rows, which the GEMMs read where they lie."""
    cells = math.prod(a.grid)
    inner = cells // a.grid[0]
    chunks = tuple(a.backward_chunks(limit, element_size))
    rows = tuple(_run_of_rows(n0, n1, i0, i1, cells, inner) for n0, n1, i0, i1 in chunks)
    return Plan(chunks, rows, 0 if a.pointwise else
                max((count * a.groups * a.column_rows for _, count in rows), default=0))


def _run_of_rows(n0: int, n1: int, i0: int, i1: int, cells: int, inner: int) -> tuple:
    """Samples n0:n1 of grid rows i0:i1 (whole samples, or a band of one) as a run of
    channels_last positions: (first, count)."""
    first = n0 * cells + i0 * inner
    return first, (n1 - 1) * cells + i1 * inner - first


def forward(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
            a: ConvTransposeArgs, gathered: Sequence[bool], limit: int) -> torch.Tensor:
    """The output of ``a``, channels_last, from ``x`` in any layout (copied into channels_last
    where it is not), along the split that gathers the ``gathered`` dims (shapes.Split; not
    one whose GEMM writes the output, a convolution's forward): im2col of those dims' taps
    where any, the GEMM, and col2im of the others'. In chunks of whole samples, or of bands
    of output rows of one sample, whose buffers fit in ``limit`` bytes
    (shapes.ConvTransposeArgs.forward_chunks). With ``Ka``, ``Kb`` the taps of the gathered
    dims and of the others, ``P`` the chunk's phase positions (Split.grid):

        gathered  (P, G, Ka, C_in / G)     = im2col(x) along ``split.gather``
        columns   (P, G, Kb, C_out / G)    = gathered @ _weight, group by group
        output    (N, *image, C_out)       = col2im(columns) along ``split.scatter`` + bias
    """
    split, groups = a.split(gathered), a.groups
    gather, scatter = split.gather, split.scatter
    cin = a.in_channels // groups
    rows, m, grid = split.gather_rows, split.scatter_rows, split.grid
    x = ordered(x)
    width = a.in_channels if gather else padded_channels(a, x.element_size())
    dense = gemm.dense_groups(x.dtype, x.is_cuda, groups, rows)   # one product for all groups
    x_rows, w = gemm_operands(x, weight, a, width, dense, split.gathered)
    column_groups = 1 if dense else groups
    plan = forward_plan(a, tuple(gathered), x.element_size(), limit)
    workspace = x.new_empty(plan.workspace)
    out = empty(x, a.output_shape, True)
    out_rows = _positions(out)
    for (n0, n1, o0, o1, i0, i1), (p0, count) in zip(plan.chunks, plan.rows):
        # Whole samples, or a band of one sample: in channels_last order, a run of rows.
        n, band = n1 - n0, (i1 - i0, *grid[1:])
        columns = workspace[:count * groups * m].view(count, groups * m)
        if gather:
            operand = workspace[count * groups * m:count * groups * (m + rows)].view(
                count, groups * rows)
            cols.im2col_interleaved(x[n0:n1].movedim(1, -1), gather, band, groups,
                                    padding=gather.band_padding(0, i0),
                                    out=operand.view(n, *band, groups, gather.taps, cin))
        else:
            operand = x_rows[p0:p0 + count]
        _by_groups(operand, w, columns)
        cols.col2im_interleaved(
            columns.view(n, *band, column_groups, scatter.taps, a.out_channels // column_groups),
            bias, scatter,
            (o1 - o0, *a.image[1:]), out=out_rows[n0:n1, o0:o1], padding=scatter.band_padding(o0, i0))
    return out


class RowsPlan(NamedTuple):
    """A call's padded rows (shapes.PaddedRows), its chunks of whole samples ``(n0, n1)``
    and the workspace elements the largest needs."""
    rows: PaddedRows
    chunks: tuple
    workspace: int


def _rows_workspace(a: ConvTransposeArgs, rows: PaddedRows, samples: int) -> int:
    """Workspace elements of :func:`forward_by_rows` over ``samples`` samples: the copy and
    the columns, each with the rows its last product runs past the samples' end."""
    k, m = rows.taps, rows.split.scatter_rows
    runs = -(-samples * rows.rows // k)                 # rows of each of the k products
    return (runs * k + k) * a.in_channels + runs * k * m


@functools.lru_cache(maxsize=256)
def rows_plan(a: ConvTransposeArgs, element_size: int, limit: int) -> Optional[RowsPlan]:
    """The plan of :func:`forward_by_rows`, or None where a position's input channels are
    not whole 16-byte units (the products' leading dims and the runs' starts then are not,
    and cuBLAS takes its slow kernels), its columns not whole 32-byte sectors (each
    product writes every kth row, so partial sectors meet in memory: 3d-96cube's bfloat16
    rows of 432 bytes ran 11% slower than the split route), or one sample's buffers exceed
    ``limit`` bytes (the split routes then take the call in bands of rows)."""
    rows = a.padded_rows()
    fits = lambda n: _rows_workspace(a, rows, n) * element_size <= limit
    if a.in_channels * element_size % 16 or rows.split.scatter_rows * element_size % 32 or \
            (a.batch and not fits(1)):
        return None
    step = 1
    while step < a.batch and fits(2 * step):
        step *= 2
    chunks = tuple((n, min(n + step, a.batch)) for n in range(0, a.batch, step))
    return RowsPlan(rows, chunks, _rows_workspace(a, rows, min(step, a.batch)))


def route(a: ConvTransposeArgs, element_size: int, limit: int) -> tuple[tuple, Optional[RowsPlan]]:
    """The forward's route: the dims whose taps im2col gathers and, where the call runs by
    padded rows (ConvTransposeArgs.interleaved_route; :func:`rows_plan`), their plan."""
    gathered, by_rows = a.interleaved_route()
    plan = rows_plan(a, element_size, limit) if by_rows else None
    return (a.gathered_dims() if by_rows and plan is None else gathered), plan


def forward_by_rows(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                    a: ConvTransposeArgs, plan: RowsPlan) -> torch.Tensor:
    """The output of ``a``, channels_last, from ``x`` in any layout, by padded rows
    (shapes.PaddedRows), in chunks of whole samples. Per chunk of ``n`` samples (``k`` the
    innermost dim's taps, ``R = n * rows``, ``Q = ceil(R / k)``):

        copy      (n, *grid[:-1], width, C_in)  = im2col(x) along ``rows.copy``: x
                                                zero-padded along the innermost dim; then
                                                k zero rows
        runs      (k, Q, k C_in)                product b's rows: the copy's positions
                                                b + q k onwards, k positions each
        columns   (Q, k, Kb C_out)              [q, b] = runs[b, q] @ weight (k C_in, Kb C_out),
                                                one product (GEMM) a b
        output    (n, *image, C_out)            = col2im(columns) along ``split.scatter`` + bias
    """
    rows = plan.rows
    split, k, c, m = rows.split, rows.taps, a.in_channels, rows.split.scatter_rows
    x = ordered(x)
    w = _weight(weight, a, split.gathered).view(1, 1, k * c, m)
    grid = (*a.grid[:-1], rows.width)
    workspace = x.new_empty(plan.workspace)
    out = empty(x, a.output_shape, True)
    out_rows = _positions(out)
    for n0, n1 in plan.chunks:
        n = n1 - n0
        runs = -(-n * rows.rows // k)
        copy = workspace[:(runs * k + k) * c]
        cols.im2col_interleaved(_positions(x[n0:n1]), rows.copy, grid,
                                out=copy[:n * rows.rows * c].view(n, *grid, 1, 1, c))
        # Read by rows no output reads, past the samples' end: zeros, not whatever was there.
        copy[n * rows.rows * c:].zero_()
        columns = workspace[copy.numel():copy.numel() + runs * k * m]
        # One call a product: batched over b, the runs' matrices would overlap, and cuBLASLt
        # offered only sm80 kernels for that (3 candidates against 8; benches/NOTES.md).
        for b in range(k):
            gemm.matmul(copy[b * c:].as_strided((1, 1, runs, k * c), (0, 0, k * c, 1)), w,
                        columns[b * m:].as_strided((1, 1, runs, m), (0, 0, k * m, 1)), False)
        cols.col2im_interleaved(columns[:n * rows.rows * m].view(n, *grid, 1, split.scatter.taps,
                                                                 a.out_channels),
                                bias, split.scatter, a.image, out=out_rows[n0:n1],
                                padding=split.scatter.padding)
    return out


def backward(grad_out: torch.Tensor, x: Optional[torch.Tensor],
             weight: Union[torch.Tensor, Callable[[], torch.Tensor]], a: ConvTransposeArgs,
             need: List[bool], limit: int, bias: Optional[torch.Tensor] = None,
             out: Optional[torch.Tensor] = None) -> List[torch.Tensor]:
    """Gradients of input, weight and bias, as ``need`` asks, channels_last (the weight's
    contiguous), from tensors in any layout; ``weight`` may be a function making it. As
    ops._backward, the input gradient is also the forward of the convolution ``a`` is the
    adjoint of, to which ``bias (C_in,)`` is then added; into ``out`` where given
    (channels_last: a graph's run, ops._ConvReplay)."""
    g, groups = a.geometry, a.groups
    cin, cout = a.in_channels // groups, a.out_channels // groups
    m = cout * g.taps
    grad_rows = _positions(ordered(grad_out))
    width = padded_channels(a, grad_out.element_size())
    x_rows = _positions(ordered(x)).reshape(-1, a.in_channels) if need[1] else None
    if x_rows is not None and width != a.in_channels:
        x_rows = _padded(x_rows, width)
    acc = cols.accumulation_dtype(grad_out.dtype)
    empty_grad = lambda: grad_out.new_empty(0)
    grad_input = None if not need[0] else out if out is not None else \
        empty(grad_out, a.input_shape, True)
    grad_weight = grad_out.new_zeros((1, groups, width // groups, m), dtype=acc) \
        if need[1] else None
    if need[0] or need[1]:
        plan = backward_plan(a, grad_out.element_size(), limit)
        workspace = grad_out.new_empty(plan.workspace)
        w = None
        # As the short side of both products; the columns then an ungrouped layer's, as the
        # forward's (dense_weight): im2col writes a tap's C_out channels as one run.
        dense = gemm.dense_groups(grad_out.dtype, grad_out.is_cuda, groups, cin)
        column_groups = 1 if dense else groups
        input_rows = _positions(grad_input).reshape(-1, a.in_channels) if need[0] else None
        products = input_rows if input_rows is None or width == a.in_channels else \
            input_rows.new_empty(input_rows.shape[0], width)
        for (n0, n1, i0, i1), (p0, count) in zip(plan.chunks, plan.rows):
            n = n1 - n0
            if a.pointwise:   # the output gradient's rows are the columns
                columns = grad_rows.reshape(-1, a.out_channels)[p0:p0 + count]
            else:
                columns = workspace[:count * groups * m].view(count, groups * m)
                cols.im2col_interleaved(grad_rows[n0:n1], g, (i1 - i0, *a.grid[1:]), column_groups,
                                        padding=g.band_padding(0, i0),
                                        out=columns.view(n, i1 - i0, *a.grid[1:], column_groups,
                                                         g.taps, a.out_channels // column_groups))
            if need[0]:
                if w is None:   # made once the first im2col is queued: the GPU starts meanwhile
                    w = _weight(weight() if callable(weight) else weight, a)
                    w = dense_weight(w, cout).transpose(1, 2).contiguous() if dense else \
                        w.transpose(1, 2)
                    w = _padded(w, width) if width != a.in_channels else w
                _by_groups(columns, w, products[p0:p0 + count])
            if need[1] and dense:   # all groups' products at once, their diagonal blocks kept
                product = gemm.matmul(x_rows[p0:p0 + count].t()[None, None], columns[None, None],
                                      grad_weight.new_empty(1, 1, a.in_channels, groups * m), False)
                blocks = product.view(groups, cin, g.taps, groups, cout).diagonal(dim1=0, dim2=3)
                grad_weight += blocks.permute(3, 0, 1, 2).reshape(1, groups, cin, m)
            elif need[1]:
                grad_weight += gemm.matmul(
                    _group_rows(x_rows[p0:p0 + count], groups).transpose(-1, -2),
                    _group_rows(columns, groups), grad_weight.new_empty(grad_weight.shape), False)
        if need[0] and products is not input_rows:
            input_rows.copy_(products[:, :a.in_channels])
        if need[0] and bias is not None:
            input_rows += bias
    if grad_input is None:
        grad_input = empty_grad()
    if need[1]:
        grad_weight = grad_weight[:, :, :cin].reshape(a.in_channels, g.taps, cout).transpose(1, 2).to(
            grad_out.dtype).reshape(a.in_channels, cout, *g.kernel_size)
    else:
        grad_weight = empty_grad()
    grad_bias = channel_sums(grad_out) if need[2] else empty_grad()
    return [grad_input, grad_weight, grad_bias]


# Positions from which channel_sums first sums SIDE_BY_SIDE rows side by side.
SIDE_BY_SIDE, SIDE_BY_SIDE_FROM = 32, 1 << 19


def channel_sums(t: torch.Tensor) -> torch.Tensor:
    """Sum of ``t (N, C, *spatial)`` over all but the channels, read in channels_last order
    (copied into it where it is not), accumulated in float32 at least: a bias's gradient.

    The sum of a ``(P, C)`` matrix over its P rows reads it at 0.6-0.9 TB/s where C is a few
    dozen (too few outputs for torch's reduction to keep the memory busy). Over many rows
    it first sums ``(P / 32, 32 C)``, 32 rows side by side, then those 32: the U-Net's last
    up-convolution's 134 MB gradient in 92 us against 166 (float32; bfloat16 70 against
    114), 2d-1024's 2.2 GB in 795 against 960 (H100, benches/results/s50/J). Below 2^19
    rows the second launch costs more than it saves."""
    acc = cols.accumulation_dtype(t.dtype)
    c = t.shape[1]
    rows = _positions(ordered(t)).reshape(-1, c)
    side = side_by_side(rows.shape[0])
    if side == 1:
        return rows.sum(0, dtype=acc).to(t.dtype)
    return rows.view(-1, side * c).sum(0, dtype=acc).view(side, c).sum(0).to(t.dtype)


def side_by_side(positions: int) -> int:
    """How many rows channel_sums sums side by side first, of ``positions`` rows."""
    return SIDE_BY_SIDE if positions >= SIDE_BY_SIDE_FROM and positions % SIDE_BY_SIDE == 0 else 1
