"""Transposed convolution as GEMM + col2im: autograd and the functional API.

Shapes (``G`` groups, ``K = prod(kernel_size)``, ``L = prod(input spatial)``,
``M = C_out / G * K``):

    input    (N, C_in, *grid)          viewed as (N, G, C_in / G, L)
    weight   (C_in, C_out / G, *kernel) viewed as (G, C_in / G, M)
    columns  (N, G, M, L)              = weight^T @ input, per sample and group
    output   (N, C_out, *image)        = col2im(columns) + bias

Backward: ``columns = im2col(grad_output)``; ``grad_input = weight @ columns``;
``grad_weight = sum over samples of input @ columns^T``; ``grad_bias`` sums grad_output.

The operators are ``torch.library`` custom ops (``gemmconv::conv_transpose`` and its
backward), so autograd, ``torch.compile`` and fake tensors see one opaque op each.
"""
import math
from typing import List, Optional

import torch

from . import gemm
from .columns import col2im, im2col
from .shapes import ConvTransposeArgs, IntOrTuple, conv_transpose_args, row_chunks

_workspace_limit = 1 << 30


def get_workspace_limit() -> int:
    """Bytes of column buffer one call may hold at a time (see set_workspace_limit)."""
    return _workspace_limit


def set_workspace_limit(nbytes: int) -> None:
    """Bounds the column buffer: work is split into chunks of whole samples, or of bands of
    the outermost spatial dim of one sample, whose columns fit in ``nbytes``. The least a
    chunk holds is the columns for one output row of one sample. Default 1 GiB."""
    global _workspace_limit
    if not isinstance(nbytes, int) or nbytes <= 0:
        raise ValueError(f"workspace limit must be a positive number of bytes, got {nbytes!r}")
    _workspace_limit = nbytes


def _args_from_lists(input, weight, bias, stride, padding, output_padding, dilation, groups):
    nd = weight.dim() - 2
    return conv_transpose_args(f"conv_transpose{nd}d", nd, input, weight, bias, stride,
                               padding, output_padding, groups, dilation)


def _forward(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
             a: ConvTransposeArgs) -> torch.Tensor:
    if a.prefers_im2col():
        return _forward_by_im2col(x, weight, bias, a)
    g, groups = a.geometry, a.groups
    cin, m, cells = a.in_channels // groups, a.column_rows, math.prod(a.grid)
    inner = cells // a.grid[0]
    x = x.contiguous().view(a.batch, groups, cin, cells)
    weight_t = weight.contiguous().view(1, groups, cin, m).transpose(-1, -2)
    out = x.new_empty(a.output_shape)
    planes = out.view(a.batch * a.out_channels, *a.image)
    chunks = a.forward_chunks(_workspace_limit, x.element_size())
    workspace = x.new_empty(max(((n1 - n0) * groups * m * (i1 - i0) * inner
                                 for n0, n1, _, _, i0, i1 in chunks), default=0))
    for n0, n1, o0, o1, i0, i1 in chunks:
        n, band = n1 - n0, (i1 - i0) * inner
        columns = workspace[:n * groups * m * band].view(n, groups, m, band)
        gemm.matmul(weight_t.expand(n, -1, -1, -1), x[n0:n1, ..., i0 * inner:i1 * inner], columns)
        col2im(columns.view(n * a.out_channels, g.taps, band), bias, g, (i1 - i0, *a.grid[1:]),
               (o1 - o0, *a.image[1:]), out=planes[n0 * a.out_channels:n1 * a.out_channels, o0:o1],
               padding=g.band_padding(o0, i0))
    return out


