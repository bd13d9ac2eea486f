"""The fused route (gemmconv/fused.py): its phase decomposition in plain PyTorch against torch
in float64, and its Triton kernel run on the CPU through Triton's interpreter, on the shared
case table. tests/test_cuda_fused.py runs the kernel on the GPU."""
import dataclasses
import functools
import math
import os

import pytest
import torch

import gemmconv
from gemmconv import cases, fused, ops
from gemmconv.shapes import Geometry, conv_args, conv_transpose_args
from helpers import (case_args, generator, interpreted, reference, rel_error,
                     weight_gradient_inputs)
from test_reuse import CONV, _conv_kwargs, _layer_tensors

# The decomposition handles one group (fused.unavailable sends grouped calls elsewhere).
TABLE = [c for c in cases.random_cases(60, seed=5) + cases.EDGE + cases.LARGE_KERNELS
         + [c.scaled(256 if c.nd < 3 else 64) for c in cases.BENCH] if c.groups == 1]


def _geometry(case) -> Geometry:
    return Geometry(case.kernel_size, case.stride, case.padding, case.dilation)


def _batched(case, x):
    return x.unsqueeze(0) if case.unbatched else x


@pytest.mark.parametrize("case", TABLE, ids=lambda c: c.name)
def test_phases_and_taps_give_the_transposed_convolution(case):
    x, w, b = case.tensors(generator=generator(case.name, "phases"))
    ref = _batched(case, reference(case, x, w, b))
    out = fused.reference(_batched(case, x).movedim(1, -1), fused.tap_weights(w), b,
                          fused.transposed_taps(_geometry(case)), case.output_size)
    assert rel_error(out.movedim(-1, 1), ref) < 1e-12


@pytest.mark.parametrize("case", [c for c in TABLE if set(c.stride) == {1}], ids=lambda c: c.name)
def test_stride_one_input_gradient_is_a_convolution_of_the_same_form(case):
    x, w, b = case.tensors(generator=generator(case.name, "convolution"))
    x = _batched(case, x).requires_grad_()
    out = reference(case, x, w, b)
    grad_out = torch.randn(out.shape, generator=generator(case.name, "g"), dtype=torch.float64)
    ref, = torch.autograd.grad(out, x, grad_out)
    got = fused.reference(grad_out.movedim(1, -1), fused.tap_weights(w, transpose=True), None,
                          fused.convolution_taps(_geometry(case)), case.size)
    assert rel_error(got.movedim(-1, 1), ref) < 1e-12


STRIDED = [c for c in TABLE if set(c.stride) != {1} and c.nd < 3]


