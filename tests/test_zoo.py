"""The model zoo: its networks as their papers size them, gemmconv.convert on each of them
against torch in float64 (NCHW and channels_last, forward and gradients), and the model
benchmark's CPU run."""
import copy

import pytest
import torch

import gemmconv
from gemmconv import __main__ as cli
from gemmconv import bench, zoo
from helpers import rel_error

# Parameters as the papers (and their reference implementations) count them.
PAPER_PARAMETERS = {"dcgan": 3.5767e6, "unet2d": 31.04e6, "hifigan": 13.93e6}


@pytest.mark.parametrize("name", PAPER_PARAMETERS)
def test_full_size_models_have_their_papers_parameter_counts(name):
    model = zoo.by_name([name])[0].build(False)
    count = sum(p.numel() for p in model.parameters())
    assert abs(count / PAPER_PARAMETERS[name] - 1) < 0.002, count


def test_the_zoo_covers_the_architectures_the_issue_names():
    layers = {m.name: [l for l in m.build(True).modules()
                       if isinstance(l, torch.nn.modules.conv._ConvTransposeNd)] for m in zoo.ZOO}
    assert len(zoo.ZOO) >= 6 and all(layers.values())
    assert any(l.groups == l.in_channels > 1 for l in layers["depthwise"])
    assert layers["fcn32s"][0].kernel_size == (64, 64) and layers["fcn32s"][0].stride == (32, 32)
    assert {l.stride for l in layers["hifigan"]} == {(8,), (2,)}
    assert all(isinstance(l, torch.nn.ConvTranspose3d) for l in layers["unet3d"])


def test_reduced_3d_unet_keeps_its_bottleneck_clear_of_torchs_cpu_bfloat16_bug():
    """torch 2.13's CPU bfloat16 conv3d weight gradient reads uninitialized memory on a 2x2x2
    grid of 32 -> 64 channels (errors of 1e35 that came and went with what the allocator
    held), which the reduced 3-D U-Net's bottleneck (its input over 2^3) hit at 16^3."""
    assert min(zoo.by_name(["unet3d"])[0].input_shape(True)[2:]) // 8 >= 3


@pytest.mark.parametrize("layout", ["NCHW", "channels_last"])
@pytest.mark.parametrize("entry", zoo.ZOO, ids=lambda m: m.name)
def test_converted_models_match_torch_in_float64(entry, layout):
    """Every layer gemmconv has swapped in: the output, the input's gradient and every
    parameter's as torch computes them, in float64. (The parameters' gradients are compared
    together: a convolution's bias before a BatchNorm has a gradient of rounding errors.)"""
    torch.manual_seed(0)
    model = entry.build(True).double().train()
    x = entry.input(True, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    if layout == "channels_last":
        if entry.spatial_dims == 1:
            pytest.skip("no channels_last for 1-D")
        fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        model, x = model.to(memory_format=fmt), x.contiguous(memory_format=fmt)
    ours = gemmconv.convert(copy.deepcopy(model), types=tuple(gemmconv.nn.SWAPS))
    assert any(type(m).__module__ == "gemmconv.nn" for m in ours.modules())
    results = []
    for net in (model, ours):
        xi = x.clone().requires_grad_()
        out = net(xi)
        grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(6), dtype=out.dtype)
        grad_x, *grad_params = torch.autograd.grad(out, [xi, *net.parameters()], grad)
        results.append([out, grad_x, torch.cat([g.flatten() for g in grad_params])])
    for mine, theirs in zip(*reversed(results)):
        assert rel_error(mine, theirs) < 1e-10


def test_model_benchmark_row_on_the_cpu():
    entry = zoo.by_name(["dcgan"])[0]
    row = bench.measure_model(entry, True, torch.device("cpu"), "float32", "channels_last",
                              "train", repeats=1)
    assert (row.model, row.mode, row.precision, row.layout) == ("dcgan", "train", "float32",
                                                                "channels_last")
    assert row.chosen == f"{len(row.reports['chosen'].swapped)}/5"
    assert row.chosen_all.endswith("/5")
    assert all(t > 0 for t in (row.torch_ms, row.every_ms, row.chosen_ms, row.chosen_all_ms))
    # float32 on the CPU: every variant as close to float64 as torch itself.
    assert max(row.every_error, row.chosen_error, row.chosen_all_error) < 1e-4
    assert row.torch_error < 1e-4
    # Paired speedups of every variant, a copy of torch's model among them.
    assert set(row.speedups) == {"torch", "copy", "every", "chosen", "chosen_all"}
    assert row.speedup("torch") == 1.0 and all(s > 0 for s in row.speedups.values())