def _forward_by_im2col(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                       a: ConvTransposeArgs) -> torch.Tensor:
    """Stride 1 only: ``output = flipped weight @ im2col(input)``, a convolution. Its columns
    ``(N, G, C_in / G * K, prod(output))`` outweigh GEMM + col2im's by C_in / C_out per
    output position against input position, which can be fewer bytes."""
    conv, groups, taps = a.convolution, a.groups, a.geometry.taps
    cin, cout, cells = a.in_channels // groups, a.out_channels // groups, math.prod(a.image)
    inner = cells // a.image[0]
    dims = list(range(2, 2 + conv.nd))
    # (C_in, C_out/G, *k) -> per group (C_out/G, C_in/G * K), taps flipped.
    w = weight.flip(dims).view(groups, cin, cout, taps).transpose(1, 2).reshape(1, groups, cout, cin * taps)
    x = x.contiguous().view(a.batch * a.in_channels, *a.grid)
    out = x.new_empty(a.output_shape)
    flat = out.view(a.batch, groups, cout, cells)
    row_bytes = a.in_channels * taps * inner * x.element_size()
    chunks = row_chunks(a.batch, a.image[0], row_bytes, _workspace_limit)
    workspace = x.new_empty(max(((n1 - n0) * a.in_channels * taps * (r1 - r0) * inner
                                 for n0, n1, r0, r1 in chunks), default=0))
    for n0, n1, r0, r1 in chunks:
        n, band = n1 - n0, (r1 - r0) * inner
        columns = im2col(x[n0 * a.in_channels:n1 * a.in_channels], conv, (r1 - r0, *a.image[1:]),
                         padding=conv.band_padding(0, r0), out=workspace[:n * a.in_channels * taps * band])
        gemm.matmul(w.expand(n, -1, -1, -1), columns.view(n, groups, cin * taps, band),
                    flat[n0:n1, ..., r0 * inner:r1 * inner])
    if bias is not None:
        out += bias.view(-1, *[1] * conv.nd)
    return out


def _backward(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
              a: ConvTransposeArgs, need: List[bool]) -> List[torch.Tensor]:
    g, groups = a.geometry, a.groups
    cin, m, cells = a.in_channels // groups, a.column_rows, math.prod(a.grid)
    inner = cells // a.grid[0]
    grad_out = grad_out.contiguous().view(a.batch * a.out_channels, *a.image)
    x = x.contiguous().view(a.batch, groups, cin, cells)
    weight = weight.contiguous().view(1, groups, cin, m)
    acc = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    grad_input = torch.empty_like(x) if need[0] else x.new_empty(0)
    grad_weight = x.new_zeros((groups, cin, m), dtype=acc) if need[1] else None
    if need[0] or need[1]:
        chunks = a.backward_chunks(_workspace_limit, x.element_size())
        workspace = x.new_empty(max(((n1 - n0) * a.out_channels * g.taps * (i1 - i0) * inner
                                     for n0, n1, i0, i1 in chunks), default=0))
        for n0, n1, i0, i1 in chunks:
            n, band = n1 - n0, (i1 - i0) * inner
            columns = im2col(grad_out[n0 * a.out_channels:n1 * a.out_channels], g,
                             (i1 - i0, *a.grid[1:]), padding=g.band_padding(0, i0),
                             out=workspace[:n * groups * m * band]).view(n, groups, m, band)
            if need[0]:
                gemm.matmul(weight.expand(n, -1, -1, -1), columns,
                            grad_input[n0:n1, ..., i0 * inner:i1 * inner])
            if need[1]:
                partial = x.new_empty((n, groups, cin, m), dtype=acc)
                gemm.matmul(x[n0:n1, ..., i0 * inner:i1 * inner], columns.transpose(-1, -2),
                            partial)
                grad_weight += partial.sum(0)
    grad_input = grad_input.view(a.batch, a.in_channels, *a.grid) if need[0] else grad_input
    grad_weight = (grad_weight.to(x.dtype).view(a.in_channels, -1, *g.kernel_size)
                   if need[1] else x.new_empty(0))
    grad_bias = (grad_out.view(a.batch, a.out_channels, math.prod(a.image)).sum([0, 2], dtype=acc).to(x.dtype)
                 if need[2] else x.new_empty(0))
    return [grad_input, grad_weight, grad_bias]


@torch.library.custom_op("gemmconv::conv_transpose", mutates_args=())
def _conv_transpose_op(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                       stride: List[int], padding: List[int], output_padding: List[int],
                       dilation: List[int], groups: int) -> torch.Tensor:
    a = _args_from_lists(input, weight, bias, stride, padding, output_padding, dilation, groups)
    return _forward(input, weight, bias, a)


