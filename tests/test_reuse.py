"""CPU: convolutions, im2col/col2im (fold/unfold), convert, torch.compile and autocast."""
import copy
import io
import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import gemmconv
from gemmconv import _node, cases
from helpers import generator, rel_error

CONV = {1: (F.conv1d, gemmconv.conv1d), 2: (F.conv2d, gemmconv.conv2d), 3: (F.conv3d, gemmconv.conv3d)}
FOLDABLE = cases.random_cases(120, seed=21) + cases.EDGE + cases.LARGE_KERNELS


def _conv_kwargs(case):
    return dict(stride=case.stride, padding=case.padding, dilation=case.dilation, groups=case.groups)


def _conv_tensors(case, key, dtype=torch.float64):
    gen = generator(case.name, key)
    shape = (case.in_channels, *case.size) if case.unbatched else (case.batch, case.in_channels, *case.size)
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    w = torch.randn(case.out_channels, case.in_channels // case.groups, *case.kernel_size,
                    generator=gen, dtype=torch.float64)
    b = torch.randn(case.out_channels, generator=gen, dtype=torch.float64) if case.bias else None
    return [None if t is None else t.to(dtype).requires_grad_() for t in (x, w, b)]


def _valid_conv(case):
    return all(s + 2 * p >= d * (k - 1) + 1 for s, p, d, k in
               zip(case.size, case.padding, case.dilation, case.kernel_size))


CONV_CASES = [c for c in cases.random_cases(200, seed=22) + cases.EDGE if _valid_conv(c)]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: c.name)
def test_conv_matches_torch(case):
    theirs, ours = CONV[case.nd]
    x, w, b = leaves = _conv_tensors(case, "conv")
    out, ref = ours(x, w, b, **_conv_kwargs(case)), theirs(x, w, b, **_conv_kwargs(case))
    assert out.shape == ref.shape and rel_error(out, ref) < 1e-12
    if out.numel():
        grad = torch.randn(out.shape, generator=generator(case.name, "g"), dtype=torch.float64)
        needed = [t for t in leaves if t is not None]
        for m, t in zip(torch.autograd.grad(out, needed, grad), torch.autograd.grad(ref, needed, grad)):
            assert rel_error(m, t) < 1e-12


CONV_LAYER_PARAMS = [(c, layout) for c in cases.CONV_LAYERS
                     for layout in ("planar", "channels_last")[:1 + (c.nd > 1)]]
CONV_LAYER_IDS = [f"{c.name}-{layout}" for c, layout in CONV_LAYER_PARAMS]


def _layer_tensors(case, key, layout, dtype=torch.float64, device="cpu"):
    """Fresh ``(x, w, b)`` of the convolution ``case`` (_conv_tensors', drawn in float64),
    in ``dtype`` on ``device``, x channels_last where ``layout`` says."""
    x, w, b = (None if t is None else t.detach().to(device, dtype)
               for t in _conv_tensors(case, key))
    if layout == "channels_last":
        from gemmconv import channels_last as cl
        x = x.contiguous(memory_format=cl.memory_format(x.dim()))
    return x, w, b


@pytest.mark.parametrize("case,layout", CONV_LAYER_PARAMS, ids=CONV_LAYER_IDS)
def test_conv_replay_runs_into_the_output_it_is_given(monkeypatch, case, layout):
    """ops._ConvReplay.run, the launches a small CUDA convolution's graph captures, on the
    CPU: every element of the output it is given (NaN before) written, in the layout the
    call takes, against torch's float64 convolution. A call of more columns than a graph
    takes (ops.GRAPHED_CONV_MAX_COLUMNS), or of no samples, has no replay."""
    from gemmconv import channels_last as cl, ops
    from gemmconv.shapes import conv_args
    x, w, b = _layer_tensors(case, "replay", layout)
    a = conv_args(f"conv{case.nd}d", case.nd, x, w, b, **_conv_kwargs(case))
    replay = ops._ConvReplay.planned(x, w, a)
    assert replay is not None and replay.interleaved == (layout == "channels_last")
    out = cl.empty(x, a.input_shape, replay.interleaved).fill_(float("nan"))
    assert replay.run(x, w, b, a, out=out) is out
    assert rel_error(out, CONV[case.nd][0](x, w, b, **_conv_kwargs(case))) < 1e-12
    empty = conv_args(f"conv{case.nd}d", case.nd, x[:0], w, b, **_conv_kwargs(case))
    assert ops._ConvReplay.planned(x[:0], w, empty) is None
    monkeypatch.setattr(ops, "GRAPHED_CONV_MAX_COLUMNS", replay.columns)
    assert ops._ConvReplay.planned(x, w, a) == replay
    monkeypatch.setattr(ops, "GRAPHED_CONV_MAX_COLUMNS", replay.columns - 1)
    assert ops._ConvReplay.planned(x, w, a) is None