class _AtenCalls(torch.utils._python_dispatch.TorchDispatchMode):
    """The names of the aten ops run inside it."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("layout", ["NCHW", "channels_last"])
@pytest.mark.parametrize("precision", ["float32", "bf16-autocast"])
def test_free_layers_launch_nothing_and_give_torchs_shapes(precision, layout):
    entry = zoo.by_name(["dcgan"])[0]   # (its only convolutions are transposed)
    model, x, cast, grad_mode, fmt = bench.model_setup(entry, True, torch.device("cpu"),
                                                       precision, layout, "train")
    free = copy.deepcopy(model)
    with cast, grad_mode:
        bench.free_layers(free, x)
        want, got = model(x), free(x)
        with _AtenCalls() as calls:
            again = free(x)
            grads = torch.autograd.grad(again, list(free.parameters()), torch.randn_like(again))
    layers = [m for m in free.modules() if isinstance(m, torch.nn.ConvTranspose2d)]
    assert layers and all(type(m).__name__ == "FreeConvTranspose2d" for m in layers)
    assert (got.shape, got.dtype, got.stride()) == (want.shape, want.dtype, want.stride())
    assert not any("conv" in name for name in calls.names)   # the other layers still run
    assert "native_batch_norm" in " ".join(calls.names) or "batch_norm" in " ".join(calls.names)
    assert [g.shape for g in grads] == [p.shape for p in model.parameters()]
    # Each call hands out the one output drawn when the layer was made free.
    last = layers[-1]
    outs = []
    hook = last.register_forward_hook(lambda m, args, out: outs.append(out.data_ptr()))
    with cast, grad_mode:
        free(x), free(x)
    hook.remove()
    assert outs[0] == outs[1] == last._recorded[0].data_ptr()


def test_model_benchmark_row_with_its_bound():
    entry = zoo.by_name(["dcgan"])[0]
    row = bench.measure_model(entry, True, torch.device("cpu"), "float32", "NCHW", "forward",
                              repeats=1, bound=True)
    assert row.free_ms > 0 and row.speedup("free") > 0
    assert bench.measure_model(entry, True, torch.device("cpu"), "float32", "NCHW", "forward",
                               repeats=1).free_ms is None


def test_model_configurations():
    hifigan, unet3d = zoo.by_name(["hifigan"])[0], zoo.by_name(["unet3d"])[0]
    assert {l for _, l, _ in bench.model_configs(hifigan)} == {"NCHW"}
    assert len(bench.model_configs(unet3d)) == 8


def test_cli_models_prints_the_table_and_the_layers(capsys, tmp_path):
    assert cli.main(["bench", "--models", "--model", "depthwise", "--layers", "--repeats", "1",
                     "--bound", "--png", str(tmp_path / "zoo.png"),
                     "--json", str(tmp_path / "zoo.json")]) == 0
    out = capsys.readouterr().out
    cuda = torch.cuda.is_available()
    where = torch.cuda.get_device_name() if cuda else "CPU, reduced sizes"
    assert f"model zoo on {where}" in out
    rows = [line for line in out.splitlines() if line.startswith("depthwise ") and
            not line.endswith(":")]
    assert len(rows) == 8
    assert {tuple(r.split()[1:4]) for r in rows} == {
        (m, p, l) for m in ("forward", "train") for p in ("float32", "bf16-autocast")
        for l in ("NCHW", "channels_last")}
    assert "convert(model, sample=x): geometric mean" in out
    assert "a copy of torch's model (the measurement's error): geometric mean" in out
    device = "cuda:0" if cuda else "cpu"
    assert out.count(f"gemmconv.convert on {device}") == 16      # two reports per row
    assert "ConvTranspose2d(" in out and "route" in out
    assert (tmp_path / "zoo.json").read_text().count('"model": "depthwise"') == 8
    assert all(r.endswith("x") and r.split()[-2].replace(".", "").isdigit() for r in rows)
    assert "bound: the transposed convolutions free: geometric mean" in out


@pytest.mark.parametrize("kink", [torch.nn.ReLU(True), torch.nn.LeakyReLU(0.2), torch.nn.ReLU6()],
                         ids=lambda m: type(m).__name__)
def test_errors_are_taken_on_the_sides_of_the_kinks_a_run_took(kink):
    """bench._Branches: the sides of an activation's kinks a run took, and a float64 model
    made to take them. An input a float32 run rounds across a kink gets the gradient of the
    side it took; measured against that side's float64 gradient, not the other's."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4, dtype=torch.float64), kink)
    x = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    bound = 6.0 if isinstance(kink, torch.nn.ReLU6) else 0.0
    with torch.no_grad():   # one input just below the kink: the float64 run takes the flat side
        model[0].bias.add_(bound - 1e-9 - model[0](x)[0, 0])
    with bench._Branches(model) as natural:
        model(x)
    flipped = [(a.clone(), b.clone()) for a, b in natural.taken]
    if bound:   # ReLU6 at its upper kink: below it, not clamped
        flipped[0][1][0, 0] = ~flipped[0][1][0, 0]
    else:
        flipped[0][0][0, 0] = ~flipped[0][0][0, 0]
    double = copy.deepcopy(model)
    double[1].inplace = False
    with bench._Branches(double, forced=flipped) as forced:
        out = double(x)
    assert not forced.same_as(natural)
    # Below zero, (Leaky)ReLU's flat side, forced onto the linear one; below 6, ReLU6's
    # linear side, forced onto the clamp.
    natural_slope = 1.0 if bound else getattr(kink, "negative_slope", 0.0)
    forced_slope = 0.0 if bound else 1.0
    assert torch.autograd.grad(out[0, 0], double[0].bias)[0][0] == forced_slope
    with bench._Branches(double, forced=natural.taken):
        out = double(x)
    assert torch.autograd.grad(out[0, 0], double[0].bias)[0][0] == natural_slope
