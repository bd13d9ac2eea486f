"""Timing gemmconv against torch on the shared case table: the bench CLI and suite use this.

Each measurement runs torch's ``conv_transpose{nd}d`` and gemmconv's side by side on the same
inputs (``torch.rand``, as the issue specifies), checks both against a float64 reference in
the same run, and reports median times from CUDA events (wall clock on the CPU), peak extra
memory, and the floor: FLOPs over the measured matmul rate, or the bytes that must move
(input, weight and output once each) over the measured copy bandwidth, whichever is larger.
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import math
import statistics
from typing import Callable, NamedTuple, Optional, Sequence

import torch
import torch.nn.functional as F

from . import _cuda, cases, channels_last, graphs, ops
from . import nn as gnn
from .measure import first_calls, samples, speedups, timed, timer
from .shapes import expand

TORCH = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
OURS = {1: ops.conv_transpose1d, 2: ops.conv_transpose2d, 3: ops.conv_transpose3d}
QUICK = ["2d-1024", "2d-strided-grouped", "1d-65536", "3d-64cube", "3d-stride2-grouped"]


@dataclasses.dataclass
class Row:
    case: str
    shapes: str
    torch_ms: float
    ours_ms: float
    torch_error: float
    ours_error: float
    torch_extra_mb: float
    ours_extra_mb: float
    floor_ms: float

    @property
    def speedup(self) -> float:
        return self.torch_ms / self.ours_ms


@dataclasses.dataclass
class Ceilings:
    """The device's measured matmul rate (FLOP/s) and copy bandwidth (bytes/s)."""
    flops: float
    bandwidth: float


def _extra_mb(device: torch.device, fn: Callable[[], object]) -> float:
    """Peak memory a call allocates beyond its own result, in MB (CUDA only): with
    gemmconv's CUDA graphs paused, so that what a kept graph's pool holds for the call
    counts too."""
    if device.type != "cuda":
        return float("nan")
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    with graphs.paused():
        result = fn()
    kept = torch.cuda.memory_allocated(device) - base
    return (torch.cuda.max_memory_allocated(device) - base - kept) / 1e6 if result is not None else 0.0


def ceilings(device: torch.device, dtype: torch.dtype) -> Ceilings:
    """Measures the matmul rate (gemmconv's GEMM layer, current precision) and copy bandwidth."""
    if device.type != "cuda":
        return Ceilings(float("nan"), float("nan"))
    from .gemm import matmul
    n = 8192
    a, b = (torch.rand(1, 1, n, n, device=device, dtype=dtype) for _ in range(2))
    c = torch.empty(1, 1, n, n, device=device, dtype=dtype)
    matmul_ms = timer(device, lambda: matmul(a, b, c), 10)
    src = torch.rand(1 << 28, device=device)                  # 1 GiB
    dst = torch.empty_like(src)
    copy_ms = timer(device, lambda: dst.copy_(src), 20)
    return Ceilings(2 * n**3 / (matmul_ms / 1e3), 2 * (4 << 28) / (copy_ms / 1e3))


class Workload:
    """One case's inputs on a device, a float64 reference, and a runner per implementation."""

    def __init__(self, case: cases.Case, dtype: torch.dtype, device: torch.device,
                 backward: bool, seed: int = 0, interleaved: bool = False):
        """``interleaved``: the input and output gradient channels_last (2-D and 3-D cases)."""
        gen = torch.Generator().manual_seed(seed)
        self.case, self.dtype, self.device, self.backward = case, dtype, device, backward
        self.x, self.w, self.b = case.tensors(dtype, device, gen, distribution=torch.rand)
        layout = (lambda t: t.contiguous(memory_format=channels_last.memory_format(t.dim()))) \
            if interleaved else (lambda t: t)
        self.x = layout(self.x)
        self.leaves = [t.requires_grad_() for t in (self.x, self.w, self.b)
                       if t is not None] if backward else []
        self.shape = (case.batch, case.out_channels, *case.output_size)
        self.grad_out = layout(torch.rand(self.shape, generator=gen, dtype=torch.float64).to(
            device)) if backward else None
        self.refs = reference(case, self.x, self.w, self.b, self.grad_out)

    def runner(self, impl: str) -> Callable[[], list]:
        """A call of ``"torch"`` or ``"gemmconv"`` returning [output, *gradients]."""
        fn = (TORCH if impl == "torch" else OURS)[self.case.nd]
        grad_out = None if self.grad_out is None else self.grad_out.to(self.dtype)

        def run():
            out = fn(self.x, self.w, self.b, **self.case.kwargs)
            return [out, *torch.autograd.grad(out, self.leaves, grad_out)] if self.backward else [out]
        return run

    def error(self, results: list) -> float:
        """Largest ||result - ref|| / ||ref|| over the output and gradients."""
        return max(_rel(r, f) for r, f in zip(results, self.refs))

    def floor_ms(self, ceiling: Ceilings) -> float:
        passes = 3 if self.backward else 1   # backward: two more GEMMs and passes over the data
        moved = sum(t.numel() * t.element_size() for t in (self.x, self.w, self.b) if t is not None)
        moved += math.prod(self.shape) * self.x.element_size()
        return 1e3 * passes * max(self.case.flops / ceiling.flops, moved / ceiling.bandwidth)


