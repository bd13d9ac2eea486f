"""Shared test helpers: the float64 reference, the error measure and route forcing."""
import itertools
import math
import os
import zlib

import numpy
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

import gemmconv
from gemmconv import channels_last as cl
from gemmconv import fused
from gemmconv.bench import OURS, TORCH  # noqa: F401  (re-exported for the tests)
from gemmconv.bench import reference as reference64


def generator(*keys) -> torch.Generator:
    """A generator seeded from the test's own keys: fresh inputs per check, reproducible."""
    return torch.Generator().manual_seed(zlib.crc32(repr(keys).encode()))


if not torch.cuda.is_available():   # before Triton is first imported (_interpreter_works)
    os.environ["TRITON_INTERPRET"] = "1"


def _interpreter_works() -> bool:
    """Triton's interpreter before 3.7 loops over one-element arrays, which numpy 2.4
    refuses to turn into ints (triton-lang/triton#9171)."""
    try:
        import triton
    except ImportError:
        return False
    version = tuple(int(v) for v in triton.__version__.split(".")[:2])
    return version >= (3, 7) or tuple(int(v) for v in numpy.__version__.split(".")[:2]) < (2, 4)


# Tests of a Triton kernel run on the CPU through Triton's interpreter (TRITON_INTERPRET=1,
# set above); on a GPU the CUDA tests run the kernels. They carry the marker `interpreted`:
# they are most of the CPU suite's time, and CI's check of the installed wheel leaves them
# out (`-m "not interpreted"`) after the source tree's run has passed them.
_interpreter_skip = pytest.mark.skipif(
    torch.cuda.is_available() or not _interpreter_works(),
    reason="the kernel through Triton's interpreter, on a machine without a GPU and with "
           "Triton >= 3.7 (or numpy < 2.4); the CUDA tests run it on a GPU")


def interpreted(test):
    return pytest.mark.interpreted(_interpreter_skip(test))


def poison_allocator(nbytes: int, device="cuda") -> None:
    """Leaves a freed NaN-filled block in torch's cache, where the next allocation of that
    size lands, so an element the kernels never write shows up as NaN."""
    torch.empty(max(nbytes, 1), dtype=torch.uint8, device=device).fill_(0xFF)


