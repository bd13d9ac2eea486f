"""gemmconv.convert with a sample: what it measures, what it decides, what it reports, and
what it leaves alone."""
import collections
import copy
import time

import pytest
import torch

import gemmconv
from gemmconv import fused, measure, ops, zoo
from gemmconv.cases import BENCH
from helpers import case_args, rel_error


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1),
        torch.nn.BatchNorm2d(6), torch.nn.ReLU(),
        torch.nn.Conv2d(6, 6, 3, padding=1),
        torch.nn.ConvTranspose2d(6, 3, 4, stride=2, padding=1, bias=False),
    ).double()


class FakeTimer:
    """Stands in for measure.samples: runs each timed call once, keeps what it returned, and
    answers one sample of the next of the given times for each, in the calls' order."""

    def __init__(self, times):
        self.times, self.results = list(times), []

    def __call__(self, device, fns, repeats, warmup=2, back_to_back=False):
        assert back_to_back, "convert times layers and models as loops run them"
        self.results.extend(fn() for fn in fns.values())
        return [(key, self.times.pop(0)) for key in fns]


@pytest.mark.parametrize("training", [False, True])
def test_sample_swaps_exactly_the_layers_that_measured_faster(monkeypatch, training):
    model = _model().train(training)
    statistics = copy.deepcopy(list(model[1].buffers()))
    x = torch.randn(2, 4, 5, 5, dtype=torch.float64)
    # Per layer in the order they run: torch's time, then gemmconv's; then the whole model's
    # with torch's layers, with the faster ones and with gemmconv's throughout.
    fake = FakeTimer([2.0, 1.0, 1.0, 3.0, 4.0, 3.5, 10.0, 9.0, 9.5])
    monkeypatch.setattr(measure, "samples", fake)
    report = gemmconv.convert(model, types=(torch.nn.ConvTranspose2d, torch.nn.Conv2d), sample=x)
    assert report.model is model and report.backward == training
    rows = {r.name: r for r in report.layers}
    assert list(rows) == ["0", "3", "4"]
    assert [(r.torch_ms, r.gemmconv_ms) for r in report.layers] == [(2.0, 1.0), (1.0, 3.0), (4.0, 3.5)]
    assert [r.swapped for r in report.layers] == [True, False, True]
    assert type(model[0]) is gemmconv.nn.ConvTranspose2d
    assert type(model[3]) is torch.nn.Conv2d
    assert type(model[4]) is gemmconv.nn.ConvTranspose2d
    assert [r.name for r in report.swapped] == ["0", "4"]
    assert rows["0"].input_shape == (2, 4, 5, 5) and rows["4"].input_shape == (2, 6, 10, 10)
    assert rows["0"].speedup == 2.0
    # Training: each timed step returned the gradients of the input (where it required
    # grad) and every parameter; eval: the output.
    if training:
        assert [len(r) for r in fake.results[:6]] == [2, 2, 3, 3, 2, 2]   # layer 0's input: no grad
        assert [len(r) for r in fake.results[6:]] == [7, 7, 7]    # the model: every parameter
    else:
        assert all(isinstance(r, torch.Tensor) for r in fake.results[:6])
    assert report.model_ms == {"torch": 10.0, "chosen": 9.0, "every": 9.5}
    assert report.kept == "chosen" and not report.reverted
    # The whole model ran in training mode, and its BatchNorm statistics were put back.
    assert all(torch.equal(a, b) for a, b in zip(model[1].buffers(), statistics))
    text = str(report)
    assert "2 of 3 layers swapped" in text and "whole model: 10.000 ms" in text
    assert "kept: the faster layers swapped" in text
    for r in report.layers:
        assert r.name in text and f"{r.torch_ms:.3f}" in text and f"{r.gemmconv_ms:.3f}" in text


def test_a_swapped_layer_that_loses_goes_back_to_torch(monkeypatch):
    model = gemmconv.convert(_model())
    assert type(model[0]) is gemmconv.nn.ConvTranspose2d
    monkeypatch.setattr(measure, "samples", FakeTimer([1.0, 2.0, 5.0, 1.0, 3.0, 2.0, 2.5]))
    report = gemmconv.convert(model, sample=torch.randn(2, 4, 5, 5, dtype=torch.float64))
    assert [r.swapped for r in report.layers] == [False, True]
    assert type(model[0]) is torch.nn.ConvTranspose2d
    assert type(model[4]) is gemmconv.nn.ConvTranspose2d