def measure(case: cases.Case, dtype: torch.dtype, device: torch.device, backward: bool,
            ceiling: Ceilings, repeats: int = 20, interleaved: bool = False) -> Row:
    """Times torch and gemmconv on one case, checking both against float64; ``interleaved``:
    on channels_last tensors."""
    work = Workload(case, dtype, device, backward, interleaved=interleaved)
    results = {}
    for impl in ("torch", "gemmconv"):
        fn = work.runner(impl)
        results[impl] = (timer(device, fn, repeats), work.error(fn()), _extra_mb(device, fn))
    shapes = f"{tuple(work.x.shape)} k{case.kernel_size}"
    (t_ms, t_err, t_mb), (o_ms, o_err, o_mb) = results["torch"], results["gemmconv"]
    return Row(case.name, shapes, t_ms, o_ms, t_err, o_err, t_mb, o_mb, work.floor_ms(ceiling))


@dataclasses.dataclass
class LayoutRow:
    """One case timed in both memory formats in turns (:func:`measure_layouts`): median
    milliseconds by ``"torch NCHW"``, ``"gemmconv channels_last"`` and so on, each format's
    paired speedup over torch (by ``"NCHW"`` and ``"channels_last"``), and the largest
    error of torch's two calls and of ours against float64."""
    case: str
    shapes: str
    ms: dict
    speedup: dict
    torch_error: float
    ours_error: float

    @property
    def ratio(self) -> float:
        """Our channels_last speedup over our NCHW one (issue 21 asks at least 0.9)."""
        return self.speedup["channels_last"] / self.speedup["NCHW"]


def measure_layouts(case: cases.Case, dtype: torch.dtype, device: torch.device, backward: bool,
                    repeats: int = 20) -> LayoutRow:
    """Times torch and gemmconv on one 2-D or 3-D case on NCHW and on channels_last tensors,
    the four calls in turns (measure.samples, each sample a call from an idle GPU as
    :func:`measure` takes them), each format's speedup paired with torch's samples of that
    format (measure.speedups). Two tables of the same code, one per format, put one case's
    ratio of the two speedups at 0.79 and 1.08 (benches/NOTES.md, session 56): in turns, a
    slow phase falls on both formats."""
    fns, errors = {}, {"torch": [], "gemmconv": []}
    for layout in LAYOUTS:
        work = Workload(case, dtype, device, backward, interleaved=layout == "channels_last")
        for impl in ("torch", "gemmconv"):
            fns[impl, layout] = work.runner(impl)
            errors[impl].append(work.error(fns[impl, layout]()))
    taken = samples(device, fns, repeats)
    ms = {f"{impl} {layout}": statistics.median(t for key, t in taken if key == (impl, layout))
          for impl, layout in fns}
    speedup = {layout: speedups([(key, t) for key, t in taken if key[1] == layout],
                                ("torch", layout))["gemmconv", layout] for layout in LAYOUTS}
    return LayoutRow(case.name, f"{tuple(work.x.shape)} k{case.kernel_size}", ms, speedup,
                     max(errors["torch"]), max(errors["gemmconv"]))


