"""Timing gemmconv against torch on the shared case table: the bench CLI and suite use this.

Each measurement runs torch's ``conv_transpose{nd}d`` and gemmconv's side by side on the same
inputs (``torch.rand``, as the issue specifies), checks both against a float64 reference in
the same run, and reports median times from CUDA events (wall clock on the CPU), peak extra
memory, and the floor: FLOPs over the measured matmul rate, or the bytes that must move
(input, weight and output once each) over the measured copy bandwidth, whichever is larger.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import Callable, Optional

import torch
import torch.nn.functional as F

from . import _cuda, cases, ops

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


def _timer(device: torch.device, fn: Callable[[], object], repeats: int) -> float:
    """Median milliseconds of ``fn`` after two warm-up calls."""
    for _ in range(2):
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


def _extra_mb(device: torch.device, fn: Callable[[], object]) -> float:
    """Peak memory a call allocates beyond its own result, in MB (CUDA only)."""
    if device.type != "cuda":
        return float("nan")
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
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
    matmul_ms = _timer(device, lambda: matmul(a, b, c), 10)
    src = torch.rand(1 << 28, device=device)                  # 1 GiB
    dst = torch.empty_like(src)
    copy_ms = _timer(device, lambda: dst.copy_(src), 20)
    return Ceilings(2 * n**3 / (matmul_ms / 1e3), 2 * (4 << 28) / (copy_ms / 1e3))


class Workload:
    """One case's inputs on a device, a float64 reference, and a runner per implementation."""

    def __init__(self, case: cases.Case, dtype: torch.dtype, device: torch.device,
                 backward: bool, seed: int = 0):
        gen = torch.Generator().manual_seed(seed)
        self.case, self.dtype, self.device, self.backward = case, dtype, device, backward
        self.x, self.w, self.b = case.tensors(dtype, device, gen, distribution=torch.rand)
        self.leaves = [t.requires_grad_() for t in (self.x, self.w, self.b)
                       if t is not None] if backward else []
        self.shape = (case.batch, case.out_channels, *case.output_size)
        self.grad_out = torch.rand(self.shape, generator=gen, dtype=torch.float64).to(
            device) if backward else None
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
            ceiling: Ceilings, repeats: int = 20) -> Row:
    """Times torch and gemmconv on one case, checking both against float64."""
    work = Workload(case, dtype, device, backward)
    results = {}
    for impl in ("torch", "gemmconv"):
        fn = work.runner(impl)
        results[impl] = (_timer(device, fn, repeats), work.error(fn()), _extra_mb(device, fn))
    shapes = f"{tuple(work.x.shape)} k{case.kernel_size}"
    (t_ms, t_err, t_mb), (o_ms, o_err, o_mb) = results["torch"], results["gemmconv"]
    return Row(case.name, shapes, t_ms, o_ms, t_err, o_err, t_mb, o_mb, work.floor_ms(ceiling))


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
