"""GPU: the shared case table on CUDA, against float64 references. Marked ``cuda``."""
import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

import gemmconv
from gemmconv import _cuda, cases, gemm, ops
from gemmconv.columns import col2im, im2col
from gemmconv.shapes import ConvArgumentError, Geometry
from gemmconv.bench import reference as reference64
from helpers import (OURS, allowed_routes, force_im2col_route, gather_first_stride_one, generator,
                     poison_allocator, reference, rel_error, rows_outermost)

pytestmark = pytest.mark.cuda
CUDA = "cuda"
CASES = cases.random_cases(100, seed=11) + cases.EDGE + cases.LARGE_KERNELS + [c.scaled(4096) for c in cases.BENCH]
# mode: (dtype, float32 precision policy, tolerance on ||out - ref|| / ||ref||)
MODES = {
    "float64": (torch.float64, "torch", 1e-12),
    "float32-ieee": (torch.float32, "ieee", 1e-5),
    "float32-tf32": (torch.float32, "tf32", 5e-3),
    "float16": (torch.float16, "torch", 5e-3),
    "bfloat16": (torch.bfloat16, "torch", 3e-2),
}


def _leaves(case, key, dtype):
    tensors = case.tensors(dtype, CUDA, generator(case.name, key))
    return [None if t is None else t.requires_grad_() for t in tensors]


def _assert_matches_float64(case, leaves, out, tolerance):
    """``out`` and its gradients for a fresh grad_output, each against float64 torch."""
    x, w, b = leaves
    grad_out = torch.randn(out.shape, generator=generator(case.name, "g"), dtype=torch.float64).to(CUDA)
    refs = reference64(case, x, w, b, grad_out)
    assert rel_error(out, refs[0]) < tolerance
    needed = [t for t in leaves if t is not None]
    for m, t in zip(torch.autograd.grad(out, needed, grad_out.to(out.dtype)), refs[1:]):
        assert rel_error(m, t) < tolerance


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_float64_reference(case, mode):
    dtype, precision, tolerance = MODES[mode]
    x, w, b = leaves = _leaves(case, mode, dtype)
    out_shape = (case.out_channels, *case.output_size) if case.unbatched else \
        (case.batch, case.out_channels, *case.output_size)
    grad_out = torch.randn(out_shape, generator=generator(case.name, "grad"),
                           dtype=torch.float64).to(CUDA)
    with gemmconv.float32_precision(precision):
        poison_allocator(math.prod(out_shape) * x.element_size())
        out = OURS[case.nd](x, w, b, **case.kwargs)
        assert out.dtype == dtype and out.device == x.device
        if out.numel() == 0:
            assert out.shape == out_shape
            return
        needed = [t for t in leaves if t is not None]
        poison_allocator(x.numel() * x.element_size())
        mine = torch.autograd.grad(out, needed, grad_out.to(dtype))
    refs = reference64(case, x, w, b, grad_out)
    assert rel_error(out, refs[0]) < tolerance
    for m, t in zip(mine, refs[1:]):
        assert m.dtype == dtype and rel_error(m, t) < tolerance


KERNEL_CASES = cases.random_cases(30, seed=12) + cases.EDGE + cases.LARGE_KERNELS


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16],
                         ids=str)
@pytest.mark.parametrize("case", KERNEL_CASES, ids=lambda c: c.name)
def test_kernels_write_every_element(case, dtype):
    """col2im and im2col into NaN-poisoned outputs, against the CPU path in float64."""
    g = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
    planes, grid, image = max(case.batch, 1) * case.out_channels, case.size, case.output_size
    gen = generator(case.name, str(dtype))
    columns = torch.randn(planes, g.taps, math.prod(grid), generator=gen).to(dtype)
    bias = torch.randn(case.out_channels, generator=gen).to(dtype)
    out = torch.full((planes, *image), float("nan"), dtype=dtype, device=CUDA)
    col2im(columns.to(CUDA), bias.to(CUDA), g, grid, image, out=out)
    ref = col2im(columns.double(), bias.double(), g, grid, image)
    assert rel_error(out, ref) < {torch.float64: 1e-14, torch.float32: 1e-6}.get(dtype, 1e-2)

    pixels = torch.randn(planes, *image, generator=gen).to(dtype)
    cols = torch.full((planes, g.taps, *grid), float("nan"), dtype=dtype, device=CUDA)
    im2col(pixels.to(CUDA), g, grid, out=cols.view(planes, g.taps, -1))
    assert torch.equal(cols.view(planes, g.taps, -1).cpu(), im2col(pixels, g, grid))


