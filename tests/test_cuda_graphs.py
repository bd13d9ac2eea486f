"""GPU: replays launched as CUDA graphs (gemmconv.graphs) against the same replays launched
kernel by kernel, bit for bit, into poisoned memory, and against float64; a graph follows
its tensors' contents, and is launched only at the addresses it was captured at. Marked
``cuda``."""
import copy
import math

import pytest
import torch

import gemmconv
from gemmconv import bench, cases, fused, graphs, ops, zoo
from gemmconv import channels_last as cl
from gemmconv.shapes import conv_args, conv_transpose_args
from gemmconv.bench import reference as reference64
from helpers import (OURS, generator, layout_tensors, output_gradient, poison_allocator, rel_error,
                     requested_during)
from test_reuse import CONV, CONV_LAYER_IDS, CONV_LAYER_PARAMS, _conv_kwargs, _layer_tensors

pytestmark = pytest.mark.cuda
CUDA = "cuda"
CALLS = 4   # the first two launch kernels; the second's addresses repeat, so the third captures
# A training step's backward: its forward's graph, captured on the third step, moves where
# the step's later allocations land once, so the backward's addresses repeat from the fourth.
BACKWARD_CALLS = 6


@pytest.fixture(autouse=True)
def fresh_graphs():
    graphs.forget()
    yield
    graphs.forget()


def _spy(monkeypatch, owners=object) -> list:
    """Records graphs.launch's answer for each call of a replay of a class in ``owners``
    (by default every call): True where a graph ran the call."""
    answers, launch = [], graphs.launch

    def spied(replay, *args):
        answer = launch(replay, *args)
        if isinstance(replay, owners):
            answers.append(answer)
        return answer
    monkeypatch.setattr(graphs, "launch", spied)
    return answers


def _layouts(case):
    return ["planar"] + (["channels_last"] if case.nd > 1 else [])


# The model layers (column routes), and calls of the depthwise kernels (forward, backward);
# forwards of the grouped direct kernel too.
DEPTHWISE = [c for c in cases.DEPTHWISE if c.name in (
    "depthwise-k4s2", "depthwise-1d-k16s8", "depthwise-3d-k3s2", "depthwise-100-channels")]
GROUPED = [c for c in cases.GROUPED if c.name in ("3d-strided-grouped-small",
                                                  "fcn-like-1d-grouped-2x8")]
PARAMS = [(c, layout) for c in cases.MODEL_LAYERS + DEPTHWISE for layout in _layouts(c)]
IDS = [f"{c.name}-{layout}" for c, layout in PARAMS]
FORWARD_PARAMS = PARAMS + [(c, layout) for c in GROUPED for layout in _layouts(c)]
FORWARD_IDS = [f"{c.name}-{layout}" for c, layout in FORWARD_PARAMS]
# Backwards too: the planar backward of many positions a sample (ops._GraphedBackward), and
# the zoo's layers whose graphs take the most memory, at full size.
LARGE = [(c, layout) for c in cases.LARGE_MODEL_LAYERS for layout in _layouts(c)]
BACKWARD_PARAMS = PARAMS + [(c, "planar") for c in cases.WIDE_LAYERS] + LARGE
BACKWARD_IDS = IDS + [f"{c.name}-planar" for c in cases.WIDE_LAYERS] + \
    [f"{c.name}-{layout}" for c, layout in LARGE]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case,layout", FORWARD_PARAMS, ids=FORWARD_IDS)
def test_graphed_forward_is_the_launches_bit_for_bit(monkeypatch, case, layout, dtype):
    x, w, b = layout_tensors(case, layout, dtype, CUDA)
    out_bytes = case.batch * case.out_channels * x.element_size() * \
        torch.Size(case.output_size).numel()

    def call():
        poison_allocator(out_bytes)
        return OURS[case.nd](x, w, b, **case.kwargs)
    with torch.no_grad():
        launches = _without_graphs(monkeypatch, call)
        answers = _spy(monkeypatch)
        # Each call's output compared and let go before the next, as a loop over a model
        # does: what stays allocated would move where the next call's tensors land.
        same = [torch.equal(call(), launches) for _ in range(CALLS)]
    assert answers[-2:] == [True, True], "the last calls ran as a graph"
    assert graphs.kept() == 1
    assert all(same)
    tolerance = 5e-3 if dtype == torch.float32 else 3e-2
    assert rel_error(launches, reference64(case, x, w, b)[0]) < tolerance