@pytest.mark.parametrize("case,layout", CONV_LAYER_PARAMS, ids=CONV_LAYER_IDS)
def test_conv_backward_replay_runs_into_the_gradients_it_allocates(monkeypatch, case, layout):
    """ops._ConvBackwardReplay.run, the launches a small CUDA convolution's backward graph
    captures, on the CPU: each gradient asked for written whole into the tensor
    ``gradients`` allocated (NaN before; the input's in the call's layout, the weight's in
    the weight's), None for the others, against torch's float64 gradients. It has a replay
    where the forward has one (_ConvReplay.planned), and its memory bound holds at least
    the columns and gradients it makes."""
    from gemmconv import channels_last as cl, ops
    from gemmconv.shapes import conv_args
    x, w, b = _layer_tensors(case, "backward-replay", layout)
    layout_format = cl.memory_format(x.dim()) if layout == "channels_last" else \
        torch.contiguous_format
    w = w.contiguous(memory_format=layout_format)
    a = conv_args(f"conv{case.nd}d", case.nd, x, w, b, **_conv_kwargs(case))
    leaves = [t.detach().requires_grad_() for t in (x, w, b) if t is not None]
    out = CONV[case.nd][0](*leaves, **_conv_kwargs(case))
    grad = torch.randn(out.shape, generator=generator(case.name, "backward-grad"),
                       dtype=torch.float64)
    replay = ops._ConvBackwardReplay.planned(grad, x, w, a)
    forward = ops._ConvReplay.planned(x, w, a)
    assert replay == (forward.interleaved, forward.columns,
                      ops._conv_backward_bytes(forward.columns, grad, x, w, a))
    refs = torch.autograd.grad(out, leaves, grad)
    for need in ([True, True, b is not None], [False, True, False], [True, False, False]):
        grads = replay.gradients(grad, x, w, need)
        for g in grads:
            if g is not None:
                g.fill_(float("nan"))
        assert replay.run(grad, x, w, a, need, grads) is grads
        assert [g is not None for g in grads] == need
        assert grads[1] is None or grads[1].stride() == w.stride()
        assert grads[0] is None or grads[0].is_contiguous(memory_format=layout_format)
        for ours, ref in zip([g for g, asked in zip(grads, need) if asked],
                             [r for r, asked in zip(refs, need) if asked]):
            assert rel_error(ours, ref) < 1e-12
    columns = a.batch * math.prod(a.grid) * a.out_channels * a.geometry.taps
    gradients = x.numel() + w.numel()
    assert replay.graph_bytes(grad, x, w, a) > (columns + gradients) * x.element_size()
    monkeypatch.setattr(ops, "GRAPHED_CONV_MAX_COLUMNS", replay.columns - 1)
    assert ops._ConvBackwardReplay.planned(grad, x, w, a) is None


