"""Which CUDA forwards run as replays (ops._Replay: one GEMM and one col2im, planned on the
first call of a shape). The plans are host arithmetic, worked out here on the CPU; the
replays' launches are checked on the GPU in test_cuda_replay.py."""
import math

import pytest
import torch

from gemmconv import cases, gemm, ops
from gemmconv import channels_last as cl
from helpers import OURS, case_args, generator, reference, rel_error


def _call(case, channels_last, key, change=None):
    """Fresh float32 ``(x, w, b)`` for ``case`` (channels_last where asked; then edited by
    ``change(x, w, b)``) and their checked arguments."""
    x, w, b = case.tensors(torch.float32, "cpu", generator(case.name, key))
    if channels_last:
        x = x.contiguous(memory_format=cl.memory_format(x.dim()))
        w = w.contiguous(memory_format=cl.memory_format(w.dim()))
    if change is not None:
        x, w, b = change(x, w, b)
    return x, w, b, case_args(case, x, w, b)


def _replay(case, channels_last=False, change=None):
    """The replay ops works out for ``case`` in float32 (None where there is none), after
    ``change(x, w, b)`` edits the tensors."""
    x, w, b, a = _call(case, channels_last, "forward", change)
    return ops._work_out_replay(x, w, b, a, channels_last)[0]