def _phase_planes(grad: torch.Tensor, stride) -> torch.Tensor:
    """fused.phase_planes in plain PyTorch: ``(N, s_h s_w, ceil(H / s_h), ceil(W / s_w), C)``,
    plane ``r_h s_w + r_w`` holding ``grad[:, :, r_h::s_h, r_w::s_w]``, zero past the image."""
    n, c, *image = grad.shape
    image, stride = fused._padded(image, 1)[1:], fused._padded(stride, 1)[1:]
    grad = grad.reshape(n, c, *image)
    out = grad.new_zeros(n, *stride, *(-(-i // s) for i, s in zip(image, stride)), c)
    for r1 in range(stride[0]):
        for r2 in range(stride[1]):
            plane = grad[:, :, r1::stride[0], r2::stride[1]].permute(0, 2, 3, 1)
            out[:, r1, r2, :plane.shape[1], :plane.shape[2]] = plane
    return out.flatten(1, 2)


@pytest.mark.parametrize("case", STRIDED, ids=lambda c: c.name)
def test_strided_input_gradient_is_a_stride_one_convolution_over_phase_planes(case):
    """A strided call's input gradient: each tap reads one of the output gradient's phase
    planes at stride 1, at the tap's offset within it."""
    x, w, b = case.tensors(generator=generator(case.name, "planes"))
    x = _batched(case, x).requires_grad_()
    out = reference(case, x, w, b)
    grad_out = torch.randn(out.shape, generator=generator(case.name, "gp"), dtype=torch.float64)
    ref, = torch.autograd.grad(out, x, grad_out)
    got = fused.reference(_phase_planes(grad_out, case.stride),
                          fused.tap_weights(w, transpose=True), None,
                          fused.plane_taps(_geometry(case)), case.size)
    assert rel_error(got.reshape(*x.shape[:1], *case.size, x.shape[1]).movedim(-1, 1), ref) < 1e-12


@pytest.mark.parametrize("image,stride", [((8, 6), (2, 3)), ((7, 5), (2, 2)), ((9,), (4,))])
def test_phase_planes_hold_each_residue_once_and_zeros_past_the_image(image, stride):
    """The plain-PyTorch planes the CPU tests use: every element of the output gradient once,
    in the plane of its residues, zeros beyond."""
    grad = torch.randn(3, 5, *image, generator=generator(str(image), "planes"))
    planes = _phase_planes(grad, stride)
    (s1, s2), rows = fused._padded(stride, 1)[1:], grad.reshape(3, 5, *fused._padded(image, 1)[1:])
    extent = [-(-i // s) for i, s in zip(rows.shape[2:], (s1, s2))]
    assert planes.shape == (3, s1 * s2, *extent, 5)
    for r1 in range(s1):
        for r2 in range(s2):
            part = rows[:, :, r1::s1, r2::s2].permute(0, 2, 3, 1)
            plane = planes[:, r1 * s2 + r2]
            assert torch.equal(plane[:, :part.shape[1], :part.shape[2]], part)
            assert not plane[:, part.shape[1]:].any() and not plane[:, :, part.shape[2]:].any()
    assert planes.count_nonzero() == grad.count_nonzero()


@interpreted
@pytest.mark.parametrize("layout", ["planar", "channels_last", "strided"])
@pytest.mark.parametrize("shape,stride", [((3, 5, 8, 6), (2, 3)), ((2, 70, 7, 5), (2, 2)),
                                          ((3, 5, 9), (4,)), ((1, 3, 130, 3), (1, 2))])
def test_phase_planes_kernel_copies_every_layout(shape, stride, layout):
    """fused.phase_planes (one Triton pass) equals the plain-PyTorch planes: tiles of
    positions and channels past both ends, planar, channels_last and sliced inputs."""
    grad = torch.randn(*shape[:-1], 2 * shape[-1], generator=generator(str(shape), layout))
    grad = grad[..., ::2] if layout == "strided" else grad[..., :shape[-1]].contiguous()
    if layout == "channels_last":
        if len(shape) == 3:
            pytest.skip("no channels_last layout for 1-D tensors")
        grad = grad.contiguous(memory_format=torch.channels_last)
    planes = fused.phase_planes(grad, stride)
    assert planes.is_contiguous() and torch.equal(planes, _phase_planes(grad, stride))


def test_every_tap_reaches_exactly_one_phase_once():
    g = Geometry((5, 4), (3, 2), (2, 1), (2, 1))
    taps = fused.transposed_taps(g)
    assert len(taps.count) == 6 and sum(taps.count) == 20   # 3 x 2 phases share 5 x 4 taps
    reached = sorted(taps.index[p][t] for p, n in enumerate(taps.count) for t in range(n))
    assert reached == list(range(20))
    assert taps.count == (4, 4, 4, 4, 2, 2)   # ceil or floor of k / s per dim: (2, 2, 1) x (2, 2)


def _aligned(case):
    """The case with input channels filling whole 16-byte rows of float32 (the copy
    engine's granule), as fused.unavailable requires."""
    return dataclasses.replace(case, in_channels=-(-case.in_channels // 4) * 4)


def _unrounded(w, transpose=False):
    """The kernel's weights in full float32 (tap_weights rounds float32 to TF32)."""
    return fused.tap_weights(w.double(), transpose).float()


@interpreted
@pytest.mark.parametrize("case", TABLE, ids=lambda c: c.name)
def test_kernel_matches_float64_through_the_interpreter(case):
    case = _aligned(case)
    x, w, b = (None if t is None else t.float()
               for t in case.tensors(generator=generator(case.name, "interpreted")))
    ref = _batched(case, reference(case, x, w, b))
    x = _batched(case, x)
    planar = case.nd == 2 and len(case.name) % 2   # half the 2-D cases write planes (NCHW)
    out = torch.full(ref.shape, float("nan")) if planar else \
        torch.full((ref.shape[0], *ref.shape[2:], ref.shape[1]), float("nan")).movedim(-1, 1)
    fused.implicit_gemm(x.movedim(1, -1).contiguous(), _unrounded(w), b,
                        fused.transposed_taps(_geometry(case)), out.movedim(1, -1), "ieee")
    assert rel_error(out, ref) < 1e-5


@interpreted
def test_kernel_reads_a_strided_bias():
    """A bias of stride 2 (a slice), which the kernel reads as a contiguous copy: it steps
    the bias by one."""
    case = _aligned(cases._c("bias", 2, 8, 6, (3, 3), (5, 6), padding=1))
    x, w, b = (t.float() for t in case.tensors(generator=generator(case.name, "strided-bias")))
    spaced = torch.randn(2 * case.out_channels)
    spaced[::2] = b
    ref = reference(case, x, w, b)
    out = torch.full(ref.shape, float("nan"))
    fused.implicit_gemm(x.movedim(1, -1).contiguous(), _unrounded(w), spaced[::2],
                        fused.transposed_taps(_geometry(case)), out.movedim(1, -1), "ieee")
    assert rel_error(out, ref) < 1e-5


@interpreted
@pytest.mark.parametrize("case", [c for c in TABLE if set(c.stride) == {1}][::3], ids=lambda c: c.name)
def test_kernel_computes_the_stride_one_input_gradient(case):
    case = dataclasses.replace(case, out_channels=-(-case.out_channels // 4) * 4)
    x, w, b = case.tensors(generator=generator(case.name, "interpreted-grad"))
    x = _batched(case, x).requires_grad_()
    out = reference(case, x, w, b)
    grad_out = torch.randn(out.shape, generator=generator(case.name, "g"), dtype=torch.float64)
    ref, = torch.autograd.grad(out, x, grad_out)
    got = torch.full((x.shape[0], *case.size, case.in_channels), float("nan"))
    fused.implicit_gemm(grad_out.float().movedim(1, -1).contiguous(),
                        _unrounded(w, transpose=True), None,
                        fused.convolution_taps(_geometry(case)), got, "ieee")
    assert rel_error(got.movedim(-1, 1), ref) < 1e-5


# The zoo's convolutions of one group at stride 1 (their channels in whole 16-byte rows),
# but the wide one: the interpreter's time.
FUSED_CONVOLUTIONS = [c for c in cases.CONV_LAYERS[:-1] if set(c.stride) == {1} and c.groups == 1]


@interpreted
@pytest.mark.parametrize("layout", ["planar", "channels_last"])
@pytest.mark.parametrize("case", FUSED_CONVOLUTIONS, ids=lambda c: c.name)
def test_fused_convolution_matches_float64_through_the_interpreter(case, layout):
    """fused.convolution (a convolution's forward on the input-gradient kernel, bias added),
    as ops._ConvFusedReplay runs it, from a planar input (copied channels innermost,
    rounded to TF32 on the way) or a channels_last one (rounded in the kernel), into NaN:
    torch's float64 convolution within TF32's error. convolution_unavailable takes it on a
    CUDA device alone (meta tensors stand in for one), and says why not for a strided call
    or misaligned channels."""
    if layout == "channels_last" and case.nd == 1:
        pytest.skip("no channels_last layout for 1-D tensors")
    x, w, b = _layer_tensors(case, "fused-convolution", layout)
    kw = _conv_kwargs(case)
    ref = CONV[case.nd][0](x, w, b, **kw)
    xf, wf, bf = (None if t is None else t.float() for t in (x, w, b))   # (x's layout kept)
    a = conv_args(f"conv{case.nd}d", case.nd, xf, wf, bf, **kw)
    assert fused.convolution_unavailable(a, xf, wf) == "tensors not on a CUDA device"
    meta = lambda t: t.to("meta")
    assert fused.convolution_unavailable(a, meta(xf), meta(wf)) is None
    out = torch.full(ref.shape, float("nan"))
    assert ops._ConvFusedReplay(layout == "channels_last").run(xf, wf, bf, a, out) is out
    assert rel_error(out, ref) < 5e-3
    strided = conv_args(f"conv{case.nd}d", case.nd, xf, wf, bf, **{**kw, "stride": 2})
    assert fused.convolution_unavailable(strided, meta(xf), meta(wf)) == "stride > 1"
    odd, narrow_w = meta(xf[:, :-1]), meta(wf[:, :-1])
    narrow = conv_args(f"conv{case.nd}d", case.nd, odd, narrow_w, None, **kw)
    assert "input channels" in fused.convolution_unavailable(narrow, odd, narrow_w)


STRIDE_ONE = [c for c in TABLE if set(c.stride) == {1}]


@pytest.mark.parametrize("case", STRIDE_ONE, ids=lambda c: c.name)
def test_row_columns_hold_every_tap_once_in_evenly_spaced_rows(case):
    g = _geometry(case)
    for taps in (fused.transposed_taps(g), fused.convolution_taps(g)):
        found = fused.row_columns(taps)
        if case.nd == 1 or case.kernel_size[-2] == 1:
            assert found is None    # no taps along H to share
            continue
        top, spacing, columns, index = found
        kh, d = case.kernel_size[-2], case.dilation[-2]
        assert spacing == d and len(columns) * kh == taps.count[0]
        assert sorted(i for col in index for i in col) == list(range(taps.count[0]))
        offsets = dict(zip(taps.index[0], taps.offsets[0]))
        for (o0, o2), col in zip(columns, index):
            assert [offsets[i] for i in col] == [(o0, top - h * d, o2) for h in range(kh)]


def test_row_columns_refuse_strided_phases():
    assert fused.row_columns(fused.transposed_taps(Geometry((3, 3), (2, 1), (1, 1), (1, 1)))) is None


ROW_CASES = [c for c in STRIDE_ONE if c.nd > 1 and c.kernel_size[-2] > 1][::3]


@interpreted
@pytest.mark.parametrize("case,rows", [(c, 2 + i % 2) for i, c in enumerate(ROW_CASES)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_row_kernel_matches_float64_through_the_interpreter(case, rows):
    """The kernel of two or three rows a program (Config.rows) on the transposed
    convolution and on its input gradient (a convolution's taps), into NaN (where the rows
    are not a multiple of ``rows`` in number, the last programs' last rows fall outside the
    output)."""
    case = dataclasses.replace(_aligned(case), out_channels=-(-case.out_channels // 4) * 4)
    x, w, b = case.tensors(generator=generator(case.name, "two rows"))
    x = _batched(case, x).requires_grad_()
    ref = reference(case, x, w, b)
    grad_out = torch.randn(ref.shape, generator=generator(case.name, "g"), dtype=torch.float64)
    ref_grad, = torch.autograd.grad(ref, x, grad_out)
    cfg = lambda c_out: fused.Config((1, 1, 1, 16), 8, max(16, fused._pow2(c_out)), 4, 2, rows)
    out = torch.full((ref.shape[0], *ref.shape[2:], ref.shape[1]), float("nan"))
    fused.implicit_gemm(x.detach().float().movedim(1, -1).contiguous(), _unrounded(w),
                        b.float(), fused.transposed_taps(_geometry(case)), out, "ieee",
                        cfg=cfg(case.out_channels))
    assert rel_error(out.movedim(-1, 1), ref) < 1e-5
    got = torch.full((x.shape[0], *case.size, case.in_channels), float("nan"))
    fused.implicit_gemm(grad_out.float().movedim(1, -1).contiguous(),
                        _unrounded(w, transpose=True), None, fused.convolution_taps(_geometry(case)),
                        got, "ieee", cfg=cfg(case.in_channels))
    assert rel_error(got.movedim(-1, 1), ref_grad) < 1e-5


def test_row_tiles_where_the_boxes_fit_twice_and_fill_two_waves():
    one = fused.config(8, (1, 514, 518), 64, 64, 1, 4, True)
    two = fused.row_tile(one, 8, (1, 514, 518), 64, 3, 4, False)
    assert two.rows == 2 and two.box[2] == 1 and math.prod(two.box) == 128 and two.warps == 8
    assert (two.bk, two.bn) == (one.bk, one.bn)
    half = fused.config(8, (1, 514, 518), 64, 64, 1, 2, False)
    assert fused.row_tile(half, 8, (1, 514, 518), 64, 3, 2, False).warps == 8   # bfloat16
    assert fused.row_tile(half, 8, (1, 514, 518), 64, 3, 2, True).warps == 4    # planar
    assert fused.row_tile(one, 1, (1, 8, 64), 64, 3, 4, False) is None          # few programs
    wide = fused.config(8, (1, 514, 518), 64, 128, 1, 4, True)
    assert wide.bn == 128 and fused.row_tile(wide, 8, (1, 514, 518), 128, 3, 4, False).bn == 64
    assert fused.row_tile(wide, 8, (1, 514, 518), 128, 3, 4, True).bn == 64
    assert fused.row_tile(wide, 8, (1, 514, 518), 128, 3, 2, False).bn == 64
    assert fused.row_tile(wide, 8, (1, 514, 518), 128, 3, 2, True).bn == 128    # 16-bit planar
    assert fused.row_tile(wide, 8, (1, 514, 518), 128, 4, 4, False) is not None
    assert fused.row_tile(wide, 8, (1, 514, 518), 128, 5, 4, False) is None     # shared memory
    planar = fused.row_tile(one, 8, (1, 514, 518), 64, 3, 4, True)
    assert planar.box[-1] >= 32                                                  # 128-byte runs
    narrow = fused.config(8, (1, 514, 518), 32, 32, 1, 4, True)
    assert narrow.bn == 32 and one.bn == 64 and half.bn == 64
    three = fused.row_tile(narrow, 8, (1, 514, 518), 32, 3, 4, False)
    assert (three.rows, three.warps, two.rows) == (3, 8, 2)                      # 32 channels
    assert fused.row_tile(narrow, 8, (1, 514, 518), 32, 3, 2, True)[3:] == (4, 2, 3)
    assert fused.row_tile(narrow, 8, (1, 514, 518), 32, 3, 4, False, rows=2).rows == 2
    assert fused.row_tile(narrow, 1, (1, 600, 128), 32, 3, 4, False).rows == 2  # waves
    assert fused.row_tile(narrow, 8, (1, 514, 518), 32, 4, 4, False).rows == 2  # 4 taps high
    # Three float32 planar rows whose box would be one run of 128 along W: 64 on 4 warps.
    for n, extent in ((8, (1, 512, 1024)), (16, (1, 256, 512))):
        same = fused.config(n, extent, 32, 32, 1, 4, False, True)
        assert fused.row_tile(same, n, extent, 32, 3, 4, True)[:4] == ((1, 1, 1, 64), 32, 32, 4)
        assert fused.row_tile(same, n, extent, 32, 3, 4, False)[::3] == ((1, 1, 1, 128), 8)
        assert fused.row_tile(same, n, extent, 32, 3, 2, True)[::3] == ((1, 1, 1, 128), 4)
    odd = fused.config(8, (1, 512, 1030), 32, 32, 1, 4, False, True)
    assert fused.row_tile(odd, 8, (1, 512, 1030), 32, 3, 4, True)[::3] == ((2, 1, 1, 64), 8)
    # ... and two rows of 64 channels, on 3 stages.
    same = fused.config(8, (1, 512, 1024), 64, 64, 1, 4, False, True)
    two = fused.row_tile(same, 8, (1, 512, 1024), 64, 3, 4, True)
    assert (two.box, two.bn, two.warps, two.stages, two.rows) == ((1, 1, 1, 64), 64, 4, 3, 2)
    assert fused.row_tile(same, 8, (1, 512, 1024), 64, 3, 4, False)[::3] == ((1, 1, 1, 128), 8)
    odd = fused.config(8, (1, 512, 1030), 64, 64, 1, 4, False, True)
    assert fused.row_tile(odd, 8, (1, 512, 1030), 64, 3, 4, True)[::3] == ((2, 1, 1, 64), 8)
    # 16-bit tiles of 64 channels whose box would be one run of 128 along W: three rows,
    # either layout, with the warps of two; two samples of 64 keep two rows.
    for planar, warps in ((True, 4), (False, 8)):
        for n, extent in ((8, (1, 512, 1024)), (16, (1, 256, 512))):
            half = fused.config(n, extent, 64, 64, 1, 2, False, planar)
            three = fused.row_tile(half, n, extent, 64, 3, 2, planar)
            assert (three.box, three.bn, three.warps, three.rows) == ((1, 1, 1, 128), 64, warps, 3)
            assert fused.row_tile(half, n, extent, 64, 4, 2, planar).rows == 2   # 4 taps high
        odd = fused.config(8, (1, 512, 1030), 64, 64, 1, 2, False, planar)
        assert fused.row_tile(odd, 8, (1, 512, 1030), 64, 3, 2, planar).rows == 2
    # 16-bit planar boxes take runs of 64 bytes along W where they pad it less: a W of 260
    # in 9 runs of 32 (288) rather than 5 of 64 (320); float32's keep 128 bytes (32).
    for n, extent, box in ((64, (1, 130, 260), (4, 1, 1, 32)), (8, (1, 514, 518), (4, 1, 1, 32)),
                           (8, (1, 514, 1026), (2, 1, 1, 64))):
        half = fused.config(n, extent, 64, 64, 1, 2, False, True)
        assert fused.row_tile(half, n, extent, 64, 3, 2, True).box == box
    one = fused.config(64, (1, 130, 260), 64, 128, 1, 4, False, True)
    assert fused.row_tile(one, 64, (1, 130, 260), 128, 3, 4, True).box == (4, 1, 1, 32)
    assert fused.row_tile(one, 64, (1, 130, 260), 128, 3, 4, False).box[-1] < 32


@interpreted
def test_kernel_rounds_float32_tiles_to_tf32():
    case = _aligned(cases.BENCH[0].scaled(256))
    x, w, b = (t.float() for t in case.tensors(generator=generator("tf32")))
    rounded = lambda t: fused.round_tf32(t).double()
    ref = reference(case, rounded(x), rounded(w), b)       # the products the tensor cores form
    out = torch.empty(ref.shape[0], *ref.shape[2:], ref.shape[1])
    fused.implicit_gemm(x.movedim(1, -1).contiguous(), fused.tap_weights(w), b,
                        fused.transposed_taps(_geometry(case)), out, "tf32")
    assert rel_error(out.movedim(-1, 1), ref) < 1e-6
    assert rel_error(out.movedim(-1, 1), reference(case, x, w, b)) > 1e-5   # it did round


@interpreted
@pytest.mark.parametrize("shape,dtype,tf32", [
    ((3, 40, 7, 37), torch.float32, False), ((3, 40, 7, 37), torch.float32, True),
    ((2, 8, 300), torch.float32, True), ((1, 136, 5, 3, 4), torch.bfloat16, False),
    ((2, 16, 129), torch.float16, True)])
def test_channels_innermost_copies_planar_tensors_and_rounds_on_the_way(shape, dtype, tf32):
    # Shapes whose channels and positions leave partial tiles (tiles are 16 to 64 channels).
    x = (torch.randn(shape, generator=generator(str(shape), "rows")) * 100).to(dtype)
    got = fused.channels_innermost(x, tf32)
    want = x.movedim(1, -1)
    if tf32 and dtype == torch.float32:
        want = fused.round_tf32(want)
        assert not torch.equal(want, x.movedim(1, -1))
    assert got.is_contiguous() and got.shape == want.shape and torch.equal(got, want)


@interpreted
@pytest.mark.parametrize("shape,dtype,tf32", [
    ((3, 40, 7, 37), torch.float32, True), ((2, 8, 300), torch.float32, False),
    ((1, 136, 5, 3, 4), torch.bfloat16, False), ((2, 16, 129), torch.float16, False),
    ((0, 8, 5, 6), torch.float32, True)])
def test_channels_innermost_summed_sums_channels_before_rounding(shape, dtype, tf32):
    """The copy as channels_innermost makes it, and the sums over samples and positions of
    ``x`` as it was (unrounded), in float32: a bias's gradient (partial tiles included)."""
    x = (torch.randn(shape, generator=generator(str(shape), "sums")) * 100).to(dtype)
    got, sums = fused.channels_innermost_summed(x, tf32)
    assert torch.equal(got, fused.channels_innermost(x, tf32))
    rows = x.double().transpose(0, 1).reshape(shape[1], -1)
    want, scale = rows.sum(1), rows.abs().sum(1).clamp(min=1)
    assert sums.dtype == torch.float32 and sums.shape == (shape[1],)
    assert ((sums.double() - want).abs() / scale).max() < 1e-6
    if tf32 and shape[0]:   # the rounded copy's sums are further off: the sums came first
        rounded = got.double().reshape(-1, shape[1]).sum(0)
        assert ((rounded - want).abs() / scale).max() > 1e-5


@interpreted
@pytest.mark.parametrize("layout", ["planar", "channels_last"])
def test_forward_rounds_float32_inputs_to_tf32_in_either_layout(layout):
    case = _aligned(cases.BENCH[0].scaled(256))
    x, w, b = (t.float() for t in case.tensors(generator=generator("tf32", layout)))
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    rounded = lambda t: fused.round_tf32(t).double()
    ref = reference(case, rounded(x), rounded(w), b)
    out = torch.full(ref.shape, float("nan"))
    a = case_args(case, x, w, b)
    fused.forward(x, w, b, a, out)
    assert rel_error(out, ref) < 1e-6
    assert rel_error(out, reference(case, x, w, b)) > 1e-5


@interpreted
@pytest.mark.parametrize("layout", ["planar", "channels_last"])
def test_fused_replay_hands_every_call_to_graphs(monkeypatch, layout):
    """_FusedReplay.graphed hands every call to graphs.launch, whatever its size, with the
    memory fused.forward takes: where no graph is kept the call runs its kernels into the
    output it returns, right, in the call's layout; where one is (a call of 2^28 output
    elements, which launched directly before session 41), the graph's launch is the call."""
    from gemmconv import _cuda, graphs
    asked = []
    kept = [False]
    monkeypatch.setattr(graphs, "launch",
                        lambda owner, addresses, run, nbytes, *args: asked.append((owner, nbytes()))
                        or kept[0])
    monkeypatch.setattr(_cuda, "raw_stream", lambda device: 0)
    last = layout == "channels_last"
    in_layout = torch.channels_last if last else torch.contiguous_format
    rounded = lambda t: fused.round_tf32(t).double()
    case = _aligned(cases.BENCH[0].scaled(256))
    x, w, b = (t.float() for t in case.tensors(generator=generator("replay", layout)))
    x = x.contiguous(memory_format=in_layout)
    a = case_args(case, x, w, b)
    replay = ops._FusedReplay(last)
    out = replay.graphed(x, w, b, a)
    assert asked == [(replay, fused.forward_bytes(x, w, case.out_channels))]
    assert out.is_contiguous(memory_format=in_layout) and out.shape == a.output_shape
    assert rel_error(out, reference(case, rounded(x), rounded(w), b)) < 1e-6

    asked.clear()
    kept[0] = True
    large = dataclasses.replace(case, size=(64, 64), stride=(64, 64), kernel_size=(64, 64),
                                in_channels=16, out_channels=16, batch=1)
    x, w, b = (t.float() for t in large.tensors(generator=generator("replay", layout, "large")))
    x = x.contiguous(memory_format=in_layout)
    a = case_args(large, x, w, b)
    assert a.output_elements == 1 << 28
    monkeypatch.setattr(fused, "forward", lambda *args: pytest.fail("launched, not graphed"))
    out = replay.graphed(x, w, b, a)
    assert [owner for owner, _ in asked] == [replay] and out.shape == a.output_shape
    assert out.is_contiguous(memory_format=in_layout)


def _weight_gradient_problem(case, key: str, grad_key: str) -> tuple:
    """``(case, x, grad_out, ref)``: the case with output channels in whole 16-byte rows
    (backward_unavailable asks it), fresh float64 input and output gradient drawn under
    these keys, and the weight gradient torch gives in float64."""
    case = dataclasses.replace(case, out_channels=-(-case.out_channels // 4) * 4)
    x, w, b = case.tensors(generator=generator(case.name, key))
    x, w = _batched(case, x), w.requires_grad_()
    out = reference(case, x, w, b)
    grad_out = torch.randn(out.shape, generator=generator(case.name, grad_key), dtype=torch.float64)
    ref, = torch.autograd.grad(out, w, grad_out)
    return case, x, grad_out, ref


@interpreted
@pytest.mark.parametrize("boxes", [4, 2])
@pytest.mark.parametrize("case", STRIDE_ONE[1::3], ids=lambda c: c.name)
def test_weight_gradient_kernel_matches_float64(case, boxes):
    """Any W: rows of W that do not start on 16 bytes go through the pitched copy. On
    either element size's boxes: rows of W (32-bit), or the least padding ones (16-bit,
    whose index math the interpreter checks in float32, which it runs exactly)."""
    case, x, grad_out, ref = _weight_gradient_problem(case, "weight-grad", "gw")
    cfg = fused.grad_config(fused._padded(case.size, 1), case.in_channels, case.out_channels, boxes)
    got = fused.weight_gradient(x.float(), grad_out.float().movedim(1, -1).contiguous(),
                                _geometry(case), "ieee", cfg)
    assert got.dtype == torch.float32 and rel_error(got, ref) < 1e-5


@interpreted
@pytest.mark.parametrize("case", STRIDE_ONE[::3], ids=lambda c: c.name)
def test_weight_gradient_from_shifted_copies_matches_float64(case):
    """The 32-bit layout: the output gradient planar, read from its copies moved along W.
    Any W, any padding and dilation: the taps' offsets along W take every remainder."""
    case, x, grad_out, ref = _weight_gradient_problem(case, "weight-grad-shifted", "gws")
    got = fused.weight_gradient(x.float(), grad_out.float().contiguous(), _geometry(case),
                                "ieee", shifted=True)
    assert got.dtype == torch.float32 and rel_error(got, ref) < 1e-5


CHANNELS_LAST_FORMS = {"grad-moved": {}, "input-moved": {"moved_input": True}}


@interpreted
@pytest.mark.parametrize("form", CHANNELS_LAST_FORMS)
@pytest.mark.parametrize("grad_layout", ["channels_last", "planar"])
@pytest.mark.parametrize("case", [c for c in STRIDE_ONE[::3] if c.nd > 1 and c.batch],
                         ids=lambda c: c.name)
def test_channels_last_weight_gradient_from_moved_copies_matches_float64(case, grad_layout,
                                                                         form):
    """The 32-bit layout on a channels_last input: the output gradient's copies moved along
    W (made from its rows where it is channels_last too) and one planar copy of the input
    (fused._planar); or the input's moved copies, made from its rows, and the output
    gradient as it lies, copied planar where it is channels_last. (Input channels in whole
    16-byte rows, as the fused route asks.)"""
    case = dataclasses.replace(case, in_channels=-(-case.in_channels // 4) * 4)
    case, x, grad_out, ref = _weight_gradient_problem(case, "weight-grad-cl-shifted", "gwc")
    layout = torch.channels_last if case.nd == 2 else torch.channels_last_3d
    x = x.float().contiguous(memory_format=layout)
    if fused._channels_last_rows(x) is None:
        pytest.skip("one position: planar and channels_last alike")
    grad_out = grad_out.float().contiguous(
        memory_format=layout if grad_layout == "channels_last" else torch.contiguous_format)
    if form == "input-moved" and grad_layout == "planar":
        pytest.skip("covered: the input's copies from its rows with a channels_last output "
                    "gradient, a planar one read as it lies by the planar tests")
    got = fused.weight_gradient(x, grad_out, _geometry(case), "ieee", shifted=True,
                                **CHANNELS_LAST_FORMS[form])
    assert got.dtype == torch.float32 and rel_error(got, ref) < 1e-5


@interpreted
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (1, 4, 2, 3, 8), (3, 2, 1, 6)])
def test_planar_descriptor_of_a_channels_last_tensor_reads_the_tensor(shape):
    """fused._planar: a channels_last tensor's copy, channels next to W, described to the copy
    engine in planar order (N, C, D, H, W): read through that description it is the tensor."""
    t = torch.randn(shape)
    layout = torch.channels_last if t.dim() == 4 else torch.channels_last_3d
    t = t.contiguous(memory_format=layout)
    copy, dims, strides = fused._planar(t)
    assert copy.data_ptr() != t.data_ptr()   # (a copy, so this can fail)
    assert all(s * 4 % 16 == 0 for s in strides[:-1]) and strides[-1] == 1
    read = torch.as_strided(copy, dims, strides)
    assert torch.equal(read, t.reshape(dims))


@interpreted
@pytest.mark.parametrize("taps", [1, 2, 3, 4])
@pytest.mark.parametrize("case", STRIDE_ONE[1::7], ids=lambda c: c.name)
def test_weight_gradient_of_several_taps_a_program_matches_float64(case, taps):
    """The moved copies' form: the input's box shared by several taps' products; a group past
    the last tap repeats it and stores nothing (kernels of 1 to 21 taps, groups of 1-4)."""
    case, x, grad_out, ref = _weight_gradient_problem(case, f"weight-grad-taps{taps}", "gwt")
    cfg = fused.grad_config(fused._padded(case.size, 1), case.in_channels, case.out_channels, 4)
    got = fused.weight_gradient(x.float(), grad_out.float().contiguous(), _geometry(case),
                                "ieee", cfg._replace(taps=taps), shifted=True)
    assert rel_error(got, ref) < 1e-5


@interpreted
@pytest.mark.parametrize("boxes,taps", [(2, 2), (2, 3), (2, 4), (4, 3)])
@pytest.mark.parametrize("case", STRIDE_ONE[1::7], ids=lambda c: c.name)
def test_weight_gradient_of_several_taps_through_registers_matches_float64(case, boxes, taps):
    """weight_gradient: several taps' products of the output gradient's shifted boxes (the
    channels-innermost form) share the input's box; a group past the last tap repeats it
    and stores nothing. On 16-bit and 32-bit boxes (the interpreter runs float32 exactly)."""
    case, x, grad_out, ref = _weight_gradient_problem(case, f"weight-grad-rows{taps}", "gwr")
    cfg = fused.grad_config(fused._padded(case.size, 1), case.in_channels, case.out_channels, boxes)
    got = fused.weight_gradient(x.float(), grad_out.float().movedim(1, -1).contiguous(),
                                _geometry(case), "ieee", cfg._replace(taps=taps))
    assert got.dtype == torch.float32 and rel_error(got, ref) < 1e-5


@interpreted
@pytest.mark.parametrize("taps", [1, 3])
@pytest.mark.parametrize("case", STRIDE_ONE[::3], ids=lambda c: c.name)
def test_weight_gradient_from_the_inputs_moved_copies_matches_float64(case, taps):
    """MOVED_X: the sum over output positions of ``g[p] x[p - o]``, the input read from its
    copies moved along W at the taps' opposite offsets (every remainder), the output
    gradient as it lies (pitched where its rows are not whole 16 bytes), one or three taps
    a program sharing its box."""
    case, x, grad_out, ref = _weight_gradient_problem(case, "weight-grad-input", "gwi")
    cfg = fused.grad_config(fused._padded(case.output_size, 1), case.in_channels,
                            case.out_channels, 4)
    got = fused.weight_gradient(x.float(), grad_out.float().contiguous(), _geometry(case),
                                "ieee", cfg._replace(taps=taps), shifted=True, moved_input=True)
    assert got.dtype == torch.float32 and rel_error(got, ref) < 1e-5


@interpreted
@pytest.mark.parametrize("down_h", [True, False], ids=["down-h", "along-w"])
@pytest.mark.parametrize("form", ["grad-moved", "input-moved", "rows"])
@pytest.mark.parametrize("case", [
    cases._c("down-h-2d", 2, 16, 8, (3, 2), (5, 70), padding=(1, 0), dilation=(1, 2)),
    cases._c("down-h-3d", 2, 8, 12, (2, 3, 3), (3, 4, 40), padding=(0, 1, 1)),
    cases._c("down-h-1d", 3, 8, 8, (5,), (100,), padding=(2,))], ids=lambda c: c.name)
def test_weight_gradient_walking_boxes_in_either_order_matches_float64(monkeypatch, case, form,
                                                                      down_h):
    """fused.BOXES_DOWN_H: a split's boxes H first (the package's walk) or W first, then
    the other dims and the sample, in each form (the moved copies of either operand; the
    output gradient's rows through registers, on 16-bit boxes of several rows): every box
    summed once, on grids of several boxes along each dim."""
    monkeypatch.setattr(fused, "BOXES_DOWN_H", down_h)
    fused.forget_plans()
    plans, plan = [], fused._grad_plan
    monkeypatch.setattr(fused, "_grad_plan", lambda *args: plans.append(plan(*args)) or plans[-1])
    case, x, grad_out, ref = _weight_gradient_problem(case, "down-h", "gdh")
    g = _geometry(case)
    if form == "rows":
        cfg = fused.grad_config(fused._padded(case.size, 1), case.in_channels,
                                case.out_channels, 2)
        got = fused.weight_gradient(x.float(), grad_out.float().movedim(1, -1).contiguous(), g,
                                    "ieee", cfg)
    else:
        got = fused.weight_gradient(x.float(), grad_out.float().contiguous(), g, "ieee",
                                    shifted=True, moved_input=form == "input-moved")
    monkeypatch.undo()
    fused.forget_plans()   # (none kept that walks otherwise than the package)
    assert plans and all(p.launch.constants["DOWN_H"] == down_h for p in plans)
    assert rel_error(got, ref) < 1e-5


@pytest.mark.parametrize("element_size", [2, 4])
@pytest.mark.parametrize("grid", [(1, 64, 2), (1, 1, 3), (4, 64, 1), (1, 16, 5), (8, 8, 8), (1, 1, 1024)])
def test_weight_gradient_boxes_start_rows_on_16_bytes(grid, element_size):
    """A box's W extent is whole 16-byte units: the copy engine's rows, and the shifted
    copies' offsets (whole units) stay whole from box to box."""
    box = fused.grad_config(grid, 64, 64, element_size).box
    assert box[2] * element_size % 16 == 0 and math.prod(box) >= 128 // element_size
    assert all(b & (b - 1) == 0 for b in box)


def test_16_bit_weight_gradient_boxes_pad_the_grid_least():
    """3d-96cube's input: rows of 64 along W pad it by a third; 2 x 32 boxes tile it."""
    box = fused.grad_config((96, 96, 96), 48, 24, 2).box
    assert math.prod(box) == 64 and all(96 % b == 0 for b in box)
    assert fused.grad_config((96, 96, 96), 48, 24, 4).box == (1, 1, 32)   # one row: 32-bit


@pytest.mark.parametrize("moved_input", [False, True])
@pytest.mark.parametrize("kernel,padding,dilation,size", [
    (3, 1, 1, 4), (7, 3, 1, 4), (5, 0, 3, 2), (4, 2, 2, 8), (1, 0, 1, 4)])
def test_shifted_taps_start_every_box_on_16_bytes(kernel, padding, dilation, size, moved_input):
    """Each tap reads a copy moved by less than 16 bytes, at an offset of whole 16-byte
    units, and that copy holds the output gradient at the tap's own offset (the input at
    the opposite one, where it is the input that moves)."""
    g = Geometry((kernel,), (1,), (padding,), (dilation,))
    shifts, table = fused.shifted_taps(g, size, moved_input)
    granule = 16 // size
    taps = fused.convolution_taps(g)
    sign = -1 if moved_input else 1
    assert len(table) == kernel and all(0 <= m < granule for m in shifts)
    for (o0, o1, o2, copy), offset in zip(table, taps.offsets[0]):
        assert (o0, o1) == (sign * offset[0], sign * offset[1]) and o2 % granule == 0
        assert o2 - shifts[copy] == sign * offset[2]       # copy[w] = operand[w - m]


def test_the_float32_weight_gradient_moves_the_smaller_operand():
    """The input's copies where they hold no more elements than the output gradient's (with
    a pitched copy of the other where its rows are not whole 16 bytes)."""
    def moves(x_shape, w_shape, padding=0):
        a = conv_transpose_args("conv_transpose2d", 2, torch.empty(x_shape, device="meta"),
                                torch.empty(w_shape, device="meta"), None, 1, padding, 0, 1, 1)
        return fused.moves_input(a, 4)
    assert moves((64, 64, 128, 256), (64, 128, 3, 5))         # 2d-64to128: half the elements
    assert not moves((8, 64, 1024, 1024), (64, 64, 3, 3))      # rows of 1026: a pitched copy
    assert not moves((8, 64, 512, 512), (64, 64, 3, 7))
    assert moves((8, 64, 512, 512), (64, 64, 3, 5), padding=(1, 2))   # a tie: the input
    assert not moves((8, 128, 128, 256), (128, 64, 3, 5))      # the other way round


@interpreted
def test_shifted_copies_move_rows_and_fill_zeros():
    grad = torch.randn(2, 3, 5, 7)      # (N, C, H, W): copies (S N, D, H, C, W'')
    copies, shape, strides = fused.shifted_copies(grad, (0, 1, 3), tf32=False)
    assert shape == [6, 1, 5, 3, 12] and strides == [180, 180, 36, 12, 1]   # rows of 7 + 3 -> 12
    view = copies.view(3, 2, 5, 3, 12).transpose(2, 3)          # back to (S, N, C, H, W'')
    for i, m in enumerate((0, 1, 3)):
        assert torch.equal(view[i, ..., m:m + 7], grad)
        assert not view[i, ..., :m].any() and not view[i, ..., m + 7:].any()
    rounded, *_ = fused.shifted_copies(grad, (2,), tf32=True)
    assert torch.equal(rounded.view(2, 5, 3, 12).transpose(1, 2)[..., 2:9], fused.round_tf32(grad))


@interpreted
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (3, 20, 2, 4, 9), (1, 17, 1, 33)])
def test_shifted_copies_of_a_channels_last_tensor_equal_its_planar_copies(shape):
    """A channels_last source (read a run of channels a position) gives the very copies its
    planar twin gives, whatever the channels against the program's 16 rows, 1-3 planes."""
    grad = torch.randn(shape, generator=generator(str(shape), "shifted-cl"))
    layout = torch.channels_last if grad.dim() == 4 else torch.channels_last_3d
    for shifts, tf32 in (((0, 1, 3), False), ((2,), True)):
        planar = fused.shifted_copies(grad, shifts, tf32)
        rows = fused.shifted_copies(grad.contiguous(memory_format=layout), shifts, tf32)
        assert torch.equal(rows[0], planar[0]) and rows[1:] == planar[1:]


def test_shifted_copies_refuse_a_layout_they_would_have_to_copy_first():
    """No hidden copy: a tensor neither contiguous nor channels_last is the caller's error."""
    grad = torch.randn(2, 8, 5, 6, generator=generator("shifted-strided"))
    with pytest.raises(ValueError, match="contiguous or channels_last"):
        fused.shifted_copies(grad.transpose(2, 3), (0,), False)
    with pytest.raises(ValueError, match="contiguous or channels_last"):
        fused.shifted_copies(grad[:, :, :, ::2], (0, 1), False)


def _tf32_backward_problem(case, key: str, grad_key: str, moved: bool = False,
                           interleaved: bool = False) -> tuple:
    """``(x, w, a, grad_out, ref)``: the case aligned for the fused backward, fresh float32
    input, weight and output gradient drawn under these keys, its checked arguments, and
    the input and weight gradients in float64 on the weight and output gradient rounded to
    TF32 (as fused.backward rounds them) and the input as it lies; where ``moved`` and the
    weight gradient moves the input (its planar form, fused.float32_weight_form, on
    ``interleaved`` tensors or not, and fused.moves_input), that one on the input rounded
    and the output gradient as it lies."""
    case = dataclasses.replace(_aligned(case), out_channels=-(-case.out_channels // 4) * 4)
    x, w = (t.float() for t in case.tensors(generator=generator(case.name, key))[:2])
    x = _batched(case, x)
    xd, wr = x.double().requires_grad_(), fused.round_tf32(w).double().requires_grad_()
    out = reference(case, xd, wr, None)
    grad_out = torch.randn(out.shape, generator=generator(case.name, grad_key)).float()
    ref = torch.autograd.grad(out, (xd, wr), fused.round_tf32(grad_out).double())
    a = case_args(case, x, w, None)
    if moved and fused.moved_operand(a, 4, interleaved) == "input":
        out = reference(case, fused.round_tf32(x).double(), wr, None)
        ref = (ref[0], *torch.autograd.grad(out, wr, grad_out.double()))
    return x, w, a, grad_out, ref


@interpreted
@pytest.mark.parametrize("case", STRIDE_ONE[::5], ids=lambda c: c.name)
def test_fused_backward_gives_both_gradients_in_tf32(case):
    """fused.backward: float32 operands rounded to TF32 once (the output gradient's copies,
    the weights), the input to the weight gradient as it lies (the tensor cores truncate
    it; the interpreter multiplies it whole), so both gradients equal float64's on those
    operands. Where the weight gradient moves the input's copies instead (three of these
    cases), those are rounded and the output gradient is read as it lies."""
    x, w, a, grad_out, ref = _tf32_backward_problem(case, "backward", "gb", moved=True)
    got = fused.backward(grad_out, x, w, a, (True, True))
    assert rel_error(got[0], ref[0]) < 1e-6 and rel_error(got[1], ref[1]) < 1e-6
    assert got[2] is None and fused.backward(grad_out, x, w, a, (False, True))[0] is None


# The 2-D cases, and of the 3-D ones one, for the index math of three dims (the
# interpreter's time goes with programs and steps); test_cuda_fused takes four 3-D cases.
CHANNELS_LAST_BACKWARD = [c for c in STRIDE_ONE if c.nd == 2 and c.batch] + \
    [c for c in STRIDE_ONE if c.name == "3d-64cube-small"]


@interpreted
@pytest.mark.parametrize("folded", [False, True])
@pytest.mark.parametrize("grad_layout", ["channels_last", "planar"])
@pytest.mark.parametrize("case", CHANNELS_LAST_BACKWARD, ids=lambda c: c.name)
def test_fused_backward_reads_channels_last_tensors_as_they_lie(case, grad_layout, folded):
    """fused.backward on a channels_last input: the weight gradient reads its rows, or
    copies made from them (fused.float32_weight_form), and a channels_last output
    gradient's rows stand for the copy (rounded to TF32 in the kernels' registers; the bias
    gradient then the caller's), a planar one is copied as for a planar call; both
    gradients equal float64's on TF32 operands, the input's channels_last. Also with W's
    taps folded into the channels (the 16-bit form for few output channels)."""
    if folded and case.kernel_size[-1] == 1:
        pytest.skip("one tap along W: nothing to fold")
    x, w, a, grad_out, ref = _tf32_backward_problem(case, "cl-backward", "gcl",
                                                    moved=not folded, interleaved=True)
    layout = torch.channels_last if case.nd == 2 else torch.channels_last_3d
    x = x.contiguous(memory_format=layout)
    if grad_layout == "channels_last":
        grad_out = grad_out.contiguous(memory_format=layout)
    if fused._channels_last_rows(x) is None:
        pytest.skip("one position: planar and channels_last alike")
    got = fused.backward(grad_out, x, w, a, (True, True, True),
                         fold=case.kernel_size[-1] if folded else 1)
    assert rel_error(got[0], ref[0]) < 1e-6 and rel_error(got[1], ref[1]) < 1e-6
    assert got[0].is_contiguous(memory_format=layout)
    if grad_layout == "channels_last":
        assert got[2] is None
    else:
        assert rel_error(got[2], grad_out.double().sum((0, *range(2, grad_out.dim())))) < 1e-6


@interpreted
@pytest.mark.parametrize("layout", ["planar", "channels_last"])
@pytest.mark.parametrize("case", STRIDED[::4], ids=lambda c: c.name)
def test_strided_backward_gives_both_gradients_in_tf32(case, layout):
    """fused.strided_backward: both kernels over the output gradient's phase planes, the
    input's gradient in the input's layout (channels_last: the weight gradient reads the
    input's rows as they lie), equal to float64's on the operands rounded to TF32."""
    if layout == "channels_last" and (case.nd == 1 or case.unbatched):
        pytest.skip("no channels_last layout for 1-D or unbatched inputs")
    x, w, a, grad_out, ref = _tf32_backward_problem(case, "strided" + layout, "gs")
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
        grad_out = grad_out.contiguous(memory_format=torch.channels_last)
        assert fused._channels_last_rows(x) is not None or x.is_contiguous()
    got = fused.strided_backward(grad_out, x, w, a, (True, True))
    assert rel_error(got[0], ref[0]) < 1e-6 and rel_error(got[1], ref[1]) < 1e-6
    assert got[0].is_contiguous(memory_format=torch.channels_last if layout == "channels_last"
                                else torch.contiguous_format)
    only_weight = fused.strided_backward(grad_out, x, w, a, (False, True))
    assert only_weight[0] is None and torch.equal(only_weight[1], got[1])


@interpreted
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("need", [(True, True, True), (True, False, True), (False, True, True)])
def test_fused_backward_sums_the_bias_gradient_from_its_copy(dtype, need):
    """With the bias asked for, fused.backward sums it from the output gradient's
    channels-innermost copy where it makes one (the input gradient's, or the 16-bit weight
    gradient's; folded rows are made from it too), unrounded, chunk by chunk; where it
    makes none (float32's weight gradient alone reads the moved copies), it leaves the bias
    to the caller."""
    case = cases._c("bias", 5, 8, 24, (3, 2), (4, 6), padding=(1, 0))   # 48 bytes: unfolded
    x, w, _ = (t.to(dtype) for t in case.tensors(generator=generator(case.name, "bias")))
    a = case_args(case, x, w, None)
    assert fused.folded_taps(a.geometry, 24, x.element_size()) == 1
    grad_out = (torch.randn(5, 24, *a.image, generator=generator(case.name, "gb")) * 10).to(dtype)
    want = grad_out.double().sum((0, 2, 3))
    one = fused.backward_workspace(a, x.element_size(), 1) * x.element_size()
    for limit in (None, 2 * one):   # in one chunk, then in chunks of two samples
        got = fused.backward(grad_out, x, w, a, need, limit=limit)
        if dtype == torch.float32 and not need[0]:
            assert got[2] is None
            continue
        tolerance = 1e-6 if dtype == torch.float32 else 8e-3
        assert got[2].dtype == dtype and rel_error(got[2], want) < tolerance


@interpreted
@pytest.mark.parametrize("case", [c for c in STRIDE_ONE if c.kernel_size[-1] > 1][::3],
                         ids=lambda c: c.name)
def test_fused_backward_with_w_taps_folded_into_the_channels_gives_both_gradients(case):
    """fused.backward on folded_rows (the 16-bit form for few output channels, run here in
    float32, which the interpreter multiplies exactly): equal to float64's on the operands
    rounded to TF32, as unfolded."""
    x, w, a, grad_out, ref = _tf32_backward_problem(case, "folded", "gf")
    got = fused.backward(grad_out, x, w, a, (True, True, True), fold=case.kernel_size[-1])
    assert rel_error(got[0], ref[0]) < 1e-6 and rel_error(got[1], ref[1]) < 1e-6
    dims = (0, *range(2, grad_out.dim()))   # the bias from the copy's sums, unrounded
    assert rel_error(got[2], grad_out.double().sum(dims)) < 1e-6


@interpreted
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("need", [(True, True, True), (False, True, True), (True, False, False)])
def test_fused_backward_writes_into_the_gradients_given(dtype, need):
    """fused.backward with ``out`` (a CUDA graph's outputs) writes each gradient it gives
    into the tensor given for it, bit for bit as into its own, and touches no other: the
    bias where it sums none (float32's weight gradient alone) nor any not asked for."""
    case = cases._c("given", 3, 8, 24, (3, 2), (4, 6), padding=(1, 0))
    x, w, _ = (t.to(dtype) for t in case.tensors(generator=generator(case.name, "given", dtype)))
    a = case_args(case, x, w, None)
    grad_out = torch.randn(3, 24, *a.image, generator=generator(case.name, "gg")).to(dtype)
    own = fused.backward(grad_out, x, w, a, need)
    out = [torch.full_like(x, math.nan), torch.full_like(w, math.nan),
           torch.full((24,), math.nan, dtype=dtype)]
    got = fused.backward(grad_out, x, w, a, need, out=out)
    for mine, given, theirs in zip(got, out, own):
        if theirs is None:
            assert mine is None and given.isnan().all()
        else:
            assert mine is given and torch.equal(mine, theirs)


@interpreted
@pytest.mark.parametrize("need", [[True, True, True], [False, True, True], [True, False, False]])
def test_fused_backward_replay_hands_its_calls_to_graphs(monkeypatch, need):
    """_FusedBackward.graphed hands its calls to graphs.launch with the memory the call
    takes (fused.backward_bytes and the bias's sums); where no graph is kept, the call
    runs its kernels into gradients it gives back (the bias's too, summed by the caller in
    float32, where fused.backward sums none), right; where one is, the graph's launch is
    the call."""
    from gemmconv import _cuda, graphs
    asked, kept = [], [False]
    monkeypatch.setattr(graphs, "launch", lambda owner, addresses, run, nbytes, *args:
                        asked.append((owner, nbytes())) or kept[0])
    monkeypatch.setattr(_cuda, "raw_stream", lambda device: 0)
    x, w, a, grad_out, ref = _tf32_backward_problem(STRIDE_ONE[3], "graphed", "gr",
                                                    moved=True)
    replay = ops._FusedBackward()
    got = replay.graphed(grad_out, x, w, a, need)
    assert asked == [(replay, fused.backward_bytes(a, 4, ops.get_workspace_limit())
                      + 4 * a.batch * a.out_channels)]
    for mine, want, asked_for in zip(got, ref, need):
        assert (mine is None) != asked_for
        if asked_for:
            assert rel_error(mine, want) < 1e-6
    if need[2]:
        assert rel_error(got[2], grad_out.double().sum((0, *range(2, grad_out.dim())))) < 1e-6
    asked.clear()
    kept[0] = True
    monkeypatch.setattr(fused, "backward", lambda *args, **kw: pytest.fail("launched, not graphed"))
    got = replay.graphed(grad_out, x, w, a, need)
    assert [owner for owner, _ in asked] == [replay]
    assert [g is not None for g in got] == need
    assert got[0] is None or got[0].shape == x.shape


@interpreted
@pytest.mark.parametrize("dtype,need,summed", [
    (torch.float32, [True, True, True], False), (torch.bfloat16, [False, True, True], False),
    (torch.float32, [False, True, True], True)])
def test_fused_route_sums_the_bias_gradient_once(monkeypatch, dtype, need, summed):
    """The fused route's backward takes the bias gradient from the copy's sums, with no
    pass of its own over the output gradient, but where no copy is made (``summed``)."""
    case = cases._c("bias-once", 2, 8, 24, (3, 3), (5, 6), padding=1)
    x, w, b = (t.to(dtype) for t in case.tensors(generator=generator(case.name, "once")))
    a = case_args(case, x, w, b)
    grad_out = torch.randn(2, 24, *a.image, generator=generator(case.name, "go")).to(dtype)
    passes = []
    inner = ops._bias_grad
    monkeypatch.setattr(ops, "_bias_grad", lambda *args: passes.append(1) or inner(*args))
    got = ops._fused_backward(grad_out, x, w, a, need)
    assert rel_error(got[2], grad_out.double().sum((0, 2, 3))) < (1e-6 if dtype == torch.float32
                                                                   else 8e-3)
    assert len(passes) == summed


@pytest.mark.parametrize("outer", [(), (3,), (2, 3)])
@pytest.mark.parametrize("kernel,padding,dilation,width,image", [
    (7, 0, 1, 64, 70), (3, 1, 2, 9, 11), (5, 6, 1, 4, 1), (2, 0, 3, 5, 8), (4, 2, 1, 3, 4)])
def test_folded_rows_hold_each_tap_along_w(kernel, padding, dilation, width, image, outer):
    """Row w of folded_rows holds, tap t by tap, the output gradient's channels at
    w + t d - p, zero outside it, in 1-D, 2-D and 3-D (the dims before W unchanged)."""
    nd = len(outer) + 1
    g = Geometry((2,) * (nd - 1) + (kernel,), (1,) * nd, (1,) * (nd - 1) + (padding,),
                 (1,) * (nd - 1) + (dilation,))   # (the other dims' taps stay unfolded)
    grad = torch.randn(2, 3, *outer, image, generator=generator("folded-rows", kernel, padding),
                       dtype=torch.float64)
    rows = fused.folded_rows(grad.movedim(1, -1).contiguous(), g, width)
    assert rows.shape == (2, *outer, width, kernel * 3) and rows.is_contiguous()
    for w in range(width):
        for t in range(kernel):
            j = w + t * dilation - padding
            want = grad[..., j].movedim(1, -1) if 0 <= j < image else 0 * rows[..., 0, :3]
            assert torch.equal(rows[..., w, t * 3:(t + 1) * 3], want), (w, t)


def test_folded_weights_and_gradient_lay_w_taps_out_alike():
    w = torch.randn(4, 3, 2, 5, generator=generator("folded-weights"), dtype=torch.float64)
    folded = fused.tap_weights(w, transpose=True, fold=5)   # (kh, C_in, kw C_out)
    assert folded.shape == (2, 4, 15)
    assert torch.equal(folded[1, 2, 3 * 3 + 1], w[2, 1, 1, 3])
    g = Geometry((2, 5), (1, 1), (0, 0), (1, 1))
    unfolded = fused._unfolded(folded.permute(1, 2, 0).unsqueeze(-1), g, 5)
    assert torch.equal(unfolded, w)


_CHUNKED = {2: cases._c("chunks", 5, 8, 8, (3, 2), (4, 6), padding=(1, 0), dilation=(1, 2)),
            3: cases._c("chunks-3d", 5, 8, 8, (2, 3, 2), (3, 4, 6), padding=(0, 1, 0),
                        dilation=(1, 1, 2))}


@interpreted
@pytest.mark.parametrize("nd,dtype", [(2, torch.float32), (2, torch.float16), (3, torch.float32)])
def test_fused_backward_takes_samples_in_chunks_within_the_workspace_limit(monkeypatch, nd,
                                                                           dtype):
    """Under a workspace limit that holds two samples' copies, five samples go in chunks of
    two, two and one: the input gradient filled chunk by chunk, the weight gradient summed
    over the chunks in float32, both as without a limit, and as float64's on the same
    operands; 3-D in float32 too (fused.FLOAT32_BACKWARD_DIMS). (16-bit in float16: Triton's
    interpreter multiplies bfloat16 operands' bit patterns in tl.dot,
    triton-lang/triton#11584; the kernels' 16-bit forms are one.)"""
    case = _CHUNKED[nd]
    x, w, _ = (t.to(dtype) for t in case.tensors(generator=generator(case.name, "chunks")))
    a = case_args(case, x, w, None)
    grad_out = torch.randn(5, 8, *a.image, generator=generator(case.name, "gc")).to(dtype)
    whole = fused.backward(grad_out, x, w, a, (True, True))
    one = fused.backward_workspace(a, x.element_size(), 1) * x.element_size()
    assert fused.backward_workspace(a, x.element_size()) * x.element_size() == 5 * one
    assert fused.backward_samples(a, x.element_size(), 2 * one + one // 2) == 2
    calls = []
    inner = fused.weight_gradient
    monkeypatch.setattr(fused, "weight_gradient",
                        lambda x, *rest, **kw: calls.append(x.shape[0]) or inner(x, *rest, **kw))
    chunked = fused.backward(grad_out, x, w, a, (True, True), limit=2 * one + one // 2)
    assert calls == [2, 2, 1] and chunked[1].dtype == dtype
    # Bit for bit on a GPU (test_cuda_fused). Here tl.dot is numpy's matmul, whose BLAS may
    # round a tile of fewer rows otherwise: on an AMD EPYC host (session 77) the float32
    # one-sample chunk's input gradient read up to 2e-6 off of values up to 38. A chunk
    # written to the wrong samples is off by its whole size.
    assert rel_error(chunked[0], whole[0]) < 1e-6
    tolerance = 1e-6 if dtype == torch.float32 else 1e-3   # float16: rounded once per sum
    assert rel_error(chunked[1].double(), whole[1].double()) < tolerance
    xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
    out = reference(case, xd, wd, None)
    refs = torch.autograd.grad(out, (xd, wd), grad_out.double())
    assert all(rel_error(got, ref) < 1e-3 for got, ref in zip(whole, refs))   # TF32, float16


@interpreted
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])   # (not bfloat16: #11584)
def test_channels_last_backward_counts_no_copy_of_output_gradient_rows_it_reads(monkeypatch,
                                                                                dtype):
    """A channels_last output gradient's rows are read as they lie (fused.reads_grad_rows):
    the workspace counts no copy of it channels innermost, so a limit of two samples' real
    copies takes chunks of two, where the count with that copy took one; a planar output
    gradient is copied, and chunked by the larger count. float32 of few taps' products
    reads both tensors' rows (the rows form): with a channels_last output gradient it
    copies nothing, so any limit takes every sample at once."""
    case = cases._c("cl-rows", 4, 8, 8, (3, 2), (4, 6), padding=(1, 0), dilation=(1, 2))
    x, w, _ = (t.to(dtype) for t in case.tensors(generator=generator(case.name, "cl-rows")))
    x = x.contiguous(memory_format=torch.channels_last)
    a = case_args(case, x, w, None)
    grad_out = torch.randn(4, 8, *a.image, generator=generator(case.name, "gr")).to(dtype)
    size = x.element_size()
    copied = fused.backward_workspace(a, size, 1, True) * size
    read = fused.backward_workspace(a, size, 1, True, grad_rows=True) * size
    assert copied - read == 8 * math.prod(a.image) * size   # the copy channels innermost
    limit = 2 * read
    calls = []
    inner = fused.weight_gradient
    monkeypatch.setattr(fused, "weight_gradient",
                        lambda x, *rest, **kw: calls.append(x.shape[0]) or inner(x, *rest, **kw))
    whole = fused.backward(grad_out, x, w, a, (True, True))
    for layout, chunks in ((torch.channels_last, [2, 2] if read else [4]),
                           (torch.contiguous_format, [1, 1, 1, 1])):
        g = grad_out.contiguous(memory_format=layout)
        assert fused.reads_grad_rows(g, x) == (layout == torch.channels_last)
        calls.clear()
        chunked = fused.backward(g, x, w, a, (True, True), limit=limit or 1)
        assert calls == chunks
        assert rel_error(chunked[0], whole[0]) < 1e-6   # (exact on a GPU: as above)
        tolerance = 1e-6 if dtype == torch.float32 else 1e-2
        assert rel_error(chunked[1].double(), whole[1].double()) < tolerance
    assert (read == 0) == (dtype == torch.float32)


@pytest.mark.parametrize("count,taps,half", [(1, 1, 1), (2, 2, 2), (3, 3, 3), (5, 1, 3),
                                             (7, 4, 4), (9, 3, 3), (10, 2, 4), (13, 2, 3),
                                             (15, 4, 4), (17, 3, 4), (21, 4, 4), (27, 4, 4)])
def test_taps_a_program_leave_at_most_one_slot_in_eight_idle(count, taps, half):
    """One in eight for float32; one in six for 16-bit types (``half`` taps)."""
    assert fused.taps_a_program(count) == taps
    assert fused.taps_a_program(count, 2) == half
    small = fused.grad_config((1, 64, 64), 64, 64, 4, count)       # 64 x 64 tiles
    large = fused.grad_config((1, 64, 64), 128, 128, 4, count)     # 128 x 128: one tap
    assert (small.bm, small.taps) == (64, taps) and (large.bm, large.taps) == (128, 1)
    assert fused.grad_config((1, 64, 64), 64, 64, 4).taps == 1     # one by default
    # The channels-innermost form: the 16-bit kernel shares the input's box too (s46/B),
    # the float32 one (W's taps folded) takes one tap a program.
    assert fused.grad_splits(8, (1, 64, 64), 64, 64, count, 2, False).cfg.taps == half
    assert fused.grad_splits(8, (1, 64, 64), 64, 64, count, 4, False).cfg.taps == 1
    assert fused.grad_splits(8, (1, 64, 64), 64, 64, count, 4, True).cfg.taps == taps


@pytest.mark.parametrize("boxes", [1, 7, 300, 65536, 131072, 4_000_000])
@pytest.mark.parametrize("tiles", [1, 9, 75, 196, 1000])
@pytest.mark.parametrize("partial", [1 << 10, 9 * 64 * 64 * 4, 49 * 256 * 256 * 4])
def test_weight_gradient_splits_sum_at_most_a_chain_on_the_tensor_cores(boxes, tiles, partial):
    """Every box in one split; at least as many splits as two waves of programs take; no
    split longer than fused.CHAIN positions (the tensor cores' float32 sums drift low
    with their length) unless more splits' partials would pass fused.PARTIALS bytes."""
    box = 64
    per_split, splits = fused.split_boxes(boxes, tiles, box, partial)
    assert (splits - 1) * per_split < boxes <= splits * per_split
    waves = -(-boxes // min(boxes, -(-2 * fused.WAVE // tiles)))
    assert per_split <= waves
    if per_split * box > fused.CHAIN:   # only where shorter splits' partials pass the bound
        assert per_split == waves <= 1 or -(-boxes // (per_split - 1)) * partial > fused.PARTIALS
    assert fused.split_boxes(0, tiles, box, partial) == (1, 0)


@interpreted
def test_fused_backward_of_an_empty_batch_gives_zero_weight_gradient():
    x, w = torch.randn(0, 4, 5, 6), torch.randn(4, 8, 3, 3)
    a = conv_transpose_args("conv_transpose2d", 2, x, w, None, 1, 1, 0, 1, 1)
    grad_x, grad_w, grad_b = fused.backward(torch.randn(0, 8, 5, 6), x, w, a, (True, True, True))
    assert grad_x.shape == x.shape and torch.equal(grad_w, torch.zeros_like(w))
    assert torch.equal(grad_b, torch.zeros(8))


def test_weight_gradient_refuses_taps_it_cannot_group():
    x, grad = torch.randn(1, 4, 8), torch.randn(1, 4, 10)
    g = Geometry((3,), (1,), (0,), (1,))
    cfg = fused.grad_config((1, 1, 8), 4, 4, 4)
    for shifted, grad in ((True, grad), (False, grad.movedim(1, -1))):
        with pytest.raises(ValueError, match="1 to 4, got 5"):
            fused.weight_gradient(x, grad, g, cfg=cfg._replace(taps=5), shifted=shifted)


def test_fused_backward_stays_off_where_one_sample_passes_the_workspace_limit():
    x, w = _meta(8, 64, 1024, 1024), _meta(64, 64, 3, 3)
    a = conv_transpose_args("conv_transpose2d", 2, x, w, None, 1, 0, 0, 1, 1)
    one = fused.backward_workspace(a, 4, 1) * 4     # the copies of one sample
    assert one == (64 * 1026 * 1026 + 3 * 64 * 1026 * 1032) * 4   # rows of 1024: no input copy
    if fused._triton_available():
        assert fused.backward_unavailable(a, x, w, limit=one) is None
        assert "workspace limit" in fused.backward_unavailable(a, x, w, limit=one - 1)
        assert fused.backward_unavailable(a, x, w) is None      # no limit given


_WGMMA_A_OPERANDS = """
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.errors import CompilationError
from gemmconv import _triton, fused
form = sys.argv[1]   # "shifted" (the output gradient's moved copies), "input" or "rows"
bn = int(sys.argv[2])   # input channels of the tile (64 output channels)
fn = _triton.weight_gradient
g_moved, x_moved, g_planar, x_planar = ((1, 1, 1, 64, 32), (1, 1, 1, bn, 32), (1, 64, 1, 1, 32),
                                        (1, bn, 1, 1, 32))
g_block, x_block = {"shifted": (g_moved, x_planar), "input": (g_planar, x_moved),
                    "rows": ((1, 1, 1, 32, 64), x_planar)}[form]
sig = {"g_desc": "tensordesc<fp32[%s]>" % ",".join(map(str, g_block)),
       "x_desc": "tensordesc<fp32[%s]>" % ",".join(map(str, x_block)),
       "out_ptr": "*fp32", "offsets_ptr": "*i32"}
constants = dict(B0=1, B1=1, B2=32, BM=64, BN=bn, PRECISION="tf32",
                 **(dict(TP=1, ROUND=True, MOVED=False) if form == "rows" else
                    dict(TP=3, ROUND=False, MOVED=True)), MOVED_X=form == "input", X_LAST=False,
                 SWAP=form == "input" and bn < 64,
                 DOWN_H=fused.BOXES_DOWN_H)   # as fused._grad_plan launches it
sig.update({name: "constexpr" for name in constants})
sig = {name: sig.get(name, "i32") for name in fn.arg_names}
try:
    kernel = triton.compile(
        ASTSource(fn, sig, constexprs={(fn.arg_names.index(k),): v for k, v in constants.items()}),
        target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4, num_stages=4))
except CompilationError:   # the kernel's own error: the test fails on it
    raise
except Exception as e:   # no compiler for sm_90 here
    print(json.dumps({"skip": repr(e)[:200]}))
    sys.exit()
calls = re.findall(r"wgmma\\.mma_async[^;]*;", kernel.asm["ptx"])
print(json.dumps({"a": [re.sub(r"\\s+", "", c).split("},", 1)[1][0] for c in calls]}))
"""


def _a_operands_of_wgmma(form: str, bn: int = 64) -> list:
    """The A operand of each wgmma in the float32 weight-gradient kernel compiled for sm_90
    (tiles of 64 output by ``bn`` input channels, one row of 32 positions a step): a
    shared-memory descriptor (``%``) or a register list (``{``). ``form``: "shifted" (the
    output gradient's moved copies), "input" (the input's) or "rows" (the channels-innermost
    form). Compiled in a process of its own: this module runs Triton's interpreter, which
    compiles nothing."""
    import json
    import subprocess
    import sys
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(
        gemmconv.__file__)), env.get("PYTHONPATH", "")] if p)
    done = subprocess.run([sys.executable, "-c", _WGMMA_A_OPERANDS, form, str(bn)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if "skip" in result:
        pytest.skip(f"Triton cannot compile for sm_90 here: {result['skip']}")
    return result["a"]


def test_float32_weight_gradient_reads_its_tiles_from_shared_memory():
    """The moved copies' boxes are the tensor cores' A tiles as they lie: every wgmma of the
    float32 weight gradient takes A from shared memory (a descriptor, ``%``), the output
    gradient's copies or the input's, where the channels-innermost form loads it into
    registers (``{``) and converts its layout at each step (benches/NOTES.md, session 27)."""
    for form in ("shifted", "input"):
        moved = _a_operands_of_wgmma(form)
        assert moved and set(moved) == {"%"}, form
    assert set(_a_operands_of_wgmma("rows")) == {"{"}


def test_float32_weight_gradient_compiles_on_tiles_of_fewer_input_channels():
    """64 output by 32 input channels (2d-512x1024's): the forms' operands then differ in
    shape, and every branch of the kernel's helpers must compile with them (Triton checks
    the types of returns it does not take; the interpreter runs them regardless). With the
    input moved, its tile as A would give the tensor cores an M of 32, too few for wgmma
    (mma.sync); the output gradient's tile is A there (SWAP), through registers."""
    assert set(_a_operands_of_wgmma("shifted", 32)) == {"%"}
    assert set(_a_operands_of_wgmma("input", 32)) == {"{"}
    assert set(_a_operands_of_wgmma("rows", 32)) == {"{"}


@pytest.mark.parametrize("c_in,swap", [(32, True), (64, False)])
def test_weight_gradient_with_the_input_moved_swaps_operands_on_narrow_input_tiles(c_in, swap):
    """The launch's SWAP: the output gradient's tile first where the input's moved tile has
    fewer channels (32) than the output gradient's (64), for wgmma (s47/G)."""
    pytest.importorskip("triton")
    g = Geometry((3, 3), (1, 1), (0, 0), (1, 1))
    plan = fused._grad_plan((2, c_in, 8, 40), (2, 64, 10, 42), g, torch.float32, "tf32", None,
                            False, True, torch.device("cpu"), moved_input=True)
    assert (plan.launch.constants["BN"], plan.launch.constants["BM"]) == (c_in, 64)
    assert plan.launch.constants["MOVED_X"] and plan.launch.constants["SWAP"] == swap
    moved_g = fused._grad_plan((2, c_in, 8, 40), (2, 64, 10, 42), g, torch.float32, "tf32", None,
                               False, True, torch.device("cpu"))
    assert not moved_g.launch.constants["SWAP"]   # the output gradient moved: its tile is A


def test_round_tf32_keeps_ten_mantissa_bits_to_nearest_ties_away():
    one = torch.tensor([1.0, 1 + 2 ** -11, 1 + 2 ** -12, -(1 + 2 ** -11), 3 * 2 ** -11 + 1])
    assert fused.round_tf32(one).tolist() == [1.0, 1 + 2 ** -10, 1.0, -(1 + 2 ** -10), 1 + 2 ** -9]
    x = torch.randn(10000, generator=generator("round")) * 1000
    r = fused.round_tf32(x)
    assert (r.view(torch.int32) & 0x1FFF == 0).all()
    ulp = torch.ldexp(torch.ones(()), torch.frexp(x)[1] - 11)   # TF32's unit in the last place
    assert ((r - x).abs() <= ulp / 2).all()


def _meta(*shape, dtype=torch.float32):
    return torch.empty(shape, device="meta", dtype=dtype)


def _why_not(x, w, interleaved=False, **kw):
    a = conv_transpose_args("conv_transpose2d", 2, x, w, None, kw.get("stride", 1), 0, 0,
                            kw.get("groups", 1), 1)
    return fused.unavailable(a, x, w, interleaved)


def test_unavailable_names_what_keeps_a_call_off_the_fused_route():
    assert "CUDA" in _why_not(torch.empty(2, 8, 4, 4), torch.empty(8, 4, 3, 3))
    assert "groups" in _why_not(_meta(2, 8, 4, 4), _meta(8, 2, 3, 3), groups=2)
    assert "16-byte" in _why_not(_meta(2, 6, 4, 4), _meta(6, 4, 3, 3))
    assert "dtype" in _why_not(_meta(2, 8, 4, 4, dtype=torch.float64), _meta(8, 4, 3, 3, dtype=torch.float64))
    with gemmconv.float32_precision("ieee"):
        assert "ieee" in _why_not(_meta(2, 8, 4, 4), _meta(8, 4, 3, 3))
    bf16 = dict(dtype=torch.bfloat16)
    assert "16-byte" in _why_not(_meta(2, 4, 4, 4, **bf16), _meta(4, 4, 3, 3, **bf16))
    if fused._triton_available():
        assert "cost model" in _why_not(_meta(2, 8, 4, 4, **bf16), _meta(8, 4, 3, 3, **bf16), True)
        large = _meta(8, 64, 1024, 1024), _meta(64, 64, 3, 3)
        assert _why_not(*large) is None and _why_not(*large, interleaved=True) is None
        assert "cost model" in _why_not(*large, stride=2) and _why_not(*large, True, stride=2) is None
        a = conv_transpose_args("conv_transpose2d", 2, *large, None, 1, 0, 0, 1, 1)
        assert fused.backward_unavailable(a, *large) is None   # float32: copies moved along W
        line = _meta(64, 128, 65536), _meta(128, 128, 3)
        a1 = conv_transpose_args("conv_transpose1d", 1, *line, None, 1, 0, 0, 1, 1)
        assert fused.unavailable(a1, *line) is None and "float32 1-D" in fused.backward_unavailable(a1, *line)
        assert fused.backward_unavailable(a1, *(t.to(torch.bfloat16) for t in line)) is None
        half = _meta(8, 64, 1024, 1024, **bf16), _meta(64, 64, 3, 3, **bf16)
        assert fused.backward_unavailable(a, *half) is None
        assert fused.backward_unavailable(a, *half, interleaved=True) is None   # rows as they lie
        assert fused.backward_unavailable(a, *large, interleaved=True) is None   # 64 channels
        wide = _meta(64, 64, 128, 256), _meta(64, 128, 3, 5)
        aw = conv_transpose_args("conv_transpose2d", 2, *wide, None, 1, 0, 0, 1, 1)
        assert fused.backward_unavailable(aw, *wide) is None
        # 128 output channels: fused where the weight gradient takes the mma form with both
        # output tiles in one block (2d-64to128's 3x5), not where it cannot (10 columns), nor
        # where its blocks take one tile (3x3: three row taps), nor over 128 channels
        assert fused.backward_unavailable(aw, *wide, interleaved=True) is None
        for c_out, kernel, limit in ((128, (3, 10), 64), (128, (3, 3), 64), (192, (3, 5), 64),
                                     (256, (3, 5), 128)):
            other = _meta(64, 64, 128, 256), _meta(64, c_out, *kernel)
            ao = conv_transpose_args("conv_transpose2d", 2, *other, None, 1, 0, 0, 1, 1)
            assert f"channels_last float32 of {c_out} output channels (over {limit}:" in \
                fused.backward_unavailable(ao, *other, interleaved=True), (c_out, kernel)
        assert fused.backward_unavailable(aw, *(t.to(torch.bfloat16) for t in wide), interleaved=True) is None
        cube = _meta(8, 64, 64, 64, 64, **bf16), _meta(64, 64, 3, 3, 3, **bf16)
        a3 = conv_transpose_args("conv_transpose3d", 3, *cube, None, 1, 0, 0, 1, 1)
        assert fused.backward_unavailable(a3, *cube) is None
        assert fused.backward_unavailable(a3, *cube, interleaved=True) is None
        odd = _meta(32, 64, 1024, 1024, **bf16), _meta(64, 4, 3, 3, **bf16)
        a = conv_transpose_args("conv_transpose2d", 2, *odd, None, 1, 0, 0, 1, 1)
        assert "4 output channels" in fused.backward_unavailable(a, *odd)


def test_float32_channels_last_weight_gradient_reads_copies_where_products_are_many():
    """fused.float32_weight_form: planar calls from copies; channels_last ones from copies
    where the taps' products a position reach CHANNELS_LAST_PLANAR_PRODUCTS (the cases that
    ran faster so on the H200), else on their rows. The workspace counts the copies of the
    form taken: none for rows, and on channels_last tensors one planar copy of the operand
    that is not moved (the planar form on planar tensors copies it only where its rows are
    not whole 16-byte units)."""
    def form(x_shape, w_shape, padding=0, interleaved=True):
        a = conv_transpose_args("conv_transpose2d", 2, _meta(*x_shape), _meta(*w_shape), None,
                                1, padding, 0, 1, 1)
        return fused.float32_weight_form(a, interleaved), a
    assert form((8, 32, 512, 1024), (32, 32, 3, 3))[0] == "rows"        # 9,216
    assert form((8, 32, 512, 1024), (32, 32, 3, 3), interleaved=False)[0] == "planar"
    assert form((8, 32, 512, 1024), (32, 32, 3, 7), (1, 3))[0] == "planar"   # 21,504
    assert form((8, 48, 1024, 1024), (48, 48, 3, 3))[0] == "planar"     # 20,736
    assert form((8, 48, 512, 512), (48, 48, 3, 7))[0] == "planar"
    rows, a_rows = form((2, 32, 16, 32), (32, 32, 3, 3))
    assert rows == "rows"
    assert fused.backward_workspace(a_rows, 4, 1, interleaved=True) == 32 * 18 * 34
    _, a = form((2, 48, 16, 32), (48, 48, 3, 3))       # the output gradient's moved copies
    planar = fused.backward_workspace(a, 4, 1)
    assert fused.backward_workspace(a, 4, 1, interleaved=True) == planar + 48 * 16 * 32


def test_float32_channels_last_weight_gradient_on_mma_where_channels_tile():
    """fused.float32_weight_form's "mma" form (col2im.cu's tf32_weight_gradient): 2-D
    channels_last calls of channels in tiles of 64 and kernels of at most 9 columns (a warp a
    tap), the bench's 2d-1024 and 2d-3x7-512 among them; planar calls, other channel counts,
    wider kernels and 3-D stay on their forms. It copies nothing but the output gradient's
    rows (none where they are read as they lie), and its partial sums are counted in
    backward_bytes."""
    def args(x_shape, w_shape, padding=0):
        nd = len(x_shape) - 2
        return conv_transpose_args(f"conv_transpose{nd}d", nd, _meta(*x_shape),
                                   _meta(*w_shape), None, 1, padding, 0, 1, 1)
    for case in cases.BENCH[:2] + cases.MMA_WEIGHT_GRADIENT:
        a = conv_transpose_args("conv_transpose2d", 2, _meta(case.batch, case.in_channels,
                                                             *case.size),
                                _meta(case.in_channels, case.out_channels, *case.kernel_size),
                                None, 1, case.padding, 0, 1, case.dilation)
        assert fused.float32_weight_form(a, True) == "mma", case.name
        assert fused.float32_weight_form(a, False) == "planar"
        assert fused.moved_operand(a, 4, True) is None
    a = args((2, 64, 16, 32), (64, 64, 3, 3))
    assert fused.backward_workspace(a, 4, 1, interleaved=True) == 64 * 18 * 34
    assert fused.backward_workspace(a, 4, 1, interleaved=True, grad_rows=True) == 0
    blocks = gemmconv._cuda.rows_weight_gradient_grid(2, (18, 34), 64, 64, a.geometry)[0]
    assert blocks == 2 * 4 * 2   # one a stage: 2 samples, 18 rows in fives, 34 in strips of 32
    weight = 64 * 64 * 9
    assert fused.backward_bytes(a, 4, interleaved=True, grad_rows=True) == \
        4 * weight * (blocks + 3) + 2 * weight * 4
    # 2d-64to128's 3x5 of 128 output channels: one row tap a block, both output tiles
    two = args((2, 64, 16, 32), (64, 128, 3, 5))
    unbalanced = functools.partial(gemmconv._cuda.rows_weight_gradient_form, balanced=False)
    assert unbalanced((3, 5), (1, 1), 128) == (1, 2, 3, 2, 1, 4)
    assert unbalanced((3, 5), (1, 1), 64) == (1, 2, 3, 1, 1, 4)
    assert gemmconv._cuda.rows_weight_gradient_grid(2, (18, 36), 64, 128, two.geometry) == \
        (2 * 9 * 2, 3, 1)
    # Balanced warps (the default): 3x3 in 12 warps of three W taps (stages of 5 rows), 1x6
    # in 8; 3x5 of two output tiles in 8 of five; 3x7 and 1x5 in twice the warps, of two
    # tiles (stages of 4 rows)
    for kernel, out, form, warps in (((3, 3), 128, (3, 5, 2, 1, 3, 1), 12),
                                     ((1, 6), 128, (1, 2, 3, 1, 3, 1), 8),
                                     ((3, 5), 128, (1, 2, 3, 2, 5, 1), 8),
                                     ((3, 7), 64, (1, 4, 2, 1, 1, 2), 14),
                                     ((1, 5), 64, (1, 4, 2, 1, 1, 2), 10)):
        got = gemmconv._cuda.rows_weight_gradient_form(kernel, (1, 1), out)
        assert got == form
        assert unbalanced(kernel, (1, 1), out).m_tiles == 4
        assert gemmconv._cuda._wgrad_warps(kernel, got) == warps
    assert fused.float32_weight_form(args((2, 96, 16, 32), (96, 64, 3, 3)), True) == "planar"
    assert fused.float32_weight_form(args((2, 64, 16, 32), (64, 64, 3, 10)), True) == "planar"
    assert fused.float32_weight_form(args((2, 64, 4, 8, 8), (64, 64, 3, 3, 3)), True) != "mma"


@pytest.mark.parametrize("case", cases.MMA_WEIGHT_GRADIENT, ids=lambda c: c.name)
def test_rows_weight_gradient_matches_float64(case):
    """fused.rows_weight_gradient's CPU path (the kernel's boxes and shifts as strided
    slices), on the rows of channels_last float32 tensors, against float64's weight
    gradient for the output gradient rounded to TF32; malformed rows raise before any
    launch."""
    x, grad, want = weight_gradient_inputs(case, "rows-wgrad", tf32=True)
    rows = lambda t: t.float().permute(0, 2, 3, 1).contiguous()
    g = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
    got = fused.rows_weight_gradient(rows(x), rows(grad), g)
    assert got.shape == want.shape and got.dtype == torch.float32
    assert rel_error(got, want) < 1e-6
    with pytest.raises(ValueError, match="output gradient's rows"):
        fused.rows_weight_gradient(rows(x), rows(grad).transpose(1, 2), g)


def test_one_rule_names_the_operand_the_weight_gradient_moves():
    """fused.moved_operand, which backward, its memory counts and explain all follow: the
    float32 planar form moves the input or the output gradient (fused.moves_input: the
    fewer elements), nothing else moves a copy."""
    def args(x_shape, w_shape, padding=0):
        return conv_transpose_args("conv_transpose2d", 2, _meta(*x_shape), _meta(*w_shape),
                                   None, 1, padding, 0, 1, 1)
    wide = args((2, 64, 16, 32), (64, 128, 3, 5))        # 2d-64to128: the input's half as many
    even = args((2, 64, 16, 32), (64, 64, 3, 3))
    few = args((2, 32, 16, 32), (32, 32, 3, 3))          # 9,216 products: rows on channels_last
    assert fused.moved_operand(wide, 4, False) == "input" and fused.moves_input(wide, 4)
    assert fused.moved_operand(even, 4, False) == "grad" and not fused.moves_input(even, 4)
    assert fused.moved_operand(even, 4, True) is None     # channels in 64s: the mma form
    assert fused.moved_operand(few, 4, False) == "grad"
    assert fused.moved_operand(few, 4, True) is None     # its rows as they lie
    assert fused.moved_operand(even, 2, False) is None   # 16-bit tiles through registers
    assert fused.moved_operand(even, 4, False, fold=3) is None
    # Its workspace: the output gradient channels innermost, then the input's moved copies.
    assert fused.backward_workspace(wide, 4, 1) == 128 * 18 * 36 + fused._moved_copies(wide, 4, True)


def test_cost_model_sends_what_won_on_the_h200_to_the_fused_route():
    args = lambda shape, k, s, nd: conv_transpose_args(
        f"conv_transpose{nd}d", nd, _meta(*shape), _meta(shape[1], 16, *(k,) * nd), None, s, 0, 0, 1, 1)
    assert fused.preferred(args((8, 64, 1024, 1024), 3, 1, 2), True)        # channels_last 2-D
    assert fused.preferred(args((8, 64, 1024, 1024), 3, 1, 2), False)       # planar, stride 1
    assert not fused.preferred(args((8, 64, 512, 512), 3, 2, 2), False)     # planar, strided
    assert fused.preferred(args((8, 64, 512, 512), 3, 2, 2), True)          # channels_last, strided
    assert fused.preferred(args((32, 32, 131072), 5, 1, 1), False)          # 1-D, stride 1
    assert not fused.preferred(args((16, 32, 131072), 3, 2, 1), False)      # 1-D, strided, large
    assert not fused.preferred(args((128, 256, 8, 8), 4, 2, 2), True)       # DCGAN's layers
    assert not fused.preferred(args((8, 128, 128, 128), 2, 2, 2), True)     # U-Net's up-convs
    assert not fused.preferred(args((8, 48, 64, 64, 64), 3, 1, 3), True)    # 3-D, large


@pytest.mark.parametrize("shape,c_out,k,s,p,op,interleaved,sent", [
    ((16, 128, 32, 32), 64, 3, 2, 1, 1, False, True),    # the VAE decoder's: 4.2M outputs
    ((16, 64, 64, 64), 32, 3, 2, 1, 1, True, True),
    ((16, 256, 16, 16), 128, 3, 2, 1, 1, True, False),   # 2.1M outputs
    ((128, 256, 8, 8), 128, 4, 2, 1, 0, False, True),    # DCGAN's
    ((128, 128, 16, 16), 64, 4, 2, 1, 0, True, True),
    ((128, 64, 32, 32), 3, 4, 2, 1, 0, True, False),     # its last: three output channels
    ((8, 256, 64, 64), 128, 2, 2, 0, 0, True, True),     # U-Net's: one tap an output
    ((8, 256, 64, 64), 128, 2, 2, 0, 0, False, False),
    ((8, 512, 32, 32), 256, 2, 2, 0, 0, True, False),    # 8.4M outputs
    ((16, 128, 2048), 64, 4, 2, 1, 0, False, False),     # HiFi-GAN's: 1-D
    ((8, 64, 512, 512), 64, 3, 2, 1, 1, False, False)])  # planar, over SMALL_OUTPUT
def test_cost_model_sends_the_forward_of_small_2d_layers_of_many_taps_to_the_fused_route(
        shape, c_out, k, s, p, op, interleaved, sent):
    """Below SMALL_OUTPUT, 2-D forwards whose outputs receive two taps or more, of 4M
    output elements (16M channels_last at one tap an output) and 32 output channels or
    more: the zoo's layers on which the fused kernel, graphed, beat the column routes
    (fused.SMALL_FUSED_OUTPUT). Their backward stays where it was."""
    nd = len(shape) - 2
    x, w = _meta(*shape), _meta(shape[1], c_out, *(k,) * nd)
    a = conv_transpose_args(f"conv_transpose{nd}d", nd, x, w, None, s, p, op, 1, 1)
    assert fused.forward_preferred(a, interleaved, x.element_size()) == sent
    assert fused.small_preferred(a, interleaved) == sent
    assert not fused.backward_preferred(a, interleaved, x.element_size())
    if fused._triton_available():
        assert (fused.unavailable(a, x, w, interleaved) is None) == sent


@pytest.mark.parametrize("name,dtype,sent", [
    ("3d-64cube", torch.float32, True), ("3d-32to64", torch.float32, True),
    ("3d-stride2-dil2", torch.float32, True), ("3d-96cube", torch.float32, True),  # 24: 96 bytes
    ("3d-3x5x7", torch.float32, False),                                         # 16: 64 bytes
    ("3d-32to64", torch.bfloat16, True), ("3d-stride2-dil2", torch.bfloat16, True),
    ("3d-64cube", torch.bfloat16, True), ("3d-3x5x7", torch.bfloat16, True),
    ("3d-96cube", torch.float16, True)])
def test_cost_model_sends_the_forward_of_channels_last_3d_calls_to_the_fused_route(name, dtype, sent):
    """3-D forwards go to the fused route on channels_last tensors in 16-bit types, and in
    float32 where their output channels take 96 bytes (fused.WIDE_3D_FLOAT32_BYTES: the
    cases that won there), never on planar ones, and their backward stays where it was."""
    case = next(c for c in cases.BENCH if c.name == name)
    x, w = _meta(case.batch, case.in_channels, *case.size, dtype=dtype), \
        _meta(case.in_channels, case.out_channels, *case.kernel_size, dtype=dtype)
    a = conv_transpose_args("conv_transpose3d", 3, x, w, None, **case.kwargs)
    assert fused.forward_preferred(a, True, x.element_size()) == sent
    assert not fused.forward_preferred(a, False, x.element_size())
    assert not fused.preferred(a, True)      # what the backward's rule starts from
    if fused._triton_available():
        assert (fused.unavailable(a, x, w, interleaved=True) is None) == sent
    small = _meta(2, case.in_channels, 8, 8, 8, dtype=dtype)   # the 3-D U-Net's size: columns
    a = conv_transpose_args("conv_transpose3d", 3, small, w, None, **case.kwargs)
    assert not fused.forward_preferred(a, True, small.element_size())
    # The 3-D U-Net's k2 s2 up-convolution, 16M outputs of one tap each: columns.
    x, w = _meta(2, 64, 32, 32, 32, dtype=dtype), _meta(64, 32, 2, 2, 2, dtype=dtype)
    a = conv_transpose_args("conv_transpose3d", 3, x, w, None, 2, 0, 0, 1, 1)
    assert a.output_elements >= fused.SMALL_FUSED_OUTPUT
    assert not fused.forward_preferred(a, True, x.element_size())


def test_cost_model_sends_the_backward_of_wide_3d_calls_to_the_fused_kernels(monkeypatch):
    """3-D stride-1 calls: the forward on the column routes, the backward on the fused
    kernels where the output channels fill 64 bytes of the input gradient's 128-byte
    reduction chunk (3d-64cube and 3d-32to64 won there in bfloat16, 3d-96cube's 24 lost),
    counting the taps along W folded into 32 bytes of channels (3d-3x5x7's 16: 7 taps); in
    float32 too, as fused.FLOAT32_BACKWARD_DIMS says."""
    def args(shape, c_out, k, s, dtype):
        k = k if isinstance(k, tuple) else (k,) * 3
        x, w = _meta(*shape, dtype=dtype), _meta(shape[1], c_out, *k, dtype=dtype)
        return conv_transpose_args("conv_transpose3d", 3, x, w, None, s, 0, 0, 1, 1), x, w
    for c_out, dtype, sent, k in ((48, torch.bfloat16, True, 3), (64, torch.float16, True, 3),
                                  (24, torch.bfloat16, False, 3), (64, torch.float32, True, 3),
                                  (16, torch.float32, True, 3), (12, torch.float32, False, 3),
                                  (16, torch.bfloat16, True, (3, 5, 7)),
                                  (24, torch.bfloat16, False, (3, 3, 1))):
        a, x, w = args((8, 48, 96, 96, 96), c_out, k, 1, dtype)
        assert not fused.preferred(a, False)                          # the forward: columns
        assert fused.backward_preferred(a, False, x.element_size()) == sent, (c_out, dtype)
        if fused._triton_available():
            assert (fused.backward_unavailable(a, x, w) is None) == sent
            assert fused.unavailable(a, x, w) is not None
    monkeypatch.setattr(fused, "FLOAT32_BACKWARD_DIMS", (2,))           # float32 2-D only
    a, x, w = args((8, 48, 96, 96, 96), 64, 3, 1, torch.float32)
    if fused._triton_available():
        assert not fused.backward_takes(a, x, w)
        assert "float32 3-D (the column routes' backward is faster there)" in \
            fused.backward_unavailable(a, x, w)
    monkeypatch.undo()
    a, x, _ = args((8, 48, 64, 64, 64), 64, 3, 2, torch.bfloat16)       # strided
    assert not fused.backward_preferred(a, False, 2)
    a, x, _ = args((1, 48, 16, 16, 16), 64, 3, 1, torch.bfloat16)       # small
    assert not fused.backward_preferred(a, False, 2)


@pytest.mark.parametrize("batch,extent,c_out,phases,size", [
    (8, (1, 1024, 1024), 64, 1, 4), (128, (1, 8, 8), 128, 4, 2), (16, (1, 1, 256), 256, 8, 4),
    (2, (3, 5, 7), 3, 1, 4), (1, (1, 1, 1), 512, 1, 2)])
@pytest.mark.parametrize("rounds", [True, False])
def test_tiles_are_boxes_of_powers_of_two_within_the_tile(batch, extent, c_out, phases, size, rounds):
    cfg = fused.config(batch, extent, 64, c_out, phases, size, rounds)
    bm = math.prod(cfg.box)
    assert all(b & (b - 1) == 0 for b in (*cfg.box, cfg.bk, cfg.bn)) and bm <= 128
    assert cfg.bk * size == 128 and cfg.bn == min(128, max(16, 1 << (c_out - 1).bit_length()))
    few = fused._programs(batch, extent, c_out, phases, fused._fitted_box(batch, extent, 128), cfg.bn) < 2 * fused.WAVE
    in_registers = size == 4 and rounds and cfg.bn == 128     # float32 tiles rounded there
    assert bm == (64 if few or in_registers else 128) or bm < 64
    # five stages where 64 positions of float32 are rounded in registers, else four
    assert cfg.stages == (5 if bm <= 64 and size == 4 and rounds else 4)


@pytest.mark.parametrize("batch,extent", [
    (8, (1, 514, 518)), (64, (1, 130, 260)), (8, (1, 1026, 1026)), (8, (1, 514, 1026)),
    (8, (66, 66, 66)), (16, (18, 36, 70)), (8, (98, 98, 98)), (3, (1, 1, 131084))])
@pytest.mark.parametrize("bm", [64, 128])
def test_tiles_pad_odd_grids_by_a_few_percent(batch, extent, bm):
    """The forward's output grids of the 17 cases and their 3-D kin: a box filling W first
    pads them by 12-94% (518 wide in boxes of 128: 640 positions computed)."""
    box = fused._fitted_box(batch, extent, bm)
    assert math.prod(box) == bm and all(b & (b - 1) == 0 for b in box)
    padded = math.prod(-(-s // b) * b for s, b in zip((batch, *extent), box))
    assert padded <= 1.07 * batch * math.prod(extent), box


def test_tiles_keep_long_runs_along_w_where_they_pad_as_little():
    assert fused._fitted_box(8, (1, 512, 1024), 128) == (1, 1, 1, 128)
    assert fused._fitted_box(16, (16, 32, 64), 128) == (1, 1, 2, 64)
    assert fused._fitted_box(8, (1, 1026, 1026), 128) == (1, 1, 4, 32)   # 3.1%, where 8 x 16 pads 2.0%
    assert fused._fitted_box(2, (1, 4, 4), 128) == (2, 1, 4, 4)           # the whole call, 32 positions


@pytest.mark.parametrize("element_size", [2, 4])
def test_tiles_of_planar_outputs_store_runs_of_128_bytes_along_w(element_size):
    for batch, extent, c_out in [(64, (1, 130, 260), 128), (8, (1, 514, 518), 64), (2, (1, 4, 6), 4)]:
        planar = fused.config(batch, extent, 64, c_out, 1, element_size, False, planar=True)
        assert planar.box[-1] >= min(128 // element_size, fused._pow2(extent[-1])), planar
        assert planar.bn == fused.config(batch, extent, 64, c_out, 1, element_size, False).bn
    assert fused.config(64, (1, 130, 260), 64, 128, 1, 4, False).box[-1] == 8   # channels_last


def test_routes_name_the_fused_route():
    a = conv_transpose_args("conv_transpose2d", 2, _meta(2, 8, 4, 4), _meta(8, 4, 3, 3), None, 1, 0, 0, 1, 1)
    assert ops.describe_route(a, True, True) == "channels_last: " + ops.FUSED_ROUTE
    assert ops.describe_route(a, False, False) != ops.FUSED_ROUTE


def _has_triton() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _has_triton(), reason="needs Triton")
def test_launches_after_the_first_go_to_the_compiled_kernel_per_dtype_and_alignment(monkeypatch):
    """_triton.Launch: the first launch of each dtype and 16-byte alignment of its tensors
    goes through the JIT function and keeps the compiled kernel it returns; later ones call
    that with the fixed integers and the constexprs in the kernel's argument order."""
    from gemmconv import _triton
    calls = []

    class Compiled:
        def __getitem__(self, grid):
            return lambda *args: calls.append(("compiled", grid, args))

    class Kernel:
        arg_names = ["x", "y", "n", "m", "BLOCK", "ROUND"]

        def __getitem__(self, grid):
            return lambda *args, **kw: calls.append(("jit", grid, args, kw)) or Compiled()

    monkeypatch.setattr(_triton, "CompiledKernel", Compiled)
    launch = _triton.Launch(Kernel(), (6,), (10, 20), ROUND=True, BLOCK=64, num_warps=4)
    x, y = torch.zeros(8), torch.zeros(8, dtype=torch.float64)
    launch(x, y)
    launch(x, y)
    launch(x[1:], y)           # 4 bytes off 16: compiled afresh
    launch(x[1:], y)
    launch(x.half(), y)        # another dtype
    launch(x[4:], y)           # 16 bytes on: the first kernel
    assert [c[0] for c in calls] == ["jit", "compiled", "jit", "compiled", "jit", "compiled"]
    assert calls[0][1:] == ((6,), (x, y, 10, 20), dict(ROUND=True, BLOCK=64, num_warps=4))
    assert calls[1] == ("compiled", (6, 1, 1), (x, y, 10, 20, 64, True))
    assert len(launch.compiled) == 3


@interpreted
def test_interpreted_launches_keep_no_compiled_kernel():
    """Under Triton's interpreter every launch goes through the JIT function (it compiles
    nothing), and a plan's second call gives the first one's result."""
    case = _aligned(cases.BENCH[1].scaled(64))
    x, w, b = case.tensors(torch.float32, "cpu", generator("interpreted launches"))
    a = conv_transpose_args("conv_transpose2d", 2, x, w, b, case.stride, case.padding,
                            case.output_padding, 1, case.dilation)
    taps, rows = fused.transposed_taps(a.geometry), x.movedim(1, -1).contiguous()
    weights = fused.tap_weights(w)
    outs = [fused.implicit_gemm(rows, weights, b, taps, torch.full(
        (case.batch, *case.output_size, case.out_channels), float("nan"))) for _ in range(2)]
    assert torch.equal(outs[0], outs[1]) and not outs[0].isnan().any()
    plan = fused._gemm_plan(tuple(rows.shape), tuple(weights.shape), tuple(outs[0].shape),
                            outs[0].stride(), torch.float32, taps, "tf32", True, True, None,
                            rows.device)
    assert plan.launch is not None and plan.launch.compiled == {}


@pytest.mark.skipif(not _has_triton(), reason="needs Triton")
def test_forget_plans_forgets_every_kept_launch_plan():
    cpu = torch.device("cpu")
    g = Geometry((3, 3), (1, 1), (1, 1), (1, 1))
    kept = [
        (fused._transpose_launch, ((2, 16, 5, 7), 4, True, False, cpu)),
        (fused._pitched_launch, (10, 5, 8, cpu)),
        (fused._shifted_launch, ((0, 3), 10, 16, 1, 5, 12, True, False, cpu)),
        (fused._gemm_plan, ((2, 1, 5, 7, 16), (9, 16, 16), (2, 1, 5, 7, 16), (560, 560, 112, 16, 1),
                            torch.float32, fused.transposed_taps(g), "tf32", True, True, None, cpu)),
        (fused._grad_plan, ((2, 16, 5, 7), (2, 16, 5, 7), g, torch.bfloat16, "tf32", None, False,
                            False, cpu)),
    ]
    for plan, args in kept:
        plan(*args)
    assert all(plan.cache_info().currsize for plan, _ in kept)
    fused.forget_plans()
    assert [plan.cache_info().currsize for plan, _ in kept] == [0] * len(kept)
