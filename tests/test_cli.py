"""CPU: ``python -m gemmconv info``, ``bench --shape`` and gemmconv.explain say what they
should: the versions and settings, the user's layer's row and route, a call's plan."""
import json
import math
import platform
import subprocess
import sys

import pytest
import torch

import gemmconv
from gemmconv import bench, cases, depthwise, ops
from gemmconv.__main__ import main
from gemmconv.shapes import ConvArgumentError, conv_transpose_args


def test_info_names_versions_devices_and_settings(capsys):
    ops.set_workspace_limit(3 << 30)
    try:
        with gemmconv.float32_precision("ieee"):
            assert main(["info"]) == 0
    finally:
        ops.set_workspace_limit(4 << 30)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"gemmconv {gemmconv.__version__} (")
    assert f"python {platform.python_version()} " in lines[1] + " "
    assert lines[2].startswith(f"torch {torch.__version__} ")
    text = "\n".join(lines)
    try:
        import cupy
        assert f"cupy {cupy.__version__}" in text
    except ImportError:
        assert "cupy not installed" in text and "gemmconv[cuda13]" in text
    if not torch.cuda.is_available():
        assert "CUDA: no device available" in text and "NVRTC: not tried" in text
    assert "kernel cache: " in text and " files, " in text
    assert "C++ autograd node: builds (" in text and "gemmconv_autograd_node" in text
    assert f"workspace limit: {3 << 30} bytes (3.00 GiB" in text
    assert "float32 precision: 'ieee' (float32 GEMMs on CUDA run on full float32 now" in text


def test_info_says_why_the_autograd_node_does_not_build(capsys, monkeypatch):
    from torch.utils import cpp_extension

    from gemmconv import _node

    def failing(**kwargs):
        raise RuntimeError("no compiler here")
    monkeypatch.setattr(_node, "_module", None)
    monkeypatch.setattr(_node, "_error", None)
    monkeypatch.setattr(cpp_extension, "load", failing)
    assert main(["info"]) == 0
    assert "C++ autograd node: FAILS (module calls use a Python autograd Function): no " \
        "compiler here" in capsys.readouterr().out


def test_info_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "gemmconv", "info"], capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("gemmconv ") and "workspace limit: " in out


def test_bench_shape_prints_the_row_and_the_route(capsys, tmp_path):
    layer = "ConvTranspose2d(8, 6, 4, stride=2, padding=1, groups=2)"
    assert main(["bench", "--shape", layer, "--input", "2,8,5,7", "--repeats", "2", "--backward",
                 "--png", str(tmp_path / "x.png"), "--json", str(tmp_path / "x.json")]) == 0
    out, err = capsys.readouterr()
    row = next(line for line in out.splitlines() if line.startswith(layer))
    assert "(2, 8, 5, 7) k(4, 4)" in row and "x " in row            # shapes, then the speedup
    # Each case's times as it goes, on stderr: a run cut at its time limit keeps them.
    progress = err.splitlines()[err.splitlines().index(f"[1/1] {layer} ...") + 1]
    fields = row.split(")")[-1].split()   # torch ms, ours ms, speedup, ...
    assert progress == f"  torch {fields[0]} ms, ours {fields[1]} ms, {fields[2]}"
    assert "fwd+bwd" in out and "over 1 cases" in out
    # The route and why: gemmconv.explain's account of the same call.
    assert "route: GEMM + col2im" in out
    assert "cost model: column elements per sample" in out
    assert "output (2, 6, 10, 14), NCHW-contiguous" in out
    assert "workspace: forward " in out


def test_bench_shape_in_channels_last(capsys, tmp_path):
    main(["bench", "--shape", "nn.ConvTranspose3d(4, 4, 3, padding=1, bias=False)", "--input",
          "1,4,3,4,5", "--repeats", "1", "--channels-last", "--png", str(tmp_path / "x.png")])
    out = capsys.readouterr().out
    assert "channels_last forward" in out and "channels_last (no layout copies)" in out
    assert "route: channels_last: " in out


