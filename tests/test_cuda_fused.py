"""GPU: the fused route (gemmconv/fused.py) on the shared case table, against float64, with
poisoned outputs; that calls take it where they can and only there; determinism, streams,
and outputs past 2^31 elements. Marked ``cuda``."""
import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

import gemmconv
from gemmconv import _cuda, cases, fused
from gemmconv.bench import reference as reference64
from gemmconv.shapes import Geometry, conv_transpose_args
from helpers import (OURS, check_against_float64, generator, poison_allocator, rel_error,
                     requested_during, weight_gradient_inputs)
from test_cuda import on_a_busy_stream

pytestmark = pytest.mark.cuda
CUDA = "cuda"
MODES = {
    "float32-tf32": (torch.float32, "tf32", 5e-3),
    "float16": (torch.float16, "torch", 5e-3),
    "bfloat16": (torch.bfloat16, "torch", 3e-2),
}


def _aligned(case):
    """The case with input channels filling whole 16-byte rows in every mode."""
    return dataclasses.replace(case, in_channels=-(-case.in_channels // 8) * 8)


CASES = [_aligned(c) for c in cases.random_cases(40, seed=13) + cases.EDGE + cases.LARGE_KERNELS
         + [c.scaled(4096) for c in cases.BENCH] if c.groups == 1]


def _counted(monkeypatch, name):
    """Counts the calls of ``fused.<name>``: a one-element list."""
    count = [0]
    function = getattr(fused, name)

    def counted(*args, **kwargs):
        count[0] += 1
        return function(*args, **kwargs)

    monkeypatch.setattr(fused, name, counted)
    return count


@pytest.fixture
def launches(monkeypatch):
    """Counts the fused kernel's launches."""
    return _counted(monkeypatch, "implicit_gemm")


def _tensors(case, key, dtype, channels_last):
    x, w, b = case.tensors(dtype, CUDA, generator(case.name, key))
    if channels_last and case.nd > 1 and not case.unbatched:
        x = x.contiguous(memory_format=torch.channels_last if case.nd == 2 else torch.channels_last_3d)
    return [None if t is None else t.requires_grad_() for t in (x, w, b)]


@pytest.mark.parametrize("layout", ["planar", "channels_last"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_fused_route_matches_float64(monkeypatch, launches, case, mode, layout):
    monkeypatch.setattr(fused, "preferred", lambda a, interleaved: True)   # every case, whatever the cost model says
    if layout == "channels_last" and (case.nd == 1 or case.unbatched):
        pytest.skip("no channels_last layout for 1-D or unbatched inputs")
    dtype, precision, tolerance = MODES[mode]
    leaves = _tensors(case, mode + layout, dtype, layout == "channels_last")
    # (the backward's routes take the output gradient's layout, not always the input's)
    check_against_float64(case, leaves, precision, tolerance, layout, lambda: launches[0])


ROW_CASES = [c for c in CASES if set(c.stride) == {1} and c.nd > 1 and c.kernel_size[-2] > 1]


@pytest.fixture
def every_call_rows(monkeypatch, rows):
    """Every call whose taps form columns along H takes the kernel of ``rows`` rows a
    program where its tile fits (its floor of two waves lowered to none, there only: the
    weight gradient's splits divide by the wave); counts the plans that chose it."""
    chosen = [0]
    row_tile, wave = fused.row_tile, fused.WAVE

    def counted(*args):
        fused.WAVE = 0
        try:
            cfg = row_tile(*args, rows=rows)
        finally:
            fused.WAVE = wave
        chosen[0] += cfg is not None
        return cfg

    monkeypatch.setattr(fused, "row_tile", counted)
    fused._gemm_plan.cache_clear()   # plans made under the real floor
    yield chosen
    fused._gemm_plan.cache_clear()


@pytest.mark.parametrize("layout", ["planar", "channels_last"])
@pytest.mark.parametrize("mode", ["float32-tf32", "bfloat16"])
@pytest.mark.parametrize("case", ROW_CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("rows", [2, 3])
def test_row_kernel_matches_float64(monkeypatch, launches, every_call_rows, case, mode, layout,
                                    rows):
    """Forward and gradients where the forward (and the stride-1 input gradient, a
    convolution's taps) take the kernel of two or three rows a program: the forward's call
    and its replay bitwise alike, into poisoned memory, against float64. Columns of up to
    three taps fit two rows' two stages in any tile and three rows' in tiles of 64 output
    channels (five of float32 do not: the one-row kernel runs)."""
    monkeypatch.setattr(fused, "preferred", lambda a, interleaved: True)
    if layout == "channels_last" and case.unbatched:
        pytest.skip("no channels_last layout for unbatched inputs")
    dtype, precision, tolerance = MODES[mode]
    leaves = _tensors(case, "two rows" + mode + layout, dtype, layout == "channels_last")
    check_against_float64(case, leaves, precision, tolerance, layout, lambda: launches[0])
    assert every_call_rows[0] > 0 or case.kernel_size[-2] > 3


@pytest.mark.parametrize("why", ["groups", "channels", "ieee", "float64"])
def test_calls_the_fused_route_cannot_take_go_elsewhere(launches, why):
    case = cases.BENCH[4].scaled(2048) if why == "groups" else _aligned(cases.BENCH[0].scaled(2048))
    if why == "channels":
        case = dataclasses.replace(case, in_channels=3)
    dtype = torch.float64 if why == "float64" else torch.float32
    x, w, b = case.tensors(dtype, CUDA, generator("elsewhere", why))
    with gemmconv.float32_precision("ieee" if why == "ieee" else "torch"):
        out = OURS[case.nd](x, w, b, **case.kwargs)
    assert launches[0] == 0
    tolerance = {"float64": 1e-12, "ieee": 1e-5}.get(why, 5e-3)   # cuBLAS in TF32 otherwise
    assert rel_error(out, reference64(case, x, w, b)[0]) < tolerance


@pytest.mark.parametrize("c_out,dtype,layout,sent", [
    (32, torch.float32, "channels_last", True), (24, torch.float32, "channels_last", True),
    (16, torch.float32, "channels_last", False), (16, torch.bfloat16, "channels_last", True),
    (64, torch.bfloat16, "channels_last", True), (32, torch.float32, "planar", False),
    (32, torch.bfloat16, "planar", False)])
def test_wide_channels_last_3d_forwards_take_the_fused_route_by_default(monkeypatch, launches,
                                                                       c_out, dtype, layout, sent):
    """The cost model's 3-D rule (fused.forward_preferred) as calls meet it, at a size the
    test can check (its floor lowered): channels_last calls in 16-bit types, or in float32
    whose output channels take 96 bytes, run the fused kernel, others the column routes,
    both right against float64, into poisoned memory, in the input's layout."""
    monkeypatch.setattr(fused, "SMALL_OUTPUT", 1 << 12)
    case = cases.Case("wide-3d", 2, 16, c_out, (3, 3, 3), (6, 7, 9), stride=(1, 2, 1), padding=(1,))
    x, w, b = (t.detach() for t in _tensors(case, f"wide-{c_out}", dtype, layout == "channels_last"))
    out_shape = (case.batch, c_out, *case.output_size)
    poison_allocator(math.prod(out_shape) * x.element_size())
    out = OURS[3](x, w, b, **case.kwargs)
    assert launches[0] == (1 if sent else 0)
    assert out.is_contiguous(memory_format=torch.channels_last_3d if layout == "channels_last"
                             else torch.contiguous_format)
    assert rel_error(out, reference64(case, x, w, b)[0]) < (3e-2 if dtype == torch.bfloat16 else 5e-3)


@pytest.mark.parametrize("c_out,k,layout,sent", [
    (32, 3, "planar", True), (32, 3, "channels_last", True), (16, 3, "channels_last", False),
    (32, 2, "channels_last", False), (32, 2, "planar", False)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_small_2d_forwards_of_many_taps_take_the_fused_route_by_default(monkeypatch, launches,
                                                                       c_out, k, layout, sent, dtype):
    """The cost model's small 2-D rule (fused.small_preferred) as calls meet it, its floors
    lowered to the test's size: layers of two taps an output (k3 s2, as the VAE decoder's)
    and 32 output channels run the fused kernel, those of fewer channels or one tap an
    output (k2 s2, as U-Net's, below its own floor) the column routes; right against
    float64, into poisoned memory, in the input's layout, twice (the second call replays
    the first's plans)."""
    monkeypatch.setattr(fused, "SMALL_FUSED_OUTPUT", 1 << 12)
    case = cases.Case("small-2d", 2, 16, c_out, (k, k), (6, 9), stride=(2,), padding=(k % 2,),
                      output_padding=(k % 2,))
    x, w, b = (t.detach() for t in _tensors(case, f"small-{c_out}-{k}", dtype,
                                            layout == "channels_last"))
    out_shape = (case.batch, c_out, *case.output_size)
    assert math.prod(out_shape) >= 1 << 12
    tolerance = 3e-2 if dtype == torch.bfloat16 else 5e-3
    for _ in range(2):
        poison_allocator(math.prod(out_shape) * x.element_size())
        out = OURS[2](x, w, b, **case.kwargs)
        assert (launches[0] > 0) == sent
        assert out.is_contiguous(memory_format=torch.channels_last if layout == "channels_last"
                                 else torch.contiguous_format)
        assert rel_error(out, reference64(case, x, w, b)[0]) < tolerance


def test_fused_route_runs_on_the_current_stream(monkeypatch, launches):
    """The first launch of a plan (through Triton's JIT function) and the next (through the
    compiled kernel it kept) alike."""
    monkeypatch.setattr(fused, "preferred", lambda a, interleaved: True)   # a small case
    case = _aligned(cases.BENCH[0].scaled(1 << 14))
    fused._gemm_plan.cache_clear()
    for key in ("fused-stream", "fused-stream-again"):
        x, w, b, out = on_a_busy_stream(case, key,
                                        lambda x, w, b: OURS[case.nd](x, w, b, **case.kwargs))
        assert rel_error(out, reference64(case, x, w, b)[0]) < 5e-3
    assert launches[0] == 2


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_fused_launches_keep_a_compiled_kernel_per_device(monkeypatch, launches):
    """The same call on the first GPU, then twice on the second with the first current, then
    on the first again: each device's plan keeps its own compiled kernel (a kernel is loaded
    on one device), and every output and input gradient is right."""
    monkeypatch.setattr(fused, "preferred", lambda a, interleaved: True)
    case = _aligned(cases.BENCH[1].scaled(1 << 14))
    for device in ("cuda:0", "cuda:1", "cuda:1", "cuda:0"):
        x, w, b = case.tensors(torch.float32, device, generator("two devices", device))
        x.requires_grad_()
        with torch.cuda.device(0):
            out = OURS[case.nd](x, w, b, **case.kwargs)
            grad_out = torch.randn(out.shape, generator=generator("two devices", "g"),
                                   dtype=torch.float64).to(device)
            grad, = torch.autograd.grad(out, x, grad_out.float())
        assert out.device == grad.device == torch.device(device)
        refs = reference64(case, x, w, b, grad_out)
        assert rel_error(out, refs[0]) < 5e-3 and rel_error(grad, refs[1]) < 5e-3
    assert launches[0] >= 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_fused_launches_after_the_first_skip_the_jit_function(monkeypatch, launches, dtype):
    """A plan's launches after its first go to the compiled kernel the first one kept, one
    kernel for each 16-byte alignment of the pointers (a bias a few bytes off gets its own:
    Triton compiled the first for aligned loads); every output right, into poisoned memory,
    and the same bits on each call."""
    from gemmconv import _triton
    monkeypatch.setattr(fused, "preferred", lambda a, interleaved: True)
    jit = _triton.implicit_gemm.run
    through_jit = []
    monkeypatch.setattr(_triton.implicit_gemm, "run",
                        lambda *args, **kw: through_jit.append(1) or jit(*args, **kw))
    fused._gemm_plan.cache_clear()
    case = _aligned(cases.BENCH[1].scaled(1 << 14))
    x, w, b = case.tensors(dtype, CUDA, generator("replayed launches", str(dtype)))
    x = x.contiguous(memory_format=torch.channels_last)
    shifted = torch.empty(b.numel() + 1, dtype=dtype, device=CUDA)[1:].copy_(b)   # 2-4 bytes off
    out_bytes = case.batch * case.out_channels * math.prod(case.output_size) * x.element_size()
    outputs, counts = [], []
    for bias in (b, b, shifted, shifted, b):
        poison_allocator(out_bytes)
        outputs.append(OURS[case.nd](x, w, bias, **case.kwargs))
        counts.append(len(through_jit))
    assert launches[0] == 5 and counts == [1, 1, 2, 2, 2]
    assert all(torch.equal(out, outputs[0]) for out in outputs[1:])
    tolerance = 5e-3 if dtype == torch.float32 else 3e-2
    assert rel_error(outputs[-1], reference64(case, x, w, b)[0]) < tolerance


def test_fused_route_past_2_31_elements(launches):
    """A bfloat16 output of 2^32 elements: the kernel's output offsets are 64-bit."""
    x = torch.randn(1, 8, 16384, 16384, device=CUDA, dtype=torch.bfloat16).contiguous(
        memory_format=torch.channels_last)
    w = torch.randn(8, 4, 2, 2, device=CUDA, dtype=torch.bfloat16)
    b = torch.randn(4, device=CUDA, dtype=torch.bfloat16)
    poison_allocator(2**33)
    out = gemmconv.conv_transpose2d(x, w, b, stride=2)
    assert launches[0] == 1 and out.shape == (1, 4, 32768, 32768) and not out.isnan().any()
    for r in (0, 5000, 12000, 16384 - 8):                      # the last rows are past 2^31
        ref = F.conv_transpose2d(x[..., r:r + 8, :].double(), w.double(), b.double(), stride=2)
        assert rel_error(out[..., 2 * r:2 * r + 16, :], ref) < 3e-2


@pytest.mark.parametrize("shape,dtype", [((3, 40, 7, 37), torch.float32), ((2, 8, 3000), torch.float32),
                                         ((1, 136, 5, 3, 4), torch.bfloat16), ((4, 64, 96, 96), torch.float16)])
def test_planar_inputs_reach_the_kernel_channels_innermost_and_rounded(shape, dtype):
    x = (torch.randn(shape, generator=generator(str(shape), "cuda-rows")) * 100).to(CUDA, dtype)
    for tf32 in (False, True):
        want = x.movedim(1, -1)
        want = fused.round_tf32(want) if tf32 and dtype == torch.float32 else want
        assert torch.equal(fused.channels_innermost(x, tf32), want)


def test_planar_inputs_past_2_31_elements_copy_whole():
    x = torch.randn(1, 16, 16384, 8704, device=CUDA, dtype=torch.bfloat16)   # 2.28e9 elements
    rows = fused.channels_innermost(x)
    for r in (0, 9000, 16383):                                               # the last rows are past 2^31
        assert torch.equal(rows[0, r], x[0, :, r].T)


_PLANAR_STRIDE_ONE = [dataclasses.replace(c, out_channels=-(-c.out_channels // 8) * 8)
                      for c in CASES if set(c.stride) == {1} and not c.unbatched]
BACKWARD = ([c for c in _PLANAR_STRIDE_ONE if c.nd < 3][:10]
            + [c for c in _PLANAR_STRIDE_ONE if c.nd == 3][:4])


def _grad_out(case, key):
    """A fresh float64 output gradient of ``case`` on the device."""
    shape = (case.batch, case.out_channels, *case.output_size)
    return torch.randn(shape, generator=generator(case.name, key), dtype=torch.float64).to(CUDA)


def _gradients_twice(case, tensors, precision, grad_out):
    """The gradients of our call's leaves among ``tensors`` (x, w, b) for ``grad_out`` (cast
    to the input's dtype), twice: the input's first lands on poisoned memory."""
    x = tensors[0]
    leaves = [t for t in tensors if t is not None]
    with gemmconv.float32_precision(precision):
        out = OURS[case.nd](*tensors, **case.kwargs)
        poison_allocator(x.numel() * x.element_size())                # where the input's lands
        mine = torch.autograd.grad(out, leaves, grad_out.to(x.dtype), retain_graph=True)
        again = torch.autograd.grad(out, leaves, grad_out.to(x.dtype))
    return mine, again


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", BACKWARD, ids=lambda c: c.name)
def test_fused_backward_of_planar_stride_one_calls(monkeypatch, launches, case, mode):
    """Both gradients through the fused kernels (the input's through the forward's kernel,
    the weight's through weight_gradient: in float32 from the output gradient's copies
    moved along W, 2-D and 3-D calls (fused.FLOAT32_BACKWARD_DIMS); in 16-bit types with
    few output channels over rows with W's taps folded in), against float64, poisoned,
    bitwise repeatable."""
    monkeypatch.setattr(fused, "preferred", lambda a, interleaved: True)
    weight_grads = _counted(monkeypatch, "weight_gradient")
    folds = _counted(monkeypatch, "folded_rows")
    dtype, precision, tolerance = MODES[mode]
    x, w, b = _tensors(case, "backward" + mode, dtype, False)
    grad_out = _grad_out(case, "gb")
    mine, again = _gradients_twice(case, (x, w, b), precision, grad_out)
    if dtype == torch.float32 and case.nd not in fused.FLOAT32_BACKWARD_DIMS:   # the column
        assert weight_grads[0] == 0     # routes (backward_unavailable); their input gradient may run
    elif case.batch == 0:                           # no chunk of samples: zero weight gradient
        assert launches[0] == 1 and weight_grads[0] == 0
    else:                                           # the fused forward kernel
        assert launches[0] == 3 and weight_grads[0] == 2        # forward, then the input's twice
        geometry = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
        folded = fused.folded_taps(geometry, case.out_channels, x.element_size()) > 1
        assert folds[0] == (2 if folded else 0)     # few 16-bit channels: W's taps folded in
    assert all(torch.equal(m, g) for m, g in zip(mine, again))  # bitwise, run to run
    refs = reference64(case, x, w, b, grad_out)
    for m, t in zip(mine, refs[1:]):
        assert rel_error(m, t) < tolerance


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", [c for c in _PLANAR_STRIDE_ONE if c.nd == 2 and c.batch][:10] + [
    cases.Case("cl-few-out", 2, 16, 8, (3, 5), (20, 30), padding=(1, 2)),   # 16-bit: W's taps folded
    cases.Case("cl-dilated", 3, 24, 16, (3, 3), (17, 29), padding=(2, 1), dilation=(2, 1)),
    cases.Case("cl-wide-out", 2, 16, 72, (3, 3), (12, 14), padding=(1, 1))]   # float32: columns
    + [c for c in _PLANAR_STRIDE_ONE if c.nd == 3 and c.batch][:4], ids=lambda c: c.name)
def test_fused_backward_of_channels_last_stride_one_calls(monkeypatch, launches, case, mode):
    """A channels_last call's backward through the fused kernels (reading the input's and
    the output gradient's rows as they lie, no copy of either) in 16-bit types, and in
    float32 for 2-D and 3-D calls of at most 64 output channels, or of as many as one block
    of the mma weight gradient holds (2d-64to128-small's 128); else the column routes'.
    Float32's weight gradient by fused.rows_weight_gradient where its "mma" form takes the
    call, else by fused.weight_gradient. Both against float64, the input's gradient
    channels_last, into poisoned memory, bitwise repeatable."""
    monkeypatch.setattr(fused, "preferred", lambda a, interleaved: True)
    weight_grads = _counted(monkeypatch, "weight_gradient")
    mma_grads = _counted(monkeypatch, "rows_weight_gradient")
    copies = _counted(monkeypatch, "_channels_innermost")
    dtype, precision, tolerance = MODES[mode]
    x, w, b = _tensors(case, "cl-backward" + mode, dtype, True)
    layout = torch.channels_last if case.nd == 2 else torch.channels_last_3d
    grad_out = _grad_out(case, "gcl").contiguous(memory_format=layout)
    mine, again = _gradients_twice(case, (x, w, b), precision, grad_out)
    a = conv_transpose_args(f"conv_transpose{case.nd}d", case.nd, x, w, b, case.stride,
                            case.padding, case.output_padding, case.groups, case.dilation)
    mma = dtype == torch.float32 and fused.takes_mma(a, 4, True)
    tiles = _cuda.rows_weight_gradient_form(case.kernel_size, case.dilation,
                                            case.out_channels).out_tiles if mma else 1
    columns = dtype == torch.float32 and (case.nd not in fused.FLOAT32_BACKWARD_DIMS or
                                          case.out_channels > 64 * tiles)
    assert (weight_grads[0], mma_grads[0]) == ((0, 0) if columns else (0, 2) if mma else (2, 0))
    assert copies[0] == 0
    if x.is_contiguous(memory_format=layout):
        assert mine[0].is_contiguous(memory_format=layout)
    assert all(torch.equal(m, g) for m, g in zip(mine, again))
    refs = reference64(case, x, w, b, grad_out)
    for m, t in zip(mine, refs[1:]):
        assert rel_error(m, t) < tolerance


@pytest.mark.parametrize("form", ["rows", "planar"])
@pytest.mark.parametrize("case", [c for c in _PLANAR_STRIDE_ONE
                                  if c.nd == 2 and c.batch and c.in_channels % 4 == 0][:6]
                         + [cases.Case("cl-odd-width", 2, 16, 8, (3, 5), (9, 13), padding=(1, 2))],
                         ids=lambda c: c.name)
def test_float32_channels_last_backward_in_each_weight_form(monkeypatch, case, form):
    """fused.backward on channels_last float32 tensors with each fused.float32_weight_form
    (forced): the gradients against float64, bitwise repeatable, into given gradients
    allocating no more than fused.backward_bytes on channels_last tensors, with and without
    a workspace limit of two samples' copies."""
    monkeypatch.setattr(fused, "float32_weight_form", lambda a, interleaved: form)
    x, w, b = _tensors(case, "cl-form", torch.float32, True)
    grad_out = _grad_out(case, "gcf").float().contiguous(memory_format=torch.channels_last)
    refs = reference64(case, x, w, b, grad_out)[1:3]   # the input's and the weight's
    x, w, b = (None if t is None else t.detach() for t in (x, w, b))
    if fused._channels_last_rows(x) is None:
        pytest.skip("one position: planar and channels_last alike")
    a = conv_transpose_args("conv_transpose2d", 2, x, w, b, case.stride, case.padding,
                            case.output_padding, case.groups, case.dilation)
    assert fused.reads_grad_rows(grad_out, x)   # (its rows read as they lie: no copy counted)
    one = fused.backward_workspace(a, 4, 1, interleaved=True, grad_rows=True) * 4
    for limit in (None, 2 * one):
        runs = []
        for _ in range(2):
            out = [torch.empty_like(x), torch.empty_like(w), None]
            poison_allocator(x.numel() * 4)
            with gemmconv.float32_precision("tf32"):
                fused.backward(grad_out, x, w, a, (True, True), limit, out=out)
                taken, got = requested_during(
                    lambda: fused.backward(grad_out, x, w, a, (True, True), limit, out=out)[:2])
            assert taken <= fused.backward_bytes(a, 4, limit, True, grad_rows=True) + STAGING
            runs.append(got)
        assert runs[0][0].is_contiguous(memory_format=torch.channels_last)
        assert all(torch.equal(m, g) for m, g in zip(*runs))
        for m, t in zip(runs[0], refs):
            assert rel_error(m, t) < 5e-3


@pytest.mark.parametrize("grad_layout", ["rows", "copied"])
@pytest.mark.parametrize("case", cases.MMA_WEIGHT_GRADIENT, ids=lambda c: c.name)
def test_float32_channels_last_weight_gradient_on_mma(case, grad_layout):
    """The "mma" form of fused.float32_weight_form (col2im.cu's tf32_weight_gradient) in
    fused.backward: channels_last float32 input and weight, the output gradient's rows read
    as they lie or copied channels innermost; the gradients written into NaN-poisoned
    tensors, the partial sums allocated on NaN-poisoned memory; against float64, bitwise
    repeatable, and within fused.backward_bytes."""
    leaves = _tensors(case, "mma", torch.float32, True)
    grad_out = _grad_out(case, "mma-grad").float()
    if grad_layout == "rows":
        grad_out = grad_out.contiguous(memory_format=torch.channels_last)
    refs = reference64(case, *leaves, grad_out)[1:3]   # the input's and the weight's
    x, w, b = (t.detach() for t in leaves)
    w = w.contiguous(memory_format=torch.channels_last)
    a = conv_transpose_args("conv_transpose2d", 2, x, w, b, case.stride, case.padding,
                            case.output_padding, case.groups, case.dilation)
    assert fused.float32_weight_form(a, True) == "mma"
    assert fused.reads_grad_rows(grad_out, x) == (grad_layout == "rows")
    runs = []
    for _ in range(2):
        out = [torch.full_like(x, float("nan")), torch.full_like(w, float("nan")), None]
        poison_allocator(64 << 20)
        with gemmconv.float32_precision("tf32"):
            taken, got = requested_during(
                lambda: fused.backward(grad_out, x, w, a, (True, True), out=out)[:2])
        assert taken <= fused.backward_bytes(a, 4, None, True, grad_layout == "rows") + STAGING
        runs.append([t.clone() for t in got])
    assert all(torch.equal(m, g) for m, g in zip(*runs))
    for m, t in zip(runs[0], refs):
        assert rel_error(m, t) < 5e-3


BALANCED_CASES = [c for c in cases.MMA_WEIGHT_GRADIENT if _cuda.rows_weight_gradient_form(
    c.kernel_size, c.dilation, c.out_channels, balanced=True).m_tiles != 4]


@pytest.mark.parametrize("case", BALANCED_CASES, ids=lambda c: c.name)
def test_rows_weight_gradient_in_balanced_warps(monkeypatch, case):
    """tf32_weight_gradient in balanced warps (_cuda.WGRAD_BALANCED, the default: warps of
    three or five W taps, or of two tiles of A): its partial sums on NaN-poisoned memory, the
    same bits as the unbalanced form's in stages of as many rows (every weight's sum in the
    same order), and float64's weight gradient of the output gradient rounded to TF32
    within TF32's error."""
    x, grad, want = weight_gradient_inputs(case, "balanced", tf32=True)
    rows = lambda t: t.float().permute(0, 2, 3, 1).contiguous().cuda()
    g = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
    form = _cuda.rows_weight_gradient_form(case.kernel_size, case.dilation, case.out_channels)
    assert form.m_tiles != 4
    picked = _cuda.rows_weight_gradient_form
    with monkeypatch.context() as patch:   # (the unbalanced form's own rows may differ)
        patch.setattr(_cuda, "rows_weight_gradient_form", lambda *args, balanced=None: picked(
            *args, balanced=False)._replace(rows=form.rows, stages=form.stages))
        unbalanced = fused.rows_weight_gradient(rows(x), rows(grad), g)
    poison_allocator(64 << 20)
    got = fused.rows_weight_gradient(rows(x), rows(grad), g)
    assert torch.equal(got, unbalanced)
    assert rel_error(got.cpu(), want) < 5e-3


# The stride-1 cases of the table at a size where the small buffers torch's reductions
# take (STAGING allows 8 KB of them) are small beside the copies.
BYTES_CASES = [c.scaled(1 << 16) for c in cases.BENCH if set(c.stride) == {1} and c.groups == 1]
STAGING = 16 * 512


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", BYTES_CASES, ids=lambda c: c.name)
def test_fused_backward_allocates_at_most_its_bytes(case, dtype):
    """fused.backward into given gradients allocates no more than fused.backward_bytes
    (what a CUDA graph of it is allowed against the graphs' memory limit), with and
    without a workspace limit of two samples' copies."""
    if dtype == torch.float32 and case.nd not in fused.FLOAT32_BACKWARD_DIMS:
        pytest.skip(f"not a fused backward (float32 {case.nd}-D)")
    x, w, b = (t.detach() for t in _tensors(case, "bytes", dtype, False))
    a = conv_transpose_args(f"conv_transpose{case.nd}d", case.nd, x, w, b, case.stride,
                            case.padding, case.output_padding, case.groups, case.dilation)
    grad_out = torch.randn(a.output_shape, generator=generator(case.name, "gy"),
                           dtype=torch.float64).to(CUDA, dtype)
    one = fused.backward_workspace(a, x.element_size(), 1) * x.element_size()
    for limit in (None, 2 * one):
        out = [torch.empty_like(x), torch.empty_like(w), torch.empty_like(b)]
        fused.backward(grad_out, x, w, a, (True, True, True), limit, out=out)   # plans first
        taken, _ = requested_during(
            lambda: fused.backward(grad_out, x, w, a, (True, True, True), limit, out=out))
        assert one <= taken <= fused.backward_bytes(a, x.element_size(), limit) + STAGING


@pytest.mark.parametrize("moved_input", [False, True], ids=["grad-moved", "input-moved"])
@pytest.mark.parametrize("case", [c for c in BACKWARD if c.nd == 2][:6], ids=lambda c: c.name)
def test_float32_weight_gradient_moving_either_operand(monkeypatch, case, moved_input):
    """The float32 fused backward with the weight gradient's moved copies of the output
    gradient, or of the input (fused.moves_input forced): both gradients against float64,
    into poisoned memory, bitwise repeatable."""
    monkeypatch.setattr(fused, "preferred", lambda a, interleaved: True)
    monkeypatch.setattr(fused, "moves_input", lambda a, element_size: moved_input)
    shifted = _counted(monkeypatch, "shifted_copies")
    x, w, b = _tensors(case, f"moved-{moved_input}", torch.float32, False)
    leaves = [t for t in (x, w, b) if t is not None]
    with gemmconv.float32_precision("tf32"):
        out = OURS[case.nd](x, w, b, **case.kwargs)
        grad_out = torch.randn(out.shape, generator=generator(case.name, "gm"), dtype=torch.float64).to(CUDA)
        poison_allocator(x.numel() * x.element_size())
        mine = torch.autograd.grad(out, leaves, grad_out.float(), retain_graph=True)
        again = torch.autograd.grad(out, leaves, grad_out.float())
    assert shifted[0] == (2 if case.batch else 0)
    assert all(torch.equal(m, g) for m, g in zip(mine, again))
    for m, t in zip(mine, reference64(case, x, w, b, grad_out)[1:]):
        assert rel_error(m, t) < 5e-3


CHANNELS_LAST_FORMS = {"grad-moved": {}, "input-moved": {"moved_input": True}}


@pytest.mark.parametrize("form", CHANNELS_LAST_FORMS)
@pytest.mark.parametrize("grad_layout", ["channels_last", "planar"])
@pytest.mark.parametrize("case", [c for c in BACKWARD if c.nd > 1 and c.batch][:8], ids=lambda c: c.name)
def test_float32_weight_gradient_of_channels_last_rows_from_moved_copies(case, grad_layout, form):
    """fused.weight_gradient(shifted=True) on a channels_last float32 input and an output
    gradient channels_last or planar: the output gradient's moved copies (made from its
    rows where it is channels_last) and one planar copy of the input; or the input's moved
    copies (made from its rows) and the output gradient as it lies, copied planar where it
    is channels_last (fused._planar's strides in planar order). Against float64 on
    TF32-rounded operands, bitwise repeatable."""
    x, w, _ = (t.detach() for t in _tensors(case, "cl-moved", torch.float32, True))
    if fused._channels_last_rows(x) is None:
        pytest.skip("one position: planar and channels_last alike")
    g = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
    layout = torch.channels_last if case.nd == 2 else torch.channels_last_3d
    grad_out = _grad_out(case, "gcm")
    grad = grad_out.float().contiguous(
        memory_format=layout if grad_layout == "channels_last" else torch.contiguous_format)
    with gemmconv.float32_precision("tf32"):
        mine = fused.weight_gradient(x, grad, g, shifted=True, **CHANNELS_LAST_FORMS[form])
        again = fused.weight_gradient(x, grad, g, shifted=True, **CHANNELS_LAST_FORMS[form])
    assert torch.equal(mine, again)
    wd = w.double().requires_grad_()
    conv = F.conv_transpose2d if case.nd == 2 else F.conv_transpose3d
    out = conv(x.double(), wd, None, **case.kwargs)
    ref, = torch.autograd.grad(out, wd, fused.round_tf32(grad_out.float()).double())
    assert rel_error(mine, ref) < 5e-3


def test_fused_weight_gradient_of_long_reductions_on_positive_data(monkeypatch):
    """A weight gradient summed over 4M positions of positive data (bfloat16, 49 taps):
    split into programs of at most fused.CHAIN positions, it errs as cuBLAS's columns do
    (about 4e-4); summed in six programs' accumulators as before, the tensor cores' float32
    additions drifted low (6.8e-3 on 3d-32to64, H100)."""
    g = Geometry((7, 7), (1, 1), (3, 3), (1, 1))
    gen = generator("long-reduction", "wg")
    x = torch.rand(16, 32, 512, 512, generator=gen, dtype=torch.float64).to(CUDA)
    w = torch.rand(32, 32, 7, 7, generator=gen, dtype=torch.float64).to(CUDA).requires_grad_()
    grad_out = torch.rand(16, 32, 512, 512, generator=gen, dtype=torch.float64).to(CUDA)
    xb, gb = x.bfloat16(), grad_out.bfloat16()
    out = F.conv_transpose2d(xb.double(), w, None, 1, 3)
    ref, = torch.autograd.grad(out, w, gb.double())
    rows = gb.movedim(1, -1).contiguous()
    errors = []
    for chain in (fused.CHAIN, 1 << 40):
        monkeypatch.setattr(fused, "CHAIN", chain)
        fused.forget_plans()   # (the plans keep their first call's splits)
        errors.append(rel_error(fused.weight_gradient(xb, rows, g, dtype=torch.float32), ref))
    assert errors[0] < 1e-3 and errors[1] > 2 * errors[0], errors


@pytest.mark.parametrize("mode", ["float32-tf32", "bfloat16"])
def test_fused_backward_in_chunks_of_samples_under_the_workspace_limit(monkeypatch, mode):
    """A workspace limit that holds two samples' copies: five samples' gradients in chunks
    of 2, 2 and 1, into poisoned memory, against float64, bitwise repeatable, and the input
    gradient bit for bit as without the limit."""
    monkeypatch.setattr(fused, "preferred", lambda a, interleaved: True)
    chunks = []
    inner = fused.weight_gradient
    monkeypatch.setattr(fused, "weight_gradient",
                        lambda x, *rest, **kw: chunks.append(x.shape[0]) or inner(x, *rest, **kw))
    case = cases._c("chunked-backward", 5, 16, 16, (3, 5), (40, 36), padding=(1, 2))
    dtype, precision, tolerance = MODES[mode]
    x, w, b = _tensors(case, "chunks" + mode, dtype, False)
    a = conv_transpose_args("conv_transpose2d", 2, x, w, b, case.stride, case.padding,
                            case.output_padding, case.groups, case.dilation)
    one = fused.backward_workspace(a, x.element_size(), 1) * x.element_size()
    previous = gemmconv.get_workspace_limit()
    with gemmconv.float32_precision(precision):
        out = OURS[2](x, w, b, **case.kwargs)
        grad_out = torch.randn(out.shape, generator=generator(case.name, "gc"),
                               dtype=torch.float64).to(CUDA)
        whole = torch.autograd.grad(out, (x, w), grad_out.to(dtype), retain_graph=True)
        try:
            gemmconv.set_workspace_limit(2 * one + one // 2)
            chunks.clear()
            poison_allocator(x.numel() * x.element_size())
            mine = torch.autograd.grad(out, (x, w), grad_out.to(dtype), retain_graph=True)
            again = torch.autograd.grad(out, (x, w), grad_out.to(dtype))
        finally:
            gemmconv.set_workspace_limit(previous)
    assert chunks == [2, 2, 1] * 2
    assert all(torch.equal(m, g) for m, g in zip(mine, again))
    assert torch.equal(mine[0], whole[0])
    refs = reference64(case, x, w, b, grad_out)
    for m, t in zip(mine, refs[1:3]):
        assert rel_error(m, t) < tolerance


def test_fused_route_reads_a_strided_bias(monkeypatch, launches):
    """A bias of stride 2 through the public call: the kernel reads a contiguous copy."""
    monkeypatch.setattr(fused, "preferred", lambda a, interleaved: True)
    case = _aligned(cases.BENCH[0].scaled(1 << 12))
    x, w, b = case.tensors(torch.float32, CUDA, generator("strided-bias", "cuda"))
    spaced = torch.randn(2 * case.out_channels, device=CUDA)
    spaced[::2] = b
    out = OURS[case.nd](x, w, spaced[::2], **case.kwargs)
    assert launches[0] == 1
    assert rel_error(out, reference64(case, x, w, b)[0]) < 5e-3


STRIDED = [dataclasses.replace(c, out_channels=-(-c.out_channels // 8) * 8)
           for c in CASES if set(c.stride) != {1} and c.nd < 3 and not c.unbatched]


@pytest.mark.parametrize("layout", ["planar", "channels_last"])
@pytest.mark.parametrize("mode", ["float32-tf32", "float16", "bfloat16"])
@pytest.mark.parametrize("case", STRIDED, ids=lambda c: c.name)
def test_strided_backward_on_the_fused_kernels(case, mode, layout):
    """fused.strided_backward on every strided call of one or two spatial dims: the input
    and weight gradients against float64, into poisoned memory, bitwise repeatable, the
    input's in the input's layout."""
    if layout == "channels_last" and case.nd == 1:
        pytest.skip("no channels_last layout for 1-D inputs")
    dtype, _, tolerance = MODES[mode]
    x, w, b = _tensors(case, "strided" + mode + layout, dtype, layout == "channels_last")
    grad_out = torch.randn(case.batch, case.out_channels, *case.output_size,
                           generator=generator(case.name, "gs"), dtype=torch.float64).to(CUDA)
    if layout == "channels_last":
        grad_out = grad_out.contiguous(memory_format=torch.channels_last)
    a = conv_transpose_args(f"conv_transpose{case.nd}d", case.nd, x, w, b, case.stride,
                            case.padding, case.output_padding, 1, case.dilation)
    with gemmconv.float32_precision("tf32"), torch.no_grad():
        poison_allocator(x.numel() * x.element_size())     # where the input's gradient lands
        mine = fused.strided_backward(grad_out.to(dtype), x, w, a, (True, True))
        again = fused.strided_backward(grad_out.to(dtype), x, w, a, (True, True))
    assert all(torch.equal(m, g) for m, g in zip(mine, again))   # bitwise, run to run
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    assert mine[0].is_contiguous(memory_format=fmt)
    refs = reference64(case, x, w, b, grad_out)
    for m, t in zip(mine, refs[1:3]):
        assert m.dtype == dtype and rel_error(m, t) < tolerance
