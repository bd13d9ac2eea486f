"""Transposed convolution with one input channel a group (depthwise, and any call of one
input channel), or a few (grouped layers of at most GROUPED_MAX_INPUTS), computed straight
from the input: no GEMM, no columns.

With one input channel a group, each group's GEMM has an inner dimension of one: the
column routes write ``C_out x taps`` column values per input position (four times the
output at kernel 4, stride 2) only for col2im to read them back, and the products use no
tensor core. Here each output gathers its own sum. Along a dim of stride ``s`` the output
position ``y = s q + r`` (phase ``r``) receives the taps ``k`` with ``(r + p - k d) % s ==
0``: every ``step``-th tap from the first, ``step = s / gcd(s, d)``, each reading input
position ``q + offset`` where the next reads ``delta = step d / s`` positions back::

    x        (N, C_in, *grid)          any strides (planar or channels_last)
    weight   (C_in, M, *kernel)        M = C_out / groups outputs per input channel
    out[n, c, s q + r] = bias[c] + sum over taps k reaching r:  weight[c // M, c % M, k] x[n, c // M, q + offset_k]

So a call reads its input and writes its output once (the taps' re-reads hit the cache),
and visits ceil(k / step) taps per dim, never k. Deterministic: a fixed order of the taps,
float32 accumulation. :func:`reference` is the same decomposition in plain PyTorch, which
CI checks against torch and against the Triton kernels (through ``TRITON_INTERPRET=1``).

With ``J = C_in / groups`` input channels a group, each output sums the taps' products
over its group's J channels too::

    out[n, g M + m, s q + r] = bias + sum over taps k reaching r, j < J:  weight[g J + j, m, k] x[n, g J + j, q + offset_k]

Their GEMMs would have an inner dimension of J: the column routes' traffic for a few
multiply-adds an output. A program of that kernel takes one stride phase, so that its taps
and their weights are the same for all of its outputs (_triton.grouped_transposed).

The backward is a gather too. Input position ``i`` fed the output at ``i s - p + k d`` through
tap ``k``, so, with ``g`` the output gradient::

    grad_x[n, j, i]         = sum over m, k:  weight[j, m, k] g[n, j M + m, i s - p + k d]
    grad_weight[j, m, k]    = sum over n, i:  x[n, j, i] g[n, j M + m, i s - p + k d]

(zero outside the output). One kernel computes both from one load of each position's taps
(every tap reaches every input position): programs of input positions x (m, k) pairs x input
channels, each summing the pairs into the input gradient and its positions into a float32
partial of the weight gradient, which a sum over the programs finishes in a fixed order.
Where a channel has more pairs than a program holds (MAX_PAIRS: FCN-like kernels) they come
in chunks, over which the input gradient's programs loop and the weight gradient's split.
:func:`reference_backward` is its decomposition in plain PyTorch.
"""
from __future__ import annotations

import functools
import itertools
import math
from typing import NamedTuple, Optional

import torch

from .shapes import ConvTransposeArgs, Geometry

DIMS = 3   # spatial dims padded to three (D, H, W), so one kernel serves 1-D, 2-D and 3-D
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


class Reach(NamedTuple):
    """Per dim (padded to three): for each residue of the stride, the first tap that
    reaches it, how many do, and the input offset of the first; the step between taps and
    the offset's ``delta`` a step; the most taps any residue has."""
    first: tuple
    count: tuple
    offset: tuple
    step: tuple
    delta: tuple
    most: tuple