def test_choices_that_make_the_whole_model_slower_are_dropped(monkeypatch):
    model = gemmconv.convert(_model())
    fake = FakeTimer([2.0, 1.0, 4.0, 3.0, 5.0, 6.0])   # both layers faster alone, not together
    monkeypatch.setattr(measure, "samples", fake)
    report = gemmconv.convert(model, sample=torch.randn(2, 4, 5, 5, dtype=torch.float64))
    assert report.reverted and report.kept == "torch"
    assert report.model_ms == {"torch": 5.0, "every": 6.0}    # the choices: every layer
    assert not report.swapped and [r.gemmconv_ms for r in report.layers] == [1.0, 3.0]
    assert type(model[0]) is torch.nn.ConvTranspose2d and type(model[4]) is torch.nn.ConvTranspose2d
    assert "kept: torch's layers" in str(report)


def test_a_model_faster_with_every_layer_swapped_though_none_was_alone(monkeypatch):
    """Layers timed alone can be bound by host time that, among their neighbours, hides
    behind the GPU's queue: the whole model decides."""
    model = _model()
    fake = FakeTimer([1.0, 2.0, 3.0, 4.0, 10.0, 8.0])   # both layers slower alone
    monkeypatch.setattr(measure, "samples", fake)
    report = gemmconv.convert(model, sample=torch.randn(2, 4, 5, 5, dtype=torch.float64))
    assert report.model_ms == {"torch": 10.0, "every": 8.0} and report.kept == "every"
    assert report.reverted and [r.swapped for r in report.layers] == [True, True]
    assert type(model[0]) is gemmconv.nn.ConvTranspose2d
    assert type(model[4]) is gemmconv.nn.ConvTranspose2d
    assert "kept: every layer swapped" in str(report)


@pytest.mark.parametrize("every_ms", [9.8, 9.6])
def test_a_model_keeps_torch_s_layers_unless_another_choice_wins_by_the_margin(monkeypatch,
                                                                                 every_ms):
    """Two timings of one model spread by a few percent: a swap must beat torch's layers by
    more than measure.MODEL_MARGIN (3%) to be kept."""
    model = _model()
    monkeypatch.setattr(measure, "samples", FakeTimer([1.0, 2.0, 3.0, 4.0, 10.0, every_ms]))
    report = gemmconv.convert(model, sample=torch.randn(2, 4, 5, 5, dtype=torch.float64))
    won = every_ms < 10.0 * (1 - measure.MODEL_MARGIN)
    assert report.kept == ("every" if won else "torch")
    assert [r.swapped for r in report.layers] == [won, won]
    assert (type(model[0]) is gemmconv.nn.ConvTranspose2d) == won
    assert ("kept: torch's layers (none faster by 3%)" in str(report)) == (not won)


def test_measuring_leaves_parameters_gradients_buffers_and_modes_alone():
    model = _model().train()
    model[1].eval()                               # a mixed set of modes comes back as it was
    before = copy.deepcopy(model.state_dict())
    x = torch.randn(2, 4, 5, 5, dtype=torch.float64)
    report = gemmconv.convert(model, types=tuple(gemmconv.nn.SWAPS), sample=x, repeats=2)
    assert report.backward and len(report.layers) == 3
    assert all(p.grad is None for p in model.parameters())
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key
    assert [m.training for m in model.modules()] == [True, True, False, True, True, True]
    # Whatever was swapped, the model computes what torch's does.
    reference = _model().train()
    reference[1].eval()
    reference.load_state_dict(before)
    assert rel_error(model(x), reference(x)) < 1e-12


def test_a_sample_of_several_arguments_and_layers_that_do_not_run():
    class TwoInputs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.ConvTranspose1d(2, 3, 4, stride=2)
            self.unused = torch.nn.ConvTranspose1d(2, 3, 4)

        def forward(self, a, b):
            return self.up(a + b)

    model = TwoInputs().double()
    a, b = (torch.randn(1, 2, 7, dtype=torch.float64) for _ in range(2))
    report = gemmconv.convert(model, sample=(a, b), repeats=1)
    assert [r.name for r in report.layers] == ["up"]
    assert type(model.unused) is torch.nn.ConvTranspose1d     # never ran: never measured


def test_output_size_keyword_reaches_the_timed_calls(monkeypatch):
    class Sized(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.ConvTranspose2d(2, 2, 3, stride=2)

        def forward(self, x):
            return self.up(x, output_size=[12, 12])

    fake = FakeTimer([1.0, 2.0, 3.0, 4.0])     # the layer both ways, then the model both ways
    monkeypatch.setattr(measure, "samples", fake)
    with torch.no_grad():
        gemmconv.convert(Sized().eval(), sample=torch.randn(1, 2, 5, 5))
    assert [tuple(r.shape) for r in fake.results[:2]] == [(1, 2, 12, 12)] * 2
    assert len(fake.results) == 4


@pytest.mark.parametrize("channels_last", [False, True])
def test_timed_inputs_keep_the_layers_memory_format(channels_last):
    x = torch.randn(2, 3, 4, 5, 6)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last_3d)
    spec = measure.InputSpec.of(x, {})
    drawn = spec.draw()
    assert drawn.shape == x.shape and drawn.stride() == x.stride()
    assert spec.channels_last == channels_last
    assert not torch.equal(drawn, spec.draw())                 # fresh values each time