def _conv_layer(case, layout, dtype):
    """Fresh ``(x, w, b)`` of the convolution ``case`` (cases.CONV_LAYERS), drawn in float64,
    x channels_last where ``layout`` says, and ``conv(x, w, b)``, gemmconv's call on them."""
    x, w, b = _layer_tensors(case, layout + str(dtype), layout, dtype, CUDA)
    return x, w, b, lambda *tensors: CONV[case.nd][1](*tensors, **_conv_kwargs(case))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case,layout", CONV_LAYER_PARAMS, ids=CONV_LAYER_IDS)
def test_graphed_convolution_is_the_launches_bit_for_bit(monkeypatch, case, layout, dtype):
    """A small convolution's forward (ops._ConvReplay) launched as a CUDA graph from its
    third call at the same addresses, bit for bit as its kernels launched one by one, into
    poisoned memory, in the input's layout, and right against float64. The last layer's
    columns made more than a graph takes: it launches its kernels, with no replay. The
    fused route off: the wide layer's columns reach its floor."""
    monkeypatch.setattr(fused, "CONVOLUTION_MIN_COLUMNS", None)
    graphed = case is not cases.CONV_LAYERS[-1]
    if not graphed:
        monkeypatch.setattr(ops, "GRAPHED_CONV_MAX_COLUMNS", 1 << 20)
    _check_graphed_convolution(monkeypatch, case, layout, dtype, ops._ConvReplay, graphed)


def _pointwise(case) -> bool:
    """Whether the convolution ``case`` is pointwise (ConvTransposeArgs.pointwise), asked of
    its call on meta tensors."""
    x = torch.empty(case.batch, case.in_channels, *case.size, device="meta")
    w = torch.empty(case.out_channels, case.in_channels // case.groups, *case.kernel_size,
                    device="meta")
    return conv_args(f"conv{case.nd}d", case.nd, x, w, None, **_conv_kwargs(case)).pointwise


# The convolutions fused.convolution can take (stride 1, one group, 2-D), the cost model's
# floor lowered to them; not a planar pointwise one, which it never sends there
# (fused.convolution_takes: the kernel would copy the input the column route reads in place).
FUSED_CONV_LAYER_PARAMS = [(c, layout) for c, layout in CONV_LAYER_PARAMS
                           if c.nd == 2 and set(c.stride) == {1} and c.groups == 1 and
                           not (layout == "planar" and _pointwise(c))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case,layout", FUSED_CONV_LAYER_PARAMS,
                         ids=[f"{c.name}-{layout}" for c, layout in FUSED_CONV_LAYER_PARAMS])
def test_graphed_fused_convolution_is_the_launches_bit_for_bit(monkeypatch, case, layout, dtype):
    """A convolution's forward on the fused kernel (ops._ConvFusedReplay), as
    test_graphed_convolution_is_the_launches_bit_for_bit checks the column route's."""
    monkeypatch.setattr(fused, "CONVOLUTION_MIN_COLUMNS", 0)
    _check_graphed_convolution(monkeypatch, case, layout, dtype, ops._ConvFusedReplay, True)


