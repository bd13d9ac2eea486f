"""The CUDA back end: CuPy, kernel compilation and launches, and the cuBLAS library.

Imported only when a CUDA tensor arrives. Kernels are compiled by NVRTC once per process
for each (device, dtype, number of spatial dims, index width, and the layer's taps where a
launch is large enough to specialise) and launched on PyTorch's current stream of the
tensors' own device; what a launch's shapes decide is worked out once per layout of its
tensors (Launch). The GEMM layer (gemm.py) calls the cuBLAS library torch loaded.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import time
from pathlib import Path
from typing import Callable, NamedTuple

import torch

from .shapes import Geometry

SOURCE = Path(__file__).with_name("col2im.cu")
CPP_TYPES = {torch.float32: "float", torch.float64: "double",
             torch.float16: "gemmconv::half_t", torch.bfloat16: "gemmconv::bfloat16_t"}
BLOCK = 256
MAX_BLOCKS = 1 << 20  # the kernels loop over the rest
# Launches of at least this many elements use kernels compiled for the layer's taps (one
# NVRTC compile per layer and dtype, cached); smaller ones share the generic kernels.
SPECIALIZE_MIN_ELEMENTS = 1 << 18
MAX_FIXED_TAPS = 512  # larger kernels unroll into too much code
GENERIC_PLANES = 8    # the most planes a generic col2im thread takes (generic_col2im_planes)
COL2IM_WIDTH = 4      # outputs per thread along the innermost dim, in the fixed col2im...
MAX_SPAN = 8          # ...rounded up to a multiple of the stride up to this many (col2im.cu)
IM2COL_WIDTH = 4      # the most grid positions per im2col thread (col2im.cu's im2col_elements),
IM2COL_SPAN_MAX_TAPS = 4   # where a kernel has at most this many taps (measured, NOTES.md)
IM2COL_DECODE_TAPS = 6     # decoding a thread's index costs about as much as copying this many taps
# The fixed col2im numbers its rows planes innermost (col2im.cu's row_position) where an
# outer dim is strided and a row has at most this many spans: a warp then straddles rows,
# which share their stride phase only in that order. Longer rows lose more than they gain
# (measured on the H200, benches/NOTES.md).
PLANES_INNER_MAX_SPANS = 32
# Several spans per fixed col2im thread, 32 apart along a row (col2im_spans), only where a
# row's spans fill at least this share of the lanes of its runs of 32 x spans: idle lanes
# still issue the run's instructions (2-D rows filling 67-68% measured 13-18% slower).
COL2IM_RUN_FILL = 0.75
# Planes per fixed col2im thread by the number of spatial dims, where outer dims are
# strided and an output receives at most COL2IM_PLANES_MAX_ENTRIES column entries
# (col2im_planes).
COL2IM_PLANES = {2: 2, 3: 4}
COL2IM_PLANES_MAX_ENTRIES = 4
# The fixed col2im fills the image first and gathers over the rows that receive column
# entries only where at most this share of the rows do, each output of them receiving at
# least this many entries through the outer dims (empty_rows_apart).
COL2IM_APART_MAX_SHARE = 0.25
COL2IM_APART_MIN_ENTRIES = 6
PACK_BYTES = 16   # the widest store (and load) an im2col thread issues (im2col_pack)
FILL_RUN = 8      # elements per lane of col2im.cu's fill (kFillRun)
WINDOW_RUNS = 8   # loads from a window of at most this many runs (col2im.cu's kMaxWindowRuns)

# Seconds spent compiling kernels in this process (reported apart from timings).
compile_seconds = 0.0


@functools.cache
def cupy():
    try:
        import cupy
    except ImportError as error:
        raise ImportError(
            "gemmconv needs CuPy for CUDA tensors: pip install 'gemmconv[cuda13]' "
            "(cupy-cuda13x) or 'gemmconv[cuda12]' (cupy-cuda12x)") from error
    return cupy


def on_device(device: torch.device):
    """Makes ``device`` current where it is not (switching costs microseconds a call, and
    most calls are on the current device)."""
    return contextlib.nullcontext() if torch.cuda.current_device() == device.index \
        else torch.cuda.device(device)


@functools.cache
def driver() -> ctypes.CDLL:
    """The CUDA driver. Kernels are launched with cuLaunchKernel on torch's current stream:
    a launch through CuPy's wrapper and stream context cost tens of microseconds of host
    time, which on small problems the GPU spends waiting (benches/NOTES.md)."""
    lib = ctypes.CDLL("libcuda.so.1")
    u, p = ctypes.c_uint, ctypes.c_void_p
    lib.cuLaunchKernel.argtypes = [p, u, u, u, u, u, u, u, p, p, p]
    lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.cuFuncSetAttribute.argtypes = [p, ctypes.c_int, ctypes.c_int]
    return lib


def _launch_status(code: int) -> None:
    if code != 0:
        name = ctypes.c_char_p()
        driver().cuGetErrorName(code, ctypes.byref(name))
        raise RuntimeError(f"gemmconv: cuLaunchKernel failed with {code} "
                           f"({(name.value or b'unknown').decode()})")


def col2im_span(g: Geometry, fixed: bool) -> int:
    """Outputs per col2im thread along the innermost dim: one in the generic kernel; in the
    fixed ones COL2IM_WIDTH, rounded up to a multiple of the stride where that stays within
    MAX_SPAN, so that each output's stride phase is a compile-time constant."""
    if not fixed:
        return 1
    stride = g.stride[-1]
    span = -(-COL2IM_WIDTH // stride) * stride
    return span if span <= MAX_SPAN else COL2IM_WIDTH


def im2col_span(g: Geometry, grid_width: int, fixed: bool) -> int:
    """Grid positions per im2col thread, 32 apart along the innermost dim; one in the
    generic kernel. For kernels of few taps the span up to IM2COL_WIDTH that costs the
    fewest warp instructions a row: a thread decodes its index once for its span, and a
    row's last warp issues its span's copies whether or not its lanes fall in the row (a
    row of 96 takes spans of three, where two would leave half a warp idle). (With more
    taps, several positions a thread measured slower on the H200.)"""
    if not fixed or g.taps > IM2COL_SPAN_MAX_TAPS:
        return 1
    lanes = lambda span: -(-grid_width // (32 * span)) * 32 * span   # launched per row
    return min(range(IM2COL_WIDTH, 0, -1),
               key=lambda span: lanes(span) * (IM2COL_DECODE_TAPS / span + g.taps))


def column_entries(g: Geometry) -> float:
    """About how many column entries an output receives: prod(kernel / stride)."""
    return math.prod(k / s for k, s in zip(g.kernel_size, g.stride))


def col2im_planes(g: Geometry, width: int, fixed: bool) -> int:
    """Planes per fixed col2im thread (col2im.cu's col2im_element), which share the
    decoding of its index and the tests of the outer dims' taps. Several where an outer dim
    is strided and has several taps, so that those tests are run-time stride-phase tests,
    and an output receives at most COL2IM_PLANES_MAX_ENTRIES column entries
    (column_entries), so that few loads follow them: COL2IM_PLANES by the number of dims,
    whose decoding grows with them. Such threads take one span each, in rows numbered
    plane by plane (col2im_spans, planes_inner). One elsewhere. Measured on the H200
    (benches/NOTES.md, changes 54 and 56)."""
    if (not fixed or g.nd == 1 or math.prod(g.kernel_size[:-1]) == 1
            or all(s == 1 for s in g.stride[:-1])
            or column_entries(g) > COL2IM_PLANES_MAX_ENTRIES):
        return 1
    return COL2IM_PLANES[g.nd]


def generic_col2im_planes(g: Geometry, channels: int) -> int:
    """Planes per thread of the generic col2im (col2im.cu's col2im_kernel) for a kernel too
    large to specialise (more than MAX_FIXED_TAPS taps): the largest divisor of the channels
    up to GENERIC_PLANES, so that the planes share what each output costs the most, finding
    its reaching taps (first_reaching_tap, per dim), and lie in one sample. FCN-32s's k64
    s32 col2im was bound by those integer instructions (benches/NOTES.md, changes 66-67).
    One elsewhere: small launches, whose threads are few already."""
    if g.taps <= MAX_FIXED_TAPS:
        return 1
    return max(r for r in range(1, GENERIC_PLANES + 1) if channels % r == 0)


def col2im_spans(g: Geometry, width: int, fixed: bool) -> int:
    """Spans per fixed col2im thread, 32 apart along a row of an image ``width`` wide
    (col2im.cu's col2im_element): a warp then decodes its row and tests the outer dims' taps
    once for all its spans. One where the outer dims have a single tap (nothing to share
    but the decode, which measured slower: the split routes' col2im), where threads take
    several planes (col2im_planes: sharing the tests over planes measured faster, and both
    at once cost registers), or where rows are numbered planes innermost (rows too short
    for a run). Otherwise four where an output receives at most about one column entry
    (prod(kernel / stride) <= 1), kernels whose threads do little but decode and store; two
    where the innermost stride is 1; else one: with an innermost stride spans hold up to
    eight outputs (col2im_span), and more of them a thread cost registers and occupancy
    (34 -> 53 registers, 18% slower, on 2d-strided-grouped's). And only where a row's spans
    fill COL2IM_RUN_FILL of its runs' lanes. Measured on the H200, benches/NOTES.md
    (change 33)."""
    if (not fixed or math.prod(g.kernel_size[:-1]) == 1 or col2im_planes(g, width, fixed) > 1
            or planes_inner(g, width, fixed)):
        return 1
    count = -(-width // col2im_span(g, fixed))   # a row's spans, give or take a first partial one
    light = column_entries(g) <= 1
    for spans in (4, 2) if light else (2,) if g.stride[-1] == 1 else ():
        if count >= COL2IM_RUN_FILL * -(-count // (32 * spans)) * 32 * spans:
            return spans
    return 1


def one_phase(g: Geometry, d: int) -> bool:
    """Whether every tap of dim ``d`` lands on one stride phase of a strided dim (col2im.cu's
    one_phase): one tap, or a dilation that is a multiple of the stride."""
    return g.stride[d] > 1 and (g.kernel_size[d] == 1 or g.dilation[d] % g.stride[d] == 0)


def empty_rows_apart(g: Geometry, fixed: bool) -> bool:
    """Whether the fixed col2im fills the image with the bias first and then gathers over
    the rows that can receive column entries only (col2im.cu's fill_element, and
    col2im_element with EmptyRowsApart): where outer dims are one-phase (one_phase), so
    that only every stride-th row along each receives entries, at most
    COL2IM_APART_MAX_SHARE of the rows do, and a receiving output gets at least
    COL2IM_APART_MIN_ENTRIES entries through the outer dims' taps, so that the gathering
    rows are the heavy ones. The fill writes those rows twice. Measured on the H200
    (benches/NOTES.md, change 59): a quarter of the rows receiving nine entries each
    (3d-stride2-dil2's kernel), col2im 78 -> 88-90% of copy; a quarter receiving three (the
    same case's forward, whose col2im sums the depth's taps), that forward 8% slower; half
    the rows receiving (2d-strided-grouped's kernel and forward), 7-10% slower."""
    outer = range(g.nd - 1)
    share = math.prod(1 / g.stride[d] for d in outer if one_phase(g, d))
    entries = math.prod(g.kernel_size[d] if one_phase(g, d) else g.kernel_size[d] / g.stride[d]
                        for d in outer)
    return fixed and share <= COL2IM_APART_MAX_SHARE and entries >= COL2IM_APART_MIN_ENTRIES


def receiving_rows(g: Geometry, image: tuple[int, ...], padding: tuple[int, ...]) -> int:
    """The rows of one image plane whose coordinates along the one-phase outer dims have a
    padded coordinate that is a multiple of the stride (col2im.cu's receiving_rows)."""
    rows = 1
    for d in range(g.nd - 1):
        if one_phase(g, d):
            first = -padding[d] % g.stride[d]
            rows *= max(0, -(-(image[d] - first) // g.stride[d]))
        else:
            rows *= image[d]
    return rows


def planes_inner(g: Geometry, width: int, fixed: bool) -> bool:
    """Whether col2im numbers the rows of an image ``width`` wide with the plane varying
    fastest (see PLANES_INNER_MAX_SPANS); not where threads take several planes
    (col2im_planes), whose stores for one plane would then skip rows."""
    return fixed and any(s > 1 for s in g.stride[:-1]) and \
        -(-width // col2im_span(g, fixed)) + 1 <= PLANES_INNER_MAX_SPANS and \
        col2im_planes(g, width, fixed) == 1


class Layout(NamedTuple):
    """How the threads of one launch share out the work (all one in the generic kernels but
    col2im's planes per thread, generic_col2im_planes): col2im's outputs per span, spans per
    thread, row order, planes per thread and whether
    it fills the image first (empty_rows_apart); im2col's positions per thread (32 apart),
    their runs stored as one access (see im2col_pack), read from a window of the image row
    (im2col_windowed), its order of threads (see im2col_samples_inner) and whether it takes
    a thread per outer tap (im2col_split_taps)."""
    span: int
    spans_per_thread: int
    planes_inner: bool
    planes_per_thread: int
    empty_rows_apart: bool
    im2col_positions: int
    im2col_pack: int = 1
    im2col_windowed: bool = False
    im2col_samples_inner: bool = False
    im2col_split_taps: bool = False


def layout(g: Geometry, grid_width: int, image_width: int, fixed: bool) -> Layout:
    """The layout of a launch over grid rows ``grid_width`` and image rows ``image_width``
    wide (the innermost sizes)."""
    return Layout(col2im_span(g, fixed), col2im_spans(g, image_width, fixed),
                  planes_inner(g, image_width, fixed), col2im_planes(g, image_width, fixed),
                  empty_rows_apart(g, fixed), im2col_span(g, grid_width, fixed))


@functools.cache
def _kernels(device_index: int, dtype: torch.dtype, nd: int, index: str,
             taps: tuple[int, ...] | None, span: int, spans_per_thread: int,
             rows_planes_inner: bool, planes_per_thread: int, empty_rows_apart: bool,
             im2col_positions: int,
             im2col_pack: int, im2col_windowed: bool, im2col_samples_inner: bool,
             im2col_split_taps: bool) -> dict:
    """col2im, im2col and col2im's bias fill for one dtype, dimensionality and index type:
    generic (taps given at run time) when ``taps`` is None, else specialised to those taps,
    with col2im's ``span`` of outputs, its spans per thread, order of rows, planes per
    thread and whether it takes the empty rows apart, and im2col's positions per thread,
    runs, order of threads and split of the outer taps."""
    kind = "kernel" if taps is None else "fixed"
    specialisation = "" if taps is None else ", " + ", ".join(map(str, taps))
    layout = "" if taps is None else \
        f", {span}, {spans_per_thread}, {str(rows_planes_inner).lower()}, {planes_per_thread}, " \
        f"{str(empty_rows_apart).lower()}"
    layouts = {"col2im": layout,
               "im2col": "" if taps is None else f", {im2col_positions}, {im2col_pack}, "
                                                 f"{str(im2col_windowed).lower()}, "
                                                 f"{str(im2col_samples_inner).lower()}, "
                                                 f"{str(im2col_split_taps).lower()}"}
    if taps is None:   # the generic col2im's planes per thread (generic_col2im_planes)
        layouts["col2im"] = f", {planes_per_thread}"
    names = {op: f"gemmconv::{op}_{kind}<{CPP_TYPES[dtype]}, {index}, {nd}"
                 f"{layouts[op]}{specialisation}>"
             for op in ("col2im", "im2col")}
    names["fill"] = f"gemmconv::fill_kernel<{CPP_TYPES[dtype]}, {index}, {nd}>"
    return _compile(device_index, names)


def _compile(device_index: int, names: dict[str, str]) -> dict:
    """The kernels ``names`` (op -> template instance) of col2im.cu, compiled by NVRTC for
    one device: op -> CUfunction handle, and "module" -> the module, kept loaded with them."""
    global compile_seconds
    cp = cupy()
    start = time.perf_counter()
    with cp.cuda.Device(device_index):
        module = cp.RawModule(code=SOURCE.read_text(), options=("-std=c++17",),
                              name_expressions=tuple(names.values()))
        # CUfunction handles for cuLaunchKernel; the module stays loaded while cached here.
        kernels = {op: module.get_function(name).kernel.ptr for op, name in names.items()}
    kernels["module"] = module
    compile_seconds += time.perf_counter() - start
    return kernels


def _struct(fields: list[int]) -> ctypes.Array:
    # Passed to the kernel by value: an array of int64s is laid out as a struct of them.
    return (ctypes.c_int64 * len(fields))(*fields)


class Launch(NamedTuple):
    """What a launch's shapes decide: the arguments of the compiled kernels it takes (see
    _kernels), its blocks, and its arguments passed by value (with their addresses); and
    the blocks of a fill before it (0 for none; see empty_rows_apart)."""
    kernels: tuple
    blocks: int
    structs: tuple[ctypes.Array, ...]
    addresses: tuple[int, ...]
    fill_blocks: int = 0
    interleaved: bool = False   # the channels-innermost kernels (_interleaved_kernels)


# The launches a layer makes repeat call after call. Working one out (layout, blocks, the
# argument structs) took 13-16 us of host time on a CPU, more on the H200's host, where on
# small problems the GPU waits for it; so each is worked out once per the shapes, strides,
# dtype, device and alignment of its tensors, its geometry and whether it is specialised.
# Bounded by MAX_LAUNCHES (then cleared: a process that keeps changing shapes pays the
# working out again, nothing else). Whoever changes this module's rules clears it.
_launches: dict[tuple, Launch] = {}
MAX_LAUNCHES = 4096


def _signature(t: torch.Tensor) -> tuple:
    """What a launch's plan depends on, of one of its tensors."""
    return t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % PACK_BYTES == 0


def _specialised(g: Geometry, work: int) -> bool:
    """Whether a launch over ``work`` output elements takes the kernels compiled for its
    taps (SPECIALIZE_MIN_ELEMENTS, MAX_FIXED_TAPS)."""
    return work >= SPECIALIZE_MIN_ELEMENTS and g.taps <= MAX_FIXED_TAPS


def _launch_for(key: tuple, work_out: Callable[[], Launch]) -> Launch:
    launch = _launches.get(key)
    if launch is None:
        if len(_launches) >= MAX_LAUNCHES:
            _launches.clear()
        launch = _launches[key] = work_out()
    return launch


def _plan(like: torch.Tensor, g: Geometry, extent: list[int], widths: tuple[int, int],
          fixed: bool, threads: Callable[[Layout], int], largest_index: int, pack: int = 1,
          windowed: bool = False, samples_inner: bool = False,
          channels: int | None = None,
          fill_threads: Callable[[Layout], int] | None = None) -> Launch:
    """The launch of ``threads(layout)`` threads over tensors like ``like``. The layout, and
    so the module, is chosen by the innermost grid and image sizes, ``widths``, for both
    ops, so that a layer's forward and backward share one module; an im2col whose runs of
    ``pack`` positions can be stored as one access (read from a window of the image row
    where ``windowed``), or that orders its threads ``samples_inner``, takes a module of
    its own (the fixed kernels only), as does a col2im whose ``channels`` are not a
    multiple of the layout's planes per thread (it takes as many as divide them). Where the
    layout takes the empty rows apart, ``fill_threads(layout)`` threads fill the image
    first."""
    shares = layout(g, *widths, fixed)
    if channels is not None and not fixed:
        shares = shares._replace(planes_per_thread=generic_col2im_planes(g, channels))
    elif channels is not None and channels % shares.planes_per_thread:
        shares = shares._replace(planes_per_thread=math.gcd(channels, shares.planes_per_thread))
    if fixed and pack > 1:
        shares = shares._replace(im2col_positions=1, im2col_pack=pack, im2col_windowed=windowed)
    if fixed and samples_inner:
        shares = shares._replace(im2col_samples_inner=True)
    elif fixed and shares.im2col_positions == 1 and im2col_split_taps(g, shares.im2col_pack):
        shares = shares._replace(im2col_split_taps=True)
    blocks = min(math.ceil(threads(shares) / BLOCK), MAX_BLOCKS)
    fills = fill_threads(shares) if fill_threads is not None and shares.empty_rows_apart else 0
    fill_blocks = min(math.ceil(fills / BLOCK), MAX_BLOCKS)
    # 32-bit indices where no index, nor a grid-stride loop's last step, can overflow.
    index = "int" if max(largest_index, fills) + max(blocks, fill_blocks) * BLOCK < 2**31 \
        else "long long"
    kernels = (like.device.index, like.dtype, g.nd, index,
               tuple(g.taps_fields()) if fixed else None, *shares)
    structs = (_struct(extent),) if fixed else (_struct(g.taps_fields()), _struct(extent))
    return Launch(kernels, blocks, structs, tuple(map(ctypes.addressof, structs)), fill_blocks)


def _launch_at(op: str, launch: Launch, device: torch.device, addresses: list[int],
               blocks: int | None = None) -> None:
    """Launches ``op`` on torch's current stream of ``device``, over the launch's blocks or
    ``blocks``, with its tensor arguments given by address (0 for None)."""
    kernel = (_interleaved_kernels if launch.interleaved else _kernels)(*launch.kernels)[op]
    _launch(kernel, device, (blocks or launch.blocks, 1, 1), BLOCK, 0, launch.addresses,
            addresses)


def _launch(kernel: int, device: torch.device, grid: tuple, threads: int, shared: int,
            structs: tuple, addresses: list[int]) -> None:
    """cuLaunchKernel of ``kernel`` on torch's current stream of ``device``: its arguments
    the structs at ``structs`` (addresses of their values), then the tensors at
    ``addresses``."""
    # cuLaunchKernel reads each argument through a pointer to its value: the structs', and
    # the tensors' addresses side by side in one array (one object to build, not one each).
    values = (ctypes.c_uint64 * len(addresses))(*addresses)
    first = ctypes.addressof(values)
    params = (ctypes.c_void_p * (len(structs) + len(addresses)))(
        *structs, *range(first, first + 8 * len(addresses), 8))
    with on_device(device):
        stream = raw_stream(device)
        _launch_status(driver().cuLaunchKernel(kernel, *grid, threads, 1, 1, shared, stream,
                                               params, None))


def run_col2im(launch: Launch, device: torch.device, columns: int, bias: int, out: int) -> None:
    """The launches of :func:`col2im` (or :func:`col2im_interleaved`) planned as ``launch``
    (:func:`col2im_launch`, :func:`interleaved_launch`), on tensors at these
    addresses (bias 0 for none): for callers that replay a call (ops._Replay)."""
    if launch.interleaved:
        _launch_at("col2im", launch, device, [columns, bias, out])
        return
    if launch.fill_blocks:
        _launch_at("fill", launch, device, [bias, out], blocks=launch.fill_blocks)
    if launch.blocks:   # none where no row receives entries: the fill wrote them all
        _launch_at("col2im", launch, device, [columns, bias, out])


def raw_stream(device: torch.device) -> int:
    """The handle of torch's current stream on ``device``, read as torch's generated code
    reads it: torch.cuda.current_stream() builds a Stream object first, 4 us of host time
    on the H200's host."""
    return torch._C._cuda_getCurrentRawStream(device.index)


def plane_stride(image: torch.Tensor) -> int | None:
    """Elements between the planes of ``image (P, *image)``; None unless each plane is
    contiguous, as the kernels read and write them."""
    expected = 1
    for size, stride in reversed(list(zip(image.shape[1:], image.stride()[1:]))):
        if size > 1 and stride != expected:
            return None
        expected *= size
    return image.stride(0)


def _reach(t: torch.Tensor) -> int:
    """Elements from ``t``'s first to one past its last, whatever its strides."""
    return 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) if t.numel() else 0


def col2im(columns: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor, g: Geometry,
           padding: tuple[int, ...]) -> None:
    """``out (P, *image)`` = col2im of ``columns (S, C, K, *grid)`` (any strides, the
    innermost 1), plus ``bias (C,)``."""
    if out.numel() == 0:
        return
    launch = col2im_launch(columns, out, g, padding)
    bias = None if bias is None else bias.contiguous()
    run_col2im(launch, out.device, columns.data_ptr(), 0 if bias is None else bias.data_ptr(),
               out.data_ptr())


def col2im_launch(columns: torch.Tensor, out: torch.Tensor, g: Geometry,
                  padding: tuple[int, ...]) -> Launch:
    """The launch :func:`col2im` makes for tensors like these (worked out once per their
    layouts)."""
    fixed = _specialised(g, out.numel())
    key = ("col2im", g, padding, fixed, *_signature(columns), *_signature(out))
    return _launch_for(key, lambda: _col2im_plan(columns, out, g, padding, fixed))


def _col2im_plan(columns: torch.Tensor, out: torch.Tensor, g: Geometry,
                 padding: tuple[int, ...], fixed: bool) -> Launch:
    image = tuple(out.shape[1:])
    stride = plane_stride(out)
    assert stride is not None, "col2im writes contiguous planes"
    assert columns.stride(-1) == 1 or columns.shape[-1] <= 1, "columns' grid rows are contiguous"
    grid = tuple(columns.shape[3:])
    extent = g.extent_fields(columns, stride, image, padding)
    width = image[-1]
    rows = out.numel() // width

    def threads(shares: Layout) -> int:
        # A row's first span may start before it (col2im.cu's first_span): one more per row;
        # one output a thread numbers them phase by phase (col2im.cu's phase_slots).
        spans, run = -(-width // shares.span) + 1, 32 * shares.spans_per_thread
        if shares.span == 1:
            spans = -(-spans // g.stride[-1]) * g.stride[-1]
        groups = (receiving_rows(g, image, padding) * planes if shares.empty_rows_apart
                  else rows) // shares.planes_per_thread
        return groups * (spans if run == 32 else -(-spans // run) * 32)

    def fill_threads(shares: Layout) -> int:
        # A warp a run of 256 elements of a plane (col2im.cu's fill_elements).
        return planes * -(-math.prod(image) // (32 * FILL_RUN)) * 32
    planes = columns.shape[0] * columns.shape[1]
    return _plan(columns, g, extent, (grid[-1], width), fixed, threads,
                 max(_reach(columns), planes * stride), channels=columns.shape[1],
                 fill_threads=fill_threads)


def im2col(image_tensor: torch.Tensor, out: torch.Tensor, g: Geometry,
           padding: tuple[int, ...]) -> None:
    """``out (S, C, K, *grid)`` (any strides, the innermost 1) = im2col of
    ``image_tensor (P, *image)``."""
    if out.numel() == 0:
        return
    if plane_stride(image_tensor) is None:
        image_tensor = image_tensor.contiguous()
    run_im2col(im2col_launch(image_tensor, out, g, padding), out.device, image_tensor.data_ptr(),
               out.data_ptr())


def im2col_launch(image_tensor: torch.Tensor, out: torch.Tensor, g: Geometry,
                  padding: tuple[int, ...]) -> Launch:
    """The launch :func:`im2col` makes for tensors like these (worked out once per their
    layouts; ``image_tensor``'s planes contiguous)."""
    fixed = _specialised(g, out.numel())
    key = ("im2col", g, padding, fixed, *_signature(image_tensor), *_signature(out))
    return _launch_for(key, lambda: _im2col_plan(image_tensor, out, g, padding, fixed))


def run_im2col(launch: Launch, device: torch.device, image: int, out: int) -> None:
    """The launch of :func:`im2col` (or :func:`im2col_interleaved`) planned as ``launch``, on
    tensors at these addresses: for callers that replay a call (ops._BackwardReplay)."""
    _launch_at("im2col", launch, device, [image, out])


def _im2col_plan(image_tensor: torch.Tensor, out: torch.Tensor, g: Geometry,
                 padding: tuple[int, ...], fixed: bool) -> Launch:
    planes, image = image_tensor.shape[0], tuple(image_tensor.shape[1:])
    stride = plane_stride(image_tensor)
    assert out.stride(-1) == 1 or out.shape[-1] <= 1, "columns' grid rows are contiguous"
    grid = tuple(out.shape[3:])
    extent = g.extent_fields(out, stride, image, padding)
    width = grid[-1]
    rows = out.numel() // g.taps // width

    def threads(shares: Layout) -> int:
        span = shares.im2col_positions
        if span > 1:
            return rows * -(-width // (32 * span)) * 32
        split = math.prod(g.kernel_size[:-1]) if shares.im2col_split_taps else 1
        return rows * split * (width // shares.im2col_pack)
    windowed = im2col_windowed(g, image_tensor, padding)
    return _plan(image_tensor, g, extent, (width, image[-1]), fixed, threads,
                 max(_reach(out), planes * stride), pack=im2col_pack(g, out, windowed),
                 windowed=windowed, samples_inner=im2col_samples_inner(g, out))


def im2col_pack(g: Geometry, out: torch.Tensor, windowed: bool) -> int:
    """Grid positions an im2col thread stores as one PACK_BYTES access per tap (col2im.cu's
    spread_runs and spread_elements), or 1: where the grid's innermost size, every stride
    of the columns ``out`` and their address are multiples of the run, at stride 1 along
    the innermost dim or where the image rows allow ``windowed`` runs. (The kernels take
    any stride, but strided runs loaded element by element measured 4-8% slower than one
    position a thread on the H200.)"""
    aligned = _whole_runs(out)
    return PACK_BYTES // out.element_size() if aligned and (g.stride[-1] == 1 or windowed) else 1


def im2col_split_taps(g: Geometry, pack: int) -> bool:
    """Whether im2col takes a thread per run of ``pack`` positions and tap of the outer dims
    (col2im.cu's im2col_element with SplitTaps) instead of one for all taps: where the
    outer dims have several taps and the innermost several, so that each thread still
    stores a run per innermost tap. A thread per run and all taps waits on one window load
    after another, and splitting them over threads measured 3-17 points of copy faster on
    every such case on the H200 (3d-strided-grouped's 78 -> 88%); one position a thread
    (pack 1) measured up to twice as slow split, its few scalar stores no longer paying for
    the decoding (benches/NOTES.md, change 57)."""
    return pack > 1 and g.kernel_size[-1] > 1 and math.prod(g.kernel_size[:-1]) > 1


def im2col_windowed(g: Geometry, image: torch.Tensor, padding: tuple[int, ...]) -> bool:
    """Whether those runs can be read from a window of whole aligned runs of the image row,
    loaded once for all the innermost dim's taps (col2im.cu's spread_runs), rather than
    element by element: where the reach of a run's positions and taps fits a window of
    WINDOW_RUNS runs, and the row's width, the image's strides and its address are
    multiples of the run, so that each run of the row lies all inside it or all outside."""
    pack = PACK_BYTES // image.element_size()
    reach = -padding[-1] % pack + (pack - 1) * g.stride[-1] + (g.kernel_size[-1] - 1) * g.dilation[-1]
    return -(-(reach + 1) // pack) <= WINDOW_RUNS and _whole_runs(image)


def _whole_runs(t: torch.Tensor) -> bool:
    """Whether ``t``'s innermost size, its other strides and its address are whole runs of
    PACK_BYTES, so that its rows split into aligned runs."""
    pack = PACK_BYTES // t.element_size()
    sizes = (t.shape[-1], *t.stride()[:-1])
    return t.data_ptr() % PACK_BYTES == 0 and all(s % pack == 0 for s in sizes)


def im2col_samples_inner(g: Geometry, out: torch.Tensor) -> bool:
    """Whether im2col numbers its threads with the samples between the outer grid dim and
    the inner ones (col2im.cu's im2col_element): where the samples of ``out (S, C, K,
    *grid)`` lie closer together than its channels and outer grid rows, as in the row
    products' layout, so that consecutive threads write consecutive columns; and where the
    kernel has several taps, so that im2col writes several times what it reads. (A
    reorder of one tap measured 7-16% slower in that order, which reads samples' rows
    apart, and a gather of five taps 29% faster, on the H200; benches/NOTES.md.)"""
    strides, shape = out.stride(), out.shape
    return g.taps > 1 and out.dim() > 4 and shape[0] > 1 and all(
        strides[0] < s for s, n in ((strides[1], shape[1]), (strides[3], shape[3])) if n > 1)


# ---------------------------------------------------------------------------------------
# Channels innermost (col2im.cu's Interleaved): channels_last images, and columns
# (S, *grid, G, K, C / G) whose every dim but the samples' is dense.

# Runs of channels a thread of the channels-innermost kernels takes, at most (col2im.cu's
# interleaved_lanes): with one, decoding its position took most of a thread's instructions.
INTERLEAVED_RUNS = 4
# The most bytes of each tap an im2col store instruction writes where a strided kernel's
# im2col takes two runs a thread, not four (interleaved_runs).
STRIDED_IM2COL_BYTES = 64


@functools.cache
def _interleaved_kernels(device_index: int, dtype: torch.dtype, nd: int, index: str,
                         pack: int, runs: int, taps: tuple[int, ...] | None) -> dict:
    """The channels-innermost col2im and im2col for one dtype, dimensionality, index type,
    ``runs`` runs of ``pack`` channels a thread: generic where ``taps`` is None, else
    compiled for those taps."""
    kind = "kernel" if taps is None else "fixed"
    specialisation = "" if taps is None else ", " + ", ".join(map(str, taps))
    return _compile(device_index, {
        op: f"gemmconv::{op}_interleaved_{kind}<{CPP_TYPES[dtype]}, {index}, {nd}, {pack}, "
            f"{runs}{specialisation}>" for op in ("col2im", "im2col")})


def interleaved_pack(group_channels: int, *tensors: torch.Tensor) -> int:
    """Channels a thread of the channels-innermost kernels moves as one access: the most,
    up to PACK_BYTES, that divide a group's channels and every sample stride, where every
    tensor's address is PACK_BYTES-aligned; else 1."""
    pack = PACK_BYTES // tensors[0].element_size()
    if any(t.data_ptr() % PACK_BYTES for t in tensors):
        return 1
    while pack > 1 and (group_channels % pack or any(t.stride(0) % pack for t in tensors)):
        pack //= 2
    return pack


def interleaved_runs(op: str, g: Geometry, channels: int, pack: int, element_size: int,
                     fixed: bool) -> int:
    """Runs of ``pack`` channels a thread of channels-innermost ``op`` takes (a divisor of
    ``channels / pack``): as many as divide them, up to INTERLEAVED_RUNS, or for a kernel
    too large to specialise as many as generic_col2im_planes gives.

    A strided kernel's im2col takes two where four would store at most
    STRIDED_IM2COL_BYTES of each tap an instruction (an im2col warp's threads are
    consecutive taps of one grid position, a thread's runs C / R channels apart). Measured
    on the H200 (benches/NOTES.md, session 57): the output gradients of the three strided
    cases, float32 and bfloat16, ran 1.08-1.98x faster with two; every stride-1 case as
    fast or faster with four (bfloat16's 2d-3x7-512 1.33x), at the same bytes a tap. Why
    the stride decides and the bytes do not, those runs do not show."""
    runs = generic_col2im_planes(g, channels // pack) if not fixed and g.taps > MAX_FIXED_TAPS \
        else math.gcd(channels // pack, INTERLEAVED_RUNS)
    if op == "im2col" and runs == 4 and max(g.stride) > 1 and \
            channels // runs * element_size <= STRIDED_IM2COL_BYTES:
        return 2
    return runs


def _interleaved_launch(op: str, like: torch.Tensor, g: Geometry, fields: list[int],
                        pack: int, elements: int, largest_index: int) -> Launch:
    """A launch of ``op`` over ``elements`` outputs whose channels (fields[1]) a thread
    takes in runs of ``pack``, as many runs as :func:`interleaved_runs` gives (they share
    the position's decoding, and col2im's finding the reaching taps)."""
    fixed = _specialised(g, elements)
    runs = interleaved_runs(op, g, fields[1], pack, like.element_size(), fixed)
    threads = elements // (pack * runs)
    blocks = min(math.ceil(threads / BLOCK), MAX_BLOCKS)
    index = "int" if largest_index + blocks * BLOCK < 2**31 else "long long"
    structs = (_struct(fields),) if fixed else (_struct(g.taps_fields()), _struct(fields))
    kernels = (like.device.index, like.dtype, g.nd, index, pack, runs,
               tuple(g.taps_fields()) if fixed else None)
    return Launch(kernels, blocks, structs, tuple(map(ctypes.addressof, structs)),
                  interleaved=True)


def _interleaved_fields(columns: torch.Tensor, image: torch.Tensor, g: Geometry,
                        padding: tuple[int, ...]) -> list[int]:
    """col2im.cu's ``Interleaved<ND>`` for ``columns (S, *grid, G, K, C / G)`` and
    ``image (S, *image, C)``, as a flat list of int64s."""
    nd = g.nd
    assert plane_stride(columns) is not None and plane_stride(image) is not None, \
        "channels-innermost tensors are dense but for the samples' stride"
    samples, grid, channels = image.shape[0], columns.shape[1:1 + nd], image.shape[-1]
    return [samples, channels, columns.shape[-1], image.stride(0), columns.stride(0), *grid,
            *image.shape[1:1 + nd], *padding]


def col2im_interleaved(columns: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor,
                       g: Geometry, padding: tuple[int, ...]) -> None:
    """``out (S, *image, C)`` = col2im of ``columns (S, *grid, G, K, C / G)``, plus
    ``bias (C,)``."""
    if out.numel() == 0:
        return
    bias = None if bias is None else bias.contiguous()
    run_col2im(interleaved_launch("col2im", columns, out, g, padding), out.device,
               columns.data_ptr(), 0 if bias is None else bias.data_ptr(), out.data_ptr())


def im2col_interleaved(image: torch.Tensor, out: torch.Tensor, g: Geometry,
                       padding: tuple[int, ...]) -> None:
    """``out (S, *grid, G, K, C / G)`` = im2col of ``image (S, *image, C)``."""
    if out.numel() == 0:
        return
    run_im2col(interleaved_launch("im2col", out, image, g, padding), out.device,
               image.data_ptr(), out.data_ptr())


def interleaved_launch(op: str, columns: torch.Tensor, image: torch.Tensor, g: Geometry,
                       padding: tuple[int, ...]) -> Launch:
    """The launch of channels-innermost ``op`` ("col2im" or "im2col") over ``columns (S,
    *grid, G, K, C / G)`` and ``image (S, *image, C)``, worked out once per their layouts."""
    out = image if op == "col2im" else columns

    def work_out() -> Launch:
        pack = interleaved_pack(columns.shape[-1], columns, image)
        return _interleaved_launch(op, out, g, _interleaved_fields(columns, image, g, padding),
                                   pack, out.numel(), max(_reach(columns), _reach(image)))
    key = (op, "interleaved", g, padding, *_signature(columns), *_signature(image))
    return _launch_for(key, work_out)


def _loaded(name: str) -> str:
    """The path of the library ``name`` (e.g. "libcublasLt.so") torch loaded."""
    torch.cuda.current_blas_handle()                  # makes sure torch has loaded cuBLAS
    with open("/proc/self/maps") as maps:
        paths = sorted({line.split()[-1] for line in maps
                        if f"/{name}" in line and line.split()[-1].startswith("/")})
    if not paths:
        raise RuntimeError(f"gemmconv could not find the {name} torch loaded")
    return paths[0]


@functools.cache
def cublas() -> ctypes.CDLL:
    """The cuBLAS library torch loaded, called directly through ctypes with torch's own
    handle (see gemm.py): CuPy's cuBLAS wrappers refuse to run under CUDA-graph capture."""
    lib = ctypes.CDLL(_loaded("libcublas.so"))
    p, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    lib.cublasSetMathMode.argtypes = [p, i]
    lib.cublasGemmStridedBatchedEx.argtypes = [p, i, i, i, i, i, p, p, i, i, ll, p, i, i, ll,
                                               p, p, i, i, ll, i, i, i]
    return lib


@functools.cache
def cublas_lt() -> ctypes.CDLL:
    """The cuBLASLt library torch loaded (gemm.py's products, their algorithms chosen once)."""
    lib = ctypes.CDLL(_loaded("libcublasLt.so"))
    p, i, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    lib.cublasLtCreate.argtypes = [p]
    lib.cublasLtMatmulDescCreate.argtypes = [p, i, i]
    lib.cublasLtMatmulDescSetAttribute.argtypes = [p, i, p, size]
    lib.cublasLtMatrixLayoutCreate.argtypes = [p, i, ctypes.c_uint64, ctypes.c_uint64,
                                               ctypes.c_int64]
    lib.cublasLtMatrixLayoutSetAttribute.argtypes = [p, i, p, size]
    lib.cublasLtMatmulPreferenceCreate.argtypes = [p]
    lib.cublasLtMatmulPreferenceSetAttribute.argtypes = [p, i, p, size]
    lib.cublasLtMatmulPreferenceDestroy.argtypes = [p]
    lib.cublasLtMatmulAlgoGetHeuristic.argtypes = [p, p, p, p, p, p, p, i, p, p]
    lib.cublasLtMatmul.argtypes = [p] * 14 + [size, p]
    return lib


@functools.cache
def cublas_lt_handle(device_index: int) -> ctypes.c_void_p:
    """A cuBLASLt handle for the device (it holds no stream: each call names its own)."""
    handle = ctypes.c_void_p()
    with torch.cuda.device(device_index):
        status = cublas_lt().cublasLtCreate(ctypes.byref(handle))
    if status != 0:
        raise RuntimeError(f"cublasLtCreate returned status {status}")
    return handle


# The float32 channels_last weight gradient on mma.sync (col2im.cu's tf32_weight_gradient,
# fused.float32_weight_form's "mma" form). Its constants, as col2im.cu's kWgrad*.
WGRAD_STRIP, WGRAD_TILE, WGRAD_PITCH = 32, 64, 72
# Taps (row taps x W taps) a block at most, and the warps the grid counts an SM to hold: the
# forms session 69 measured (9 warps at 168 registers: one block an SM).
WGRAD_TAPS = 9
# Whether tf32_weight_gradient deals a block's tiles of A to warps that an SM's four
# schedulers share evenly (col2im.cu's wgrad_warp_tile). Unbalanced, a warp holds four tiles
# of 16 input channels of one W tap. Balanced, where k_w is a multiple of 3, one of each of
# three W taps (3 x 3 taps in 12 warps, where 9 leave one scheduler three: mma.sync ran at
# 231 TFLOP/s at 9 warps, 301 at 12); where 10 warps take 5 W taps, one of each of five (8
# warps: 252 at 10, 294 at 8 of five tiles); else, with 5-7 warps (a block an SM), two of
# one tap (1 x 7 taps in 14 warps, where 7 leave a scheduler under two to hide latency).
# Session 73 (H100), the kernel alone: 2d-1024 5.03 -> 3.83 ms, 2d-3x7-512 3.26 -> 3.01,
# 2d-64to128 4.50 -> 4.27, the same bits.
WGRAD_BALANCED = True
SHARED_LIMIT = 227 * 1024   # an H100's or H200's opt-in shared memory a block
# Its grid fills this many SMs (an H100's or H200's) on every card: the blocks' partial sums,
# summed in a fixed order, then give the same bits on any of them, and their memory is
# known without a device (fused.backward_bytes).
WGRAD_SMS = 132


class WgradForm(NamedTuple):
    """tf32_weight_gradient's template arguments, in order."""
    row_taps: int    # rows of the kernel a block
    rows: int        # output rows a stage
    stages: int      # the ring's depth
    out_tiles: int   # tiles of 64 output channels a block
    w_taps: int      # W taps a warp: 1, 3 or 5 (a tile of A of each)
    m_tiles: int     # tiles of A (16 input channels) a warp and W tap: 4, 2 or 1 (w_taps > 1)


def _wgrad_shared(kernel: tuple, dilation: tuple, form: WgradForm) -> int:
    box_rows = WGRAD_STRIP + (kernel[1] - 1) * dilation[1]
    boxes = form.rows + (form.row_taps - 1) * dilation[0]
    return form.stages * (form.out_tiles * form.rows * WGRAD_STRIP + boxes * box_rows) * \
        WGRAD_PITCH * 4


def rows_weight_gradient_form(kernel: tuple, dilation: tuple, out_channels: int,
                              balanced: bool | None = None) -> WgradForm | None:
    """The :class:`WgradForm` of tf32_weight_gradient for a 2-D kernel, or None where none
    fits: at most WGRAD_TAPS taps a block, a warp's four tiles of A of one tap (or others
    where `balanced`, by default :data:`WGRAD_BALANCED`). The forms measured fastest
    (benches/NOTES.md, session 69: 2d-1024 5.27 ms in blocks of three row taps and stages
    of 4 rows, against 6.41 of 2 rows and 7.00 of 1; 2d-3x7-512 3.21 in blocks of one row
    tap and stages of 2 rows, against 3.63 of 1; session 74: more, below), fewer rows where
    those do not fit shared memory. Blocks of one row tap take two output tiles where the
    warps allow, so that each box serves both (2d-64to128: 3x5, 128 output channels)."""
    kh, kw = kernel
    if kw > WGRAD_TAPS:
        return None
    taps = min(kh, 3, WGRAD_TAPS // kw)
    out_tiles = 2 if taps == 1 and out_channels % (2 * WGRAD_TILE) == 0 and \
        2 * kw <= 10 else 1   # (the two-tile forms measured: session 70, 10 warps at most)
    balanced = WGRAD_BALANCED if balanced is None else balanced
    warps = taps * kw * out_tiles   # (of four tiles; col2im.cu's wgrad_max_warps: at most
    w_taps, m_tiles = 1, 4          # 16 warps of two tiles, 12 of 3-4, 8 of five)
    if balanced and kw % 3 == 0 and warps * 4 // 3 <= 12:
        w_taps, m_tiles = 3, 1
    elif balanced and kw % 5 == 0 and warps == 10:
        w_taps, m_tiles = 5, 1
    elif balanced and 5 <= warps < 8:   # (fewer: blocks share an SM, per WGRAD_TAPS)
        m_tiles = 2
    # More rows a stage where they fit: fewer barriers and turns of the ring a block.
    # Session 74 (H100), the kernel alone: 2d-3x7-512 (one row tap, warps of two tiles of
    # A) 3.05 ms in stages of 2 rows, 2.80 of 4; 2d-1024 (three row taps, warps of three W
    # taps) 3.85 of 4, 3.79 of 5; 2d-64to128 (two output tiles) 4.27 of 2 and of 3. Only
    # the forms timed: of the others at more rows, ptxas spills up to 252 bytes more.
    if taps == 3:
        shapes = ((5, 2), (4, 2), (2, 3), (1, 4)) if w_taps == 3 else ((4, 2), (2, 3), (1, 4))
    elif taps == 1 and out_tiles == 1 and m_tiles == 2:
        shapes = ((4, 2), (2, 3), (1, 4))
    else:
        shapes = ((2, 3), (1, 4))
    for rows, stages in shapes:
        form = WgradForm(taps, rows, stages, out_tiles, w_taps, m_tiles)
        if _wgrad_shared(kernel, dilation, form) <= SHARED_LIMIT:
            return form
    return None


def _wgrad_warps(kernel: tuple, form: WgradForm) -> int:
    """tf32_weight_gradient's warps a block: four tiles of A a tap and output tile, dealt
    to warps in (W taps x tiles) of :class:`WgradForm`'s w_taps x m_tiles."""
    return 4 * form.row_taps * kernel[1] * form.out_tiles // (form.w_taps * form.m_tiles)


def rows_weight_gradient_grid(batch: int, image: tuple, c_in: int, c_out: int,
                              g: Geometry) -> tuple:
    """tf32_weight_gradient's grid: (blocks along the stages, blocks of row taps, tiles of
    channels), as many blocks as WGRAD_SMS SMs hold (by its warps and shared memory), at
    most one a stage. :func:`rows_weight_gradient` stores the first's partial sums."""
    form = rows_weight_gradient_form(g.kernel_size, g.dilation, c_out)
    taps, rows, out_tiles = form.row_taps, form.rows, form.out_tiles
    kh, kw = g.kernel_size
    per_sm = max(1, min(WGRAD_TAPS // (taps * kw * out_tiles),
                        SHARED_LIMIT // _wgrad_shared(g.kernel_size, g.dilation, form)))
    channel_tiles = (c_in // WGRAD_TILE) * (c_out // (WGRAD_TILE * out_tiles))
    stages = batch * -(-image[0] // rows) * -(-image[1] // WGRAD_STRIP)
    along = max(1, min(stages, WGRAD_SMS * per_sm // (-(-kh // taps) * channel_tiles)))
    return along, -(-kh // taps), channel_tiles


@functools.cache
def _wgrad_kernel(device_index: int, form: WgradForm) -> dict:
    name = "gemmconv::tf32_weight_gradient<{}, {}, {}, {}, {}, {}>".format(*form)
    kernels = _compile(device_index, {"wgrad": name})
    # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: what a launch may ask for, beyond 48 KB
    _launch_status(driver().cuFuncSetAttribute(kernels["wgrad"], 8, SHARED_LIMIT))
    return kernels


def rows_weight_gradient(x: torch.Tensor, grad: torch.Tensor, g: Geometry) -> torch.Tensor:
    """The weight gradient ``(C_in, C_out, k_h, k_w)`` float32 of a stride-1 2-D transposed
    convolution of geometry ``g`` from its input's rows ``x (N, H, W, C_in)`` and its output
    gradient's ``grad (N, H_out, W_out, C_out)``, both float32 and contiguous, C_in and C_out
    multiples of 64, in TF32 (the output gradient rounded to nearest, the input truncated).
    Each block's partial sums, then their sum over blocks in a fixed order."""
    n, height, width, c_in = x.shape
    _, out_h, out_w, c_out = grad.shape
    form = None if g.nd != 2 else rows_weight_gradient_form(g.kernel_size, g.dilation, c_out)
    if form is None or c_in % WGRAD_TILE or c_out % WGRAD_TILE:
        raise ValueError(f"rows_weight_gradient takes 2-D kernels of at most "
                         f"{WGRAD_TAPS} columns that fit shared memory, channels in "
                         f"multiples of {WGRAD_TILE}: got {g.kernel_size}, {c_in} -> {c_out}")
    if max(n * height * width, n * out_h * out_w) >= 2**31:   # (RowsWgrad's ints)
        raise ValueError("rows_weight_gradient: 2^31 positions or more")
    kh, kw = g.kernel_size
    shared = _wgrad_shared(g.kernel_size, g.dilation, form)
    grid = rows_weight_gradient_grid(n, (out_h, out_w), c_in, c_out, g)
    partial = x.new_empty(grid[0], kh, kw, c_in, c_out)
    shape = (ctypes.c_int * 13)(n, height, width, c_in, out_h, out_w, c_out, kh, kw,
                                *g.padding, *g.dilation)
    with on_device(x.device):
        kernel = _wgrad_kernel(x.device.index, form)["wgrad"]
    _launch(kernel, x.device, grid, 32 * _wgrad_warps(g.kernel_size, form), shared,
            (ctypes.addressof(shape),), [x.data_ptr(), grad.data_ptr(), partial.data_ptr()])
    return partial.sum(0).permute(2, 3, 0, 1).contiguous()