def _rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.detach().double(), ref.detach()
    if not torch.isfinite(out).all():
        return float("inf")
    return float((out - ref).norm() / ref.norm().clamp_min(1e-300))


def reference(case: cases.Case, x, w, b, grad_out: Optional[torch.Tensor] = None):
    """[output] of torch in float64, and with ``grad_out`` the float64 gradients of those of
    x, w, b that require grad (taken on float64 copies, so never rounded to x's dtype)."""
    leaves = [None if t is None else t.detach().double().requires_grad_(t.requires_grad)
              for t in (x, w, b)]
    out = TORCH[case.nd](*leaves, **case.kwargs)
    if grad_out is None:
        return [out.detach()]
    needed = [t for t in leaves if t is not None and t.requires_grad]
    return [out.detach(), *torch.autograd.grad(out, needed, grad_out.double())]


def select(names: Optional[list[str]], full: bool, device: torch.device) -> list[cases.Case]:
    """Cases whose names contain any of ``names`` (from all of them), else the full table
    or the quick subset; shrunk for the CPU."""
    chosen = [c for c in cases.BENCH if any(n in c.name for n in names)] if names else \
        [c for c in cases.BENCH if full or c.name in QUICK]
    return chosen if device.type == "cuda" else [c.scaled(4096) for c in chosen]


def compile_seconds() -> float:
    """Seconds this process has spent compiling CUDA kernels."""
    return _cuda.compile_seconds


# ---------------------------------------------------------------------------------------
# The model zoo (gemmconv.zoo): whole networks, torch against gemmconv.convert.

PRECISIONS = {"float32": None, "bf16-autocast": torch.bfloat16}
LAYOUTS = ("NCHW", "channels_last")
MODES = ("forward", "train")


@dataclasses.dataclass
class ModelRow:
    """One model in one configuration: torch's time, and the times (and largest relative
    errors of the output and parameter gradients against torch's) of the model converted
    three ways: every transposed convolution swapped (``convert(model)``), those that
    measured faster swapped (``convert(model, sample=x)``), and the same among every kind of
    layer gemmconv has (transposed convolutions, convolutions, fold and unfold). Errors are
    relative to the model in float64: the larger of the output's and of all parameter
    gradients' together (so that a near-zero gradient, such as that of a BatchNorm weight,
    does not stand for the rest), torch's beside each variant's."""
    model: str
    mode: str
    precision: str
    layout: str
    torch_ms: float
    every_ms: float
    chosen_ms: float
    chosen_all_ms: float
    torch_error: float
    every_error: float
    chosen_error: float
    chosen_all_error: float
    chosen: str            # swapped of measured layers, "k/n"
    chosen_all: str
    # Each variant's speedup over torch, paired (measure.timed), "copy" among them: a deep
    # copy of torch's model, timed in the same turns, whose speedup is the measurement's
    # own error on this row (torch against itself).
    speedups: dict = dataclasses.field(default_factory=dict)
    reports: dict = dataclasses.field(default_factory=dict, repr=False)   # ConversionReports
    free_ms: Optional[float] = None   # with free_layers: the bound (see measure_model)

    def speedup(self, variant: str) -> float:
        return self.speedups[variant]


def _memory_format(dims: int, layout: str) -> Optional[torch.memory_format]:
    return None if layout == "NCHW" else channels_last.memory_format(dims)


# Piecewise-linear activations. A float32 run may round an input within rounding error of a
# kink to the other side of it; its result is then right for that side, but differs from a
# float64 run that took the other side by far more than rounding (one flipped LeakyReLU input
# of -1.4e-6 moved a VAE decoder's gradients by 1.5e-3: benches/NOTES.md, session 24).
_KINKS = (torch.nn.ReLU, torch.nn.LeakyReLU, torch.nn.Hardtanh)   # ReLU6 is a Hardtanh


