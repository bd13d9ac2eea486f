"""The Triton kernels: the fused route's (gemmconv/fused.py describes what they compute) and
the depthwise route's (gemmconv/depthwise.py), and how they launch (:class:`Launch`).

Imported only where a call takes one of those routes: Triton ships with torch's CUDA wheels,
and CI installs it to run the kernels on the CPU through ``TRITON_INTERPRET=1``.
"""
import os

import torch
import triton
import triton.language as tl
from triton.compiler import CompiledKernel


class Launch:
    """The launches of one kernel over one ``grid`` with the same arguments but for the
    tensors and descriptors, which come first (``sizes``: the integer arguments after them;
    ``constants``: the constexprs and launch options). A launch through Triton's JIT
    function binds and specializes every argument and looks up its cache key, which took
    20-25 us of the 30-50 a launch costs the H200's host (benches/results/s31/A). Here the
    first launch of each dtype and 16-byte alignment of the tensors (all Triton
    specializes on beyond the fixed arguments) goes through it and keeps the compiled
    kernel it returns; later ones launch that directly, on the current stream. The caller
    makes one Launch per plan and device (a compiled kernel is loaded on one), so that the
    descriptors' shapes, strides and blocks, which it makes from the plan, are fixed too.
    (Under Triton's interpreter every launch goes through the JIT function, which returns
    no compiled kernel.)"""

    def __init__(self, kernel, grid: tuple, sizes: tuple, **constants):
        self.kernel, self.grid, self.sizes, self.constants = kernel, grid, sizes, constants
        self.full_grid = (*grid, *(1,) * (3 - len(grid)))
        self.compiled: dict = {}

    def __call__(self, *tensors) -> None:
        """Launches the kernel on ``tensors`` (tensors and descriptors), on the current
        device and stream."""
        key = tuple((t.dtype, t.data_ptr() % 16 == 0) if isinstance(t, torch.Tensor)
                    else t.base.dtype for t in tensors)
        hit = self.compiled.get(key)
        if hit is not None:
            compiled, constexprs = hit
            compiled[self.full_grid](*tensors, *self.sizes, *constexprs)
            return
        compiled = self.kernel[self.grid](*tensors, *self.sizes, **self.constants)
        if isinstance(compiled, CompiledKernel):
            names = self.kernel.arg_names[len(tensors) + len(self.sizes):]
            self.compiled[key] = (compiled, tuple(self.constants[n] for n in names))


# Whether round_tf32 rounds with the GPU's own conversion, cvt.rna.tf32.f32: not under
# Triton's interpreter, which runs no PTX. On the H200 it took the channels_last float32
# forward of the stride-1 2-D cases 5-13% faster than the integer form (two operations an
# element), 2d-64to128 aside (benches/results/s31/E).
CVT_RNA = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") != "1")


@triton.jit
def round_tf32(x):
    # To nearest, ties away, as cuDNN's and cuBLAS's TF32 paths round: the tensor cores
    # would otherwise drop the low 13 mantissa bits, a bias of about 1e-3 relative.
    bits = x.to(tl.uint32, bitcast=True)
    if CVT_RNA:   # one instruction an element where the integer form takes two
        bits = tl.inline_asm_elementwise("cvt.rna.tf32.f32 $0, $1;", "=r,r", [bits],
                                         dtype=tl.uint32, is_pure=True, pack=1)
    else:
        bits = (bits + 0x1000) & 0xFFFFE000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _program_tile(tiles0, tiles1, tiles2, tiles_n):
    """This program's ``(rest, t0, t1, t2, n_block)``: output-channel blocks innermost, so
    that neighbouring programs read the same input boxes; ``rest`` the blocks of samples
    (and phases) left."""
    pid = tl.program_id(0)
    n_block = pid % tiles_n
    rest = pid // tiles_n
    t2 = rest % tiles2
    rest = rest // tiles2
    t1 = rest % tiles1
    rest = rest // tiles1
    return rest // tiles0, rest % tiles0, t1, t2, n_block