BAND_CASES = cases.random_cases(12, seed=13) + cases.EDGE[:9] + cases.EDGE[-1:]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", BAND_CASES, ids=lambda c: c.name)
def test_specialised_kernels_over_bands(monkeypatch, case, dtype):
    """The kernels compiled for each layer's taps, on bands of rows with their halos."""
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    row = case.out_channels * math.prod(case.kernel_size) * math.prod(case.size[1:]) * 2
    monkeypatch.setattr(ops, "_workspace_limit", 2 * row)
    x, w, b = leaves = _leaves(case, "bands", dtype)
    poison_allocator(case.batch * case.out_channels * math.prod(case.output_size) * 4)
    out = OURS[case.nd](x, w, b, **case.kwargs)
    if out.numel() == 0:
        return
    _assert_matches_float64(case, leaves, out, 3e-2 if dtype == torch.bfloat16 else 5e-3)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", [c for c in CASES if all(s == 1 for s in c.stride)][:40],
                         ids=lambda c: c.name)
def test_im2col_route(monkeypatch, case, dtype):
    """The stride-1 route as a convolution, forward and backward, forced, through the
    specialised kernels."""
    force_im2col_route(monkeypatch)
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    x, w, b = leaves = _leaves(case, "im2col-route", dtype)
    poison_allocator(case.batch * case.out_channels * math.prod(case.output_size) * x.element_size())
    out = OURS[case.nd](x, w, b, **case.kwargs)
    tolerance = {torch.float64: 1e-12, torch.float32: 5e-3}.get(dtype, 3e-2)
    if out.numel() == 0:
        return
    _assert_matches_float64(case, leaves, out, tolerance)


@pytest.mark.parametrize("case", [c.scaled(1 << 16) for c in cases.BENCH[::3]], ids=lambda c: c.name)
def test_bitwise_identical_across_runs(case):
    x, w, b = leaves = _leaves(case, "determinism", torch.float32)
    runs = []
    for _ in range(2):
        out = OURS[case.nd](x, w, b, **case.kwargs)
        runs.append([out, *torch.autograd.grad(out, leaves, torch.ones_like(out))])
    for first, second in zip(*runs):
        assert torch.equal(first, second)


def test_float32_precision_policy_reaches_cublas():
    case = cases.Case("deep", 4, 256, 64, (3, 3), (32, 32))
    x, w, b = case.tensors(torch.float32, CUDA, generator("deep"))
    ref = reference64(case, x, w, b)[0]
    error = lambda: rel_error(OURS[2](x, w, b, **case.kwargs), ref)
    with gemmconv.float32_precision("ieee"):
        assert error() < 1e-5
    with gemmconv.float32_precision("tf32"):
        assert 1e-5 < error() < 5e-3          # TF32 rounds inputs to 10 mantissa bits
    conv = torch.backends.cudnn.conv
    before = conv.fp32_precision
    try:
        with gemmconv.float32_precision("torch"):
            conv.fp32_precision = "ieee"
            assert error() < 1e-5
            conv.fp32_precision = "tf32"
            assert error() > 1e-5
    finally:
        conv.fp32_precision = before



def _weight_product(dtype, key):
    """A weight shared by a batch, column-major as the routes pass it, a batch of operands,
    their float64 product, and a poisoned output."""
    gen = generator("weight-layout", key)
    w = torch.randn(3, 40, 24, generator=gen, dtype=torch.float64)
    b = torch.randn(6, 3, 40, 50, generator=gen, dtype=torch.float64)
    a = w.to(CUDA, dtype).transpose(-1, -2).unsqueeze(0).expand(6, -1, -1, -1)
    out = torch.full((6, 3, 24, 50), float("nan"), dtype=dtype, device=CUDA)
    return a, b.to(CUDA, dtype), out, torch.matmul(w.transpose(-1, -2), b)