def _check_graphed_convolution(monkeypatch, case, layout, dtype, owner, graphed):
    """A convolution's forward, by a replay of class ``owner`` launched as a CUDA graph from
    its third call at the same addresses where ``graphed`` (else its kernels launched, no
    replay), bit for bit as launched one by one, into poisoned memory, in the input's
    layout, and right against float64."""
    x, w, b, conv = _conv_layer(case, layout, dtype)

    def call():
        poison_allocator(x.numel() * x.element_size() * 4)
        return conv(x, w, b)
    with torch.no_grad():
        launches = _without_graphs(monkeypatch, call)
        answers = _spy(monkeypatch, owner)
        same = [torch.equal(call(), launches) for _ in range(CALLS)]
    if graphed:
        assert answers[-2:] == [True, True], "the last calls ran as a graph"
        assert graphs.kept() == 1
    else:
        assert answers == [] and graphs.kept() == 0
    assert all(same)
    assert launches.is_contiguous(memory_format=torch.channels_last if case.nd == 2 else
                                  torch.channels_last_3d) == (layout == "channels_last")
    tolerance = 5e-3 if dtype == torch.float32 else 3e-2
    x64, w64, b64 = (None if t is None else t.double() for t in (x, w, b))
    assert rel_error(launches, conv(x64, w64, b64)) < tolerance


def _conv_step(case, layout, dtype, key):
    """A convolution layer's training step on fresh tensors (_conv_layer's): ``(grads,
    leaves)``, ``grads()`` the gradients of its leaves (input, weight, bias) for a fixed
    output gradient in the input's layout, the allocator poisoned before each."""
    x, w, b, conv = _conv_layer(case, layout, dtype)
    leaves = [t.requires_grad_() for t in (x, w, b) if t is not None]
    with torch.no_grad():
        shape = conv(x, w, b).shape
    grad = torch.randn(shape, generator=generator(case.name, key), dtype=torch.float64)
    grad = grad.to(CUDA, dtype)
    if layout == "channels_last":
        grad = grad.contiguous(memory_format=cl.memory_format(grad.dim()))

    def grads():
        poison_allocator(x.numel() * x.element_size() * 4)
        return torch.autograd.grad(conv(x, w, b), leaves, grad)
    return grads, (x, w, b, grad)


def _assert_conv_gradients_right(case, tensors, grad, gradients):
    """``gradients`` (of the leaves among ``tensors``: input, weight, bias) right against
    torch's float64 gradients for the output gradient ``grad``, within the dtype's error."""
    tolerance = 5e-3 if grad.dtype == torch.float32 else 3e-2
    leaves64 = [t.detach().double().requires_grad_() for t in tensors if t is not None]
    x64, w64, *b64 = leaves64
    out64 = CONV[case.nd][0](x64, w64, *b64, **_conv_kwargs(case))
    for ours, ref in zip(gradients, torch.autograd.grad(out64, leaves64, grad.double())):
        assert rel_error(ours, ref) < tolerance


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case,layout", CONV_LAYER_PARAMS, ids=CONV_LAYER_IDS)
def test_graphed_convolution_step_is_the_launches_bit_for_bit(monkeypatch, case, layout, dtype):
    """A small convolution's training step, its weight gradient by the transposed
    convolution's backward replay (ops._conv_weight_grad) where that call has one, graphed
    in the last steps, bit for bit as its kernels launched one by one, into poisoned
    memory; every gradient right against float64. The zoo's 3x3 convolution (the first
    layer) has one in both layouts."""
    monkeypatch.setattr(ops, "CONV_WEIGHT_GRAD_REPLAYED", True)
    monkeypatch.setattr(ops, "GRAPHED_CONV_BACKWARD", False)   # (its graph would hold these)
    grads, (x, w, b, grad) = _conv_step(case, layout, dtype, "step")
    owners = (ops._BackwardReplay, ops._GraphedBackward, ops._FusedBackward,
              ops._DepthwiseBackward)
    launches = _without_graphs(monkeypatch, grads)
    replayed = any(isinstance(r, owners) for r in ops._backward_replays.values())
    answers = _spy(monkeypatch, owners)
    same = [all(torch.equal(g, h) for g, h in zip(grads(), launches))
            for _ in range(BACKWARD_CALLS)]
    if case is cases.CONV_LAYERS[0]:
        assert replayed, "the zoo's 3x3 convolution's weight gradient has a replay"
    assert answers[-2:] == [True, True] if replayed else answers == []
    assert all(same)
    _assert_conv_gradients_right(case, (x, w, b), grad, launches)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case,layout", CONV_LAYER_PARAMS, ids=CONV_LAYER_IDS)