class _Branches:
    """``with _Branches(model) as b:`` records, in call order, the sides of their kinks that
    the inputs of ``model``'s activation modules fell on (``b.taken``); with ``forced`` (such a
    record), makes them take those sides instead (modules not in place)."""

    def __init__(self, model: torch.nn.Module, forced: Optional[list] = None):
        self.model, self.forced, self.taken, self.handles = model, forced, [], []

    def __enter__(self) -> "_Branches":
        for m in self.model.modules():
            if isinstance(m, _KINKS):
                self.handles.append(m.register_forward_pre_hook(self._record) if self.forced is None
                                    else m.register_forward_hook(self._force))
        return self

    def __exit__(self, *exc) -> None:
        for h in self.handles:
            h.remove()

    @staticmethod
    def _bounds(m: torch.nn.Module) -> tuple:
        return (m.min_val, m.max_val) if isinstance(m, torch.nn.Hardtanh) else (0.0, math.inf)

    def _record(self, m, args) -> None:
        low, high = self._bounds(m)
        self.taken.append((args[0].detach() > low, args[0].detach() < high))

    def _force(self, m, args, out) -> torch.Tensor:
        above, below = self.forced[len(self.taken)]
        self.taken.append((above, below))
        x, (low, high) = args[0], self._bounds(m)
        if isinstance(m, torch.nn.Hardtanh):
            return torch.where(above, torch.where(below, x, high), low)
        slope = m.negative_slope if isinstance(m, torch.nn.LeakyReLU) else 0.0
        return torch.where(above, x, x * slope)

    def same_as(self, other: "_Branches") -> bool:
        return len(self.taken) == len(other.taken) and all(
            torch.equal(a, c) and torch.equal(b, d)
            for (a, b), (c, d) in zip(self.taken, other.taken))


class _Recorded(torch.autograd.Function):
    """A layer's call that launches nothing: ``apply(input, weight, bias, recorded)`` returns
    ``recorded[0]`` (an output drawn once) and, backward, ``recorded[1:]`` (its input's,
    weight's and bias's gradients, drawn once): the host time of an autograd Function and
    no more."""

    @staticmethod
    def forward(ctx, input, weight, bias, recorded):
        ctx.gradients = recorded[1:]
        return recorded[0].detach()   # a new tensor on the same memory: nothing runs

    @staticmethod
    def backward(ctx, grad_output):
        return (*ctx.gradients, None)


class _Free:
    """A transposed convolution's forward that costs only _Recorded's host time (its
    ``_recorded``: see free_layers)."""

    def forward(self, input: torch.Tensor, output_size=None) -> torch.Tensor:
        return _Recorded.apply(input, self.weight, self.bias, self._recorded)


_FREE = {t: type(f"Free{t.__name__}", (_Free, t), {}) for t in gnn.TRANSPOSED}


def free_layers(model: torch.nn.Module, x: torch.Tensor) -> torch.nn.Module:
    """``model`` (in place) with each transposed convolution made free: its calls return an
    output drawn once, of the shape, dtype and strides its call on ``x`` gave, and backward
    gradients drawn once likewise, with no kernel, copy or allocation. Timed against torch,
    such a model bounds the speedup any implementation of those layers could give the model
    (on the layers' GPU time and on all their host time but a Python autograd Function's).
    ``x`` runs once, under the caller's autocast, as measure.first_calls runs it (a layer
    called more than once hands out what its first call gave)."""
    draw = lambda t: None if t is None else torch.randn_like(t.detach())   # noqa: E731

    def recorded(module, args, kwargs, out):
        return draw(out), draw(args[0]), draw(module.weight), draw(module.bias)
    for _, module, calls in first_calls(model, x, tuple(_FREE), recorded):
        if type(module) in _FREE:   # (torch's class, not gemmconv's)
            module._recorded = calls
            module.__class__ = _FREE[type(module)]
    return model


class ModelSetup(NamedTuple):
    """A zoo model in one configuration (see :func:`model_setup`)."""
    model: torch.nn.Module
    x: torch.Tensor
    cast: object          # torch.autocast, or a null context for float32
    grad_mode: object     # torch.enable_grad() for training, else torch.no_grad()
    memory_format: Optional[torch.memory_format]   # None for NCHW