def test_bench_layouts_times_both_formats_of_each_case(capsys, tmp_path):
    """--layouts: each 2-D and 3-D case in NCHW and channels_last, a speedup per format and
    their ratio; 1-D cases left out."""
    assert main(["bench", "--layouts", "--case", "1d-dil3", "--case", "3d-stride2-grouped",
                 "--repeats", "2", "--png", str(tmp_path / "x.png"),
                 "--json", str(tmp_path / "x.json")]) == 0
    out, err = capsys.readouterr()
    assert "NCHW and channels_last forward" in out and "1d-dil3" not in out
    row = next(line for line in out.splitlines() if line.startswith("3d-stride2-grouped"))
    progress = err.splitlines()[-1]
    assert "within 10% of NCHW's (CL/NCHW >= 0.9): " in out and "of 1 cases" in out
    saved = json.loads((tmp_path / "x.json").read_text())
    speedup = saved[0]["speedup"]
    fields = row.split(")")[-1].split()   # ms, ms, speedup, ms, ms, speedup, ratio, errors
    assert fields[2] == f"{speedup['NCHW']:.2f}x" and fields[5] == f"{speedup['channels_last']:.2f}x"
    assert fields[6] == f"{speedup['channels_last'] / speedup['NCHW']:.2f}"
    assert progress == (f"  NCHW torch {fields[0]} ms, ours {fields[1]} ms, {fields[2]}, "
                        f"channels_last torch {fields[3]} ms, ours {fields[4]} ms, {fields[5]}")
    assert [r["case"] for r in saved] == ["3d-stride2-grouped-small"]
    assert set(saved[0]["ms"]) == {"torch NCHW", "gemmconv NCHW", "torch channels_last",
                                   "gemmconv channels_last"}
    assert max(saved[0]["torch_error"], saved[0]["ours_error"]) < 1e-5


def test_bench_layouts_paired_speedups(monkeypatch):
    """Each format's speedup pairs our samples with torch's of that format alone."""
    ms = {("torch", "NCHW"): 4.0, ("gemmconv", "NCHW"): 2.0, ("torch", "channels_last"): 3.0,
          ("gemmconv", "channels_last"): 1.0}
    monkeypatch.setattr(bench, "samples", lambda device, fns, repeats: [
        (key, ms[key]) for _ in range(repeats) for key in fns])
    row = bench.measure_layouts(cases.BENCH[0].scaled(64), torch.float32, torch.device("cpu"),
                                False, repeats=3)
    assert row.speedup == {"NCHW": 2.0, "channels_last": 3.0} and row.ratio == 1.5
    assert row.ms["torch channels_last"] == 3.0


@pytest.mark.parametrize("args, message", [
    (["--layouts", "--channels-last"], "--layouts times both memory formats"),
    (["--layouts", "--case", "1d-"], "--layouts: 1-D tensors have no channels_last format"),
])
def test_bench_layouts_rejects(capsys, args, message):
    with pytest.raises(SystemExit):
        main(["bench", *args])
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("layer, shape, message", [
    ("Linear(3, 4)", "1,3", "expected one of ConvTranspose1d, ConvTranspose2d, ConvTranspose3d"),
    ("ConvTranspose2d(3, 4", "1,3,4,4", "is not a layer as torch.nn writes it"),
    ("ConvTranspose2d(3, 4, size)", "1,3,4,4", "bad arguments"),
    ("ConvTranspose2d(3, 4, 3, padding_mode='reflect')", "1,3,4,4", "only padding_mode='zeros'"),
    ("ConvTranspose2d(3, 4, 3)", "1,5,4,4", "takes an input (N, 3, H, W), got --input 1,5,4,4"),
    ("ConvTranspose1d(3, 4, 3)", "1,3", "takes an input (N, 3, L)"),
])
def test_bench_shape_rejects_what_it_cannot_run(capsys, layer, shape, message):
    with pytest.raises(SystemExit):
        main(["bench", "--shape", layer, "--input", shape])
    assert message in capsys.readouterr().err