def test_convert_without_a_sample_swaps_every_match_and_returns_the_model():
    model = _model()
    assert gemmconv.convert(model) is model
    assert [type(m).__module__ for m in (model[0], model[3], model[4])] == \
        ["gemmconv.nn", "torch.nn.modules.conv", "gemmconv.nn"]


@pytest.mark.parametrize("name,route", [
    ("2d-1024", "rows H, GEMM + col2im"), ("1d-dil3", "im2col W, GEMM"),
    ("2d-strided-grouped", "im2col H, GEMM + col2im"), ("1d-strided", "GEMM + col2im"),
    ("3d-64cube", "rows D, im2col H, GEMM + col2im"), ("3d-96cube", "rows D, GEMM + col2im")])
def test_routes_are_described_as_the_cost_model_picks_them(name, route):
    assert ops.describe_route(_args(name)) == route


def _args(name):
    case = next(c for c in BENCH if c.name == name)
    x = torch.empty_strided((case.batch, case.in_channels, *case.size), (0,) * (2 + case.nd))
    w = torch.empty(case.in_channels, case.out_channels // case.groups, *case.kernel_size)
    return case_args(case, x, w, None)


@pytest.mark.parametrize("name,route", [
    ("2d-1024", "im2col H, GEMM + col2im"), ("2d-stride5-dil2", "GEMM + col2im"),
    ("3d-32to64", "im2col DH, GEMM + col2im"), ("1d-dil3", "im2col W, GEMM"),
    ("3d-96cube", "padded rows W, GEMM + col2im"), ("2d-strided-grouped", "im2col H, GEMM + col2im")])
def test_channels_last_routes_are_described(name, route):
    """On channels_last tensors no row products, but for 3-D calls padded rows where they
    move fewer bytes than the cheapest split of the taps."""
    assert ops.describe_route(_args(name), interleaved=True) == "channels_last: " + route


def test_report_rows_name_the_route():
    model = zoo.fcn32s_head(small=True).double().eval()
    with torch.no_grad():
        report = gemmconv.convert(model, sample=torch.randn(1, 64, 2, 2, dtype=torch.float64),
                                  repeats=1)
    assert [r.route for r in report.layers] == ["GEMM + col2im"]
    assert "ConvTranspose2d(21, 21, kernel_size=(64, 64)" in report.layers[0].layer


@pytest.mark.parametrize("padding_mode", ["zeros", "circular"])
def test_report_rows_name_the_fused_convolution(monkeypatch, padding_mode):
    """A convolution's row names the fused kernel where its forward takes it (meta tensors
    stand for CUDA ones here), im2col and a GEMM under the floor or off the GPU, whatever
    the padding mode."""
    monkeypatch.setattr(fused, "CONVOLUTION_MIN_COLUMNS", 16 * 64 * 64 * 9)
    conv = torch.nn.Conv2d(64, 64, 3, padding=1, padding_mode=padding_mode,
                           device="meta", dtype=torch.bfloat16)

    def route(shape, module=conv):
        spec = measure.InputSpec(shape, torch.bfloat16, module.weight.device, False, False, ())
        return measure.route(module, torch.nn.Conv2d, spec)
    assert route((16, 64, 1, 64)) == ops.FUSED_ROUTE
    assert route((16, 64, 1, 63)) == "im2col, GEMM"
    assert route((16, 64, 1, 64), conv.to_empty(device="cpu")) == "im2col, GEMM"


@pytest.mark.parametrize("back_to_back", [False, True])
def test_timers_take_short_calls_back_to_back(back_to_back):
    """Back to back, a sample of a call far shorter than MIN_SAMPLE_MS holds many calls,
    and its time is one call's; one by one, a sample is one call."""
    calls = {"short": 0, "long": 0}

    def short():
        calls["short"] += 1

    def long():
        calls["long"] += 1
        time.sleep(measure.MIN_SAMPLE_MS / 1e3)
    times = measure.timers(torch.device("cpu"), {"short": short, "long": long}, repeats=4,
                           back_to_back=back_to_back)
    # warmup, then one call a sample; back to back, an untimed call ahead of each sample
    assert calls["long"] == (1 + 2 + 4 * 2 if back_to_back else 2 + 4)
    assert calls["short"] > 50 if back_to_back else calls["short"] == 6
    assert times["long"] >= measure.MIN_SAMPLE_MS and times["short"] < measure.MIN_SAMPLE_MS / 10


def test_timers_warm_each_call_before_its_samples():
    """A call that runs slower right after another (the host's caches holding the other's
    code) is timed warm back to back: the untimed call ahead of each sample takes the cold
    start. Two calls alternate (sample_order)."""
    state = {"cold": True}
    order = []

    def cold_after_others():
        order.append("a")
        time.sleep((10 if state["cold"] else 1) * measure.MIN_SAMPLE_MS / 1e3)
        state["cold"] = False

    def other():
        order.append("b")
        time.sleep(measure.MIN_SAMPLE_MS / 1e3)
        state["cold"] = True
    times = measure.timers(torch.device("cpu"), {"a": cold_after_others, "b": other},
                           repeats=4, back_to_back=True)
    assert times["a"] < 2 * measure.MIN_SAMPLE_MS
    # warmup (a call, then an untimed one and one timed), then a sample of each per round
    assert "".join(order) == "aaa" "bbb" + "aabb" * 4


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 6])
def test_sample_order_balances_which_call_follows_which(count):
    """Each call at least ``repeats`` times and as often as any other, and each call right
    after each other call equally often, the order taken as a cycle."""
    order = measure.sample_order(count, 10)
    taken = collections.Counter(order)
    assert set(taken) == set(range(count)) and min(taken.values()) >= 10
    assert len(set(taken.values())) == 1
    follows = collections.Counter(zip(order, order[1:] + order[:1]))
    pairs = {(a, b) for a in range(count) for b in range(count) if a != b}
    assert pairs <= set(follows) and len({follows[p] for p in pairs}) <= 1
    assert all(a != b for a, b in follows if count > 1)