@pytest.mark.parametrize("case,layout", CONV_LAYER_PARAMS[:4], ids=CONV_LAYER_IDS[:4])
def test_a_conv_backward_replay_over_the_graph_limit_launches_no_copies(monkeypatch, case,
                                                                        layout):
    """ops._ConvBackwardReplay.graphed, on the CPU: where its bound is over the graphs'
    memory limit, the gradients as _conv_gradients makes them, neither ``run``'s copies
    of them nor a graph asked for; within it, the tensors allocated for a graph, written by
    ``run`` where graphs.launch runs none. Right against torch's float64 gradients."""
    from gemmconv import _cuda, graphs, ops
    from gemmconv.shapes import conv_args
    x, w, b = _layer_tensors(case, "backward-eager", layout)
    a = conv_args(f"conv{case.nd}d", case.nd, x, w, b, **_conv_kwargs(case))
    leaves = [t.detach().requires_grad_() for t in (x, w, b) if t is not None]
    out = CONV[case.nd][0](*leaves, **_conv_kwargs(case))
    grad = torch.randn(out.shape, generator=generator(case.name, "backward-eager-grad"),
                       dtype=torch.float64)
    refs = torch.autograd.grad(out, leaves, grad)
    replay = ops._ConvBackwardReplay.planned(grad, x, w, a)
    need = [True, True, b is not None]
    run, runs, launched = ops._ConvBackwardReplay.run, [], []
    monkeypatch.setattr(ops._ConvBackwardReplay, "run",
                        lambda *args: runs.append(args) or run(*args))
    monkeypatch.setattr(graphs, "launch", lambda *args: launched.append(args) or False)
    monkeypatch.setattr(_cuda, "raw_stream", lambda device: 0)
    monkeypatch.setattr(graphs, "_memory_limit", replay.nbytes - 1)
    eager = replay.graphed(grad, x, w, a, need)
    assert not launched and not runs
    monkeypatch.setattr(graphs, "_memory_limit", replay.nbytes)
    allocated = replay.graphed(grad, x, w, a, need)
    assert len(launched) == 1 and len(runs) == 1
    assert [g is not None for g in allocated] == need
    for grads in (eager, allocated):
        for ours, ref in zip(grads, refs):
            assert rel_error(ours, ref) < 1e-12


@pytest.mark.parametrize("case,layout", CONV_LAYER_PARAMS, ids=CONV_LAYER_IDS)
def test_the_cost_model_sends_large_2d_convolutions_to_the_fused_kernel(monkeypatch, case, layout):
    """ops._conv_replay, on meta tensors (a CUDA device's stand-in): a 2-D convolution that
    fused.convolution can take (stride 1, one group, channels in whole 16-byte rows) of at
    least fused.CONVOLUTION_MIN_COLUMNS column elements and at most
    fused.CONVOLUTION_MAX_OUT_CHANNELS output channels takes it, in the input's layout, but
    a pointwise one whose planar input the kernel would copy; one column element fewer, an
    output channel more, a call it cannot take, or any call while the floor is None, the
    column route's replay."""
    import math
    from gemmconv import fused, ops
    from gemmconv.shapes import conv_args
    x, w, b = _layer_tensors(case, "route", layout, torch.float32, "meta")
    a = conv_args(f"conv{case.nd}d", case.nd, x, w, b, **_conv_kwargs(case))
    columns = a.batch * math.prod(a.grid) * a.out_channels * a.geometry.taps
    takes = case.nd == 2 and set(case.stride) == {1} and case.groups == 1 and \
        not (a.pointwise and layout == "planar")
    monkeypatch.setattr(fused, "CONVOLUTION_MIN_COLUMNS", columns)
    replay = ops._conv_replay(x, w, a)
    if takes:
        assert replay == ops._ConvFusedReplay(layout == "channels_last")
    else:
        assert replay == ops._ConvReplay.planned(x, w, a) and replay is not None
    for off in (columns + 1, None):
        monkeypatch.setattr(fused, "CONVOLUTION_MIN_COLUMNS", off)
        assert ops._conv_replay(x, w, a) == ops._ConvReplay.planned(x, w, a)
    monkeypatch.setattr(fused, "CONVOLUTION_MIN_COLUMNS", columns)
    monkeypatch.setattr(fused, "CONVOLUTION_MAX_OUT_CHANNELS", a.in_channels - 1)
    assert ops._conv_replay(x, w, a) == ops._ConvReplay.planned(x, w, a)


