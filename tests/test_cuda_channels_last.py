"""GPU: the channels-innermost route (gemmconv/channels_last.py) and its kernels on the
shared case table, against float64 references. Marked ``cuda``."""
import math

import pytest
import torch

import gemmconv
from gemmconv import _cuda, cases, channels_last, fused, gemm, ops
from gemmconv.bench import reference as reference64
from gemmconv.columns import col2im_interleaved, im2col_interleaved
from gemmconv.shapes import Geometry
from helpers import OURS, Copies, force_im2col_route, generator, poison_allocator, rel_error

pytestmark = pytest.mark.cuda
CUDA = "cuda"
CASES = [c for c in cases.random_cases(100, seed=11) + cases.EDGE + cases.LARGE_KERNELS
         + [c.scaled(4096) for c in cases.BENCH] if c.nd > 1 and not c.unbatched and c.batch]
MODES = {"float64": (torch.float64, "torch", 1e-12), "float32-tf32": (torch.float32, "tf32", 5e-3),
         "float32-ieee": (torch.float32, "ieee", 1e-5), "bfloat16": (torch.bfloat16, "torch", 3e-2)}


def _channels_last(t):
    return t.to(memory_format=channels_last.memory_format(t.dim()))


def _leaves(case, key, dtype):
    x, w, b = case.tensors(dtype, CUDA, generator(case.name, key))
    return [None if t is None else t.requires_grad_() for t in (_channels_last(x), w, b)]


def _check(case, mode, key):
    dtype, precision, tolerance = MODES[mode]
    x, w, b = leaves = _leaves(case, key, dtype)
    shape = (case.batch, case.out_channels, *case.output_size)
    grad_out = torch.randn(shape, generator=generator(case.name, key, "g"), dtype=torch.float64)
    grad_out = _channels_last(grad_out.to(CUDA))
    with gemmconv.float32_precision(precision):
        poison_allocator(math.prod(shape) * x.element_size())
        out = OURS[case.nd](x, w, b, **case.kwargs)
        needed = [t for t in leaves if t is not None]
        poison_allocator(x.numel() * x.element_size())
        mine = torch.autograd.grad(out, needed, grad_out.to(dtype))
    refs = reference64(case, x, w, b, grad_out)
    assert rel_error(out, refs[0]) < tolerance
    if channels_last.suggested(x):
        fmt = channels_last.memory_format(out.dim())
        assert out.is_contiguous(memory_format=fmt) and mine[0].is_contiguous(memory_format=fmt)
    for m, t in zip(mine, refs[1:]):
        assert m.dtype == dtype and rel_error(m, t) < tolerance


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_channels_last_matches_float64_reference(case, mode):
    _check(case, mode, mode)


@pytest.mark.parametrize("mode", ["float32-tf32", "bfloat16", "float64"])
@pytest.mark.parametrize("case", [c for c in CASES if c.in_channels % 8][:16] +
                         [c for c in CASES if c in cases.LARGE_KERNELS], ids=lambda c: c.name)
def test_channels_last_zero_padded_channels(monkeypatch, case, mode):
    """Every product large enough for unaligned channels to be zero-padded to whole 16-byte
    units (channels_last.padded_channels), into poisoned outputs."""
    monkeypatch.setattr(gemm, "LAYOUT_TRIAL_FLOPS", 1)
    _check(case, mode, "padded")


@pytest.mark.parametrize("mode", ["float64", "bfloat16"])
@pytest.mark.parametrize("case", CASES[::8], ids=lambda c: c.name)
def test_channels_last_specialised_kernels_in_bands(monkeypatch, case, mode):
    """The kernels compiled for the layer's taps, on bands of rows (a small workspace)."""
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    monkeypatch.setattr(ops, "_workspace_limit", 4096)
    _check(case, mode, "bands")