def test_bench_shape_needs_input(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--shape", "ConvTranspose2d(3, 4, 3)"])
    assert "--shape and --input go together" in capsys.readouterr().err


def test_case_from_layer_reads_torch_arguments():
    case = bench.case_from_layer("torch.nn.ConvTranspose3d(8, 4, (3, 5, 5), stride=(1, 2, 2), "
                                 "output_padding=(0, 1, 1), groups=2, bias=False, dilation=1)",
                                 (2, 8, 4, 5, 6))
    assert (case.batch, case.in_channels, case.out_channels, case.size) == (2, 8, 4, (4, 5, 6))
    assert case.kernel_size == (3, 5, 5) and case.stride == (1, 2, 2)
    assert case.output_padding == (0, 1, 1) and case.dilation == (1, 1, 1)
    assert case.groups == 2 and not case.bias


def _meta(*shape, fmt=None):
    t = torch.empty(shape, device="meta")
    return t if fmt is None else t.contiguous(memory_format=fmt)


def test_explain_follows_the_route_and_plans_of_a_call():
    x, w = _meta(8, 64, 64, 64), _meta(64, 64, 3, 3)
    with gemmconv.float32_precision("ieee"):   # full float32: not the fused route (TF32)
        e = gemmconv.explain(x, w, padding=1)
    a = conv_transpose_args("conv_transpose2d", 2, x, w, None, 1, 1, 0, 1, 1)
    assert e.route == ops.describe_route(a) == "rows H, GEMM + col2im"
    assert e.output_shape == (8, 64, 64, 64) and e.layout == "NCHW-contiguous"
    chosen = [c for c in e.candidates if c[2]]
    assert len(chosen) == 1 and chosen[0][0].startswith("row products over H")
    assert chosen[0][1] == min(cost for _, cost, _ in e.candidates)
    plan = ops._forward_plan(a, *a.route(), 4, ops.get_workspace_limit())
    assert e.workspace_bytes == plan.workspace * 4 and e.chunks == len(plan.chunks)
    assert len(e.steps) == 4 and "row product" in e.steps[1]
    text = str(e)
    assert text.splitlines()[0].startswith("gemmconv.conv_transpose2d(input (8, 64, 64, 64)")
    assert "->" in text and "workspace: forward" in text
    assert "not the fused route: float32 under the 'ieee' precision policy" in e.steps[-1]


def test_explain_says_a_pointwise_call_reads_its_input_where_it_lies():
    """A 1x1 transposed convolution at stride 1 is a GEMM on its input as it lies
    (ConvTransposeArgs.pointwise): explain names no im2col and no workspace, in either
    layout, where one of three taps on that route names its im2col and workspace."""
    for fmt in (torch.contiguous_format, torch.channels_last):
        x = _meta(2, 8, 40, 40, fmt=fmt)
        e = gemmconv.explain(x, _meta(8, 4, 1, 1), torch.empty(4, device="meta"))
        assert e.route.endswith(": GEMM" if fmt == torch.channels_last else "GEMM")
        assert "the input where it lies" in e.steps[0] and "bias added" in "".join(e.steps)
        assert not any("im2col" in step for step in e.steps) and e.workspace_bytes == 0
    wide = gemmconv.explain(_meta(2, 4, 200), _meta(4, 16, 3))
    assert wide.route == "im2col W, GEMM" and wide.workspace_bytes > 0
    assert wide.steps[0].startswith("im2col of the input")


def test_explain_names_the_fused_route_where_a_call_takes_it():
    x, w = _meta(8, 64, 512, 512, fmt=torch.channels_last), _meta(64, 32, 4, 4)
    e = gemmconv.explain(x, w, stride=2, padding=1)
    a = conv_transpose_args("conv_transpose2d", 2, x, w, None, 2, 1, 0, 1, 1)
    assert e.route == ops.describe_route(a, True, True) == "channels_last: " + ops.FUSED_ROUTE
    assert [c for c in e.candidates if c[2]] == [(ops.FUSED_ROUTE, 0, True)]
    assert "4 stride phase(s)" in e.steps[0] and e.chunks == 1 and e.workspace_bytes == 0
    planar = gemmconv.explain(_meta(8, 64, 512, 512), _meta(64, 64, 3, 3))   # a copy, then the kernel
    assert planar.route == ops.FUSED_ROUTE and planar.workspace_bytes == 8 * 64 * 512 * 512 * 4
    assert "channels innermost, (8, 512, 512, 64), rounded to TF32" in planar.steps[0]
    assert "1 stride phase(s)" in planar.steps[1]
    assert "two output rows a program" in planar.steps[1] and "columns of 3 taps" in planar.steps[1]
    assert "output rows" not in e.steps[0]    # strided: no columns of taps along H
    narrow = gemmconv.explain(_meta(8, 32, 512, 1024), _meta(32, 32, 3, 3))   # 32 output channels
    assert "three output rows a program" in narrow.steps[1]
    half = torch.empty(8, 64, 512, 512, device="meta", dtype=torch.bfloat16)
    fused_backward = gemmconv.explain(half, torch.empty(64, 64, 3, 3, device="meta", dtype=torch.bfloat16))
    assert fused_backward.backward_workspace_bytes == 8 * 64 * 514 * 514 * 2   # the output gradient's copy
    assert fused_backward.backward.startswith("the fused kernels")
    # 3-D in 16-bit types: the forward on the column routes, the backward fused where the
    # output channels fill 64 bytes; the workspace the fused backward's copy
    volume = torch.empty(16, 32, 64, 64, 64, device="meta", dtype=torch.bfloat16)
    wide = gemmconv.explain(volume, torch.empty(32, 64, 3, 5, 5, device="meta", dtype=torch.bfloat16),
                            padding=(1, 2, 2))
    assert wide.route != ops.FUSED_ROUTE and wide.backward.startswith("the fused kernels")
    assert wide.backward_workspace_bytes == 16 * 64 * 64 ** 3 * 2
    assert "backward: the fused kernels" in str(wide)
    # 16 channels: W's 5 taps folded into them (the output gradient channels innermost,
    # then its rows); with one tap along W, nothing to fold, and the column routes
    narrow = gemmconv.explain(volume, torch.empty(32, 16, 3, 5, 5, device="meta", dtype=torch.bfloat16),
                              padding=(1, 2, 2))
    assert "W's 5 taps folded into its channels" in narrow.backward
    assert narrow.backward_workspace_bytes == 16 * 16 * 64 * 64 * (64 + 5 * 64) * 2
    flat = gemmconv.explain(volume, torch.empty(32, 16, 3, 5, 1, device="meta", dtype=torch.bfloat16),
                            padding=(1, 2, 0))
    assert "not the fused kernels: the cost model" in flat.backward
    # float32: the output gradient channels innermost and its three copies moved along W by
    # 0, 2 and 3 elements (taps at offsets 0, 1, 2) in rows of 520; the input as it lies
    one = (64 * 514 * 514 + 3 * 64 * 514 * 520) * 4
    assert planar.backward_workspace_bytes == 8 * one
    assert planar.backward.endswith("copies of the output gradient moved along W")
    # 2d-64to128: the input's copies instead (64 channels of 128 x 256, moved by 0-3
    # elements into rows of 260, where the output gradient's 128 channels of 130 x 260 sit
    # in rows of 264); the output gradient read as it lies (rows of 260: whole 16 bytes)
    wider = gemmconv.explain(_meta(64, 64, 128, 256), _meta(64, 128, 3, 5))
    assert wider.backward.endswith("copies of the input moved along W")
    assert wider.backward_workspace_bytes == 64 * (128 * 130 * 260 + 4 * 64 * 128 * 260) * 4
    previous = ops.get_workspace_limit()
    try:   # the fused backward takes whole samples whose copies fit
        ops.set_workspace_limit(3 * one - 1)
        chunked = gemmconv.explain(_meta(8, 64, 512, 512), _meta(64, 64, 3, 3))
        assert chunked.route == ops.FUSED_ROUTE and chunked.backward_workspace_bytes == 2 * one
    finally:
        ops.set_workspace_limit(previous)
    grouped = gemmconv.explain(_meta(8, 64, 32, 32), _meta(64, 16, 4, 4), stride=2, groups=2)
    assert grouped.route != ops.FUSED_ROUTE and "groups > 1" in grouped.steps[-1]


def test_explain_says_an_empty_output_runs_nothing():
    """An empty batch whose output sizes reach 0 (torch's empty output) is planned by no
    route: explain says so, where it divided by the image's size."""
    g = torch.Generator().manual_seed(55)
    x, w = torch.randn(0, 2, 1, 3, generator=g), torch.randn(2, 3, 2, 2, generator=g)
    plan = gemmconv.explain(x, w, padding=1)
    assert plan.route.startswith("none: an empty batch") and plan.chunks == 0
    assert plan.output_shape == tuple(gemmconv.conv_transpose2d(x, w, padding=1).shape) == (0, 3, 0, 2)


def test_explain_chunks_follow_the_workspace_limit():
    x, w = _meta(4, 32, 128, 128), _meta(32, 16, 4, 4)
    previous = ops.get_workspace_limit()
    with gemmconv.float32_precision("ieee"):   # a route with columns in memory
        whole = gemmconv.explain(x, w, stride=2, padding=1)
        ops.set_workspace_limit(whole.workspace_bytes // 3)
        try:
            chunked = gemmconv.explain(x, w, stride=2, padding=1)
        finally:
            ops.set_workspace_limit(previous)
    assert whole.chunks == 1 and chunked.chunks > 1
    assert chunked.workspace_bytes <= whole.workspace_bytes // 3


def test_explain_channels_last_and_grouped(monkeypatch):
    x = _meta(2, 32, 32, 64, 128, fmt=torch.channels_last_3d)
    e = gemmconv.explain(x, _meta(32, 8, 3, 3, 3), stride=2, padding=1, groups=4)
    # 8 input channels a group, channels_last: the grouped direct kernel (no workspace),
    # and where it takes fewer input channels a group, the column routes.
    assert e.layout.startswith("channels_last") and e.workspace_bytes == 0
    assert e.route == "channels_last: " + ops.GROUPED_ROUTE
    monkeypatch.setattr(depthwise, "GROUPED_MAX_INPUTS", 4)
    e = gemmconv.explain(x, _meta(32, 8, 3, 3, 3), stride=2, padding=1, groups=4)
    assert e.route == "channels_last: GEMM + col2im"
    assert any("col2im" in step for step in e.steps)
    assert e.chunks == 1   # columns (positions, groups, taps, C_out / G), float32:
    assert e.workspace_bytes == 2 * math.prod((32, 64, 128)) * 4 * 27 * 8 * 4


def test_explain_names_the_mma_weight_gradient():
    """explain's backward on float32 channels_last calls whose weight gradient takes the
    "mma" form (fused.float32_weight_form: channels in 64s): no copy but the output
    gradient's rows; with 32 channels the form that reads the rows through registers."""
    x = _meta(8, 64, 512, 512, fmt=torch.channels_last)
    e = gemmconv.explain(x, _meta(64, 64, 3, 7, fmt=torch.channels_last))
    assert e.backward.endswith("mma.sync (every W tap at a shifted row of one box of inputs)")
    assert e.backward_workspace_bytes == 8 * 64 * 514 * 518 * 4   # the output gradient's rows
    narrow = gemmconv.explain(_meta(8, 32, 512, 1024, fmt=torch.channels_last),
                              _meta(32, 32, 3, 3, fmt=torch.channels_last))
    assert narrow.backward.endswith("channels_last rows as they lie")


def test_explain_says_how_a_planar_column_backward_launches():
    # Each of ops.py's planar backward replays, by the shape of the call (both gradients):
    # the samples side by side (at most SAMPLES_INNER_MAX_POSITIONS positions a sample),
    # sample by sample as one graph, whose memory the graph memory limit may refuse, or
    # eagerly.
    side = gemmconv.explain(_meta(16, 256, 16, 16), _meta(256, 128, 4, 4), stride=2, padding=1)
    assert "over the samples side by side" in side.backward
    volume, weight = _meta(2, 256, 16, 16, 16), _meta(256, 256, 2, 2, 2)
    a = conv_transpose_args("conv_transpose3d", 3, volume, weight, None, 2, 0, 0, 1, 1)
    columns = 256 * 8 * 2 * 16 ** 3
    nbytes = ops._GraphedBackward(columns).graph_bytes(volume.new_empty(a.output_shape), volume,
                                                       weight, a)
    limit = gemmconv.get_graph_memory_limit()
    try:
        within = gemmconv.explain(volume, weight, stride=2).backward
        gemmconv.set_graph_memory_limit(nbytes - 1)
        over = gemmconv.explain(volume, weight, stride=2).backward
    finally:
        gemmconv.set_graph_memory_limit(limit)
    assert "sample by sample (4,096 positions a sample, over 1,024)" in over
    assert f"its graph would take {nbytes / 1e6:,.1f} MB, over the graph memory limit" in over
    assert "run eagerly" in over and "launched as one CUDA graph" not in over
    assert f"launched as one CUDA graph from its second call ({nbytes / 1e6:,.1f} MB" in within
    large = gemmconv.explain(_meta(2, 128, 32, 32, 32), _meta(128, 128, 2, 2, 2), stride=2)
    assert "no CUDA graph: 67,108,864 column elements, over 33,554,432" in large.backward
    previous = ops.get_workspace_limit()
    ops.set_workspace_limit(16 << 20)
    try:
        chunked = gemmconv.explain(volume, weight, stride=2).backward
    finally:
        ops.set_workspace_limit(previous)
    assert "run eagerly every call, no CUDA graph:" in chunked and " chunks (" in chunked
    # channels_last calls name no planar launch
    assert "sample by sample" not in gemmconv.explain(
        _meta(2, 256, 16, 16, 16, fmt=torch.channels_last_3d), weight, stride=2).backward


def test_the_3d_unets_ups1_backward_fits_the_default_graph_memory_limit():
    # The zoo's 3-D U-Net's ups.1, planar: session 53 bounded its graph at 706.7 MB in
    # float32 (564 MB of it for split-K partial products, of SPLIT_TARGET_TILES pieces, that
    # its two samples of 4,096 positions never take), over the default limit of 512 MiB, so
    # its backward ran eagerly: 1.1 ms a training step against torch's 0.5 (H200). Its
    # partials are the two samples' products and their sum: 6.3 MB.
    volume, weight = _meta(2, 256, 16, 16, 16), _meta(256, 256, 2, 2, 2)
    a = conv_transpose_args("conv_transpose3d", 3, volume, weight, None, 2, 0, 0, 1, 1)
    assert ops._split_k(2, 1, 256, 2048, 16 ** 3) == (1, 16 ** 3)
    assert ops._weight_grad_partials(2, 1, 256, 2048, 16 ** 3, False) == 3 * 256 * 2048
    nbytes = ops._GraphedBackward(256 * 8 * 2 * 16 ** 3).graph_bytes(
        volume.new_empty(a.output_shape), volume, weight, a)
    assert nbytes < gemmconv.get_graph_memory_limit()
    backward = gemmconv.explain(volume, weight, stride=2).backward
    assert f"launched as one CUDA graph from its second call ({nbytes / 1e6:,.1f} MB" in backward


def test_explain_checks_arguments_as_the_call_does():
    with pytest.raises(ConvArgumentError, match="divisible"):
        gemmconv.explain(_meta(1, 6, 4, 4), _meta(6, 2, 3, 3), groups=4)