def model_setup(entry, small: bool, device: torch.device, precision: str, layout: str,
                mode: str) -> ModelSetup:
    """``entry``'s model (a gemmconv.zoo.ZooModel, built under seed 0, in training mode for
    ``mode`` "train") and its input (seed 1) on ``device``, both in ``layout``, with the
    contexts of ``precision`` and ``mode`` its steps run under."""
    import contextlib
    torch.manual_seed(0)
    model = entry.build(small).to(device).train(mode == "train")
    x = entry.input(small, device, generator=torch.Generator().manual_seed(1))
    fmt = _memory_format(x.dim(), layout)
    if fmt is not None:
        model, x = model.to(memory_format=fmt), x.contiguous(memory_format=fmt)
    cast = torch.autocast(device.type, dtype=PRECISIONS[precision]) \
        if PRECISIONS[precision] else contextlib.nullcontext()
    grad_mode = torch.enable_grad() if mode == "train" else torch.no_grad()
    return ModelSetup(model, x, cast, grad_mode, fmt)


def model_step(model: torch.nn.Module, x: torch.Tensor, cast, grad_mode,
               grad: Optional[torch.Tensor]) -> Callable[[], list]:
    """A call of ``model`` on ``x`` under the contexts ``cast`` (autocast or none) and
    ``grad_mode``, returning ``[output]``; with an output gradient ``grad`` (training),
    ``[output, *the gradients of the parameters that require grad]``."""
    params = [p for p in model.parameters() if p.requires_grad]

    def run():
        with cast, grad_mode:
            out = model(x)
        return [out] if grad is None else \
            [out, *torch.autograd.grad(out, params, grad.to(out.dtype))]
    return run


class ModelWorkload:
    """``entry`` (a gemmconv.zoo.ZooModel) on one input in one configuration: ``mode``
    "forward" (eval, no grad) or "train" (forward and the gradients of every parameter),
    float32 or under bf16 autocast, NCHW or channels_last (model and input). ``runners``
    holds a call per variant of ModelRow (torch, every, chosen, chosen_all; with ``bound``
    also free: see free_layers), each returning [output, *parameter gradients]; ``errors``
    their errors against the model in float64 (see ModelRow; none for free, whose results
    are drawn); ``reports`` the conversion reports of the variants with a sample."""

    def __init__(self, entry, small: bool, device: torch.device, precision: str, layout: str,
                 mode: str, repeats: int = 10, bound: bool = False):
        import contextlib
        import copy

        train = mode == "train"
        base, x, autocast, grad_mode, fmt = model_setup(entry, small, device, precision,
                                                        layout, mode)
        models = {"torch": base, "copy": copy.deepcopy(base),
                  "every": gnn.convert(copy.deepcopy(base))}
        self.reports = {}
        with autocast, grad_mode:
            for variant, types in (("chosen", gnn.TRANSPOSED), ("chosen_all", tuple(gnn.SWAPS))):
                models[variant] = copy.deepcopy(base)
                self.reports[variant] = gnn.convert(models[variant], types=types, sample=x,
                                                    repeats=repeats)
            shape = base(x).shape
            free = free_layers(copy.deepcopy(base), x) if bound else None
        grad = torch.randn(shape, generator=torch.Generator().manual_seed(2)).to(device)
        if fmt is not None and grad.dim() == x.dim():
            grad = grad.contiguous(memory_format=fmt)

        def runner(model: torch.nn.Module, x: torch.Tensor = x, cast=autocast) -> Callable[[], list]:
            return model_step(model, x, cast, grad_mode, grad if train else None)

        def error(results: list, reference: list) -> float:
            gradients = lambda rs: torch.cat([r.detach().double().flatten() for r in rs])
            return max(_rel(results[0], reference[0]),
                       _rel(gradients(results[1:]), gradients(reference[1:])) if train else 0.0)

        # Each variant against the model in float64 on the sides of the activations' kinks
        # that the variant's own run took (_KINKS): the float64 run's own where they agree.
        double = copy.deepcopy(base).double()
        for m in double.modules():
            if isinstance(m, _KINKS):
                m.inplace = False
        reference_run = runner(double, x.double(), contextlib.nullcontext())
        with _Branches(double) as natural:
            reference = reference_run()

        def error_of(model: torch.nn.Module, run: Callable[[], list]) -> float:
            with _Branches(model) as taken:
                results = run()
            if taken.same_as(natural):
                return error(results, reference)
            with _Branches(double, forced=taken.taken):
                return error(results, reference_run())
        self.runners = {k: runner(m) for k, m in models.items()}
        self.errors = {k: error_of(models[k], run) for k, run in self.runners.items()
                       if k != "copy"}   # (the copy computes what torch's model does)
        if free is not None:   # (its results are drawn, not computed: no error to take)
            self.runners["free"] = runner(free)