@pytest.mark.parametrize("faster", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_weight_in_either_layout(monkeypatch, faster, dtype):
    monkeypatch.setattr(gemm, "_kept_layouts", {})
    monkeypatch.setattr(gemm, "LAYOUT_TRIAL_FLOPS", 1)
    monkeypatch.setattr(gemm, "_products", {})
    monkeypatch.setattr(gemm, "_other_is_faster", lambda *args: faster)
    a, b, out, ref = _weight_product(dtype, f"{faster}{dtype}")
    with gemmconv.float32_precision("ieee"):
        gemm.matmul(a, b, out)
    assert rel_error(out, ref) < (1e-14 if dtype == torch.float64 else 1e-6)
    assert list(gemm._kept_layouts.values()) == [faster]


def test_layout_timed_on_the_gpu_then_kept(monkeypatch):
    monkeypatch.setattr(gemm, "_kept_layouts", {})
    monkeypatch.setattr(gemm, "LAYOUT_TRIAL_FLOPS", 1)
    monkeypatch.setattr(gemm, "_products", {})
    a, b, out, ref = _weight_product(torch.float32, "timed")
    first = gemm.matmul(a, b, out).clone()
    assert len(gemm._kept_layouts) == 1 and rel_error(first, ref) < 5e-3
    out.fill_(float("nan"))
    assert torch.equal(gemm.matmul(a, b, out), first)      # the kept layout, bit for bit


def on_a_busy_stream(case, key, call):
    """``call(x, w, b)`` on a side stream, with the case's fresh tensors and ``x`` ready only
    late on that stream (after a long sleep kernel): work on another stream would read it
    too early. Returns x, w, b and what ``call`` returned, once the stream is done."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        x, w, b = case.tensors(torch.float32, CUDA, generator(key))
        torch.cuda._sleep(100_000_000)        # keep the stream busy ...
        x = x * 2                             # ... so x is only ready late, on this stream
        result = call(x, w, b)
    stream.synchronize()
    return x, w, b, result


def test_runs_on_the_current_stream():
    case = cases.BENCH[4].scaled(1 << 14)

    def forward_and_input_gradient(x, w, b):
        out = OURS[case.nd](x, w, b, **case.kwargs)
        return out, torch.autograd.grad(OURS[case.nd](x.requires_grad_(), w, b, **case.kwargs),
                                        x, torch.ones_like(out))
    x, w, b, (out, grads) = on_a_busy_stream(case, "stream", forward_and_input_gradient)
    refs = reference64(case, x, w.detach(), b, torch.ones_like(out))
    assert rel_error(out, refs[0]) < 5e-3 and rel_error(grads[0], refs[1]) < 5e-3


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_device():
    case = cases.EDGE[5]
    x, w, b = case.tensors(torch.float32, "cuda:1", generator("cuda:1"))
    with torch.cuda.device(0):
        out = OURS[2](x.requires_grad_(), w, b, **case.kwargs)
        grad = torch.autograd.grad(out, x, torch.ones_like(out))[0]
    assert out.device == grad.device == torch.device("cuda:1")
    refs = reference64(case, x, w, b, torch.ones_like(out))
    assert rel_error(out, refs[0]) < 5e-3 and rel_error(grad, refs[1]) < 5e-3


def test_layouts_and_modules_on_cuda():
    case = cases.EDGE[8]                                      # 3-D, asymmetric, groups
    x, w, b = case.tensors(torch.float64, CUDA, generator("layouts"))
    ref = reference(case, x, w, b)
    weird_x = x.to(memory_format=torch.channels_last_3d)
    weird_w = w.transpose(0, 1).contiguous().transpose(0, 1)
    assert rel_error(OURS[3](weird_x, weird_w, b, **case.kwargs), ref) < 1e-12
    layer = gemmconv.nn.ConvTranspose3d(case.in_channels, case.out_channels, case.kernel_size,
                                        **case.kwargs).to(CUDA, torch.float64)
    torch_layer = torch.nn.ConvTranspose3d(case.in_channels, case.out_channels, case.kernel_size,
                                           **case.kwargs).to(CUDA, torch.float64)
    torch_layer.load_state_dict(layer.state_dict())
    assert rel_error(layer(x), torch_layer(x)) < 1e-12


def test_bad_input_on_cuda_raises_before_any_launch():
    x = torch.randn(2, 4, 5, 5, device=CUDA)
    w = torch.randn(4, 3, 3, 3, device=CUDA)
    with pytest.raises(ConvArgumentError, match="same device"):
        gemmconv.conv_transpose2d(x, w.cpu())
    with pytest.raises(ConvArgumentError, match="same device"):
        gemmconv.conv_transpose2d(x, w, torch.randn(3))
    with pytest.raises(ConvArgumentError, match="output padding must be smaller"):
        gemmconv.conv_transpose2d(x, w, output_padding=1)
    with pytest.raises(ConvArgumentError, match="Output size is too small"):
        gemmconv.conv_transpose2d(x, w, padding=9)
    torch.cuda.synchronize()                                   # and no CUDA error is pending


def test_more_than_2_31_elements():
    """An fp16 output of 2^32 elements; stride = kernel, so bands of rows check exactly."""
    x = torch.randn(1, 1, 16384, 16384, device=CUDA, dtype=torch.float16, requires_grad=True)
    w = torch.randn(1, 4, 2, 2, device=CUDA, dtype=torch.float16)
    b = torch.randn(4, device=CUDA, dtype=torch.float16)
    poison_allocator(2**33)
    out = gemmconv.conv_transpose2d(x, w, b, stride=2)
    assert out.shape == (1, 4, 32768, 32768) and out.numel() == 2**32
    assert not out.isnan().any()
    grad_out = torch.randn_like(out)
    grad = torch.autograd.grad(out, x, grad_out)[0]
    for r in (0, 5000, 12000, 16384 - 8):                      # the last band is past 2^31
        band = x[..., r:r + 8, :].detach().double().requires_grad_()
        ref = F.conv_transpose2d(band, w.double(), b.double(), stride=2)
        assert rel_error(out[..., 2 * r:2 * r + 16, :], ref) < 5e-3
        ref_grad = torch.autograd.grad(ref, band, grad_out[..., 2 * r:2 * r + 16, :].double())[0]
        assert rel_error(grad[..., r:r + 8, :], ref_grad) < 5e-3


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", [c for c in CASES if c.batch][:30], ids=lambda c: c.name)
def test_split_k_weight_gradient(monkeypatch, case, dtype):
    monkeypatch.setattr(ops, "SAMPLES_INNER_MAX_POSITIONS", 0)   # per-sample products, split
    monkeypatch.setattr(ops, "SPLIT_MIN_POSITIONS", 2)
    monkeypatch.setattr(ops, "SPLIT_TARGET_TILES", 10**6)
    monkeypatch.setattr(ops, "SPLIT_ALIGN", 1)
    x, w, b = _leaves(case, "split-k", dtype)
    out = OURS[case.nd](x, w, b, **case.kwargs)
    grad_out = torch.randn(out.shape, generator=generator(case.name, "g"), dtype=torch.float64).to(CUDA)
    refs = reference64(case, x.detach(), w, None, grad_out)
    tolerance = {torch.float64: 1e-12, torch.float32: 5e-3}.get(dtype, 3e-2)
    assert rel_error(torch.autograd.grad(out, w, grad_out.to(dtype))[0], refs[1]) < tolerance


SPLIT_CASES = [c for c in cases.random_cases(24, seed=14) + cases.EDGE
               if c.batch and not c.unbatched and 1 in c.stride] + \
    [c.scaled(4096) for c in cases.BENCH if 1 in c.stride]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", SPLIT_CASES, ids=lambda c: c.name)
def test_every_split_of_the_taps(monkeypatch, case, dtype):
    """The forward along every route the strides allow (im2col of the gathered dims' taps,
    GEMM, col2im of the rest) through the kernels compiled for each geometry, into a
    poisoned output; float64 also in one-row bands."""
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    x, w, b = case.tensors(dtype, CUDA, generator(case.name, "split", str(dtype)))
    a = ops.conv_transpose_args(f"conv_transpose{case.nd}d", case.nd, x, w, b, groups=case.groups,
                                **{k: v for k, v in case.kwargs.items() if k != "groups"})
    ref = reference64(case, x, w, b)[0]
    tolerance = {torch.float64: 1e-12, torch.float32: 5e-3}.get(dtype, 3e-2)
    limits = (1 << 30, 1) if dtype == torch.float64 and case.name.startswith("random") else (1 << 30,)
    for route, rows in allowed_routes(case, a):
        for limit in limits:
            monkeypatch.setattr(ops, "_workspace_limit", limit)
            poison_allocator(case.batch * case.out_channels * math.prod(case.output_size) * x.element_size())
            out = ops._forward(x, w, b, a, route, rows)
            assert rel_error(out, ref) < tolerance, (route, rows, limit)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("case", SPLIT_CASES, ids=lambda c: c.name)
def test_split_routes_in_training(monkeypatch, case, dtype):
    """Forward and backward with every forward pass (including the stride-1 convolutions
    the backward runs) gathering the taps of its first stride-1 dim."""
    gather_first_stride_one(monkeypatch)
    x, w, b = leaves = _leaves(case, "split-train", dtype)
    poison_allocator(case.batch * case.out_channels * math.prod(case.output_size) * x.element_size())
    out = OURS[case.nd](x, w, b, **case.kwargs)
    _assert_matches_float64(case, leaves, out, 1e-12 if dtype == torch.float64 else 5e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("kernel, stride, padding, dilation, grid, width", [
    ((3, 5, 7), (2, 2, 2), (1, 2, 3), (1, 1, 1), (4, 6, 48), 96),   # runs from windows
    ((3, 3), (1, 1), (1, 1), (1, 1), (9, 96), 99),                  # runs loaded one by one
    ((3, 2, 5), (2, 1, 3), (0, 1, 2), (1, 2, 1), (5, 4, 37), 110),  # one position a thread
    ((1, 3), (1, 2), (0, 1), (1, 1), (6, 64), 128)])                 # one outer tap
def test_im2col_thread_per_outer_tap(monkeypatch, dtype, kernel, stride, padding, dilation,
                                     grid, width):
    """im2col with a thread per run (or position) and tap of the outer dims, compiled, into
    poisoned columns: the PyTorch path's copy, exactly."""
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    monkeypatch.setattr(_cuda, "_launches", {})
    monkeypatch.setattr(_cuda, "im2col_split_taps", lambda g, pack: True)
    g = Geometry(kernel, stride, padding, dilation)
    samples, channels = 3, 4
    image = (*g.image_size(grid, (0,) * len(grid))[:-1], width)
    pixels = torch.randn(samples * channels, *image, generator=generator("split", str(kernel)),
                         dtype=torch.float64).to(dtype)
    view = torch.full((samples, channels, g.taps, *grid), float("nan"), dtype=dtype, device=CUDA)
    layouts = _record_layouts(monkeypatch)
    im2col(pixels.to(CUDA), g, grid, out=view)
    layout = _cuda.Layout(*layouts[-1])
    assert layout.im2col_split_taps and layout.im2col_positions == 1
    assert torch.equal(view.reshape(-1, g.taps, math.prod(grid)).cpu(), im2col(pixels, g, grid))


LONG_ROWS = [dataclasses.replace(c, name=c.name + "-long", batch=1, size=(*c.size[:-1], 45 + 61 * i))
             for i, c in enumerate(cases.random_cases(9, seed=15))]


def _record_layouts(monkeypatch) -> list:
    """The layouts (fields of _cuda.Layout) of the compiled kernels each launch asks for, in
    launch order."""
    compiled, layouts = _cuda._kernels, []

    def record(device, dtype, nd, index, taps, *layout):
        layouts.append(layout)
        return compiled(device, dtype, nd, index, taps, *layout)
    monkeypatch.setattr(_cuda, "_kernels", record)
    return layouts


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", LONG_ROWS, ids=lambda c: c.name)
def test_im2col_over_long_rows(monkeypatch, case, dtype):
    """The compiled im2col with several positions per thread, 32 apart (rows of 45 to 533
    positions: whole warps and rows that end part-way through one), into poisoned columns,
    with the positions per thread chosen for the grid's innermost width."""
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    layouts = _record_layouts(monkeypatch)
    g = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
    planes, grid, image = case.out_channels, case.size, case.output_size
    pixels = torch.randn(planes, *image, generator=generator(case.name, "long")).to(dtype)
    cols = torch.full((planes, g.taps, *grid), float("nan"), dtype=dtype, device=CUDA)
    on_gpu = pixels.to(CUDA)
    im2col(on_gpu, g, grid, out=cols.view(planes, g.taps, -1))
    assert _cuda.im2col_span(g, grid[-1], True) > 1 or grid[-1] < 64 or g.taps > 4
    packed = _cuda.im2col_pack(g, cols, _cuda.im2col_windowed(g, on_gpu, g.padding)) > 1  # runs
    assert _cuda.Layout(*layouts[-1]).im2col_positions == \
        (1 if packed else _cuda.im2col_span(g, grid[-1], True))
    assert torch.equal(cols.view(planes, g.taps, -1).cpu(), im2col(pixels, g, grid))


# (kernel, stride, padding, dilation, grid, spans per col2im thread): outer taps and long
# rows, whole runs of 32 x spans and rows that end part-way through one.
COL2IM_RUNS = [((3, 3), (1, 1), (0, 0), (1, 1), (5, 510), 2),
               ((3, 3), (1, 1), (1, 0), (1, 1), (4, 398), 2),
               ((2, 2), (1, 4), (0, 1), (1, 1), (4, 256), 4),
               ((2, 1), (1, 4), (0, 0), (1, 1), (3, 127), 4),
               ((2, 2, 3), (1, 1, 1), (0, 1, 1), (1, 2, 1), (3, 2, 256), 2)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kernel, stride, padding, dilation, grid, spans", COL2IM_RUNS)
def test_col2im_runs_of_spans(monkeypatch, kernel, stride, padding, dilation, grid, spans, dtype):
    """The compiled col2im with several spans per thread, 32 apart along a row, into a
    poisoned image, against the PyTorch path in float64; the spans are chosen for the
    image's innermost width."""
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    layouts = _record_layouts(monkeypatch)
    g = Geometry(kernel, stride, padding, dilation)
    planes, channels, image = 6, 3, g.image_size(grid, (0,) * len(grid))
    gen = generator("runs", str(kernel), str(grid))
    columns = torch.randn(planes, g.taps, math.prod(grid), generator=gen, dtype=torch.float64)
    bias = torch.randn(channels, generator=gen, dtype=torch.float64)
    out = torch.full((planes, *image), float("nan"), dtype=dtype, device=CUDA)
    col2im(columns.to(CUDA, dtype), bias.to(CUDA, dtype), g, grid, image, out=out)
    assert layouts[-1][1] == spans == _cuda.col2im_spans(g, image[-1], True)
    ref = col2im(columns.to(dtype).double(), bias.to(dtype).double(), g, grid, image)
    assert rel_error(out, ref) < (1e-2 if dtype == torch.bfloat16 else 1e-6)


# (kernel, stride, padding, dilation, grid): outer dims strided, few entries an output (so
# several planes a thread, one span each, rows numbered plane by plane); whole and partial
# first spans, rows ending part-way through one, short rows.
COL2IM_PLANES = [((3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), (3, 4, 80)),
                 ((3, 3, 3), (2, 2, 2), (1, 1, 1), (2, 2, 2), (3, 4, 81)),
                 ((3, 5), (2, 3), (1, 2), (2, 1), (4, 300)),
                 ((3, 3), (5, 5), (1, 1), (2, 2), (3, 27))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("channels", [4, 6, 3])
@pytest.mark.parametrize("kernel, stride, padding, dilation, grid", COL2IM_PLANES)
def test_col2im_planes_per_thread(monkeypatch, kernel, stride, padding, dilation, grid,
                                  channels, with_bias, dtype):
    """The compiled col2im with several planes per thread, into a poisoned image, against
    the PyTorch path in float64; as many as divide the channels (without bias, the
    planes)."""
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    layouts = _record_layouts(monkeypatch)
    g = Geometry(kernel, stride, padding, dilation)
    planes, image = 3 * channels, g.image_size(grid, (0,) * len(grid))
    gen = generator("planes", str(kernel), str(grid), str(channels))
    columns = torch.randn(planes, g.taps, math.prod(grid), generator=gen, dtype=torch.float64)
    bias = torch.randn(channels, generator=gen, dtype=torch.float64)
    bias = bias if with_bias else None
    out = torch.full((planes, *image), float("nan"), dtype=dtype, device=CUDA)
    col2im(columns.to(CUDA, dtype), bias if bias is None else bias.to(CUDA, dtype), g, grid,
           image, out=out)
    per_thread = _cuda.col2im_planes(g, image[-1], True)
    assert per_thread == _cuda.COL2IM_PLANES[g.nd] > 1
    assert _cuda.Layout(*layouts[-1]).planes_per_thread == \
        math.gcd(per_thread, channels if with_bias else planes)
    ref = col2im(columns.to(dtype).double(), bias if bias is None else bias.to(dtype).double(),
                 g, grid, image)
    assert rel_error(out, ref) < (1e-2 if dtype == torch.bfloat16 else 1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("kernel, stride, padding, dilation, grid", [
    ((3, 3, 3), (2, 2, 2), (1, 1, 1), (2, 2, 2), (5, 8, 32)),   # 3d-stride2-dil2's taps
    ((7, 5), (4, 3), (3, 2), (4, 1), (9, 100)),                 # stride 4
    ((6, 3), (4, 1), (5, 1), (4, 1), (7, 200))])                # phases off the first row
def test_col2im_empty_rows_apart(monkeypatch, kernel, stride, padding, dilation, grid,
                                 with_bias, dtype):
    """The compiled col2im with the rows that can receive column entries first and the
    bias-only rows after, into a poisoned image: every element written, the PyTorch path's
    sums in float64."""
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    layouts = _record_layouts(monkeypatch)
    g = Geometry(kernel, stride, padding, dilation)
    channels, image = 4, g.image_size(grid, (0,) * len(grid))
    gen = generator("apart", str(kernel), str(grid))
    columns = torch.randn(3 * channels, g.taps, math.prod(grid), generator=gen, dtype=torch.float64)
    bias = torch.randn(channels, generator=gen, dtype=torch.float64) if with_bias else None
    out = torch.full((3 * channels, *image), float("nan"), dtype=dtype, device=CUDA)
    col2im(columns.to(CUDA, dtype), bias if bias is None else bias.to(CUDA, dtype), g, grid,
           image, out=out)
    assert _cuda.Layout(*layouts[-1]).empty_rows_apart
    ref = col2im(columns.to(dtype).double(), bias if bias is None else bias.to(dtype).double(),
                 g, grid, image)
    assert rel_error(out, ref) < (1e-2 if dtype == torch.bfloat16 else 1e-6)


def test_col2im_with_no_receiving_rows(monkeypatch):
    """A convolution whose input gradient (col2im) has no row that a tap reaches: the fill
    alone writes it, and the gradients are torch's."""
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    layouts = _record_layouts(monkeypatch)
    gen = generator("no-receiving-rows")
    x64 = torch.randn(1, 2, 2, 9, generator=gen, dtype=torch.float64)
    w64 = torch.randn(3, 2, 7, 1, generator=gen, dtype=torch.float64)
    kw = dict(stride=(4, 1), padding=(13, 0), dilation=(4, 1))
    x, w = (t.to(CUDA).requires_grad_() for t in (x64, w64))
    ref = [t.clone().requires_grad_() for t in (x64, w64)]
    out, theirs = gemmconv.conv2d(x, w, **kw), F.conv2d(*ref, **kw)
    grad = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    poison_allocator(x.numel() * 8)
    ours = torch.autograd.grad(out, (x, w), grad.to(CUDA))
    assert any(_cuda.Layout(*layout).empty_rows_apart for layout in layouts)
    for mine, want in zip(ours, torch.autograd.grad(theirs, ref, grad)):
        assert rel_error(mine, want) < 1e-12
    assert torch.equal(ours[0], torch.zeros_like(ours[0]))   # no tap reaches the two rows


def test_forward_without_bias_takes_planes_per_thread(monkeypatch):
    """A strided 3-D forward without bias hands col2im its columns in blocks of C_out
    channels, so its threads take several planes each, as with a bias; its result is
    torch's."""
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    layouts = _record_layouts(monkeypatch)
    gen = generator("planes-forward")
    x = torch.randn(2, 6, 3, 4, 80, generator=gen, dtype=torch.float64)
    w = torch.randn(6, 4, 3, 3, 3, generator=gen, dtype=torch.float64)
    poison_allocator(2 * 4 * 5 * 7 * 159 * 4)
    out = gemmconv.conv_transpose3d(x.float().to(CUDA), w.float().to(CUDA), stride=2, padding=1)
    assert any(_cuda.Layout(*layout).planes_per_thread == _cuda.COL2IM_PLANES[3]
               for layout in layouts)
    assert rel_error(out, F.conv_transpose3d(x, w, stride=2, padding=1)) < 1e-3


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_bias_through_tf32_gemm_keeps_float32_accuracy(monkeypatch, nd):
    """The im2col route adds the bias in its GEMM, through rows of ones. Inputs and weights
    on a grid of eighths make every TF32 product and sum exact, so what is left is the
    bias's own error: float32 rounding with its TF32-exact high part and remainder, where a
    single TF32 bias column would be off by about 2^-11 of it."""
    force_im2col_route(monkeypatch)
    gen = generator("tf32-bias", str(nd))
    eighths = lambda *shape: (torch.randint(-8, 9, shape, generator=gen) / 8).to(CUDA)
    x, w = eighths(2, 6, *[9] * nd), eighths(6, 4, *[3] * nd)
    b = (1000 + torch.rand(4, generator=gen, dtype=torch.float64) * 100).to(CUDA)
    with gemmconv.float32_precision("tf32"):
        for ours, theirs, weight in ((OURS[nd], getattr(F, f"conv_transpose{nd}d"), w),
                                     (getattr(gemmconv, f"conv{nd}d"), getattr(F, f"conv{nd}d"),
                                      w.transpose(0, 1).contiguous())):
            poison_allocator(2 * 4 * 11 ** nd * 4)
            out = ours(x, weight, b.float())
            ref = theirs(x.double(), weight.double(), b)
            assert rel_error(out, ref) < 1e-6, ours.__name__


def test_im2col_into_blocks_leaves_the_gaps(monkeypatch):
    """im2col into blocks of planes with room after each, on the generic and the compiled
    kernels: the columns match the PyTorch path and the room stays poisoned."""
    for specialize in (1 << 40, 0):
        monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", specialize)
        g = Geometry((2, 2), (1, 2), (1, 0), (2, 1))     # four taps: warp spans when compiled
        planes, block, grid, image = 12, 3, (7, 70), (9, 140)
        pixels = torch.randn(planes, *image, generator=generator("gaps", str(specialize)))
        cells, gap = math.prod(grid), 2 * math.prod(grid) + 5
        buffer = torch.full((planes // block, block * g.taps * cells + gap), float("nan"), device=CUDA)
        blocks = buffer[:, :block * g.taps * cells].unflatten(1, (block, g.taps, cells))
        im2col(pixels.to(CUDA), g, grid, out=blocks)
        assert torch.equal(blocks.reshape(planes, g.taps, cells).cpu(), im2col(pixels, g, grid))
        assert buffer[:, block * g.taps * cells:].isnan().all()


@pytest.mark.parametrize("kernel, stride, padding, dilation, grid", [
    ((3, 3), (1, 1), (0, 1), (1, 1), (6, 200)),
    ((1, 3), (1, 1), (0, 2), (1, 2), (9, 77)),
    ((3, 5), (2, 3), (1, 2), (2, 1), (5, 64)),
    ((3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), (4, 6, 40)),
    ((1, 2, 3), (1, 2, 1), (0, 1, 1), (1, 1, 2), (3, 5, 33))])
def test_columns_in_any_order(monkeypatch, kernel, stride, padding, dilation, grid):
    """col2im and im2col, generic and compiled, on columns whose grid rows are outermost
    and samples next to the inner grid dims (the row-products route's layout), in poisoned
    buffers: the same results as the PyTorch path on contiguous columns."""
    g = Geometry(kernel, stride, padding, dilation)
    samples, channels, image = 3, 4, g.image_size(grid, (0,) * len(grid))
    gen = generator("any-order", str(kernel), str(grid))
    for specialize in (1 << 40, 0):
        monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", specialize)
        pixels = torch.randn(samples * channels, *image, generator=gen)
        _, view = rows_outermost(samples, channels, g.taps, grid, CUDA)
        im2col(pixels.to(CUDA), g, grid, out=view)
        assert torch.equal(view.reshape(-1, g.taps, math.prod(grid)).cpu(),
                           im2col(pixels, g, grid))

        view.copy_(torch.randn(view.shape, generator=gen))
        bias = torch.randn(channels, generator=gen)
        out = torch.full((samples * channels, *image), float("nan"), device=CUDA)
        col2im(view, bias.to(CUDA), g, grid, image, out=out)
        ref = col2im(view.reshape(-1, g.taps, math.prod(grid)).cpu().double(), bias.double(),
                     g, grid, image)
        assert rel_error(out, ref) < 1e-6


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("kernel, stride, padding, dilation, grid", [
    ((1, 1), (1, 1), (1, 0), (1, 1), (66, 256)),           # the row products' reorder
    ((3, 1), (1, 1), (2, 8), (2, 1), (9, 96)),
    ((1, 5, 1), (1, 1, 1), (0, 2, 0), (1, 1, 1), (4, 12, 64)),
    ((3, 5), (1, 1), (2, 4), (1, 1), (34, 264)),            # taps as 2d-64to128 gathers
    ((1, 7), (1, 1), (0, 3), (1, 1), (8, 64)),              # shifted windows...
    ((7,), (1,), (6,), (1,), (96,)),
    ((5,), (1,), (13,), (3,), (200,)),                     # ...a dilated one
    ((3, 3), (1, 2), (1, 1), (1, 1), (9, 80)),              # and strided ones
    ((3, 5, 7), (2, 2, 2), (1, 2, 3), (1, 1, 1), (4, 6, 48))])
@pytest.mark.parametrize("rows_first", [False, True], ids=["contiguous", "rows-outermost"])
def test_packed_im2col(monkeypatch, dtype, kernel, stride, padding, dilation, grid, rows_first):
    """im2col copying 16-byte runs from a window of the row, compiled, into poisoned
    columns of both layouts: the PyTorch path's copy, exactly."""
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    g = Geometry(kernel, stride, padding, dilation)
    samples, channels = 3, 4
    image = (*grid[:-1], grid[-1] - 16)
    pixels = torch.randn(samples * channels, *image, generator=generator("packed", str(kernel)),
                         dtype=torch.float64).to(dtype)
    if rows_first:
        if g.nd == 1:
            pytest.skip("rows outermost leave a 1-D grid's rows strided")
        buffer, view = rows_outermost(samples, channels, g.taps, grid, CUDA)
        buffer = buffer.to(dtype)
        view = buffer.movedim(3, 0).movedim(1, 3)
    else:
        view = torch.full((samples, channels, g.taps, *grid), float("nan"), dtype=dtype,
                          device=CUDA)
    assert _cuda.im2col_windowed(g, pixels.to(CUDA), padding)
    assert _cuda.im2col_pack(g, view, True) == 16 // pixels.element_size()
    layouts = _record_layouts(monkeypatch)
    im2col(pixels.to(CUDA), g, grid, out=view)
    assert _cuda.Layout(*layouts[-1]).im2col_samples_inner == (rows_first and g.taps > 1)
    assert torch.equal(view.reshape(-1, g.taps, math.prod(grid)).cpu(), im2col(pixels, g, grid))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("kernel, stride, padding, dilation, grid, width", [
    ((3, 3), (1, 1), (1, 1), (1, 1), (9, 96), 99),          # rows not a whole number of runs
    ((3, 5, 7), (1, 1, 1), (1, 2, 3), (1, 1, 1), (4, 6, 64), 71),
    ((3, 3, 3), (2, 2, 1), (1, 1, 1), (1, 1, 1), (5, 6, 48), 95),   # outer dims strided
    ((3, 2), (1, 1), (0, 2), (2, 3), (7, 32), 97)])
@pytest.mark.parametrize("rows_first", [False, True], ids=["contiguous", "rows-outermost"])
def test_im2col_runs_element_by_element(monkeypatch, dtype, kernel, stride, padding, dilation,
                                        grid, width, rows_first):
    """im2col storing 16-byte runs whose image elements it loads one by one (image rows
    that are not whole runs), compiled, into poisoned columns of both layouts."""
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    g = Geometry(kernel, stride, padding, dilation)
    samples, channels = 3, 4
    image = (*g.image_size(grid, (0,) * len(grid))[:-1], width)
    pixels = torch.randn(samples * channels, *image, generator=generator("runs", str(kernel)),
                         dtype=torch.float64).to(dtype)
    if rows_first:
        buffer, view = rows_outermost(samples, channels, g.taps, grid, CUDA)
        view = buffer.to(dtype).movedim(3, 0).movedim(1, 3)
    else:
        view = torch.full((samples, channels, g.taps, *grid), float("nan"), dtype=dtype,
                          device=CUDA)
    layouts = _record_layouts(monkeypatch)
    im2col(pixels.to(CUDA), g, grid, out=view)
    layout = _cuda.Layout(*layouts[-1])
    assert (layout.im2col_pack, layout.im2col_windowed) == (16 // pixels.element_size(), False)
    assert torch.equal(view.reshape(-1, g.taps, math.prod(grid)).cpu(), im2col(pixels, g, grid))


@pytest.mark.parametrize("side_by_side", [False, True], ids=["per-sample", "samples-side-by-side"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", [c for c in CASES if c.batch > 1][:40], ids=lambda c: c.name)
def test_both_sample_layouts_in_training(monkeypatch, case, dtype, side_by_side):
    """Forward and backward with the GEMMs per sample and on the samples side by side
    (ops.SAMPLES_INNER_MAX_POSITIONS), into poisoned memory, against float64."""
    monkeypatch.setattr(ops, "SAMPLES_INNER_MAX_POSITIONS", 1 << 30 if side_by_side else 0)
    ops._forward_plan.cache_clear()
    try:
        x, w, b = leaves = _leaves(case, f"layouts-{side_by_side}", dtype)
        poison_allocator(case.batch * case.out_channels * math.prod(case.output_size) * x.element_size())
        out = OURS[case.nd](x, w, b, **case.kwargs)
        _assert_matches_float64(case, leaves, out, {torch.float64: 1e-12, torch.float32: 5e-3}.get(dtype, 3e-2))
    finally:
        ops._forward_plan.cache_clear()
