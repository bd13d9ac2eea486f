"""Timing torch against gemmconv: the timer every benchmark shares, and the layer-by-layer
measurement that :func:`gemmconv.convert` decides by when it is given a sample.

``choose(model, sample, types)`` runs the model once on the sample to learn the input each
matching layer really gets, then times each such layer on fresh random inputs of that
shape, dtype, device and memory format, as torch's class and as gemmconv's (forward, plus
backward where the model is in training mode), and gives each layer the class that was
faster (by the paired speedup of :func:`timed`). Last it times the whole model with
torch's classes throughout, with those choices, and with gemmconv's throughout, and keeps
the fastest: a layer's time alone need not be its time among its neighbours (a call bound
by host time alone can hide behind the GPU work queued before it). The model's
parameters, gradients and buffers are left as they were.
"""
from __future__ import annotations

import bisect
import contextlib
import dataclasses
import statistics
import time
from typing import Callable, Iterator, Optional, Sequence, Union

import torch

from . import channels_last, depthwise, fused
from . import nn as gnn
from . import ops
from .shapes import conv_args, conv_transpose_args

Sample = Union[torch.Tensor, Sequence[torch.Tensor]]


# Back to back (see timers), a timed sample lasts at least this long: shorter calls are
# timed this many milliseconds' worth in a row and divided. Timed one by one from an idle
# GPU, a call's host work before its first kernel adds to it in full, and sub-millisecond
# models spread by up to 15% between two runs of one and the same model (H200, the model
# zoo's DCGAN); in a row, each call's host work overlaps the GPU's work on the one before,
# as in a training loop. Deep copies of the zoo's small DCGAN on the CPU timed within 1.2%
# of each other at 10 ms a sample, within 36% at 2 ms; on an H100 its host-bound steps
# spread by 7-11% at either (slow phases of the host longer than a sample;
# benches/copies_probe.py, session 39).
MIN_SAMPLE_MS = 10.0


def sample_order(count: int, repeats: int) -> list[int]:
    """The order in which :func:`timers` takes the samples of ``count`` calls: each call
    at least ``repeats`` times, and each call right after each other call equally often,
    from one sample to the next. A call can leave the host or the GPU slower for the next
    one (its code in the host's caches, its blocks in the allocator); in plain rotation
    one and the same call would always follow it and alone pay for that. The order is an
    Euler circuit through every ordered pair of calls (each call ``count - 1`` times),
    repeated."""
    if count == 1:
        return [0] * repeats
    unused = {a: [b for b in range(count) if b != a] for a in range(count)}
    stack, circuit = [0], []
    while stack:   # Hierholzer's algorithm on the complete directed graph
        if unused[stack[-1]]:
            stack.append(unused[stack[-1]].pop())
        else:
            circuit.append(stack.pop())
    cycle = circuit[:0:-1]   # closed: its last call is its first, taken once
    return cycle * -(-repeats // (count - 1))


def samples(device: torch.device, fns: dict, repeats: int, warmup: int = 2,
            back_to_back: bool = False) -> list[tuple[object, float]]:
    """``(key, milliseconds a call)`` of each sample of the calls ``fns`` (a dict), in the
    order taken, after ``warmup`` calls of each: CUDA events on a GPU, the wall clock on
    the CPU. The calls are timed in turns (:func:`sample_order`), so that drift in clocks,
    caches and the allocator falls on all of them alike (timed one after the other, two
    runs of one and the same model differed by 10% on the H200). A sample is one call
    from an idle GPU, or with ``back_to_back`` the steady state of a loop of them: one
    untimed call, then as many calls in a row as fill MIN_SAMPLE_MS (from the warmup's
    last call)."""
    cuda = device.type == "cuda"

    def sample(fn: Callable[[], object], calls: int) -> float:
        if back_to_back:
            # A sample that follows another call's finds the host's caches holding that
            # call's code: a copy of torch's model timed right after ours averaged 0.966x
            # against 1.011x for a second copy timed after the first (DCGAN, VAE decoder;
            # benches/NOTES.md, session 27). The call before the start warms them, and keeps
            # the GPU busy when the clock starts, as in a loop.
            fn()
        if cuda:
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / calls
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t0) * 1e3 / calls

    if cuda:
        torch.cuda.synchronize(device)
    calls = {}
    for key, fn in fns.items():
        for _ in range(max(warmup - 1, 0)):
            fn()
        estimate = sample(fn, 1) if warmup else MIN_SAMPLE_MS
        calls[key] = max(1, min(1000, int(MIN_SAMPLE_MS / max(estimate, 1e-3)))) \
            if back_to_back else 1
    keys = list(fns)
    return [(keys[i], sample(fns[keys[i]], calls[keys[i]]))
            for i in sample_order(len(keys), repeats)]


