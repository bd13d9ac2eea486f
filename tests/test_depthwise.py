"""The depthwise kernels (gemmconv/depthwise.py), forward and backward, and the grouped
direct kernel (forward): the tap table, the decompositions in plain PyTorch against torch
in float64, the Triton kernels on the CPU through Triton's interpreter, their blocks and
grids, and which calls take them, on the shared table's depthwise and grouped cases
(cases.DEPTHWISE, cases.GROUPED). tests/test_cuda_depthwise.py runs the kernels on the
GPU."""
import math

import pytest
import torch

import gemmconv
from gemmconv import cases, depthwise, ops
from gemmconv.explain import BACKWARD_DEPTHWISE
from gemmconv.shapes import Geometry
from helpers import case_args, generator, interpreted, reference, rel_error
from gemmconv.bench import reference as reference_with_grads

# The interpreter runs a program at a time in numpy: the cases up to 2^16 outputs.
SMALL = [c for c in cases.DEPTHWISE + cases.GROUPED
         if c.batch * c.out_channels * math.prod(c.output_size) <= 1 << 16]
SMALL_DEPTHWISE = [c for c in SMALL if c.in_channels == c.groups]
# The backward kernel's grouped calls (depthwise.BACKWARD_MAX_INPUTS): a quarter of them,
# 2, 3 and 8 input channels a group, for the interpreter's time.
SMALL_GROUPED = [c for c in SMALL if c.in_channels > c.groups][::4]


def _batched(case, t):
    return t.unsqueeze(0) if case.unbatched else t