def measure_model(entry, small: bool, device: torch.device, precision: str, layout: str,
                  mode: str, repeats: int = 10, bound: bool = False) -> ModelRow:
    """Times ModelWorkload's variants in turns against torch's model (paired speedups,
    measure.timed), with their errors and reports; with ``bound``, also the model with its
    transposed convolutions free (free_layers), whose speedup over torch no implementation
    of those layers could beat."""
    work = ModelWorkload(entry, small, device, precision, layout, mode, repeats, bound)
    t, errors = timed(device, work.runners, repeats, "torch"), work.errors
    times = t.ms
    swaps = {k: f"{len(r.swapped)}/{len(r.layers)}" for k, r in work.reports.items()}
    return ModelRow(entry.name, mode, precision, layout, times["torch"], times["every"],
                    times["chosen"], times["chosen_all"], errors["torch"], errors["every"],
                    errors["chosen"], errors["chosen_all"], swaps["chosen"],
                    swaps["chosen_all"], t.speedup, work.reports, times.get("free"))


def model_configs(entry, precisions=tuple(PRECISIONS), layouts=LAYOUTS, modes=MODES):
    """(precision, layout, mode) of each configuration the zoo times ``entry`` in:
    channels_last only where the input has 2 or 3 spatial dims."""
    return [(p, l, m) for p in precisions for l in layouts for m in modes
            if l == "NCHW" or entry.spatial_dims in (2, 3)]


_LAYERS = {f"ConvTranspose{nd}d": nd for nd in (1, 2, 3)}


def case_from_layer(layer: str, input_shape: Sequence[int]) -> cases.Case:
    """The case of a layer written as torch.nn constructs it, e.g. ``"ConvTranspose2d(256,
    128, 4, stride=2, padding=1)"`` (``nn.`` or ``torch.nn.`` in front allowed; literal
    arguments only: nothing is evaluated), called on an input of ``input_shape``
    ``(N, C_in, *spatial)``. Raises ValueError naming what is wrong."""
    try:
        tree = ast.parse(layer.strip(), mode="eval").body
    except SyntaxError as error:
        raise ValueError(f"--shape: {layer!r} is not a layer as torch.nn writes it: {error.msg}")
    name = ast.unparse(tree.func).rsplit(".", 1)[-1] if isinstance(tree, ast.Call) else None
    if name not in _LAYERS:
        raise ValueError(f"--shape: expected one of {', '.join(_LAYERS)} called with its "
                         f"arguments, e.g. \"ConvTranspose2d(256, 128, 4, stride=2)\", got {layer!r}")
    try:
        args = [ast.literal_eval(a) for a in tree.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in tree.keywords}
        bound = inspect.signature(getattr(torch.nn, name)).bind(*args, **kwargs)
    except (ValueError, TypeError) as error:
        raise ValueError(f"--shape: bad arguments in {layer!r}: {error}")
    bound.apply_defaults()
    a, nd = bound.arguments, _LAYERS[name]
    if a["padding_mode"] != "zeros":
        raise ValueError(f"--shape: {name} supports only padding_mode='zeros', as torch does")
    shape = tuple(input_shape)
    if len(shape) != nd + 2 or shape[1] != a["in_channels"]:
        spatial = {1: "L", 2: "H, W", 3: "D, H, W"}[nd]
        raise ValueError(f"--shape: {name}({a['in_channels']}, ...) takes an input "
                         f"(N, {a['in_channels']}, {spatial}), got --input "
                         f"{','.join(map(str, shape))}")
    per_dim = {k: expand(a[k], nd, k) for k in ("kernel_size", "stride", "padding",
                                                "output_padding", "dilation")}
    return cases.Case(layer.strip(), shape[0], a["in_channels"], a["out_channels"],
                      per_dim["kernel_size"], shape[2:], per_dim["stride"], per_dim["padding"],
                      per_dim["output_padding"], per_dim["dilation"], a["groups"], bool(a["bias"]))