def _medians(taken: list[tuple[object, float]], keys) -> dict:
    times: dict = {key: [] for key in keys}
    for key, ms in taken:
        times[key].append(ms)
    return {key: statistics.median(t) for key, t in times.items()}


def timers(device: torch.device, fns: dict, repeats: int, warmup: int = 2,
           back_to_back: bool = False) -> dict:
    """Median milliseconds a call of each of ``fns`` (a dict of calls), of the
    :func:`samples` taken in turns."""
    return _medians(samples(device, fns, repeats, warmup, back_to_back), fns)


def speedups(taken: list[tuple[object, float]], reference: object) -> dict:
    """Each key's speedup over ``reference`` from :func:`samples` ``taken``: the median,
    over the key's samples, of the reference's time at that moment (the mean of its
    nearest samples before and after) over the sample's. Slow phases of the host that
    last several samples then fall on both sides of each ratio, where they would move
    one median of independent medians; the reference's own speedup is 1."""
    at = [i for i, (key, _) in enumerate(taken) if key == reference]
    if not at:
        raise ValueError(f"speedups: no sample of the reference {reference!r}")
    ratios: dict = {}
    for i, (key, ms) in enumerate(taken):
        if key == reference:
            continue
        after = bisect.bisect(at, i)   # the reference's samples either side of sample i
        near = [taken[j][1] for j in at[max(after - 1, 0):after + 1]]
        ratios.setdefault(key, []).append(statistics.fmean(near) / ms)
    return {reference: 1.0, **{key: statistics.median(r) for key, r in ratios.items()}}


@dataclasses.dataclass(frozen=True)
class Timed:
    """Calls timed in turns against one of them: each one's median milliseconds a call
    (``ms``) and its paired speedup over the reference (``speedup``, :func:`speedups`)."""
    ms: dict
    speedup: dict


def timed(device: torch.device, fns: dict, repeats: int, reference: object,
          back_to_back: bool = True) -> Timed:
    """The calls ``fns`` timed in turns (:func:`samples`; back to back unless
    ``back_to_back`` is False), against ``fns[reference]``. On a host-bound model the
    samples of one call spread by 6-15%, and neighbouring samples move together
    (correlation 0.5-0.7 a sample apart, H100, benches/NOTES.md session 48): the paired
    speedup cancels what the neighbours share."""
    taken = samples(device, fns, repeats, back_to_back=back_to_back)
    speedup = speedups(taken, reference)
    return Timed(_medians(taken, fns), {key: speedup[key] for key in fns})


def timer(device: torch.device, fn: Callable[[], object], repeats: int, warmup: int = 2) -> float:
    """Median milliseconds of ``fn`` (see timers)."""
    return timers(device, {0: fn}, repeats, warmup)[0]


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """What a layer was called with, but for the values: the input's shape, dtype, device,
    memory format and whether it required grad, and the call's keyword arguments."""
    shape: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    channels_last: bool
    requires_grad: bool
    kwargs: tuple

    @staticmethod
    def of(x: torch.Tensor, kwargs: dict) -> "InputSpec":
        return InputSpec(tuple(x.shape), x.dtype, x.device, channels_last.suggested(x),
                         x.requires_grad, tuple(kwargs.items()))

    def draw(self) -> torch.Tensor:
        """A fresh standard-normal input of this spec."""
        x = torch.randn(self.shape, dtype=self.dtype, device=self.device)
        if self.channels_last:
            x = x.contiguous(memory_format=channels_last.memory_format(x.dim()))
        return x.requires_grad_(self.requires_grad)