def test_graphed_convolution_backward_is_the_launches_bit_for_bit(monkeypatch, case, layout,
                                                                  dtype):
    """A small convolution's whole backward as one graph (ops._ConvBackwardReplay, with
    ops.GRAPHED_CONV_BACKWARD) in the last steps, where its bound fits the graphs' memory
    limit, bit for bit as its kernels launched one by one, into poisoned memory; every
    gradient right against float64, the graph's weight gradient in the weight's layout
    (over the limit, _conv_gradients' is in the call's)."""
    monkeypatch.setattr(ops, "GRAPHED_CONV_BACKWARD", True)
    grads, (x, w, b, grad) = _conv_step(case, layout, dtype, "backward")
    launches = _without_graphs(monkeypatch, grads)
    [replay] = ops._conv_backward_replays.values()
    answers = _spy(monkeypatch, ops._ConvBackwardReplay)
    same = [all(torch.equal(g, h) for g, h in zip(grads(), launches))
            for _ in range(BACKWARD_CALLS)]
    a = conv_args(f"conv{case.nd}d", case.nd, x, w, b, **_conv_kwargs(case))
    fits = replay.graph_bytes(grad, x, w, a) <= graphs.get_graph_memory_limit()
    assert fits or case is cases.CONV_LAYERS[-1], "the small layers' graphs fit the limit"
    assert answers[-2:] == [True, True] if fits else not any(answers), answers
    assert all(same)
    assert not fits or grads()[1].stride() == w.stride()   # (the eager one's: the call's layout)
    _assert_conv_gradients_right(case, (x, w, b), grad, launches)


CONV_BOUND_PARAMS = [(c, layout, "columns") for c, layout in CONV_LAYER_PARAMS] + \
    [(c, layout, "fused") for c, layout in FUSED_CONV_LAYER_PARAMS]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case,layout,route", CONV_BOUND_PARAMS,
                         ids=[f"{c.name}-{layout}-{r}" for c, layout, r in CONV_BOUND_PARAMS])
def test_a_convolution_graph_takes_no_more_memory_than_its_call_bounds(monkeypatch, case,
                                                                      layout, route, dtype):
    """A small convolution's forward graph (ops._ConvReplay.graph_bytes, or
    ops._ConvFusedReplay's fused.forward_bytes: what the graph memory limit compares)
    bounds the most the caching allocator hands out while its launches run one by one, on
    a third call (the first plans, and times cuBLAS's algorithms)."""
    monkeypatch.setattr(fused, "CONVOLUTION_MIN_COLUMNS", 0 if route == "fused" else None)
    x, w, b, conv = _conv_layer(case, layout, dtype)
    taken = []

    def measured(owner, addresses, run, nbytes, device, stream):
        taken.append((type(owner).__name__, requested_during(run)[0], nbytes()))
        return True
    monkeypatch.setattr(graphs, "launch", measured)
    with torch.no_grad():
        for _ in range(3):
            taken.clear()
            conv(x, w, b)
    owner = "_ConvFusedReplay" if route == "fused" else "_ConvReplay"
    assert [name for name, *_ in taken] == [owner], taken
    for name, used, bound in taken:
        assert used <= bound, f"{name}: took {used:,} bytes, bounded at {bound:,}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case,layout", CONV_LAYER_PARAMS, ids=CONV_LAYER_IDS)
def test_a_convolution_backward_graph_takes_no_more_memory_than_its_call_bounds(
        monkeypatch, case, layout, dtype):
    """ops._ConvBackwardReplay.graph_bytes bounds the most the caching allocator hands out
    while its launches run one by one (the replays inside launching their kernels too), on
    a third step (the first plans, and times cuBLAS's algorithms)."""
    monkeypatch.setattr(ops, "GRAPHED_CONV_BACKWARD", True)
    grads, _ = _conv_step(case, layout, dtype, "backward-bound")
    taken = []

    def measured(owner, addresses, run, nbytes, device, stream):
        if not isinstance(owner, ops._ConvBackwardReplay):
            return False
        taken.append((requested_during(run)[0], nbytes()))
        return True
    monkeypatch.setattr(graphs, "launch", measured)
    for _ in range(3):
        taken.clear()
        grads()
    [(used, bound)] = taken
    assert used <= bound, f"took {used:,} bytes, bounded at {bound:,}"


