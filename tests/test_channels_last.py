"""CPU: channels_last inputs take the channels-innermost route (gemmconv/channels_last.py),
which must match torch in float64, return torch's memory formats, and copy no activation."""
import math

import pytest
import torch
import torch.nn.functional as F

import gemmconv
from gemmconv import cases, channels_last, columns, fused, gemm, ops
from gemmconv.shapes import Geometry
from helpers import (OURS, Copies, allowed_routes, force_im2col_route, generator, opaque,
                     reference, rel_error)

CASES = [c for c in cases.random_cases(300, seed=1) + cases.EDGE + cases.LARGE_KERNELS
         + [c.scaled(256) for c in cases.BENCH] if c.nd > 1 and not c.unbatched and c.batch]


def _channels_last(t):
    return t.to(memory_format=channels_last.memory_format(t.dim()))


def _leaves(case, *key, weight_too=False):
    x, w, b = case.tensors(torch.float64, generator=generator(case.name, *key))
    x = _channels_last(x)
    w = _channels_last(w) if weight_too else w
    return [None if t is None else t.requires_grad_() for t in (x, w, b)]


def _check(case, x, w, b, key):
    out = OURS[case.nd](x, w, b, **case.kwargs)
    ref = reference(case, x, w, b)
    assert rel_error(out, ref) < 1e-12
    fmt = channels_last.memory_format(out.dim())
    interleaved = channels_last.suggested(x, w)
    assert out.is_contiguous(memory_format=fmt if interleaved else torch.contiguous_format)
    grad = torch.randn(ref.shape, generator=generator(case.name, key), dtype=torch.float64)
    leaves = [t for t in (x, w, b) if t is not None]
    mine, theirs = torch.autograd.grad(out, leaves, grad), torch.autograd.grad(ref, leaves, grad)
    for m, t in zip(mine, theirs):
        assert rel_error(m, t) < 1e-12
    if interleaved:
        assert mine[0].is_contiguous(memory_format=fmt)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_channels_last_matches_torch(case):
    x, w, b = _leaves(case, "cl")
    _check(case, x, w, b, "grad")


@pytest.mark.parametrize("case", CASES[::7], ids=lambda c: c.name)
def test_channels_last_weight_alone_decides_like_torch(case):
    """torch gives a channels_last output where the weight alone is channels_last."""
    x, w, b = _leaves(case, "weight", weight_too=True)
    x = x.detach().contiguous().requires_grad_()
    _check(case, x, w, b, "grad")


@pytest.mark.parametrize("case", [c for c in CASES if all(s == 1 for s in c.stride)][:40],
                         ids=lambda c: c.name)
def test_channels_last_im2col_route(case, monkeypatch):
    force_im2col_route(monkeypatch)
    x, w, b = _leaves(case, "im2col")
    _check(case, x, w, b, "grad")


@pytest.mark.parametrize("case", CASES[:60:3], ids=lambda c: c.name)
def test_channels_last_in_chunks(case):
    """A workspace of a few hundred bytes: chunks of one sample's bands of rows."""
    previous = ops.get_workspace_limit()
    ops.set_workspace_limit(512)
    try:
        x, w, b = _leaves(case, "chunks")
        _check(case, x, w, b, "grad")
    finally:
        ops.set_workspace_limit(previous)