@pytest.mark.parametrize("mode", ["float64", "float32-tf32"])
@pytest.mark.parametrize("case", [c for c in CASES if all(s == 1 for s in c.stride)][:30],
                         ids=lambda c: c.name)
def test_channels_last_im2col_route(monkeypatch, case, mode):
    force_im2col_route(monkeypatch)
    _check(case, mode, "im2col")


def _meta_args(case):
    x = torch.empty(case.batch, case.in_channels, *case.size, device="meta")
    w = torch.empty(case.in_channels, case.out_channels // case.groups, *case.kernel_size,
                    device="meta")
    return ops.conv_transpose_args(f"conv_transpose{case.nd}d", case.nd, x, w, None, case.stride,
                                   case.padding, case.output_padding, case.groups, case.dilation)


def _rows_allowed(case):
    return _meta_args(case).padded_rows() is not None and case.in_channels % 8 == 0


@pytest.mark.parametrize("mode", ["float64", "float32-tf32", "bfloat16"])
@pytest.mark.parametrize("case", [c for c in CASES if _rows_allowed(c)][:24], ids=lambda c: c.name)
def test_channels_last_by_padded_rows(monkeypatch, case, mode):
    """The forward by padded rows (channels_last.forward_by_rows), forced wherever a call
    allows it, in one chunk and in chunks of one sample, into poisoned memory: the runs'
    overlapping rows, the k products and the copy's zero padding on cuBLAS and the kernels."""
    monkeypatch.setattr(ops.ConvTransposeArgs, "interleaved_route", lambda a: (
        (a.padded_rows().split.gathered, True) if a.padded_rows() else (a.gathered_dims(), False)))
    monkeypatch.setattr(fused, "wide_3d", lambda *args: False)   # (3-D calls: not fused)
    ran, by_rows = [], channels_last.forward_by_rows
    monkeypatch.setattr(channels_last, "forward_by_rows",
                        lambda x, *args: ran.append(x.shape) or by_rows(x, *args))
    a = _meta_args(case)
    size = MODES[mode][0].itemsize
    if channels_last.rows_plan(a, size, 4 << 30) is None:
        pytest.skip("the columns' rows are not whole 32-byte sectors in this dtype")
    one_sample = channels_last._rows_workspace(a, a.padded_rows(), 1) * size
    for limit in (4 << 30, one_sample):
        ran.clear()
        monkeypatch.setattr(ops, "_workspace_limit", limit)
        assert len(channels_last.rows_plan(a, size, limit).chunks) == \
            (1 if limit > one_sample else case.batch)
        _check(case, mode, f"rows-{limit}")
        assert ran[0] == (case.batch, case.in_channels, *case.size)


@pytest.mark.parametrize("specialised", [False, True], ids=["generic", "specialised"])
@pytest.mark.parametrize("channels, groups", [(8, 2), (6, 3), (5, 1), (64, 1)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16],
                         ids=str)
@pytest.mark.parametrize("geometry, grid", [
    (((3, 3), (1, 1), (1, 1), (1, 1)), (9, 11)),
    (((4, 4), (2, 2), (1, 1), (1, 1)), (6, 7)),
    (((64, 5), (32, 3), (16, 1), (1, 2)), (3, 4)),
    (((3, 2, 3), (2, 1, 2), (1, 0, 1), (1, 2, 1)), (3, 4, 5))])
