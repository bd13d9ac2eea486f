"""GPU: forwards replayed from their first call's plans (ops._Replay) against the column
route they replay, bit for bit, and against float64. Marked ``cuda``."""
import math

import pytest
import torch
from torch.autograd import forward_ad

import gemmconv
from gemmconv import _node, cases, depthwise, gemm, graphs, ops
from gemmconv import channels_last as cl
from gemmconv.bench import reference as reference64
from helpers import OURS, generator, layout_tensors, output_gradient, poison_allocator, rel_error
from test_reuse import CONV, CONV_LAYER_IDS, CONV_LAYER_PARAMS, _conv_kwargs, _layer_tensors

pytestmark = pytest.mark.cuda
CUDA = "cuda"
CASES = cases.MODEL_LAYERS + cases.WIDE_LAYERS + \
    [c for c in cases.random_cases(60, seed=24) if c.batch] + [c.scaled(4096) for c in cases.BENCH]
LAYOUTS = ["planar", "channels_last"]
COPIED_CASES = cases.MODEL_LAYERS + [c.scaled(4096) for c in cases.BENCH]


def _weight_copied(monkeypatch) -> None:
    """Every product whose first operand can take its other layout runs on that copy (as
    gemm.py's layout choice keeps for some shapes), with fresh plans."""
    monkeypatch.setattr(gemm, "_layout_choice", lambda a, b, out: gemm._distinct(a) is not None)
    monkeypatch.setattr(gemm, "_products", {})


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_replayed_forward_is_the_column_route_bit_for_bit(monkeypatch, case, layout, dtype):
    _check_forward(monkeypatch, case, layout, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", COPIED_CASES, ids=lambda c: c.name)
def test_replays_of_a_copied_weight(monkeypatch, case, dtype):
    _weight_copied(monkeypatch)
    _check_forward(monkeypatch, case, "planar", dtype)
    monkeypatch.undo()
    _weight_copied(monkeypatch)
    _check_backward(monkeypatch, case, "planar", dtype)


# Input channels not whole 16-byte units, 2-D (channels_last zero-pads them where the
# products are large: channels_last.padded_channels).
PADDED_CASES = [cases._c("k4s2-21ch", 4, 21, 16, (4, 4), (8, 8), stride=2, padding=1),
                cases._c("k64s32-21ch", 2, 21, 5, (64, 64), (3, 2), stride=32, padding=16)] + \
    [c for c in cases.LARGE_KERNELS if c.nd == 2]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", PADDED_CASES, ids=lambda c: c.name)
def test_replays_with_zero_padded_channels(monkeypatch, case, dtype):
    monkeypatch.setattr(gemm, "LAYOUT_TRIAL_FLOPS", 1)
    monkeypatch.setattr(gemm, "_products", {})
    _check_forward(monkeypatch, case, "channels_last", dtype)
    assert [r.padded for r in ops._replays.values()] == \
        [-(-case.in_channels * (4 if dtype == torch.float32 else 2) // 16) * 16 //
         (4 if dtype == torch.float32 else 2)]


# Grouped layers of few channels a group, whose channels_last product runs over all groups
# at once, its weight block-diagonal (gemm.dense_groups): the grouped 3-D cases and a 2-D one.
DENSE_CASES = [c.scaled(4096) for c in cases.BENCH if c.groups > 1 and c.nd == 3] + \
    [cases._c("k4s2-4groups", 8, 32, 64, (4, 4), (8, 8), stride=2, padding=1, groups=4)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", DENSE_CASES, ids=lambda c: c.name)
def test_replays_a_grouped_channels_last_product_over_a_block_diagonal_weight(monkeypatch, case,
                                                                             dtype):
    # (Few enough channels a group for the grouped direct kernel: kept off it here.)
    monkeypatch.setattr(depthwise, "GROUPED_MAX_INPUTS", 1)
    _check_forward(monkeypatch, case, "channels_last", dtype)
    assert [r.dense for r in ops._replays.values()] == [case.groups]


def _check_forward(monkeypatch, case, layout, dtype):
    if layout == "channels_last" and case.nd == 1:
        pytest.skip("channels_last is 2-D and 3-D")
    x, w, b = layout_tensors(case, layout, dtype, CUDA)
    runs = []
    run = ops._Replay.run
    monkeypatch.setattr(ops._Replay, "run",
                        lambda self, *args, **kw: runs.append(self) or run(self, *args, **kw))
    ops._replays.clear()
    out_bytes = case.batch * case.out_channels * math.prod(case.output_size) * x.element_size()
    with torch.no_grad():
        first = OURS[case.nd](x, w, b, **case.kwargs)          # plans the replay, and runs it
        poison_allocator(out_bytes)
        again = OURS[case.nd](x, w, b, **case.kwargs)          # the replay alone
        monkeypatch.setattr(ops, "_replayed", lambda *args: None)
        poison_allocator(out_bytes)
        column_route = OURS[case.nd](x, w, b, **case.kwargs)
    replayed = any(isinstance(r, ops._Replay) for r in ops._replays.values())
    assert len(runs) == (2 if replayed else 0)
    if case in cases.MODEL_LAYERS:
        assert replayed, "the zoo's kinds of layer run as replays"
    assert torch.equal(first, column_route) and torch.equal(again, column_route)
    assert again.is_contiguous(memory_format=cl.memory_format(x.dim()) if layout == "channels_last"
                               else torch.contiguous_format)
    tolerance = 5e-3 if dtype == torch.float32 else 3e-2
    assert rel_error(again, reference64(case, x, w, b)[0]) < tolerance


def test_a_replay_follows_the_weight_in_place():
    """A replay reads the weight and bias where they are at each call: an optimiser's step
    in place shows in the next output."""
    case = cases.MODEL_LAYERS[1]
    x, w, b = case.tensors(torch.float32, CUDA, generator("in place"))
    ops._replays.clear()
    OURS[2](x, w, b, **case.kwargs)
    w.mul_(-2)
    b.add_(1)
    out = OURS[2](x, w, b, **case.kwargs)
    assert any(isinstance(r, ops._Replay) for r in ops._replays.values())
    assert rel_error(out, reference64(case, x, w, b)[0]) < 5e-3


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_replayed_backward_is_the_column_route_bit_for_bit(monkeypatch, case, layout, dtype):
    _check_backward(monkeypatch, case, layout, dtype)


def _check_backward(monkeypatch, case, layout, dtype):
    if layout == "channels_last" and case.nd == 1:
        pytest.skip("channels_last is 2-D and 3-D")
    x, w, b = layout_tensors(case, layout, dtype, CUDA, "backward")
    leaves = [t.requires_grad_() for t in (x, w, b) if t is not None]
    grad_out = output_gradient(case, layout, dtype, CUDA)
    runs = []
    run = ops._BackwardReplay.run
    monkeypatch.setattr(ops._BackwardReplay, "run",
                        lambda self, *args, **kw: runs.append(self) or run(self, *args, **kw))
    ops._backward_replays.clear()

    def grads():
        poison_allocator(x.numel() * x.element_size())
        return torch.autograd.grad(OURS[case.nd](x, w, b, **case.kwargs), leaves, grad_out)
    first, again = grads(), grads()          # planned and run, then replayed alone
    monkeypatch.setattr(ops, "_replayed_backward", lambda *args: None)
    column_route = grads()
    replayed = any(isinstance(r, ops._BackwardReplay) for r in ops._backward_replays.values())
    assert len(runs) == (2 if replayed else 0)
    if case in cases.MODEL_LAYERS and (layout == "channels_last" or
                                       ops._samples_inner(case.batch, math.prod(case.size))):
        assert replayed, "the zoo's kinds of layer run their backward as replays"
    if case in cases.WIDE_LAYERS and layout == "planar":     # _backward itself, graphed
        assert any(isinstance(r, ops._GraphedBackward) for r in ops._backward_replays.values())
    tolerance = 5e-3 if dtype == torch.float32 else 3e-2
    refs = reference64(case, x, w, b, grad_out.double())[1:]
    for one, two, three, ref in zip(first, again, column_route, refs):
        assert torch.equal(one, three) and torch.equal(two, three)
        assert rel_error(two, ref) < tolerance
    if layout == "channels_last":
        assert again[0].is_contiguous(memory_format=cl.memory_format(x.dim()))


def _module_and_leaves(case, layout, dtype):
    """gemmconv's module of ``case`` holding the case's weight and bias as its parameters,
    and an input that requires grad, in ``layout``."""
    x, w, b = layout_tensors(case, layout, dtype, CUDA, "module")
    module = getattr(gemmconv.nn, f"ConvTranspose{case.nd}d")(
        case.in_channels, case.out_channels, case.kernel_size, bias=case.bias,
        **case.kwargs).to(CUDA, dtype)
    return _holding(module, w, b, layout), x.requires_grad_()


def _holding(module, w, b, layout):
    """``module`` holding ``w`` and ``b`` as its parameters, channels_last where ``layout``
    says."""
    with torch.no_grad():
        module.weight.copy_(w)
        if b is not None:
            module.bias.copy_(b)
    if layout == "channels_last":
        module.to(memory_format=cl.memory_format(w.dim()))
    return module


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", cases.MODEL_LAYERS, ids=lambda c: c.name)
def test_a_module_call_like_its_last_skips_the_checks_and_lookups(monkeypatch, case, layout,
                                                                  dtype):
    """From its second step on, a module's forward and backward go straight to the replays
    its first call took (ops._Steady): no argument check or replay lookup runs, and the
    results are the functional call's bit for bit."""
    if layout == "channels_last" and case.nd == 1:
        pytest.skip("channels_last is 2-D and 3-D")
    module, x = _module_and_leaves(case, layout, dtype)
    leaves = [x, *module.parameters()]
    grad_out = output_gradient(case, layout, dtype, CUDA)

    def step(call, lookups=None):
        poison_allocator(x.numel() * x.element_size())
        out = call()
        if lookups is not None:
            assert looked_up == lookups, "the forward"
        return [out.detach(), *torch.autograd.grad(out, leaves, grad_out)]
    first = step(lambda: module(x))
    assert module in ops._steady, "the zoo's kinds of layer run as replays"
    looked_up = []
    with monkeypatch.context() as patched:
        for name in ("conv_transpose_args", "_replay_key", "_conv_transpose_backward"):
            function = getattr(ops, name)
            patched.setattr(ops, name, lambda *args, f=function, n=name:
                            looked_up.append(n) or f(*args))
        second = step(lambda: module(x), [])
        assert looked_up[:1] == ["_conv_transpose_backward"]   # the backward's first lookup
        looked_up.clear()
        third = step(lambda: module(x), [])
    kept = next(iter(ops._steady[module].values())).backwards
    assert looked_up == ([] if kept else
                         ["_conv_transpose_backward", "_replay_key", "_replay_key"])
    if layout == "channels_last" or ops._samples_inner(case.batch, math.prod(case.size)):
        assert kept, "the zoo's kinds of layer run their backward as replays"
    functional = step(lambda: OURS[case.nd](x, module.weight, module.bias, **case.kwargs))
    refs = reference64(case, x, module.weight, module.bias, grad_out.double())
    tolerance = 5e-3 if dtype == torch.float32 else 3e-2
    for results in (first, second, third):
        for ours, theirs, ref in zip(results, functional, refs):
            assert torch.equal(ours, theirs)
            assert rel_error(ours, ref) < tolerance


def _counted_steps(monkeypatch, steady_class, module, x, leaves, grad_out, expected):
    """``steps(n, steady=True)``: ``n`` training steps of ``module`` on ``x``, each output
    and gradient (of ``leaves``, for ``grad_out``) checked bit for bit against
    ``expected``, the freed blocks poisoned, the output's node ``steady_class``'s where
    ``steady``; it returns how many Python backwards (``steady_class.backward``) ran."""
    calls = []
    backward = steady_class.backward
    monkeypatch.setattr(steady_class, "backward",
                        lambda self, *args: calls.append(1) or backward(self, *args))

    def steps(n, steady=True):
        calls.clear()
        for _ in range(n):
            poison_allocator(x.numel() * x.element_size())
            out = module(x)
            assert (out.grad_fn.name() == steady_class.NAME) == steady
            grads = torch.autograd.grad(out, leaves, grad_out)
            assert all(torch.equal(o, f) for o, f in zip([out, *grads], expected))
            # Nothing of a step outlives it, as in a training loop: the next step's tensors
            # take the same blocks. (Session 51's run E kept them one step longer: the
            # addresses took turns, and 11 of 20 configurations still ran Python some steps.)
            del out, grads
        return len(calls)
    return steps


def _assert_steps_launch_from_cpp(steps, steady):
    """Where ``steady``'s table keeps backward graphs, three of ``steps`` (_counted_steps)
    launch them and the forward's from the C++ node with no Python backward; with graphs
    paused, two run the forward and the backward in Python."""
    node = _node.load()
    if len(steady.table):
        node.reset_outcomes()
        assert steps(3) == 0, f"steady steps run no Python backward: {node.outcomes()}"
        assert node.outcomes()["launched"] == 3
        assert node.forwards() == {"launched": 3, "in Python": 0}
    node.reset_outcomes()
    with graphs.paused():
        assert steps(2) == 2
    assert node.outcomes()["graphs paused"] == (2 if len(steady.table) else 0)
    assert node.forwards() == {"launched": 0, "in Python": 2}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", cases.MODEL_LAYERS, ids=lambda c: c.name)
def test_a_steady_training_step_runs_its_backward_without_python(monkeypatch, case, layout,
                                                                 dtype):
    """A module's steady call takes the C++ autograd node (gemmconv/_node.py): once its
    backward's graph is kept, a training step launches it with no Python backward, and
    gives the functional call's results bit for bit (every gradient element written: the
    freed blocks are poisoned). With graphs paused, or let go, the node runs the Python
    backward again, with the same results."""
    if layout == "channels_last" and case.nd == 1:
        pytest.skip("channels_last is 2-D and 3-D")
    assert _node.load() is not None, "the extension builds on a CUDA machine"
    module, x = _module_and_leaves(case, layout, dtype)
    leaves = [x, *module.parameters()]
    grad_out = output_gradient(case, layout, dtype, CUDA)
    out = OURS[case.nd](x, module.weight, module.bias, **case.kwargs)
    functional = [out.detach(), *torch.autograd.grad(out, leaves, grad_out)]
    tolerance = 5e-3 if dtype == torch.float32 else 3e-2
    refs = reference64(case, x, module.weight, module.bias, grad_out.double())
    assert all(rel_error(f, ref) < tolerance for f, ref in zip(functional, refs))
    steps = _counted_steps(monkeypatch, ops._Steady, module, x, leaves, grad_out, functional)
    steps(1, steady=False)   # (the module's first call: checked and planned)
    steps(8)
    steady = next(iter(ops._steady[module].values()))
    if layout == "channels_last" or ops._samples_inner(case.batch, math.prod(case.size)):
        assert steady.backwards and len(steady.table) > 0, "the zoo's layers' graphs are kept"
    assert steady.table.forward_graphs() > 0, "the zoo's layers' forwards are graphed"
    _assert_steps_launch_from_cpp(steps, steady)
    limit = graphs.get_graph_memory_limit()
    try:
        graphs.set_graph_memory_limit(0)   # lets every graph go
        assert steps(2) == 2
    finally:
        graphs.set_graph_memory_limit(limit)
        graphs.forget()   # (the keys let go would never be captured again)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case,layout", CONV_LAYER_PARAMS, ids=CONV_LAYER_IDS)
def test_a_steady_convolution_step_runs_without_python(monkeypatch, case, layout, dtype):
    """With ops.STEADY_CONVOLUTIONS and ops.GRAPHED_CONV_BACKWARD, a gemmconv.nn.Conv1d/2d/3d
    keeps its calls as steady ones (ops._SteadyConvolution): once its graphs are kept
    (the small layers'), a training step launches the forward's and the backward's from
    the C++ node with no Python backward, and gives the functional call's results bit for
    bit (the freed blocks poisoned); the node is named for the convolution. With graphs
    paused, the node runs the Python backward, with the same results."""
    monkeypatch.setattr(ops, "STEADY_CONVOLUTIONS", True)
    monkeypatch.setattr(ops, "GRAPHED_CONV_BACKWARD", True)
    assert _node.load() is not None, "the extension builds on a CUDA machine"
    x, w, b = _layer_tensors(case, "steady" + str(dtype), layout, dtype, CUDA)
    module = _holding(getattr(gemmconv.nn, f"Conv{case.nd}d")(
        case.in_channels, case.out_channels, case.kernel_size, **_conv_kwargs(case),
        bias=b is not None, device=CUDA, dtype=dtype), w, b, layout)
    leaves = [x.requires_grad_(), *module.parameters()]
    with torch.no_grad():   # (the functional call: the module's first is steps' below)
        shape = CONV[case.nd][1](x, w, b, **_conv_kwargs(case)).shape
    grad_out = torch.randn(shape, generator=generator(case.name, "steady"),
                           dtype=torch.float64).to(CUDA, dtype)
    if layout == "channels_last":
        grad_out = grad_out.contiguous(memory_format=cl.memory_format(x.dim()))
    out = CONV[case.nd][1](x, module.weight, module.bias, **_conv_kwargs(case))
    functional = [out.detach(), *torch.autograd.grad(out, leaves, grad_out)]
    steps = _counted_steps(monkeypatch, ops._SteadyConvolution, module, x, leaves, grad_out,
                           functional)
    steps(1, steady=False)   # (the module's first call: checked and planned)
    steps(8)
    steady = next(iter(ops._steady[module].values()))
    assert isinstance(steady, ops._SteadyConvolution)
    if case is not cases.CONV_LAYERS[-1]:
        assert steady.table.forward_graphs() > 0 and len(steady.table) > 0, \
            "the small layers' forward and backward graphs are kept"
    _assert_steps_launch_from_cpp(steps, steady)


@pytest.mark.parametrize("case", [c for c in cases.MODEL_LAYERS if c.nd > 1], ids=lambda c: c.name)
def test_a_steady_step_moved_to_other_blocks_launches_from_cpp_again(case):
    """Where a steady step's gradients move to other blocks (something else holds theirs),
    the C++ node frees the gradients it allocated for its miss before the Python backward
    runs: that backward keeps its graph at the blocks the node allocates, which the node
    then launches. (Held, they pushed the Python backward's gradients to other blocks,
    whose graph the node never matched: session 52's D.)"""
    module, x = _module_and_leaves(case, "channels_last", torch.float32)
    leaves = [x, *module.parameters()]
    grad_out = output_gradient(case, "channels_last", torch.float32, CUDA)
    node = _node.load()

    def launched(n):
        node.reset_outcomes()
        for _ in range(n):
            out = module(x)
            grads = torch.autograd.grad(out, leaves, grad_out)
            assert len(grads) == len(leaves)
            del out, grads
        return node.outcomes()["launched"]
    launched(6)
    assert launched(3) == 3
    held = [torch.empty_like(t) for t in leaves]   # the blocks of the last step's gradients
    launched(6)
    assert launched(3) == 3, node.outcomes()
    del held


@pytest.mark.parametrize("unbatched", [False, True], ids=["batched", "unbatched"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", cases.MODEL_LAYERS, ids=lambda c: c.name)
def test_a_steady_forward_launches_its_kept_graph_without_python(monkeypatch, case, layout,
                                                                 dtype, unbatched):
    """Once a module's forward graph is kept, its steady calls, with grad and without, launch
    it from the C++ extension: no Python forward runs, and each output is the functional
    call's bit for bit (every element written: the freed blocks are poisoned), with the C++
    node where it needs gradients. Paused, the Python forward runs again, as right."""
    if layout == "channels_last" and (case.nd == 1 or unbatched):
        pytest.skip("channels_last is batched 2-D and 3-D")
    assert _node.load() is not None, "the extension builds on a CUDA machine"
    module, x = _module_and_leaves(case, layout, dtype)
    if unbatched:
        x = x.detach()[0].requires_grad_()
    with torch.no_grad():
        functional = OURS[case.nd](x, module.weight, module.bias, **case.kwargs)
    forwards = []
    graphed = ops._graphed_forward
    monkeypatch.setattr(ops, "_graphed_forward", lambda *args: forwards.append(1) or graphed(*args))
    node = _node.load()

    def calls(n, grad):
        forwards.clear()
        node.reset_outcomes()
        for _ in range(n):
            poison_allocator(functional.numel() * functional.element_size())
            with torch.set_grad_enabled(grad):
                out = module(x)
            assert torch.equal(out, functional)
            assert out.requires_grad == grad
            if grad:
                node_fn = out.grad_fn.next_functions[0][0] if unbatched else out.grad_fn
                assert node_fn.name() == "gemmconv::ConvTransposeBackward"
            del out
        return len(forwards)
    calls(3, grad=False)   # checked and planned; its graph captured; launched from C++
    assert calls(3, grad=False) == 0 and node.forwards() == {"launched": 3, "in Python": 0}
    assert calls(3, grad=True) == 0 and node.forwards() == {"launched": 3, "in Python": 0}
    with graphs.paused():
        assert calls(2, grad=True) == 2 and node.forwards() == {"launched": 0, "in Python": 2}


def test_a_steady_call_in_forward_mode_ad_raises_as_a_function_without_jvp():
    """Inside forward-mode AD's dual_level a steady module call takes the Python Function,
    which raises as torch's Functions without a jvp do, never the C++ node (whose output
    would carry no tangent)."""
    case = cases.MODEL_LAYERS[1]
    module, x = _module_and_leaves(case, "planar", torch.float32)
    for _ in range(3):
        module(x).sum().backward()
    assert module in ops._steady
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(x.detach(), torch.randn_like(x))
        with pytest.raises(NotImplementedError, match="jvp"):
            module(dual)


def test_a_module_call_unlike_its_last_is_checked_and_planned_again(monkeypatch):
    """Whatever the module's calls kept did not read the same (a setting, the input's shape
    or layout, the weight's dtype, the precision policy) goes the whole way again, and gives
    the functional call's answer; a module called at two sizes in turns keeps both."""
    case = cases.MODEL_LAYERS[1]
    module, x = _module_and_leaves(case, "planar", torch.float32)

    def agrees(x):
        with torch.no_grad():
            ours = module(x)
            theirs = OURS[case.nd](x, module.weight, module.bias, stride=module.stride,
                                   padding=module.padding, output_padding=module.output_padding,
                                   groups=module.groups, dilation=module.dilation)
        return torch.equal(ours, theirs) and rel_error(
            ours, torch.nn.functional.conv_transpose2d(
                x.double(), module.weight.double(), module.bias.double(), module.stride,
                module.padding, module.output_padding, module.groups, module.dilation)) < 5e-3
    assert agrees(x) and agrees(x) and module in ops._steady
    assert agrees(x[:2])
    with monkeypatch.context() as patched, torch.no_grad():   # both kept: nothing looked up
        patched.setattr(ops, "conv_transpose_args", None)
        patched.setattr(ops, "_replay_key", None)
        kept = [(module(t), t) for t in (x, x[:2], x)]
    with torch.no_grad():
        assert all(torch.equal(out, OURS[2](t, module.weight, module.bias, **case.kwargs))
                   for out, t in kept)
    module.padding = (0, 0)
    assert agrees(x)
    module.output_padding = (0, 0)
    assert agrees(x)
    assert agrees(x[:2])
    assert agrees(x.contiguous(memory_format=torch.channels_last))
    with gemmconv.float32_precision("ieee"):
        assert agrees(x)
    module.double()
    with pytest.raises(RuntimeError):   # as torch: the input's dtype and the weight's differ
        module(x)
    assert agrees(x.double())