@pytest.mark.parametrize("nd", [2, 3])
def test_channels_last_convolution(nd):
    conv = getattr(gemmconv, f"conv{nd}d")
    torch_conv = getattr(F, f"conv{nd}d")
    g = generator("conv", nd)
    x = _channels_last(torch.randn(2, 6, *[7] * nd, generator=g, dtype=torch.float64)).requires_grad_()
    w = torch.randn(8, 3, *[3] * nd, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(8, generator=g, dtype=torch.float64, requires_grad=True)
    kwargs = dict(stride=2, padding=1, dilation=1, groups=2)
    out, ref = conv(x, w, b, **kwargs), torch_conv(x, w, b, **kwargs)
    assert rel_error(out, ref) < 1e-12
    assert out.is_contiguous(memory_format=channels_last.memory_format(nd + 2))
    grad = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    for m, t in zip(torch.autograd.grad(out, (x, w, b), grad), torch.autograd.grad(ref, (x, w, b), grad)):
        assert rel_error(m, t) < 1e-12


def test_modules_in_channels_last():
    torch.manual_seed(0)
    module = torch.nn.ConvTranspose2d(8, 6, 4, stride=2, padding=1).double()
    ours = gemmconv.convert(torch.nn.Sequential(module)).to(memory_format=torch.channels_last)
    x = _channels_last(torch.randn(3, 8, 5, 6, dtype=torch.float64))
    out = ours(x)
    assert out.is_contiguous(memory_format=torch.channels_last)
    assert rel_error(out, module(x)) < 1e-12


_MANY_CHANNELS = [c for c in CASES if c.in_channels > 1 and c.out_channels > 1]
COPY_CASES = [(c, False) for c in _MANY_CHANNELS[:30]] + \
    [(cases.Case(f"im2col-{nd}d", 2, 3, 4, (3,) * nd, (9, 7, 5)[:nd], padding=(1,), dilation=(2,)),
      True) for nd in (2, 3)]


@pytest.mark.parametrize("case, im2col", COPY_CASES,
                         ids=lambda v: v.name if isinstance(v, cases.Case) else "im2col" * v)
def test_channels_last_copies_no_activation(case, monkeypatch, im2col):
    if im2col:
        force_im2col_route(monkeypatch)
    for name in ("col2im_interleaved", "im2col_interleaved"):
        monkeypatch.setattr(columns, name, opaque(getattr(columns, name)))
    matmul = opaque(gemm.matmul)

    def checked_matmul(a, b, out, choose_layout=True):
        # gemm.matmul may copy ``a`` into its other layout: only a weight may be ``a`` then.
        assert not choose_layout or a.numel() <= w.numel(), "an activation's layout trial"
        return matmul(a, b, out, choose_layout)
    monkeypatch.setattr(gemm, "matmul", checked_matmul)
    x, w, b = _leaves(case, "copies")
    out = OURS[case.nd](x, w, b, **case.kwargs)
    grad = _channels_last(torch.randn(out.shape, dtype=torch.float64,
                                      generator=generator(case.name, "g")))
    least = min(x.numel(), out.numel())
    if least <= w.numel():
        pytest.skip("activations no larger than the weight, whose reorder is a copy")
    with Copies(least) as copies:
        out = OURS[case.nd](x, w, b, **case.kwargs)
        torch.autograd.grad(out, [t for t in (x, w, b) if t is not None], grad)
    assert copies.seen == []


def test_the_copy_detector_sees_a_layout_copy(monkeypatch):
    """The test above can fail: the planar route on a channels_last input copies it."""
    monkeypatch.setattr(channels_last, "suggested", lambda *t: False)
    case = cases.EDGE[5]
    x, w, b = _leaves(case, "detector")
    with Copies(x.numel()) as copies:
        OURS[case.nd](x, w, b, **case.kwargs)
    assert copies.seen


@pytest.mark.parametrize("samples", [2, 0])
@pytest.mark.parametrize("groups", [1, 3])
def test_interleaved_columns_match_planar(groups, samples):
    """The channels-innermost columns hold the planar columns' entries, reordered; no
    samples, no columns (the helpers named their sizes rather than infer them from none)."""
    g = Geometry((3, 2), (2, 1), (1, 0), (1, 2))
    gen = generator("interleaved", groups)
    image = torch.randn(samples, 6, 7, 5, generator=gen, dtype=torch.float64)
    grid = g.grid_size(image.shape[2:])
    cells = math.prod(grid)
    flat = image.new_empty(samples * 6, 6 * cells)   # (P, K L): the 2-D out im2col takes too
    planar = columns.im2col(image.reshape(samples * 6, 7, 5), g, grid, out=flat)
    planar = planar.view(samples, groups, 6 // groups, 6, *grid)
    mine = columns.im2col_interleaved(image.movedim(1, -1), g, grid, groups)
    assert torch.equal(mine, planar.permute(0, 4, 5, 1, 3, 2))
    bias = torch.randn(6, generator=gen, dtype=torch.float64)
    back = columns.col2im_interleaved(mine, bias, g, image.shape[2:])
    expected = columns.col2im(planar.reshape(samples * 6, 6, cells), bias, g, grid, image.shape[2:])
    assert rel_error(back, expected.view(samples, 6, 7, 5).movedim(1, -1)) < 1e-15


@pytest.mark.parametrize("im2col", [False, True], ids=["gemm-col2im", "im2col-gemm"])
@pytest.mark.parametrize("cin, cout", [(3, 1), (1, 3)])
def test_layout_decided_once_per_call(monkeypatch, cin, cout, im2col):
    """One channel makes a tensor both contiguous and channels_last: the input gradient
    still follows the input's layout, whichever tensors along the way have one channel."""
    if im2col:
        force_im2col_route(monkeypatch)
    case = cases.Case("one-channel", 2, cin, cout, (2, 3), (5, 6), padding=(0, 1),
                      dilation=(2, 1))
    x, w, b = _leaves(case, "one")
    _check(case, x, w, b, "grad")


SPLIT_CASES = [c for c in CASES if any(d % s == 0 for s, d in zip(c.stride, c.dilation))][:40]


@pytest.mark.parametrize("case", SPLIT_CASES, ids=lambda c: c.name)
def test_channels_last_every_split_of_the_taps(monkeypatch, case):
    """Each split of the taps between im2col and col2im, in chunks too, channels innermost."""
    routes = [r for r, rows in allowed_routes(case) if not rows]
    monkeypatch.setattr(ops.ConvTransposeArgs, "padded_rows", lambda a: None)
    for gathered in routes:
        monkeypatch.setattr(ops.ConvTransposeArgs, "gathered_dims", lambda a, r=gathered: r)
        for limit in (4 << 30, 512):
            monkeypatch.setattr(ops, "_workspace_limit", limit)
            x, w, b = _leaves(case, "split", str(gathered))
            _check(case, x, w, b, str(gathered))


def _checked_args(case, x, w):
    return ops.conv_transpose_args(f"conv_transpose{case.nd}d", case.nd, x, w, None, case.stride,
                                   case.padding, case.output_padding, case.groups, case.dilation)


def _meta_args(case):
    x = torch.empty(case.batch, case.in_channels, *case.size, device="meta")
    return _checked_args(case, x, torch.empty(case.in_channels, case.out_channels // case.groups,
                                              *case.kernel_size, device="meta"))


# Calls the padded rows can take in float64 (whatever the cost model's choice): the table's,
# and W padded more than its taps reach (input positions dropped), strided with the
# dilation a multiple of the stride, two taps, output padding.
ROWS_CASES = [c for c in CASES + [
    cases.Case("rows-padded", 3, 4, 4, (3, 3, 3), (5, 6, 7), padding=(1, 0, 2)),
    cases.Case("rows-cropped", 2, 6, 8, (2, 3), (5, 9), padding=(0, 3)),
    cases.Case("rows-strided", 2, 4, 4, (3, 3), (5, 6), stride=(1, 2), dilation=(1, 2),
               output_padding=(0, 1)),
    cases.Case("rows-two-taps", 3, 2, 8, (1, 1, 2), (3, 4, 9), output_padding=(0, 0, 0))]
    if _meta_args(c).padded_rows() is not None and
    channels_last.rows_plan(_meta_args(c), 8, 4 << 30) is not None]


@pytest.mark.parametrize("case", ROWS_CASES[:40], ids=lambda c: c.name)
def test_channels_last_by_padded_rows(monkeypatch, case):
    """The forward by padded rows (channels_last.forward_by_rows), forced wherever a call
    allows it, in one chunk and in chunks of one sample: against torch in float64. Its
    copy holds the input once, zero-padded along W, not once a tap."""
    monkeypatch.setattr(ops.ConvTransposeArgs, "interleaved_route",
                        lambda a: (a.padded_rows().split.gathered, True))
    copies, im2col = [], columns.im2col_interleaved

    def recorded(image, g, grid, groups=1, padding=None, out=None):
        copies.append((image.shape, out.shape, g.taps))
        return im2col(image, g, grid, groups, padding, out)
    monkeypatch.setattr(columns, "im2col_interleaved", recorded)
    a = _meta_args(case)
    rows = a.padded_rows()
    one_sample = channels_last._rows_workspace(a, rows, 1) * 8
    for limit in (4 << 30, one_sample):
        monkeypatch.setattr(ops, "_workspace_limit", limit)
        x, w, b = _leaves(case, "rows", limit)
        _check(case, x, w, b, "rows")   # (the backward's convolutions by padded rows too)
        copies.clear()
        with torch.no_grad():
            OURS[case.nd](x, w, b, **case.kwargs)
        chunks = channels_last.rows_plan(a, 8, limit).chunks
        assert len(copies) == len(chunks) == (1 if limit > one_sample else case.batch)
        for (image, out, taps), (n0, n1) in zip(copies, chunks):
            assert taps == 1
            assert image == (n1 - n0, *case.size, case.in_channels)
            assert out == (n1 - n0, *case.size[:-1], rows.width, 1, 1, case.in_channels)
            assert rows.width == a.split(rows.split.gathered).grid[-1] + rows.taps - 1


def test_padded_rows_where_they_move_fewer_bytes(monkeypatch):
    """The cost model sends the channels_last 3-D stride-1 cases of 3 taps along W to the
    padded rows where they move fewer bytes than the split routes (which write im2col's k
    copies of the input): 3d-96cube, 3d-64cube. Not 3d-3x5x7 (7 taps), no 2-D call, none
    with groups; and it keeps calls whose input channels are not whole 16-byte units, whose
    columns' rows are not whole 32-byte sectors, or whose one sample's buffers exceed the
    workspace limit, on the split routes."""
    by_name = {c.name: _meta_args(c) for c in cases.BENCH}
    rows = {name for name, a in by_name.items() if a.interleaved_route()[1]}
    assert rows == {"3d-96cube", "3d-64cube"}
    assert by_name["2d-1024"].padded_rows() is not None and by_name["3d-3x5x7"].padded_rows() is None
    a = by_name["3d-96cube"]
    assert channels_last.route(a, 4, 4 << 30)[1].chunks == ((0, 4), (4, 8))
    assert channels_last.route(a, 4, 1 << 20) == (a.gathered_dims(), None)
    assert channels_last.route(a, 2, 4 << 30) == (a.gathered_dims(), None)   # rows of 432 bytes
    assert channels_last.route(by_name["3d-64cube"], 2, 4 << 30)[1] is not None   # of 864
    case = next(c for c in cases.BENCH if c.name == "3d-96cube")
    monkeypatch.setattr(fused, "wide_3d", lambda *args: False)   # (its forward: not fused)
    for dtype, route in ((torch.float32, "padded rows W"), (torch.bfloat16, "im2col D")):
        x = torch.empty(case.batch, case.in_channels, *case.size, device="meta", dtype=dtype)
        w = torch.empty(case.in_channels, case.out_channels, *case.kernel_size, device="meta",
                        dtype=dtype)
        said = gemmconv.explain(_channels_last(x), w, None, **case.kwargs)
        assert said.route == f"channels_last: {route}, GEMM + col2im"
        line = next(line for line in str(said).splitlines() if "padded rows over W" in line)
        assert line.strip().startswith("->") == (dtype == torch.float32)
    odd = _meta_args(cases.Case("odd", 2, 11, 4, (3, 3, 3), (6, 7, 5)))
    assert odd.interleaved_route()[1] and channels_last.route(odd, 4, 4 << 30)[1] is None
    assert channels_last.route(odd, 8, 4 << 30)[1] is None


@pytest.mark.parametrize("case", [c for c in CASES if c.groups > 1][:30], ids=lambda c: c.name)
def test_channels_last_groups_as_one_dense_product(monkeypatch, case):
    """Every group's products as one, the weight block-diagonal (the CUDA path's choice for
    few channels per group), forward and backward, in chunks too."""
    calls, summed, gathered = [], [], []
    monkeypatch.setattr(gemm, "dense_groups", lambda dtype, cuda, g, c: calls.append(g) or g > 1)
    col2im, im2col = columns.col2im_interleaved, columns.im2col_interleaved
    monkeypatch.setattr(columns, "col2im_interleaved", lambda cols, *args, **kw:
                        summed.append(cols.shape[-3:]) or col2im(cols, *args, **kw))
    monkeypatch.setattr(columns, "im2col_interleaved", lambda *args, out=None, **kw:
                        gathered.append(out.shape[-3:]) or im2col(*args, out=out, **kw))
    for limit in (4 << 30, 512):
        monkeypatch.setattr(ops, "_workspace_limit", limit)
        x, w, b = _leaves(case, "dense", limit)
        _check(case, x, w, b, "dense")
    assert case.groups in calls
    # The dense products take an ungrouped layer's columns: the forward's col2im reads, the
    # backward's im2col writes, a tap's C_out channels as one run (channels_last.dense_weight).
    # (Other calls gather or sum C_in channels, told apart where the counts differ.)
    if case.in_channels != case.out_channels:
        for shapes in (summed, gathered):
            ours = [(g, c) for g, _, c in shapes if g * c == case.out_channels]
            assert all(groups == 1 for groups, _ in ours), ours


def test_dense_weight_orders_an_ungrouped_layers_columns():
    """One product over dense_weight gives every group's product, tap by tap, each tap's
    channels of every group back to back."""
    groups, rows, taps, channels, positions = 3, 5, 4, 2, 7
    gen = generator("dense weight")
    w = torch.randn(groups, rows, taps * channels, generator=gen, dtype=torch.float64)
    x = torch.randn(positions, groups * rows, generator=gen, dtype=torch.float64)
    dense = channels_last.dense_weight(w, channels)
    assert dense.shape == (1, groups * rows, taps * groups * channels)
    out = (x @ dense[0]).view(positions, taps, groups, channels)
    for g in range(groups):
        alone = x[:, g * rows:(g + 1) * rows] @ w[g]
        assert torch.allclose(out[:, :, g], alone.view(positions, taps, channels), rtol=1e-13, atol=0)


@pytest.mark.parametrize("dtype, channels, padded", [(torch.float64, 5, 6), (torch.float32, 21, 24),
                                                     (torch.float64, 6, 6)])
def test_unaligned_channels_reach_the_gemms_zero_padded(monkeypatch, dtype, channels, padded):
    """Where a position's channels are not whole 16-byte units and the products are large,
    the GEMMs run over the channels zero-padded to whole units (the input and the weight
    padded, the input gradient computed padded): their reduction, or the input gradient's
    row, spans the padded count, never C_in. Against torch in float64."""
    monkeypatch.setattr(gemm, "LAYOUT_TRIAL_FLOPS", 1)   # every product large
    monkeypatch.setattr(ops.ConvTransposeArgs, "padded_rows", lambda a: None)   # split routes
    dims = []
    matmul = gemm.matmul

    def recorded(a, b, out, *args):   # (m, k, n) of each product
        dims.append((a.shape[-2], a.shape[-1], b.shape[-1]))
        return matmul(a, b, out, *args)
    monkeypatch.setattr(gemm, "matmul", recorded)
    case = cases.Case("padded", 2, channels, 3, (4, 3), (5, 6), stride=(2, 1), padding=(1, 0))
    x64, w64, b64 = _leaves(case, "padded")
    a = ops.conv_transpose_args("conv_transpose2d", 2, x64, w64, b64, case.stride, case.padding,
                                0, 1, 1)
    assert channels_last.padded_channels(a, torch.empty((), dtype=dtype).element_size()) == padded
    x, w, b = (t.detach().to(dtype).requires_grad_() for t in (x64, w64, b64))
    out = OURS[2](x, w, b, **case.kwargs)
    grad = torch.randn(out.shape, dtype=torch.float64, generator=generator("padded", "g"))
    mine = torch.autograd.grad(out, (x, w, b), grad.to(dtype))
    ref = reference(case, x64, w64, b64)
    theirs = torch.autograd.grad(ref, (x64, w64, b64), grad)
    tolerance = 1e-12 if dtype == torch.float64 else 1e-5
    assert rel_error(out, ref) < tolerance
    for m, t in zip(mine, theirs):
        assert rel_error(m, t) < tolerance
    assert out.is_contiguous(memory_format=torch.channels_last)
    assert mine[0].is_contiguous(memory_format=torch.channels_last)
    positions, m = 2 * 5 * 6, 3 * 12
    # forward: positions x C @ C x m; input gradient: positions x m @ m x C; weight
    # gradient: C x positions @ positions x m.
    assert dims == [(positions, padded, m), (positions, m, padded), (padded, positions, m)]
    said = str(gemmconv.explain(x, w, b, **case.kwargs))
    assert ("zero-padded" in said) == (f"to {padded} channels" in said) == (channels != padded)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape, side", [((2, 3, 512, 512), 32), ((1, 2, 1, 524289), 1),
                                         ((2, 5, 16, 16), 1), ((1, 4, 1024, 1024), 32)])
def test_channel_sums_side_by_side(dtype, shape, side):
    """A bias's gradient over at least 2^19 positions (a multiple of 32) sums 32 rows side
    by side first: the same sum as float64's within the dtype's rounding, by that route."""
    t = _channels_last(torch.randn(shape, generator=generator("channel sums", *shape),
                                   dtype=dtype))
    positions = t.numel() // shape[1]
    assert channels_last.side_by_side(positions) == side
    sums = channels_last.channel_sums(t)
    exact = t.double().sum((0, 2, 3))
    scale = t.double().abs().sum((0, 2, 3))
    assert sums.dtype == dtype
    assert ((sums.double() - exact).abs() / scale).max() < (1e-6 if dtype == torch.float32 else 1e-3)
    rows = t.permute(0, 2, 3, 1).reshape(positions, shape[1])
    acc = torch.float32
    by_route = rows.view(-1, side * shape[1]).sum(0, dtype=acc).view(side, -1).sum(0) \
        if side > 1 else rows.sum(0, dtype=acc)
    assert torch.equal(sums, by_route.to(dtype))
