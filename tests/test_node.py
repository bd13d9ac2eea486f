"""The C++ side of a module's steady call (gemmconv/_node.py) on the CPU: built against the
installed torch, its autograd node's gradients the Python Function's bit for bit, torch's
errors where torch raises them, its forward handed to Python off CUDA, its tables' bounds.
Its launches need a GPU (test_cuda_replay); what graphs.py tells it of the graphs it may
launch is in test_graphs."""
import os
import warnings

import pytest
import torch

from gemmconv import _node, cases, ops
from gemmconv.bench import reference as reference64
from helpers import OURS, generator, rel_error

CASES = cases.MODEL_LAYERS + [c for c in cases.random_cases(12, seed=51)
                              if c.batch and not c.unbatched]


@pytest.fixture(scope="module")
def node():
    module = _node.load()
    assert module is not None, "the extension builds wherever the tests run"
    return module


class _Forward:
    """A steady call's forward replay, on the CPU: the forward itself."""
    @staticmethod
    def graphed(x, weight, bias, a):
        return ops._forward(x, weight, bias, a)


def _leaves(case, dtype=torch.float32, unbatched=False):
    x, w, b = case.tensors(dtype, "cpu", generator(case.name, str(dtype), "node"))
    x = x[0] if unbatched else x
    return [t.requires_grad_() for t in (x, w, b) if t is not None]


def _steady(case, x, w, b):
    a = ops.conv_transpose_args(f"conv_transpose{case.nd}d", case.nd, x, w, b, case.stride,
                                case.padding, case.output_padding, case.groups, case.dilation)
    return ops._Steady(a, _Forward())


def _bias(leaves):
    return leaves[2] if len(leaves) == 3 else None