@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("case", [c for c in CONV_CASES if all(s == 1 for s in c.stride)][:30],
                         ids=lambda c: c.name)
def test_conv_padding_strings(case, padding):
    theirs, ours = CONV[case.nd]
    x, w, b = _conv_tensors(case, padding)
    kw = dict(padding=padding, dilation=case.dilation, groups=case.groups)
    try:
        ref = theirs(x, w, b, **kw)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            ours(x, w, b, **kw)
        return
    out = ours(x, w, b, **kw)
    assert rel_error(out, ref) < 1e-12
    grads = torch.autograd.grad(out.sum(), [t for t in (x, w, b) if t is not None])
    ref_grads = torch.autograd.grad(ref.sum(), [t for t in (x, w, b) if t is not None])
    assert all(rel_error(m, t) < 1e-12 for m, t in zip(grads, ref_grads))


@pytest.mark.parametrize("case", CONV_CASES[:12], ids=lambda c: c.name)
def test_conv_gradcheck(case):
    x, w, b = _conv_tensors(case.scaled(16) if case.batch else case, "gc")
    f = lambda *t: CONV[case.nd][1](*t, **_conv_kwargs(case))
    assert torch.autograd.gradcheck(f, tuple(t for t in (x, w, b)), eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("kw,message", [
    (dict(padding="same", stride=2), "padding='same' is not supported for strided convolutions"),
    (dict(padding="full"), "Invalid padding string: 'full'"),
    (dict(padding=-1), "negative padding is not supported"),
    (dict(dilation=9), "Kernel size can't be greater than actual input size"),
    (dict(groups=2), "expected input[2, 3, 8, 8] to have 6 channels, but got 3 channels instead"),
])
def test_conv_bad_input(kw, message):
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    with pytest.raises(gemmconv.ConvArgumentError, match=re.escape(message)):
        gemmconv.conv2d(x, w, **kw)
    with pytest.raises(RuntimeError):
        F.conv2d(x, w, **kw)


def _fold_args(case):
    return dict(kernel_size=case.kernel_size, dilation=case.dilation, padding=case.padding,
                stride=case.stride)


@pytest.mark.parametrize("case", [c for c in FOLDABLE if c.nd == 2], ids=lambda c: c.name)
def test_im2col_and_col2im_are_torch_unfold_and_fold_in_2d(case):
    """(The EDGE cases' empty batches included: torch returns empty columns and images.)"""
    x = torch.randn(case.batch, case.in_channels, *case.output_size,
                    generator=generator(case.name, "fold"), dtype=torch.float64)
    kw = _fold_args(case)
    columns = gemmconv.im2col(x, **kw)
    assert torch.equal(columns, F.unfold(x, **kw))
    one = torch.randn(case.in_channels, *case.output_size, generator=generator(case.name, "one"),
                      dtype=torch.float64)
    assert torch.equal(gemmconv.im2col(one, **kw), F.unfold(one, **kw))          # unbatched
    u = torch.randn(columns.shape, generator=generator(case.name, "u"), dtype=torch.float64)
    assert torch.equal(gemmconv.col2im(u[:0], case.output_size, **kw), F.fold(u[:0], case.output_size, **kw))
    empty = x[:0].clone().requires_grad_()
    assert torch.autograd.grad(gemmconv.im2col(empty, **kw).sum(), empty)[0].shape == empty.shape
    if case.batch:
        assert rel_error(gemmconv.col2im(u, case.output_size, **kw), F.fold(u, case.output_size, **kw)) < 1e-14
        assert rel_error(gemmconv.col2im(u[0], case.output_size, **kw), F.fold(u[0], case.output_size, **kw)) < 1e-14
    unfold, fold = gemmconv.nn.Unfold(**kw), gemmconv.nn.Fold(case.output_size, **kw)
    assert isinstance(fold, torch.nn.Fold) and repr(fold) == repr(torch.nn.Fold(case.output_size, **kw))
    assert torch.equal(unfold(x), columns) and rel_error(fold(u), F.fold(u, case.output_size, **kw)) < 1e-14


@pytest.mark.parametrize("case", [c for c in FOLDABLE if c.nd != 2 and c.groups == 1], ids=lambda c: c.name)
def test_im2col_in_1d_and_3d_is_the_convolution_s_operand(case):
    """conv(x, w) = w (C_out, C * K) @ im2col(x); col2im is im2col's adjoint."""
    x = torch.randn(2, case.in_channels, *case.output_size, generator=generator(case.name, "x"),
                    dtype=torch.float64)
    w = torch.randn(3, case.in_channels, *case.kernel_size, generator=generator(case.name, "w"),
                    dtype=torch.float64)
    kw = _fold_args(case)
    columns = gemmconv.im2col(x, **kw)
    conv = CONV[case.nd][0](x, w, stride=case.stride, padding=case.padding, dilation=case.dilation)
    assert rel_error(w.view(3, -1) @ columns, conv.flatten(2)) < 1e-12
    u = torch.randn(columns.shape, generator=generator(case.name, "u"), dtype=torch.float64)
    folded = gemmconv.col2im(u, case.output_size, **kw)
    assert abs(float((folded * x).sum() - (u * columns).sum())) < 1e-10 * float(u.abs().sum())


def test_fold_and_unfold_are_differentiable_both_ways():
    x = torch.randn(2, 3, 5, 4, 3, dtype=torch.float64, requires_grad=True)
    kw = dict(kernel_size=(2, 3, 2), dilation=(1, 1, 2), padding=(1, 0, 1), stride=(2, 1, 1))
    assert torch.autograd.gradcheck(lambda t: gemmconv.im2col(t, **kw), (x,))
    assert torch.autograd.gradgradcheck(lambda t: gemmconv.im2col(t, **kw), (x,))
    u = gemmconv.im2col(x, **kw).detach().requires_grad_()
    assert torch.autograd.gradcheck(lambda t: gemmconv.col2im(t, (5, 4, 3), **kw), (u,))


@pytest.mark.parametrize("call,message", [
    (lambda: gemmconv.col2im(torch.randn(2, 26, 36), (8, 8), 3), "divisible by the product of kernel_size"),
    (lambda: gemmconv.col2im(torch.randn(2, 27, 35), (8, 8), 3), "calculated number of sliding blocks 6 * 6 = 36"),
    (lambda: gemmconv.im2col(torch.randn(2, 3, 2, 2), 3), "but its components must be at least one"),
    (lambda: gemmconv.im2col(torch.randn(2, 3, 8, 8), 3, stride=0), "stride must be positive"),
    (lambda: gemmconv.im2col(torch.randn(3, 8), (3, 3)), "expected a 3-D (unbatched) or 4-D"),
])
def test_fold_bad_input(call, message):
    with pytest.raises(gemmconv.ConvArgumentError, match=re.escape(message)):
        call()


def _model(conv=torch.nn.Conv2d, transposed=torch.nn.ConvTranspose2d):
    torch.manual_seed(3)
    return torch.nn.Sequential(conv(3, 8, 3, padding=1, padding_mode="circular"), torch.nn.ReLU(),
                               transposed(8, 4, 4, stride=2, padding=1), torch.nn.Tanh(),
                               conv(4, 2, 3, stride=2, groups=2, bias=False)).double()


def test_convert_swaps_in_place_and_trains_like_torch():
    ours, theirs = _model(), _model()
    params = [id(p) for p in ours.parameters()]
    assert gemmconv.convert(ours, types=(torch.nn.Conv2d, torch.nn.ConvTranspose2d)) is ours
    assert [type(m) for m in ours if m._parameters] == [gemmconv.nn.Conv2d, gemmconv.nn.ConvTranspose2d,
                                                        gemmconv.nn.Conv2d]
    assert [id(p) for p in ours.parameters()] == params
    x = torch.randn(2, 3, 10, 9, dtype=torch.float64)
    for model in (ours, theirs):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            optimizer.zero_grad()
            model(x).square().sum().backward()
            optimizer.step()
    for a, b in zip(ours.parameters(), theirs.parameters()):
        assert rel_error(a, b) < 1e-12
    buffer = io.BytesIO()
    torch.save(ours.state_dict(), buffer)
    buffer.seek(0)
    fresh = _model()
    fresh.load_state_dict(torch.load(buffer))
    assert rel_error(fresh(x), ours(x)) < 1e-12


def test_convert_defaults_to_transposed_convolutions_and_rejects_unknown_types():
    model = gemmconv.convert(_model())
    assert type(model[0]) is torch.nn.Conv2d and type(model[2]) is gemmconv.nn.ConvTranspose2d
    with pytest.raises(ValueError, match="no gemmconv module"):
        gemmconv.convert(model, types=(torch.nn.Linear,))


def test_nn_is_a_one_line_replacement_for_torch_nn():
    from gemmconv import nn
    model = _model(nn.Conv2d, nn.ConvTranspose2d)
    assert nn.ReLU is torch.nn.ReLU and nn.Sequential is torch.nn.Sequential
    x = torch.randn(1, 3, 6, 6, dtype=torch.float64)
    assert rel_error(model(x), _model()(x)) < 1e-12


@pytest.mark.parametrize("steady", [False, True], ids=["functional", "steady-switch"])
@pytest.mark.parametrize("case", cases.CONV_LAYERS[:-1], ids=lambda c: c.name)
def test_conv_modules_compute_their_functional_call(monkeypatch, case, steady):
    """gemmconv.nn.Conv1d/2d/3d (ops.module_conv), with ops.STEADY_CONVOLUTIONS either way:
    output and gradients the functional call's bit for bit, for "same" padding too (the
    module's settings reach the checked call); on the CPU no call is kept as steady."""
    from gemmconv import ops
    monkeypatch.setattr(ops, "STEADY_CONVOLUTIONS", steady)
    x, w, b = _layer_tensors(case, "module", "planar")
    kwargs = _conv_kwargs(case)
    for padding in (kwargs["padding"], "same") if set(case.stride) == {1} else (kwargs["padding"],):
        kw = {**kwargs, "padding": padding}
        module = getattr(gemmconv.nn, f"Conv{case.nd}d")(
            case.in_channels, case.out_channels, case.kernel_size, **kw, bias=b is not None,
            dtype=torch.float64)
        with torch.no_grad():
            module.weight.copy_(w)
            if b is not None:
                module.bias.copy_(b)
        leaves = [x.requires_grad_(), *module.parameters()]
        out = module(x)
        functional = CONV[case.nd][1](x, module.weight, module.bias, **kw)
        grad = torch.randn(out.shape, generator=generator(case.name, "module"), dtype=torch.float64)
        ours = [out, *torch.autograd.grad(out, leaves, grad)]
        theirs = [functional, *torch.autograd.grad(functional, leaves, grad)]
        assert all(torch.equal(o, t) for o, t in zip(ours, theirs))
        assert rel_error(out, CONV[case.nd][0](x, module.weight, module.bias, **kw)) < 1e-12
    assert not ops._steady


def test_torch_compile_fullgraph_has_no_graph_break():
    model = gemmconv.convert(_model(), types=(torch.nn.Conv2d, torch.nn.ConvTranspose2d))
    unfold = gemmconv.nn.Unfold((2, 2), stride=2)
    f = lambda x: unfold(model(x))
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    x = torch.randn(2, 3, 10, 9, dtype=torch.float64, requires_grad=True)
    out, ref = compiled(x), f(x)
    assert rel_error(out, ref) < 1e-12
    assert rel_error(torch.autograd.grad(out.sum(), x)[0], torch.autograd.grad(ref.sum(), x)[0]) < 1e-12


def test_torch_compile_fullgraph_under_autocast():
    """A converted model compiled whole runs under autocast as it runs eagerly there: the
    cast through autocast's cache (the C++ extension) is left out of the traced graph."""
    model = gemmconv.convert(_model().float(), types=(torch.nn.Conv2d, torch.nn.ConvTranspose2d))
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    x = torch.randn(2, 3, 10, 9, generator=generator("compiled under autocast"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, ref = compiled(x), model(x)
    assert out.dtype == ref.dtype == torch.bfloat16
    assert rel_error(out, ref) < 1e-2


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_autocast_casts_like_torch(nd):
    x = torch.randn(2, 4, *[5] * nd)
    transposed = getattr(torch.nn, f"ConvTranspose{nd}d")(4, 3, 3, stride=2)
    conv = getattr(torch.nn, f"Conv{nd}d")(4, 3, 3)
    for torch_module in (transposed, conv):
        ours = gemmconv.convert(copy.deepcopy(torch.nn.Sequential(torch_module)),
                                types=(type(torch_module),))[0]
        assert type(ours) is not type(torch_module)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            mine, theirs = ours(x), torch_module(x)
        assert mine.dtype == theirs.dtype == torch.bfloat16
        assert rel_error(mine, theirs) < 2e-2


class _Casts(TorchDispatchMode):
    """Counts the casts (``aten._to_copy``) of tensors of ``shape``."""
    def __init__(self, shape):
        super().__init__()
        self.shape, self.count = tuple(shape), 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._to_copy.default and tuple(args[0].shape) == self.shape:
            self.count += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("kind", ["ConvTranspose2d", "Conv2d"])
def test_autocast_casts_a_parameter_once_a_region_as_torch_does(kind):
    """Called three times in one autocast region, a layer's weight is cast as often as
    torch's layer casts it: once (autocast's cache keeps a leaf parameter's cast until the
    region ends), where a cast a call would make three."""
    torch_module = getattr(torch.nn, kind)(4, 3, 3)
    ours = gemmconv.convert(torch.nn.Sequential(copy.deepcopy(torch_module)), types=(type(torch_module),))[0]
    x = torch.randn(2, 4, 5, 5, generator=generator(kind, "cast once"))
    counts = []
    for module in (torch_module, ours):
        with _Casts(module.weight.shape) as casts, torch.autocast("cpu", dtype=torch.bfloat16):
            outs = [module(x) for _ in range(3)]
        counts.append(casts.count)
        assert all(out.dtype == torch.bfloat16 for out in outs)
    assert counts == [1, 1]


@pytest.mark.parametrize("cached", [True, False], ids=["extension", "without"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_autocast_leaves_float64_calls_in_float64(monkeypatch, nd, cached):
    """Under autocast torch computes a call on float64 tensors in float64 (autocast casts
    only lower-precision-eligible tensors), and raises where a float64 input meets a float32
    weight; ours the same, with the C++ extension's cached cast and without it."""
    if not cached:
        monkeypatch.setattr(_node, "load", lambda: None)
    g = generator(nd, "float64 under autocast")
    x = torch.randn(2, 4, *[5] * nd, generator=g, dtype=torch.float64)
    w = torch.randn(4, 3, *[3] * nd, generator=g, dtype=torch.float64)
    b = torch.randn(3, generator=g, dtype=torch.float64)
    for theirs, mine in ((getattr(F, f"conv_transpose{nd}d"), getattr(gemmconv, f"conv_transpose{nd}d")),
                         (CONV[nd][0], CONV[nd][1])):
        weight = w if theirs is not CONV[nd][0] else w.transpose(0, 1).contiguous()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, ref = mine(x, weight, b), theirs(x, weight, b)
            assert out.dtype == ref.dtype == torch.float64
            assert rel_error(out, ref) < 1e-12
            with pytest.raises(RuntimeError):
                theirs(x, weight.float(), b)
            with pytest.raises(RuntimeError, match="should be the same"):
                mine(x, weight.float(), b)


def test_modules_follow_to_half_and_double():
    layer = gemmconv.nn.ConvTranspose2d(3, 2, 3, stride=2)
    for dtype, convert_ in ((torch.float64, lambda m: m.double()), (torch.float16, lambda m: m.half()),
                            (torch.bfloat16, lambda m: m.to(torch.bfloat16))):
        convert_(layer)
        out = layer(torch.randn(1, 3, 4, 4, dtype=dtype))
        assert out.dtype == dtype and layer.weight.dtype == dtype