def test_interleaved_kernels_write_every_element(monkeypatch, geometry, grid, dtype, channels,
                                                 groups, specialised):
    """col2im and im2col, channels innermost, into NaN outputs, against the CPU path: runs of
    16 bytes where the channels allow, one channel a thread where they do not."""
    if specialised:
        monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    g = Geometry(*geometry)
    image = g.image_size(grid, (0,) * g.nd)
    gen = generator(str(geometry), channels, str(dtype))
    columns = torch.randn(2, *grid, groups, g.taps, channels // groups, generator=gen).to(dtype)
    bias = torch.randn(channels, generator=gen).to(dtype)
    out = torch.full((2, *image, channels), float("nan"), dtype=dtype, device=CUDA)
    col2im_interleaved(columns.to(CUDA), bias.to(CUDA), g, image, out=out)
    ref = col2im_interleaved(columns.double(), bias.double(), g, image)
    assert rel_error(out, ref) < {torch.float64: 1e-14, torch.float32: 1e-6}.get(dtype, 1e-2)

    pixels = torch.randn(2, *image, channels, generator=gen).to(dtype)
    cols = torch.full(columns.shape, float("nan"), dtype=dtype, device=CUDA)
    im2col_interleaved(pixels.to(CUDA), g, grid, groups, out=cols)
    assert torch.equal(cols.cpu(), im2col_interleaved(pixels, g, grid, groups))


@pytest.mark.parametrize("case", [c.scaled(1 << 14) for c in cases.BENCH if c.nd > 1],
                         ids=lambda c: c.name)
def test_channels_last_copies_no_activation_on_cuda(case):
    """No copy of any tensor the size of an activation, forward or backward: the kernels and
    cuBLAS read and write channels_last in place."""
    x, w, b = _leaves(case, "copies", torch.float32)
    out = OURS[case.nd](x, w, b, **case.kwargs)
    grad = _channels_last(torch.randn_like(out))
    least = min(x.numel(), out.numel())
    if least <= w.numel() or not channels_last.suggested(x):
        pytest.skip("activations no larger than the weight, or not channels_last")
    with Copies(least) as copies:
        out = OURS[case.nd](x, w, b, **case.kwargs)
        torch.autograd.grad(out, [t for t in (x, w, b) if t is not None], grad)
    assert copies.seen == []


@pytest.mark.parametrize("case", [c.scaled(1 << 16) for c in cases.BENCH if c.nd > 1][::2],
                         ids=lambda c: c.name)
def test_channels_last_bitwise_identical_across_runs(case):
    x, w, b = _leaves(case, "repeat", torch.float32)
    runs = []
    for _ in range(2):
        out = OURS[case.nd](x, w, b, **case.kwargs)
        runs.append([out, *torch.autograd.grad(out.square().sum(), [x, w])])
    assert all(torch.equal(a, c) for a, c in zip(*runs))


def test_channels_last_module_under_autocast():
    """A channels_last model in bf16 autocast: channels_last output, torch's accuracy."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.ConvTranspose2d(64, 32, 4, 2, 1), torch.nn.ReLU(),
                                torch.nn.ConvTranspose2d(32, 16, 3, 1, 1)).to(CUDA)
    model = model.to(memory_format=torch.channels_last)
    ours = gemmconv.convert(__import__("copy").deepcopy(model))
    x = _channels_last(torch.randn(4, 64, 16, 16, device=CUDA))
    with torch.autocast("cuda", torch.bfloat16):
        out, ref = ours(x), model(x)
    exact = model.double()(x.double())
    assert out.is_contiguous(memory_format=torch.channels_last)
    assert rel_error(out, exact) < 2 * max(rel_error(ref, exact), 1e-3)


# Outputs of 2^19 positions: their bias gradient sums 32 rows side by side first
# (channels_last.channel_sums), which the table's cases are too small to reach.
WIDE = [cases.Case("cl-wide-k2s2", 2, 8, 8, (2, 2), (256, 256), stride=(2, 2)),
        cases.Case("cl-wide-3x3", 2, 4, 8, (3, 3), (512, 512), padding=(1, 1))]


@pytest.mark.parametrize("mode", ["float32-tf32", "float32-ieee", "bfloat16"])
@pytest.mark.parametrize("case", WIDE, ids=lambda c: c.name)
def test_channels_last_bias_gradient_over_many_positions(case, mode):
    assert case.bias and channels_last.side_by_side(
        case.batch * math.prod(case.output_size)) == channels_last.SIDE_BY_SIDE
    _check(case, mode, mode)