@triton.jit
def implicit_gemm(x_desc, w_desc, out_ptr, bias_ptr, offsets_ptr, index_ptr, count_ptr,
                  batch, image0, image1, image2, stride0, stride1, stride2,
                  out_sn, out_s0, out_s1, out_s2, out_sc, c_in, c_out, most_taps,
                  tiles_b, tiles0, tiles1, tiles2, tiles_n,
                  BB: tl.constexpr, B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr,
                  BK: tl.constexpr, BN: tl.constexpr, ROUND: tl.constexpr,
                  HAS_BIAS: tl.constexpr, PRECISION: tl.constexpr):
    """One tile of ``BB`` samples x ``(B0, B1, B2)`` phase positions by ``BN`` output
    channels. ``x_desc``: the input ``(N, D, H, W, C_in)``, boxes ``(BB, B0, B1, B2, BK)``;
    ``w_desc``: the taps' matrices ``(T, C_out, C_in)``, input channels innermost (the
    operand order the tensor cores take for 32-bit types), boxes ``(1, BN, BK)``."""
    BM: tl.constexpr = BB * B0 * B1 * B2
    rest, t0, t1, t2, n_block = _program_tile(tiles0, tiles1, tiles2, tiles_n)
    first = (rest % tiles_b) * BB
    phase = rest // tiles_b
    q0, q1, q2, co = t0 * B0, t1 * B1, t2 * B2, n_block * BN

    chunks = tl.cdiv(c_in, BK)
    # A reduction of a one-element block: a scalar the interpreter can also loop over.
    count = tl.sum(tl.load(count_ptr + phase + tl.arange(0, 1)), axis=0)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    # One flat loop over (tap, input-channel chunk), so the loads pipeline across taps.
    for i in range(count * chunks):
        t = i // chunks
        kc = (i - t * chunks) * BK
        entry = phase * most_taps + t
        o0 = tl.load(offsets_ptr + entry * 3)
        o1 = tl.load(offsets_ptr + entry * 3 + 1)
        o2 = tl.load(offsets_ptr + entry * 3 + 2)
        a = x_desc.load([first, q0 + o0, q1 + o1, q2 + o2, kc]).reshape(BM, BK)
        if ROUND:
            a = round_tf32(a)
        b = w_desc.load([tl.load(index_ptr + entry), co, kc]).reshape(BN, BK)
        acc = tl.dot(a, b.T, acc, input_precision=PRECISION)

    rows = tl.arange(0, BM)
    r2 = phase % stride2
    r1 = (phase // stride2) % stride1
    r0 = phase // (stride2 * stride1)
    y2 = (q2 + rows % B2) * stride2 + r2
    y1 = (q1 + (rows // B2) % B1) * stride1 + r1
    y0 = (q0 + (rows // (B2 * B1)) % B0) * stride0 + r0
    sample = first + rows // (B2 * B1 * B0)
    chans = co + tl.arange(0, BN)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + chans, mask=chans < c_out, other=0.0).to(tl.float32)[None, :]
    where = (sample.to(tl.int64) * out_sn + y0.to(tl.int64) * out_s0
             + y1.to(tl.int64) * out_s1 + y2 * out_s2)
    keep = (sample < batch) & (y0 < image0) & (y1 < image1) & (y2 < image2)
    tl.store(out_ptr + where[:, None] + (chans.to(tl.int64) * out_sc)[None, :],
             acc.to(out_ptr.dtype.element_ty), mask=keep[:, None] & (chans < c_out)[None, :])


@triton.jit
def _row_box(x_desc, start, BM: tl.constexpr, BK: tl.constexpr, ROUND: tl.constexpr):
    a = x_desc.load(start).reshape(BM, BK)
    if ROUND:
        a = round_tf32(a)
    return a


@triton.jit
def implicit_gemm_rows(x_desc, w_desc, out_ptr, bias_ptr, columns_ptr, index_ptr,
                       batch, image0, image1, image2, out_sn, out_s0, out_s1, out_s2, out_sc,
                       c_in, c_out, columns, top, spacing,
                       tiles0, tiles1, tiles2, tiles_n,
                       BB: tl.constexpr, B0: tl.constexpr, B2: tl.constexpr,
                       BK: tl.constexpr, BN: tl.constexpr, KH: tl.constexpr,
                       ROWS: tl.constexpr, ROUND: tl.constexpr, HAS_BIAS: tl.constexpr,
                       PRECISION: tl.constexpr):
    """:func:`implicit_gemm` at stride 1 for ``ROWS`` (2 or 3) output rows a program,
    ``spacing`` apart along H: tap ``h`` of a column of taps reads input row ``y + top - h
    spacing`` for output row ``y``, so row ``y + spacing``'s tap ``h + 1`` reads the box row
    ``y``'s tap ``h`` reads. Each box is loaded once for every row: ``KH + ROWS - 1`` boxes
    serve ``ROWS KH`` products, where one row a program loads a box a product; the copy
    into shared memory bounds the one-row kernel (benches/NOTES.md, session 39). ``x_desc``:
    the input ``(N, D, H, W, C_in)``, boxes ``(BB, B0, 1, B2, BK)``; ``columns``: per column
    of taps its offsets along D and W; ``index (columns, KH)`` its taps' weight matrices,
    ``h`` order."""
    BM: tl.constexpr = BB * B0 * B2
    rest, t0, t1, t2, n_block = _program_tile(tiles0, tiles1, tiles2, tiles_n)
    first = rest * BB
    # Rows y + r spacing (r < ROWS), y in the first of ROWS runs of spacing rows.
    y = (t1 // spacing) * ROWS * spacing + t1 % spacing
    q0, q2, co = t0 * B0, t2 * B2, n_block * BN

    chunks = tl.cdiv(c_in, BK)
    near = tl.zeros((BM, BN), dtype=tl.float32)   # row y
    mid = tl.zeros((BM, BN), dtype=tl.float32)    # row y + spacing, of three
    far = tl.zeros((BM, BN), dtype=tl.float32)    # the last row, y + (ROWS - 1) spacing
    for i in range(columns * chunks):
        column = i // chunks
        kc = (i - column * chunks) * BK
        o0 = tl.load(columns_ptr + column * 2)
        o2 = tl.load(columns_ptr + column * 2 + 1)
        # Box j (input row y + top - (j - ROWS + 1) spacing) meets row y's tap j - ROWS + 1,
        # the middle row's tap j - 1 and the last row's tap j, where those taps exist. Each
        # tap's matrix is loaded once, with the box the last row meets it in, after the
        # products of the older taps (w1: tap j - 1, w2: tap j - 2, on entry).
        for j in tl.static_range(KH + ROWS - 1):
            a = _row_box(x_desc, [first, q0 + o0, y + top - (j - ROWS + 1) * spacing,
                                  q2 + o2, kc], BM, BK, ROUND)
            if j >= 1:
                if ROWS == 3:
                    if j >= 2:
                        near = tl.dot(a, w2.T, near, input_precision=PRECISION)
                    if j <= KH:
                        mid = tl.dot(a, w1.T, mid, input_precision=PRECISION)
                else:
                    near = tl.dot(a, w1.T, near, input_precision=PRECISION)
                w2 = w1
            if j < KH:
                w1 = w_desc.load([tl.load(index_ptr + column * KH + j), co, kc]).reshape(BN, BK)
                far = tl.dot(a, w1.T, far, input_precision=PRECISION)

    rows = tl.arange(0, BM)
    y2 = q2 + rows % B2
    y0 = q0 + (rows // B2) % B0
    sample = first + rows // (B2 * B0)
    chans = co + tl.arange(0, BN)
    # Every row's bias first, then the stores: storing each row in turn with its bias (a
    # helper a row) made float32 planar outputs 1.45x slower (benches/rows_ab_probe.py,
    # results/s42/H: 2d-1024 3.06 against 4.49 ms).
    if HAS_BIAS:
        b = tl.load(bias_ptr + chans, mask=chans < c_out, other=0.0).to(tl.float32)[None, :]
        near += b
        if ROWS == 3:
            mid += b
        far += b
    y1 = y + tl.zeros_like(rows)   # a row's tensor: a scalar in a mask fails the interpreter
    where = (sample.to(tl.int64) * out_sn + y0.to(tl.int64) * out_s0
             + y1.to(tl.int64) * out_s1 + y2 * out_s2)
    keep = (sample < batch) & (y0 < image0) & (y2 < image2)
    cols = (chans.to(tl.int64) * out_sc)[None, :]
    inside = (chans < c_out)[None, :]
    tl.store(out_ptr + where[:, None] + cols, near.to(out_ptr.dtype.element_ty),
             mask=(keep & (y1 < image1))[:, None] & inside)
    if ROWS == 3:
        tl.store(out_ptr + (where + spacing * out_s1)[:, None] + cols,
                 mid.to(out_ptr.dtype.element_ty),
                 mask=(keep & (y1 + spacing < image1))[:, None] & inside)
    last = (ROWS - 1) * spacing
    tl.store(out_ptr + (where + last * out_s1)[:, None] + cols, far.to(out_ptr.dtype.element_ty),
             mask=(keep & (y1 + last < image1))[:, None] & inside)


@triton.jit
def channels_innermost(x_ptr, out_ptr, sums_ptr, channels, positions, tiles_p, tiles_c,
                       BC: tl.constexpr, BP: tl.constexpr, ROUND: tl.constexpr,
                       SUMS: tl.constexpr):
    """``out (N, P, C)`` = ``x (N, C, P)``, both contiguous, one ``BC`` x ``BP`` tile a
    program; rounded to TF32 where ``ROUND`` (the implicit GEMM then need not round its
    tiles). Triton stages the tile through shared memory, so both sides move in full rows.
    Where ``SUMS``, each program also stores its tile's sums over positions, in float32 and
    before rounding, as row ``n tiles_p + tile`` of ``sums (N tiles_p, C)``."""
    pid = tl.program_id(0)
    tp = pid % tiles_p
    rest = pid // tiles_p
    tc = rest % tiles_c
    sample = (rest // tiles_c).to(tl.int64)
    c = tc * BC + tl.arange(0, BC)
    p = tp * BP + tl.arange(0, BP)
    inside = (c < channels)[:, None] & (p < positions)[None, :]
    base = sample * channels * positions
    tile = tl.load(x_ptr + base + c.to(tl.int64)[:, None] * positions + p[None, :], mask=inside,
                   other=0.0)
    if SUMS:
        tl.store(sums_ptr + (sample * tiles_p + tp) * channels + c,
                 tl.sum(tile.to(tl.float32), axis=1), mask=c < channels)
    if ROUND:
        tile = round_tf32(tile)
    tl.store(out_ptr + base + p.to(tl.int64)[None, :] * channels + c[:, None], tile, mask=inside)


@triton.jit
def phase_planes(x_ptr, out_ptr, channels, image1, image2, stride1, stride2, extent1, extent2,
                 x_sn, x_sc, x_s1, x_s2, tiles_w, tiles_c, BW: tl.constexpr, BC: tl.constexpr):
    """``BW`` positions by ``BC`` channels of row ``a`` of phase plane ``(r1, r2)`` of sample
    ``n``: ``out[n, r1 stride2 + r2, a, b, c] = x[n, c, a stride1 + r1, b stride2 + r2]``,
    zero past the image. ``x (N, C, H, W)`` of any strides (planar or channels_last), ``out
    (N, stride1 stride2, extent1, extent2, C)`` contiguous; a program per tile, its row
    ``(n, r1, r2, a)`` outermost."""
    pid = tl.program_id(0)
    tc = pid % tiles_c
    rest = pid // tiles_c
    row = rest // tiles_w
    a = row % extent1
    plane = row // extent1
    r2 = plane % stride2
    r1 = plane // stride2 % stride1
    n = plane // (stride2 * stride1)
    b = (rest % tiles_w) * BW + tl.arange(0, BW)
    c = tc * BC + tl.arange(0, BC)
    y1 = a * stride1 + r1 + tl.zeros_like(b)   # (a scalar in a mask fails the interpreter)
    y2 = b * stride2 + r2
    kept = (b < extent2)[:, None] & (c < channels)[None, :]
    src = (n.to(tl.int64) * x_sn + y1.to(tl.int64)[:, None] * x_s1 + y2.to(tl.int64)[:, None] * x_s2
           + c.to(tl.int64)[None, :] * x_sc)
    tile = tl.load(x_ptr + src, mask=kept & ((y1 < image1) & (y2 < image2))[:, None], other=0.0)
    tl.store(out_ptr + (row.to(tl.int64) * extent2 + b[:, None]) * channels + c[None, :], tile,
             mask=kept)


@triton.jit
def pitched(x_ptr, out_ptr, rows, width, pitch, tiles_w, BR: tl.constexpr, BW: tl.constexpr):
    """``out[:, :width]`` = ``x (rows, width)``, contiguous, into rows ``pitch`` elements
    apart. The columns past ``width`` stay unwritten: a descriptor of ``width`` never reads
    them."""
    pid = tl.program_id(0)
    r = (pid // tiles_w) * BR + tl.arange(0, BR)
    c = (pid % tiles_w) * BW + tl.arange(0, BW)
    inside = (r < rows)[:, None] & (c < width)[None, :]
    tile = tl.load(x_ptr + r.to(tl.int64)[:, None] * width + c[None, :], mask=inside)
    tl.store(out_ptr + r.to(tl.int64)[:, None] * pitch + c[None, :], tile, mask=inside)


@triton.jit
def shifted_rows(x_ptr, out_ptr, shifts_ptr, copies, rows, channels, planes, width, pitch,
                 rows_pitch, tiles_w, BR: tl.constexpr, BW: tl.constexpr, ROUND: tl.constexpr,
                 ROWS_LAST: tl.constexpr):
    """``out (copies, N, planes, channels, pitch)``: copy ``i`` is ``x (N, channels, planes,
    width)``, contiguous (``rows`` rows of ``width``), its channels moved next to W and its
    rows moved ``shifts[i]`` elements (``out[i, n, p, c, w] = x[n, c, p, w - shifts[i]]``),
    zero where that falls outside ``x``: every element written, since a descriptor over the
    pitch reads them all. Rounded to TF32 where ``ROUND``. A program writes its tile of every
    copy, so the copies after the first read ``x`` from the caches. Where ``ROWS_LAST``,
    ``x`` is channels_last, ``(N, planes, width, channels)`` contiguous: a program's rows
    are then consecutive channels of one plane, so each position's read is one run of them."""
    pid = tl.program_id(0)
    r = (pid // tiles_w) * BR + tl.arange(0, BR)
    c = (pid % tiles_w) * BW + tl.arange(0, BW)
    if ROWS_LAST:   # r in the copies' order: (sample, plane, channel)
        where = r.to(tl.int64)[:, None] * pitch + c[None, :]
        start = (r // channels).to(tl.int64) * width * channels + r % channels
        step = channels
    else:           # r in x's order: (sample, channel, plane)
        sample = r // (channels * planes)
        channel = r // planes % channels
        plane = r % planes
        moved = ((sample * planes + plane).to(tl.int64) * channels + channel) * pitch
        where = moved[:, None] + c[None, :]
        start = r.to(tl.int64) * width
        step = 1
    keep = (r < rows)[:, None] & (c < pitch)[None, :]
    for i in range(copies):
        src = c - tl.load(shifts_ptr + i)
        inside = (r < rows)[:, None] & ((src >= 0) & (src < width))[None, :]
        tile = tl.load(x_ptr + start[:, None] + src[None, :] * step, mask=inside, other=0.0)
        if ROUND:
            tile = round_tf32(tile)
        tl.store(out_ptr + where, tile, mask=keep)
        out_ptr += rows_pitch   # the next copy (a pointer step: no 32-bit product to overflow)


@triton.jit
def _grad_program(tiles_m, tiles_n, groups):
    """``(split, group, row block, column block)`` of this weight-gradient program, column
    blocks innermost (neighbouring programs read the same output-gradient boxes)."""
    pid = tl.program_id(0)
    rest = pid // tiles_n
    return rest // tiles_m // groups, rest // tiles_m % groups, rest % tiles_m, pid % tiles_n


@triton.jit
def _box_at(j, boxes0, boxes1, boxes2, B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr,
            DOWN_H: tl.constexpr):
    """``(sample, q0, q1, q2)``: where the ``j``-th box of positions starts, W fastest, or
    where ``DOWN_H`` H fastest, then W (then D, then the sample)."""
    n, q0 = j // (boxes2 * boxes1 * boxes0), (j // (boxes2 * boxes1) % boxes0) * B0
    if DOWN_H:
        return n, q0, (j % boxes1) * B1, (j // boxes1 % boxes2) * B2
    return n, q0, (j // boxes2 % boxes1) * B1, (j % boxes2) * B2


@triton.jit
def _shared_tile(g_desc, x_desc, n, co, ci, q0, q1, q2, BK: tl.constexpr, BM: tl.constexpr,
                 BN: tl.constexpr, MOVED_X: tl.constexpr, X_LAST: tl.constexpr):
    """The box a step's taps share, as the tensor cores' B operand: the input's ``(BK, BN)``,
    or where ``MOVED_X`` the output gradient's ``(BK, BM)`` (weight_gradient)."""
    # One return: Triton checks every return's type, those of branches not taken too.
    if MOVED_X:
        tile = g_desc.load([n, co, q0, q1, q2]).reshape(BM, BK).T
    elif X_LAST:
        tile = x_desc.load([n, q0, q1, q2, ci]).reshape(BK, BN)
    else:
        tile = x_desc.load([n, ci, q0, q1, q2]).reshape(BN, BK).T
    return tile


@triton.jit
def _moved_box(g_desc, offsets_ptr, tap, batch, n, co, q0, q1, q2, B0: tl.constexpr,
               B1: tl.constexpr, B2: tl.constexpr, BM: tl.constexpr):
    """Tap ``tap``'s ``(BM, B0 B1 B2)`` tile (channels x positions) of the copies moved along
    W in ``g_desc`` (the output gradient's, or the input's), sample ``n``, channels from
    ``co``, positions from ``(q0, q1, q2)``. The copies hold channels next to W, so where
    the box is one row of W its tile is the box itself and stays in shared memory for the
    tensor cores (the compiler reads an A operand reshaped from a box whose leading dims are
    not the tile's through registers); otherwise the box's rows are reordered in
    registers."""
    o0 = tl.load(offsets_ptr + tap * 4)
    o1 = tl.load(offsets_ptr + tap * 4 + 1)
    o2 = tl.load(offsets_ptr + tap * 4 + 2)
    copy = tl.load(offsets_ptr + tap * 4 + 3)
    box = g_desc.load([copy * batch + n, q0 + o0, q1 + o1, co, q2 + o2])
    if B0 * B1 == 1:
        return box.reshape(BM, B2)
    return box.reshape(B0 * B1, BM, B2).permute(1, 0, 2).reshape(BM, B0 * B1 * B2)


@triton.jit
def _tap_dot(acc, shared, g_desc, x_desc, offsets_ptr, tap, batch, n, co, ci, q0, q1, q2,
             B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr, BM: tl.constexpr,
             BN: tl.constexpr, ROUND: tl.constexpr, PRECISION: tl.constexpr,
             MOVED: tl.constexpr, MOVED_X: tl.constexpr, SWAP: tl.constexpr):
    """``acc`` plus tap ``tap``'s product of its own tile, the tensor cores' A operand, and
    the ``shared`` one (weight_gradient): the output gradient's shifted box, through
    registers, or where ``MOVED`` a box of the moved copies (the input's where
    ``MOVED_X``; the two swap places where ``SWAP``)."""
    if MOVED_X:
        a = _moved_box(x_desc, offsets_ptr, tap, batch, n, ci, q0, q1, q2, B0, B1, B2, BN)
        if SWAP:
            a, shared = shared.T, a.T
    elif MOVED:
        a = _moved_box(g_desc, offsets_ptr, tap, batch, n, co, q0, q1, q2, B0, B1, B2, BM)
    else:
        o0 = tl.load(offsets_ptr + tap * 3)
        o1 = tl.load(offsets_ptr + tap * 3 + 1)
        o2 = tl.load(offsets_ptr + tap * 3 + 2)
        a = g_desc.load([n, q0 + o0, q1 + o1, q2 + o2, co]).reshape(B0 * B1 * B2, BM).T
        if ROUND:
            a = round_tf32(a)
    return tl.dot(a, shared, acc, input_precision=PRECISION)


@triton.jit
def _store_partial(out_ptr, acc, split, tap, taps, c_out, c_in, co, ci,
                   BM: tl.constexpr, BN: tl.constexpr):
    rows = co + tl.arange(0, BM)
    cols = ci + tl.arange(0, BN)
    where = ((split * taps + tap) * c_out + rows).to(tl.int64)[:, None] * c_in + cols[None, :]
    stored = tl.where(tap < taps, c_out, 0)   # no rows for a tap past the last
    tl.store(out_ptr + where, acc, mask=(rows < stored)[:, None] & (cols < c_in)[None, :])


@triton.jit
def weight_gradient(g_desc, x_desc, out_ptr, offsets_ptr, batch, c_in, c_out, taps,
                    boxes0, boxes1, boxes2, boxes, per_split, tiles_m, tiles_n, groups,
                    B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr, BM: tl.constexpr,
                    BN: tl.constexpr, TP: tl.constexpr, ROUND: tl.constexpr,
                    PRECISION: tl.constexpr, MOVED: tl.constexpr, MOVED_X: tl.constexpr,
                    X_LAST: tl.constexpr, SWAP: tl.constexpr, DOWN_H: tl.constexpr):
    """One split's share of the ``(BM, BN)`` tiles of ``TP`` taps (1 to 4) of ``sum over
    samples n and input positions q of g[n, q + offset, :]^T x[n, :, q]^T`` (the weight
    gradient, output channels by input channels): taps ``TP group`` to ``TP group + TP - 1``,
    whose products share one box, loaded once a step (with one tap a program, the L2
    traffic is the taps times both operands); taps past the last repeat it, unstored.
    ``out (splits, T, C_out, C_in)`` float32. Two forms:

    - ``g_desc``, the output gradient channels innermost ``(N, D', H', W', C_out)``, zero
      outside, in shifted boxes ``(1, B0, B1, B2, BM)``, its tile through registers (the
      16-bit form: its layout is then free); ``offsets_ptr (T, 3)`` the taps' offsets. The
      input ``x_desc`` planar ``(N, C_in, D, H, W)``, boxes ``(1, BN, B0, B1, B2)``, or where
      ``X_LAST`` channels innermost ``(N, D, H, W, C_in)``, boxes ``(1, B0, B1, B2, BN)``.
    - Where ``MOVED``, for 32-bit types, whose tiles must reach the tensor cores from shared
      memory along the reduction dim: the output gradient from its copies moved along W
      ``(S N, D', H', C_out, W'')``, zero outside, boxes ``(1, B0, B1, BM, B2)``. A box must
      start on 16 bytes along W, so a tap whose offset along W is not a multiple of 16
      bytes reads the copy moved by the rest (fused.shifted_taps); ``offsets_ptr (T, 4)``
      the offsets within that copy, and the copy. The input planar. Where ``MOVED_X`` too,
      the operands swap places: the sum runs over output positions ``p`` as ``g[p] x[p -
      offset]``, the output gradient planar ``(N, C_out, D', H', W')`` in boxes ``(1, BM,
      B0, B1, B2)`` shared by the taps, the input from its copies moved along W ``(S N, D,
      H, C_in, W'')``, boxes ``(1, B0, B1, BN, B2)`` (where they are the smaller:
      fused.moves_input). The moved tile stays the tensor cores' A operand, read from
      shared memory (the shared one as A went through registers: 69 registers a thread
      where this takes 64 at 64 x 64, one tap; sm_90, benches/ttgir_check.py), so the
      accumulators then hold the transposed product, turned before the stores. But where
      ``SWAP`` (tiles of fewer input than output channels): the input's tile as A would
      give the tensor cores an M of ``BN`` 32, too few for wgmma (mma.sync), so the output
      gradient's is A, through registers, for wgmma: 2d-3x7-padded's weight gradient 5.308
      -> 4.558 ms, its training step 8.395 -> 7.526 (H100, benches/results/s47/G; at 64 x
      64 the swap took 164 registers against 127, three taps). A channels_last operand
      comes to these forms as its moved copies, made from its rows, or as one planar copy
      (fused._planar): in 32-bit types the tensor cores take no tile channels innermost
      from shared memory.

    A split walks its boxes W first, or where ``DOWN_H`` H first (fused.BOXES_DOWN_H, the
    package's walk): then the groups of taps one row of the kernel apart, which run side by
    side, read the same rows of the operand they read at their offsets one step apart, so
    the rows come from L2 rather than from memory again."""
    BK: tl.constexpr = B0 * B1 * B2
    split, group, m_block, n_block = _grad_program(tiles_m, tiles_n, groups)
    tap0 = group * TP
    last = taps - 1
    co, ci = m_block * BM, n_block * BN
    ROWS: tl.constexpr = BN if MOVED_X and not SWAP else BM   # the accumulators' shape
    COLS: tl.constexpr = BM if MOVED_X and not SWAP else BN
    acc0 = tl.zeros((ROWS, COLS), dtype=tl.float32)
    acc1 = tl.zeros((ROWS, COLS), dtype=tl.float32)
    acc2 = tl.zeros((ROWS, COLS), dtype=tl.float32)
    acc3 = tl.zeros((ROWS, COLS), dtype=tl.float32)
    first = split * per_split
    for j in range(first, tl.minimum(first + per_split, boxes)):
        n, q0, q1, q2 = _box_at(j, boxes0, boxes1, boxes2, B0, B1, B2, DOWN_H)
        shared = _shared_tile(g_desc, x_desc, n, co, ci, q0, q1, q2, BK, BM, BN, MOVED_X, X_LAST)
        acc0 = _tap_dot(acc0, shared, g_desc, x_desc, offsets_ptr, tap0, batch, n, co, ci,
                        q0, q1, q2, B0, B1, B2, BM, BN, ROUND, PRECISION, MOVED, MOVED_X, SWAP)
        if TP > 1:
            acc1 = _tap_dot(acc1, shared, g_desc, x_desc, offsets_ptr, tl.minimum(tap0 + 1, last),
                            batch, n, co, ci, q0, q1, q2, B0, B1, B2, BM, BN, ROUND, PRECISION,
                            MOVED, MOVED_X, SWAP)
        if TP > 2:
            acc2 = _tap_dot(acc2, shared, g_desc, x_desc, offsets_ptr, tl.minimum(tap0 + 2, last),
                            batch, n, co, ci, q0, q1, q2, B0, B1, B2, BM, BN, ROUND, PRECISION,
                            MOVED, MOVED_X, SWAP)
        if TP > 3:
            acc3 = _tap_dot(acc3, shared, g_desc, x_desc, offsets_ptr, tl.minimum(tap0 + 3, last),
                            batch, n, co, ci, q0, q1, q2, B0, B1, B2, BM, BN, ROUND, PRECISION,
                            MOVED, MOVED_X, SWAP)
    if MOVED_X and not SWAP:
        acc0, acc1, acc2, acc3 = acc0.T, acc1.T, acc2.T, acc3.T
    if TP == 1:
        # Its own store, not _store_partial's: that one's mask for taps past the last took
        # 150 registers here where this takes 94 (bfloat16, 128 x 128; benches/ttgir_check.py).
        rows = co + tl.arange(0, BM)
        cols = ci + tl.arange(0, BN)
        where = ((split * taps + tap0) * c_out + rows).to(tl.int64)[:, None] * c_in + cols[None, :]
        tl.store(out_ptr + where, acc0, mask=(rows < c_out)[:, None] & (cols < c_in)[None, :])
    else:
        _store_partial(out_ptr, acc0, split, tap0, taps, c_out, c_in, co, ci, BM, BN)
        _store_partial(out_ptr, acc1, split, tap0 + 1, taps, c_out, c_in, co, ci, BM, BN)
        if TP > 2:
            _store_partial(out_ptr, acc2, split, tap0 + 2, taps, c_out, c_in, co, ci, BM, BN)
        if TP > 3:
            _store_partial(out_ptr, acc3, split, tap0 + 3, taps, c_out, c_in, co, ci, BM, BN)


@triton.jit
def _reach_of(reach_ptr, stride0, stride1, r0, r1, r2):
    """Per dim, the (first tap, count, offset of the first) of residue ``r`` of its stride,
    from depthwise.reach's table: each dim's residues' entries, dims back to back."""
    e0 = reach_ptr + 3 * r0
    e1 = reach_ptr + 3 * (stride0 + r1)
    e2 = reach_ptr + 3 * (stride0 + stride1 + r2)
    return (tl.load(e0), tl.load(e0 + 1), tl.load(e0 + 2), tl.load(e1), tl.load(e1 + 1),
            tl.load(e1 + 2), tl.load(e2), tl.load(e2 + 1), tl.load(e2 + 2))


@triton.jit
def depthwise_transposed(x_ptr, w_ptr, bias_ptr, out_ptr, reach_ptr,
                         channels, multiplier, taps, kernel1, kernel2,
                         grid0, grid1, grid2, image0, image1, image2,
                         stride0, stride1, stride2, step0, step1, step2,
                         delta0, delta1, delta2, most0, most1, most2,
                         x_sn, x_sc, x_s0, x_s1, x_s2, o_sn, o_sc, o_s0, o_s1, o_s2,
                         column_blocks, row_blocks, channel_blocks,
                         BR: tl.constexpr, BW: tl.constexpr, BC: tl.constexpr,
                         HAS_BIAS: tl.constexpr):
    """A block of ``BR`` output rows (positions along D and H, flattened) by ``BW``
    positions along W by ``BC`` output channels, of one sample, of the transposed
    convolution with one input channel a group (gemmconv/depthwise.py): each output ``c`` at
    ``y = s q + r`` sums, over the taps that reach its phase ``r``, the weight ``w[c, tap]``
    times its group's input channel ``c // multiplier`` at ``q + offset``. ``reach_ptr``
    holds per dim and residue (first tap, count, offset of the first); the next tap is
    ``step`` further and reads ``delta`` positions back. Loops run to the most taps any
    phase has along a dim (``most``), the outputs of phases with fewer masked. Index
    arithmetic runs on the rows', columns' and channels' vectors, not per output: runtime
    divisions per element cost more than the loads (the first version's planar calls ran
    at a third of the channels_last ones' rate)."""
    pid = tl.program_id(0)
    w_block = pid % column_blocks
    rest = pid // column_blocks
    r_block = rest % row_blocks
    rest = rest // row_blocks
    c = (rest % channel_blocks) * BC + tl.arange(0, BC)
    n = (rest // channel_blocks).to(tl.int64)
    row = r_block * BR + tl.arange(0, BR)
    y2 = w_block * BW + tl.arange(0, BW)
    y1, y0 = row % image1, row // image1
    row_ok, col_ok, c_ok = row < image0 * image1, y2 < image2, c < channels
    r0, r1, r2 = y0 % stride0, y1 % stride1, y2 % stride2
    q0, q1, q2 = y0 // stride0, y1 // stride1, y2 // stride2
    first0, count0, offset0, first1, count1, offset1, first2, count2, offset2 = \
        _reach_of(reach_ptr, stride0, stride1, r0, r1, r2)
    x_plane = x_ptr + n * x_sn + (c // multiplier).to(tl.int64)[None, None, :] * x_sc
    w_row = w_ptr + c[None, None, :] * taps
    acc = tl.zeros((BR, BW, BC), dtype=tl.float32)
    for m0 in range(0, most0):
        i0 = q0 + offset0 - m0 * delta0
        ok0 = row_ok & (m0 < count0) & (i0 >= 0) & (i0 < grid0)
        for m1 in range(0, most1):
            i1 = q1 + offset1 - m1 * delta1
            ok1 = ok0 & (m1 < count1) & (i1 >= 0) & (i1 < grid1)
            at1 = i0.to(tl.int64) * x_s0 + i1.to(tl.int64) * x_s1
            tap1 = ((first0 + m0 * step0) * kernel1 + first1 + m1 * step1) * kernel2
            for m2 in range(0, most2):
                i2 = q2 + offset2 - m2 * delta2
                ok2 = col_ok & (m2 < count2) & (i2 >= 0) & (i2 < grid2)
                ok = ok1[:, None, None] & ok2[None, :, None] & c_ok[None, None, :]
                at = at1[:, None, None] + (i2.to(tl.int64) * x_s2)[None, :, None]
                tap = tap1[:, None, None] + (first2 + m2 * step2)[None, :, None]
                xv = tl.load(x_plane + at, mask=ok, other=0.0)
                wv = tl.load(w_row + tap, mask=ok, other=0.0)
                acc += xv.to(tl.float32) * wv.to(tl.float32)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + c, mask=c_ok, other=0.0).to(tl.float32)[None, None, :]
    at = (y0.to(tl.int64) * o_s0 + y1.to(tl.int64) * o_s1)[:, None, None] + \
        (y2.to(tl.int64) * o_s2)[None, :, None]
    out = out_ptr + n * o_sn + c.to(tl.int64)[None, None, :] * o_sc + at
    ok = row_ok[:, None, None] & col_ok[None, :, None] & c_ok[None, None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def grouped_transposed(x_ptr, w_ptr, bias_ptr, out_ptr, reach_ptr,
                       taps, kernel1, kernel2,
                       grid0, grid1, grid2, image0, image1, image2,
                       stride0, stride1, stride2, step0, step1, step2, delta0, delta1, delta2,
                       x_sn, x_sc, x_s0, x_s1, x_s2, o_sn, o_sc, o_s0, o_s1, o_s2,
                       column_blocks, row_blocks, channel_blocks, groups,
                       J: tl.constexpr, M: tl.constexpr, MP: tl.constexpr, VEC: tl.constexpr,
                       BR: tl.constexpr, BW: tl.constexpr, BC: tl.constexpr,
                       HAS_BIAS: tl.constexpr):
    """A block of ``BR`` output rows by ``BW`` positions along W of one stride phase, by
    ``BC`` of one group's ``M`` output channels, of one sample, of a transposed convolution
    with ``J`` input channels a group (gemmconv/depthwise.py): the output ``(g, m)`` at ``y
    = s q + r`` sums, over the taps that reach phase ``r`` and the group's channels ``j``,
    ``w[g J + j, m, tap]`` times that input channel at ``q + offset``. ``reach_ptr`` as
    :func:`depthwise_transposed`'s; ``w_ptr`` the weight ``(C_in, taps, MP)``, its M output
    channels zero-padded to MP (depthwise.grouped_weight), so that a tap's are one unmasked
    vector. J is unrolled, so that a tap's loads of every channel are in flight together.
    ``VEC`` input channels a load, a divisor of J (1 planar; where channels are innermost,
    up to 16 bytes of a position's channels as one vector load, split in registers by
    :func:`_lanes`). M is a constant so that the compiler sees whole vectors of a group's
    output channels (their mask and alignment) and stores them as such where channels are
    innermost.

    One phase a program, so every tap it visits reaches all of its outputs: each input
    element loaded serves the block's BC channels, and each weight its BR x BW positions
    (the depthwise kernel loads both per output, its taps differing by phase). The phases
    of a block are neighbouring programs: they write the interleaved outputs of the same
    rows and read the same input rows. Innermost of all, a block's groups and channel
    blocks: where channels are innermost they write the same output sectors. Launched
    apart (groups outermost), channels_last bfloat16 2d-strided-grouped took 1.25 ms and
    3d-stride2-grouped 2.09; launched together, 0.75 and 1.00 (H100, results/s65/R, R2)."""
    n, r_block, w_block, phase, channel_tile = _program_tile(
        row_blocks, column_blocks, stride0 * stride1 * stride2, groups * channel_blocks)
    group, c_block = channel_tile // channel_blocks, channel_tile % channel_blocks
    m = c_block * BC + tl.arange(0, BC)
    n = n.to(tl.int64)
    r2 = phase % stride2
    r1 = (phase // stride2) % stride1
    r0 = phase // (stride2 * stride1)
    # The phase's outputs along each dim, y = s q + r for q below its extent.
    extent0 = (image0 - r0 + stride0 - 1) // stride0
    extent1 = (image1 - r1 + stride1 - 1) // stride1
    extent2 = (image2 - r2 + stride2 - 1) // stride2
    row = r_block * BR + tl.arange(0, BR)
    q2 = w_block * BW + tl.arange(0, BW)
    q1, q0 = row % tl.maximum(extent1, 1), row // tl.maximum(extent1, 1)
    row_ok, col_ok, m_ok = row < extent0 * extent1, q2 < extent2, m < M
    first0, count0, offset0, first1, count1, offset1, first2, count2, offset2 = \
        _reach_of(reach_ptr, stride0, stride1, r0, r1, r2)
    x_group = x_ptr + n * x_sn + (group * J).to(tl.int64) * x_sc
    w_group = w_ptr + (group * J) * (taps * MP) + m
    lane = tl.arange(0, VEC)
    acc = tl.zeros((BR, BW, BC), dtype=tl.float32)
    for m0 in range(0, count0):
        i0 = q0 + offset0 - m0 * delta0
        ok0 = row_ok & (i0 >= 0) & (i0 < grid0)
        for m1 in range(0, count1):
            i1 = q1 + offset1 - m1 * delta1
            ok1 = ok0 & (i1 >= 0) & (i1 < grid1)
            at1 = i0.to(tl.int64) * x_s0 + i1.to(tl.int64) * x_s1
            tap1 = ((first0 + m0 * step0) * kernel1 + first1 + m1 * step1) * kernel2
            for m2 in range(0, count2):
                i2 = q2 + offset2 - m2 * delta2
                # (BR, BW, VEC), not (BR, BW): loaded in the accumulator's layout, where a
                # 2-D load would be converted to it, a channel at a time.
                ok = ok1[:, None, None] & (col_ok & (i2 >= 0) & (i2 < grid2))[None, :, None]
                x_tap = x_group + at1[:, None, None] + (i2.to(tl.int64) * x_s2)[None, :, None]
                w_tap = w_group + (tap1 + first2 + m2 * step2) * MP
                for j0 in tl.static_range(0, J, VEC):
                    xs = _lanes(tl.load(x_tap + ((j0 + lane) * x_sc)[None, None, :], mask=ok,
                                        other=0.0), BR, BW, VEC)
                    for i in tl.static_range(VEC):
                        wv = tl.load(w_tap + (j0 + i) * (taps * MP))
                        acc += xs[i].to(tl.float32) * wv.to(tl.float32)[None, None, :]
    c = group * M + m
    if HAS_BIAS:
        acc += tl.load(bias_ptr + c, mask=m_ok, other=0.0).to(tl.float32)[None, None, :]
    y0, y1, y2 = q0 * stride0 + r0, q1 * stride1 + r1, q2 * stride2 + r2
    at = (y0.to(tl.int64) * o_s0 + y1.to(tl.int64) * o_s1)[:, None, None] + \
        (y2.to(tl.int64) * o_s2)[None, :, None]
    out = out_ptr + n * o_sn + c.to(tl.int64)[None, None, :] * o_sc + at
    ok = row_ok[:, None, None] & col_ok[None, :, None] & m_ok[None, None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _lanes(t, BR: tl.constexpr, BW: tl.constexpr, N: tl.constexpr):
    """The ``N`` channels of ``t (BR, BW, N)`` (a power of two), in order, each ``(BR, BW,
    1)``: halved in registers, where a thread holds a position's N channels as its vector
    load left them."""
    if N == 1:
        return (t,)
    else:
        low, high = tl.split(tl.permute(tl.reshape(t, (BR, BW, 2, N // 2)), (0, 1, 3, 2)))
        return _lanes(low, BR, BW, N // 2) + _lanes(high, BR, BW, N // 2)


@triton.jit
def _depthwise_pairs(w_ptr, t0, j, j_ok, inputs, multiplier, taps, kernel1, kernel2,
                     dil0, dil1, dil2, g_sc, g_s0, g_s1, g_s2, BT: tl.constexpr):
    """The (m, k) pairs ``t0 + [0, BT)`` of channels ``j``, for
    :func:`depthwise_transposed_backward`: their index and mask ``(BT,)``, weights ``(BT,
    BC)`` (float32), output-gradient channels' offsets ``(BT, BC)``, and per dim how many
    rows each tap reaches past a position's first output, with the offset that makes."""
    pairs = multiplier * taps
    t = t0 + tl.arange(0, BT)
    t_ok = t < pairs
    k = t % taps
    k0, k1, k2 = k // (kernel1 * kernel2), (k // kernel2) % kernel1, k % kernel2
    w = tl.load(w_ptr + j[None, :] * pairs + t[:, None], mask=t_ok[:, None] & j_ok[None, :],
                other=0.0).to(tl.float32)
    g_channel = ((j // inputs)[None, :] * multiplier + (t // taps)[:, None]).to(tl.int64) * g_sc
    reach0, reach1, reach2 = k0 * dil0, k1 * dil1, k2 * dil2
    g_tap = reach0.to(tl.int64) * g_s0 + reach1.to(tl.int64) * g_s1 + reach2.to(tl.int64) * g_s2
    return t, t_ok, w, g_channel, reach0, reach1, reach2, g_tap


@triton.jit
def depthwise_transposed_backward(x_ptr, g_ptr, w_ptr, gx_ptr, partial_ptr,
                                  channels, inputs, multiplier, taps, kernel1, kernel2,
                                  grid0, grid1, grid2, image0, image1, image2,
                                  stride0, stride1, stride2, pad0, pad1, pad2,
                                  dil0, dil1, dil2, positions,
                                  g_sn, g_sc, g_s0, g_s1, g_s2, x_sn, x_sc, x_s0, x_s1, x_s2,
                                  i_sn, i_sc, i_s0, i_s1, i_s2, channel_blocks, each, chunks,
                                  BP: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr,
                                  NEED_INPUT: tl.constexpr, NEED_WEIGHT: tl.constexpr,
                                  PAIR_LOOP: tl.constexpr):
    """The gradients of the transposed convolution with ``inputs`` input channels a group
    (one: depthwise; gemmconv/depthwise.py), over ``each`` blocks of ``BP`` input positions
    (samples and grid flattened) by ``BC`` input channels: each block loads, for ``BT`` of
    its channels' (m, k) pairs ``t = m taps + k``, the output gradient of channel ``(j //
    inputs) M + m`` (input channel j's group's m-th) at ``i s - p + k d``; sums them over
    the pairs times the weight into the input gradient, and accumulates them times the
    input into the program's partial of the weight gradient (``partial_ptr``: float32
    ``(splits, C_in, M taps)``, which the caller sums over its first dim). The
    partial is summed over positions once, after the loop: a sum across the block's threads
    each block cost more than its loads.

    Where a call has more pairs than a program holds, they come in ``chunks`` of ``BT``:
    the input gradient's programs loop over them (``PAIR_LOOP``), the weight gradient's take
    one chunk each (programs: channel blocks, then chunks, then splits)."""
    pid = tl.program_id(0)
    j = (pid % channel_blocks) * BC + tl.arange(0, BC)
    j_ok = j < channels
    if PAIR_LOOP:
        split = pid // channel_blocks
        loops = chunks
    else:
        split = pid // channel_blocks // chunks
        loops = 1
        t, t_ok, w, g_channel, reach0, reach1, reach2, g_tap = _depthwise_pairs(
            w_ptr, (pid // channel_blocks % chunks) * BT, j, j_ok, inputs, multiplier, taps,
            kernel1, kernel2, dil0, dil1, dil2, g_sc, g_s0, g_s1, g_s2, BT)
    products = tl.zeros((BT, BP, BC), dtype=tl.float32)
    for b in range(0, each):
        p = (split * each + b) * BP + tl.arange(0, BP)
        p_ok = p < positions
        i2 = p % grid2
        rest = p // grid2
        i1 = rest % grid1
        rest = rest // grid1
        i0 = rest % grid0
        n = (rest // grid0).to(tl.int64)
        # (BP,): the output a position's tap 0 lands on, per dim
        o0, o1, o2 = i0 * stride0 - pad0, i1 * stride1 - pad1, i2 * stride2 - pad2
        g_position = n * g_sn + o0.to(tl.int64) * g_s0 + o1.to(tl.int64) * g_s1 + \
            o2.to(tl.int64) * g_s2
        pj_ok = p_ok[:, None] & j_ok[None, :]
        if NEED_WEIGHT:
            at_x = (n * x_sn + i0.to(tl.int64) * x_s0 + i1.to(tl.int64) * x_s1 +
                    i2.to(tl.int64) * x_s2)[:, None] + j.to(tl.int64)[None, :] * x_sc
            xv = tl.load(x_ptr + at_x, mask=pj_ok, other=0.0).to(tl.float32)
        gx = tl.zeros((BP, BC), dtype=tl.float32)
        for c in range(0, loops):
            if PAIR_LOOP:
                t, t_ok, w, g_channel, reach0, reach1, reach2, g_tap = _depthwise_pairs(
                    w_ptr, c * BT, j, j_ok, inputs, multiplier, taps, kernel1, kernel2,
                    dil0, dil1, dil2, g_sc, g_s0, g_s1, g_s2, BT)
            inside = t_ok[:, None] & p_ok[None, :] & \
                (o0[None, :] + reach0[:, None] >= 0) & (o0[None, :] + reach0[:, None] < image0) & \
                (o1[None, :] + reach1[:, None] >= 0) & (o1[None, :] + reach1[:, None] < image1) & \
                (o2[None, :] + reach2[:, None] >= 0) & (o2[None, :] + reach2[:, None] < image2)
            at = (g_position[None, :] + g_tap[:, None])[:, :, None] + g_channel[:, None, :]
            g = tl.load(g_ptr + at, mask=inside[:, :, None] & j_ok[None, None, :],
                        other=0.0).to(tl.float32)                   # (BT, BP, BC)
            if NEED_INPUT:
                gx += tl.sum(g * w[:, None, :], axis=0)              # (BP, BC)
            if NEED_WEIGHT:
                products += g * xv[None, :, :]
        if NEED_INPUT:
            at_i = (n * i_sn + i0.to(tl.int64) * i_s0 + i1.to(tl.int64) * i_s1 +
                    i2.to(tl.int64) * i_s2)[:, None] + j.to(tl.int64)[None, :] * i_sc
            tl.store(gx_ptr + at_i, gx.to(gx_ptr.dtype.element_ty), mask=pj_ok)
    if NEED_WEIGHT:
        at_w = split.to(tl.int64) * channels * multiplier * taps + j[None, :] * multiplier * taps + \
            t[:, None]
        tl.store(partial_ptr + at_w, tl.sum(products, axis=1), mask=t_ok[:, None] & j_ok[None, :])