@functools.lru_cache(maxsize=256)
def reach(g: Geometry) -> Reach:
    """The taps of geometry ``g`` that reach each residue of each dim's stride."""
    pad = DIMS - g.nd
    kernel, stride = (1,) * pad + g.kernel_size, (1,) * pad + g.stride
    padding, dilation = (0,) * pad + g.padding, (1,) * pad + g.dilation
    first, count, offset, step, delta = [], [], [], [], []
    for k, s, p, d in zip(kernel, stride, padding, dilation):
        every = s // math.gcd(s, d)
        taps = [[j for j in range(k) if (r + p - j * d) % s == 0] for r in range(s)]
        first.append(tuple(t[0] if t else 0 for t in taps))
        count.append(tuple(len(t) for t in taps))
        offset.append(tuple((r + p - t[0] * d) // s if t else 0 for r, t in enumerate(taps)))
        step.append(every)
        delta.append(every * d // s)
    return Reach(tuple(first), tuple(count), tuple(offset), tuple(step), tuple(delta),
                 tuple(max(c) for c in count))


# Input channels a group up to which a grouped layer (groups > 1) takes the direct kernel.
# Per output and reaching tap it does J multiply-adds on the CUDA cores, where the column
# routes write and read a column element (2 x 2 or 4 bytes) for tensor cores that would
# idle: at about half the H100's 33.5 T float32 multiply-adds a second against its 3 TB/s,
# the direct kernel is ahead up to about J = 22 in 16-bit types and 44 in float32. The
# table's grouped cases have J = 8. Timed against the column routes
# (benches/grouped_probe.py, results/s64/P, H100), forward ms, direct / columns: planar
# float32 2d-strided-grouped 1.19 / 1.34, 3d-strided-grouped 0.59 / 1.19, 3d-stride2-grouped
# 1.43 / 2.97; bfloat16 0.72 / 0.91, 0.49 / 0.79 (torch 0.65), 1.22 / 1.87. On channels_last
# tensors it lost every case (float32 2.44 / 1.28, 1.61 / 1.23, 4.10 / 3.12; bfloat16 1.40 /
# 0.88, 0.88 / 0.87, 2.32 / 1.95): compiled for sm_90, every load of its input and store of
# its output there was one 2- or 4-byte element a thread (a warp's 32 of them 32 sectors).
# It now reads a position's J channels as one vector and stores a group's output channels
# as such (_triton.grouped_transposed's VEC and M), and launches a block's groups and
# channel blocks next to each other. With vectors alone (results/s65/R) it won four of the
# six channels_last calls and lost bfloat16 2d-strided-grouped, 1.25 ms against the
# column routes' 0.95. With the launch order too (R2), it won all six, forward ms, direct
# / columns: float32 1.19 / 1.25, 0.57 / 1.20, 1.99 / 3.08; bfloat16 0.75 / 0.86, 0.42 /
# 0.77 (torch 0.58), 1.00 / 1.93. Its planar times were unchanged.
GROUPED_MAX_INPUTS = 8


def unavailable(a: ConvTransposeArgs, x: torch.Tensor, weight: torch.Tensor) -> Optional[str]:
    """Why call ``a`` does not take the direct kernels, or None where it does: CUDA tensors
    of 16- or 32-bit floats with one input channel a group, or with groups of at most
    GROUPED_MAX_INPUTS, in either layout; Triton importable."""
    from . import fused
    inputs = a.in_channels // a.groups
    if inputs > 1 and (a.groups == 1 or inputs > GROUPED_MAX_INPUTS):
        return (f"{inputs} input channels a group (the kernels take one, or up to "
                f"{GROUPED_MAX_INPUTS} where groups > 1)")
    if not x.is_cuda and x.device.type != "meta":
        return "tensors not on a CUDA device"
    if x.dtype not in DTYPES:
        return f"{x.dtype} (the kernel takes float16, bfloat16 and float32)"
    if not fused._triton_available():
        return "Triton is not installed"
    return None


def takes(a: ConvTransposeArgs, x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether call ``a`` takes the direct kernels (:func:`unavailable` is None)."""
    return unavailable(a, x, weight) is None


def reference(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
              a: ConvTransposeArgs) -> torch.Tensor:
    """The kernels' decomposition in plain PyTorch: per phase and reaching tap, the input's
    shifted box times the tap's weights, summed over each group's input channels into the
    phase's outputs. ``x (N, C_in, *grid)``, ``weight (C_in, M, *kernel)``; returns ``(N,
    C_out, *image)``."""
    from .fused import shifted_box
    g, r = a.geometry, reach(a.geometry)
    n, groups, pad = x.shape[0], a.groups, DIMS - g.nd
    inputs, multiplier = a.in_channels // groups, a.out_channels // groups
    grid, image = (1,) * pad + tuple(x.shape[2:]), (1,) * pad + tuple(a.image)
    kernel, stride = (1,) * pad + g.kernel_size, (1,) * pad + g.stride
    x = x.reshape(n, a.in_channels, *grid).movedim(1, -1)              # (N, D, H, W, C_in)
    w = weight.reshape(groups, inputs, multiplier, *kernel)
    out = x.new_zeros(n, *image, groups, multiplier)
    for r0 in range(stride[0]):
        for r1 in range(stride[1]):
            for r2 in range(stride[2]):
                phase = (r0, r1, r2)
                extent = [-(-(i - ri) // s) for i, ri, s in zip(image, phase, stride)]
                if min(extent) <= 0:
                    continue
                view = out[(slice(None), *[slice(ri, None, s) for ri, s in zip(phase, stride)])]
                for m0 in range(r.count[0][r0]):
                    for m1 in range(r.count[1][r1]):
                        for m2 in range(r.count[2][r2]):
                            m = (m0, m1, m2)
                            tap = [r.first[d][phase[d]] + m[d] * r.step[d] for d in range(DIMS)]
                            offset = [r.offset[d][phase[d]] - m[d] * r.delta[d] for d in range(DIMS)]
                            box = shifted_box(x, offset, extent).unflatten(-1, (groups, inputs))
                            view += torch.einsum("...gj,gjm->...gm", box, w[(..., *tap)])
    out = out.flatten(-2)
    if bias is not None:
        out += bias
    return out.movedim(-1, 1).reshape(n, a.out_channels, *a.image)


# Output elements a program computes: enough to keep the loads in flight. A block of rows
# (D and H) by positions along W by channels: the channels' block covers those of a
# position where channels are innermost (channels_last), one channel where positions are
# (planar), and W's block the row, up to what is left. Twice as many where channels are
# innermost: the zoo decoder's layers' channels_last forwards ran 5-35% faster at 2048 than
# at 1024, the planar ones alike or slower (H100, benches/results/s35/A and W).
PROGRAM_ELEMENTS = 1024
INTERLEAVED_ELEMENTS = 2048
PROGRAM_WARPS = 4
MAX_CHANNEL_BLOCK = 64


def _pow2(n: int) -> int:
    return 1 << (max(n, 1) - 1).bit_length()


def program_elements(interleaved: bool) -> int:
    """Outputs a forward program computes: INTERLEAVED_ELEMENTS where channels are
    innermost, else PROGRAM_ELEMENTS."""
    return INTERLEAVED_ELEMENTS if interleaved else PROGRAM_ELEMENTS


def blocks(channels: int, rows: int, width: int, interleaved: bool) -> tuple:
    """``(BR, BW, BC)``: rows, positions along W and channels a program computes, their
    product :func:`program_elements` but where the call has fewer rows."""
    elements = program_elements(interleaved)
    bc = min(_pow2(channels), MAX_CHANNEL_BLOCK) if interleaved else 1
    bw = min(_pow2(width), elements // bc)
    return min(elements // bc // bw, _pow2(rows)), bw, bc


# Outputs a grouped program computes, and its block of channels. Each thread of the
# grouped kernel holds P positions by all of the block's BC channels (Triton's layout for
# it, sm_90), so per tap and input channel it loads P inputs and BC weights for P x BC
# multiply-adds: at 4096 outputs (four warps, 32 a thread) and BC = 8, 12 loads for 32 FMAs
# at 128 registers; 2048 took 10 for 16, BC = 16 at 4096 18 for 32, 8192 244 registers
# (compiled with Triton 3.6 and ptxas). On the H100 (bfloat16, benches/grouped_probe.py,
# results/s64/P) 4096 was the fastest of 2048, 4096 and 8192 on five of the table's six
# grouped calls (three cases, two layouts); on planar 3d-strided-grouped 8192 was 8% faster
# (0.610 against 0.665 ms), and 19% slower on planar 2d-strided-grouped (0.843 / 0.709).
GROUPED_ELEMENTS = 4096
GROUPED_CHANNEL_BLOCK = 8


def grouped_blocks(multiplier: int, rows: int, width: int) -> tuple:
    """``(BR, BW, BC)`` of the grouped kernel: rows, positions along W (of one phase) and
    output channels of one group a program computes, their product GROUPED_ELEMENTS but
    where the phase has fewer rows. Its channels are a group's in either layout: each input
    element a program loads serves them all."""
    bc = min(_pow2(multiplier), GROUPED_CHANNEL_BLOCK)
    bw = min(_pow2(width), max(1, GROUPED_ELEMENTS // bc))
    return min(max(1, GROUPED_ELEMENTS // bc // bw), _pow2(rows)), bw, bc


def grouped_vector(inputs: int, x_strides: tuple, element_size: int) -> int:
    """Input channels one load of the grouped kernel reads: a group's, up to 16 bytes, where
    channels are innermost (their stride 1), the group's count a power of two and every
    other stride a multiple of 16 elements; else one. Compiled for sm_90 (Triton 3.6), a
    vector the compiler could not prove aligned (Triton marks integers divisible by 16),
    or one masked past a group of 3 channels, loaded element by element and was converted
    between layouts, at 155-255 registers against 96-128."""
    if x_strides[1] != 1 or inputs & (inputs - 1) or \
            any(s % 16 for s in (x_strides[0], *x_strides[2:])):
        return 1
    return min(inputs, 16 // element_size)


class Plan(NamedTuple):
    """A call's launch (_triton.Launch; None where it has no outputs) and its reach table
    on the device; for the grouped kernel, the output channels its weight rows are padded
    to (:func:`grouped_weight`), else 0."""
    launch: object
    table: Optional[torch.Tensor]
    padded_outputs: int = 0


def plan(a: ConvTransposeArgs, x: torch.Tensor, out: torch.Tensor, has_bias: bool) -> Plan:
    """The launch of call ``a`` on ``x`` into ``out`` (their shapes, strides and device), for
    :func:`launch`."""
    return _plan(a.geometry, x.shape[0], a.out_channels, a.out_channels // a.groups,
                 tuple(x.shape[2:]), a.image, x.stride(), out.stride(), has_bias, x.device,
                 a.in_channels // a.groups, x.element_size())


@functools.lru_cache(maxsize=256)
def _plan(g: Geometry, batch: int, channels: int, multiplier: int, grid: tuple, image: tuple,
          x_strides: tuple, out_strides: tuple, has_bias: bool, device: torch.device,
          inputs: int, element_size: int) -> Plan:
    from . import _triton
    if batch * channels * math.prod(image) == 0:
        return Plan(None, None)
    r = reach(g)
    pad = DIMS - g.nd
    image3 = (1,) * pad + image
    table = torch.tensor([v for d in range(DIMS) for row in zip(r.first[d], r.count[d], r.offset[d])
                          for v in row], dtype=torch.int32, device=device)
    kernel = (1,) * pad + g.kernel_size
    spatial = lambda strides: (0,) * pad + tuple(strides[2:])   # noqa: E731
    if inputs > 1:   # a phase a program: blocks of phase 0's outputs, the most of any phase
        stride3 = (1,) * pad + g.stride
        extent = [-(-i // s) for i, s in zip(image3, stride3)]
        br, bw, bc = grouped_blocks(multiplier, extent[0] * extent[1], extent[2])
        counts = (-(-extent[2] // bw), -(-(extent[0] * extent[1]) // br), -(-multiplier // bc))
        groups = channels // multiplier
        sizes = (math.prod(kernel), kernel[1], kernel[2],
                 *((1,) * pad + grid), *image3, *stride3, *r.step, *r.delta,
                 x_strides[0], x_strides[1], *spatial(x_strides),
                 out_strides[0], out_strides[1], *spatial(out_strides), *counts, groups)
        programs = batch * groups * math.prod(counts) * math.prod(stride3)
        padded = counts[2] * bc
        return Plan(_triton.Launch(_triton.grouped_transposed, (programs,), sizes, J=inputs,
                                   M=multiplier, MP=padded,
                                   VEC=grouped_vector(inputs, x_strides, element_size),
                                   BR=br, BW=bw, BC=bc, HAS_BIAS=has_bias,
                                   num_warps=PROGRAM_WARPS), table, padded)
    rows = image3[0] * image3[1]
    br, bw, bc = blocks(channels, rows, image3[2], out_strides[1] == 1 and channels > 1)
    column_blocks, row_blocks = -(-image3[2] // bw), -(-rows // br)
    channel_blocks = -(-channels // bc)
    sizes = (channels, multiplier, math.prod(kernel), kernel[1], kernel[2],
             *((1,) * pad + grid), *image3, *((1,) * pad + g.stride),
             *r.step, *r.delta, *r.most, x_strides[0], x_strides[1], *spatial(x_strides),
             out_strides[0], out_strides[1], *spatial(out_strides), column_blocks, row_blocks,
             channel_blocks)
    launch = _triton.Launch(_triton.depthwise_transposed,
                            (batch * channel_blocks * row_blocks * column_blocks,), sizes,
                            BR=br, BW=bw, BC=bc, HAS_BIAS=has_bias, num_warps=PROGRAM_WARPS)
    return Plan(launch, table)


def forward(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
            a: ConvTransposeArgs, out: torch.Tensor) -> torch.Tensor:
    """The transposed convolution ``a`` of ``x (N, C_in, *grid)`` into ``out (N, C_out,
    *image)``, both in any layout (the kernels read and write them through their strides),
    by the kernel :func:`reference` describes (the depthwise one, or the grouped one for
    more input channels a group); on the CPU only under Triton's interpreter."""
    return launch(plan(a, x, out, bias is not None), x, weight, bias, a, out)


def launch(p: Plan, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
           a: ConvTransposeArgs, out: torch.Tensor) -> torch.Tensor:
    """:func:`forward` by a plan made for these tensors' shapes and strides (a replay keeps
    one: its lookup, on every call, costs host time a small layer waits for)."""
    from . import fused
    if p.launch is not None:
        # The depthwise kernel's (C_out, taps) rows, contiguous: a reshape may give a
        # strided view (channels_last weights), and it steps rows by taps, taps by one.
        w = grouped_weight(weight, a, p.padded_outputs) if p.padded_outputs else \
            weight.reshape(a.out_channels, -1).contiguous()
        b = w if bias is None else bias.contiguous()   # (the kernel steps the bias by one)
        with fused._on(x.device):
            p.launch(x, w, b, out, p.table)
    return out


def grouped_weight(weight: torch.Tensor, a: ConvTransposeArgs, padded: int) -> torch.Tensor:
    """``weight (C_in, M, *kernel)`` as the grouped kernel reads it: ``(C_in, taps,
    padded)``, contiguous, a tap's M output channels side by side and zero up to
    ``padded`` (a multiple of the kernel's channel block), so that a program loads a tap's
    weights as whole vectors with no mask."""
    multiplier = a.out_channels // a.groups
    rows = weight.reshape(a.in_channels, multiplier, -1).transpose(1, 2)
    if padded == multiplier:
        return rows.contiguous()
    return torch.nn.functional.pad(rows, (0, padded - multiplier))


def launch_bytes(p: Plan, a: ConvTransposeArgs, element_size: int) -> int:
    """Bytes :func:`launch` allocates at most: the weight's copy (grouped_weight's, or a
    contiguous one) and the bias's."""
    outputs = p.padded_outputs or a.out_channels // a.groups   # (a group's, padded or not)
    return (a.in_channels * a.geometry.taps * outputs + a.out_channels) * element_size


def reference_backward(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                       a: ConvTransposeArgs) -> tuple:
    """The backward kernel's decomposition in plain PyTorch: per tap, the output gradient's
    phase that tap fed, as the box of input positions, times the tap's weight into the input
    gradient and times the input into the tap's weight gradient, each input channel with
    its group's output channels. ``grad_out (N, C_out, *image)``, ``x (N, C_in, *grid)``,
    ``weight (C_in, M, *kernel)``; returns ``(grad_x, grad_weight)`` of x's and the
    weight's shapes."""
    from .fused import shifted_box
    g, cin, groups = a.geometry, a.in_channels, a.groups
    multiplier = a.out_channels // groups
    gy = grad_out.movedim(1, -1)                      # (N, *image, C_out)
    xs = x.movedim(1, -1).unsqueeze(-1)               # (N, *grid, C_in, 1)
    w = weight.reshape(cin, multiplier, g.taps)
    grad_x = x.new_zeros(xs.shape[:-1])
    grad_w = torch.empty_like(w)
    positions = tuple(range(xs.dim() - 2))
    for t, k in enumerate(itertools.product(*map(range, g.kernel_size))):
        # Output position i s + shift, i.e. phase shift % s, phase position i + shift // s.
        shift = [kk * d - p for kk, d, p in zip(k, g.dilation, g.padding)]
        phase = gy[(slice(None), *[slice(v % s, None, s) for v, s in zip(shift, g.stride)])]
        box = shifted_box(phase, [v // s for v, s in zip(shift, g.stride)], a.grid)
        box = box.unflatten(-1, (groups, 1, multiplier))   # each group's M, for its J inputs
        box = box.expand(*box.shape[:-2], cin // groups, multiplier).flatten(-3, -2)
        grad_x += (box * w[:, :, t]).sum(-1)
        grad_w[:, :, t] = (box * xs).sum(positions)
    return grad_x.movedim(-1, 1), grad_w.view(weight.shape)


# The backward's programs: BACKWARD_ELEMENTS of (positions, (m, k) pairs, channels) a load,
# and at most BACKWARD_PROGRAMS programs (each then loops over its share of the positions, so
# that the weight gradient's partials stay a small fraction of its reads). 4096 rather than
# 1024 programs: the zoo decoder's largest layer, float32 planar, 0.485 ms against 0.915
# (whole waves), the others alike or faster (H100, benches/results/s35/S2).
BACKWARD_ELEMENTS = 2048
BACKWARD_PROGRAMS = 4096
BACKWARD_WARPS = 4
MAX_PAIRS = 256   # (m, k) pairs a program loads at once; more come in chunks of this many
BACKWARD_CHANNEL_BLOCK = 32   # a 128-byte row of float32 where channels are innermost
# Input channels a group the backward kernel takes. It computes grouped calls too (each
# input channel reads its group's output-gradient channels, tested on the GPU in session
# 66), but where it took them their training steps ran 2.2-7.5x the column routes' time:
# 2d-strided-grouped (8 inputs a group) float32 NCHW 8.74 against 3.99 ms, bfloat16
# channels_last 12.37 against 2.13; 3d-stride2-grouped bfloat16 channels_last 22.03
# against 3.28 (H100, benches/grouped_backward_probe.py, results/s66/B). A likely cause,
# not measured: each input channel loads its group's output gradient again, where the
# column routes' GEMM reads it once for all of them.
BACKWARD_MAX_INPUTS = 1


def backward_unavailable(a: ConvTransposeArgs, x: torch.Tensor, weight: torch.Tensor,
                         interleaved: bool = False) -> Optional[str]:
    """Why the backward of call ``a`` does not take the depthwise kernel, or None where it
    does: where its forward does (:func:`unavailable`) with at most BACKWARD_MAX_INPUTS
    input channels a group, but for channels_last calls (``interleaved``) of more (m, k)
    pairs an input channel than MAX_PAIRS."""
    inputs = a.in_channels // a.groups
    if inputs > BACKWARD_MAX_INPUTS:
        return (f"{inputs} input channels a group (the backward kernel takes "
                f"{BACKWARD_MAX_INPUTS}: depthwise.BACKWARD_MAX_INPUTS)")
    why = unavailable(a, x, weight)
    pairs = a.out_channels // a.groups * a.geometry.taps
    if why is None and interleaved and pairs > MAX_PAIRS:
        # An FCN-like layer, (8, 21, 16, 16) k64 s32 groups=21, float32: its step 2.66 ms
        # with the kernel's chunks (of 8 channels by 256 pairs, the backward 1.45 ms), 2.27
        # on the column routes; planar 1.24 against 2.54 (H100, benches/results/s35/K).
        why = (f"channels_last with {pairs} taps times outputs an input channel (over "
               f"{MAX_PAIRS}: the column routes' backward measured faster)")
    return why


def backward_takes(a: ConvTransposeArgs, x: torch.Tensor, weight: torch.Tensor,
                   interleaved: bool = False) -> bool:
    """Whether the backward of call ``a`` takes the depthwise kernel
    (:func:`backward_unavailable` is None)."""
    return backward_unavailable(a, x, weight, interleaved) is None


def backward_blocks(channels: int, pairs: int, interleaved: bool) -> tuple:
    """``(BP, BT, BC)``: input positions, (m, k) pairs (all of them, a power of two, up to
    MAX_PAIRS) and input channels a program loads at once, their product BACKWARD_ELEMENTS
    at most (but for the pairs); channels only where they are innermost, as :func:`blocks`."""
    bt = min(_pow2(pairs), MAX_PAIRS)
    bc = min(_pow2(channels), BACKWARD_CHANNEL_BLOCK, max(1, BACKWARD_ELEMENTS // bt)) if interleaved else 1
    return max(1, BACKWARD_ELEMENTS // bt // bc), bt, bc


def backward_grid(channels: int, pairs: int, positions: int, interleaved: bool,
                  need_weight: bool) -> tuple:
    """``(blocks, chunks, channel_blocks, splits, each)``: a backward program's blocks
    (:func:`backward_blocks`), the chunks of BT pairs a call's pairs make, and its programs:
    ``channel_blocks x splits`` (``x chunks`` for a weight gradient of several chunks), each
    over ``each`` blocks of positions: one where the weight's gradient is not asked, else a
    few, so that its partials (``splits x C_in x pairs`` floats) stay a small part of what
    the call reads."""
    bp, bt, bc = backward_blocks(channels, pairs, interleaved)
    chunks = -(-pairs // bt)
    channel_blocks, position_blocks = -(-channels // bc), max(1, -(-positions // bp))
    splits = position_blocks
    if need_weight:
        splits = max(1, min(position_blocks, BACKWARD_PROGRAMS // (channel_blocks * chunks)))
    each = -(-position_blocks // splits)
    return (bp, bt, bc), chunks, channel_blocks, -(-position_blocks // each), each


def backward_workspace(a: ConvTransposeArgs, interleaved: bool) -> int:
    """Bytes of the weight gradient's partials a backward of call ``a`` allocates."""
    pairs = a.out_channels // a.groups * a.geometry.taps
    splits = backward_grid(a.in_channels, pairs, a.batch * math.prod(a.grid),
                           interleaved and a.in_channels > 1, True)[3]
    return splits * a.in_channels * pairs * 4


class BackwardPlan(NamedTuple):
    """A backward's launches (_triton.Launch: one, or, where the pairs come in several
    chunks, one for each gradient asked; none where the call has no input positions), and
    how many float32 partials of the weight gradient they write (0: the weight's not
    asked)."""
    launches: tuple
    splits: int


def backward_plan(a: ConvTransposeArgs, grad_out: torch.Tensor, x: torch.Tensor,
                  grad_x: Optional[torch.Tensor], need_weight: bool) -> BackwardPlan:
    """The launches computing the gradients of call ``a`` from ``grad_out`` and ``x`` (their
    shapes, strides and device) into ``grad_x`` (None: not asked) and, where
    ``need_weight``, the weight's partials, for :func:`launch_backward`."""
    return _backward_plan(a.geometry, x.shape[0], a.in_channels, a.in_channels // a.groups,
                          a.out_channels // a.groups, tuple(x.shape[2:]), a.image,
                          grad_out.stride(), x.stride(),
                          None if grad_x is None else grad_x.stride(), need_weight, x.device)


@functools.lru_cache(maxsize=256)
def _backward_plan(g: Geometry, batch: int, channels: int, inputs: int, multiplier: int,
                   grid: tuple, image: tuple, g_strides: tuple, x_strides: tuple,
                   i_strides: Optional[tuple], need_weight: bool,
                   device: torch.device) -> BackwardPlan:
    from . import _triton
    positions = batch * math.prod(grid)
    if positions * channels == 0 or (i_strides is None and not need_weight):
        return BackwardPlan((), int(need_weight))   # (a weight gradient of zeros)
    pad = DIMS - g.nd
    interleaved = x_strides[1] == 1 and channels > 1
    pairs = multiplier * g.taps
    (bp, bt, bc), chunks, channel_blocks, splits, each = backward_grid(
        channels, pairs, positions, interleaved, need_weight)
    kernel = (1,) * pad + g.kernel_size
    spatial = lambda strides: (0,) * pad + tuple(strides[2:])   # noqa: E731
    need_input, i_strides = i_strides is not None, i_strides or (0,) * len(x_strides)
    sizes = (channels, inputs, multiplier, g.taps, kernel[1], kernel[2], *((1,) * pad + grid),
             *((1,) * pad + image), *((1,) * pad + g.stride), *((0,) * pad + g.padding),
             *((1,) * pad + g.dilation), positions,
             *g_strides[:2], *spatial(g_strides), *x_strides[:2], *spatial(x_strides),
             *i_strides[:2], *spatial(i_strides), channel_blocks)

    def launch(programs: int, each: int, need_input: bool, need_weight: bool, loop: bool):
        return _triton.Launch(_triton.depthwise_transposed_backward, (programs,),
                              (*sizes, each, chunks), BP=bp, BT=bt, BC=bc,
                              NEED_INPUT=need_input, NEED_WEIGHT=need_weight, PAIR_LOOP=loop,
                              num_warps=BACKWARD_WARPS)
    if chunks == 1:   # both gradients from one load of the pairs
        launches = (launch(channel_blocks * splits, each, need_input, need_weight, False),)
    else:   # the input's programs loop over the chunks, the weight's take one each
        position_blocks = -(-positions // bp)
        launches = ((launch(channel_blocks * position_blocks, 1, True, False, True),) if need_input
                    else ()) + ((launch(channel_blocks * chunks * splits, each, False, True, False),)
                                if need_weight else ())
    return BackwardPlan(launches, splits if need_weight else 0)


def backward(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
             a: ConvTransposeArgs, grad_x: Optional[torch.Tensor],
             need_weight: bool) -> Optional[torch.Tensor]:
    """The gradients of call ``a`` by the kernel :func:`reference_backward` describes: the
    input's into ``grad_x`` (of x's shape, any layout; None: not asked), and the weight's,
    returned where ``need_weight`` (else None). ``grad_out (N, C_out, *image)`` and ``x (N,
    C_in, *grid)`` in any layout. On the CPU only under Triton's interpreter."""
    return launch_backward(backward_plan(a, grad_out, x, grad_x, need_weight),
                           grad_out, x, weight, a, grad_x)


def launch_backward(p: BackwardPlan, grad_out: torch.Tensor, x: torch.Tensor,
                    weight: torch.Tensor, a: ConvTransposeArgs, grad_x: Optional[torch.Tensor],
                    grad_weight: Optional[torch.Tensor] = None) -> Optional[torch.Tensor]:
    """:func:`backward` by a plan made for these tensors' shapes and strides (as
    :func:`launch`); the weight's gradient into ``grad_weight`` where given (of the
    weight's shape and dtype, contiguous), else a new one."""
    from . import fused
    pairs = a.out_channels // a.groups * a.geometry.taps
    # (every weight program writes its partial whole; with no launch, the gradient is zero)
    new = x.new_empty if p.launches else x.new_zeros
    partials = new((p.splits, a.in_channels, pairs), dtype=torch.float32) if p.splits else None
    if p.launches:
        # (C_in, M taps) rows, contiguous, as the forward's launch
        w = weight.reshape(a.in_channels, pairs).contiguous()
        with fused._on(x.device):
            for launch in p.launches:
                launch(x, grad_out, w, w if grad_x is None else grad_x,
                       w if partials is None else partials)
    if partials is None:
        return None
    total = partials[0] if p.splits == 1 else partials.sum(0)
    if grad_weight is None:
        return total.to(weight.dtype).view(weight.shape)
    return grad_weight.copy_(total.view(weight.shape))
