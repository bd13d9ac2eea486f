"""Transposed convolution with the columns kept on chip: an implicit GEMM in Triton.

GEMM + col2im writes every column to memory and reads it back; where those bytes dominate,
this route forms each column tile on chip and gathers it straight into the output. It is
the gather form of the transposed convolution, phase by phase. Along a dim of stride ``s``
an output position ``y = s q + r`` (phase ``r``) receives only the taps ``k`` with
``(r + p - k d) % s == 0``, each from input position ``q + (r + p - k d) // s``. So each
phase is a sum over its reaching taps of shifted input boxes times that tap's weight::

    x        (N, *grid, C_in)                 channels innermost (a channels_last input)
    weights  (T, C_in, C_out)                 one matrix per tap
    out[n, s q + r, :] = bias + sum over taps t of phase r:  x[n, q + offset_t, :] @ weights[t]

A program owns a tile of one phase's positions (a box of samples x positions, ``BM`` rows)
and ``BN`` output channels. It loops over its phase's taps and ``BK`` input channels at a
time, loading each shifted box with the bulk tensor copy engine (the input descriptor
zero-fills what falls outside the input, so padding costs nothing), accumulates in
registers and adds the bias before it stores. Deterministic: no atomics, a fixed order.

The same kernel computes the input gradient at stride 1 (a convolution: offsets
``k d - p``, each tap's weight transposed), and a second one the weight gradient, reducing
over samples and positions into fixed partials: :func:`backward`, taken in 16-bit types and
for 2-D calls in float32 (a third kernel there, since 32-bit tiles must reach the tensor
cores along the reduction dim: it reads copies of the output gradient moved along W, and
computes up to four taps a program on one load of the input's box).
``taps`` gives the decomposition as plain PyTorch, the CPU path that CI checks against the
kernels (through ``TRITON_INTERPRET=1``) and against torch.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import math
from typing import NamedTuple, Optional, Sequence

import torch

from . import _cuda, gemm
from .shapes import ConvTransposeArgs, Geometry

# Spatial dims are padded to three (D, H, W), so one kernel serves 1-D, 2-D and 3-D.
DIMS = 3


class Taps(NamedTuple):
    """The phases of a stride and the taps that reach each: ``offsets (P, T, 3)`` input
    offsets per phase and tap (unused entries 0), ``index (P, T)`` the tap's weight
    matrix, ``count (P,)`` the taps reaching each phase, ``phase (P, 3)`` the residues,
    and ``stride (3,)``."""
    offsets: tuple
    index: tuple
    count: tuple
    phase: tuple
    stride: tuple


def _padded(values: Sequence[int], fill: int) -> tuple:
    return (fill,) * (DIMS - len(values)) + tuple(values)


@functools.lru_cache(maxsize=256)
def transposed_taps(g: Geometry) -> Taps:
    """The phase decomposition of a transposed convolution of geometry ``g``: tap ``k`` of
    weight ``(C_in, C_out, *kernel)`` reaches phase ``r`` from input offset
    ``(r + p - k d) / s`` where that divides exactly."""
    kernel, stride = _padded(g.kernel_size, 1), _padded(g.stride, 1)
    padding, dilation = _padded(g.padding, 0), _padded(g.dilation, 1)
    per_dim = []
    for k, s, p, d in zip(kernel, stride, padding, dilation):
        per_dim.append([[(j, (r + p - j * d) // s) for j in range(k) if (r + p - j * d) % s == 0]
                        for r in range(s)])
    return _table(per_dim, kernel, stride)


@functools.lru_cache(maxsize=256)
def convolution_taps(g: Geometry) -> Taps:
    """The taps of a stride-1 convolution of geometry ``g`` (the input gradient of a
    stride-1 transposed convolution): tap ``k`` reads input offset ``k d - p``."""
    assert all(s == 1 for s in g.stride)
    kernel, padding, dilation = _padded(g.kernel_size, 1), _padded(g.padding, 0), _padded(g.dilation, 1)
    per_dim = [[[(j, j * d - p) for j in range(k)]] for k, p, d in zip(kernel, padding, dilation)]
    return _table(per_dim, kernel, (1,) * DIMS)


@functools.lru_cache(maxsize=256)
def plane_taps(g: Geometry) -> Taps:
    """The taps of a strided convolution of geometry ``g`` of one or two spatial dims (the
    input gradient of a strided transposed convolution), over :func:`phase_planes` of its
    input: tap ``k`` reads position ``i s + k d - p = (i + q) s + r`` (``q, r = divmod(k d -
    p, s)`` per dim), which is position ``i + q`` of the plane of residues ``r``. The plane
    stands in D, unused below three dims, so every tap reads a box at stride 1 as
    :func:`convolution_taps`'s do; one phase, taps in row-major kernel order."""
    assert g.nd <= 2, "the planes take the place of D"
    kernel, stride = _padded(g.kernel_size, 1)[1:], _padded(g.stride, 1)[1:]
    padding, dilation = _padded(g.padding, 0)[1:], _padded(g.dilation, 1)[1:]
    along_h, along_w = ([divmod(j * d - p, s) for j in range(k)]
                        for k, s, p, d in zip(kernel, stride, padding, dilation))
    offsets = tuple((r1 * stride[1] + r2, q1, q2) for q1, r1 in along_h for q2, r2 in along_w)
    return Taps((offsets,), (tuple(range(len(offsets))),), (len(offsets),), ((0, 0, 0),),
                (1,) * DIMS)