@dataclasses.dataclass
class LayerTiming:
    """One layer of a model, as :func:`choose` measured it."""
    name: str            # the module's name in the model
    layer: str           # its torch.nn class and arguments
    input_shape: tuple[int, ...]
    torch_ms: float      # median ms a call
    gemmconv_ms: float
    speedup: float       # gemmconv's over torch's, paired (see timed)
    route: str           # what gemmconv runs for it
    swapped: bool        # whether it now runs on gemmconv


@dataclasses.dataclass
class ConversionReport:
    """What ``convert(model, sample=...)`` measured and decided, a row per layer; ``str``
    gives it as a table. ``model`` is the converted model itself."""
    model: torch.nn.Module
    layers: list[LayerTiming]
    backward: bool
    device: str
    # The whole model's times by classes: torch's throughout ("torch"), the layers' choices
    # ("chosen", where they differ from both others) and gemmconv's throughout ("every"),
    # and their paired speedups over torch's; which of those the model kept; and whether
    # the layers' choices were dropped for it.
    model_ms: dict = dataclasses.field(default_factory=dict)
    model_speedup: dict = dataclasses.field(default_factory=dict)
    kept: str = "chosen"
    reverted: bool = False

    @property
    def swapped(self) -> list[LayerTiming]:
        return [t for t in self.layers if t.swapped]

    def __str__(self) -> str:
        mode = "forward + backward" if self.backward else "forward"
        head = (f"{'layer':<24} {'input':<24} {'torch ms':>9} {'gemmconv ms':>12} {'speedup':>8}  "
                f"{'runs on':<9} {'route':<32} module")
        lines = [f"gemmconv.convert on {self.device}, {mode}: {len(self.swapped)} of "
                 f"{len(self.layers)} layers swapped", head, "-" * len(head)]
        for t in self.layers:
            lines.append(f"{t.name:<24} {str(t.input_shape):<24} {t.torch_ms:9.3f} "
                         f"{t.gemmconv_ms:12.3f} {t.speedup:7.2f}x  "
                         f"{'gemmconv' if t.swapped else 'torch':<9} {t.route:<32} {t.layer}")
        if self.model_ms:
            names = {"torch": "torch's layers", "chosen": "the faster layers swapped",
                     "every": "every layer swapped"}
            lines.append("whole model: " + ", ".join(
                f"{ms:.3f} ms with {names[k]}" + (
                    f" ({self.model_speedup[k]:.2f}x)" if k != "torch" else "")
                for k, ms in self.model_ms.items())
                + f"; kept: {names[self.kept]}" + (
                    f" (none faster by {MODEL_MARGIN:.0%})" if self.kept == "torch" and
                    max(self.model_speedup.values()) > 1 else ""))
        return "\n".join(lines)


def torch_class(module: torch.nn.Module) -> Optional[type]:
    """The torch.nn class that ``module`` is or that its gemmconv class stands in for; None
    for any other module."""
    kind = type(module)
    if kind in gnn.SWAPS:
        return kind
    return next((t for t, g in gnn.SWAPS.items() if g is kind), None)


def first_calls(model: torch.nn.Module, sample: Sample, types: tuple[type, ...],
                keep: Callable[[torch.nn.Module, tuple, dict, object], object]) -> list[tuple]:
    """``(name, module, keep(module, args, kwargs, output))`` for each module of ``model``
    whose torch class is in ``types`` and that runs on ``sample``, of its first call, in
    the order they ran. The model runs in eval mode (so that no BatchNorm statistics move)
    with gradients as it would train, and every module's mode is put back."""
    found: dict[torch.nn.Module, tuple] = {}
    hooks = []
    for name, module in model.named_modules():
        if torch_class(module) in types:
            def record(mod, args, kwargs, output, name=name):
                if mod not in found:
                    found[mod] = (name, mod, keep(mod, args, kwargs, output))
            hooks.append(module.register_forward_hook(record, with_kwargs=True))
    modes = {m: m.training for m in model.modules()}
    try:
        model.eval()
        with torch.set_grad_enabled(modes[model] and torch.is_grad_enabled()):
            model(*([sample] if isinstance(sample, torch.Tensor) else sample))
    finally:
        for h in hooks:
            h.remove()
        for m, training in modes.items():
            m.training = training
    return list(found.values())


