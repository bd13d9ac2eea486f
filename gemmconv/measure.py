"""Timing torch against gemmconv: the timer every benchmark shares, and the layer-by-layer
measurement that :func:`gemmconv.convert` decides by when it is given a sample.

``choose(model, sample, types)`` runs the model once on the sample to learn the input each
matching layer really gets, then times each such layer on fresh random inputs of that
shape, dtype, device and memory format, as torch's class and as gemmconv's (forward, plus
backward where the model is in training mode), and gives each layer the class that was
faster. The model's parameters, gradients and buffers are left as they were.
"""
from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
from typing import Callable, Iterator, Optional, Sequence, Union

import torch

from . import nn as gnn
from . import ops
from .shapes import conv_transpose_args

Sample = Union[torch.Tensor, Sequence[torch.Tensor]]


def timer(device: torch.device, fn: Callable[[], object], repeats: int, warmup: int = 2) -> float:
    """Median milliseconds of ``fn`` after ``warmup`` calls: CUDA events on a GPU, the wall
    clock on the CPU."""
    for _ in range(warmup):
        fn()
    times = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    else:
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


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
        return InputSpec(tuple(x.shape), x.dtype, x.device, _channels_last(x),
                         x.requires_grad, tuple(kwargs.items()))

    def draw(self) -> torch.Tensor:
        """A fresh standard-normal input of this spec."""
        x = torch.randn(self.shape, dtype=self.dtype, device=self.device)
        if self.channels_last:
            x = x.contiguous(memory_format=_channels_last_format(x.dim()))
        return x.requires_grad_(self.requires_grad)


def _channels_last_format(dim: int) -> torch.memory_format:
    return torch.channels_last if dim == 4 else torch.channels_last_3d


def _channels_last(x: torch.Tensor) -> bool:
    """Whether ``x`` is laid out channels_last (channels_last_3d) rather than contiguous."""
    return x.dim() in (4, 5) and not x.is_contiguous() and \
        x.is_contiguous(memory_format=_channels_last_format(x.dim()))


@dataclasses.dataclass
class LayerTiming:
    """One layer of a model, as :func:`choose` measured it."""
    name: str            # the module's name in the model
    layer: str           # its torch.nn class and arguments
    input_shape: tuple[int, ...]
    torch_ms: float
    gemmconv_ms: float
    route: str           # what gemmconv runs for it
    swapped: bool        # whether it now runs on gemmconv

    @property
    def speedup(self) -> float:
        return self.torch_ms / self.gemmconv_ms


@dataclasses.dataclass
class ConversionReport:
    """What ``convert(model, sample=...)`` measured and decided, a row per layer; ``str``
    gives it as a table. ``model`` is the converted model itself."""
    model: torch.nn.Module
    layers: list[LayerTiming]
    backward: bool
    device: str

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
        return "\n".join(lines)


def torch_class(module: torch.nn.Module) -> Optional[type]:
    """The torch.nn class that ``module`` is or that its gemmconv class stands in for; None
    for any other module."""
    kind = type(module)
    if kind in gnn.SWAPS:
        return kind
    return next((t for t, g in gnn.SWAPS.items() if g is kind), None)


def layer_inputs(model: torch.nn.Module, sample: Sample,
                 types: tuple[type, ...]) -> list[tuple[str, torch.nn.Module, InputSpec]]:
    """Each module of ``model`` whose torch class is in ``types`` and that runs on
    ``sample``, with the input of its first call, in the order they ran. The model runs in
    eval mode (so that no BatchNorm statistics move) with gradients as it would train, and
    every module's mode is put back."""
    found: dict[torch.nn.Module, tuple[str, InputSpec]] = {}
    hooks = []
    for name, module in model.named_modules():
        if torch_class(module) in types:
            def record(mod, args, kwargs, name=name):
                if mod not in found:
                    found[mod] = (name, InputSpec.of(args[0], kwargs))
            hooks.append(module.register_forward_pre_hook(record, with_kwargs=True))
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
    return [(name, module, spec) for module, (name, spec) in found.items()]


@contextlib.contextmanager
def _as_class(module: torch.nn.Module, cls: type) -> Iterator[None]:
    before = module.__class__
    module.__class__ = cls
    try:
        yield
    finally:
        module.__class__ = before


def _step(module: torch.nn.Module, spec: InputSpec, backward: bool) -> Callable[[], object]:
    """A call of ``module`` (as its class is at the time) on a fresh input of ``spec``, and
    with ``backward`` the gradients of the input (where it required grad) and parameters,
    taken without touching the parameters' ``.grad``."""
    x = spec.draw()
    kwargs = dict(spec.kwargs)
    leaves = ([x] if spec.requires_grad else []) + [p for p in module.parameters() if p.requires_grad]
    grad: list[torch.Tensor] = []

    def step():
        out = module.forward(x, **kwargs)
        if backward and leaves:
            if not grad:
                grad.append(torch.randn_like(out))
            return torch.autograd.grad(out, leaves, grad[0])
        return out
    return step


def route(module: torch.nn.Module, cls: type, spec: InputSpec) -> str:
    """What gemmconv runs for ``module`` of torch class ``cls`` on input ``spec``."""
    copy = ", input copied from channels_last" if spec.channels_last else ""
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
        return ops.describe_route(a) + copy
    if issubclass(cls, torch.nn.modules.conv._ConvNd):
        return "im2col, GEMM" + copy
    return "col2im" if cls is torch.nn.Fold else "im2col"


def choose(model: torch.nn.Module, sample: Sample, types: tuple[type, ...],
           repeats: int = 10) -> ConversionReport:
    """Gives each module of ``model`` whose torch class is in ``types`` the faster of torch's
    class and gemmconv's, as measured on the inputs ``sample`` gives it (see the module
    docs), in place; returns the report."""
    backward = model.training and torch.is_grad_enabled()
    rows = []
    for name, module, spec in layer_inputs(model, sample, types):
        cls = torch_class(module)
        times = {}
        for kind in (cls, gnn.SWAPS[cls]):
            with _as_class(module, kind):
                times[kind] = timer(spec.device, _step(module, spec, backward), repeats)
        swapped = times[gnn.SWAPS[cls]] < times[cls]
        module.__class__ = gnn.SWAPS[cls] if swapped else cls
        rows.append(LayerTiming(name, f"{cls.__name__}({module.extra_repr()})", spec.shape,
                                times[cls], times[gnn.SWAPS[cls]], route(module, cls, spec),
                                swapped))
    first = sample if isinstance(sample, torch.Tensor) else sample[0]
    return ConversionReport(model, rows, backward, str(first.device))
