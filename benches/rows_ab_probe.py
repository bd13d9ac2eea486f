"""A/B of the two-row kernel's text on the stride-1 2-D cases (session 42): float32 planar
outputs ran 1.45x slower after ``implicit_gemm_rows`` took ROWS (results/s42, D and E) while
channels_last ones did not. Times, in one process, the kernel as it was before (``before``,
session 41's text) and as it is, each back to back (do_bench), and the output's largest
difference from the first's. H also timed two variants of commit 374ff9d's kernel (each row
stored through a helper that added its bias, with and without the third row's
accumulator) and the fix, every row's bias added before the stores: NOTES, change 128.

    PYTHONPATH=. python benches/rows_ab_probe.py [CASES] [--dtype bfloat16] [--planar]
"""
import argparse
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from gemmconv import _triton, cases, fused
from gemmconv.shapes import Geometry
from gemmconv._triton import _program_tile, _row_box  # noqa: F401 (the kernels')

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cl_tile_probe import bench  # noqa: E402


@triton.jit
def before(x_desc, w_desc, out_ptr, bias_ptr, columns_ptr, index_ptr,
                       batch, image0, image1, image2, out_sn, out_s0, out_s1, out_s2, out_sc,
                       c_in, c_out, columns, top, spacing,
                       tiles0, tiles1, tiles2, tiles_n,
                       BB: tl.constexpr, B0: tl.constexpr, B2: tl.constexpr,
                       BK: tl.constexpr, BN: tl.constexpr, KH: tl.constexpr,
                       ROUND: tl.constexpr, HAS_BIAS: tl.constexpr, PRECISION: tl.constexpr,
           ROWS: tl.constexpr = 2):
    """:func:`implicit_gemm` at stride 1 for two output rows a program, ``spacing`` apart
    along H: tap ``h`` of a column of taps reads input row ``y + top - h spacing`` for
    output row ``y``, so row ``y + spacing``'s tap ``h + 1`` reads the box row ``y``'s tap
    ``h`` reads. Each box is loaded once for both rows: ``KH + 1`` boxes serve ``2 KH``
    products, where one row a program loads a box a product; the copy into shared memory
    bounds the one-row kernel (benches/NOTES.md, session 39). ``x_desc``: the input ``(N,
    D, H, W, C_in)``, boxes ``(BB, B0, 1, B2, BK)``; ``columns``: per column of taps its
    offsets along D and W; ``index (columns, KH)`` its taps' weight matrices, ``h`` order."""
    BM: tl.constexpr = BB * B0 * B2
    rest, t0, t1, t2, n_block = _program_tile(tiles0, tiles1, tiles2, tiles_n)
    first = rest * BB
    # Rows y and y + spacing, y in the first half of a run of 2 spacing rows.
    y = (t1 // spacing) * 2 * spacing + t1 % spacing
    q0, q2, co = t0 * B0, t2 * B2, n_block * BN

    chunks = tl.cdiv(c_in, BK)
    near = tl.zeros((BM, BN), dtype=tl.float32)   # row y
    far = tl.zeros((BM, BN), dtype=tl.float32)    # row y + spacing
    for i in range(columns * chunks):
        column = i // chunks
        kc = (i - column * chunks) * BK
        o0 = tl.load(columns_ptr + column * 2)
        o2 = tl.load(columns_ptr + column * 2 + 1)
        # Box j (input row y + top - (j - 1) spacing) meets row y's tap j - 1 and row
        # y + spacing's tap j; each tap's matrix is loaded once, for the far row first.
        a = _row_box(x_desc, [first, q0 + o0, y + top + spacing, q2 + o2, kc], BM, BK, ROUND)
        w = w_desc.load([tl.load(index_ptr + column * KH), co, kc]).reshape(BN, BK)
        far = tl.dot(a, w.T, far, input_precision=PRECISION)
        for j in tl.static_range(1, KH + 1):
            a = _row_box(x_desc, [first, q0 + o0, y + top - (j - 1) * spacing, q2 + o2, kc],
                         BM, BK, ROUND)
            near = tl.dot(a, w.T, near, input_precision=PRECISION)
            if j < KH:
                w = w_desc.load([tl.load(index_ptr + column * KH + j), co, kc]).reshape(BN, BK)
                far = tl.dot(a, w.T, far, input_precision=PRECISION)

    rows = tl.arange(0, BM)
    y2 = q2 + rows % B2
    y0 = q0 + (rows // B2) % B0
    sample = first + rows // (B2 * B0)
    chans = co + tl.arange(0, BN)
    if HAS_BIAS:
        b = tl.load(bias_ptr + chans, mask=chans < c_out, other=0.0).to(tl.float32)[None, :]
        near += b
        far += b
    y1 = y + tl.zeros_like(rows)   # a row's tensor: a scalar in a mask fails the interpreter
    where = (sample.to(tl.int64) * out_sn + y0.to(tl.int64) * out_s0
             + y1.to(tl.int64) * out_s1 + y2 * out_s2)
    keep = (sample < batch) & (y0 < image0) & (y2 < image2)
    cols = (chans.to(tl.int64) * out_sc)[None, :]
    inside = (chans < c_out)[None, :]
    tl.store(out_ptr + where[:, None] + cols, near.to(out_ptr.dtype.element_ty),
             mask=(keep & (y1 < image1))[:, None] & inside)
    tl.store(out_ptr + (where + spacing * out_s1)[:, None] + cols,
             far.to(out_ptr.dtype.element_ty), mask=(keep & (y1 + spacing < image1))[:, None] & inside)



def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="?", default="2d-1024,2d-3x7-512,2d-64to128")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--planar", action="store_true")
    opts = parser.parse_args()
    dtype, planar = getattr(torch, opts.dtype), opts.planar
    kernels = {"before": before, "now": _triton.implicit_gemm_rows}
    print(torch.cuda.get_device_name(), dtype, "planar" if planar else "channels_last", flush=True)
    for case in (c for c in cases.BENCH if c.name in opts.cases.split(",")):
        x, w, b = case.tensors(dtype, "cuda")
        if not planar:
            x = x.contiguous(memory_format=torch.channels_last)
        ref = F.conv_transpose2d(x, w, b, **case.kwargs)
        rows = fused.channels_innermost(x, dtype == torch.float32) if planar else x.movedim(1, -1)
        weights = fused.tap_weights(w)
        taps = fused.transposed_taps(Geometry(case.kernel_size, case.stride, case.padding,
                                                    case.dilation))
        out = torch.empty_like(ref)
        line, want = [], None
        for label, kernel in kernels.items():
            _triton.implicit_gemm_rows = kernel
            fused._gemm_plan.cache_clear()
            run = lambda: fused.implicit_gemm(rows, weights, b, taps, out.movedim(1, -1),
                                              round_input=not planar)
            out.fill_(float("nan"))
            run()
            want = out.clone() if want is None else want
            diff = ((out - want).abs().max() / want.abs().max()).item()
            line.append(f"{label} {bench(run):.3f}{'' if diff == 0 else f' DIFF {diff:.1e}'}")
        _triton.implicit_gemm_rows = kernels["now"]
        fused._gemm_plan.cache_clear()
        print(f"{case.name} | " + " | ".join(line), flush=True)


if __name__ == "__main__":
    main()