def layer_inputs(model: torch.nn.Module, sample: Sample,
                 types: tuple[type, ...]) -> list[tuple[str, torch.nn.Module, InputSpec]]:
    """Each module of ``model`` whose torch class is in ``types`` and that runs on
    ``sample``, with the input of its first call, in the order they ran (see first_calls)."""
    return first_calls(model, sample, types,
                       lambda module, args, kwargs, output: InputSpec.of(args[0], kwargs))


@contextlib.contextmanager
def _as_classes(classes: dict) -> Iterator[None]:
    """Gives each module of ``classes`` (module: class) its class for the block."""
    before = {module: module.__class__ for module in classes}
    for module, cls in classes.items():
        module.__class__ = cls
    try:
        yield
    finally:
        for module, cls in before.items():
            module.__class__ = cls


def _layer_step(module: torch.nn.Module, cls: type, spec: InputSpec,
                backward: bool) -> Callable[[], object]:
    """A call of ``module`` as class ``cls`` on a fresh input of ``spec``, and with
    ``backward`` the gradients of the input (where it required grad) and parameters, taken
    without touching the parameters' ``.grad``."""
    x = spec.draw()
    kwargs = dict(spec.kwargs)
    leaves = ([x] if spec.requires_grad else []) + [p for p in module.parameters() if p.requires_grad]
    grad: list[torch.Tensor] = []

    def step():
        with _as_classes({module: cls}):
            out = module.forward(x, **kwargs)
            if backward and leaves:
                if not grad:
                    grad.append(torch.randn_like(out))
                return torch.autograd.grad(out, leaves, grad[0])
        return out
    return step


def _model_step(model: torch.nn.Module, sample: Sample, classes: dict,
                backward: bool) -> Callable[[], object]:
    """A call of ``model`` on ``sample`` with its modules of ``classes`` given those classes,
    and with ``backward`` the gradients of its parameters (as _layer_step's)."""
    args = [sample] if isinstance(sample, torch.Tensor) else list(sample)
    params = [p for p in model.parameters() if p.requires_grad]
    grads: list[torch.Tensor] = []

    def step():
        with _as_classes(classes):
            outs = [t for t in torch.utils._pytree.tree_leaves(model(*args))
                    if isinstance(t, torch.Tensor) and t.requires_grad]
            if backward and params and outs:
                if not grads:
                    grads.extend(torch.randn_like(t) for t in outs)
                return torch.autograd.grad(outs, params, grads, allow_unused=True)
        return outs
    return step


def route(module: torch.nn.Module, cls: type, spec: InputSpec) -> str:
    """What gemmconv runs for ``module`` of torch class ``cls`` on input ``spec``."""
    if issubclass(cls, torch.nn.modules.conv._ConvTransposeNd):
        nd, weight = len(module.kernel_size), module.weight
        # The input's shape is all the route depends on: one element, broadcast.
        x = torch.empty_strided(spec.shape, (0,) * len(spec.shape), dtype=weight.dtype,
                                device=weight.device)
        output_padding = module._output_padding(x, dict(spec.kwargs).get("output_size"),
                                                module.stride, module.padding,
                                                module.kernel_size, nd, module.dilation)
        a = conv_transpose_args(f"conv_transpose{nd}d", nd, x, weight, module.bias,
                                module.stride, module.padding, output_padding, module.groups,
                                module.dilation)
        interleaved = spec.channels_last or channels_last.suggested(weight)
        return ops.describe_route(a, interleaved,
                                  x.is_cuda and fused.unavailable(a, x, weight, interleaved) is None,
                                  x.is_cuda and depthwise.takes(a, x, weight), x.element_size())
    if issubclass(cls, torch.nn.modules.conv._ConvNd):
        return ("channels_last: " if spec.channels_last else "") + \
            (ops.FUSED_ROUTE if _conv_on_chip(module, spec) else "im2col, GEMM")
    return "col2im" if cls is torch.nn.Fold else "im2col"


