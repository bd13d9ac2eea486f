"""CPU: gemmconv.conv_transpose{1,2,3}d against torch in float64 over the shared case table."""
import math
import weakref

import pytest
import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

import gemmconv
from gemmconv import cases, ops
from gemmconv.shapes import ConvArgumentError
from helpers import (OURS, TORCH, allowed_routes, case_args, force_im2col_route,
                     gather_first_stride_one, generator, reference, rel_error)

CASES = cases.random_cases(300, seed=1) + cases.EDGE + cases.LARGE_KERNELS + [c.scaled(256) for c in cases.BENCH]


def _leaves(case, key, dtype=torch.float64, requires_grad=(True, True, True)):
    tensors = case.tensors(dtype, generator=generator(case.name, key))
    return [None if t is None else t.requires_grad_(r) for t, r in zip(tensors, requires_grad)]


def _grads(out, leaves, grad_out):
    needed = [t for t in leaves if t is not None and t.requires_grad]
    return torch.autograd.grad(out, needed, grad_out) if out.numel() else [torch.zeros_like(t) for t in needed]


def _assert_same_gradients(case, out, ref, leaves, key):
    """Gradients of out and of torch's ref for the same fresh grad_output agree in float64."""
    grad = torch.randn(out.shape, generator=generator(case.name, key), dtype=torch.float64)
    for mine, theirs in zip(_grads(out, leaves, grad), _grads(ref, leaves, grad)):
        assert rel_error(mine, theirs) < 1e-12


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_forward_and_backward_match_torch(case):
    x, w, b = _leaves(case, "fb")
    out = OURS[case.nd](x, w, b, **case.kwargs)
    ref = reference(case, x, w, b)
    assert out.shape == ref.shape and out.dtype == x.dtype
    assert rel_error(out, ref) < 1e-12
    _assert_same_gradients(case, out, ref, [x, w, b], "grad")


@pytest.mark.parametrize("case", cases.random_cases(24, seed=7, max_elements=30) + cases.EDGE[:4],
                         ids=lambda c: c.name)