# The 2-D model layers on the fused route (ops._FusedReplay), its cost model's floor lowered.
FUSED_PARAMS = [(c, layout) for c in cases.MODEL_LAYERS if c.nd == 2
                for layout in ("planar", "channels_last")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case,layout", FUSED_PARAMS, ids=[f"{c.name}-{l}" for c, l in FUSED_PARAMS])
def test_graphed_fused_forward_is_the_launches_bit_for_bit(monkeypatch, case, layout, dtype):
    monkeypatch.setattr(fused, "forward_preferred", lambda *args: True)
    x, w, b = layout_tensors(case, layout, dtype, CUDA, "fused")
    out_bytes = case.batch * case.out_channels * x.element_size() * \
        torch.Size(case.output_size).numel()
    owners = []

    def call():
        poison_allocator(out_bytes)
        return OURS[case.nd](x, w, b, **case.kwargs)
    with torch.no_grad():
        launches = _without_graphs(monkeypatch, call)
        answers, launch = [], graphs.launch

        def fused_launch(owner, *args):
            owners.append(type(owner))
            answers.append(launch(owner, *args))
            return answers[-1]
        monkeypatch.setattr(graphs, "launch", fused_launch)
        same = [torch.equal(call(), launches) for _ in range(CALLS)]
    assert set(owners) == {ops._FusedReplay}
    assert answers[-2:] == [True, True], "the last calls ran as a graph"
    assert all(same)
    tolerance = 5e-3 if dtype == torch.float32 else 3e-2
    assert rel_error(launches, reference64(case, x, w, b)[0]) < tolerance


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case,layout", BACKWARD_PARAMS, ids=BACKWARD_IDS)
def test_graphed_backward_is_the_launches_bit_for_bit(monkeypatch, case, layout, dtype):
    _check_graphed_backward(monkeypatch, case, layout, dtype, "backward",
                            (ops._BackwardReplay, ops._GraphedBackward, ops._DepthwiseBackward))


# Stride-1 calls whose backward the fused kernels take (ops._FusedBackward), the cost
# model's floor lowered: planar, float32 in 2-D only, 16-bit in 1-D to 3-D.
FUSED_BACKWARD = [(c.scaled(4096), dtype) for c in cases.BENCH if set(c.stride) == {1}
                  and c.groups == 1 for dtype in (torch.float32, torch.bfloat16)
                  if c.nd == 2 or dtype != torch.float32]


@pytest.mark.parametrize("case,dtype", FUSED_BACKWARD,
                         ids=[f"{c.name}-{str(d)[6:]}" for c, d in FUSED_BACKWARD])
def test_graphed_fused_backward_is_the_launches_bit_for_bit(monkeypatch, case, dtype):
    monkeypatch.setattr(fused, "preferred", lambda *args: True)
    monkeypatch.setattr(fused, "backward_preferred", lambda *args: True)
    _check_graphed_backward(monkeypatch, case, "planar", dtype, "fused backward",
                            (ops._FusedBackward,))


def test_the_bench_counts_the_memory_a_graph_holds(monkeypatch):
    """The bench's memory column counts what a graphed call takes (its graph's pool holds
    it between launches): 3d-3x5x7's bfloat16 step, scaled, its backward fused and graphed
    during the timing, reports at least its backward's copies."""
    monkeypatch.setattr(fused, "backward_preferred", lambda *args: True)
    case = next(c for c in cases.BENCH if c.name == "3d-3x5x7").scaled(1 << 16)
    x, w, b = case.tensors(torch.bfloat16, "meta")
    a = conv_transpose_args("conv_transpose3d", 3, x, w, b, case.stride, case.padding,
                            case.output_padding, case.groups, case.dilation)
    graphed, launch = [], graphs.launch

    def fused_launch(owner, *args):
        answer = launch(owner, *args)
        graphed.append(answer and isinstance(owner, ops._FusedBackward))
        return answer
    monkeypatch.setattr(graphs, "launch", fused_launch)
    row = bench.measure(case, torch.bfloat16, torch.device(CUDA), True,
                        bench.Ceilings(math.nan, math.nan), repeats=5)
    assert True in graphed, "the backward ran as a graph while timed"
    assert row.ours_extra_mb * 1e6 >= fused.backward_workspace(a, 2) * 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case,layout", BACKWARD_PARAMS, ids=BACKWARD_IDS)
def test_a_graph_takes_no_more_memory_than_its_call_bounds(monkeypatch, case, layout, dtype):
    """Every graph a training step's calls would keep, forward and backward, takes at most
    the memory its call bounds it at (the ``nbytes`` graphs.launch is given: what the graph
    memory limit compares), measured as the most the caching allocator hands out while
    its launches run one by one, in a third step (the first plans, and times cuBLAS's
    algorithms). The zoo's large layers' graphs fit the default limit."""
    taken = _memory_against_bounds(monkeypatch, case, layout, dtype)
    assert ["Backward" in owner for owner, *_ in taken] == [False, True], taken
    if case in cases.LARGE_MODEL_LAYERS:
        assert taken[1][2] <= graphs.get_graph_memory_limit(), taken


@pytest.mark.parametrize("case,dtype", FUSED_BACKWARD,
                         ids=[f"{c.name}-{str(d)[6:]}" for c, d in FUSED_BACKWARD])
def test_a_fused_graph_takes_no_more_memory_than_its_call_bounds(monkeypatch, case, dtype):
    """As above, for the fused route's backward (ops._FusedBackward; and its forward where
    one is fused, ops._FusedReplay), the cost model's floor lowered. (Session 54 did not
    run it: its bound counts no staging for a bias gradient summed by torch.)"""
    monkeypatch.setattr(fused, "preferred", lambda *args: True)
    monkeypatch.setattr(fused, "forward_preferred", lambda *args: True)
    monkeypatch.setattr(fused, "backward_preferred", lambda *args: True)
    taken = _memory_against_bounds(monkeypatch, case, "planar", dtype)
    assert taken and taken[-1][0] == "_FusedBackward", taken


def _memory_against_bounds(monkeypatch, case, layout, dtype) -> list:
    """(owner's class name, bytes taken, bound) of each call of a training step's third
    step that graphs.launch is asked to launch, run eagerly in its place; each within its
    bound."""
    x, w, b = layout_tensors(case, layout, dtype, CUDA, "bounds")
    leaves = [t.requires_grad_() for t in (x, w, b) if t is not None]
    grad_out = output_gradient(case, layout, dtype, CUDA)
    taken = []

    def measured(owner, addresses, run, nbytes, device, stream):
        taken.append((type(owner).__name__, requested_during(run)[0], nbytes()))
        return True
    monkeypatch.setattr(graphs, "launch", measured)
    for _ in range(3):
        taken.clear()
        torch.autograd.grad(OURS[case.nd](x, w, b, **case.kwargs), leaves, grad_out)
    for owner, used, bound in taken:
        assert used <= bound, f"{owner}: took {used:,} bytes, bounded at {bound:,}"
    return taken


def _check_graphed_backward(monkeypatch, case, layout, dtype, key, owners):
    """A training step's gradients, the bias's too, with the backward graphed (by a replay
    of a class in ``owners``: its last two calls graphed) bit for bit as with its kernels
    launched one by one, into poisoned memory, and right against float64."""
    x, w, b = layout_tensors(case, layout, dtype, CUDA, key)
    leaves = [t.requires_grad_() for t in (x, w, b) if t is not None]
    grad_out = output_gradient(case, layout, dtype, CUDA)

    def grads():
        poison_allocator(x.numel() * x.element_size())
        return torch.autograd.grad(OURS[case.nd](x, w, b, **case.kwargs), leaves, grad_out)
    launches = _without_graphs(monkeypatch, grads)
    answers = _spy(monkeypatch, owners)
    same = [all(torch.equal(g, h) for g, h in zip(grads(), launches))
            for _ in range(BACKWARD_CALLS)]
    assert answers[-2:] == [True, True], "the last backwards ran as a graph"
    assert all(same)
    tolerance = 5e-3 if dtype == torch.float32 else 3e-2
    for ours, ref in zip(launches, reference64(case, x, w, b, grad_out.double())[1:]):
        assert rel_error(ours, ref) < tolerance


def _without_graphs(monkeypatch, fn):
    """``fn()`` with every call launching its kernels one by one."""
    with monkeypatch.context() as patch:
        patch.setattr(graphs, "launch", lambda *args: False)
        return fn()


def test_a_graph_reads_its_tensors_as_they_are_at_each_launch():
    """An optimiser's step in place, and new values in the same input tensor, show in the
    next output of a kept graph."""
    case = cases.MODEL_LAYERS[0]
    x, w, b = layout_tensors(case, "channels_last", torch.float32, CUDA, "in place")
    with torch.no_grad():
        for _ in range(CALLS):
            OURS[2](x, w, b, **case.kwargs)
        assert graphs.kept() == 1
        w.mul_(-2)
        x.copy_(torch.randn(x.shape, generator=generator("new input"), dtype=torch.float64))
        out = OURS[2](x, w, b, **case.kwargs)
    assert rel_error(out, reference64(case, x, w, b)[0]) < 5e-3


def test_a_graph_runs_only_at_its_addresses(monkeypatch):
    """Inputs elsewhere in memory (each call's own, kept alive) never launch a graph."""
    case = cases.MODEL_LAYERS[1]
    answers = _spy(monkeypatch)
    kept = []
    with torch.no_grad():
        for i in range(CALLS):
            x, w, b = layout_tensors(case, "planar", torch.float32, CUDA, str(i))
            out = OURS[2](x, w, b, **case.kwargs)
            kept.append((x, w, b, out))
            assert rel_error(out, reference64(case, x, w, b)[0]) < 5e-3
    assert not any(answers) and graphs.kept() == 0


def test_no_graphs_under_the_limit(monkeypatch):
    case = cases.MODEL_LAYERS[2]
    x, w, b = layout_tensors(case, "channels_last", torch.bfloat16, CUDA)
    monkeypatch.setattr(graphs, "_memory_limit", 0)
    with torch.no_grad():
        outs = [OURS[2](x, w, b, **case.kwargs) for _ in range(CALLS)]
    assert graphs.kept() == 0
    assert all(torch.equal(o, outs[0]) for o in outs)


def test_a_kept_graph_inside_a_captured_graph():
    """A user's own CUDA graph captures a call whose graph is kept: the call's kernels go
    into the user's graph, which replays right."""
    case = cases.MODEL_LAYERS[0]
    x, w, b = layout_tensors(case, "planar", torch.float32, CUDA, "user graph")
    with torch.no_grad():
        for _ in range(CALLS):
            OURS[2](x, w, b, **case.kwargs)
        assert graphs.kept() == 1
        user = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            OURS[2](x, w, b, **case.kwargs)   # warm this stream's calls
        torch.cuda.current_stream().wait_stream(stream)
        with torch.cuda.graph(user):
            out = OURS[2](x, w, b, **case.kwargs)
        x.copy_(torch.randn(x.shape, generator=generator("replayed"), dtype=torch.float64))
        user.replay()
        torch.cuda.synchronize()
    assert rel_error(out, reference64(case, x, w, b)[0]) < 5e-3


def test_a_depthwise_step_captured_in_a_users_graph_on_first_sight():
    """A user's CUDA graph of a depthwise layer's forward and backward, captured where no
    replay is kept for the call (so its kernels are launched straight into the capture, the
    backward by _conv_transpose_backward's capturing path), replays with new inputs to the
    right output and gradients."""
    case = next(c for c in DEPTHWISE if c.name == "depthwise-100-channels")
    x, w, b = layout_tensors(case, "planar", torch.float32, CUDA, "user step")
    leaves = [t.requires_grad_() for t in (x, w, b)]
    grad_out = output_gradient(case, "planar", torch.float32, CUDA)

    def step():
        out = OURS[case.nd](x, w, b, **case.kwargs)
        return [out.detach(), *torch.autograd.grad(out, leaves, grad_out)]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):   # compiles the kernels, on a side stream as torch asks
        step()
    torch.cuda.current_stream().wait_stream(stream)
    ops._replays.clear()
    ops._backward_replays.clear()
    user = torch.cuda.CUDAGraph()
    with torch.cuda.graph(user):
        results = step()
    assert not ops._replays and not ops._backward_replays   # nothing kept while capturing
    with torch.no_grad():
        x.copy_(torch.randn(x.shape, generator=generator("replayed x"), dtype=torch.float64))
        w.copy_(torch.randn(w.shape, generator=generator("replayed w"), dtype=torch.float64))
    user.replay()
    torch.cuda.synchronize()
    refs = reference64(case, x, w, b, grad_out.double())
    for ours, ref in zip(results, refs):
        assert rel_error(ours, ref) < 1e-5