@_conv_transpose_op.register_fake
def _(input, weight, bias, stride, padding, output_padding, dilation, groups):
    a = _args_from_lists(input, weight, bias, stride, padding, output_padding, dilation, groups)
    return input.new_empty(a.output_shape)


@torch.library.custom_op("gemmconv::conv_transpose_backward", mutates_args=())
def _conv_transpose_backward_op(grad_output: torch.Tensor, input: torch.Tensor,
                                weight: torch.Tensor, stride: List[int], padding: List[int],
                                output_padding: List[int], dilation: List[int], groups: int,
                                output_mask: List[bool]) -> List[torch.Tensor]:
    a = _args_from_lists(input, weight, None, stride, padding, output_padding, dilation, groups)
    return _backward(grad_output, input, weight, a, output_mask)


@_conv_transpose_backward_op.register_fake
def _(grad_output, input, weight, stride, padding, output_padding, dilation, groups, output_mask):
    shapes = (input.shape, weight.shape, (weight.shape[1] * groups,))
    return [input.new_empty(s if keep else 0) for s, keep in zip(shapes, output_mask)]


def _setup_context(ctx, inputs, output):
    input, weight, bias, stride, padding, output_padding, dilation, groups = inputs
    ctx.save_for_backward(input, weight)
    ctx.conv = (stride, padding, output_padding, dilation, groups)


def _backward_formula(ctx, grad_output):
    input, weight = ctx.saved_tensors
    mask = list(ctx.needs_input_grad[:3])
    grads = _conv_transpose_backward_op(grad_output, input, weight, *ctx.conv, mask)
    return (*(g if keep else None for g, keep in zip(grads, mask)), None, None, None, None, None)


_conv_transpose_op.register_autograd(_backward_formula, setup_context=_setup_context)


def _conv_transpose(nd: int, input: torch.Tensor, weight: torch.Tensor,
                    bias: Optional[torch.Tensor], stride: IntOrTuple, padding: IntOrTuple,
                    output_padding: IntOrTuple, groups: int, dilation: IntOrTuple) -> torch.Tensor:
    a = conv_transpose_args(f"conv_transpose{nd}d", nd, input, weight, bias, stride, padding,
                            output_padding, groups, dilation)
    g = a.geometry
    batched = input.unsqueeze(0) if a.unbatched else input
    out = _conv_transpose_op(batched, weight, bias, list(g.stride), list(g.padding),
                             list(a.output_padding), list(g.dilation), groups)
    return out.squeeze(0) if a.unbatched else out


def conv_transpose1d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                     stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                     groups: int = 1, dilation: IntOrTuple = 1) -> torch.Tensor:
    """1-D transposed convolution, as ``torch.nn.functional.conv_transpose1d``.

    input ``(N, C_in, L_in)`` or ``(C_in, L_in)``; weight ``(C_in, C_out / groups, kW)``;
    bias ``(C_out,)``; returns ``(N, C_out, L_out)`` (or ``(C_out, L_out)``) with
    ``L_out = (L_in - 1) * stride - 2 * padding + dilation * (kW - 1) + output_padding + 1``.
    """
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                     stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                     groups: int = 1, dilation: IntOrTuple = 1) -> torch.Tensor:
    """2-D transposed convolution, as ``torch.nn.functional.conv_transpose2d``.

    input ``(N, C_in, H_in, W_in)`` or unbatched ``(C_in, H_in, W_in)``; weight
    ``(C_in, C_out / groups, kH, kW)``; bias ``(C_out,)``; returns ``(N, C_out, H_out, W_out)``,
    each output size as in :func:`conv_transpose1d`, per dim.
    """
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                     stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                     groups: int = 1, dilation: IntOrTuple = 1) -> torch.Tensor:
    """3-D transposed convolution, as ``torch.nn.functional.conv_transpose3d``.

    input ``(N, C_in, D_in, H_in, W_in)`` or unbatched ``(C_in, D_in, H_in, W_in)``; weight
    ``(C_in, C_out / groups, kD, kH, kW)``; bias ``(C_out,)``; returns
    ``(N, C_out, D_out, H_out, W_out)``, each output size as in :func:`conv_transpose1d`.
    """
    return _conv_transpose(3, input, weight, bias, stride, padding, output_padding, groups, dilation)