def test_timers_spread_a_calls_aftereffect():
    """A call that leaves the next calls slower (its code in the host's caches, say) must
    not slow down one other call's samples alone: with three calls of one and the same
    work, the two others time alike. In plain rotation (rounds a-b-c, b-c-a, c-a-b) "b"
    followed "a" in two samples of three, and its median paid for "a"."""
    slow = {"left": 0}
    ms = measure.MIN_SAMPLE_MS   # one call a sample, after the untimed one

    def work():
        time.sleep((3 * ms if slow["left"] else ms) / 1e3)
        slow["left"] = max(slow["left"] - 1, 0)

    def a():
        work()
        slow["left"] = 2   # the untimed call and the first timed one of the next sample
    times = measure.timers(torch.device("cpu"), {"a": a, "b": work, "c": work}, repeats=6,
                           back_to_back=True)
    assert times["b"] == pytest.approx(times["c"], rel=0.15)


# A host that turns slow from the sixth sample on, under two calls timed in turns: "ours"
# does 0.8 of torch's work, but three of its five samples fall in the slow phase and two
# of torch's do, so the ratio of medians reads 10 / 16.
_PHASED = [("torch", 10.0), ("ours", 8.0), ("torch", 10.0), ("ours", 8.0), ("torch", 10.0),
           ("ours", 16.0), ("torch", 20.0), ("ours", 16.0), ("torch", 20.0), ("ours", 16.0)]


def test_paired_speedups_cancel_a_slow_phase_of_the_host():
    assert measure.speedups(_PHASED, "torch") == {"torch": 1.0, "ours": 1.25}
    assert measure._medians(_PHASED, ["torch", "ours"]) == {"torch": 10.0, "ours": 16.0}
    with pytest.raises(ValueError, match="no sample of the reference 'copy'"):
        measure.speedups(_PHASED, "copy")


def test_layers_are_chosen_by_their_paired_speedup(monkeypatch):
    """The layer's samples against torch's neighbouring ones, not the ratio of two medians
    that a slow phase of the host moved apart."""
    model = _model().eval()
    traces = [[(cls, ms) for (who, ms) in _PHASED for cls in
               [torch.nn.ConvTranspose2d if who == "torch" else gemmconv.nn.ConvTranspose2d]]
              ] * 2 + [[("torch", 10.0), ("every", 10.0)]]

    def fake(device, fns, repeats, warmup=2, back_to_back=False):
        assert set(fns) == {k for k, _ in traces[0]}
        return traces.pop(0)
    monkeypatch.setattr(measure, "samples", fake)
    with torch.no_grad():
        report = gemmconv.convert(model, sample=torch.randn(2, 4, 5, 5, dtype=torch.float64))
    timings = [(r.torch_ms, r.gemmconv_ms, r.speedup) for r in report.layers]
    assert timings == [(10.0, 16.0, 1.25)] * 2
    assert report.model_speedup == {"torch": 1.0, "every": 1.0} and report.kept == "torch"
    assert "1.25x" in str(report) and "(1.00x)" in str(report)
