"""The GEMM layer: batched matrix products on cuBLAS (CUDA) or torch.matmul (CPU).

On CUDA it calls cuBLAS itself (ctypes, Linux), on torch's current stream, so it runs
inside CUDA-graph capture too. The calls of a product are worked out once per layout of its
operands (_plan) and then only given pointers. A call goes to cuBLASLt, its algorithm
chosen once per alignment of its pointers (_lt_choice): cublasGemmStridedBatchedEx, which
runs cuBLAS's heuristics on every call, took 17-23 us of host time a call on the H200's
host where cublasLtMatmul with its algorithm chosen took 11-17, and their kernels matched
on single and batched products alike (benches/NOTES.md, sessions 25 and 26). A call that no
cuBLASLt algorithm takes goes to cublasGemmStridedBatchedEx with torch's handle. A large
product (ALGORITHM_TRIAL_FLOPS) times cuBLASLt's first ALGORITHM_TRIALS candidates on its
first run and keeps the fastest: on short reductions over many rows (a channels_last column
GEMM) its first choice ran at half the speed of its output's writes (benches/NOTES.md,
session 38).

:func:`matmul` takes 4-D views ``a (B1, B2, m, k)`` and ``b (B1, B2, k, n)`` and writes
``out (B1, B2, m, n)``. A batch dim of ``a`` or ``b`` may be broadcast (stride 0, from
``expand``), and each matrix may be row- or column-major with any leading dimension, so
transposes, group slices and weight sharing across samples cost no copies (but see "Weight
layout" below). On CUDA it issues as few strided-batched cuBLAS calls as the strides allow:
one when both batch dims fold into one stride, otherwise one per entry of the smaller batch
dim.

Precision policy, explicit in every cuBLAS call through its compute type (torch's global
flags are read, never changed):

* float32: :func:`set_float32_precision` chooses ``"torch"`` (the default: do what
  torch's convolutions do, i.e. TF32 tensor cores while ``torch.backends.cudnn`` allows
  TF32 for convolutions, which is torch's default), ``"tf32"`` or ``"ieee"`` (full float32).
* float16 and bfloat16: tensor cores, float32 accumulation.
* float64: float64 throughout.

The CPU has no TF32: CPU products are plain float32/float64 ``torch.matmul``.

Weight layout: cuBLAS picks its kernel by heuristics from the shape and the operands'
layouts, and on the convolution routes' products the layout of ``a`` (the weight) alone
moved the time by up to 45%, either way depending on the shape (benches/NOTES.md, change
38). A weight is small, so its layout is ours to choose. The first product of each shape
(of at least LAYOUT_TRIAL_FLOPS) times ``a`` as passed against copied into the other
layout, the copy included, waits for the timings, and keeps the faster; every product of
that shape, the first included, then runs on the kept layout, so results repeat bit for bit
within a process.
Under ``torch.use_deterministic_algorithms`` (the choice could differ between processes
where the two are close) and during CUDA-graph capture (nothing can be waited for), ``a``
runs as passed unless a choice is already kept.
"""
from __future__ import annotations

import contextlib
import ctypes
import math
from typing import Callable, Iterator, Literal, NamedTuple

import numpy as np
import torch

from . import _cuda
from .shapes import check

Float32Precision = Literal["torch", "tf32", "ieee"]
_float32_precision: Float32Precision = "torch"

# cuBLAS and CUDA library enums (cublas_api.h, library_types.h); their values are ABI.
_OP_N, _OP_T = 0, 1
_GEMM_DEFAULT = -1
_DEFAULT_MATH = 0
_COMPUTE_32F, _COMPUTE_64F, _COMPUTE_32F_FAST_TF32 = 68, 70, 77
_DATA_TYPE = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 14}
_INT_MAX = 2**31 - 1
# cuBLASLt's (cublasLt.h), also ABI: matmul descriptor, matrix layout and preference attributes.
_LT_TRANSA, _LT_TRANSB = 3, 4
_LT_BATCH_COUNT, _LT_BATCH_STRIDE = 5, 6
_LT_MAX_WORKSPACE = 1
_LT_MIN_ALIGNMENT = (5, 6, 7, 8)   # of A, B, C and D, in bytes
_SCALE_TYPE = {_COMPUTE_32F: 0, _COMPUTE_32F_FAST_TF32: 0, _COMPUTE_64F: 1}   # float32, float64
LT_WORKSPACE = 32 << 20   # the most workspace a chosen algorithm may take (torch gives cuBLAS
                          # as much on Hopper); allocated per call, where one takes any