def _batched(case) -> bool:
    """Whether ``case``'s samples side by side come from products batched over them."""
    cells = math.prod(case.size)
    return ops._samples_inner(case.batch, cells) and \
        ops._samples_batched(cells, case.in_channels // case.groups)


@pytest.mark.parametrize("case", cases.MODEL_LAYERS, ids=lambda c: c.name)
def test_model_layers_run_as_replays(case):
    replay = _replay(case)
    assert replay is not None and not replay.interleaved
    # Few positions a sample: the GEMM takes the samples side by side (ops._samples_inner),
    # from the input reordered, or by a product batched over the samples (one call of n).
    assert replay.samples_inner == (ops._samples_inner(case.batch, math.prod(case.size))
                                    and not _batched(case))
    assert [c.args[-1] for c in replay.product.calls] == [case.batch if _batched(case) else 1]
    if case.nd in (2, 3):
        assert _replay(case, channels_last=True).interleaved


CASE = cases._c("k3s2", 2, 16, 8, (3, 3), (40, 40), stride=2, padding=1)


def test_calls_of_more_than_one_gemm_and_col2im_have_none(monkeypatch):
    assert _replay(CASE) is not None
    # Nothing but the planar column route's single GEMM and col2im replays:
    gathering = cases._c("gathers", 2, 4, 64, (3, 3), (40, 40), padding=1)   # im2col first
    assert ops._args_from_lists(*gathering.tensors(torch.float32)[:3], [1, 1], [1, 1], [0, 0],
                                [1, 1], 1).route()[0] != (False, False)
    assert _replay(gathering) is None
    # a bias of stride 2: a copy the replay would skip (a strided input it copies, as the
    # column route does)
    assert _replay(CASE, change=lambda x, w, b: (x.transpose(2, 3), w, b)) is not None
    assert _replay(CASE, change=lambda x, w, b: (x, w, torch.randn(2 * b.shape[0])[::2])) is None
    # chunks: a workspace limit below the columns' size
    monkeypatch.setattr(ops, "_workspace_limit", 4096)
    assert _replay(CASE) is None


def test_a_dense_grouped_channels_last_call_replays_its_one_product():
    """A channels_last call of few channels a group (gemm.dense_groups) replays as
    channels_last.forward runs it: one product over every group's channels, its columns an
    ungrouped layer's (channels_last.dense_weight), where per-group products would be eight
    calls' batch of 2-channel reductions."""
    grouped = cases._c("grouped", 2, 16, 16, (3, 3), (20, 20), stride=2, groups=8)
    replay = _replay(grouped, channels_last=True)
    assert replay.interleaved and replay.dense == 8
    (call,) = replay.product.calls
    n, m, k, count = *call.args[2:5], call.args[-1]
    assert (n, m, k, count) == (9 * 16, 2 * 20 * 20, 16, 1)   # taps x C_out, positions, C_in
    assert _replay(grouped, channels_last=False).dense == 0


def test_channels_last_replay_zero_pads_unaligned_channels(monkeypatch):
    """A channels_last forward whose input channels are not whole 16-byte units and whose
    product is large replays with both operands zero-padded: its GEMM runs over 24 channels
    where the call has 21 (float32)."""
    case = cases._c("k4s2-21ch", 4, 21, 16, (4, 4), (8, 8), stride=2, padding=1)
    assert _replay(case, channels_last=True).padded == 0    # a small product: not padded
    monkeypatch.setattr(gemm, "LAYOUT_TRIAL_FLOPS", 1)      # (channels_last tries no layouts)
    replay = _replay(case, channels_last=True)
    assert replay.interleaved and replay.padded == 24
    assert replay.product.calls[0].args[4] == 24            # the reduction dim k


def _backward_replay(case, channels_last=False, need=(True, True, True)):
    """The backward replay ops works out for ``case`` in float32 (None where there is none)."""
    x, w, _, a = _call(case, channels_last, "backward")
    grad = torch.randn(a.output_shape)
    if channels_last:
        grad = grad.contiguous(memory_format=cl.memory_format(x.dim()))
    return ops._work_out_backward_replay(grad, x, w, a, list(need), channels_last)


@pytest.mark.parametrize("case", cases.MODEL_LAYERS, ids=lambda c: c.name)
def test_model_layers_backward_runs_as_replays(case):
    replay = _backward_replay(case)
    assert replay is not None and replay.input is not None and replay.weight is not None
    assert replay.batched == _batched(case)
    assert [c.args[-1] for c in replay.input.calls] == [case.batch if _batched(case) else 1]
    only_input = _backward_replay(case, need=(True, False, False))
    assert only_input.input is not None and only_input.weight is None
    if case.nd in (2, 3):
        assert _backward_replay(case, channels_last=True).interleaved


@pytest.mark.parametrize("case", cases.MODEL_LAYERS, ids=lambda c: c.name)
def test_samples_side_by_side_by_batched_products_match_torch(monkeypatch, case):
    """The planar route on the CPU (the replays' decomposition): with the samples side by
    side, the forward's and the input gradient's products run batched over the samples
    where ops._samples_batched says (each output n matrices), else as one product over n L
    columns; either way the results match torch in float64."""
    outputs = []
    matmul = gemm.matmul
    monkeypatch.setattr(gemm, "matmul", lambda a, b, out, *args: outputs.append(out.shape[0])
                        or matmul(a, b, out, *args))
    x, w, b = case.tensors(torch.float64, "cpu", generator(case.name, "batched"))
    leaves = [t.requires_grad_() for t in (x, w, b) if t is not None]
    out = OURS[case.nd](x, w, b, **case.kwargs)
    grad = torch.randn(out.shape, dtype=torch.float64, generator=generator(case.name, "g"))
    mine = torch.autograd.grad(out, leaves, grad)
    n = case.batch if _batched(case) else 1
    assert outputs == [n, n, 1]    # forward, input gradient, weight gradient
    ref = reference(case, x, w, b)
    assert rel_error(out, ref) < 1e-12
    for m, t in zip(mine, torch.autograd.grad(ref, leaves, grad)):
        assert rel_error(m, t) < 1e-12


@pytest.mark.parametrize("case", cases.WIDE_LAYERS, ids=lambda c: c.name)
def test_backward_of_many_positions_a_sample_runs_graphed_as_it_is(monkeypatch, case):
    """Over ops.SAMPLES_INNER_MAX_POSITIONS positions a sample the planar backward runs with
    the samples outer (split-K weight-gradient products, ops._add_weight_grad), which no
    single GEMM a gradient plans: its replay is _backward itself (ops._GraphedBackward, which
    a CUDA call launches as a graph), writing into the gradients it is given, as _backward
    alone computes them, bit for bit; channels_last calls keep their planned replay."""
    cells = math.prod(case.size)
    assert not ops._samples_inner(case.batch, cells)
    replay = _backward_replay(case)
    assert isinstance(replay, ops._GraphedBackward)
    assert replay.columns == case.batch * case.out_channels * math.prod(case.kernel_size) * cells
    if case.nd > 1:
        assert _backward_replay(case, channels_last=True).interleaved
    assert _backward_replay(case, need=(False, False, True)) is None     # nothing to replay
    x, w, b, a = _call(case, False, "graphed")
    grad = torch.randn(a.output_shape, generator=generator(case.name, "grad"))
    for need in ([True, True, True], [True, False, False], [False, True, True]):
        given = ops._new_gradients(x, w, a, need, replay.interleaved)
        for g in given:
            if g is not None:
                g.fill_(float("nan"))
        mine = replay.run(grad, x, w, a, need, given)
        assert all(m is g for m, g in zip(mine, given))
        alone = ops._backward(grad, x, w, a, need, interleaved=False)
        for m, one, asked in zip(mine, alone, need):
            assert (m is None) == (not asked) and (m is None or torch.equal(m, one))
    x64, w64, b64 = (t.double().requires_grad_() for t in (x, w, b))
    refs = torch.autograd.grad(reference(case, x64, w64, b64), (x64, w64, b64), grad.double())
    for m, t in zip(replay.run(grad, x, w, a, [True] * 3), refs):
        assert rel_error(m, t) < 1e-5
    monkeypatch.setattr(ops, "GRAPHED_BACKWARD_MAX_COLUMNS", replay.columns - 1)   # GPU-bound:
    assert _backward_replay(case) is None                                      # no graph
    monkeypatch.setattr(ops, "GRAPHED_BACKWARD_MAX_COLUMNS", replay.columns)
    assert _backward_replay(case) == replay
    monkeypatch.setattr(ops, "_workspace_limit", 4096)                  # in chunks: none
    assert _backward_replay(case) is None


def test_launches_pass_each_argument_through_a_pointer_to_its_value(monkeypatch):
    """_cuda._launch_at's kernel parameters, read back as cuLaunchKernel reads them: the
    launch's structs by value, then the tensors' addresses, in order."""
    import contextlib
    import ctypes
    from gemmconv import _cuda
    seen = {}

    class Driver:
        def cuLaunchKernel(self, kernel, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            pointers = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
            seen.update(kernel=kernel, blocks=gx, stream=stream,
                        structs=[list(ctypes.cast(pointers[i], ctypes.POINTER(ctypes.c_int64))[:2])
                                 for i in range(2)],
                        addresses=[ctypes.cast(pointers[i], ctypes.POINTER(ctypes.c_uint64))[0]
                                   for i in range(2, 5)])
            return 0

    monkeypatch.setattr(_cuda, "driver", lambda: Driver())
    monkeypatch.setattr(_cuda, "_kernels", lambda *key: {"col2im": ("kernel", key)})
    monkeypatch.setattr(_cuda, "on_device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(_cuda, "raw_stream", lambda device: 7)
    structs = (_cuda._struct([3, 4]), _cuda._struct([5, 6]))
    launch = _cuda.Launch(("key",), 9, structs, tuple(map(ctypes.addressof, structs)))
    _cuda._launch_at("col2im", launch, torch.device("cpu"), [2**40 + 16, 0, 2**33])
    assert seen == dict(kernel=("kernel", ("key",)), blocks=9, stream=7,
                        structs=[[3, 4], [5, 6]], addresses=[2**40 + 16, 0, 2**33])


def test_kept_replays_are_worked_out_once_and_bounded(monkeypatch):
    """ops._kept: a call's replay (or None, for a call that is not one) is worked out on its
    first call only, with the buffers it was worked out on then and none after; nothing is
    worked out or kept during CUDA-graph capture; the cache clears when full."""
    capturing = [False]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    worked = []

    def work_out(replay):
        worked.append(replay)
        return replay, ("workspace", "out")
    cache = {}
    assert ops._kept(cache, "a", lambda: work_out("replay")) == ("replay", ("workspace", "out"))
    assert ops._kept(cache, "a", lambda: work_out("other")) == ("replay", ())
    assert ops._kept(cache, "b", lambda: work_out(None)) == (None, ("workspace", "out"))
    assert ops._kept(cache, "b", lambda: work_out("other")) == (None, ())
    assert worked == ["replay", None]
    capturing[0] = True
    assert ops._kept(cache, "c", lambda: work_out("captured")) == (None, ())
    assert ops._kept(cache, "a", lambda: work_out("other")) == ("replay", ())   # kept before
    capturing[0] = False
    assert worked == ["replay", None] and "c" not in cache
    monkeypatch.setattr(ops, "MAX_REPLAYS", 2)
    ops._kept(cache, "c", lambda: work_out("third"))
    assert cache == {"c": "third"}