def phase_planes(grad: torch.Tensor, stride: Sequence[int]) -> torch.Tensor:
    """``grad (N, C, *image)`` of one or two spatial dims, any strides, as its phase planes
    ``(N, s_h s_w, ceil(H / s_h), ceil(W / s_w), C)``, contiguous: plane ``r_h s_w + r_w``
    holds ``grad[:, :, a s_h + r_h, b s_w + r_w]`` at ``(a, b)``, zero past the image
    (:func:`plane_taps`), in one pass (_triton.phase_planes: torch's permuted copy moved
    47 GB/s into them on the VAE decoder's first layer, H100, benches/NOTES.md, session 43)."""
    n, c = grad.shape[:2]
    image, stride = _padded(grad.shape[2:], 1)[1:], _padded(stride, 1)[1:]
    extent = [-(-i // s) for i, s in zip(image, stride)]
    out = grad.new_empty(n, stride[0] * stride[1], *extent, c)
    if out.numel():
        view = grad.unsqueeze(2) if grad.dim() == 3 else grad   # (1-D calls gain H)
        with _on(grad.device):
            _planes_launch(n, c, tuple(image), tuple(stride), view.stride(), grad.device)(view, out)
    return out


@functools.lru_cache(maxsize=256)
def _planes_launch(n: int, c: int, image: tuple, stride: tuple, strides: tuple,
                   device: torch.device):
    from . import _triton
    extent = [-(-i // s) for i, s in zip(image, stride)]
    bc = min(64, max(16, _pow2(c)))
    bw = min(64, max(8, _pow2(extent[1])), 4096 // bc)
    tiles_w, tiles_c = -(-extent[1] // bw), -(-c // bc)
    rows = n * stride[0] * stride[1] * extent[0]
    return _triton.Launch(_triton.phase_planes, (rows * tiles_w * tiles_c,),
                          (c, *image, *stride, *extent, *strides, tiles_w, tiles_c),
                          BW=bw, BC=bc, num_warps=4)


def _table(per_dim: list, kernel: tuple, stride: tuple) -> Taps:
    """Taps of every phase, from each dim's (tap, offset) lists per residue: their product,
    the tap's index in row-major kernel order."""
    offsets, index, count, phase = [], [], [], []
    for r0 in range(stride[0]):
        for r1 in range(stride[1]):
            for r2 in range(stride[2]):
                taps = [((o0, o1, o2), (j0 * kernel[1] + j1) * kernel[2] + j2)
                        for j0, o0 in per_dim[0][r0] for j1, o1 in per_dim[1][r1]
                        for j2, o2 in per_dim[2][r2]]
                offsets.append([t[0] for t in taps])
                index.append([t[1] for t in taps])
                count.append(len(taps))
                phase.append((r0, r1, r2))
    most = max(count)
    offsets = tuple(tuple(o + [(0, 0, 0)] * (most - len(o))) for o in offsets)
    index = tuple(tuple(i + [0] * (most - len(i))) for i in index)
    return Taps(offsets, index, tuple(count), tuple(phase), stride)


def reference(x: torch.Tensor, weights: torch.Tensor, bias: Optional[torch.Tensor],
              taps: Taps, image: Sequence[int]) -> torch.Tensor:
    """The kernel's decomposition in plain PyTorch: ``x (N, *grid, C_in)`` channels
    innermost, ``weights (T, C_out, C_in)``, output ``(N, *image, C_out)``. Each phase's
    output is the sum over its taps of the input shifted by the tap's offset (zero where
    it falls outside) times the tap's matrix."""
    nd = x.dim() - 2
    grid, image = _padded(x.shape[1:-1], 1), _padded(image, 1)
    x = x.reshape(x.shape[0], *grid, x.shape[-1])
    out = x.new_zeros(x.shape[0], *image, weights.shape[1])
    if bias is not None:
        out += bias
    for p, (r, count) in enumerate(zip(taps.phase, taps.count)):
        extent = [-(-(i - ri) // s) for i, ri, s in zip(image, r, taps.stride)]
        if min(extent) <= 0:
            continue
        view = out[(slice(None), *[slice(ri, None, s) for ri, s in zip(r, taps.stride)])]
        for t in range(count):
            shifted = shifted_box(x, taps.offsets[p][t], extent)
            view += shifted @ weights[taps.index[p][t]].T
    return out.reshape(out.shape[0], *out.shape[DIMS + 1 - nd:])


def shifted_box(x: torch.Tensor, offset: Sequence[int], extent: Sequence[int]) -> torch.Tensor:
    """``x[n, q + offset, :]`` for q in ``extent`` per dim, zero outside x (``x (N, *grid,
    C)``, channels innermost): the input box a tap reads, in the decompositions in plain
    PyTorch (:func:`reference`, depthwise.reference)."""
    out = x.new_zeros(x.shape[0], *extent, x.shape[-1])
    src, dst = [slice(None)], [slice(None)]
    for o, e, size in zip(offset, extent, x.shape[1:-1]):
        lo, hi = max(0, -o), min(e, size - o)
        if hi <= lo:
            return out
        src.append(slice(lo + o, hi + o))
        dst.append(slice(lo, hi))
    out[tuple(dst)] = x[tuple(src)]
    return out


class Config(NamedTuple):
    """Tile of a launch: ``box`` (samples, D, H, W) of phase positions (their product the
    GEMM's M tile), ``bk`` input channels, ``bn`` output channels, warps, pipeline stages;
    ``rows`` 2 or 3 for that many rows along H a program (:func:`row_columns`; the box one
    row high)."""
    box: tuple
    bk: int
    bn: int
    warps: int
    stages: int
    rows: int = 1


def _pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def config(batch: int, extent: Sequence[int], c_in: int, c_out: int, phases: int,
           element_size: int, rounds: bool = True, planar: bool = False) -> Config:
    """The tile for a launch over ``phases`` phase grids of ``extent`` (D, H, W) positions.
    ``bn`` the output channels rounded up to a power of two, 16 to 128; ``bm`` 128 positions, 64 for
    float32 at ``bn`` 128 where the kernel ``rounds`` the input's tiles to TF32 (in registers,
    beside the accumulator) or where 128 would make fewer than two waves of programs. The
    box is :func:`_fitted_box`, with runs of 128 bytes along W where the output is
    ``planar`` (its rows along W). There, 2d-64to128's boxes of 4 x 8 positions and 4
    samples took 13% longer than rows of 128 that compute 48% more, and 2 x 16 and 2
    samples 7% longer; on 2d-3x7-512, 2 x 32 and 2 samples took 16% less than rows of 128
    (benches/results/s30/A, B). ``bk`` is 128 bytes of input channels (the widest row the
    copy engine swizzles). Four pipeline stages; five where 64 positions of float32 are
    rounded in registers: 2d-64to128's channels_last kernel took 2.31 ms against 2.53
    (2d-1024's, on 128 positions, 3.67 against 3.56). Chosen on the H200 (benches/NOTES.md,
    sessions 22, 30 and 31)."""
    extent = tuple(extent)
    bn = min(128, max(16, _pow2(c_out)))
    bm = 64 if element_size == 4 and rounds and bn == 128 else 128
    run = 128 // element_size if planar else 1
    if bm > 64 and _programs(batch, extent, c_out, phases, _fitted_box(batch, extent, bm, run),
                             bn) < 2 * WAVE:
        bm = 64
    bk = min(128 // element_size, max(16, _pow2(c_in)))
    box = _fitted_box(batch, extent, bm, run)
    stages = 5 if math.prod(box) <= 64 and element_size == 4 and rounds else 4
    return Config(box, bk, bn, 4, stages)


WAVE = 132   # programs in flight at once: one per multiprocessor of an H100 or H200
# Shared memory a program may take on an H100 or H200 (232,448 bytes), less 4 KB for
# Triton's barriers and the epilogue's staging.
SHARED_BYTES = 228 * 1024


def row_tile(one: Config, batch: int, extent: Sequence[int], c_out: int, height: int,
             element_size: int, planar: bool, rows: Optional[int] = None) -> Optional[Config]:
    """The tile of the kernel of two or three output rows a program (``Config.rows``;
    ``rows`` forces it), for a single phase of ``extent`` whose taps form columns ``height``
    taps high (:func:`row_columns`), or None where the one-row tile ``one`` stays. ``r``
    rows load ``height + r - 1`` boxes for ``r height`` products where one row loads a box a
    product, which the copy into shared memory bounds. On an H100 (benches/results/s40, F
    and G) two rows took 7-33% less time than one on the stride-1 2-D cases in either dtype
    and layout (2d-3x7-512 channels_last: float32 2.195 -> 1.587 ms, bfloat16 1.097 ->
    0.789, where cuDNN took 2.217 and 1.187). Three rows where the tile holds 32 output
    channels or fewer, whose products are too small to hide the boxes' copies, on columns of
    up to 3 taps (all that was measured): 6-17% less than two (2d-3x7-padded channels_last
    float32 1.248 -> 1.086, bfloat16 0.699 -> 0.582); with 64 channels they took 13-35% more
    (s42/D). (Columns of 5 taps, 3d-3x5x7's bfloat16 input gradient, are unmeasured: its
    step's row of the table moves by 20% from run to run, s42/J.) Tile: 128 positions one
    row high, 2 stages, which the boxes and taps of a stage must fit twice; at least two
    waves of programs. 8
    warps for float32, where two accumulators of 128 x 128 would spill on 4 (2.5x slower)
    and for 16-bit channels_last tiles of 64 channels; 4 for 16-bit planar outputs of 64
    channels (8: 2d-1024 2.508 against 1.854 ms) and for 16-bit tiles of 32. At most 64
    output channels a program where one row takes 128, but for 16-bit planar outputs: the
    two programs of a box share its loads through L2, and two accumulators of 128 channels
    cost more than that (2d-64to128, H100, s42/B: float32 channels_last 2.458 -> 2.344 ms,
    planar 2.713 -> 2.478, bfloat16 channels_last 1.191 -> 1.130; bfloat16 planar 1.543 ->
    2.128 on 8 warps, 1.696 on 4). Float32 planar outputs whose box would be one run of
    128 along W (a W of whole boxes, as "same" padding gives): 64 positions on 4 warps (3
    stages for two rows), 24-27% less time on six shapes of 3 to 7 taps along W, three rows
    of 32 channels (8 x 512 x 1024 at 3 x 3: 0.832 -> 0.609 ms; s45/E, H100) and two rows of
    64 (1.994 -> 1.454; s45/F, H200); where the box is two samples of 64 (W not a whole
    number of boxes), 128 positions on 8 warps stay, 5-30% faster than 64. 16-bit tiles
    of 64 channels whose box would be one run of 128 along W: three rows, 7-16% less time
    than two on the same six shapes in either layout (8 x 512 x 1024 at 3 x 3, planar 0.935
    -> 0.801 ms, channels_last 0.907 -> 0.787; s46/A, H100), where float32's did not gain
    (planar: 64 positions on two rows stayed 9-19% faster; channels_last: 128 on two 26-38%)
    and boxes of two samples of 64 lost 11-42%. 16-bit planar boxes take runs of 64 bytes
    along W, where they pad the grid less than runs of 128 (W 260 or 518): 3-7% less time on
    five shapes (2d-64to128 1.533 -> 1.428 ms, 2d-3x7-512 0.996 -> 0.957, 16 x 256 x 512 at
    3 x 7 1.017 -> 0.953; s47/B, H100). float32's runs of 64 bytes lost 3-4% on 2d-1024 and
    2d-512x1024 (and gained 4% on 2d-64to128), and 16-bit runs of 32 bytes lost 12% on
    2d-512x1024."""
    bn = one.bn if planar and element_size < 4 else min(one.bn, 64)
    run = 32 if planar else 1   # elements: 64 bytes of a 16-bit type, 128 of float32
    flat = (extent[0], 1, extent[2])
    box = _fitted_box(batch, flat, 128, run)
    one_run = box[-1] == 128   # the box one run of 128 along W ("same" padding's W)
    if rows is None:
        args = (one, batch, extent, c_out, height, element_size, planar)
        three = bn <= 32 or (element_size == 2 and bn <= 64 and one_run)
        return (three and height <= 3 and row_tile(*args, rows=3)) or row_tile(*args, rows=2)
    stages = 2
    stage = ((height + rows - 1) * math.prod(box) + height * bn) * one.bk * element_size
    runs = (extent[0], -(-extent[1] // rows), extent[2])
    if stages * stage > SHARED_BYTES or _programs(batch, runs, c_out, 1, box, bn) < 2 * WAVE:
        return None
    wide = one.bn >= 128 or element_size == 4 or (one.bn >= 64 and not planar)
    if planar and element_size == 4 and one_run:
        # In place of the tile above only (what was measured): half its boxes' positions,
        # so its three stages take less shared memory than its two, and more programs.
        box, wide = _fitted_box(batch, flat, 64, run), False
        stages = 3 if rows == 2 else 2
    return Config(box, one.bk, bn, 8 if wide else 4, stages, rows)


def _box(batch: int, extent: Sequence[int], bm: int) -> tuple:
    """A box of ``bm`` (samples, D, H, W) positions, powers of two, filling W first, then H,
    D and samples, none longer than its dim rounded up to a power of two."""
    box, left = [], bm
    for size in reversed(extent):
        box.append(min(_pow2(size), left))
        left //= box[-1]
    box.append(min(_pow2(batch), left))
    return tuple(reversed(box))


# A box may pad the grids this much more than the least-padding box does, for longer runs
# along W (the planar output's rows) and fewer samples a box.
FIT_SLACK = 1 / 32


@functools.lru_cache(maxsize=256)
def _fitted_box(batch: int, extent: tuple, bm: int, run: int = 1) -> tuple:
    """The box of ``bm`` (samples, D, H, W) positions, powers of two, at least ``run`` along
    W (or all of W), that tiles the phase grids with the fewest positions past their ends,
    within :data:`FIT_SLACK`: the widest along W, then H and D. Those positions cost the
    tensor cores as much as real ones (their input reads as zeros), and a box filling W
    first pads an odd W by up to half: 130 x 260 outputs (2d-64to128) took 48% more
    products in boxes of 128 along W, 3% in boxes of 4 x 8 positions and 4 samples."""
    sizes = (batch, *extent)
    caps = [_pow2(s).bit_length() - 1 for s in sizes]
    if sum(caps) <= bm.bit_length() - 1:
        return tuple(1 << c for c in caps)
    least_w = min(_pow2(run), 1 << caps[-1]).bit_length() - 1
    boxes = [tuple(1 << e for e in exps)
             for exps in itertools.product(*(range(c + 1) for c in caps))
             if 1 << sum(exps) == bm and exps[-1] >= least_w]
    padded = {box: math.prod(-(-s // b) * b for s, b in zip(sizes, box)) for box in boxes}
    enough = min(padded.values()) * (1 + FIT_SLACK)
    return max((box for box in boxes if padded[box] <= enough), key=lambda box: box[::-1])


def _tiles(batch: int, extent: Sequence[int], box: tuple) -> list:
    """Boxes along the samples and each dim of a phase grid."""
    return [-(-batch // box[0])] + [-(-e // b) for e, b in zip(extent, box[1:])]


def _programs(batch: int, extent: Sequence[int], c_out: int, phases: int, box: tuple,
              bn: int) -> int:
    return phases * math.prod(_tiles(batch, extent, box)) * -(-c_out // bn)


@functools.lru_cache(maxsize=256)
def _int_tensor(values: tuple, device: torch.device) -> torch.Tensor:
    """``values`` (flattened) as int32 on ``device``, made once: a kernel's small table, not
    copied to the device on every call (nor during CUDA-graph capture, where it cannot be)."""
    flat = [v for item in values for v in (item if isinstance(item, tuple) else (item,))]
    return torch.tensor(flat, dtype=torch.int32, device=device)


@functools.lru_cache(maxsize=256)
def _table_tensor(taps: Taps, device: torch.device) -> tuple:
    flat = [v for phase in taps.offsets for offset in phase for v in offset]
    return (torch.tensor(flat, dtype=torch.int32, device=device),
            torch.tensor([i for phase in taps.index for i in phase], dtype=torch.int32, device=device),
            torch.tensor(taps.count, dtype=torch.int32, device=device))


class RowColumns(NamedTuple):
    """A single phase's taps as columns along H (:func:`row_columns`): every column (its
    offsets along D and W in ``columns``) has the same ``height >= 2`` taps along H, tap
    ``h`` at offset ``top - h spacing`` (``spacing > 0``), its weight matrix
    ``index[column][h]``."""
    top: int
    spacing: int
    columns: tuple
    index: tuple

    @property
    def height(self) -> int:
        return len(self.index[0])


@functools.lru_cache(maxsize=256)
def row_columns(taps: Taps) -> Optional[RowColumns]:
    """The taps of a single phase as columns along H, for the kernel of two output rows a
    program (``_triton.implicit_gemm_rows``); None where they do not form such columns
    (strides, or one tap along H)."""
    if len(taps.count) != 1:
        return None
    by_column: dict = {}
    for (o0, o1, o2), i in zip(taps.offsets[0][:taps.count[0]], taps.index[0]):
        by_column.setdefault((o0, o2), []).append((o1, i))
    along_h = [sorted(taps_, reverse=True) for taps_ in by_column.values()]
    heights = {tuple(o for o, _ in col) for col in along_h}
    if len(heights) != 1:
        return None
    height, = heights
    steps = {a - b for a, b in zip(height, height[1:])}
    if len(height) < 2 or len(steps) != 1 or min(steps) <= 0:
        return None
    return RowColumns(height[0], steps.pop(), tuple(by_column),
                      tuple(tuple(i for _, i in col) for col in along_h))


def _dense(shape: Sequence[int]) -> list:
    return [math.prod(shape[d + 1:]) for d in range(len(shape))]


def round_tf32(t: torch.Tensor) -> torch.Tensor:
    """A float32 tensor rounded to TF32 (10 mantissa bits, to nearest, ties away), as the
    kernel rounds its input tiles; contiguous, in two kernels whatever ``t``'s strides (the
    first adds as it copies: each small kernel costs 15 us of the H200's host time)."""
    bits = torch.empty(t.shape, dtype=torch.int32, device=t.device)
    torch.add(t.view(torch.int32), 0x1000, out=bits)
    return bits.bitwise_and_(-0x2000).view(torch.float32)


def implicit_gemm(x: torch.Tensor, weights: torch.Tensor, bias: Optional[torch.Tensor],
                  taps: Taps, out: torch.Tensor, precision: str = "tf32",
                  cfg: Optional[Config] = None, round_input: bool = True) -> torch.Tensor:
    """``out (N, *image, C_out)`` (any strides) = the phases of ``taps`` over ``x (N, *grid,
    C_in)`` and ``weights (T, C_out, C_in)`` (both contiguous, 16-byte aligned), plus
    ``bias`` (any stride: the kernel reads a contiguous copy where it is strided): the
    kernel :func:`reference` describes. ``precision`` is tl.dot's for float32
    inputs ("tf32": the input's tiles rounded to TF32 first, the weights by the caller; or
    "ieee"). ``round_input``: whether float32 tiles still need rounding to TF32 (False
    where ``x`` is rounded already); ``cfg`` for experiments."""
    fp32 = x.dtype == torch.float32
    plan = _gemm_plan(tuple(x.shape), tuple(weights.shape), tuple(out.shape), out.stride(),
                      x.dtype, taps, precision if fp32 else "tf32",
                      fp32 and precision == "tf32" and round_input, bias is not None, cfg,
                      x.device)
    if plan.launch is not None:
        from triton.tools.tensor_descriptor import TensorDescriptor
        plan.launch(TensorDescriptor(x, *plan.x_layout), TensorDescriptor(weights, *plan.w_layout),
                    out, out if bias is None else bias.contiguous(), *plan.tables)
    return out


class GemmPlan(NamedTuple):
    """An :func:`implicit_gemm` call's launch, worked out once per shape: the input's and
    the weights' descriptors as (shape, strides, block), the taps' tables on the device
    (:func:`_table_tensor`) and the launch (None where it has no programs)."""
    x_layout: tuple
    w_layout: tuple
    tables: tuple
    launch: object   # _triton.Launch


@functools.lru_cache(maxsize=256)
def _gemm_plan(x_shape: tuple, w_shape: tuple, out_shape: tuple, out_strides: tuple,
               dtype: torch.dtype, taps: Taps, precision: str, rounds: bool, has_bias: bool,
               cfg: Optional[Config], device: torch.device) -> GemmPlan:
    from . import _triton
    element_size = dtype.itemsize
    batch, c_in, c_out = x_shape[0], x_shape[-1], out_shape[-1]
    grid, image = _padded(x_shape[1:-1], 1), _padded(out_shape[1:-1], 1)
    extent = _extent(image, taps)
    cfg = cfg or launch_config(batch, extent, c_in, c_out, taps, element_size, rounds,
                               out_strides[-1] != 1)
    # Strides of the dense layouts: those torch gives dims of size 1 are arbitrary, and the
    # copy engine wants every stride in whole 16-byte units.
    x_dims, w_dims = [batch, *grid, c_in], list(w_shape)
    x_layout = (x_dims, _dense(x_dims), [*cfg.box, cfg.bk])
    w_layout = (w_dims, _dense(w_dims), [1, cfg.bn, cfg.bk])
    if cfg.rows > 1:
        return _rows_plan(x_layout, w_layout, image, out_strides, c_in, c_out, taps, cfg,
                          precision, rounds, has_bias, device)
    programs = _programs(batch, extent, c_out, len(taps.count), cfg.box, cfg.bn)
    if programs == 0:
        return GemmPlan(x_layout, w_layout, (), None)
    sizes = (batch, *image, *taps.stride, out_strides[0], *_padded(out_strides[1:-1], 0),
             out_strides[-1], c_in, c_out, len(taps.index[0]),
             *_tiles(batch, extent, cfg.box), -(-c_out // cfg.bn))
    launch = _triton.Launch(
        _triton.implicit_gemm, (programs,), sizes, BB=cfg.box[0], B0=cfg.box[1],
        B1=cfg.box[2], B2=cfg.box[3], BK=cfg.bk, BN=cfg.bn, ROUND=rounds, HAS_BIAS=has_bias,
        PRECISION=precision, num_warps=cfg.warps, num_stages=cfg.stages)
    return GemmPlan(x_layout, w_layout, _table_tensor(taps, device), launch)


def launch_config(batch: int, extent: Sequence[int], c_in: int, c_out: int, taps: Taps,
                  element_size: int, rounds: bool, planar: bool) -> Config:
    """The tile :func:`implicit_gemm` launches over ``taps``' phase grids of ``extent``:
    :func:`row_tile`'s where the taps form columns along H and it applies, else
    :func:`config`'s."""
    one = config(batch, extent, c_in, c_out, len(taps.count), element_size, rounds, planar)
    columns = row_columns(taps)
    if columns is None:
        return one
    return row_tile(one, batch, extent, c_out, columns.height, element_size, planar) or one


def _extent(image: Sequence[int], taps: Taps) -> list:
    """A phase grid's extent (D, H, W) for an output ``image`` padded to three dims."""
    return [-(-i // s) for i, s in zip(image, taps.stride)]


def _rows_plan(x_layout: tuple, w_layout: tuple, image: tuple, out_strides: tuple, c_in: int,
               c_out: int, taps: Taps, cfg: Config, precision: str, rounds: bool,
               has_bias: bool, device: torch.device) -> GemmPlan:
    """:func:`_gemm_plan` for ``cfg.rows`` 2 or 3: programs over that many rows ``spacing``
    apart."""
    from . import _triton
    top, spacing, columns, index = row_columns(taps)   # (index: columns x height)
    assert cfg.box[2] == 1, "a box one row high"
    batch = x_layout[0][0]
    tiles = _tiles(batch, image, cfg.box)
    tiles[2] = spacing * -(-image[1] // (cfg.rows * spacing))
    tiles_n = -(-c_out // cfg.bn)
    programs = math.prod(tiles) * tiles_n
    if programs == 0:
        return GemmPlan(x_layout, w_layout, (), None)
    sizes = (batch, *image, out_strides[0], *_padded(out_strides[1:-1], 0), out_strides[-1],
             c_in, c_out, len(columns), top, spacing, *tiles[1:], tiles_n)
    launch = _triton.Launch(
        _triton.implicit_gemm_rows, (programs,), sizes, BB=cfg.box[0], B0=cfg.box[1],
        B2=cfg.box[3], BK=cfg.bk, BN=cfg.bn, KH=len(index[0]), ROWS=cfg.rows, ROUND=rounds,
        HAS_BIAS=has_bias, PRECISION=precision, num_warps=cfg.warps, num_stages=cfg.stages)
    return GemmPlan(x_layout, w_layout, (_int_tensor(columns, device), _int_tensor(index, device)),
                    launch)


# The calls where the fused route beat the routes with columns in memory on the H200
# (benches/NOTES.md, sessions 22 and 23): 2-D calls at stride 1, and strided ones on
# channels_last tensors, and stride-1 1-D calls, of more than this many output elements.
# Elsewhere, so far, its tiles idle (3-D cases of few output channels, strides with one tap
# per phase), or a planar input's copy costs more than the strided column routes' margin.
# Below it a call is bound by host time, where a fused call costs 160-460 us (Triton's
# launcher, the weights' reorder) against the column routes' 90-210: every channels_last
# layer of the zoo, U-Net's last up-conv at 33.5M outputs included, ran faster per call on
# the column routes (results/s25/A/layers-columns.log), though its kernels took 123 us
# there against 160. Session 31 cut a fused call's host time (_triton.Launch): the fused
# route then beat the column routes on that layer alone (bfloat16 0.090 against 0.128 ms a
# call, results/s31/N), a gain too small to move the floor for.
SMALL_OUTPUT = 1 << 26
SMALL_COLUMNS = 1 << 28   # the same for the 3-D backward, in column elements

# The float32 fused backward of a channels_last call: above this many bytes of output
# channels a position the column routes' backward ran faster (backward_unavailable), but
# where the weight gradient takes float32_weight_form's "mma" form with all output channels
# in one block (two tiles of 64: 2d-64to128's step, H100, results/s70/A: 10.09 ms fused
# against 11.60 on the column routes, torch 9.87-9.90).
CHANNELS_LAST_FLOAT32_ROWS = 256
# The dims of the calls whose float32 backward may take the fused kernels. Not 1-D: the
# 1-D cases' training step on the column routes took 0.66-0.75 of its time on the fused
# kernels (H100, results/s27/B/probe.log; their weight gradient reads copies of the output
# gradient moved along W, at 42-104 TFLOP/s), and 0.89-0.95 in session 66 (1d-65536 13.91
# against 15.58 ms, 1d-dil3 5.99 against 6.32; H100, results/s66/F). 3-D since session 65:
# in session 29 the column routes' step ran 1.1-1.5x faster (results/s29/D), but on the
# weight gradient rebuilt since (sessions 58-63) the fused backward's step beat theirs on
# every 3-D stride-1 case of the table, channels_last 3d-64cube 20.27 -> 9.66 ms (torch
# 19.80), 3d-32to64 62.99 -> 46.55, planar 3d-64cube 15.44 -> 10.57 (H100,
# results/s65/F2).
FLOAT32_BACKWARD_DIMS = (2, 3)

# Its weight gradient (float32_weight_form): on the operands' rows as they lie, channels
# innermost, no copies, but 32-bit tiles the tensor cores do not take from shared memory
# that way (they take them along the reduction, the positions), so they run through
# registers; or the planar form, on the moved copies of one operand and one planar copy of
# the other. The planar form pays those copies once a position and gains on every product
# of every tap: from this many products a position (taps x input x output channels) it
# ran faster. Kernel ms and training step against torch channels_last, rows -> planar (H200,
# benches/cl_wgrad_probe.py, results/s59/B): 2d-512x1024 (9 x 32 x 32 = 9,216) 2.48 ->
# 2.75 ms, step 1.21x -> 1.13x; 2d-3x7-padded (21,504) 5.37 -> 4.54, 1.48x -> 1.65x;
# 2d-1024 (36,864) 10.12 -> 8.90, 0.81x -> 0.84x; 2d-3x7-512 (86,016) 6.24 -> 3.57,
# 0.77x -> 1.08x.
CHANNELS_LAST_PLANAR_PRODUCTS = 16384
# ...unless its channels come in the tiles of col2im.cu's tf32_weight_gradient (64): then
# the "mma" form, no copies and the W taps at shifted rows of one box. Weight gradient
# alone (H100, results/s69/WF, benches/mma_wgrad.cu; torch / the planar form / mma):
# 2d-1024 5.81 / 10.41 / 5.27 ms, 2d-3x7-512 3.48 / 4.44 / 3.21.


# 3-D forwards on channels_last tensors go to the fused route too: in 16-bit types all of
# them, in float32 those whose output channels take at least WIDE_3D_FLOAT32_BYTES. The
# planar 3-D routes take the outer dim's taps in the GEMM's reduction, over overlapping rows
# of columns laid out (D, C, H W); with the channels innermost those rows cannot overlap,
# so the channels_last column routes moved up to 1.7x their bytes (3d-64cube 4.78 against
# 3.20 ms planar, H200). Forced onto the fused route (benches/fused3d_cl_probe.py,
# results/s64/P, H100), ms against torch channels_last's: bfloat16 3d-3x5x7 (16 output
# channels) 0.74 -> 0.62 (torch 0.71), 3d-64cube (48) 2.15 -> 1.28, 3d-96cube (24) 4.75 ->
# 3.29, 3d-32to64 and 3d-stride2-dil2 even; float32 3d-96cube (24 channels, 96 bytes) 8.19
# -> 5.38, 3d-64cube, 3d-32to64 and 3d-stride2-dil2 even, and 3d-3x5x7 (16, 64 bytes) lost,
# 1.06 -> 1.39 (in bfloat16, 16 channels won).
WIDE_3D_FLOAT32_BYTES = 96


def wide_3d(a: ConvTransposeArgs, interleaved: bool, element_size: int) -> bool:
    """Whether a 3-D forward goes to the fused route as channels_last (see
    WIDE_3D_FLOAT32_BYTES): of more than SMALL_OUTPUT output elements, or at least
    SMALL_FUSED_OUTPUT where two taps or more reach an output on average (3d-3x5x7's 11M
    outputs; the 3-D U-Net's k2 s2 layers, one tap an output, stay on the column routes)."""
    g, outputs = a.geometry, a.output_elements
    large = outputs > SMALL_OUTPUT or (_taps_overlap(g) and outputs >= SMALL_FUSED_OUTPUT)
    return g.nd == 3 and interleaved and large and (
        element_size < 4 or a.out_channels * element_size >= WIDE_3D_FLOAT32_BYTES)


def _taps_overlap(g: Geometry) -> bool:
    """Whether two taps or more reach an output on average (taps over the stride's
    product): below SMALL_OUTPUT, where the fused route pays for its tiles."""
    return g.taps >= 2 * math.prod(g.stride)


# 2-D forwards below SMALL_OUTPUT go to the fused route, launched as a CUDA graph
# (ops._FusedReplay), where their columns' trip would outweigh the fused kernel's tiles:
# two taps or more reach an output on average (taps over the stride's product), at least
# SMALL_FUSED_OUTPUT output elements (SMALL_FUSED_ONE_TAP_OUTPUT channels_last where one
# tap does: the columns are then the output's size), and at least SMALL_FUSED_CHANNELS
# output channels (with fewer, each input box feeds too few products: DCGAN's last layer,
# 3 channels, took 0.117 ms fused against 0.036). On the zoo's layers, forward without
# grad, each route graphed (benches/small_fused_probe.py, results/s37/D, H100), GPU
# kernel ms a call, fused against columns:
#   VAE decoder k3 s2 (16, 128, 32, 32) -> 64: float32 0.036 / 0.050 planar, 0.027 / 0.056
#     channels_last; bfloat16 0.021 / 0.025, 0.015 / 0.023. Its (16, 64, 64, 64) -> 32:
#     0.071 / 0.085, 0.038 / 0.104; 0.030 / 0.049, 0.020 / 0.046.
#   DCGAN k4 s2 (128, 256, 8, 8) -> 128: 0.063 / 0.107, 0.054 / 0.073; 0.034 / 0.055,
#     0.026 / 0.036. Its (128, 128, 16, 16) -> 64: 0.100 / 0.141, 0.064 / 0.143; 0.048 /
#     0.089, 0.031 / 0.071.
#   2-D U-Net k2 s2, channels_last (8, 256, 64, 64) -> 128: 0.081 / 0.113, bfloat16 0.038 /
#     0.052; (8, 128, 128, 128) -> 64: 0.149 / 0.190, 0.074 / 0.094.
# The fused route lost on every layer of these models below the floors (the VAE decoder's
# 2.1M outputs: 0.038 / 0.033 planar float32; U-Net's (8, 512, 32, 32) -> 256 channels_last
# 0.058 / 0.063 won narrowly, its planar up-convs lost by 1.5-2x) and on HiFi-GAN's 1-D
# layers (0.070 / 0.071, 0.043 / 0.039).
SMALL_FUSED_OUTPUT = 1 << 22
SMALL_FUSED_ONE_TAP_OUTPUT = 1 << 24
SMALL_FUSED_CHANNELS = 32


def small_preferred(a: ConvTransposeArgs, interleaved: bool) -> bool:
    """Whether the cost model sends a 2-D forward of at most SMALL_OUTPUT output elements to
    the fused route (see SMALL_FUSED_OUTPUT)."""
    g = a.geometry
    outputs = a.output_elements
    if g.nd != 2 or a.out_channels < SMALL_FUSED_CHANNELS or outputs > SMALL_OUTPUT:
        return False
    if _taps_overlap(g):
        return outputs >= SMALL_FUSED_OUTPUT
    return interleaved and outputs >= SMALL_FUSED_ONE_TAP_OUTPUT


def preferred(a: ConvTransposeArgs, interleaved: bool) -> bool:
    """Whether the cost model sends a call that can take the fused route there, forward and
    backward (see also :func:`forward_preferred` and :func:`backward_preferred`)."""
    g = a.geometry
    return ((g.nd == 2 and (interleaved or g.stride == (1, 1))) or
            (g.nd == 1 and g.stride == (1,))) and \
        a.output_elements > SMALL_OUTPUT


def forward_preferred(a: ConvTransposeArgs, interleaved: bool, element_size: int) -> bool:
    """Whether the cost model sends a call's forward to the fused route: those
    :func:`preferred` sends, 3-D calls on channels_last tensors (:func:`wide_3d`), and
    small 2-D ones (:func:`small_preferred`); their backward stays where
    :func:`backward_preferred` says."""
    return preferred(a, interleaved) or small_preferred(a, interleaved) or \
        wide_3d(a, interleaved, element_size)


def unavailable(a: ConvTransposeArgs, x: torch.Tensor, weight: torch.Tensor,
                interleaved: bool = False) -> Optional[str]:
    """Why a call does not take the fused route, or None where it does. It can on a CUDA
    device with the bulk tensor copy engine (compute capability 9.0 or later) and Triton;
    in bfloat16, float16, or float32 where the policy allows TF32 (gemm.uses_tf32); with
    one group; with input channels whose rows fill whole 16-byte units (the copy engine's
    granule). It does where it can and the cost model prefers it (:func:`forward_preferred`;
    on channels_last tensors where ``interleaved``)."""
    why = _unable(a, x, weight)
    if why is None and not forward_preferred(a, interleaved, x.element_size()):
        return (f"the cost model: 3-D (but large channels_last ones in 16-bit types, or in "
                f"float32 with {WIDE_3D_FLOAT32_BYTES} bytes of output channels), strided "
                f"planar 2-D or strided 1-D, or at most {SMALL_OUTPUT:,} output elements "
                f"(but 2-D calls of two taps an output, {SMALL_FUSED_OUTPUT:,} output "
                f"elements and {SMALL_FUSED_CHANNELS} output channels)")
    return why


def _unable(a: ConvTransposeArgs, x: torch.Tensor, weight: torch.Tensor,
            channels: Optional[int] = None) -> Optional[str]:
    """Why the fused kernels cannot take a call, whatever the cost model says, or None.
    ``channels``: those of the kernel's input, whose rows the copy engine reads (by
    default ``a.in_channels``, the transposed convolution's)."""
    channels = a.in_channels if channels is None else channels
    if not x.is_cuda and x.device.type != "meta":
        return "tensors not on a CUDA device"
    if x.is_cuda and _capability(x.device.index) < (9, 0):
        return "the GPU has no bulk tensor copy engine (compute capability below 9.0)"
    if x.dtype == torch.float32 and not gemm.uses_tf32():
        return "float32 under the 'ieee' precision policy (the kernel multiplies in TF32)"
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16) or weight.dtype != x.dtype:
        return f"dtype {x.dtype} (the kernel takes float32, bfloat16 and float16)"
    if a.groups != 1:
        return "groups > 1"
    if channels * x.element_size() % 16:
        return f"{channels} input channels of {x.element_size()} bytes: rows not whole 16-byte units"
    if not _triton_available():
        return "Triton is not installed"
    return None


def takes(a: ConvTransposeArgs, x: torch.Tensor, weight: torch.Tensor,
          interleaved: bool = False) -> bool:
    """Whether a call takes the fused route (:func:`unavailable` is None), the cost model
    asked first: it depends on the call's shape alone, and most small calls stop there
    without the device and policy checks (microseconds of host time they wait for)."""
    return forward_preferred(a, interleaved, x.element_size()) and \
        unavailable(a, x, weight, interleaved) is None


def backward_preferred(a: ConvTransposeArgs, interleaved: bool, element_size: int) -> bool:
    """Whether the cost model sends a call's backward to the fused kernels: the calls whose
    forward it sends there (:func:`preferred`), and 3-D calls at stride 1 whose output
    channels fill at least half of the kernels' 128-byte chunk of the reduction (the input
    gradient's). Their training step in bfloat16, the forward on the column routes, ran
    3d-64cube 1.17x -> 1.68x and 3d-32to64 0.80x -> 1.27x torch's, and 3d-96cube (24 output
    channels) 1.62x -> 1.05x (H100, benches/results/s29/D); in float32 see
    FLOAT32_BACKWARD_DIMS, which backward_unavailable applies. Channels
    counted with the taps along W folded into them (:func:`folded_taps`); the call's size
    as its column elements (output elements times taps: 3d-3x5x7's 11.6M outputs take 105
    taps each)."""
    g = a.geometry
    fold = folded_taps(g, a.out_channels, element_size)
    return preferred(a, interleaved) or (
        g.nd == 3 and set(g.stride) == {1} and fold * a.out_channels * element_size >= 64 and
        a.output_elements * g.taps > SMALL_COLUMNS)


def backward_takes(a: ConvTransposeArgs, x: torch.Tensor, weight: torch.Tensor,
                   interleaved: bool = False, limit: Optional[int] = None) -> bool:
    """Whether a call's backward takes the fused kernels (:func:`backward_unavailable` is
    None), the cost model asked first as in :func:`takes`."""
    return backward_preferred(a, interleaved, x.element_size()) and \
        backward_unavailable(a, x, weight, interleaved, limit) is None


@functools.lru_cache(maxsize=None)
def _capability(index: Optional[int]) -> tuple:
    return torch.cuda.get_device_capability(index)


@functools.lru_cache(maxsize=None)
def _triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def tap_weights(weight: torch.Tensor, transpose: bool = False, fold: int = 1) -> torch.Tensor:
    """``weight (C_in, C_out, *kernel)`` as the kernel's ``(T, C_out, C_in)``, taps in
    row-major kernel order, float32 rounded to TF32 (the kernel rounds the input's tiles
    alike); ``(T, C_in, C_out)`` where ``transpose`` (a convolution's weight), and with the
    ``fold`` taps along W in the reduction, ``(T / fold, C_in, fold C_out)`` (tap along W
    outer, as :func:`folded_rows` lays them)."""
    w = weight.reshape(weight.shape[0], weight.shape[1], -1, fold)
    if fold > 1:
        assert transpose, "W's taps fold into the input gradient's reduction"
        w = w.permute(2, 0, 3, 1).reshape(w.shape[2], w.shape[0], -1)
    else:
        w = w[..., 0].permute(2, 0, 1) if transpose else w[..., 0].permute(2, 1, 0)
    return round_tf32(w) if w.dtype == torch.float32 else w.contiguous()


def folded_taps(g: Geometry, c_out: int, element_size: int) -> int:
    """The taps along W that the 16-bit fused backward folds into the output gradient's
    channels: all of them where the channels fill at most 32 bytes, one step of the tensor
    cores' reduction (3d-3x5x7's 16 output channels: 15 taps of 7 x 16 channels, where 105
    taps of 16 each took a load and a step of their own), else 1. On the H200 the fold
    took 3d-3x5x7's bfloat16 training step from the column routes' 2.22 ms to 1.71-1.79,
    and 3d-96cube's (24 channels, 3 taps: 72 channels in chunks of 64) from 11.0 to 13.9
    (benches/results/s30/C)."""
    kw = g.kernel_size[-1]
    return kw if element_size < 4 and c_out * element_size <= 32 and kw > 1 else 1


def narrowed(g: Geometry) -> Geometry:
    """``g`` with its taps along W folded into the channels: one tap there, no padding."""
    return Geometry(g.kernel_size[:-1] + (1,), g.stride, g.padding[:-1] + (0,),
                    g.dilation[:-1] + (1,))


def folded_rows(rows: torch.Tensor, g: Geometry, width: int) -> torch.Tensor:
    """The output gradient ``rows (N, *image, C)``, channels innermost and contiguous, as
    ``(N, *image[:-1], width, kw C)``: at position ``w`` along W, tap by tap, the channels
    at ``w + t d - p`` (zero outside the image). The stride-1 input and weight gradients
    reduce over these rows with W's taps folded in (``narrowed(g)``): an im2col along W
    alone (the interleaved kernel; torch's strided copy took 3d-3x5x7's 0.187 ms where
    this writes at the copy rate), ``kw`` times the output gradient's size."""
    kw, nd = g.kernel_size[-1], g.nd
    along_w = Geometry((1,) * (nd - 1) + (kw,), (1,) * nd, (0,) * (nd - 1) + (g.padding[-1],),
                       (1,) * (nd - 1) + (g.dilation[-1],))
    n, *image, c = rows.shape
    grid = (*image[:-1], width)
    from . import columns
    out = columns.im2col_interleaved(rows, along_w, grid)          # (N, *grid, 1, kw, C)
    return out.view(n, *grid, kw * c)


def _unfolded(grad_weight: torch.Tensor, g: Geometry, fold: int) -> torch.Tensor:
    """A weight gradient ``(C_in, fold C_out, *narrowed kernel)`` with W's taps folded into
    its output channels, as ``(C_in, C_out, *kernel)``."""
    c_in = grad_weight.shape[0]
    w = grad_weight.reshape(c_in, fold, -1, *g.kernel_size[:-1])
    return w.movedim(1, -1).contiguous()


def channels_innermost(x: torch.Tensor, tf32: bool = False) -> torch.Tensor:
    """``x (N, C, *grid)``, contiguous, copied as ``(N, *grid, C)``, contiguous, and rounded
    to TF32 where ``tf32`` (float32). A planar input takes this one pass to the kernel's
    layout; the rounding rides along, so the kernel need not round its tiles (on the H200
    12-14% of its time, results/s23/layouts.log). torch's own permuted copy moved 1.4 TB/s
    there."""
    return _channels_innermost(x, tf32, False)[0]


def channels_innermost_summed(x: torch.Tensor, tf32: bool = False) -> tuple:
    """:func:`channels_innermost` of ``x``, and its sums over samples and positions
    ``(C,)`` in float32, taken from the copy's tiles as they pass (a bias's gradient
    without a pass of its own over ``x``), in a fixed order."""
    return _channels_innermost(x, tf32, True)


def _channels_innermost(x: torch.Tensor, tf32: bool, sums: bool) -> tuple:
    """(The copy, and with ``sums`` the sums of its tiles' partials, else None.)"""
    out = x.new_empty(x.shape[0], *x.shape[2:], x.shape[1])
    if not out.numel():
        return out, x.new_zeros(x.shape[1], dtype=torch.float32) if sums else None
    launch = _transpose_launch(tuple(x.shape), x.element_size(), tf32 and x.dtype == torch.float32,
                               sums, x.device)
    tiles = x.shape[0] * launch.sizes[2]
    partial = x.new_empty(tiles, x.shape[1], dtype=torch.float32) if sums else out   # (unread)
    launch(x, out, partial)
    return out, partial.sum(0) if sums else None


@functools.lru_cache(maxsize=256)
def _transpose_launch(shape: tuple, element_size: int, rounds: bool, sums: bool,
                      device: torch.device):
    from . import _triton
    batch, channels, positions = shape[0], shape[1], math.prod(shape[2:])
    bc, bp = _transpose_tile(channels, element_size)
    tiles_p, tiles_c = -(-positions // bp), -(-channels // bc)
    return _triton.Launch(_triton.channels_innermost, (batch * tiles_c * tiles_p,),
                          (channels, positions, tiles_p, tiles_c), BC=bc, BP=bp, ROUND=rounds,
                          SUMS=sums, num_warps=4)


def _transpose_tile(channels: int, element_size: int) -> tuple:
    """Channels and positions of a transpose's tile: 16 KB, channels a power of two from
    16 to 64 (a 16-byte row at least), positions the rest."""
    bc = min(64, max(16, _pow2(channels)))
    return bc, 16384 // element_size // bc


def _on(device: torch.device):
    """Launches on ``device``: its CUDA context, or none on the CPU (where the kernels run
    only under Triton's interpreter, as CI tests them)."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def copies_input(x: torch.Tensor) -> bool:
    """Whether :func:`forward` copies ``x (N, C_in, *grid)`` channels innermost first: where
    its channels are not innermost and dense, 16-byte aligned."""
    rows = x.movedim(1, -1)
    return not rows.is_contiguous() or rows.data_ptr() % 16 != 0


def forward(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
            a: ConvTransposeArgs, out: torch.Tensor) -> torch.Tensor:
    """The transposed convolution ``a`` of ``x (N, C_in, *grid)`` into ``out (N, C_out,
    *image)``, both in any layout. A channels-innermost input (channels_last) goes to the
    kernel as it is, which rounds its tiles to TF32 in registers; a planar one through
    :func:`channels_innermost`, rounded on the way; the kernel writes ``out`` through its
    strides."""
    with _on(x.device):
        rows, rounded = _input_rows(x)
        implicit_gemm(rows, tap_weights(weight), bias, transposed_taps(a.geometry),
                      out.movedim(1, -1), round_input=not rounded)
    return out


def _input_rows(x: torch.Tensor) -> tuple:
    """``x (N, C, *grid)`` as the forward kernel reads it, ``(N, *grid, C)``, and whether it
    is rounded to TF32 already: as it lies where :func:`copies_input` says it may be (the
    kernel rounds float32 tiles in registers), else :func:`channels_innermost`'s copy,
    float32 rounded on the way."""
    if copies_input(x):
        tf32 = x.dtype == torch.float32
        return channels_innermost(x.contiguous(), tf32), tf32
    return x.movedim(1, -1), False


def convolution(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                a: ConvTransposeArgs, out: torch.Tensor) -> torch.Tensor:
    """The stride-1 convolution that the transposed convolution ``a`` is the adjoint of
    (shapes.conv_args), of ``x (N, C_out, *image)`` into ``out (N, C_in, *grid)``, both in
    any layout; ``weight (C_in, C_out, *kernel)`` (the convolution's own, out channels
    first), ``bias (C_in,)``. The backward's input-gradient kernel (:func:`backward`) with
    the bias added, as :func:`forward` runs the transposed convolution: no columns in
    memory, where the column route writes and reads K C_out elements an output position.
    ops._ConvFusedReplay runs it where :func:`convolution_takes` says."""
    with _on(x.device):
        rows, rounded = _input_rows(x)
        implicit_gemm(rows, tap_weights(weight, transpose=True), bias,
                      convolution_taps(a.geometry), out.movedim(1, -1), round_input=not rounded)
    return out


# The fewest column elements (output positions times C_in times taps) of a 2-D convolution
# whose forward the cost model sends to :func:`convolution` rather than the column route
# (im2col and a GEMM), or None: none. From 2^23: benches/conv_fused_probe.py (session 76,
# H100) timed the VAE decoder's 3x3 layers graphed at 1.2-4.6x of torch's from 9.4M
# elements, faster than the column route in float32 and bfloat16, planar and channels_last;
# at 4.7M it lost to the column route in float32 (0.131 against 0.126 ms).
CONVOLUTION_MIN_COLUMNS: Optional[int] = 1 << 23

# The most output channels of a convolution whose forward the fused kernel takes. The
# columns' trip through memory costs the column route bytes in proportion to the products'
# work over the output channels: from 512 of them cuBLAS's GEMM, faster than the fused
# kernel on the products (whose tiles hold at most 128 channels and which does not split
# its reduction), more than pays for that trip. benches/unet_conv_probe.py (session 78, H100,
# results/s78/D), the 2-D U-Net's 3x3 layers side by side, batch 8, four precisions and
# layouts, the column route's forward time over the fused kernel's:
# - 512 and 1024 output channels (five layers, 16x16 and 32x32): 0.47-0.97, every one;
# - 64-256 (eight layers, 64x64 to 256x256): 1.08-4.31 (3->64, whose 3 input channels
#   the kernel cannot take, ran on the column route either way).
# The VAE decoder's 256-channel layer on 16x16 (batch 16) took 0.073 ms fused against 0.107
# on the column route, float32 planar (results/s76/C): positions alone do not draw the line.
CONVOLUTION_MAX_OUT_CHANNELS = 256


def convolution_preferred(a: ConvTransposeArgs) -> bool:
    """Whether the cost model sends the forward of the convolution ``a`` is the adjoint of
    to :func:`convolution`: 2-D, of at least CONVOLUTION_MIN_COLUMNS column elements and at
    most CONVOLUTION_MAX_OUT_CHANNELS output channels (``a``'s input channels)."""
    least = CONVOLUTION_MIN_COLUMNS
    return least is not None and a.geometry.nd == 2 and \
        a.in_channels <= CONVOLUTION_MAX_OUT_CHANNELS and \
        a.batch * math.prod(a.grid) * a.out_channels * a.geometry.taps >= least


def convolution_takes(a: ConvTransposeArgs, x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether the forward of the convolution ``a`` is the adjoint of takes
    :func:`convolution`: where the cost model prefers it (asked first, as :func:`takes`
    does) and :func:`convolution_unavailable` is None, but for a pointwise call
    (ConvTransposeArgs.pointwise) whose input the kernel would copy channels innermost:
    the column route's GEMMs read that input where it lies, its only operand of any size,
    where the kernel reads it three times (the U-Net's 1x1 head, 64 -> 2 channels on
    256x256, batch 8: 0.202 against 0.125 ms in float32, 0.134 against 0.099 in bfloat16;
    channels_last, the kernel's 0.155 and 0.125 against 0.186 and 0.158; results/s78/D)."""
    return convolution_preferred(a) and not (a.pointwise and copies_input(x)) and \
        convolution_unavailable(a, x, weight) is None


def convolution_unavailable(a: ConvTransposeArgs, x: torch.Tensor,
                            weight: torch.Tensor) -> Optional[str]:
    """Why :func:`convolution` cannot take the convolution ``a`` is the adjoint of, on its
    input ``x``, or None where it can: as :func:`unavailable` says of a transposed
    convolution (the cost model aside), at stride 1, the rows the copy engine reads being
    the convolution's input channels (the kernel's input; its output channels, any number,
    are the weights' middle dim, whose tiles the engine fills with zeros past the end)."""
    why = _unable(a, x, weight, a.out_channels)
    if why is None and any(s != 1 for s in a.geometry.stride):
        return "stride > 1"
    return why


def forward_tile(a: ConvTransposeArgs, x: torch.Tensor, planar: bool) -> Config:
    """The tile :func:`forward` launches with for call ``a`` on ``x (N, C_in, *grid)`` into
    an output ``planar`` or channels innermost (for :func:`gemmconv.explain`)."""
    taps = transposed_taps(a.geometry)
    rounds = x.dtype == torch.float32 and not copies_input(x)   # else rounded by the copy
    return launch_config(a.batch, _extent(_padded(a.image, 1), taps), a.in_channels,
                         a.out_channels, taps, x.element_size(), rounds, planar)


def forward_bytes(x: torch.Tensor, weight: torch.Tensor, c_out: int) -> int:
    """The memory :func:`forward` allocates, at most: the input's copy channels innermost,
    the weights' reorder (and its rounding's two buffers in float32), the bias's copy."""
    copies = x.numel() if copies_input(x) else 0
    return (copies + 2 * weight.numel() + c_out) * x.element_size()


class GradConfig(NamedTuple):
    """Tile of a weight-gradient launch: ``box`` (D, H, W) input positions a step (their
    product the reduction's tile), ``bm`` output and ``bn`` input channels, warps, stages;
    ``taps`` a program (1 to 4: :func:`taps_a_program`)."""
    box: tuple
    bm: int
    bn: int
    warps: int
    stages: int
    taps: int = 1


def grad_config(grid: Sequence[int], c_in: int, c_out: int, element_size: int,
                taps: int = 1) -> GradConfig:
    """128 bytes of positions a step (W first in 32-bit types); 128 x 128 channels, eight
    warps, where both sides have that many, else 64 output by 32-64 input channels, four
    warps. The best of six tiles on the H200 in bfloat16 (results/s23/G/wgrad.log). A
    kernel of ``taps`` taps takes :func:`taps_a_program` of them a program on the 64-row
    tiles, one on 128 x 128 (two took 250 registers a thread there in the float32 moved
    form, four spilled: sm_90, benches/ttgir_check.py)."""
    bk = 128 // element_size
    # A 32-bit tile stays in shared memory only where its box is one row of W (_moved_box);
    # a 16-bit one takes any box, so its box pads the grid least (3d-96cube: 33% in rows of 64).
    box = list((_box if element_size == 4 else _fitted_box)(1, tuple(grid), bk)[1:])
    box[2] *= bk // math.prod(box)   # a full step on small grids: the tensor cores take K >= 16
    granule = 16 // element_size      # a box's rows are whole 16-byte units for the copy engine
    if box[2] < granule:
        wider, box[2] = granule // box[2], granule
        for d in (1, 0):
            taken = min(wider, box[d])
            box[d], wider = box[d] // taken, wider // taken
    if c_in >= 128 and c_out >= 128:
        return GradConfig(tuple(box), 128, 128, 8, 3)
    return GradConfig(tuple(box), 64, min(64, max(32, _pow2(c_in))), 4, 4,
                      taps_a_program(taps, element_size))


def taps_a_program(count: int, element_size: int = 4) -> int:
    """Taps of the weight gradient a program computes, sharing the input's box, for a
    kernel of ``count`` taps: the most, up to four, whose groups leave at most one slot in
    eight to a repeated, unstored tap (one in six in 16-bit types). On the H100, float32
    (the moved copies' form, _triton.weight_gradient's MOVED): the five 2-D cases ran at
    0.60-1.11x cuDNN's speed with one tap a program, 0.70-1.25x with four and 0.73-1.17x
    with three; three won on 3x3 kernels, where four leave a quarter of the slots idle
    (benches/results/s28/P/probe.log). bfloat16 (the output gradient's tiles through
    registers): the rule's taps took 4-26% less time than one on the nine stride-1 cases
    of the table where it takes more (2d-64to128 1.803 -> 1.341 ms, 3d-64cube 1.952 ->
    1.443; s46/B, H100), within 8% of the best of 1 to 4; 1d-dil3's five taps take three
    (0.464 -> 0.393 ms, where two and four took more; s47/C repeated s46/B within 2%);
    the same bound takes 10 and 17 taps to four and 13 to three, unmeasured, and float32's
    five taps keep one, unmeasured. The float32 form through registers (W's taps folded
    into few output channels) keeps one: unmeasured."""
    idle = 6 if element_size < 4 else 8
    for taps in (4, 3, 2):
        slots = -(-count // taps) * taps
        if idle * (slots - count) <= slots:
            return taps
    return 1


def _planar(t: torch.Tensor) -> tuple:
    """``t (N, C, *spatial)`` contiguous or channels_last, as the copy engine can read it
    along W: ``(tensor, shape, strides)`` of 5 dims ``(N, C, D, H, W)`` (spatial padded).
    Rows of W must start on 16-byte boundaries; where they do not, a copy with rows
    ``pitch`` elements apart. A channels_last ``t`` has no rows of W: its copy with the
    channels next to W (:func:`shifted_copies`, moved by 0), whose strides the descriptor
    takes in planar order."""
    if _channels_last_rows(t) is not None:
        copy, (n, d, h, c, pitch), _ = shifted_copies(t, (0,), False)
        return copy, [n, c, d, h, _padded(t.shape[2:], 1)[-1]], \
            [d * h * c * pitch, pitch, h * c * pitch, c * pitch, 1]
    shape = [t.shape[0], t.shape[1], *_padded(t.shape[2:], 1)]
    width, granule = shape[-1], 16 // t.element_size()
    if width % granule == 0 and t.data_ptr() % 16 == 0:
        return t, shape, _dense(shape)
    pitch = -(-width // granule) * granule
    rows = t.numel() // width if width else 0
    out = t.new_empty(rows * pitch)
    if out.numel():
        _pitched_launch(rows, width, pitch, t.device)(t, out)
    return out, shape, _dense(shape[:-1] + [pitch])


@functools.lru_cache(maxsize=256)
def _pitched_launch(rows: int, width: int, pitch: int, device: torch.device):
    from . import _triton
    bw = min(128, max(16, _pow2(width)))
    tiles_w = -(-width // bw)
    return _triton.Launch(_triton.pitched, (-(-rows // 32) * tiles_w,),
                          (rows, width, pitch, tiles_w), BR=32, BW=bw, num_warps=4)


@functools.lru_cache(maxsize=256)
def shifted_taps(g: Geometry, element_size: int, moved_input: bool = False) -> tuple:
    """The weight gradient's taps over copies of the output gradient moved along W:
    ``(shifts, table)``. A box of the copy engine starts on 16 bytes along W (a start off
    them stops the GPU with an illegal instruction: H100, benches/tma_offset_probe.py,
    session 39), so the tap of offset ``o`` along W reads the copy moved by ``m = -o mod
    (16 / element_size)`` elements (``copy[w] = grad[w - m]``) at offset ``o + m``, a whole
    number of 16-byte units. ``shifts`` the distinct moves; ``table`` per tap of
    convolution_taps(g) its offsets (D, H, W, the last one moved) and the index of its copy
    in ``shifts``. Where ``moved_input``, the same for copies of the input, which tap ``k``
    reads at the opposite offset (``g[p] x[p - o]``: :func:`moves_input`)."""
    taps = convolution_taps(g)
    granule = 16 // element_size
    offsets = taps.offsets[0][:taps.count[0]]
    if moved_input:
        offsets = [tuple(-o for o in offset) for offset in offsets]
    moves = [-o[2] % granule for o in offsets]
    shifts = tuple(sorted(set(moves)))
    return shifts, tuple((o0, o1, o2 + m, shifts.index(m)) for (o0, o1, o2), m in zip(offsets, moves))


def moves_input(a: ConvTransposeArgs, element_size: int) -> bool:
    """Whether the float32 weight gradient reads copies of the input moved along W rather
    than of the output gradient (_triton.weight_gradient's MOVED_X): where those copies,
    with a pitched copy of the other operand where its rows do not start on 16 bytes, hold
    no more elements (:func:`_moved_copies`). 2d-64to128's (64 input channels of 128 x 256
    against 128 output channels of 130 x 260) hold half as many. On a tie the input's:
    2d-3x7-padded's weight gradient ran 6% faster so (3.917 against 4.177 ms on an H100;
    benches/NOTES.md, session 43)."""
    return _moved_copies(a, element_size, True) <= _moved_copies(a, element_size, False)


def _moved_copies(a: ConvTransposeArgs, element_size: int, moved_input: bool,
                  copied: bool = False) -> int:
    """Elements a sample of the float32 weight gradient's copies: one per shift of
    :func:`shifted_taps`, moved along W, of the input where ``moved_input``, else of the
    output gradient, rows padded to whole 16-byte units; and a pitched copy of the other
    operand where its rows do not start on 16 bytes, or where ``copied`` (channels_last:
    :func:`_planar`)."""
    granule = 16 // element_size
    grid, image = _padded(a.grid, 1), _padded(a.image, 1)

    def rows(channels: int, spatial: tuple, extra: int = 0) -> int:
        return channels * math.prod(spatial[:-1]) * -(-(spatial[-1] + extra) // granule) * granule
    moved, other = (a.in_channels, grid), (a.out_channels, image)
    if not moved_input:
        moved, other = other, moved
    shifts, _ = shifted_taps(a.geometry, element_size, moved_input)
    return len(shifts) * rows(*moved, max(shifts)) + \
        (rows(*other) if copied or other[1][-1] % granule else 0)


def shifted_copies(grad: torch.Tensor, shifts: Sequence[int], tf32: bool) -> tuple:
    """``grad (N, C, *spatial)``, contiguous or channels_last, copied once per shift ``m`` in
    ``shifts`` moved ``m`` elements along W, zero-filled, rounded to TF32 where ``tf32``,
    with its channels next to W: ``(tensor, shape, strides)`` of 5 dims ``(S N, D, H, C,
    W'')``, spatial padded to D, H, W, rows ``W''`` elements apart: whole 16-byte units that
    hold the moved rows. (With channels next to W, a box of one row of W is a tile the
    tensor cores read from shared memory as it lies: _triton._moved_box.)"""
    rows_last = _channels_last_rows(grad) is not None
    if not rows_last and not grad.is_contiguous():   # its callers make the one copy they need
        raise ValueError(f"shifted_copies takes a contiguous or channels_last tensor, not one "
                         f"of strides {grad.stride()}")
    batch, channels, *spatial = [grad.shape[0], grad.shape[1], *_padded(grad.shape[2:], 1)]
    width, granule = spatial[-1], 16 // grad.element_size()
    pitch = -(-(width + max(shifts)) // granule) * granule
    rows = grad.numel() // width if width else 0
    out = grad.new_empty(len(shifts), rows, pitch)
    if rows:
        shifts = tuple(shifts)
        _shifted_launch(shifts, rows, channels, spatial[0] * spatial[1], width, pitch, tf32,
                        rows_last, grad.device)(grad, out, _int_tensor(shifts, grad.device))
    full = [len(shifts) * batch, *spatial[:-1], channels, pitch]
    return out, full, _dense(full)


@functools.lru_cache(maxsize=256)
def _shifted_launch(shifts: tuple, rows: int, channels: int, planes: int, width: int,
                    pitch: int, tf32: bool, rows_last: bool, device: torch.device):
    from . import _triton
    bw = min(128, _pow2(pitch))
    tiles_w = -(-pitch // bw)
    # 16 rows a program: 32 took 236 registers a thread (benches/ttgir_check.py)
    return _triton.Launch(_triton.shifted_rows, (-(-rows // 16) * tiles_w,),
                          (len(shifts), rows, channels, planes, width, pitch, rows * pitch,
                           tiles_w), BR=16, BW=bw, ROUND=tf32, ROWS_LAST=rows_last,
                          num_warps=4)


def weight_gradient(x: torch.Tensor, grad: torch.Tensor, g: Geometry, precision: str = "tf32",
                    cfg: Optional[GradConfig] = None, rounded: bool = False,
                    shifted: bool = False, dtype: Optional[torch.dtype] = None,
                    planes: bool = False, moved_input: bool = False) -> torch.Tensor:
    """The weight gradient ``(C_in, C_out, *kernel)`` of a stride-1 transposed convolution of
    geometry ``g`` from its input ``x (N, C_in, *grid)``, planar and contiguous, or
    channels_last (its rows read as they lie, unless ``shifted``), and
    its output gradient ``grad``: per tap, ``sum over n, q of x[n, :, q] grad_out[n, :, q +
    k d - p]^T``, with no columns in memory. The
    reduction over samples and positions is split across programs into float32 partials,
    summed in a fixed order (deterministic). ``grad`` is either
    - ``(N, *image, C_out)``, channels innermost and contiguous: its tiles reach the tensor
      cores from registers, the 16-bit layout; or
    - where ``planes``, a strided call's :func:`phase_planes` ``(N, P, *image / stride,
      C_out)``, read at :func:`plane_taps` (any stride, one or two spatial dims); or
    - where ``shifted``, ``(N, C_out, *image)``, planar and contiguous or channels_last,
      read from its copies moved along W (:func:`shifted_taps`): both operands then lie
      along positions, the reduction dim, as the tensor cores take 32-bit types from shared
      memory. Where ``moved_input`` too, the input's copies are moved instead, and the
      output gradient read as it lies (:func:`moves_input`). A channels_last operand's
      copies are made from its rows, and the one read as it lies is read from one planar
      copy (:func:`_planar`).
    float32 runs in TF32: the output gradient rounded to nearest, in its copies where
    ``shifted``, else in registers unless ``rounded`` already; the input as it lies, which
    the tensor cores truncate (where ``moved_input``, the other way round: the input rounded
    in its copies). (A rounded copy of the input cost 0.36-1.44 ms, 2-6% of the
    stride-1 2-D cases' training steps on an H100, for an error of 3.0e-4 against 4.7e-4
    truncated, emulated in float64; torch's training step errs by 1.3-6.0e-3 on those cases:
    benches/NOTES.md, session 28.) The result is in ``dtype`` (``x``'s by default).
    ``cfg`` is for experiments."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    c_out = grad.shape[1] if shifted else grad.shape[-1]
    rows = None if shifted else _channels_last_rows(x)
    plan = _grad_plan(tuple(x.shape), tuple(grad.shape), g, x.dtype, precision, cfg, rounded,
                      shifted, x.device, planes, rows is not None, moved_input)
    # Every program stores its whole tile: only an empty batch leaves a partial to zero.
    partial = (x.new_empty if plan.launch else x.new_zeros)(plan.partial, dtype=torch.float32)
    if plan.launch:   # each operand as (tensor, shape, strides) for the copy engine
        if moved_input:   # the input's moved copies, the output gradient as it lies
            g_held, x_held = _planar(grad), shifted_copies(x, plan.shifts, plan.tf32)
        else:
            g_held = shifted_copies(grad, plan.shifts, plan.tf32) if shifted \
                else _described_rows(grad)
            x_held = _planar(x) if rows is None else _described_rows(rows)
        plan.launch(TensorDescriptor(*g_held, plan.g_block),
                    TensorDescriptor(*x_held, plan.x_block), partial, plan.table)
    return _summed(partial, x.shape[1], c_out, g, dtype or x.dtype)


def rows_weight_gradient(x: torch.Tensor, grad: torch.Tensor, g: Geometry) -> torch.Tensor:
    """The weight gradient ``(C_in, C_out, k_h, k_w)`` float32 of a stride-1 2-D transposed
    convolution of geometry ``g`` from the rows of its input ``x (N, H, W, C_in)`` and of its
    output gradient ``grad (N, H_out, W_out, C_out)``, float32 and contiguous, as they lie:
    float32_weight_form's ``"mma"`` form. Per row tap i, each output row's box of input
    positions ``x + p_w - (k_w - 1) d_w ...`` (input row ``y + p_h - i d_h``) serves every W
    tap j, read (k_w - 1 - j) d_w positions in. On CUDA tensors col2im.cu's
    tf32_weight_gradient (:func:`_cuda.rows_weight_gradient`: blocks of strips, TF32); on
    the CPU the same boxes and shifts as strided slices, in float32 on the output gradient
    rounded to TF32 as the kernel rounds it (:func:`round_tf32`; the input multiplied as it
    lies, where the tensor cores truncate it, as the interpreter runs the Triton kernels)."""
    for t, name in ((x, "input"), (grad, "output gradient")):
        if t.dim() != 4 or not t.is_contiguous() or t.dtype != torch.float32:
            raise ValueError(f"rows_weight_gradient: the {name}'s rows must be (N, H, W, C) "
                             f"float32 and contiguous, got {tuple(t.shape)} {t.dtype}")
    if x.is_cuda:
        return _cuda.rows_weight_gradient(x, grad, g)
    (kh, kw), (ph, pw), (dh, dw) = g.kernel_size, g.padding, g.dilation
    _, height, width, c_in = x.shape
    _, out_h, out_w, c_out = grad.shape
    # Rows y + p_h - i d_h and positions x + p_w - (k_w - 1) d_w + r, all inside once padded.
    top, left = max(0, (kh - 1) * dh - ph), max(0, (kw - 1) * dw - pw)
    bottom, right = max(0, out_h + ph - height), max(0, out_w + pw - width)
    padded = torch.nn.functional.pad(x, (0, 0, left, right, top, bottom))
    reach = (kw - 1) * dw
    start = left + pw - reach   # each box's first position
    g_flat = round_tf32(grad).reshape(-1, c_out)
    out = x.new_empty(c_in, c_out, kh, kw)
    for i in range(kh):
        first = top + ph - i * dh
        boxes = padded[:, first:first + out_h, start:start + out_w + reach]
        for j in range(kw):
            shift = (kw - 1 - j) * dw
            out[:, :, i, j] = boxes[:, :, shift:shift + out_w].reshape(-1, c_in).T @ g_flat
    return out


def _described_rows(rows: torch.Tensor) -> tuple:
    """Contiguous rows ``(N, *spatial, C)`` as the copy engine reads them: ``(tensor, shape,
    strides)`` of 5 dims ``(N, D, H, W, C)``, spatial padded (as :func:`_planar` gives a
    planar tensor)."""
    shape = [rows.shape[0], *_padded(rows.shape[1:-1], 1), rows.shape[-1]]
    return rows, shape, _dense(shape)


def _channels_last_rows(x: torch.Tensor) -> Optional[torch.Tensor]:
    """``x (N, C, *grid)`` as its contiguous rows ``(N, *grid, C)`` where it is channels_last
    and not also planar (where both, as with one position, planar serves), else None."""
    rows = x.movedim(1, -1)
    return rows if x.dim() > 3 and rows.is_contiguous() and not x.is_contiguous() else None


class GradPlan(NamedTuple):
    """A :func:`weight_gradient` call's launch, worked out once per shape: the partials'
    shape, the descriptors' blocks, the moved copies' shifts (where ``shifted``), the taps'
    offsets on the device, whether it runs in TF32, and the launch (None where no split
    has a box)."""
    partial: tuple
    g_block: list
    x_block: list
    shifts: tuple
    table: torch.Tensor
    tf32: bool
    launch: object   # _triton.Launch


@functools.lru_cache(maxsize=256)
def _grad_plan(x_shape: tuple, grad_shape: tuple, g: Geometry, dtype: torch.dtype,
               precision: str, cfg: Optional[GradConfig], rounded: bool, shifted: bool,
               device: torch.device, planes: bool = False, x_last: bool = False,
               moved_input: bool = False) -> GradPlan:
    """(The output gradient's shape in the key: its descriptor's shape, made per call, must
    be the same for every launch of the plan.)"""
    from . import _triton
    batch, c_in, element_size = x_shape[0], x_shape[1], dtype.itemsize
    c_out = grad_shape[1] if shifted else grad_shape[-1]
    # The reduction runs over the input's positions, or the output gradient's where the
    # input is moved (g[p] x[p - o]).
    grid = _padded((grad_shape[2:] if moved_input else x_shape[2:]), 1)
    count = math.prod(g.kernel_size)
    tf32 = dtype == torch.float32 and precision == "tf32"
    if moved_input and not shifted:
        raise ValueError("the input's moved copies serve the float32 layout (shifted=True)")
    if shifted:
        shifts, table = shifted_taps(g, element_size, moved_input)
    else:   # one phase
        shifts, table = (), (plane_taps(g) if planes else convolution_taps(g)).offsets[0]
    cfg, boxes_per_dim, boxes, tiles_m, tiles_n, groups, per_split, splits = grad_splits(
        batch, grid, c_in, c_out, count, element_size, shifted, cfg)
    tiles = groups * tiles_m * tiles_n
    g_block = [1, *cfg.box[:2], cfg.bm, cfg.box[2]] if shifted else [1, *cfg.box, cfg.bm]
    x_block = [1, *cfg.box, cfg.bn] if x_last else [1, cfg.bn, *cfg.box]
    if moved_input:   # the same blocks, the operands' layouts swapped
        g_block, x_block = [1, cfg.bm, *cfg.box], [1, *cfg.box[:2], cfg.bn, cfg.box[2]]
    launch = None
    if splits:
        sizes = (batch, c_in, c_out, count, *boxes_per_dim, boxes, per_split, tiles_m, tiles_n)
        common = dict(B0=cfg.box[0], B1=cfg.box[1], B2=cfg.box[2], BM=cfg.bm, BN=cfg.bn,
                      PRECISION="ieee" if dtype == torch.float32 and not tf32 else "tf32",
                      num_warps=cfg.warps, num_stages=cfg.stages)
        launch = _triton.Launch(_triton.weight_gradient, (splits * tiles,), (*sizes, groups),
                                TP=cfg.taps, ROUND=tf32 and not rounded and not shifted,
                                MOVED=shifted, MOVED_X=moved_input, X_LAST=x_last,
                                SWAP=moved_input and cfg.bn < cfg.bm, DOWN_H=BOXES_DOWN_H,
                                **common)
    return GradPlan((max(splits, 1), count, c_out, c_in), g_block, x_block, shifts,
                    _int_tensor(table, device), tf32, launch)


class GradSplits(NamedTuple):
    """How a :func:`weight_gradient` launch shares out its work: the tile, the boxes of
    positions (per dim, and in all, over the samples), the tiles of output and input channels,
    the groups of taps, the boxes a split and the splits (one program a split and tile)."""
    cfg: GradConfig
    boxes_per_dim: list
    boxes: int
    tiles_m: int
    tiles_n: int
    groups: int
    per_split: int
    splits: int


def grad_splits(batch: int, grid: Sequence[int], c_in: int, c_out: int, count: int,
                element_size: int, shifted: bool, cfg: Optional[GradConfig] = None) -> GradSplits:
    """The :class:`GradSplits` of a weight gradient of ``count`` taps summed over ``batch``
    samples of ``grid`` positions (three dims), ``c_in`` by ``c_out`` channels, on ``cfg``
    (:func:`grad_config`'s by default; ``shifted``: the float32 form's moved copies)."""
    cfg = cfg or grad_config(grid, c_in, c_out, element_size,
                             count if shifted or element_size < 4 else 1)
    if not 1 <= cfg.taps <= 4:
        raise ValueError(f"taps a program must be 1 to 4, got {cfg.taps}")
    boxes_per_dim = [-(-n // b) for n, b in zip(grid, cfg.box)]
    boxes = batch * math.prod(boxes_per_dim)
    tiles_m, tiles_n = -(-c_out // cfg.bm), -(-c_in // cfg.bn)
    groups = -(-count // cfg.taps)
    per_split, splits = split_boxes(boxes, groups * tiles_m * tiles_n, math.prod(cfg.box),
                                    count * c_out * c_in * 4)
    return GradSplits(cfg, boxes_per_dim, boxes, tiles_m, tiles_n, groups, per_split, splits)


# Whether a split of the weight gradient walks its boxes down H first rather than along W
# (_triton.weight_gradient's DOWN_H). Its groups of taps, one row of the kernel apart, run
# side by side, and read the same rows of the operand they read at their offsets (the
# output gradient, or the input where it moves): W first, one row of boxes apart
# (2d-1024: 32 steps of every program in flight, about 135 MB between the reads, more than
# L2 holds); H first, one step apart, so from L2. The float32 moved form is bound by
# memory: on 2d-1024 (H100, ncu) its kernel read 22.0 GB from memory W first and 12.8 GB
# H first, 7.69 -> 4.99 ms. Its weight gradient, copies included, 11.09 -> 8.10 ms NCHW
# and 12.67 -> 9.78 channels_last, 2d-512x1024 0.91x; the other stride-1 2-D cases
# 1.0-1.03x, bfloat16's rows form 0.98-1.01x. Training steps of the case table: 2d-1024
# 1.17x -> 1.33x NCHW, 0.73x -> 0.83x channels_last, 3d-stride2-dil2 7% faster;
# 2d-3x7-512 2.5% slower, 2d-stride5-dil2 3-5% (benches/wgrad_ab_probe.py; NOTES.md,
# session 62).
BOXES_DOWN_H = True

# Positions one program of the weight gradient sums on the tensor cores. Their float32
# accumulators do not round each addition to nearest: on positive data the sum drifts low
# with the number of products added, 6.8e-3 after 1M positions (bfloat16, 3d-32to64, H100)
# where cuBLAS's column route errs 3.9e-4 (benches/results/s29/E/error.log). The rest of
# the reduction runs over the splits' partials, in torch's sum, as long as they take at
# most PARTIALS bytes; beyond that, longer splits.
CHAIN = 1 << 15
PARTIALS = 1 << 28


def split_boxes(boxes: int, tiles: int, box: int, partial: int) -> tuple:
    """``(per_split, splits)``: the weight gradient's ``boxes`` boxes of ``box`` positions
    shared out among splits of consecutive boxes, one program a split and tile of ``tiles``,
    each split's partials ``partial`` bytes: enough splits for two waves of programs, and
    at most :data:`CHAIN` positions a split where the partials fit in :data:`PARTIALS`."""
    if not boxes:
        return 1, 0
    waves = -(-boxes // min(boxes, -(-2 * WAVE // tiles)))
    room = -(-boxes // max(1, PARTIALS // partial))
    per_split = min(waves, max(CHAIN // box, room, 1))
    return per_split, -(-boxes // per_split)


def _summed(partial: torch.Tensor, c_in: int, c_out: int, g: Geometry,
            dtype: torch.dtype) -> torch.Tensor:
    """The weight gradient ``(C_in, C_out, *kernel)`` from the splits' partials ``(splits, T,
    C_out, C_in)``, summed in order straight into its layout."""
    out = partial.new_empty(c_in, c_out, partial.shape[1])
    torch.sum(partial.permute(0, 3, 2, 1), 0, out=out)
    return out.view(c_in, c_out, *g.kernel_size).to(dtype)


def float32_weight_form(a: ConvTransposeArgs, interleaved: bool) -> str:
    """How the float32 weight gradient of :func:`backward` (taps not folded) reads its
    operands: ``"planar"``, from the copies moved along W of one operand
    (:func:`moves_input` picks which) and the other as it lies planar, or where it is
    channels_last from one copy of it (:func:`_planar`), so that both tiles reach the
    tensor cores from shared memory along positions; ``"rows"``, both channels_last
    operands' rows as they lie, no copies, their 32-bit tiles then through registers; or
    ``"mma"``, those rows as they lie by col2im.cu's tf32_weight_gradient
    (:func:`_cuda.rows_weight_gradient`), mma.sync's operands loaded from any shared address,
    so that every W tap reads one box of input positions at a shifted row.

    Planar calls take ``"planar"``. Channels_last 2-D ones take ``"mma"`` where its tiles
    fit (channels in multiples of 64, :func:`_cuda.rows_weight_gradient_form`); the others
    ``"planar"`` where the taps' products a position (taps x input x output channels) reach
    :data:`CHANNELS_LAST_PLANAR_PRODUCTS`."""
    if not interleaved:
        return "planar"
    g = a.geometry
    if (g.nd == 2 and a.groups == 1 and a.in_channels % _cuda.WGRAD_TILE == 0
            and a.out_channels % _cuda.WGRAD_TILE == 0
            and _cuda.rows_weight_gradient_form(g.kernel_size, g.dilation,
                                                a.out_channels) is not None):
        return "mma"
    products = math.prod(a.geometry.kernel_size) * a.in_channels * a.out_channels
    return "planar" if products >= CHANNELS_LAST_PLANAR_PRODUCTS else "rows"


def moved_operand(a: ConvTransposeArgs, element_size: int, interleaved: bool,
                  fold: int = 1) -> Optional[str]:
    """Which operand of :func:`backward`'s weight gradient is copied moved along W:
    ``"input"`` or ``"grad"`` (the output gradient) in float32's planar form
    (:func:`float32_weight_form`, :func:`moves_input`), None where no copy is moved (16-bit
    types, W's taps folded into the channels, float32's rows form). The one place that
    decides it, for :func:`backward` and for what counts its memory and explains it."""
    if element_size != 4 or fold > 1 or float32_weight_form(a, interleaved) != "planar":
        return None
    return "input" if moves_input(a, element_size) else "grad"


def takes_mma(a: ConvTransposeArgs, element_size: int, interleaved: bool, fold: int = 1) -> bool:
    """Whether :func:`backward`'s weight gradient takes float32_weight_form's ``"mma"`` form
    (float32, taps not folded): for backward and for what counts its memory and explains it."""
    return element_size == 4 and fold == 1 and float32_weight_form(a, interleaved) == "mma"


def backward_unavailable(a: ConvTransposeArgs, x: torch.Tensor, weight: torch.Tensor,
                         interleaved: bool = False, limit: Optional[int] = None) -> Optional[str]:
    """Why the backward of a call does not take the fused kernels, or None where it does:
    where the kernels can take its forward (:func:`unavailable`, the cost model aside) and
    the cost model sends it (:func:`backward_preferred`), at stride 1, with output channels
    in whole 16-byte rows too (the output gradient's rows are the kernels' input); in
    float32, 2-D calls only, and on channels_last tensors only where the output channels'
    rows take at most ``CHANNELS_LAST_FLOAT32_ROWS`` bytes (or one block's output tiles
    where the weight gradient takes :func:`takes_mma`'s form); where
    one sample's copies fit in ``limit`` bytes, if given (the workspace limit:
    :func:`backward` takes whole samples, the column routes split further)."""
    why = _unable(a, x, weight)
    if why is not None:
        return why
    if not backward_preferred(a, interleaved, x.element_size()):
        return ("the cost model: 3-D of few output channels, strided planar "
                f"2-D or strided 1-D, or at most {SMALL_OUTPUT:,} output elements (3-D: "
                f"{SMALL_COLUMNS:,} column elements)")
    if x.dtype == torch.float32 and a.geometry.nd not in FLOAT32_BACKWARD_DIMS:
        return f"float32 {a.geometry.nd}-D (the column routes' backward is faster there)"
    channels = CHANNELS_LAST_FLOAT32_ROWS // 4
    if interleaved and x.dtype == torch.float32 and takes_mma(a, 4, True):
        g = a.geometry   # (the output channels one block of the mma form holds)
        channels = max(channels, _cuda.WGRAD_TILE * _cuda.rows_weight_gradient_form(
            g.kernel_size, g.dilation, a.out_channels).out_tiles)
    if interleaved and x.dtype == torch.float32 and a.out_channels > channels:
        # The five stride-1 2-D cases' channels_last training steps against the column
        # routes' (H200, results/s58/B): 10-31% faster at 32 and 64 output channels, 37%
        # slower at 128 (2d-64to128, its weight gradient on rows). With the planar form
        # of float32_weight_form, 2d-64to128's fused step read 0.88x against torch
        # (results/s59/B), where its column routes' read 0.96x (results/s59/A); with the
        # mma form's two output tiles, 0.98x against 0.85x (H100, results/s70/A).
        return (f"channels_last float32 of {a.out_channels} output channels (over "
                f"{channels}: the column routes' backward is faster)")
    if any(s != 1 for s in a.geometry.stride):
        return "stride > 1"
    if a.out_channels * x.element_size() % 16:
        return f"{a.out_channels} output channels of {x.element_size()} bytes: rows not whole 16-byte units"
    if limit is not None and backward_samples(a, x.element_size(), limit, interleaved) == 0:
        one = backward_workspace(a, x.element_size(), 1, interleaved) * x.element_size()
        return (f"the workspace limit: one sample's copies take {one / 2**20:.0f} MB, over "
                f"{limit / 2**20:.0f} MB")
    return None


def reads_grad_rows(grad_out: torch.Tensor, x: torch.Tensor) -> bool:
    """Whether :func:`backward` reads the output gradient's rows as they lie, with no copy
    of it channels innermost: where ``x`` and ``grad_out`` are both channels_last."""
    return _channels_last_rows(x) is not None and grad_out.movedim(1, -1).is_contiguous()


def backward_workspace(a: ConvTransposeArgs, element_size: int,
                       samples: Optional[int] = None, interleaved: bool = False,
                       grad_rows: bool = False) -> int:
    """Elements :func:`backward` copies into beyond the gradients, for ``samples`` at a time
    (all by default): the output gradient channels innermost (none where ``grad_rows``:
    :func:`reads_grad_rows`), its rows folded (:func:`folded_rows`), in float32 its copies
    moved along W too, and the input's where its rows do not start on 16 bytes (or where
    :func:`moves_input`, the input's moved copies, and the output gradient's where its rows
    do not; or on ``interleaved`` (channels_last) tensors as :func:`float32_weight_form`
    reads them). (The bias's partial sums, at most a 64th of the first copy, are not
    counted.)"""
    n = a.batch if samples is None else samples
    granule = 16 // element_size
    grid, image = _padded(a.grid, 1), _padded(a.image, 1)
    rows = 0 if grad_rows else n * a.out_channels * math.prod(image)
    fold = folded_taps(a.geometry, a.out_channels, element_size)
    if fold > 1:   # the copy channels innermost, then its rows folded
        rows += n * a.out_channels * math.prod(image[:-1]) * fold * grid[-1]
    if element_size == 4:   # (no fold) the moved copies, and the other's pitched one
        moved = moved_operand(a, element_size, interleaved, fold)
        return rows if moved is None else \
            rows + n * _moved_copies(a, element_size, moved == "input", interleaved)
    pitched = n * a.in_channels * math.prod(grid[:-1]) * (-(-grid[-1] // granule) * granule)
    return rows + (pitched if grid[-1] % granule else 0)


def backward_samples(a: ConvTransposeArgs, element_size: int, limit: int,
                     interleaved: bool = False, grad_rows: bool = False) -> int:
    """Samples :func:`backward` takes at a time so that its copies fit in ``limit`` bytes:
    all of them where they fit (where it copies nothing too), 0 where one sample's do not."""
    one = backward_workspace(a, element_size, 1, interleaved, grad_rows)
    return min(a.batch, limit // (one * element_size)) if one else a.batch


def backward_bytes(a: ConvTransposeArgs, element_size: int, limit: Optional[int] = None,
                   interleaved: bool = False, grad_rows: bool = False) -> int:
    """The memory :func:`backward` allocates beyond the gradients it writes into, at most:
    a chunk's copies (:func:`backward_workspace`) and the bias's partial sums of them (a
    16th counted), the weight gradient's float32 partials of a chunk, its sum, its unfolded
    copy and its sum over the chunks, its cast and the weights' reorder."""
    step = max(1, a.batch if limit is None
               else backward_samples(a, element_size, limit, interleaved, grad_rows))
    fold = folded_taps(a.geometry, a.out_channels, element_size)
    moved = moved_operand(a, element_size, interleaved, fold)
    shifted = moved is not None
    grid = a.image if moved == "input" else a.grid   # the sum's
    taps = math.prod(a.geometry.kernel_size)
    if takes_mma(a, element_size, interleaved, fold):
        splits = _cuda.rows_weight_gradient_grid(step, a.image, a.in_channels, a.out_channels,
                                                 a.geometry)[0]
    else:
        splits = grad_splits(step, _padded(grid, 1), a.in_channels, fold * a.out_channels,
                             taps // fold, element_size, shifted).splits
    weight = a.in_channels * a.out_channels * taps
    copies = backward_workspace(a, element_size, step, interleaved, grad_rows) * element_size
    return copies + copies // 16 + 4 * weight * (max(splits, 1) + 3) + 2 * weight * element_size


def backward(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, a: ConvTransposeArgs,
             need: Sequence[bool], limit: Optional[int] = None,
             fold: Optional[int] = None, out: Optional[Sequence] = None) -> tuple:
    """The input, weight and bias gradients (as ``need`` asks, its third entry absent
    for no bias; None for the others) of the stride-1 transposed convolution ``a`` with
    planar ``x (N, C_in, *grid)`` and ``grad_out (N, C_out, *image)``, no columns in
    memory. The input gradient is the forward's kernel over the convolution's taps (``k d - p``) with each tap's weight transposed, on a copy
    of the output gradient channels innermost, rounded to TF32 for float32; the weight
    gradient :func:`weight_gradient`, on that copy in 16-bit types, on copies moved along W
    in float32 (its 32-bit tiles must lie along positions). Where the copies of all samples
    would pass ``limit`` bytes, chunks of whole samples (at least one) whose copies fit, the
    weight gradient summed over them in order. Where the output channels are few
    (:func:`folded_taps`; ``fold`` for tests), both gradients reduce over
    :func:`folded_rows` of that copy instead, W's taps folded into the channels. The bias
    gradient comes from the channels-innermost copy's sums (:func:`channels_innermost_summed`)
    where that copy is made, else it is None: the caller sums ``grad_out`` itself. ``out``:
    the gradients to write into where given (None for those not asked; the input's in any
    layout), as a CUDA graph of the call needs; the bias's only where it is summed here.

    A channels_last ``x`` (:func:`backward_unavailable` sends 16-bit ones, and float32 2-D
    ones of few output channels) is read as it lies, and so is a channels_last
    ``grad_out``: its rows take the copy's place (float32 rounded in the kernels'
    registers; the bias gradient the caller's). The input gradient then comes
    channels_last; float32's weight gradient reads those rows, or copies made from them,
    as :func:`float32_weight_form` says."""
    interleaved = _channels_last_rows(x) is not None
    x = x if interleaved else x.contiguous()
    grad_rows = grad_out.movedim(1, -1) if reads_grad_rows(grad_out, x) else None
    if grad_rows is None:
        grad_out = grad_out.contiguous()
    wide = x.dtype == torch.float32
    if fold is None:
        fold = folded_taps(a.geometry, a.out_channels, x.element_size())
    geometry = narrowed(a.geometry) if fold > 1 else a.geometry
    moved = moved_operand(a, x.element_size(), interleaved, fold)
    shifted, moved_input = moved is not None, moved == "input"
    step = max(1, a.batch if limit is None
               else backward_samples(a, x.element_size(), limit, interleaved,
                                     grad_rows is not None))
    grad_input = None if not need[0] else out[0] if out else torch.empty_like(x)
    weights = tap_weights(weight, transpose=True, fold=fold) if need[0] else None
    grad_weight = grad_bias = None
    mma = takes_mma(a, x.element_size(), interleaved, fold)
    copies = need[0] or not shifted and need[1]   # the output gradient channels innermost
    summed = copies and grad_rows is None and len(need) > 2 and need[2]
    with _on(x.device):
        for first in range(0, a.batch, step):
            g, xs = grad_out[first:first + step], x[first:first + step]
            rows = None
            if copies:
                if grad_rows is not None:
                    rows = grad_rows[first:first + step]
                else:
                    rows, sums = _channels_innermost(g, wide, summed)
                    if summed:
                        grad_bias = sums if grad_bias is None else grad_bias.add_(sums)
                if fold > 1:
                    rows = folded_rows(rows, a.geometry, x.shape[-1])
            if need[0]:
                implicit_gemm(rows, weights, None, convolution_taps(geometry),
                              grad_input[first:first + step].movedim(1, -1),
                              round_input=grad_rows is not None)
            if need[1] and mma:
                part = rows_weight_gradient(xs.permute(0, 2, 3, 1), rows, geometry)
            elif need[1]:
                part = weight_gradient(xs, g, geometry, shifted=True, dtype=torch.float32,
                                       moved_input=moved_input) \
                    if shifted else weight_gradient(xs, rows, geometry,
                                                    rounded=grad_rows is None,
                                                    dtype=torch.float32)
            if need[1]:
                part = _unfolded(part, a.geometry, fold) if fold > 1 else part
                grad_weight = part if grad_weight is None else grad_weight.add_(part)
    if need[1]:
        grad_weight = (weight.new_zeros(weight.shape) if grad_weight is None
                       else grad_weight.to(x.dtype))
    if summed:
        grad_bias = (grad_out.new_zeros(a.out_channels) if grad_bias is None
                     else grad_bias.to(grad_out.dtype))
    if out:
        grad_weight, grad_bias = (None if got is None else given.copy_(got)
                                  for given, got in zip(out[1:], (grad_weight, grad_bias)))
    return grad_input, grad_weight, grad_bias


def strided_backward(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                     a: ConvTransposeArgs, need: Sequence[bool]) -> tuple:
    """The input and weight gradients (as ``need`` asks; None for the others) of the strided
    transposed convolution ``a`` of one or two spatial dims, with ``x (N, C_in, *grid)``
    planar or channels_last and ``grad_out`` in any layout, no columns in memory: the
    stride-1 backward's two kernels over the output gradient's :func:`phase_planes`, read at
    :func:`plane_taps`. The input gradient is a strided convolution of the output gradient,
    so each of its taps reads one plane at stride 1; it comes in ``x``'s layout. float32
    runs in TF32 (the planes' tiles rounded in the kernels' registers, the weights by
    tap_weights). The bias gradient is the caller's (the planes' copy takes no sums).
    Not yet a route of the cost model: on the zoo's strided layers (DCGAN, the VAE decoder)
    a training step's kernels took up to 2.8x the column routes' on an H100 (within 3% of
    them at best), in the weight gradient's kernel, its partials' sum and the copy into the
    planes (benches/NOTES.md, session 43)."""
    grad_input = grad_weight = None
    with _on(x.device):
        planes = phase_planes(grad_out, a.geometry.stride)
        taps = plane_taps(a.geometry)
        if need[0]:
            grad_input = torch.empty_like(x)
            implicit_gemm(planes, tap_weights(weight, transpose=True), None, taps,
                          grad_input.movedim(1, -1))
        if need[1]:
            part = weight_gradient(x if _channels_last_rows(x) is not None else x.contiguous(),
                                   planes, a.geometry, dtype=torch.float32, planes=True)
            grad_weight = part.to(x.dtype)
    return grad_input, grad_weight


def forget_plans() -> None:
    """Forgets every launch plan kept so far (and with them their compiled kernels): for
    probes and tests that change what the plans were worked out from (a tile rule, a
    module constant such as CHAIN)."""
    for plan in (_gemm_plan, _grad_plan, _transpose_launch, _shifted_launch, _pitched_launch,
                 _planes_launch):
        plan.cache_clear()