def _conv_on_chip(module: torch.nn.Module, spec: InputSpec) -> bool:
    """Whether a convolution module's forward on input ``spec`` takes the fused kernel
    (fused.convolution_takes: on a CUDA device, or meta). A padding mode other than zeros
    pads the input, then convolves it unpadded: the same output, so the same columns."""
    nd, weight = len(module.kernel_size), module.weight
    x = torch.empty_strided(spec.shape, (0,) * len(spec.shape), dtype=weight.dtype,
                            device=weight.device)
    a = conv_args(f"conv{nd}d", nd, x, weight, module.bias, module.stride, module.padding,
                  module.dilation, module.groups)
    return fused.convolution_takes(a, x, weight)


# Whole-model times of one and the same model spread by up to 4% between turns of one
# process where its steps are bound by host time (session 35's zoo, H100: 0.93-1.04x for
# models with nothing swapped; paired, three deep copies of torch's model read 0.98-1.03x,
# session 48). A model keeps torch's layers unless another choice beats them by more than
# this fraction.
MODEL_MARGIN = 0.03


def choose(model: torch.nn.Module, sample: Sample, types: tuple[type, ...],
           repeats: int = 10) -> ConversionReport:
    """Gives each module of ``model`` whose torch class is in ``types`` the faster of torch's
    class and gemmconv's, as measured on the inputs ``sample`` gives it (see the module
    docs), in place; then times the whole model on ``sample`` with those choices and with
    torch's classes throughout and with gemmconv's throughout, and keeps the fastest of the
    three, torch's unless another is faster by MODEL_MARGIN (a layer's time alone is not its
    time among its neighbours). "Faster" is by the paired speedup (:func:`timed`). Returns
    the report."""
    backward = model.training and torch.is_grad_enabled()
    rows, torch_classes, chosen = [], {}, {}
    for name, module, spec in layer_inputs(model, sample, types):
        cls = torch_class(module)
        ours = gnn.SWAPS[cls]
        t = timed(spec.device, {kind: _layer_step(module, kind, spec, backward)
                                for kind in (cls, ours)}, repeats, cls)
        torch_classes[module] = cls
        chosen[module] = ours if t.speedup[ours] > 1 else cls
        rows.append(LayerTiming(name, f"{cls.__name__}({module.extra_repr()})", spec.shape,
                                t.ms[cls], t.ms[ours], t.speedup[ours], route(module, cls, spec),
                                chosen[module] is ours))
    first = sample if isinstance(sample, torch.Tensor) else sample[0]
    report = ConversionReport(model, rows, backward, str(first.device))
    every = {module: gnn.SWAPS[cls] for module, cls in torch_classes.items()}
    candidates = {"torch": torch_classes, "chosen": chosen, "every": every}
    if chosen in (torch_classes, every):
        del candidates["chosen"]
    if rows:
        # Running the model moves BatchNorm statistics: they are put back afterwards.
        buffers = {b: b.clone() for b in model.buffers()}
        try:
            with torch.set_grad_enabled(backward):
                t = timed(first.device, {key: _model_step(model, sample, classes, backward)
                                         for key, classes in candidates.items()},
                          repeats, "torch")
        finally:
            with torch.no_grad():
                for b, value in buffers.items():
                    b.copy_(value)
        report.model_ms, report.model_speedup = t.ms, t.speedup
        fastest = max(t.speedup, key=t.speedup.get)
        report.kept = fastest if t.speedup[fastest] > 1 / (1 - MODEL_MARGIN) else "torch"
        report.reverted = candidates[report.kept] != chosen
        chosen = candidates[report.kept]
        for row, module in zip(rows, torch_classes):
            row.swapped = chosen[module] is not torch_classes[module]
    for module, cls in chosen.items():
        module.__class__ = cls
    return report