def requested_during(run) -> tuple:
    """``(bytes, result)``: the most memory ``run()`` held at once beyond what was held
    before it, as asked of torch's caching allocator, and what it returned. Counted in
    requested bytes, the sizes asked for: the allocated bytes count a cached block handed
    out whole where the rest is too small to split off (under 1 MiB in the large pool), so
    after a poison_allocator they ran up to 1.4 MB over what the same call asks for (H100,
    benches/NOTES.md, session 62)."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["requested_bytes.all.current"]
    torch.cuda.reset_peak_memory_stats()
    result = run()
    torch.cuda.synchronize()
    return torch.cuda.memory_stats()["requested_bytes.all.peak"] - before, result


def layout_tensors(case, layout: str, dtype, device, *keys):
    """Fresh ``(x, w, b)`` of ``case``, seeded from its name, ``layout`` ("planar" or
    "channels_last"), dtype and ``keys``; x and w channels_last where the layout says."""
    x, w, b = case.tensors(dtype, device, generator(case.name, layout, str(dtype), *keys))
    if layout == "channels_last":
        x = x.contiguous(memory_format=cl.memory_format(x.dim()))
        w = w.contiguous(memory_format=cl.memory_format(w.dim()))
    return x, w, b


def output_gradient(case, layout: str, dtype, device):
    """A fresh output gradient of ``case``, drawn in float64, in ``dtype`` and ``layout``."""
    grad = torch.randn((case.batch, case.out_channels, *case.output_size),
                       generator=generator(case.name, "grad"), dtype=torch.float64)
    grad = grad.to(device, dtype)
    if layout == "channels_last":
        grad = grad.contiguous(memory_format=cl.memory_format(grad.dim()))
    return grad


def weight_gradient_inputs(case, *keys, tf32: bool = False) -> tuple:
    """Fresh float64 ``x`` and output gradient of a 2-D ``case`` (CPU), and float64's weight
    gradient of its transposed convolution for them (where ``tf32``, for the output
    gradient rounded to TF32 as gemmconv's float32 weight gradients round it)."""
    gen = generator(case.name, *keys)
    x = torch.randn(case.batch, case.in_channels, *case.size, generator=gen, dtype=torch.float64)
    grad = torch.randn(case.batch, case.out_channels, *case.output_size, generator=gen,
                       dtype=torch.float64)
    w = torch.zeros(case.in_channels, case.out_channels, *case.kernel_size,
                    dtype=torch.float64, requires_grad=True)
    out = torch.nn.functional.conv_transpose2d(x, w, padding=case.padding,
                                               dilation=case.dilation)
    rounded = fused.round_tf32(grad.float()).double() if tf32 else grad
    (want,) = torch.autograd.grad(out, w, rounded)
    return x, grad, want


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; inf for NaN or a shape mismatch."""
    if out.shape != ref.shape:
        return float("inf")
    out, ref = out.detach().double(), ref.detach().double().to(out.device)
    if not torch.isfinite(out).all():
        return float("inf")
    denom = ref.norm()
    return float((out - ref).norm() / (denom if denom > 0 else 1))


def check_against_float64(case, leaves, precision: str, tolerance: float, layout: str,
                          forward_launches, after_backward=None,
                          gradient_in_layout: bool = False) -> None:
    """On the GPU, ``case`` through gemmconv on ``leaves`` (x, w, b; each requiring grad but
    a missing bias) under float32 ``precision``, against float64 torch within ``tolerance``:
    the forward into poisoned memory, one launch a call (``forward_launches()`` counts
    them), twice, bitwise the same; the gradients of every leaf into poisoned memory, twice,
    bitwise the same (``after_backward()`` checks the first's launches); the output in the
    input's ``layout``, and the input's gradient too where ``gradient_in_layout``."""
    x, w, b = leaves
    inputs = [t for t in leaves if t is not None]
    out_shape = (case.out_channels, *case.output_size) if case.unbatched else \
        (case.batch, case.out_channels, *case.output_size)
    with gemmconv.float32_precision(precision):
        poison_allocator(math.prod(out_shape) * x.element_size())
        out = OURS[case.nd](x, w, b, **case.kwargs)
        assert forward_launches() == 1 and out.shape == out_shape and out.dtype == x.dtype
        if out.numel() == 0:
            return
        again = OURS[case.nd](x, w, b, **case.kwargs)
        grad_out = torch.randn(out_shape, generator=generator(case.name, "g"),
                               dtype=torch.float64).to(x.device)
        poison_allocator(x.numel() * x.element_size())    # where the input's gradient lands
        mine = torch.autograd.grad(out, inputs, grad_out.to(x.dtype), retain_graph=True)
        if after_backward is not None:
            after_backward()
        mine_again = torch.autograd.grad(again, inputs, grad_out.to(x.dtype))
    assert torch.equal(out, again)                                       # bitwise, run to run
    assert all(torch.equal(m, n) for m, n in zip(mine, mine_again))
    if layout == "channels_last":                                        # as torch's
        fmt = cl.memory_format(x.dim())
        assert out.is_contiguous(memory_format=fmt)
        assert mine[0].is_contiguous(memory_format=fmt) or not gradient_in_layout
    refs = reference64(case, x, w, b, grad_out)
    assert rel_error(out, refs[0]) < tolerance
    for m, t in zip(mine, refs[1:]):
        assert m.dtype == x.dtype and rel_error(m, t) < tolerance


def case_args(case, x, w, b):
    """``case``'s call on ``(x, w, b)`` checked as ``conv_transpose{nd}d`` checks it: its
    shapes.ConvTransposeArgs."""
    from gemmconv.shapes import conv_transpose_args
    return conv_transpose_args(f"conv_transpose{case.nd}d", case.nd, x, w, b, case.stride,
                               case.padding, case.output_padding, case.groups, case.dilation)


def reference(case, x, w, b):
    """torch's transposed convolution in float64 on the inputs' device, differentiable
    back to x, w and b (for float64 leaves; see gemmconv.bench.reference otherwise)."""
    up = lambda t: None if t is None else t.double()        # differentiable back to t
    return TORCH[case.nd](up(x), up(w), up(b), **case.kwargs)


def force_im2col_route(monkeypatch) -> None:
    """Makes every stride-1 call take the im2col + GEMM route, forward and backward."""
    from gemmconv import ops
    monkeypatch.setattr(ops.ConvTransposeArgs, "prefers_im2col", lambda a: a.convolution is not None)
    monkeypatch.setattr(ops.ConvTransposeArgs, "route", lambda a: (
        (a.convolution is not None,) * a.geometry.nd, False))


def allowed_routes(case, a=None) -> list[tuple[tuple[bool, ...], bool]]:
    """Every forward route the case's strides allow: each subset of the dims whose dilation
    is a multiple of their stride (all stride-1 dims among them) as the dims whose taps
    im2col gathers (shapes.Split), by split kernels (False) and, where its checked
    arguments ``a`` allow them, by row products (True; ops._forward_by_rows)."""
    splits = [r for r in itertools.product((False, True), repeat=case.nd)
              if all(d % s == 0 for s, d, taken in zip(case.stride, case.dilation, r) if taken)]
    return [(r, False) for r in splits] + [
        (r, True) for r in splits if a is not None and a.groups == 1 and a.split(r).overlaps]


def gather_first_stride_one(monkeypatch) -> None:
    """Makes every forward pass (the backward's stride-1 convolutions too) gather the taps of
    its first stride-1 dim, if it has one."""
    from gemmconv import ops

    def first_stride_one(a):
        stride = a.geometry.stride
        return tuple(d == stride.index(1) if 1 in stride else False for d in range(len(stride)))
    monkeypatch.setattr(ops.ConvTransposeArgs, "route", lambda a: (first_stride_one(a), False))


def rows_outermost(samples: int, channels: int, taps: int, grid, device="cpu"):
    """A NaN buffer ``(grid[0], C, K, S, *grid[1:])`` and its view as columns
    ``(S, C, K, *grid)``: the row-products route's layout, where the grid's outer dim is
    outermost and the samples sit next to the inner grid dims."""
    buffer = torch.full((grid[0], channels, taps, samples, *grid[1:]), float("nan"),
                        device=device)
    return buffer, buffer.movedim(3, 0).movedim(1, 3)


class Copies(TorchDispatchMode):
    """Records the copies torch makes of tensors of at least ``least`` elements."""
    COPIES = {"aten::clone", "aten::_to_copy", "aten::copy_", "aten::contiguous"}

    def __init__(self, least):
        super().__init__()
        self.least, self.seen = least, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name
        if name in self.COPIES and any(isinstance(a, torch.Tensor) and a.numel() >= self.least
                                       for a in args):
            self.seen.append(name)
        return func(*args, **(kwargs or {}))


def opaque(function):
    """``function`` run outside any dispatch mode: on the CPU the column kernels' and
    cuBLAS's stand-ins copy their results into place, which the CUDA kernels do not."""
    def run(*args, **kwargs):
        with _disable_current_modes():
            return function(*args, **kwargs)
    return run