MAX_ALIGNMENT = 256       # cuBLASLt assumes this alignment of pointers unless told less
ALGORITHM_TRIALS = 8             # cuBLASLt's candidates a large product times (1: its first)
ALGORITHM_TRIAL_FLOPS = 1 << 34  # products this large (about 40 us of TF32) time them

LAYOUT_TRIAL_FLOPS = 1 << 32       # products this large (about 10 us) choose a's layout
LAYOUT_TRIAL_ELEMENTS = 1 << 22    # when a's distinct matrices hold at most this many elements
LAYOUT_TRIALS = 2                  # runs of each layout; the fastest of each counts
LAYOUT_GAIN = 0.95                 # the copy is kept where it takes at most this share of the time
_kept_layouts: dict[tuple, bool] = {}   # product's shape and strides -> a copied or not
# alpha = 1 and beta = 0, in the compute type's scalar type (cuBLAS reads them from the
# host): the arrays, kept here, and their addresses.
_SCALAR_ARRAYS = {t: (np.array(1, t), np.array(0, t)) for t in (np.float32, np.float64)}
_SCALARS = {t: (one.ctypes.data, zero.ctypes.data) for t, (one, zero) in _SCALAR_ARRAYS.items()}


def get_float32_precision() -> Float32Precision:
    """The float32 GEMM policy in force: ``"torch"``, ``"tf32"`` or ``"ieee"``."""
    return _float32_precision


def set_float32_precision(precision: Float32Precision) -> None:
    """Sets the float32 GEMM policy for gemmconv's CUDA products (see the module docs)."""
    global _float32_precision
    if precision not in ("torch", "tf32", "ieee"):
        raise ValueError(f"float32 precision must be 'torch', 'tf32' or 'ieee', got {precision!r}")
    _float32_precision = precision


@contextlib.contextmanager
def float32_precision(precision: Float32Precision) -> Iterator[None]:
    """``with gemmconv.float32_precision("ieee"): ...`` sets the policy for a block."""
    previous = get_float32_precision()
    set_float32_precision(precision)
    try:
        yield
    finally:
        set_float32_precision(previous)


# torch's getter of its float32 precision settings, where it has them (torch >= 2.9); the
# settings read as torch.backends.cudnn.conv.fp32_precision, torch.backends.cudnn's and
# torch.backends' read it through Python properties, 1-2 us a call where every float32
# call of a layer reads them (forward and backward).
_PRECISION = getattr(torch._C, "_get_fp32_precision_getter", None)
# Those settings, the most specific first: cuDNN's convolutions, cuDNN, all backends.
_PRECISION_LEVELS = (("cuda", "conv"), ("cuda", "all"), ("generic", "all"))


def torch_convolutions_use_tf32() -> bool:
    """Whether torch's cuDNN convolutions run float32 on TF32 tensor cores right now."""
    if _PRECISION is None:
        return bool(torch.backends.cudnn.allow_tf32)
    for backend, op in _PRECISION_LEVELS:   # the most specific setting other than "none" wins
        precision = _PRECISION(backend, op)
        if precision != "none":
            return precision == "tf32"
    return False


def uses_tf32() -> bool:
    """Whether float32 products on CUDA use TF32 under the current policy."""
    if _float32_precision == "torch":
        return torch_convolutions_use_tf32()
    return _float32_precision == "tf32"


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
           choose_layout: bool = True) -> torch.Tensor:
    """``out[i, j] = a[i, j] @ b[i, j]`` for ``a (B1, B2, m, k)``, ``b (B1, B2, k, n)``.

    ``out (B1, B2, m, n)`` must be row-major in its last two dims; it may be float32 where
    ``a`` and ``b`` are float16/bfloat16 (products accumulated and kept in float32).
    ``choose_layout``: whether ``a`` may run copied into its other layout (see "Weight
    layout" above); callers whose ``a`` is an activation, not a weight, pass False.
    Returns ``out``.
    """
    if out.numel() == 0:
        return out
    if a.shape[-1] == 0:
        return out.zero_()
    if not out.is_cuda:
        return out.copy_(torch.matmul(a.to(out.dtype), b.to(out.dtype)))
    _call(_product(a, b, out, choose_layout), a, b, out)
    return out