def test_gradcheck(case):
    if case.batch == 0:
        pytest.skip("nothing to differentiate")
    x, w, b = _leaves(case, "gradcheck")
    f = lambda *t: OURS[case.nd](*t, **case.kwargs)
    assert torch.autograd.gradcheck(f, (x, w, b), eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", [cases.EDGE[5], cases.EDGE[8]], ids=lambda c: c.name)
def test_strided_and_channels_last_inputs(case):
    x, w, b = _leaves(case, "layout", requires_grad=(False, False, False))
    memory_format = torch.channels_last if case.nd == 2 else torch.channels_last_3d
    weird_x = x.to(memory_format=memory_format)
    weird_w = w.transpose(0, 1).contiguous().transpose(0, 1)   # same values, other strides
    assert not weird_x.is_contiguous() and not weird_w.is_contiguous()
    out = OURS[case.nd](weird_x, weird_w, b, **case.kwargs)
    assert rel_error(out, reference(case, x, w, b)) < 1e-12
    doubled = torch.stack([x, x], 2).flatten(1, 2)[:, ::2]      # x again, as a strided view
    assert torch.equal(doubled, x) and not doubled.is_contiguous()
    assert rel_error(OURS[case.nd](doubled, w, b, **case.kwargs), reference(case, x, w, b)) < 1e-12


@pytest.mark.parametrize("layout", ["planar", "channels_last"])
@pytest.mark.parametrize("dtype,tolerance", [(torch.float32, 1e-6), (torch.bfloat16, 2e-2),
                                             (torch.float16, 3e-3)])
@pytest.mark.parametrize("case", cases.EDGE[:9], ids=lambda c: c.name)
def test_other_dtypes_on_cpu(case, dtype, tolerance, layout):
    """The output and all three gradients in each dtype against float64 on the same
    operands, planar and channels_last. (On channels_last_3d bfloat16 inputs torch's own CPU
    weight gradient came out wrong by orders of magnitude: benches/NOTES.md, session 60.)"""
    x, w, b = _leaves(case, "dtype", dtype)
    if layout == "channels_last":
        if case.nd == 1 or case.unbatched:
            pytest.skip("no channels_last layout for 1-D or unbatched inputs")
        memory_format = torch.channels_last if case.nd == 2 else torch.channels_last_3d
        x = x.detach().contiguous(memory_format=memory_format).requires_grad_()
    out = OURS[case.nd](x, w, b, **case.kwargs)
    assert out.dtype == dtype
    leaves = [None if t is None else t.detach().double().requires_grad_() for t in (x, w, b)]
    ref = reference(case, *leaves)
    assert rel_error(out, ref) < tolerance
    grad = torch.randn(out.shape, generator=generator(case.name, "dtype-grad")).to(dtype)
    got, want = _grads(out, [x, w, b], grad), _grads(ref, leaves, grad.double())
    assert all(g.dtype == dtype for g in got)
    assert all(rel_error(g, r) < tolerance for g, r in zip(got, want))


def test_empty_batch_returns_empty_result_and_zero_grads():
    case = next(c for c in cases.EDGE if c.batch == 0)
    x, w, b = _leaves(case, "empty")
    out = OURS[case.nd](x, w, b, **case.kwargs)
    assert out.shape == reference(case, x, w, b).shape == (0, case.out_channels, *case.output_size)
    out.sum().backward()
    assert w.grad.shape == w.shape and not w.grad.any() and not b.grad.any()


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_an_empty_batch_whose_output_sizes_reach_zero_gets_an_empty_output(nd):
    """torch gives an empty batch an empty output where padding takes the output sizes to 0
    exactly, and raises where they go below 0 or the batch is not empty: ours the same,
    forward and backward, and through the custom op (torch.compile)."""
    g = torch.Generator().manual_seed(nd)
    x = torch.randn(0, 2, *[1] * nd, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 3, *[2] * nd, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, generator=g, dtype=torch.float64, requires_grad=True)
    theirs, ours = getattr(F, f"conv_transpose{nd}d"), OURS[nd]
    out, ref = ours(x, w, b, padding=1), theirs(x, w, b, padding=1)
    assert out.shape == ref.shape == (0, 3, *[0] * nd)
    grads = torch.autograd.grad(out.sum(), (x, w, b))
    assert all(torch.equal(mine, want) for mine, want in
               zip(grads, torch.autograd.grad(ref.sum(), (x, w, b))))
    compiled = torch.compile(lambda *t: ours(*t, padding=1), fullgraph=True, backend="aot_eager")
    assert compiled(x, w, b).shape == ref.shape
    one = torch.randn(1, 2, *[1] * nd, generator=g, dtype=torch.float64)
    for call in (lambda f: f(one, w, b, padding=1), lambda f: f(x, w, b, padding=2)):
        with pytest.raises(RuntimeError):
            call(theirs)
        with pytest.raises(ConvArgumentError, match="Output size is too small"):
            call(ours)


PATH_CASES = cases.EDGE[:6] + cases.random_cases(6, seed=31)
CONVOLUTIONS = {1: gemmconv.conv1d, 2: gemmconv.conv2d, 3: gemmconv.conv3d}


def _convolution_call(case):
    """A convolution with the case's settings whose input is the case's input, when the
    padded input holds the kernel (else None)."""
    if any(s + 2 * p < d * (k - 1) + 1 for s, p, d, k in
           zip(case.size, case.padding, case.dilation, case.kernel_size)):
        return None
    x, _, b = _leaves(case, "paths")
    w = torch.randn(case.out_channels, case.in_channels // case.groups, *case.kernel_size,
                    dtype=torch.float64, generator=generator(case.name, "w"), requires_grad=True)
    kwargs = dict(stride=case.stride, padding=case.padding, dilation=case.dilation,
                  groups=case.groups)
    return CONVOLUTIONS[case.nd], (x, w, b), kwargs


@pytest.mark.parametrize("conv", [False, True], ids=["conv_transpose", "conv"])
@pytest.mark.parametrize("case", PATH_CASES, ids=lambda c: c.name)
def test_eager_function_and_custom_op_agree_bitwise(monkeypatch, case, conv):
    """Eager calls on plain tensors take ops._Eager; the custom ops (torch.compile, fake
    tensors) run the same functions, so both give the same bits, forward and backward."""
    call = _convolution_call(case) if conv else (OURS[case.nd], _leaves(case, "paths"), case.kwargs)
    if call is None:
        pytest.skip("the padded input is smaller than the kernel")
    fn, leaves, kwargs = call
    calls = []
    for name in ("_conv_transpose_op", "_conv_op"):
        real = getattr(ops, name)
        monkeypatch.setattr(ops, name, lambda *a, real=real: calls.append(real) or real(*a))
    runs = []
    for eager in (True, False):
        monkeypatch.setattr(ops, "_eager", lambda *t, eager=eager: eager)
        out = fn(*leaves, **kwargs)
        needed = [t for t in leaves if t is not None]
        grads = torch.autograd.grad(out, needed, torch.ones_like(out)) if out.numel() else []
        runs.append([out, *grads])
    assert len(calls) == 1                         # the op ran once: in the second run
    for eager_result, op_result in zip(*runs):
        assert torch.equal(eager_result, op_result)


@pytest.mark.parametrize("eager", [True, False])
def test_second_order_gradients_are_refused(monkeypatch, eager):
    monkeypatch.setattr(ops, "_eager", lambda *t: eager)
    case = cases.EDGE[0]
    x, w, b = _leaves(case, "second-order")
    out = OURS[case.nd](x, w, b, **case.kwargs)
    grad, = torch.autograd.grad(out.pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice|no autograd formula"):
        grad.sum().backward()


def test_unbatched_input_returns_unbatched_output():
    case = next(c for c in cases.EDGE if c.unbatched)
    x, w, b = _leaves(case, "unbatched")
    out = OURS[case.nd](x, w, b, **case.kwargs)
    assert out.shape == (case.out_channels, *case.output_size)
    assert rel_error(out, reference(case, x, w, b)) < 1e-12


@pytest.mark.parametrize("requires_grad", [(False, False, True), (True, False, False),
                                           (False, True, False), (True, True, True)])
@pytest.mark.parametrize("side_by_side", [False, True], ids=["per-sample", "samples-side-by-side"])
def test_backward_computes_only_what_is_asked(monkeypatch, requires_grad, side_by_side):
    case = cases.EDGE[5]                       # small: one chunk, no split of the weight GEMM
    monkeypatch.setattr(ops, "SAMPLES_INNER_MAX_POSITIONS", 1 << 20 if side_by_side else 0)
    x, w, b = _leaves(case, "mask", requires_grad=requires_grad)
    out = OURS[case.nd](x, w, b, **case.kwargs)
    products, weight_grads = [], []
    real_matmul, real_weight = ops.gemm.matmul, ops._add_weight_grad
    monkeypatch.setattr(ops.gemm, "matmul", lambda *a: products.append(1) or real_matmul(*a))
    monkeypatch.setattr(ops, "_add_weight_grad", lambda *a: weight_grads.append(1) or real_weight(*a))
    out.backward(torch.ones_like(out))
    assert len(weight_grads) == (0 if side_by_side else requires_grad[1])
    assert len(products) == requires_grad[0] + requires_grad[1]
    assert [t.grad is not None for t in (x, w, b)] == list(requires_grad)


@pytest.mark.parametrize("case", [
    cases.Case("bands-2d", 3, 4, 6, (3, 2), (7, 5), (2, 1), (1, 0), (1, 0), (1, 2), 2),
    cases.Case("bands-1d", 2, 3, 3, (4,), (9,), (1,), (2,), (0,), (2,)),
    cases.Case("bands-3d", 2, 2, 4, (2, 3, 2), (5, 3, 2), (3, 1, 2), (2, 1, 0), (2, 0, 1), (1, 1, 1)),
    cases.Case("bands-wide-stride", 2, 2, 2, (2,), (6,), (5,), (0,), (4,), (1,)),
], ids=lambda c: c.name)
@pytest.mark.parametrize("limit", [1 << 30, "sample", "row", 1])
def test_chunked_work_gives_the_same_answer(monkeypatch, case, limit):
    """Whole batches, one sample per chunk, bands of rows with their halos, and the least
    possible chunk (one output row) must all give torch's answer."""
    x, w, b = _leaves(case, f"chunks-{limit}")
    a = case_args(case, x, w, b)
    row = case.out_channels * math.prod(case.kernel_size) * math.prod(case.size[1:]) * 8
    limit = {"sample": row * case.size[0], "row": 2 * row}.get(limit, limit)
    monkeypatch.setattr(ops, "_workspace_limit", limit)
    monkeypatch.setattr(ops.ConvTransposeArgs, "route", lambda a: ((False,) * a.geometry.nd, False))
    forward, backward = a.forward_chunks(limit, 8), a.backward_chunks(limit, 8)
    expected = {1 << 30: 1, row * case.size[0]: case.batch}.get(limit)
    if expected:
        assert len(forward) == len(backward) == expected
    else:
        assert len(forward) > case.batch and len(backward) > case.batch
    out = OURS[case.nd](x, w, b, **case.kwargs)
    ref = reference(case, x, w, b)
    assert rel_error(out, ref) < 1e-12
    _assert_same_gradients(case, out, ref, [x, w, b], "g")


def test_workspace_limit_setting():
    before = gemmconv.get_workspace_limit()
    gemmconv.set_workspace_limit(1 << 20)
    assert gemmconv.get_workspace_limit() == 1 << 20
    gemmconv.set_workspace_limit(before)
    with pytest.raises(ValueError, match="positive number of bytes"):
        gemmconv.set_workspace_limit(0)


def test_integer_and_tuple_arguments_agree():
    case = cases.EDGE[6]
    x, w, b = _leaves(case, "ints")
    as_ints = gemmconv.conv_transpose2d(x, w, b, 2, 0, 0, 6, 1)
    as_tuples = gemmconv.conv_transpose2d(x, w, b, (2, 2), [0, 0], (0, 0), 6, (1,))
    assert torch.equal(as_ints, as_tuples)
    assert rel_error(as_ints, TORCH[2](x, w, b, 2, 0, 0, 6, 1)) < 1e-12


def test_cupy_missing_names_the_package(monkeypatch):
    import sys
    from gemmconv import _cuda
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(ImportError, match="cupy-cuda13x"):
        _cuda.cupy.__wrapped__()


STRIDE_ONE = [c for c in CASES if all(s == 1 for s in c.stride)]


@pytest.mark.parametrize("limit", [1 << 30, 1])
@pytest.mark.parametrize("case", STRIDE_ONE[:60], ids=lambda c: c.name)
def test_im2col_route_matches_torch(monkeypatch, case, limit):
    """The stride-1 route as a convolution (forward im2col + GEMM, backward on the same
    columns), forced, whole and in one-row bands."""
    force_im2col_route(monkeypatch)
    monkeypatch.setattr(ops, "_workspace_limit", limit)
    routes = []
    real = ops._forward_by_im2col
    monkeypatch.setattr(ops, "_forward_by_im2col", lambda *args: routes.append(1) or real(*args))
    x, w, b = _leaves(case, "im2col-route")
    out = OURS[case.nd](x, w, b, **case.kwargs)
    assert routes == [1]
    ref = reference(case, x, w, b)
    assert rel_error(out, ref) < 1e-12
    _assert_same_gradients(case, out, ref, [x, w, b], "g")


def _meta_args(case):
    """A bench case's checked arguments at full size, on meta tensors (no memory)."""
    x = torch.empty(case.batch, case.in_channels, *case.size, device="meta")
    w = torch.empty(case.in_channels, case.out_channels // case.groups, *case.kernel_size,
                    device="meta")
    return case_args(case, x, w, None)


def test_cost_model_takes_im2col_only_where_it_moves_fewer_bytes():
    by_name = {c.name: _meta_args(c) for c in cases.BENCH}
    assert by_name["2d-64to128"].prefers_im2col()                # C_in = C_out / 2
    assert by_name["3d-32to64"].prefers_im2col()
    assert not by_name["2d-1024"].prefers_im2col()               # C_in = C_out: more positions out
    assert not by_name["2d-strided-grouped"].prefers_im2col()    # stride 2x3: no such route


def test_cost_model_splits_the_taps_where_that_moves_fewer_bytes():
    """The forward's route (the dims whose taps im2col gathers) on the bench cases."""
    by_name = {c.name: _meta_args(c) for c in cases.BENCH}
    route = {name: a.gathered_dims() for name, a in by_name.items()}
    # Strided, dilation not a multiple of the stride: GEMM + col2im is the only route.
    for name in ("2d-stride5-dil2", "3d-strided-grouped", "3d-stride2-grouped"):
        assert route[name] == (False,) * len(route[name])
    # Stride 2, dilation 2: every tap lands on odd positions. Gathering them onto those
    # (phase) positions moves fewer bytes, except in 1-D, where C_in * K + C_out rows a
    # position against C_out * K do not clear the margin.
    assert route["3d-stride2-dil2"] in ((False, True, True), (True, False, True), (True, True, False))
    assert route["2d-strided-grouped"] == (True, False)          # stride 3 along W
    assert route["1d-strided"] == (False,)
    # 1-D at stride 1: all or nothing. C_in = C_out / 2 makes im2col's columns the smaller.
    assert route["1d-dil3"] == (True,) and by_name["1d-dil3"].split((True,)).direct
    assert route["1d-65536"] == (False,)                         # C_in = C_out: no gain
    # 3x3 with C_in = C_out: 3 + 3 column rows a channel instead of 9.
    assert sum(route["2d-1024"]) == 1 and sum(route["2d-512x1024"]) == 1
    assert route["2d-3x7-512"] == (True, False)                  # 3 + 7 beat 3 * 7 either way
    assert route["3d-32to64"] in ((True, True, False), (True, False, True))
    for name in ("2d-1024", "2d-3x7-512", "2d-64to128", "3d-3x5x7", "3d-64cube", "3d-32to64",
                 "3d-96cube", "3d-stride2-dil2", "2d-strided-grouped"):
        a = by_name[name]
        split, plain = a.split(route[name]), a.split((False,) * a.geometry.nd)
        assert not split.direct
        assert split.column_elements(a.groups) < 0.8 * plain.column_elements(a.groups)
    with pytest.raises(ConvArgumentError, match="dilation is a multiple of their stride"):
        by_name["2d-strided-grouped"].split((False, True))


def test_cost_model_takes_row_products_where_they_move_fewer_bytes():
    """The forward by row products (ops._forward_by_rows) on the bench cases: where the
    outer dim's taps can ride on the GEMM (stride-1 or phase outer dim with several taps,
    one group, 32 grid rows or more) and that moves fewer bytes than the split route."""
    by_name = {c.name: _meta_args(c) for c in cases.BENCH}
    route = {name: a.route() for name, a in by_name.items()}
    rows = {name for name, (_, by_rows) in route.items() if by_rows}
    assert rows == {"2d-1024", "2d-3x7-512", "2d-64to128", "2d-512x1024", "2d-3x7-padded",
                    "3d-64cube", "3d-32to64", "3d-96cube"}
    for name in rows:
        a, (gathered, _) = by_name[name], route[name]
        assert a.split(gathered).overlaps and a.rows_cost(gathered) < a.route_cost(a.gathered_dims())
    # 3x3 with C_in = C_out: the W taps summed by col2im (64 + 3 * 64 rows a position) tie
    # with gathering them (3 * 64 + 64), which costs a pass more.
    assert route["2d-1024"] == ((True, False), True)
    assert route["2d-64to128"] == ((True, True), True)           # C_in = C_out / 2
    assert by_name["3d-3x5x7"].split((True, True, False)).overlaps
    assert route["3d-3x5x7"] == ((False, False, True), False)    # 18 rows: too few products
    assert not by_name["2d-strided-grouped"].split((True, False)).overlaps or \
        by_name["2d-strided-grouped"].groups > 1
    assert not by_name["1d-dil3"].split((True,)).overlaps          # one dim: products of one row


@pytest.mark.parametrize("case", [c for c in CASES if c.batch and not c.unbatched],
                         ids=lambda c: c.name)
def test_every_split_of_the_taps_matches_torch(monkeypatch, case):
    """The forward along every route the case's strides allow: taps of any subset of the
    dims whose dilation is a multiple of their stride gathered by im2col before the GEMM,
    the rest summed by col2im after it; whole samples and one-row bands (with bands that no
    tap reaches)."""
    x, w, b = _leaves(case, "split")
    a = case_args(case, x, w, b)
    ref = reference(case, x, w, b)
    for route, rows in allowed_routes(case, a):
        for limit in (1 << 30, 1):
            monkeypatch.setattr(ops, "_workspace_limit", limit)
            out = ops._forward(x, w, b, a, route, rows)
            assert rel_error(out, ref) < 1e-12, (route, rows, limit)


@pytest.mark.parametrize("case", [c for c in CASES if 1 in c.stride][:80], ids=lambda c: c.name)
def test_split_routes_inside_the_backward_match_torch(monkeypatch, case):
    """Forward and backward with every forward pass (including the convolutions the backward
    runs, which have stride 1) gathering its first stride-1 dim."""
    gather_first_stride_one(monkeypatch)
    x, w, b = _leaves(case, "split-backward")
    out = OURS[case.nd](x, w, b, **case.kwargs)
    ref = reference(case, x, w, b)
    assert rel_error(out, ref) < 1e-12
    _assert_same_gradients(case, out, ref, [x, w, b], "g")


def _assert_split_weight_gradient_matches(monkeypatch, case, key):
    """With the weight gradient's positions cut into pieces of two (and a left-over tail),
    the weight gradient must still be torch's. (Per-sample products: on the samples side by
    side there is one product and nothing to split.)"""
    monkeypatch.setattr(ops, "SAMPLES_INNER_MAX_POSITIONS", 0)
    monkeypatch.setattr(ops, "SPLIT_MIN_POSITIONS", 2)
    monkeypatch.setattr(ops, "SPLIT_TARGET_TILES", 10**6)
    monkeypatch.setattr(ops, "SPLIT_ALIGN", 1)
    x, w, b = _leaves(case, key)
    out = OURS[case.nd](x, w, b, **case.kwargs)
    ref = reference(case, x, w, b)
    grad = torch.randn(out.shape, generator=generator(case.name, "g"), dtype=torch.float64)
    assert rel_error(torch.autograd.grad(out, w, grad)[0], torch.autograd.grad(ref, w, grad)[0]) < 1e-12


@pytest.mark.parametrize("case", [c for c in CASES if c.batch and c.groups > 1][:20],
                         ids=lambda c: c.name)
def test_grouped_weight_gradient_as_one_dense_product(monkeypatch, case):
    """All groups' weight gradients from one product over all groups, its diagonal blocks
    kept (the CUDA path's choice for few channels per group), split-K included."""
    calls = []
    monkeypatch.setattr(gemmconv.gemm, "dense_groups", lambda dtype, cuda, g, cin: calls.append(g) or g > 1)
    _assert_split_weight_gradient_matches(monkeypatch, case, "dense-groups")
    assert case.groups in calls


@pytest.mark.parametrize("case", [c for c in CASES if c.batch][:40], ids=lambda c: c.name)
def test_split_k_weight_gradient(monkeypatch, case):
    """The weight gradient's positions cut into pieces (with a left-over tail) and summed."""
    _assert_split_weight_gradient_matches(monkeypatch, case, "split-k")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("in_channels", [3, 5, 6, 8])
def test_convolution_bias_rides_in_the_gemm(monkeypatch, dtype, in_channels):
    """conv1d's bias goes through its GEMM as rows of ones: the product's inner dim grows
    from C_in * k to a whole 16 bytes of weight row (cuBLAS's aligned kernels), and the
    output still matches torch with the bias added."""
    inner = []
    matmul = gemmconv.gemm.matmul
    monkeypatch.setattr(gemmconv.gemm, "matmul",
                        lambda a, b, out: inner.append(a.shape[-1]) or matmul(a, b, out))
    gen = torch.Generator().manual_seed(in_channels)
    x, w, b = (torch.randn(*s, generator=gen, dtype=torch.float64)
               for s in ((2, in_channels, 30), (4, in_channels, 5), (4,)))
    out = gemmconv.conv1d(x.to(dtype), w.to(dtype), b.to(dtype), padding=1)
    (rows,), size = inner, x.to(dtype).element_size()
    assert rows * size % 16 == 0 and in_channels * 5 + 2 <= rows < in_channels * 5 + 2 + 16 // size
    tolerance = {torch.float64: 1e-12, torch.float32: 1e-5}.get(dtype, 2e-2)
    ref = torch.nn.functional.conv1d(x, w, b, padding=1)
    assert (out.double() - ref).norm() / ref.norm() < tolerance


def _record_calls(monkeypatch, *targets) -> list:
    """Patches each (module, name) to append its name to the returned list, then run."""
    order = []
    for module, name in targets:
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *args, real=real, name=name, **kwargs:
                            order.append(name) or real(*args, **kwargs))
    return order


def _fresh(key: str, *shapes) -> list:
    """Random float64 tensors of ``shapes``, drawn for ``key``."""
    return [torch.randn(shape, dtype=torch.float64, generator=generator(key, shape))
            for shape in shapes]


def test_first_im2col_is_queued_before_the_bias_columns_are_built(monkeypatch):
    """A convolution with a bias queues its first im2col before building the GEMM's weight
    operand with the bias columns (several small kernels), so that the GPU starts meanwhile."""
    order = _record_calls(monkeypatch, (gemmconv.columns, "im2col"), (ops, "_bias_columns"))
    x, w, b = _fresh("order", (2, 3, 8, 8), (4, 3, 3, 3), (4,))
    out = gemmconv.conv2d(x, w, b, padding=1)
    assert rel_error(out, torch.nn.functional.conv2d(x, w, b, padding=1)) < 1e-12
    assert order == ["im2col", "_bias_columns"]


@pytest.mark.parametrize("route", [((False,), False), ((True, False), True)],
                         ids=["GEMM + col2im", "row products"])
def test_first_kernel_is_queued_before_the_output_is_allocated(monkeypatch, route):
    """A forward queues its first kernel (the GEMM, or the row products' im2col) before it
    allocates the output, so that the GPU starts while the host does that."""
    nd = len(route[0])
    x, w, b = _fresh("alloc", (2, 3, *[9] * nd), (3, 4, *[3] * nd), (4,))
    kw = dict(stride=2, padding=1, dilation=2) if nd == 1 else {}
    a = ops.conv_transpose_args(f"conv_transpose{nd}d", nd, x, w, b, kw.get("stride", 1),
                                kw.get("padding", 0), 0, 1, kw.get("dilation", 1))
    order = _record_calls(monkeypatch, (gemmconv.columns, "im2col"), (ops.gemm, "matmul"))
    real_new_empty = torch.Tensor.new_empty

    def new_empty(t, size, **k):
        order.append("output" if size == a.output_shape else "buffer")
        return real_new_empty(t, size, **k)
    monkeypatch.setattr(torch.Tensor, "new_empty", new_empty)
    out = ops._forward(x, w, b, a, *route)
    assert rel_error(out, TORCH[nd](x, w, b, **kw)) < 1e-12
    first = "im2col" if route[1] else "matmul"
    assert order.index(first) < order.index("output") and order.count("output") == 1


def test_first_im2col_is_queued_before_the_flipped_weight_is_built(monkeypatch):
    """The im2col route (a stride-1 transposed convolution as a convolution) queues its first
    im2col before it flips the weight, so that the GPU starts meanwhile."""
    order = _record_calls(monkeypatch, (gemmconv.columns, "im2col"), (ops, "_convolution_weight"))
    x, w, b = _fresh("flip", (2, 3, 20), (3, 4, 3), (4,))
    a = ops.conv_transpose_args("conv_transpose1d", 1, x, w, b, 1, 0, 0, 1, 3)
    out = ops._forward(x, w, b, a, (True,), False)
    assert rel_error(out, torch.nn.functional.conv_transpose1d(x, w, b, dilation=3)) < 1e-12
    assert order == ["im2col", "_convolution_weight"]


# Pointwise calls (ConvTransposeArgs.pointwise): (conv or transposed, spatial size, channels
# in, out, groups, bias, layout). Over 1024 positions a sample (ops._samples_inner) but for
# the 8x8 one, whose forward products are batched over the samples in place.
POINTWISE = [
    ("conv", (1100,), 6, 4, 2, True, "planar"),
    ("conv", (40, 40), 4, 6, 1, False, "planar"),
    ("conv", (40, 40), 8, 4, 2, True, "channels_last"),
    ("conv", (40, 40), 4, 8, 1, True, "channels_last"),
    ("conv", (11, 11, 11), 6, 3, 3, True, "planar"),
    ("conv", (11, 11, 11), 3, 6, 1, True, "channels_last"),
    ("conv_transpose", (40, 40), 6, 4, 2, True, "planar"),
    ("conv_transpose", (40, 40), 4, 8, 1, True, "channels_last"),
]


@pytest.mark.parametrize("kind,size,cin,cout,groups,bias,layout", POINTWISE,
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_pointwise_calls_read_their_columns_where_they_lie(monkeypatch, kind, size, cin, cout,
                                                           groups, bias, layout):
    """A 1x1 convolution at stride 1 (or a transposed one) runs no im2col: its GEMMs read
    the input, and its gradients read the output gradient, where they lie (the columns
    are those tensors). Forward and every gradient against torch in float64."""
    from gemmconv import columns
    order = _record_calls(monkeypatch, (columns, "im2col"), (columns, "im2col_interleaved"))
    nd = len(size)
    w_shape = (cout, cin // groups) if kind == "conv" else (cin, cout // groups)
    x, w, b = _fresh(f"pointwise-{kind}-{size}-{layout}", (2, cin, *size), (*w_shape, *[1] * nd),
                     (cout,))
    b = b if bias else None
    if layout == "channels_last":
        x = x.contiguous(memory_format=gemmconv.channels_last.memory_format(nd + 2))
    leaves = [t.requires_grad_() for t in (x, w, b) if t is not None]
    ours, theirs = (getattr(m, f"{kind}{nd}d") for m in (gemmconv, F))
    out = ours(x, w, b, groups=groups)
    ref = theirs(x, w, b, groups=groups)
    assert rel_error(out, ref) < 1e-12
    grad = torch.randn(out.shape, dtype=torch.float64, generator=generator(kind, size, layout))
    for mine, expected in zip(torch.autograd.grad(out, leaves, grad),
                              torch.autograd.grad(ref, leaves, grad)):
        assert rel_error(mine, expected) < 1e-12
    assert order == []


@pytest.mark.parametrize("batch,side,cin,cout,bias,need_weight,copies", [
    (2, 8, 80, 64, False, False, 0),   # side by side, the forward's products batched in place
    (2, 8, 80, 32, False, False, 1),   # side by side, a reordered copy (few output channels)
    (2, 8, 80, 64, False, True, 1),    # the weight gradient's product over the samples
    (1, 40, 4, 8, True, True, 1),      # the bias: more channels out than in
])
def test_pointwise_planar_calls_copy_their_columns_where_the_gemms_need_another_layout(
        monkeypatch, batch, side, cin, cout, bias, need_weight, copies):
    """Where a pointwise planar call's samples go side by side (few positions,
    ops._samples_inner) for a product that reads them there (the weight gradient's, or an
    input gradient's of few channels: ops._samples_batched), or where its bias, added
    afterwards, would move more than the copy, im2col makes the columns, as for any other
    call; elsewhere the GEMMs read them in place."""
    from gemmconv import columns
    order = _record_calls(monkeypatch, (columns, "im2col"))
    x, w, b = _fresh(f"pointwise-copied-{side}-{cout}", (batch, cin, side, side),
                     (cout, cin, 1, 1), (cout,))
    b = b if bias else None
    w.requires_grad_(need_weight)
    out, ref = gemmconv.conv2d(x, w, b), F.conv2d(x, w, b)
    assert rel_error(out, ref) < 1e-12
    if need_weight:
        grad = torch.randn(out.shape, dtype=torch.float64, generator=generator("copied", side))
        assert rel_error(torch.autograd.grad(out, w, grad)[0],
                         torch.autograd.grad(ref, w, grad)[0]) < 1e-12
    assert order == ["im2col"] * copies


IN_PLACE = {   # name: (gemmconv's call, torch's, input shape)
    "conv_transpose2d-stride1": (lambda t, w: gemmconv.conv_transpose2d(t, w, padding=1),
                                 lambda t, w: F.conv_transpose2d(t, w, padding=1), (2, 3, 6, 7)),
    "conv_transpose2d-stride2": (lambda t, w: gemmconv.conv_transpose2d(t, w, stride=2),
                                 lambda t, w: F.conv_transpose2d(t, w, stride=2), (2, 3, 6, 7)),
    "conv2d": (lambda t, w: gemmconv.conv2d(t, w, padding=1),
               lambda t, w: F.conv2d(t, w, padding=1), (2, 3, 6, 7)),
    "im2col": (lambda t, w: gemmconv.im2col(t, 3), lambda t, w: F.unfold(t, 3), (2, 3, 6, 7)),
    "col2im": (lambda t, w: gemmconv.col2im(t, (6, 7), 3), lambda t, w: F.fold(t, (6, 7), 3),
               (2, 27, 20)),
}


@pytest.mark.parametrize("op", IN_PLACE)
def test_outputs_can_be_changed_in_place_under_autograd(op):
    """An output that autograd sees as a view made inside the op cannot be changed in place
    (``RuntimeError: Output 0 of ... is a view and is being modified inplace``), as a
    ``ReLU(inplace=True)`` after a convolution does in VGG-style and FCN models."""
    gen = generator(op)
    x = torch.randn(IN_PLACE[op][2], generator=gen, dtype=torch.float64)
    w = torch.randn(3, 3, 3, 3, generator=gen, dtype=torch.float64)
    results = []
    for call in IN_PLACE[op][:2]:
        t = x.clone().requires_grad_()
        out = call(t, w).relu_()
        results.append((out, torch.autograd.grad(out.square().sum(), t)[0]))
    (out, grad), (ref, ref_grad) = results
    assert rel_error(out, ref) < 1e-12 and rel_error(grad, ref_grad) < 1e-12


@pytest.mark.parametrize("side_by_side", [False, True], ids=["per-sample", "samples-side-by-side"])
@pytest.mark.parametrize("case", cases.random_cases(40, seed=41) + cases.EDGE + cases.LARGE_KERNELS,
                         ids=lambda c: c.name)
def test_both_sample_layouts_match_torch(monkeypatch, case, side_by_side):
    """The GEMMs per sample and on the samples side by side (ops.SAMPLES_INNER_MAX_POSITIONS),
    forward and every gradient, nothing gathered and the cost model's route, against torch."""
    monkeypatch.setattr(ops, "SAMPLES_INNER_MAX_POSITIONS", 1 << 20 if side_by_side else 0)
    ops._forward_plan.cache_clear()
    try:
        for route in (None, lambda a: ((False,) * a.geometry.nd, False)):
            if route is not None:
                monkeypatch.setattr(ops.ConvTransposeArgs, "route", route)
            x, w, b = _leaves(case, f"layouts-{side_by_side}-{route is None}")
            out = OURS[case.nd](x, w, b, **case.kwargs)
            grad = torch.randn(out.shape, generator=generator(case.name), dtype=torch.float64)
            leaves = [t for t in (x, w, b) if t is not None]
            mine = torch.autograd.grad(out, leaves, grad)
            ref = reference(case, x, w, b)
            assert rel_error(out, ref) < 1e-12
            for m, r in zip(mine, torch.autograd.grad(ref, leaves, grad)):
                assert rel_error(m, r) < 1e-12
    finally:
        ops._forward_plan.cache_clear()


@pytest.mark.parametrize("side_by_side", [False, True], ids=["per-sample", "samples-side-by-side"])
def test_column_views_have_the_kernels_layout(monkeypatch, side_by_side):
    """Every columns view the forward and backward hand to col2im and im2col has the layout
    the CUDA kernels read (shapes.Geometry.extent_fields: each channel's taps back to back),
    kernels of a single tap too, whose size-one dim a view may give any stride."""
    from gemmconv import columns
    monkeypatch.setattr(ops, "SAMPLES_INNER_MAX_POSITIONS", 1 << 20 if side_by_side else 0)
    ops._forward_plan.cache_clear()
    checked = []

    def checking(kernel):
        def run(*args, **kwargs):
            result = kernel(*args, **kwargs)
            cols, g, grid = (args[0], args[2], args[3]) if kernel is real_col2im else \
                (kwargs.get("out"), args[1], args[2])
            if cols is not None and cols.dim() >= 4:
                view = columns.blocks(cols, 1, g.taps, grid)
                g.extent_fields(view, 1, [1] * g.nd, g.padding)
                checked.append(view.shape)
            return result
        return run
    real_col2im, real_im2col = columns.col2im, columns.im2col
    monkeypatch.setattr(columns, "col2im", checking(real_col2im))
    monkeypatch.setattr(columns, "im2col", checking(real_im2col))
    try:
        for case in cases.random_cases(60, seed=11) + cases.EDGE:
            x, w, b = _leaves(case, "views")
            out = OURS[case.nd](x, w, b, **case.kwargs)
            if out.numel():
                out.sum().backward()
    finally:
        ops._forward_plan.cache_clear()
    assert len(checked) > 60


class _LiveBytes(TorchDispatchMode):
    """The most bytes of new storage alive at once among the tensors made inside it (storage
    that no argument of the op shares: outputs written in place are not counted)."""

    def __init__(self):
        super().__init__()
        self.live = self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        given = {t.untyped_storage().data_ptr() for t in pytree.tree_leaves((args, kwargs))
                 if isinstance(t, torch.Tensor)}
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in given \
                    and t.untyped_storage().nbytes():
                nbytes = t.untyped_storage().nbytes()
                self.live += nbytes
                self.peak = max(self.peak, self.live)
                weakref.finalize(t, self._free, nbytes)
        return out

    def _free(self, nbytes: int) -> None:
        self.live -= nbytes


@pytest.mark.parametrize("groups,tail", [(1, 0), (1, 40), (3, 0), (3, 40)])
def test_weight_gradient_partials_stay_within_their_count(monkeypatch, groups, tail):
    """_add_weight_grad's partial products (split-K pieces group by group, a tail, their
    sums) take no more memory at once than _weight_grad_partials counts for them: the
    bound a backward's CUDA graph is kept by (ops._GraphedBackward.graph_bytes). Products
    written in place, as cuBLAS writes them."""
    monkeypatch.setattr(ops, "SPLIT_MIN_POSITIONS", 64)

    def in_place(a, b, out, choose_layout=True):
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                torch.mm(a[min(i, a.shape[0] - 1), min(j, a.shape[1] - 1)],
                         b[min(i, b.shape[0] - 1), min(j, b.shape[1] - 1)], out=out[i, j])
        return out
    monkeypatch.setattr(ops.gemm, "matmul", in_place)
    n, cin, m, band = 2, 5, 6, 3 * 64 + tail
    pieces, size = ops._split_k(n, groups, cin, m, band)
    assert pieces == 3 and band - pieces * size == tail
    g = generator("partials", groups, tail)
    x = torch.randn(n, groups, cin, band, generator=g)
    columns = torch.randn(n, groups, m, band, generator=g)
    grad_weight = torch.zeros(groups, cin, m)
    with _LiveBytes() as live:
        ops._add_weight_grad(grad_weight, x, columns, 0, 0)
    assert 0 < live.peak <= 4 * ops._weight_grad_partials(n, groups, cin, m, band, False)
    expected = torch.einsum("ngcp,ngmp->gcm", x.double(), columns.double())
    assert rel_error(grad_weight, expected) < 1e-6