@pytest.mark.parametrize("unbatched", [False, True], ids=["batched", "unbatched"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_nodes_gradients_are_the_python_functions(node, case, unbatched):
    """Output and gradients through the node are those through the Python Function (the
    functional call) bit for bit, and agree with float64; its grad_fn is named."""
    leaves = _leaves(case, unbatched=unbatched)
    x, w, b = leaves[0], leaves[1], _bias(leaves)
    out = _steady(case, x, w, b).with_node(node, x, w, b, 0, 0)
    node_fn = out.grad_fn.next_functions[0][0] if unbatched else out.grad_fn   # (a squeeze)
    assert node_fn.name() == "gemmconv::ConvTransposeBackward"
    grad_out = torch.randn(out.shape, generator=generator(case.name, "grad", unbatched))
    ours = [out.detach(), *torch.autograd.grad(out, leaves, grad_out)]
    functional = OURS[case.nd](x, w, b, **case.kwargs)
    theirs = [functional.detach(), *torch.autograd.grad(functional, leaves, grad_out)]
    assert all(torch.equal(o, t) for o, t in zip(ours, theirs))
    if not unbatched:
        refs = reference64(case, x, w, b, grad_out.double())
        assert all(rel_error(o, ref) < 1e-4 for o, ref in zip(ours, refs))


class _ConvForward:
    """A convolution's steady forward replay, on the CPU: the forward itself."""
    @staticmethod
    def graphed(x, weight, bias, a):
        return ops._conv_forward(x, weight, bias, a)


@pytest.mark.parametrize("unbatched", [False, True], ids=["batched", "unbatched"])
@pytest.mark.parametrize("case", cases.CONV_LAYERS[:-1], ids=lambda c: c.name)
def test_a_convolutions_node_gives_its_functional_calls_gradients(node, case, unbatched):
    """A convolution module's steady call (ops._SteadyConvolution, as ops.module_conv keeps
    it): output and gradients through the node are gemmconv.conv{nd}d's bit for bit, and
    torch's float64 ones; its grad_fn is named for the convolution."""
    from test_reuse import CONV, _conv_kwargs, _layer_tensors
    from gemmconv.shapes import conv_args
    x, w, b = _layer_tensors(case, "node", "planar")
    x = x[0] if unbatched else x
    leaves = [t.requires_grad_() for t in (x, w, b) if t is not None]
    kw = _conv_kwargs(case)
    a = conv_args(f"conv{case.nd}d", case.nd, x, w, b, **kw)
    out = ops._SteadyConvolution(a, _ConvForward()).with_node(node, x, w, b, 0, 0)
    node_fn = out.grad_fn.next_functions[0][0] if unbatched else out.grad_fn   # (a squeeze)
    assert node_fn.name() == "gemmconv::ConvolutionBackward"
    grad_out = torch.randn(out.shape, generator=generator(case.name, "grad", unbatched),
                           dtype=torch.float64)
    ours = [out.detach(), *torch.autograd.grad(out, leaves, grad_out)]
    functional = CONV[case.nd][1](x, w, b, **kw)
    theirs = [functional.detach(), *torch.autograd.grad(functional, leaves, grad_out)]
    assert all(torch.equal(o, t) for o, t in zip(ours, theirs))
    torchs = CONV[case.nd][0](x, w, b, **kw)
    refs = [torchs.detach(), *torch.autograd.grad(torchs, leaves, grad_out)]
    assert all(rel_error(o, ref) < 1e-12 for o, ref in zip(ours, refs))


@pytest.mark.parametrize("kind", ["transposed", "convolution"])
def test_a_steady_backward_given_no_output_gradient_takes_zeros(kind):
    """Where autograd hands the node no output gradient, the Python backward takes zeros of
    the batched output's shape (the node saves the batched input), for an unbatched call
    too: every gradient zero."""
    if kind == "transposed":
        case = cases.MODEL_LAYERS[1]
        x, w, b = _leaves(case, unbatched=True)
        steady = _steady(case, x, w, b)
    else:
        from test_reuse import _conv_kwargs, _layer_tensors
        from gemmconv.shapes import conv_args
        case = cases.CONV_LAYERS[0]
        x, w, b = _layer_tensors(case, "no-gradient", "planar")
        x = x[0]
        a = conv_args("conv2d", 2, x, w, b, **_conv_kwargs(case))
        steady = ops._SteadyConvolution(a, _ConvForward())
    grads = ops._steady_backward(steady, None, x.detach().unsqueeze(0), w.detach(),
                                 (True, True, True))
    assert [g.shape for g in grads] == [x.unsqueeze(0).shape, w.shape, b.shape]
    assert all(not g.any() for g in grads)


def test_the_node_asks_only_for_the_gradients_autograd_needs(node, monkeypatch):
    """A gradient autograd does not ask for is not computed (None to the Python backward's
    mask), and a bias-less call has no bias edge."""
    case = cases.MODEL_LAYERS[0]
    x, w = _leaves(case)[:2]
    asked = []
    backward = ops._Steady.backward
    monkeypatch.setattr(ops._Steady, "backward", lambda self, g, x, w, a, need: asked.append(
        list(need)) or backward(self, g, x, w, a, need))
    out = _steady(case, x, w, None).with_node(node, x, w, None, 0, 0)
    (grad_w,) = torch.autograd.grad(out, [w], torch.ones_like(out))
    monkeypatch.undo()
    assert asked == [[False, True, False]]
    assert len(out.grad_fn.next_functions) == 3 and out.grad_fn.next_functions[2][0] is None
    assert torch.equal(grad_w, torch.autograd.grad(OURS[case.nd](x, w, None, **case.kwargs),
                                                   [w], torch.ones_like(out))[0])


def test_the_node_counts_what_each_backward_did(node):
    """Each backward counts its outcome: here, on the CPU, the Python backward for a
    gradient not on CUDA, and for a backward that records its own graph."""
    case = cases.MODEL_LAYERS[1]
    x, w, b = _leaves(case)
    node.reset_outcomes()
    out = _steady(case, x, w, b).with_node(node, x, w, b, 0, 0)
    out.backward(torch.ones_like(out))
    out = _steady(case, x, w, b).with_node(node, x, w, b, 0, 0)
    torch.autograd.grad(out, [x], torch.ones_like(out).requires_grad_(), create_graph=True)
    counts = node.outcomes()
    assert counts.pop("not a CUDA gradient") == 1 and counts.pop("create_graph") == 1
    assert set(counts.values()) == {0} and "launched" in counts


def test_the_node_raises_torchs_errors(node, monkeypatch):
    """As torch's nodes: a second backward through a freed graph, a saved tensor changed in
    place, and a double backward (the Python Function is once differentiable) raise
    torch's errors; an exception of the Python backward reaches the caller as itself."""
    case = cases.MODEL_LAYERS[1]
    x, w, b = _leaves(case)

    def call():
        return _steady(case, x, w, b).with_node(node, x, w, b, 0, 0)
    out = call()
    grad_out = torch.randn(out.shape, generator=generator("errors"))
    out.backward(grad_out)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward(grad_out)
    out = call()
    with torch.no_grad():
        w.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward(grad_out)
    out = call()
    (grad_x,) = torch.autograd.grad(out, [x], grad_out.clone().requires_grad_(), create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice"):
        grad_x.sum().backward()

    class Raised(Exception):
        pass

    def raising(*args):
        raise Raised("from the Python backward")
    out = call()
    monkeypatch.setattr(ops._Steady, "backward", raising)
    with pytest.raises(Raised, match="from the Python backward"):
        out.backward(grad_out)


def test_the_node_saves_its_tensors_through_torchs_hooks(node):
    """saved_tensors_hooks see the input and the weight the node saves, as torch's nodes'."""
    case = cases.MODEL_LAYERS[2]
    leaves = _leaves(case)
    x, w, b = leaves
    packed, unpacked = [], []

    def pack(t):
        packed.append(t.shape)
        return t.clone()

    def unpack(t):
        unpacked.append(t.shape)
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = _steady(case, x, w, b).with_node(node, x, w, b, 0, 0)
    assert packed == [x.shape, w.shape]
    grads = torch.autograd.grad(out, leaves, torch.ones_like(out))
    assert sorted(unpacked) == sorted(packed)
    functional = OURS[case.nd](x, w, b, **case.kwargs)
    assert all(torch.equal(o, t) for o, t in zip(
        grads, torch.autograd.grad(functional, leaves, torch.ones_like(out))))


def test_a_failed_build_warns_once_and_leaves_the_python_function(monkeypatch):
    """Where the extension cannot be built, load() says why, once, and returns None (module
    calls keep the Python Function)."""
    from torch.utils import cpp_extension

    def failing(**kwargs):
        raise RuntimeError("no compiler here")
    monkeypatch.setattr(_node, "_module", None)
    monkeypatch.setattr(_node, "_error", None)
    monkeypatch.setattr(cpp_extension, "load", failing)
    with pytest.warns(RuntimeWarning, match="no compiler here"):
        assert _node.load() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _node.load() is None


def test_the_build_finds_the_ninja_pip_installed(monkeypatch):
    """Where no ninja is on PATH (a virtual environment not activated), the build runs with
    the ninja package's own on PATH, and PATH is as before afterwards."""
    import shutil

    import ninja
    from torch.utils import cpp_extension
    paths = []

    def building(**kwargs):
        paths.append(os.environ["PATH"])
        raise RuntimeError("stop here")
    monkeypatch.setattr(_node, "_module", None)
    monkeypatch.setattr(_node, "_error", None)
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None)
    monkeypatch.setattr(cpp_extension, "load", building)
    before = os.environ["PATH"]
    with pytest.warns(RuntimeWarning, match="stop here"):
        assert _node.load() is None
    assert paths[0].split(os.pathsep)[0] == ninja.BIN_DIR and os.environ["PATH"] == before


def test_a_lock_left_by_an_interrupted_build_is_removed_and_a_fresh_one_kept(tmp_path):
    """torch's build waits for its lock for ever: one older than any build (a killed
    build's) is removed, with a warning; a fresh one (a build under way) is kept."""
    lock = tmp_path / "lock"
    lock.touch()
    _node._clear_stale_lock(str(tmp_path))
    assert lock.exists()
    old = lock.stat().st_mtime - _node.STALE_LOCK_SECONDS - 1
    os.utime(lock, (old, old))
    with pytest.warns(RuntimeWarning, match="interrupted build"):
        _node._clear_stale_lock(str(tmp_path))
    assert not lock.exists()
    _node._clear_stale_lock(str(tmp_path))   # (none: nothing to do)


def test_the_extension_builds_per_python_and_torch_version(monkeypatch, tmp_path):
    """Its build directory lies under TORCH_EXTENSIONS_DIR, named by Python's and torch's
    versions."""
    from torch.utils import cpp_extension
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    directory = _node._build_directory(cpp_extension)
    assert os.path.isdir(directory) and os.path.dirname(directory) == str(tmp_path)
    assert directory.endswith(f"torch{torch.__version__}")


@pytest.mark.parametrize("unbatched", [False, True], ids=["batched", "unbatched"])
def test_a_steady_call_without_grad_off_cuda_runs_its_forward_in_python(node, unbatched):
    """Where the extension can launch no graph (here: not CUDA) a steady call's forward is
    the Python one, counted as such; without grad its output has no node."""
    case = cases.MODEL_LAYERS[1]
    leaves = _leaves(case, unbatched=unbatched)
    x, w, b = leaves[0], leaves[1], _bias(leaves)
    node.reset_outcomes()
    with torch.no_grad():
        out = _steady(case, x, w, b).with_node(node, x, w, b, 0, 0, grad=False)
        assert torch.equal(out, OURS[case.nd](x, w, b, **case.kwargs))
    assert out.grad_fn is None and not out.requires_grad
    assert node.forwards() == {"launched": 0, "in Python": 1}


def test_a_table_keeps_a_graph_once_a_stream_and_addresses(node):
    """A forward's or a backward's graph told again for the same stream and addresses (as
    a backward that ran Python while graphs were paused tells it) replaces the one kept;
    on another stream it is another graph (graphs on one stream share a memory pool)."""
    table, out = node.Table(), torch.zeros(2, 3)
    table.add_forward(out, (7, 1, 2, 0, 4), 0)
    table.add_forward(out, (7, 1, 2, 0, 4), 1)
    assert table.forward_graphs() == 1
    table.add_forward(out, (8, 1, 2, 0, 4), 2)
    assert table.forward_graphs() == 2
    for serial in range(3, 20):
        table.add_forward(out, (7, 1, 2, serial, 4), serial)
        assert 1 <= table.forward_graphs() <= 8
    grads = [torch.zeros(2, 3), None, torch.zeros(3)]
    for serial in range(2):
        table.add((True, False, True), (3, 1), 0, 1, 2, grads, (7, 1, 2, 3, 4, 0, 5), serial)
    assert len(table) == 1
    table.add((True, False, True), (3, 1), 0, 1, 2, grads, (8, 1, 2, 3, 4, 0, 5), 2)
    assert len(table) == 2


def test_a_tables_graphs_are_bounded(node):
    """A steady call's table keeps at most 8 graphs of a kind of backward, and 16 kinds."""
    table, grads = node.Table(), [torch.zeros(2, 3), None, torch.zeros(3)]
    for serial in range(20):
        table.add((True, False, True), (3, 1), 0, 1, 2, grads, (7, 1, 2, 3, serial, 0, 5), serial)
        assert len(table) == serial % 8 + 1
    for kind in range(40):
        table.add((True, True, kind % 2 == 0), (3, kind), 0, 1, 2, grads, (1,) * 7, kind)
    assert len(table) <= 16