def _distinct(a: torch.Tensor) -> torch.Tensor | None:
    """``a``'s distinct matrices (its broadcast batch dims cut to 1) where another layout of
    them is worth a trial: row- or column-major, neither a vector, small enough to copy."""
    layout = _layout(a)
    if layout is None or min(a.shape[-2:]) <= 1:
        return None
    distinct = a[tuple(slice(0, 1) if s == 0 else slice(None) for s in a.stride()[:-2])]
    return distinct if distinct.numel() <= LAYOUT_TRIAL_ELEMENTS else None


def _other_layout(a: torch.Tensor, distinct: torch.Tensor) -> torch.Tensor:
    """``a`` copied from row- into column-major or back, still broadcast like ``a``."""
    if _layout(distinct)[0] == _OP_T:
        return distinct.contiguous().expand(a.shape)
    return distinct.transpose(-1, -2).contiguous().transpose(-1, -2).expand(a.shape)


def _layout_choice(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool | None:
    """Whether this product runs on ``a`` copied into the other layout (see the module docs),
    timing both layouts first where no choice is kept yet; None where it runs on ``a`` as
    passed for now only (no choice kept, and none can be made at the moment)."""
    m, n, k = out.shape[-2], out.shape[-1], a.shape[-1]
    distinct = _distinct(a) if 2 * m * n * k * math.prod(out.shape[:-2]) >= LAYOUT_TRIAL_FLOPS \
        else None
    if distinct is None:
        return False
    key = (out.device, *_product_key(_compute_type(a.dtype), a, b, out))
    copy = _kept_layouts.get(key)
    if copy is None:
        if torch.are_deterministic_algorithms_enabled() or torch.cuda.is_current_stream_capturing():
            return None
        copy = _kept_layouts[key] = _other_is_faster(a, lambda: _other_layout(a, distinct), b,
                                                     out)
    return copy


def _other_is_faster(a: torch.Tensor, other: Callable[[], torch.Tensor], b: torch.Tensor,
                     out: torch.Tensor) -> bool:
    """Whether ``other() @ b``, the copy ``other()`` makes included, runs in at most
    LAYOUT_GAIN of the time of ``a @ b`` (each the fastest of LAYOUT_TRIALS runs, taken in
    turns, into ``out``). Every call of a copied product makes its copy, so the copy is part
    of its cost: an activation-sized operand's copy (a weight gradient's) can cost more than
    the layout saves. Waits for the GPU."""
    runs = []
    with _cuda.on_device(out.device):
        for _ in range(LAYOUT_TRIALS):
            for copied in (False, True):
                start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
                _cublas_matmul(other() if copied else a, b, out)
                end.record()
                runs.append((copied, start, end))
        runs[-1][2].synchronize()
    best = [min(s.elapsed_time(e) for copied, s, e in runs if copied == c) for c in (False, True)]
    return best[1] <= LAYOUT_GAIN * best[0]


def _layout(t: torch.Tensor) -> tuple[int, int] | None:
    """How column-major cuBLAS reads matrix ``t (rows, cols)``: (op giving ``t^T``, ld)."""
    rows, cols = t.shape[-2:]
    rs, cs = t.stride()[-2:]
    if (cs == 1 or cols == 1) and (rows == 1 or rs >= cols):
        return _OP_N, max(rs if rows > 1 else cols, 1)      # row-major: cuBLAS sees t^T
    if (rs == 1 or rows == 1) and (cols == 1 or cs >= rows):
        return _OP_T, max(cs if cols > 1 else rows, 1)      # column-major: cuBLAS sees t
    return None


def _batches(sizes: tuple[int, int], operands: tuple[torch.Tensor, ...]):
    """(element offsets per operand, batch count, batch stride per operand) for each call."""
    b1, b2 = sizes
    strides = [(t.stride(0) if b1 > 1 else 0, t.stride(1) if b2 > 1 else 0) for t in operands]
    if b2 == 1:
        return [([0] * len(operands), b1, [s1 for s1, _ in strides])]
    if b1 == 1 or all(s1 == s2 * b2 for s1, s2 in strides):
        return [([0] * len(operands), b1 * b2, [s2 for _, s2 in strides])]
    if b1 <= b2:
        return [([i * s1 for s1, _ in strides], b2, [s2 for _, s2 in strides]) for i in range(b1)]
    return [([j * s2 for _, s2 in strides], b1, [s1 for s1, _ in strides]) for j in range(b2)]


class _Call(NamedTuple):
    """One strided-batched call of a product, but for its pointers: the byte offsets of its
    first matrices in a, b and out; the alignment its leading dims and batch strides allow
    each pointer (_alignment); and its cuBLASLt state, made on its first run (_lt_choice):
    "descriptors", and per alignment of the pointers the algorithm chosen."""
    offsets: tuple[int, int, int]
    args: tuple   # (op_b, op_a, n, m, k, ld_b, stride_b, ld_a, stride_a, ld_c, stride_c, count)
    alignment: tuple[int, int, int]   # of b, a and out
    lt: dict


class _Heuristic(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t: the algorithm and the workspace it takes."""
    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspace", ctypes.c_size_t),
                ("state", ctypes.c_int), ("waves", ctypes.c_float),
                ("reserved", ctypes.c_int * 4)]


def _alignment(*byte_counts: int) -> int:
    """The largest power of two (at most MAX_ALIGNMENT) dividing each of the byte counts."""
    return min([MAX_ALIGNMENT] + [c & -c for c in byte_counts if c])


class _Product(NamedTuple):
    """How a product of given operand layouts runs on cuBLAS: whether ``a`` is first copied
    into the other layout (_layout_choice), which operands are then made contiguous (those
    of no layout cuBLAS reads), the calls, the data types and the compute type."""
    copied: bool
    contiguous: tuple[bool, bool]
    calls: tuple[_Call, ...]
    types: tuple[int, int, int]   # of b, a and out
    compute: int


# A layer's products repeat call after call; working one out took about 10 us of host time
# on a CPU, more on the H200's host, where small problems wait for it. Keyed by whether the
# layout of ``a`` is chosen, the device, the compute type and the operands' shapes, strides
# and dtypes; cleared at MAX_PRODUCTS entries.
_products: dict[tuple, _Product] = {}
MAX_PRODUCTS = 4096


def _compute_type(dtype: torch.dtype) -> int:
    """The cuBLAS compute type of products of ``dtype`` operands under the current policy."""
    if dtype == torch.float64:
        return _COMPUTE_64F
    return _COMPUTE_32F_FAST_TF32 if dtype == torch.float32 and uses_tf32() else _COMPUTE_32F


def _product_key(compute: int, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> tuple:
    """What a product's cuBLAS calls, and so their speed, depend on: the compute type and the
    operands' shapes, strides and dtypes."""
    return (compute, a.shape, a.stride(), a.dtype, b.shape, b.stride(), b.dtype,
            out.shape, out.stride(), out.dtype)


def _product(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
             choose_layout: bool = True) -> _Product:
    """The plan of ``out = a @ b``, remembered per layout of the operands; with
    ``choose_layout``, ``a`` in the layout _layout_choice keeps (not remembered while no
    choice can be made), else ``a`` as passed."""
    compute = _compute_type(a.dtype)
    key = (choose_layout, out.device, *_product_key(compute, a, b, out))
    product = _products.get(key)
    if product is None:
        copied = _layout_choice(a, b, out) if choose_layout else False
        product = _plan(_other_layout(a, _distinct(a)) if copied else a, b, out, compute,
                        bool(copied))
        if copied is not None:
            if len(_products) >= MAX_PRODUCTS:
                _products.clear()
            _products[key] = product
    return product


def _cublas_matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """``out = a @ b`` on cuBLAS with ``a`` in the layout passed."""
    _call(_product(a, b, out, choose_layout=False), a, b, out)


def _call(product: _Product, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """Runs ``product``'s cuBLAS calls on these operands (of the layouts it was planned for)."""
    a = first_operand(product, a)
    a, b = (t.contiguous() if c else t for t, c in zip((a, b), product.contiguous))
    run(product, a.data_ptr(), b.data_ptr(), out.data_ptr(), out.device)


def plan(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
         choose_layout: bool = True) -> _Product:
    """The cuBLAS calls :func:`matmul` makes for operands of these shapes, strides and dtypes
    (choosing ``a``'s layout first, as matmul does): what :func:`run` replays."""
    return _product(a, b, out, choose_layout)


def first_operand(product: _Product, a: torch.Tensor) -> torch.Tensor:
    """``a`` as ``product`` reads it: copied into its other layout where the product's layout
    choice keeps that copy (keep the result alive until :func:`run` has queued the product)."""
    return _other_layout(a, _distinct(a)) if product.copied else a


def run(product: _Product, a: int, b: int, out: int, device: torch.device) -> None:
    """``product``'s calls on operands at these addresses on ``device``, laid out as it was
    planned for (``a`` in the copied layout where ``product.copied``): matmul's work, less
    its planning, for callers that replay a call (ops._Replay)."""
    one, zero = _SCALARS[np.float64 if product.compute == _COMPUTE_64F else np.float32]
    lib, handle = _cuda.cublas_lt(), _cuda.cublas_lt_handle(device.index)
    with _cuda.on_device(device):
        stream = _cuda.raw_stream(device)
        for call in product.calls:
            pb, pa, pc = (p + o for p, o in zip((b, a, out), call.offsets))
            alignment = tuple(min(p & -p, most) for p, most in zip((pb, pa, pc), call.alignment))
            choice = call.lt.get(alignment)
            if choice is None:
                choice = call.lt[alignment] = _lt_choice(product, call, alignment, device,
                                                         (pb, pa, pc))
            if choice is _NO_ALGORITHM:
                _legacy(product, call, pb, pa, pc, device)
                continue
            _lt_matmul(lib, handle, stream, call.lt["descriptors"], choice, (one, zero),
                       (pb, pa, pc), device)


def _lt_matmul(lib, handle, stream, descriptors: tuple, heuristic: "_Heuristic", scalars: tuple,
               pointers: tuple, device: torch.device) -> None:
    """One cublasLtMatmul of a call's ``descriptors`` with ``heuristic``'s algorithm, on
    operands at ``pointers`` (b, a, out)."""
    (one, zero), (pb, pa, pc) = scalars, pointers
    workspace = torch.empty(heuristic.workspace, dtype=torch.uint8, device=device) \
        if heuristic.workspace else None
    desc, layout_b, layout_a, layout_c = descriptors
    _status(lib.cublasLtMatmul(
        handle, desc, one, pb, layout_b, pa, layout_a, zero, pc, layout_c, pc, layout_c,
        ctypes.byref(heuristic.algo), workspace.data_ptr() if workspace is not None
        else None, heuristic.workspace, stream))


_NO_ALGORITHM = object()


def workspace_bytes(product: _Product) -> int:
    """The most workspace :func:`run` has allocated for ``product``'s cuBLASLt calls."""
    return max((choice.workspace for call in product.calls for key, choice in call.lt.items()
                if key != "descriptors" and choice is not _NO_ALGORITHM), default=0)


def _lt_choice(product: _Product, call: _Call, alignment: tuple[int, int, int],
               device: torch.device, pointers: tuple[int, int, int]):
    """The cuBLASLt algorithm (a _Heuristic) of ``call`` for pointers of this alignment,
    within LT_WORKSPACE: cuBLASLt's first choice, or for a large product the fastest of its
    first ALGORITHM_TRIALS on the operands at ``pointers`` (b, a, out; _fastest);
    _NO_ALGORITHM where it has none. (Run on ``device``, made current by the caller.)"""
    candidates = _lt_candidates(product, call, alignment, device)
    if not candidates:
        return _NO_ALGORITHM
    if len(candidates) == 1 or torch.are_deterministic_algorithms_enabled() or \
            torch.cuda.is_current_stream_capturing():
        return candidates[0]
    return _fastest(product, call, candidates, device, pointers)


def _fastest(product: _Product, call: _Call, candidates: list, device: torch.device,
             pointers: tuple[int, int, int]) -> "_Heuristic":
    """The candidate whose call takes least time, each run twice in turns (the faster run
    counts), into the call's own output. Waits for the GPU."""
    lib, handle = _cuda.cublas_lt(), _cuda.cublas_lt_handle(device.index)
    stream = _cuda.raw_stream(device)
    scalars = _SCALARS[np.float64 if product.compute == _COMPUTE_64F else np.float32]
    run = lambda i: _lt_matmul(lib, handle, stream, call.lt["descriptors"], candidates[i],
                               scalars, pointers, device)
    times = _timed(run, len(candidates), device)
    return candidates[min(range(len(candidates)), key=times.__getitem__)]


def _timed(run: Callable[[int], None], count: int, device: torch.device,
           rounds: int = 2) -> list[float]:
    """Milliseconds of ``run(i)`` for each ``i < count``, the least of ``rounds`` runs taken
    in turns."""
    events = []
    for _ in range(rounds):
        for i in range(count):
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            run(i)
            end.record()
            events.append((i, start, end))
    events[-1][2].synchronize()
    times = [math.inf] * count
    for i, start, end in events:
        times[i] = min(times[i], start.elapsed_time(end))
    return times


def _lt_candidates(product: _Product, call: _Call, alignment: tuple[int, int, int],
                   device: torch.device) -> list:
    """cuBLASLt's algorithms for ``call`` (its first ALGORITHM_TRIALS where the product is
    large, else its first), best first."""
    op_b, op_a, n, m, k, *_, count = call.args
    requested = ALGORITHM_TRIALS if 2 * n * m * k * count >= ALGORITHM_TRIAL_FLOPS else 1
    lib = _cuda.cublas_lt()
    if "descriptors" not in call.lt:
        call.lt["descriptors"] = _lt_descriptors(product, call)
    desc, *layouts = call.lt["descriptors"]
    preference = ctypes.c_void_p()
    _status(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(preference)))
    try:
        _set(lib.cublasLtMatmulPreferenceSetAttribute, preference, _LT_MAX_WORKSPACE,
             ctypes.c_uint64(LT_WORKSPACE))
        for attribute, bytes_ in zip(_LT_MIN_ALIGNMENT, (*alignment, alignment[2])):
            _set(lib.cublasLtMatmulPreferenceSetAttribute, preference, attribute,
                 ctypes.c_uint32(bytes_))
        heuristics, found = (_Heuristic * requested)(), ctypes.c_int()
        status = lib.cublasLtMatmulAlgoGetHeuristic(
            _cuda.cublas_lt_handle(device.index), desc, *layouts, layouts[-1], preference,
            requested, ctypes.byref(heuristics), ctypes.byref(found))
    finally:
        lib.cublasLtMatmulPreferenceDestroy(preference)
    return [h for h in heuristics[:found.value] if h.state == 0] if status == 0 else []


def _lt_descriptors(product: _Product, call: _Call) -> tuple:
    """The matmul descriptor and the layouts of b, a and out of ``call``: cuBLASLt's
    column-major ``out^T = op(b^T) @ op(a^T)``, as the legacy call (_legacy) reads them."""
    lib = _cuda.cublas_lt()
    op_b, op_a, n, m, k, ld_b, s_b, ld_a, s_a, ld_c, s_c, count = call.args
    desc = ctypes.c_void_p()
    _status(lib.cublasLtMatmulDescCreate(ctypes.byref(desc), product.compute,
                                         _SCALE_TYPE[product.compute]))
    for attribute, op in ((_LT_TRANSA, op_b), (_LT_TRANSB, op_a)):
        _set(lib.cublasLtMatmulDescSetAttribute, desc, attribute, ctypes.c_int32(op))
    layouts = []
    for data_type, rows, cols, ld, stride in (
            (product.types[0], *((n, k) if op_b == _OP_N else (k, n)), ld_b, s_b),
            (product.types[1], *((k, m) if op_a == _OP_N else (m, k)), ld_a, s_a),
            (product.types[2], n, m, ld_c, s_c)):
        layout = ctypes.c_void_p()
        _status(lib.cublasLtMatrixLayoutCreate(ctypes.byref(layout), data_type, rows, cols, ld))
        _set(lib.cublasLtMatrixLayoutSetAttribute, layout, _LT_BATCH_COUNT, ctypes.c_int32(count))
        _set(lib.cublasLtMatrixLayoutSetAttribute, layout, _LT_BATCH_STRIDE, ctypes.c_int64(stride))
        layouts.append(layout)
    return (desc, *layouts)


def _set(setter, descriptor: ctypes.c_void_p, attribute: int, value) -> None:
    _status(setter(descriptor, attribute, ctypes.byref(value), ctypes.sizeof(value)))


def _legacy(product: _Product, call: _Call, pb: int, pa: int, pc: int,
            device: torch.device) -> None:
    """``call`` through cublasGemmStridedBatchedEx, for the calls no cuBLASLt algorithm
    takes, with torch's handle for this device, bound to its current stream with a workspace
    that CUDA-graph capture accepts. The default math mode leaves the choice of TF32 to the
    compute type alone; torch sets its own mode again before its next call."""
    one, zero = _SCALARS[np.float64 if product.compute == _COMPUTE_64F else np.float32]
    lib = _cuda.cublas()
    handle = torch.cuda.current_blas_handle()
    _status(lib.cublasSetMathMode(handle, _DEFAULT_MATH))
    op_b, op_a, n, m, k, ld_b, s_b, ld_a, s_a, ld_c, s_c, count = call.args
    type_b, type_a, type_c = product.types
    # Row-major C = A @ B is column-major C^T = B^T @ A^T.
    _status(lib.cublasGemmStridedBatchedEx(
        handle, op_b, op_a, n, m, k, one, pb, type_b, ld_b, s_b, pa, type_a, ld_a, s_a,
        zero, pc, type_c, ld_c, s_c, count, product.compute, _GEMM_DEFAULT))


def _plan(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, compute: int,
          copied: bool = False) -> _Product:
    """The cuBLAS calls of ``out = a @ b`` for operands of these shapes, strides and dtypes
    (checked here, once per layout, against cuBLAS's 32-bit sizes); ``a`` is the copy where
    ``copied``."""
    m, n, k = out.shape[-2], out.shape[-1], a.shape[-1]
    layouts = [_layout(t) for t in (a, b)]
    contiguous = tuple(lay is None for lay in layouts)
    a, b = (t.contiguous() if c else t for t, c in zip((a, b), contiguous))
    (op_a, ld_a), (op_b, ld_b) = (_layout(t) for t in (a, b))
    c_op, ld_c = _layout(out)
    assert c_op == _OP_N and out.stride(-1) == 1, "matmul writes row-major outputs"
    check(max(m, n, k, ld_a, ld_b, ld_c) <= _INT_MAX,
          lambda: f"a matrix of {m}x{k} @ {k}x{n} exceeds cuBLAS's 32-bit sizes; split the input")
    calls = []
    for offsets, count, strides in _batches(tuple(out.shape[:2]), (b, a, out)):
        check(count <= _INT_MAX, "too many matrices in one batch for cuBLAS")
        calls.append(_Call(
            tuple(o * t.element_size() for o, t in zip(offsets, (b, a, out))),
            (op_b, op_a, n, m, k, ld_b, strides[0], ld_a, strides[1], ld_c, strides[2], count),
            tuple(_alignment(ld * t.element_size(), s * t.element_size())
                  for ld, s, t in zip((ld_b, ld_a, ld_c), strides, (b, a, out))), {}))
    return _Product(copied, contiguous, tuple(calls),
                    tuple(_DATA_TYPE[t.dtype] for t in (b, a, out)), compute)


def _status(code: int) -> None:
    if code != 0:
        raise RuntimeError(f"cuBLAS returned status {code}")


# Grouped layers with few channels per group make products a fraction of a tensor-core tile
# wide (a grouped weight gradient's C_in / G rows). Where all groups together have at most
# this many such channels, one product over all groups, its weight block-diagonal (or its
# diagonal blocks kept), reads the big operand once with fuller tiles; its G-fold FLOPs stay
# below the time that reading takes where tensor cores run the product (TF32, float16,
# bfloat16).
DENSE_GROUPS_MAX_CHANNELS = 64


def dense_groups(dtype: torch.dtype, on_cuda: bool, groups: int, channels: int) -> bool:
    """Whether the products of ``groups`` groups of ``channels`` channels each (the short
    side of each group's product), of ``dtype`` operands, run as one dense product."""
    fast = dtype in (torch.float16, torch.bfloat16) or dtype == torch.float32 and uses_tf32()
    return on_cuda and fast and 1 < groups and groups * channels <= DENSE_GROUPS_MAX_CHANNELS