@pytest.mark.parametrize("case", cases.DEPTHWISE, ids=lambda c: c.name)
def test_reach_lists_each_tap_once_for_the_one_phase_it_reaches(case):
    """Per dim and residue r of the stride, the listed taps are exactly those k with (r + p
    - k d) % s == 0, and each reads the input at (r + p - k d) / s: at most ceil(k / step)
    of them, never all k where the stride is over one."""
    g = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
    r = depthwise.reach(g)
    pad = depthwise.DIMS - case.nd
    for d in range(case.nd):
        k, s, p, dil = g.kernel_size[d], g.stride[d], g.padding[d], g.dilation[d]
        listed = []
        for residue in range(s):
            taps = [r.first[pad + d][residue] + m * r.step[pad + d]
                    for m in range(r.count[pad + d][residue])]
            assert taps == [j for j in range(k) if (residue + p - j * dil) % s == 0]
            assert [r.offset[pad + d][residue] - m * r.delta[pad + d] for m in range(len(taps))] == \
                [(residue + p - j * dil) // s for j in taps]
            listed += taps
        assert sorted(listed) == list(range(k))   # every tap reaches exactly one residue
        assert r.most[pad + d] == -(-k // r.step[pad + d]) or r.most[pad + d] < k


@pytest.mark.parametrize("case", cases.DEPTHWISE + cases.GROUPED, ids=lambda c: c.name)
def test_decomposition_matches_torch_in_float64(case):
    x, w, b = case.tensors(generator=generator(case.name, "decomposition"))
    a = case_args(case, x, w, b)
    out = depthwise.reference(_batched(case, x), w, b, a)
    assert rel_error(out, _batched(case, reference(case, x, w, b))) < 1e-12


@interpreted
@pytest.mark.parametrize("layout", ["planar", "channels_last"])
@pytest.mark.parametrize("case", SMALL, ids=lambda c: c.name)
def test_kernel_matches_float64_through_the_interpreter(case, layout):
    """Into a NaN-filled output, planar or channels_last (the input, weight and output
    alike; 1-D and unbatched calls have none), from float32 inputs: the depthwise kernel,
    or the grouped one for more input channels a group."""
    if layout == "channels_last" and (case.nd == 1 or case.unbatched):
        pytest.skip("no channels_last layout for 1-D or unbatched inputs")
    x, w, b = case.tensors(generator=generator(case.name, "kernel", layout))
    ref = _batched(case, reference(case, x, w, b))
    a = case_args(case, x, w, b)
    x = _batched(case, x).float()
    out = torch.full(ref.shape, float("nan"))
    if layout == "channels_last":
        fmt = torch.channels_last if case.nd == 2 else torch.channels_last_3d
        x, out = x.contiguous(memory_format=fmt), out.contiguous(memory_format=fmt)
        w = w.contiguous(memory_format=fmt)
    depthwise.forward(x, w.float(), None if b is None else b.float(), a, out)
    assert rel_error(out, ref) < 1e-6


@interpreted
@pytest.mark.parametrize("inputs", [8, 4, 2])
@pytest.mark.parametrize("dtype,tolerance", [(torch.bfloat16, 1e-2), (torch.float16, 1e-3)])
def test_grouped_kernel_splits_16_bit_vectors_of_a_groups_channels(dtype, tolerance, inputs):
    """A 16-bit channels_last call of 8, 4 or 2 input channels a group: the grouped kernel
    loads a position's channels of a group as one vector (VEC 8, 4 or 2, halved in
    registers), against float64 on the same rounded inputs (the interpreter's other cases
    are float32, VEC at most 4)."""
    case = cases._c("vec", 2, 16, 16, (3, 3), (5, 6), stride=2, padding=1, groups=16 // inputs)
    x, w, b = (t.to(dtype) for t in case.tensors(generator=generator("vec", str(dtype), inputs)))
    ref = reference(case, x.double(), w.double(), b.double())
    x = x.contiguous(memory_format=torch.channels_last)
    a = case_args(case, x, w, b)
    out = torch.full(ref.shape, float("nan"), dtype=dtype).contiguous(memory_format=torch.channels_last)
    assert depthwise.plan(a, x, out, True).launch.constants["VEC"] == inputs
    depthwise.forward(x, w, b, a, out)
    assert rel_error(out, ref) < tolerance


@interpreted
def test_kernel_reads_strided_inputs_a_channels_last_weight_and_a_strided_bias():
    """The kernel takes the input through its strides (a slice here), the weight in any
    layout (made (C_out, taps) rows first) and a bias of any stride (made contiguous)."""
    case = cases.depthwise_of(cases._c("k3s2", 2, 4, 4, (3, 3), (6, 7), stride=2, padding=1), 2)
    x, w, b = case.tensors(generator=generator("strided"))
    ref, a = reference(case, x, w, b), case_args(case, x, w, b)
    wide, spaced = torch.randn(2, 4, 6, 14), torch.randn(2 * b.shape[0])
    wide[..., ::2], spaced[::2] = x, b
    x, b = wide[..., ::2], spaced[::2]                 # float32 views, not dense
    assert x.stride(-1) == 2 and b.stride(0) == 2
    out = torch.full(ref.shape, float("nan"))
    w_cl = w.float().contiguous(memory_format=torch.channels_last)
    depthwise.forward(x, w_cl, b, a, out)
    assert rel_error(out, ref) < 1e-6


def _gradients64(case, *key):
    """Fresh float64 ``(x, w, grad_out)`` of ``case`` (batched) and torch's ``(grad_x,
    grad_w)`` for them."""
    x, w, b = case.tensors(generator=generator(case.name, *key))
    x, w = x.requires_grad_(), w.requires_grad_()
    shape = (case.out_channels, *case.output_size)
    grad_out = torch.randn(shape if case.unbatched else (case.batch, *shape),
                           generator=generator(case.name, *key, "g"), dtype=torch.float64)
    _, gx, gw = reference_with_grads(case, x, w, None, grad_out)
    return (_batched(case, x.detach()), w.detach(), _batched(case, grad_out),
            _batched(case, gx), gw)


@pytest.mark.parametrize("case", cases.DEPTHWISE + cases.GROUPED, ids=lambda c: c.name)
def test_backward_decomposition_matches_torch_in_float64(case):
    x, w, grad_out, want_x, want_w = _gradients64(case, "backward-decomposition")
    a = case_args(case, x, w, None)
    grad_x, grad_w = depthwise.reference_backward(grad_out, x, w, a)
    assert rel_error(grad_x, want_x) < 1e-12 and rel_error(grad_w, want_w) < 1e-12


@interpreted
@pytest.mark.parametrize("need", ["both", "input", "weight"])
@pytest.mark.parametrize("layout", ["planar", "channels_last"])
@pytest.mark.parametrize("case", SMALL_DEPTHWISE + SMALL_GROUPED, ids=lambda c: c.name)
def test_backward_kernel_matches_float64_through_the_interpreter(case, layout, need):
    """The gradients asked for, the input's into a NaN-filled tensor, planar or
    channels_last (x, the weight, the output gradient and the input gradient alike), from
    float32 tensors; a gradient not asked for is neither computed nor returned. The cases of
    more (m, k) pairs than MAX_PAIRS (FCN-like kernels) take them in chunks. Grouped calls
    too: each input channel with its group's output channels."""
    if layout == "channels_last" and (case.nd == 1 or case.unbatched):
        pytest.skip("no channels_last layout for 1-D or unbatched inputs")
    x, w, grad_out, want_x, want_w = _gradients64(case, "backward-kernel", layout, need)
    a = case_args(case, x, w, None)
    x, w, grad_out = x.float(), w.float(), grad_out.float()
    if layout == "channels_last":
        fmt = torch.channels_last if case.nd == 2 else torch.channels_last_3d
        x, w, grad_out = (t.contiguous(memory_format=fmt) for t in (x, w, grad_out))
    grad_x = torch.full_like(x, float("nan")) if need != "weight" else None
    grad_w = depthwise.backward(grad_out, x, w, a, grad_x, need != "input")
    if need != "weight":
        assert rel_error(grad_x, want_x) < 1e-6
    if need != "input":
        assert grad_w.dtype == torch.float32 and rel_error(grad_w, want_w) < 1e-6
    else:
        assert grad_w is None


@interpreted
def test_backward_kernel_reads_an_expanded_output_gradient_and_strided_input():
    """The output gradient of ``out.sum()`` (one element expanded: all strides zero) and an
    input that is a slice, read through their strides."""
    case = cases.depthwise_of(cases._c("k3s2", 2, 4, 4, (3, 3), (6, 7), stride=2, padding=1), 2)
    x, w, _ = case.tensors(torch.float32, generator=generator("backward-strided"))
    a = case_args(case, x, w, None)
    wide = torch.randn(2, 4, 6, 14)
    wide[..., ::2] = x
    x = wide[..., ::2]
    grad_out = torch.ones(()).expand(a.output_shape)
    assert x.stride(-1) == 2 and grad_out.stride() == (0, 0, 0, 0)
    want_x, want_w = depthwise.reference_backward(grad_out.double(), x.double(), w.double(), a)
    grad_x = torch.full_like(x, float("nan"))
    grad_w = depthwise.backward(grad_out, x, w, a, grad_x, True)
    assert rel_error(grad_x, want_x) < 1e-6 and rel_error(grad_w, want_w) < 1e-6


@pytest.mark.parametrize("channels,pairs,positions,interleaved,need_weight", [
    (32, 16, 16 * 128 * 128, False, True), (32, 16, 16 * 128 * 128, True, True),
    (256, 16, 16 * 16 * 16, True, True), (3, 9, 7, False, True), (100, 256, 30, True, True),
    (32, 16, 16 * 128 * 128, False, False), (5, 27, 1, True, False),
    (21, 4096, 8 * 16 * 16, False, True), (21, 4096, 8 * 16 * 16, True, True), (3, 960, 12, True, False)])
def test_backward_grid_covers_every_position_and_pair_in_few_partials(
        channels, pairs, positions, interleaved, need_weight):
    """A program's block holds every (m, k) pair, or a chunk of MAX_PAIRS of them, and at
    most BACKWARD_ELEMENTS loads (but for the pairs), channels only where innermost; the
    chunks cover the pairs once; the programs cover every block of positions once, one
    block each where no partials are made, else no more programs than BACKWARD_PROGRAMS
    (or one a channel block and chunk)."""
    (bp, bt, bc), chunks, channel_blocks, splits, each = depthwise.backward_grid(
        channels, pairs, positions, interleaved, need_weight)
    assert all(v & (v - 1) == 0 for v in (bp, bt, bc))
    assert bt == min(depthwise.MAX_PAIRS, 1 << (pairs - 1).bit_length())
    assert chunks * bt >= pairs > (chunks - 1) * bt
    assert bp * bt * bc <= max(depthwise.BACKWARD_ELEMENTS, bt)
    assert bc == 1 if not interleaved else bc <= depthwise.BACKWARD_CHANNEL_BLOCK
    assert channel_blocks * bc >= channels > (channel_blocks - 1) * bc
    blocks = -(-positions // bp)
    assert splits * each >= blocks > (splits - 1) * each
    if need_weight:
        assert channel_blocks * chunks * splits <= max(depthwise.BACKWARD_PROGRAMS,
                                                      channel_blocks * chunks)
    else:
        assert each == 1


def _meta_call(case, channels_last=False):
    """Float32 ``(x, w, b, args)`` of ``case`` on the meta device (a CUDA call's plans,
    without a GPU), x and w channels_last where asked."""
    x, w, b = case.tensors(torch.float32, "meta")
    if channels_last:
        fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        x, w = (t.contiguous(memory_format=fmt) for t in (x, w))
    return x, w, b, case_args(case, x, w, b)


@pytest.mark.parametrize("layout", [False, True])
def test_cuda_backwards_of_one_input_channel_a_group_take_the_depthwise_kernel(layout):
    """Worked out on meta tensors: the backward replay of a depthwise call is the depthwise
    kernel's, with the gradients asked for planned, and explain says so: one launch for
    both gradients, or, where the (m, k) pairs come in chunks (more than MAX_PAIRS), one
    looping over them for the input's and one a chunk for the weight's; channels_last calls
    of that many pairs stay on the column routes, and explain says why."""
    case = next(c for c in cases.DEPTHWISE if c.name == "depthwise-k4s2")
    wide = cases._c("wide", 2, 4, 4, (17, 16), (5, 5), stride=8, groups=4)
    for c, launches in ((case, (1, 1, 1)), (wide, (2, 1, 1))):
        x, w, b, a = _meta_call(c, layout)
        grad_out = torch.empty(a.output_shape, device="meta")
        if c is wide and layout:   # many pairs, channels_last: the column routes, and why
            assert not isinstance(ops._work_out_backward_replay(grad_out, x, w, a, [True] * 3, True),
                                  ops._DepthwiseBackward)
            assert "channels_last with 272 taps" in gemmconv.explain(x, w, b, **c.kwargs).backward
            continue
        for need, count in zip(([True, True, False], [True, False, False], [False, True, True]),
                               launches):
            replay = ops._work_out_backward_replay(grad_out, x, w, a, need, layout)
            assert isinstance(replay, ops._DepthwiseBackward) and replay.interleaved == layout
            assert len(replay.plan.launches) == count and (replay.plan.splits > 0) == need[1]
            constants = [launch.constants for launch in replay.plan.launches]
            assert any(k["NEED_INPUT"] for k in constants) == need[0]
            assert any(k["NEED_WEIGHT"] for k in constants) == need[1]
            assert all(k["PAIR_LOOP"] == (c is wide and k["NEED_INPUT"]) for k in constants)
        assert gemmconv.explain(x, w, b, **c.kwargs).backward == BACKWARD_DEPTHWISE


def test_unavailable_names_what_keeps_a_call_off_the_kernel():
    case = cases.DEPTHWISE[0]
    x, w, b = case.tensors(torch.float32, "meta")
    x = _batched(case, x)
    a = case_args(case, x, w, b)
    assert depthwise.unavailable(a, x, w) is None     # meta: described as on a GPU
    assert "CUDA" in depthwise.unavailable(a, torch.empty_like(x, device="cpu"), w)
    assert "float64" in depthwise.unavailable(a, x.double(), w.double())
    most = depthwise.GROUPED_MAX_INPUTS
    for inputs, groups, taken in ((2, 2, True), (most, 4, True), (most + 1, 2, False),
                                  (2, 1, False)):
        x, w, b, a = _meta_call(cases._c("grouped", 2, inputs * groups, 4, (3, 3), (5, 5),
                                         stride=2, groups=groups))
        why = depthwise.unavailable(a, x, w)
        assert (why is None) == taken
        assert taken or f"{inputs} input channels a group" in why
        cl = x.contiguous(memory_format=torch.channels_last)   # either layout alike
        assert depthwise.unavailable(a, cl, w) == why
        # The backward kernel takes up to BACKWARD_MAX_INPUTS input channels a group (one:
        # grouped calls ran slower on it, results/s66/B).
        assert f"{inputs} input channels a group" in depthwise.backward_unavailable(a, x, w)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(depthwise, "BACKWARD_MAX_INPUTS", most)
            assert (depthwise.backward_unavailable(a, x, w) is None) == taken


@pytest.mark.parametrize("layout", [False, True])
def test_cuda_forwards_of_one_input_channel_a_group_replay_the_depthwise_kernel(layout):
    """Worked out on meta tensors (a CUDA call's plans, without a GPU): the replay a
    depthwise call keeps is the depthwise kernel's, in the call's layout; explain and the
    route's name say so."""
    case = next(c for c in cases.DEPTHWISE if c.name == "depthwise-k4s2")
    x, w, b, a = _meta_call(case, layout)
    replay, buffers = ops._work_out_replay(x, w, b, a, layout)
    assert isinstance(replay, ops._DepthwiseReplay) and buffers == ()
    assert replay.interleaved == layout and replay.plan.launch is not None
    e = gemmconv.explain(x, w, b, **case.kwargs)
    assert e.route == ("channels_last: " if layout else "") + ops.DEPTHWISE_ROUTE
    assert e.candidates[0] == (ops.DEPTHWISE_ROUTE, 0, True)
    assert "depthwise kernels multiply in float32" in str(e)
    many = cases.grouped_of(case, depthwise.GROUPED_MAX_INPUTS + 1, 2)
    x, w, b, a = _meta_call(many)
    assert not isinstance(ops._work_out_replay(x, w, b, a, False)[0], ops._DepthwiseReplay)


@pytest.mark.parametrize("layout", [False, True])
def test_cuda_forwards_of_a_few_input_channels_a_group_replay_the_grouped_kernel(layout):
    """Worked out on meta tensors: a grouped call of up to GROUPED_MAX_INPUTS input channels
    a group replays the grouped kernel's launch, a program a stride phase (all phases of
    every block of phase 0's outputs, the most of any phase), whose channels are one
    group's, its input read a channel a load where planar, 16 bytes of a group's channels
    where they are innermost; its backward stays on the column routes, but where
    depthwise.BACKWARD_MAX_INPUTS lets the backward kernel take it. explain and the route's
    name say so; and, for a call of one input channel a group too many, why it does not
    take the kernel."""
    case = next(c for c in cases.GROUPED if c.name == "3d-strided-grouped-small")
    from gemmconv import _triton
    x, w, b, a = _meta_call(case, layout)
    replay, _ = ops._work_out_replay(x, w, b, a, layout)
    assert isinstance(replay, ops._DepthwiseReplay) and replay.interleaved == layout
    launch = replay.plan.launch
    assert launch.kernel is _triton.grouped_transposed
    assert launch.constants["VEC"] == (4 if layout else 1)      # float32: 16 bytes, 4 of the 8
    assert launch.constants["M"] == case.out_channels // case.groups
    br, bw, bc = (launch.constants[k] for k in ("BR", "BW", "BC"))
    extent = [-(-i // s) for i, s in zip(a.image, case.stride)]
    multiplier = case.out_channels // case.groups
    assert bc == min(multiplier, depthwise.GROUPED_CHANNEL_BLOCK)
    assert br * bw * bc <= depthwise.GROUPED_ELEMENTS
    channel_blocks = -(-multiplier // bc)
    assert launch.grid == (case.batch * case.groups * math.prod(case.stride) * channel_blocks *
                           -(-extent[0] * extent[1] // br) * -(-extent[2] // bw),)
    assert replay.plan.padded_outputs == launch.constants["MP"] == channel_blocks * bc
    grad_out = torch.empty(a.output_shape, device="meta")
    assert not isinstance(ops._work_out_backward_replay(grad_out, x, w, a, [True] * 3, layout),
                          ops._DepthwiseBackward)
    # Where the backward kernel takes 8 input channels a group, it takes the planar call's
    # backward (the channels_last one's 840 (m, k) pairs an input channel pass MAX_PAIRS).
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(depthwise, "BACKWARD_MAX_INPUTS", 8)
        replay = ops._work_out_backward_replay(grad_out, x, w, a, [True] * 3, layout)
        assert isinstance(replay, ops._DepthwiseBackward) != layout
        explained = gemmconv.explain(x, w, b, **case.kwargs).backward
        assert (explained == BACKWARD_DEPTHWISE) != layout
    e = gemmconv.explain(x, w, b, **case.kwargs)
    assert e.route == ("channels_last: " if layout else "") + ops.GROUPED_ROUTE
    assert e.candidates[0] == (ops.GROUPED_ROUTE, 0, True)
    assert "8 input channels" in e.steps[0] and "grouped direct kernel multiplies" in str(e)
    assert "the column routes" in e.backward and e.workspace_bytes == 0
    many = cases.grouped_of(case, depthwise.GROUPED_MAX_INPUTS + 1, 2)
    x, w, b, a = _meta_call(many, layout)
    assert not isinstance(ops._work_out_replay(x, w, b, a, layout)[0], ops._DepthwiseReplay)
    e = gemmconv.explain(x, w, b, **many.kwargs)
    assert ops.GROUPED_ROUTE not in e.route
    assert (f"(not the direct kernels: {depthwise.GROUPED_MAX_INPUTS + 1} input channels a "
            f"group (the kernels take one, or up to {depthwise.GROUPED_MAX_INPUTS} where "
            "groups > 1))") in e.steps


PLANAR, CHANNELS_LAST = (5120, 320, 32, 1), (5120, 1, 512, 32)   # x.stride() of (N, 32, 16, 10)
CHANNELS_LAST_24 = (3840, 1, 240, 24)                              # of (N, 24, 16, 10)


@pytest.mark.parametrize("inputs,strides,size,vec", [
    (8, CHANNELS_LAST, 2, 8), (8, CHANNELS_LAST, 4, 4), (4, CHANNELS_LAST, 2, 4),
    (2, CHANNELS_LAST, 4, 2), (3, CHANNELS_LAST, 2, 1), (8, CHANNELS_LAST_24, 2, 1),
    (8, PLANAR, 2, 1), (2, PLANAR, 4, 1)])
def test_grouped_kernel_reads_16_bytes_of_a_groups_channels_where_they_are_innermost(
        inputs, strides, size, vec):
    """Vectors of a power of two of a group's channels, where the other strides let the
    compiler see them aligned."""
    assert depthwise.grouped_vector(inputs, strides, size) == vec


@pytest.mark.parametrize("multiplier,rows,width", [(8, 300, 50), (3, 1, 5), (64, 7, 1000),
                                                   (200, 2, 3)])
def test_grouped_blocks_cover_rows_along_w_and_a_groups_channels(multiplier, rows, width):
    br, bw, bc = depthwise.grouped_blocks(multiplier, rows, width)
    assert bc == min(1 << (multiplier - 1).bit_length(), depthwise.GROUPED_CHANNEL_BLOCK)
    assert br * bw * bc <= max(depthwise.GROUPED_ELEMENTS, bc)
    assert bw <= 1 << (width - 1).bit_length() and br <= 1 << (rows - 1).bit_length()
    assert br * bw * bc == depthwise.GROUPED_ELEMENTS or br >= rows or \
        bw == depthwise.GROUPED_ELEMENTS // bc


@pytest.mark.parametrize("channels,rows,width,interleaved", [
    (32, 256, 256, False), (32, 256, 256, True), (5, 7, 13, True), (256, 16, 16, True),
    (8, 1, 8192, False), (8, 1, 40, False), (3, 2, 3, False)])
def test_blocks_cover_rows_along_w_and_channels_innermost_only(channels, rows, width, interleaved):
    """A program's block: powers of two within its elements (INTERLEAVED_ELEMENTS where
    channels are innermost, else PROGRAM_ELEMENTS), whole where the call is large;
    channels only where they are innermost, W's run along the row up to what is left, no
    more rows than the call has."""
    br, bw, bc = depthwise.blocks(channels, rows, width, interleaved)
    elements = depthwise.INTERLEAVED_ELEMENTS if interleaved else depthwise.PROGRAM_ELEMENTS
    assert depthwise.program_elements(interleaved) == elements
    assert all(v & (v - 1) == 0 for v in (br, bw, bc))
    assert br * bw * bc <= elements
    assert bc == (min(1 << (channels - 1).bit_length(), depthwise.MAX_CHANNEL_BLOCK) if interleaved else 1)
    assert bw >= min(width, elements // bc)
    assert br <= max(1, 1 << (rows - 1).bit_length())
    if rows * width * channels >= elements * 4:
        assert br * bw * bc == elements


@interpreted
@pytest.mark.parametrize("layout", [False, True])
def test_graphed_depthwise_replays_run_their_kernels_where_no_graph_is_kept(monkeypatch, layout):
    """The depthwise replays' graphed calls (ops._graphed_forward and _graphed_backward,
    which _Replay and _BackwardReplay share), where graphs.launch keeps no graph, run their
    kernels into the tensors they return: the output in the call's layout, the gradients
    asked for. On the CPU through Triton's interpreter, the CUDA stream's lookup stubbed."""
    from gemmconv import _cuda, graphs
    monkeypatch.setattr(graphs, "launch", lambda *args: False)
    monkeypatch.setattr(_cuda, "raw_stream", lambda device: 0)
    case = cases.depthwise_of(cases._c("k3s2", 2, 4, 4, (3, 3), (6, 7), stride=2, padding=1), 2)
    x, w, b = case.tensors(torch.float32, generator=generator("graphed", layout))
    if layout:
        x, w = (t.contiguous(memory_format=torch.channels_last) for t in (x, w))
    a = case_args(case, x, w, b)
    plan = depthwise.plan(a, x, torch.empty(a.output_shape).contiguous(
        memory_format=torch.channels_last if layout else torch.contiguous_format), True)
    out = ops._DepthwiseReplay(layout, plan).graphed(x, w, b, a)
    assert out.is_contiguous(memory_format=torch.channels_last if layout else torch.contiguous_format)
    grad_out = torch.randn(a.output_shape, generator=generator("graphed", layout, "g"))
    leaves = [t.double().requires_grad_() for t in (x, w, b)]
    want = reference_with_grads(case, *leaves, grad_out.double())
    assert rel_error(out, want[0]) < 1e-6
    for need in ([True, True, True], [True, False, False], [False, True, False]):
        replay = ops._DepthwiseBackward.planned(grad_out, x, a, need, layout)
        grads = replay.graphed(grad_out, x, w, a, need)
        for g, ref, asked in zip(grads, want[1:], need):
            assert (g is None) != asked
            assert g is None or rel_error(g, ref) < 1e-6