WHOLE_STEPS = [(name, layout, precision) for name in ("dcgan", "vae-decoder")
               for layout in ("planar", "channels_last") for precision in ("tf32", "ieee")]


@pytest.mark.parametrize("name, layout, precision", WHOLE_STEPS)
def test_a_converted_models_training_step_captured_whole(monkeypatch, name, layout, precision):
    """A user's CUDA graph of a converted model's whole training step (the forward and
    every parameter's gradient), captured after warm-up steps, replays on a new input to
    the eager step's results bit for bit; with torch's convolutions and ours in IEEE
    float32, to the model's in float64 too. torch's own convolutions are made
    deterministic for it: otherwise cuDNN may sum their gradients in a different order from
    one step to the next (session 55's capture_probe.py: the eager step 6e-6 from a second
    eager step in TF32, and 0 with cudnn.deterministic). (In TF32 a reduced model's
    gradients read 4-6% from float64's, its batch norms over two samples magnifying the
    rounding: session 50's P.)"""
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
    # torch's convolutions, and ours by the "torch" policy:
    monkeypatch.setattr(torch.backends.cudnn.conv, "fp32_precision", precision)
    _captured_whole(name, layout, precision == "ieee")


def _captured_whole(name: str, layout: str, against_float64: bool) -> None:
    entry = zoo.by_name([name])[0]
    torch.manual_seed(0)
    model = entry.build(True).to(CUDA).train()
    x = entry.input(True, CUDA, generator=generator(name, layout, "x"))
    if layout == "channels_last":
        model, x = model.to(memory_format=torch.channels_last), x.contiguous(
            memory_format=torch.channels_last)
    double = copy.deepcopy(model).double()
    ours = gemmconv.convert(copy.deepcopy(model))
    grad = torch.randn(ours(x).shape, generator=generator(name, layout, "grad"),
                       dtype=torch.float64).to(CUDA)
    grad = grad.contiguous(memory_format=torch.channels_last) if layout == "channels_last" else grad

    def step(net=ours, x=x, grad=grad.float()):
        out = net(x)
        return [out, *torch.autograd.grad(out, list(net.parameters()), grad)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):   # plans, kernels and our own graphs, as torch asks
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    user = torch.cuda.CUDAGraph()
    with torch.cuda.graph(user):
        replayed = step()
    with torch.no_grad():
        x.copy_(torch.randn(x.shape, generator=generator(name, layout, "new x")))
    user.replay()
    torch.cuda.synchronize()
    eager = step()
    names = ["output", *(n for n, _ in ours.named_parameters())]
    differ = [n for n, r, e in zip(names, replayed, eager) if not torch.equal(r, e)]
    assert not differ, f"the capture's results differ from the eager step's: {differ}"
    if against_float64:
        flat = lambda rs: torch.cat([t.detach().double().flatten() for t in rs[1:]])  # noqa: E731
        reference = step(double, x.double(), grad)
        # (On the CPU, in float32, these models read 1e-7 to 2e-6 from float64, ours and torch's.)
        assert rel_error(replayed[0], reference[0]) < 1e-4
        assert rel_error(flat(replayed), flat(reference)) < 1e-4
