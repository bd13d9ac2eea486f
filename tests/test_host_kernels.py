"""col2im.cu's index arithmetic, checked on the host, where CI has nvcc but no GPU.

tests/host/harness.cu is compiled by nvcc for sm_90 (so every kernel instantiation the
library launches must compile) into a shared library whose entry point runs the kernels' own
per-element functions on the CPU. Its results must match the PyTorch path in
gemmconv/columns.py over many geometries and all four dtypes.
"""
import contextlib
import ctypes
import dataclasses
import itertools
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import gemmconv
from gemmconv import _cuda, cases
from gemmconv.columns import blocks, col2im, col2im_interleaved, im2col, im2col_interleaved
from gemmconv.shapes import Geometry
from helpers import generator, rel_error, rows_outermost, weight_gradient_inputs

ROOT = Path(__file__).resolve().parents[1]
DTYPES = {torch.float32: (0, 1e-6), torch.float64: (1, 1e-14), torch.float16: (2, 2e-3),
          torch.bfloat16: (3, 1.5e-2)}


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        if os.environ.get("GEMMCONV_REQUIRE_NVCC"):
            pytest.fail("nvcc not found but GEMMCONV_REQUIRE_NVCC is set")
        pytest.skip("nvcc not found")
    library = tmp_path_factory.mktemp("harness") / "harness.so"
    source = Path(gemmconv.__file__).parent            # col2im.cu as the package ships it
    subprocess.run([nvcc, "-arch=sm_90", "-std=c++17", "-O2", "-shared", "-Xcompiler", "-fPIC",
                    f"-I{source}", "-o", str(library), str(ROOT / "tests/host/harness.cu")],
                   check=True)
    lib = ctypes.CDLL(str(library))
    fields = ctypes.POINTER(ctypes.c_longlong)
    lib.gemmconv_host.argtypes = [ctypes.c_int] * 4 + [fields, fields] + [ctypes.c_void_p] * 3
    lib.gemmconv_reaching_taps.argtypes = [ctypes.c_longlong] * 4 + [fields]
    lib.gemmconv_host_interleaved.argtypes = lib.gemmconv_host.argtypes
    lib.gemmconv_rows_weight_gradient.argtypes = [ctypes.POINTER(ctypes.c_int)] + \
        [ctypes.c_int] * 6 + [ctypes.c_void_p] * 3
    lib.gemmconv_wgrad_fragment_floats.argtypes = [ctypes.c_int] * 9 + [ctypes.c_void_p] * 2
    lib.gemmconv_wgrad_fragment_floats.restype = None
    lib.gemmconv_wgrad_max_warps.argtypes = [ctypes.c_int]
    lib.gemmconv_wgrad_warp_tile.argtypes = [ctypes.c_int] * 5 + [ctypes.c_void_p]
    lib.gemmconv_wgrad_warp_tile.restype = None
    return lib


def _run(lib, op, dtype, wide, g, extent, src, bias, dst):
    array = lambda v: (ctypes.c_longlong * len(v))(*v)
    pointer = lambda t: None if t is None else t.data_ptr()
    assert lib.gemmconv_host(op, DTYPES[dtype][0], g.nd, wide, array(g.taps_fields()),
                             array(extent), pointer(src), pointer(bias), pointer(dst)) == 0


GEOMETRIES = cases.random_cases(120, seed=3) + cases.EDGE + cases.LARGE_KERNELS

# Rows long enough for whole warps of im2col positions and runs of col2im spans, and rows
# that end part-way through them.
LONG_ROWS = [dataclasses.replace(c, name=c.name + "-long", batch=1,
                                 size=(*c.size[:-1], 29 + 37 * i))
             for i, c in enumerate(cases.random_cases(12, seed=4))]


WIDE = {"int32": 0, "int64": 1}


def _geometry(case):
    return Geometry(case.kernel_size, case.stride, case.padding, case.dilation)


def _band(case, planes, dtype):
    """A band of the image's outermost rows, with the grid rows it needs, inside a larger
    image whose planes are further apart: the layout chunked launches use."""
    g, image = _geometry(case), case.output_size
    o0, o1 = image[0] // 3, max(image[0] // 3 + 1, 2 * image[0] // 3)
    i0, i1 = g.grid_rows(o0, o1, case.size[0])
    whole = torch.full((planes, *image), float("nan"), dtype=dtype)
    return g, whole, whole[:, o0:o1], (i1 - i0, *case.size[1:]), g.band_padding(o0, i0)


# Planes per thread of the harness's col2im ops that take several (their channels must be a
# multiple).
PLANES_PER_THREAD = {14: 2, 15: 4, 21: 2, 22: 3}
COL2IM_OPS = {0: "one-per-thread", 2: "spans-of-3", 3: "spans-of-6", 4: "spans-of-3-planes-inner",
              6: "2-spans-of-3-per-thread", 7: "4-spans-of-6-per-thread",
              14: "spans-of-3-planes-inner-2-planes-per-thread",
              15: "2-spans-of-3-per-thread-4-planes-per-thread",
              19: "spans-of-3-empty-rows-apart", 20: "2-spans-of-6-planes-inner-empty-rows-apart",
              21: "spans-of-3-2-planes-per-thread-empty-rows-apart",
              22: "one-per-thread-3-planes-per-thread"}


@pytest.mark.parametrize("vector", COL2IM_OPS, ids=COL2IM_OPS.values())
@pytest.mark.parametrize("wide", WIDE)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", GEOMETRIES + LONG_ROWS, ids=lambda c: c.name)
def test_host_col2im_matches_torch(harness, case, dtype, wide, vector):
    channels = case.out_channels * PLANES_PER_THREAD.get(vector, 1)
    planes = max(case.batch, 1) * channels
    g, whole, band, grid, padding = _band(case, planes, dtype)
    gen = generator(case.name, "col2im", str(dtype))
    columns = torch.randn(planes, g.taps, math.prod(grid), generator=gen).to(dtype)
    bias = torch.randn(channels, generator=gen).to(dtype) if case.bias else None
    extent = g.extent_fields(blocks(columns, channels, g.taps, grid), band.stride(0),
                             band.shape[1:], padding)
    _run(harness, vector, dtype, WIDE[wide], g, extent, columns, bias, band)
    ref = col2im(columns.double(), None if bias is None else bias.double(), g, grid,
                 band.shape[1:], padding=padding)
    assert rel_error(band, ref) < DTYPES[dtype][1]
    outside = torch.ones_like(whole, dtype=torch.bool)
    outside[:, band_rows(whole, band)] = False
    assert whole[outside].isnan().all()                       # nothing written outside the band


# Geometries with a one-phase outer dim (one tap, or a dilation a multiple of the stride),
# whose col2im may take the rows that can receive entries apart (_cuda.empty_rows_apart),
# and paddings that put the first receiving row on each phase.
ONE_PHASE = [((3, 3, 3), (2, 2, 2), (1, 1, 1), (2, 2, 2)), ((7, 5), (4, 3), (0, 2), (4, 1)),
             ((6, 3), (4, 1), (5, 1), (4, 1)), ((2, 3, 3), (2, 2, 2), (3, 1, 1), (4, 2, 1)),
             ((2, 4, 4), (3, 2, 1), (2, 0, 1), (3, 2, 2)), ((9, 2), (5, 1), (2, 0), (5, 1))]


@pytest.mark.parametrize("op", [19, 20, 21])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("geometry", ONE_PHASE, ids=str)
def test_host_col2im_empty_rows_apart(harness, geometry, dtype, op):
    """col2im over a band of rows, the receiving rows first: every output written once,
    by the first pass or the second, and the sums of the PyTorch path."""
    g = Geometry(*geometry)
    assert _cuda.empty_rows_apart(g, True) and not _cuda.empty_rows_apart(g, False)
    channels = 2 * PLANES_PER_THREAD.get(op, 1)
    planes = 2 * channels
    grid = (*(5, 4)[:g.nd - 1], 19)[-g.nd:]
    case = dataclasses.replace(cases.EDGE[0], kernel_size=g.kernel_size, stride=g.stride,
                               padding=g.padding, dilation=g.dilation, size=grid,
                               output_padding=(0,) * g.nd, groups=1, batch=2,
                               in_channels=channels, out_channels=channels, bias=True)
    g, whole, band, band_grid, padding = _band(case, planes, dtype)
    gen = generator(str(geometry), "apart", str(dtype))
    columns = torch.randn(planes, g.taps, math.prod(band_grid), generator=gen).to(dtype)
    bias = torch.randn(channels, generator=gen).to(dtype)
    extent = g.extent_fields(blocks(columns, channels, g.taps, band_grid), band.stride(0),
                             band.shape[1:], padding)
    _run(harness, op, dtype, 0, g, extent, columns, bias, band)
    ref = col2im(columns.double(), bias.double(), g, band_grid, band.shape[1:], padding=padding)
    assert rel_error(band, ref) < DTYPES[dtype][1]
    outside = torch.ones_like(whole, dtype=torch.bool)
    outside[:, band_rows(whole, band)] = False
    assert whole[outside].isnan().all()
    assert _cuda.receiving_rows(g, band.shape[1:], padding) < math.prod(band.shape[1:-1])


def band_rows(whole, band):
    start = (band.data_ptr() - whole.data_ptr()) // (whole.element_size() * whole[0, 0].numel())
    return slice(start, start + band.shape[1])


@pytest.mark.parametrize("op", [1, 5, 9, 10, 16], ids=["one-per-thread", "warp-spans-of-3",
                                                        "one-per-thread-samples-inner",
                                                        "warp-spans-of-3-samples-inner",
                                                        "one-per-thread-and-outer-tap"])
@pytest.mark.parametrize("wide", WIDE)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", GEOMETRIES + LONG_ROWS, ids=lambda c: c.name)
def test_host_im2col_matches_torch(harness, case, dtype, wide, op):
    g, planes = _geometry(case), max(case.batch, 1) * case.out_channels
    image = torch.randn(planes + 1, *case.output_size,
                        generator=generator(case.name, "im2col", str(dtype))).to(dtype)[1:]
    grid_rows = case.size[0] // 2, case.size[0]                 # the grid's second half
    grid = (grid_rows[1] - grid_rows[0], *case.size[1:])
    padding = g.band_padding(0, grid_rows[0])
    columns = torch.full((planes, g.taps, math.prod(grid)), float("nan"), dtype=dtype)
    extent = g.extent_fields(blocks(columns, case.out_channels, g.taps, grid), image.stride(0),
                             case.output_size, padding)
    _run(harness, op, dtype, WIDE[wide], g, extent, image, None, columns)
    assert torch.equal(columns, im2col(image, g, grid, padding=padding))   # a copy: exact


def _poisoned_columns(g, samples, channels, grid, dtype, rows_first):
    """A NaN column buffer in the contiguous layout or the row products' (rows outermost),
    and its view ``(S, C, K, *grid)``."""
    if rows_first:
        if g.nd == 1:
            pytest.skip("rows outermost leave a 1-D grid's rows strided")
        buffer = rows_outermost(samples, channels, g.taps, grid)[0].to(dtype)
        return buffer, buffer.movedim(3, 0).movedim(1, 3)
    buffer = torch.full((samples * channels, g.taps, math.prod(grid)), float("nan"), dtype=dtype)
    return buffer, blocks(buffer, channels, g.taps, grid)


def _im2col_exactly(harness, op, g, image, grid, buffer, view):
    """Runs im2col op ``op`` of the harness from ``image (P, *image)`` into ``view`` (over
    ``buffer``): it must equal the PyTorch path's copy exactly."""
    extent = g.extent_fields(view, image.stride(0), image.shape[1:], g.padding)
    _run(harness, op, image.dtype, 0, g, extent, image, None, buffer)
    assert torch.equal(view, im2col(image, g, grid).view(view.shape))      # a copy: exact


# Geometries (kernel, stride, padding, dilation) whose im2col copies runs of 16 bytes as one
# access per tap from a window of the row (_cuda.im2col_pack and im2col_windowed). The
# innermost padding makes every shift of the window in float32 ((i * stride - padding)
# mod 4), and a run's positions and taps reach over one to seven runs.
PACKED = [((1,), (1,), (8,), (1,)), ((3, 1), (1, 1), (1, 8), (2, 1)),
          ((2, 1), (2, 1), (0, 0), (1, 1)), ((1, 3, 1), (1, 1, 1), (1, 1, 16), (1, 2, 1)),
          ((5,), (1,), (4,), (1,)), ((3, 5), (1, 1), (1, 3), (1, 1)), ((7,), (1,), (6,), (1,)),
          ((2, 5), (1, 1), (0, 13), (1, 3)), ((3, 3, 3), (2, 1, 1), (1, 1, 1), (1, 1, 1)),
          ((3,), (2,), (1,), (1,)), ((1, 5), (1, 3), (0, 4), (1, 1)),
          ((2, 3), (2, 2), (1, 3), (1, 2))]


@pytest.mark.parametrize("op", [8, 11, 17], ids=["planes-outer", "samples-inner",
                                                 "thread-per-outer-tap"])
@pytest.mark.parametrize("rows_first", [False, True], ids=["contiguous", "rows-outermost"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("geometry", PACKED, ids=str)
def test_host_packed_im2col_matches_torch(harness, geometry, dtype, rows_first, op):
    g = Geometry(*geometry)
    samples, channels = 2, 3
    image_size = (5, 4, 56)[-g.nd:]
    grid = (*(7, 3)[:g.nd - 1], 32)[-g.nd:]
    image = torch.randn(samples * channels, *image_size,
                        generator=generator(str(geometry), "packed", str(dtype))).to(dtype)
    buffer, view = _poisoned_columns(g, samples, channels, grid, dtype, rows_first)
    assert _cuda.im2col_windowed(g, image, g.padding)
    assert _cuda.im2col_pack(g, view, True) == 16 // image.element_size()
    _im2col_exactly(harness, op, g, image, grid, buffer, view)


# Any geometry: runs of 16 bytes stored as one access, their image elements loaded one by
# one (_cuda.im2col_windowed false): dilations, image rows of any width, and strides (which
# the kernels take, though _cuda.im2col_pack leaves strided runs out).
ELEMENTWISE = PACKED + [((3, 3), (2, 2), (1, 1), (1, 1)), ((2, 3, 5), (1, 2, 3), (0, 1, 2), (1, 1, 2)),
                        ((1, 4), (3, 1), (2, 5), (1, 2))]


@pytest.mark.parametrize("op", [12, 13, 18], ids=["planes-outer", "samples-inner",
                                                  "thread-per-outer-tap"])
@pytest.mark.parametrize("rows_first", [False, True], ids=["contiguous", "rows-outermost"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("geometry", ELEMENTWISE, ids=str)
def test_host_elementwise_runs_match_torch(harness, geometry, dtype, rows_first, op):
    g = Geometry(*geometry)
    samples, channels = 2, 3
    image_size = (5, 6, 21)[-g.nd:]
    grid = (*(7, 3)[:g.nd - 1], 16)[-g.nd:]
    image = torch.randn(samples * channels + 1, *image_size,
                        generator=generator(str(geometry), "runs", str(dtype))).to(dtype)[1:]
    buffer, view = _poisoned_columns(g, samples, channels, grid, dtype, rows_first)
    assert not _cuda.im2col_windowed(g, image, g.padding)       # odd rows, and an odd address
    assert _cuda.im2col_pack(g, view, False) == (16 // image.element_size() if g.stride[-1] == 1 else 1)
    _im2col_exactly(harness, op, g, image, grid, buffer, view)


def test_packed_im2col_only_where_runs_are_whole_and_aligned():
    g = Geometry(*PACKED[1])
    image, columns = torch.zeros(6, 4, 16), torch.zeros(6, 3, 7, 32)
    pack = lambda columns, g=g, windowed=False: _cuda.im2col_pack(g, columns, windowed)
    assert pack(columns) == 4 and pack(columns.double()) == 2
    assert pack(torch.zeros(6, 3, 7, 30)) == 1                                      # grid width
    assert pack(torch.zeros(6 * 3 * 7 * 32 + 1)[1:].view(6, 3, 7, 32)) == 1         # address
    assert pack(torch.zeros(6, 3, 7, 36)[..., :32]) == 4
    assert pack(torch.zeros(6, 3, 7, 34)[..., :32]) == 1                            # row stride
    strided = Geometry((3, 1), (1, 2), (1, 8), (1, 1))
    assert pack(columns, strided) == 1 and pack(columns, strided, True) == 4      # from windows
    assert _cuda.im2col_windowed(g, image, g.padding)
    assert _cuda.im2col_windowed(g, image.double(), g.padding)
    assert _cuda.im2col_windowed(g, image, (1, 3))                     # the window shifts
    assert not _cuda.im2col_windowed(g, torch.zeros(6, 4, 18), g.padding)       # row width
    assert not _cuda.im2col_windowed(g, torch.zeros(6 * 4 * 16 + 1)[1:].view(6, 4, 16), g.padding)
    assert _cuda.im2col_windowed(g, torch.zeros(6, 4, 20)[..., :16], g.padding)
    assert not _cuda.im2col_windowed(g, torch.zeros(6, 4, 18)[..., :16], g.padding)
    taps = lambda k, d, p: _cuda.im2col_windowed(Geometry((3, k), (1, 1), (1, p), (1, d)), image, (1, p))
    assert taps(3, 1, 8) and taps(29, 1, 0) and taps(8, 4, 0) and taps(7, 4, 4)
    assert not (taps(30, 1, 0) or taps(8, 4, 3) or taps(9, 4, 0))          # over eight runs
    assert _cuda.im2col_windowed(strided, image, (1, 8))               # three positions a run apart
    assert _cuda.im2col_windowed(Geometry((3, 3), (1, 9), (1, 8), (1, 2)), image, (1, 8))
    assert not _cuda.im2col_windowed(Geometry((3, 3), (1, 10), (1, 8), (1, 2)), image, (1, 8))


def test_im2col_orders_threads_samples_inner_in_the_row_products_layout():
    g, one = Geometry((1, 3, 1), (1,) * 3, (0,) * 3, (1,) * 3), Geometry((1,) * 3, (1,) * 3, (0,) * 3, (1,) * 3)
    _, rows = rows_outermost(3, 4, 3, (6, 7, 8))
    assert _cuda.im2col_samples_inner(g, rows)
    assert not _cuda.im2col_samples_inner(one, rows_outermost(3, 4, 1, (6, 7, 8))[1])  # a reorder
    assert not _cuda.im2col_samples_inner(g, torch.zeros(3, 4, 3, 6, 7, 8))
    assert not _cuda.im2col_samples_inner(g, rows_outermost(1, 4, 3, (6, 7, 8))[1])   # one sample
    g2 = Geometry((3, 3), (1, 1), (0, 0), (1, 1))
    _, rows = rows_outermost(3, 1, 9, (1, 8))            # sizes of one: their strides are moot
    assert _cuda.im2col_samples_inner(g2, rows)
    assert not _cuda.im2col_samples_inner(Geometry((3,), (1,), (0,), (1,)),
                                          torch.zeros(8, 3, 3, 5).movedim(0, -1))     # 1-D


@pytest.mark.parametrize("kernel, stride, dilation, apart", [
    ((3, 3, 3), (2, 2, 2), (2, 2, 2), True),     # dilations multiples of the strides: a quarter
    ((3, 1, 3), (2, 2, 1), (2, 1, 1), False),    # a quarter, but three entries an output
    ((7, 5), (4, 3), (4, 1), True),              # seven taps along an outer dim of stride 4
    ((1, 5), (4, 3), (1, 1), False),             # one tap: one entry
    ((7, 5), (2, 3), (2, 1), False),             # half the rows receive
    ((3, 3, 3), (2, 1, 1), (2, 1, 1), False),    # half: the depth's taps on one phase
    ((3, 3, 3), (2, 2, 2), (1, 1, 1), False),    # taps on both phases
    ((3, 3), (1, 2), (1, 2), False),             # only the innermost dim is one-phase
    ((3,), (2,), (2,), False),                   # 1-D: no outer dims
])
def test_col2im_empty_rows_apart_rule(kernel, stride, dilation, apart):
    g = Geometry(kernel, stride, (0,) * len(kernel), dilation)
    assert _cuda.empty_rows_apart(g, True) == apart
    assert not _cuda.empty_rows_apart(g, False)


def test_receiving_rows_and_the_plan(driver, monkeypatch):
    """The rows whose one-phase coordinates are on phase (padded coordinate a multiple of
    the stride), and a launch that fills the image (a warp per 256 elements of a plane)
    and then takes a thread per span of those rows."""
    g = Geometry((3, 3, 3), (2, 2, 2), (1, 1, 1), (2, 2, 2))
    assert _cuda.receiving_rows(g, (31, 63, 63), (1, 1, 1)) == 15 * 31    # odd rows
    assert _cuda.receiving_rows(g, (31, 63, 63), (0, 1, 1)) == 16 * 31    # even depths
    assert _cuda.receiving_rows(g, (1, 63, 63), (1, 1, 1)) == 0
    h = Geometry((1, 5), (3, 3), (0, 2), (1, 1))
    assert _cuda.receiving_rows(h, (10, 50), (2, 2)) == 3              # rows 1, 4, 7
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    grid = (4, 6, 8)
    image = g.image_size(grid, (0, 0, 0))
    columns, out = torch.zeros(2, 4, g.taps, *grid), torch.empty(8, *image)
    _cuda.col2im(columns, None, out, g, g.padding)
    (launch,) = _cuda._launches.values()
    layout = _cuda.Layout(*launch.kernels[5:])
    assert layout.empty_rows_apart and layout.planes_per_thread == 4
    rows = 8 // 4 * _cuda.receiving_rows(g, image, g.padding)
    spans = -(-image[2] // layout.span) + 1
    assert launch.blocks == -(-rows * spans // _cuda.BLOCK)
    assert launch.fill_blocks == -(-8 * -(-math.prod(image) // 256) * 32 // _cuda.BLOCK)
    fill, gather = driver.launches
    assert (fill[1], gather[1]) == (launch.fill_blocks, launch.blocks) and fill[0] != gather[0]
    assert fill[2][1:] == [0, out.data_ptr()]                    # no bias, then the image
    g1 = Geometry((3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1))   # both phases: no fill
    _cuda.col2im(torch.zeros(2, 4, g1.taps, *grid), None,
                 torch.empty(8, *g1.image_size(grid, (0, 0, 0))), g1, g1.padding)
    assert list(_cuda._launches.values())[-1].fill_blocks == 0 and len(driver.launches) == 3
    g2 = Geometry((3, 3, 1), (2, 2, 1), (1, 1, 0), (2, 2, 1))   # one image row, off phase
    _cuda.col2im(torch.zeros(1, 4, g2.taps, 1, 1, 40), None, torch.empty(4, 1, 1, 40), g2, (1, 1, 0))
    assert _cuda.receiving_rows(g2, (1, 1, 40), (1, 1, 0)) == 0
    empty = list(_cuda._launches.values())[-1]
    assert empty.blocks == 0 and empty.fill_blocks == 1           # the fill alone is launched
    assert len(driver.launches) == 4 and driver.launches[-1][1] == 1


@pytest.mark.parametrize("kernel, pack, split", [
    ((3, 5, 7), 4, True),         # 3d-strided-grouped's runs: 15 outer taps, 7 inner
    ((3, 3), 2, True),
    ((3, 3, 3), 1, False),        # one position a thread: too few stores to split
    ((3, 1), 4, False),           # one innermost tap: a run a thread
    ((1, 1, 5), 4, False),        # no outer taps to split
    ((7,), 4, False),             # 1-D
])
def test_im2col_thread_per_outer_tap_rule(kernel, pack, split):
    g = Geometry(kernel, (1,) * len(kernel), (0,) * len(kernel), (1,) * len(kernel))
    assert _cuda.im2col_split_taps(g, pack) == split


def test_im2col_plan_per_outer_tap(driver, monkeypatch):
    """The launch of a split im2col: its layout says so, and it has a thread per run and
    outer tap; with samples inner (the row products' layout) it never splits."""
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    g = Geometry((3, 5, 7), (2, 2, 2), (1, 2, 3), (1, 1, 1))
    grid = (4, 6, 48)
    image = torch.zeros(12, *g.image_size(grid, (0, 0, 0))[:-1], 96)
    _cuda.im2col(image, torch.empty(3, 4, g.taps, *grid), g, g.padding)
    (launch,) = _cuda._launches.values()
    layout = _cuda.Layout(*launch.kernels[5:])
    assert (layout.im2col_pack, layout.im2col_windowed, layout.im2col_split_taps) == (4, True, True)
    assert launch.blocks == -(-12 * 15 * 4 * 6 * 48 // 4 // _cuda.BLOCK)
    _, rows = rows_outermost(3, 4, g.taps, grid)
    _cuda.im2col(image, rows, g, g.padding)
    layout = _cuda.Layout(*list(_cuda._launches.values())[-1].kernels[5:])
    assert layout.im2col_samples_inner and not layout.im2col_split_taps


@pytest.mark.parametrize("width, span", [(96, 3), (260, 3), (64, 2), (1024, 4), (533, 4), (20, 1)])
def test_im2col_span_keeps_warps_busy(width, span):
    """The fixed im2col's positions per thread for a three-tap kernel: rows of 96 or 260
    take spans of three, which fill their last warp where spans of two or four leave much of
    it idle; long rows keep the longest span, short ones one position a thread."""
    from gemmconv import _cuda
    g = Geometry((3, 1), (1, 1), (1, 0), (1, 1))
    assert _cuda.im2col_span(g, width, True) == span
    assert _cuda.im2col_span(g, width, False) == 1


@pytest.mark.parametrize("kernel, stride, width, spans", [
    ((3, 3), (1, 1), 1026, 2),        # outer taps, rows of 257 spans: 80% of five runs of 64
    ((3, 3), (1, 1), 518, 1),         # 130 spans: 68% of three runs
    ((1, 3), (1, 1), 1026, 1),        # no outer taps (a split route's col2im W)
    ((2, 2), (1, 4), 1020, 4),        # about one column entry an output: 255 spans, two runs
    ((3, 3), (5, 5), 638, 1),         # as few, outer dims strided: planes a thread instead
    ((3, 5), (2, 3), 766, 1),         # strided innermost, more entries an output
    ((3,), (1,), 65538, 1),           # 1-D
    ((3, 3, 3), (1, 1, 1), 66, 1),    # 17 spans: a run would idle most of its lanes
])
def test_col2im_spans_per_thread(kernel, stride, width, spans):
    """The fixed col2im's spans per thread (runs of 32 x spans along a row), where their
    measured gains were: rows with outer taps to share and lanes to fill."""
    from gemmconv import _cuda
    g = Geometry(kernel, stride, (0,) * len(kernel), (1,) * len(kernel))
    assert _cuda.col2im_spans(g, width, True) == spans
    assert _cuda.col2im_spans(g, width, False) == 1


def test_generic_col2im_planes_divide_the_channels_of_large_kernels():
    """Several planes a generic col2im thread only for kernels past the fixed kernels' taps
    (FCN-32s's 64 x 64 at stride 32), as many as divide the channels, up to GENERIC_PLANES."""
    fcn = Geometry((64, 64), (32, 32), (16, 16), (1, 1))
    assert [_cuda.generic_col2im_planes(fcn, c) for c in (21, 64, 13, 1)] == [7, 8, 1, 1]
    assert _cuda.generic_col2im_planes(Geometry((4, 4), (2, 2), (1, 1), (1, 1)), 64) == 1


@pytest.mark.parametrize("stride, channels, pack, size, col2im, im2col", [
    (2, 32, 4, 4, 4, 2),    # float32, 3d-strided-grouped's output gradient: 32 bytes a tap
    (2, 64, 4, 4, 4, 2),    # 2d-strided-grouped's: 64
    (2, 32, 8, 2, 4, 2),    # bfloat16: 16
    (2, 128, 4, 4, 4, 4),   # 128 bytes a tap: four
    (2, 24, 4, 4, 2, 2),    # six runs: two divide them
    (2, 12, 4, 4, 1, 1),    # three runs, none shared
    (1, 32, 4, 4, 4, 4),    # stride 1: four
    (1, 64, 8, 2, 4, 4),    # bfloat16's 2d-3x7-512
])
def test_interleaved_runs_of_a_strided_im2col(stride, channels, pack, size, col2im, im2col):
    """The channels-innermost kernels' runs a thread: as many as divide the channels' runs,
    up to INTERLEAVED_RUNS; a strided kernel's im2col two, not four, where four would store
    at most STRIDED_IM2COL_BYTES of each tap an instruction."""
    from gemmconv import _cuda
    g = Geometry((3, 5, 7), (1, stride, 1), (1, 2, 3), (1, 1, 1))
    assert _cuda.interleaved_runs("col2im", g, channels, pack, size, True) == col2im
    assert _cuda.interleaved_runs("im2col", g, channels, pack, size, True) == im2col
    fcn = Geometry((64, 64), (32, 32), (16, 16), (1, 1))   # generic: generic_col2im_planes
    assert _cuda.interleaved_runs("col2im", fcn, 64, 4, 4, False) == 8
    assert _cuda.interleaved_runs("im2col", fcn, 64, 4, 4, False) == 8


@pytest.mark.parametrize("kernel, stride, width, planes", [
    ((3, 3, 3), (2, 2, 2), 255, 4),      # outer tests by stride phase, few entries an output
    ((3, 3, 3), (2, 2, 2), 65, 4),       # short rows too
    ((3, 5), (2, 3), 766, 2),            # 2-D: less to decode
    ((3, 3), (5, 5), 638, 2),
    ((3, 5, 7), (2, 2, 2), 96, 1),       # 13 entries an output: loads, not tests, fill threads
    ((3, 3, 3), (1, 1, 1), 66, 1),       # outer dims unstrided: their tests fold away
    ((1, 5), (2, 3), 766, 1),            # one outer tap
    ((3,), (2,), 262143, 1),             # 1-D
])
def test_col2im_planes_per_thread(kernel, stride, width, planes):
    """The fixed col2im's planes per thread, where their measured gains were: strided outer
    dims with several taps and few column entries an output; such threads take one span
    each, in rows numbered plane by plane."""
    from gemmconv import _cuda
    g = Geometry(kernel, stride, (0,) * len(kernel), (1,) * len(kernel))
    assert _cuda.col2im_planes(g, width, True) == planes
    assert _cuda.col2im_planes(g, width, False) == 1
    if planes > 1:
        assert _cuda.col2im_spans(g, width, True) == 1
        assert not _cuda.planes_inner(g, width, True)


@pytest.mark.parametrize("op", [1, 5, 9, 10, 16], ids=["one-per-thread", "warp-spans-of-3",
                                                        "one-per-thread-samples-inner",
                                                        "warp-spans-of-3-samples-inner",
                                                        "one-per-thread-and-outer-tap"])
@pytest.mark.parametrize("case", GEOMETRIES[:40] + LONG_ROWS[:4], ids=lambda c: c.name)
def test_host_im2col_leaves_gaps_between_blocks(harness, case, op):
    """im2col into blocks of C planes with free room after each (the convolution forward's
    rows of ones): the kernel and the PyTorch path write the same columns as into a
    contiguous buffer, and neither touches the room between blocks."""
    g, block = _geometry(case), case.out_channels
    planes = max(case.batch, 1) * block
    image = torch.randn(planes, *case.output_size, generator=generator(case.name, "gaps"))
    cells = math.prod(case.size)
    gap = 2 * cells + 3
    contiguous = im2col(image, g, case.size)
    for run in ("torch", "kernel"):
        buffer = torch.full((planes // block, block * g.taps * cells + gap), float("nan"))
        view = buffer[:, :block * g.taps * cells].unflatten(1, (block, g.taps, cells))
        if run == "torch":
            im2col(image, g, case.size, out=view)
        else:
            extent = g.extent_fields(blocks(view, block, g.taps, case.size), image.stride(0),
                                     case.output_size, g.padding)
            _run(harness, op, torch.float32, 0, g, extent, image, None, buffer)
        assert torch.equal(view.reshape(planes, g.taps, cells), contiguous), run
        assert buffer[:, block * g.taps * cells:].isnan().all(), run


@pytest.mark.parametrize("op", [0, 2, 6, 1, 5, 16], ids=["col2im", "col2im-spans-of-3",
                                                        "col2im-2-spans-per-thread", "im2col",
                                                        "im2col-warp-spans-of-3",
                                                        "im2col-per-outer-tap"])
@pytest.mark.parametrize("case", [c for c in GEOMETRIES + LONG_ROWS if c.nd > 1][:64],
                         ids=lambda c: c.name)
def test_host_columns_in_any_order(harness, case, op):
    """Both kernels on columns whose grid rows are outermost and samples next to the
    inner grid dims (channels, taps and samples in between): the same sums and copies as
    on contiguous columns, and im2col writes every entry of the view."""
    g, channels = _geometry(case), case.out_channels
    samples = max(case.batch, 1)
    gen = generator(case.name, "any-order", str(op))
    buffer, view = rows_outermost(samples, channels, g.taps, case.size)
    extent = lambda: g.extent_fields(view, math.prod(case.output_size), case.output_size,
                                     g.padding)
    if op in (1, 5, 16):
        image = torch.randn(samples * channels, *case.output_size, generator=gen)
        _run(harness, op, torch.float32, 0, g, extent(), image, None, buffer)
        assert torch.equal(view.reshape(-1, g.taps, math.prod(case.size)),
                           im2col(image, g, case.size))
    else:
        view.copy_(torch.randn(view.shape, generator=gen))
        bias = torch.randn(channels, generator=gen) if case.bias else None
        image = torch.full((samples * channels, *case.output_size), float("nan"))
        _run(harness, op, torch.float32, 0, g, extent(), buffer, bias, image)
        ref = col2im(view.reshape(-1, g.taps, math.prod(case.size)).double(),
                     None if bias is None else bias.double(), g, case.size, case.output_size)
        assert rel_error(image, ref) < 1e-6


class _Driver:
    """cuLaunchKernel, recording each launch: kernel, blocks, and each argument's first 8
    bytes (a pointer's value, or a struct's first field)."""

    def __init__(self):
        self.launches = []

    def cuLaunchKernel(self, kernel, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        values = [ctypes.c_int64.from_address(params[i]).value for i in range(len(params))]
        self.launches.append((kernel, gx, values))
        return 0


@pytest.fixture
def driver(monkeypatch):
    """_cuda's launches on CPU tensors, into a recording driver, with fresh plans."""
    fake = _Driver()
    monkeypatch.setattr(_cuda, "driver", lambda: fake)
    monkeypatch.setattr(_cuda, "_kernels", lambda *args: {"col2im": hash(args), "im2col": -hash(args),
                                                          "fill": hash(args) + 1})
    monkeypatch.setattr(_cuda, "on_device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(_cuda, "raw_stream", lambda device: 0)
    monkeypatch.setattr(_cuda, "_launches", {})
    return fake


def test_launches_are_worked_out_once_per_layout(driver, monkeypatch):
    """A launch's kernel, blocks and structs are worked out once per the shapes, strides,
    dtype, alignment and specialisation of its tensors: the same layout again launches the
    same kernel on the new tensors' addresses; another output stride, another alignment or
    another specialisation is worked out afresh."""
    g = Geometry((3, 3), (2, 1), (1, 1), (1, 2))
    grid, image = (5, 16), g.image_size((5, 16), (0, 0))
    fresh = lambda: (torch.rand(2, 3, 9, *grid), torch.rand(3), torch.empty(6, *image))
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    for _ in range(2):
        columns, bias, out = fresh()
        _cuda.col2im(columns, bias, out, g, g.padding)
        *_, values = driver.launches[-1]
        assert values[-3:] == [columns.data_ptr(), bias.data_ptr(), out.data_ptr()]
        (launch,) = _cuda._launches.values()
        assert list(launch.structs[0]) == g.extent_fields(columns, math.prod(image), image,
                                                            g.padding)
    assert len(_cuda._launches) == 1 and driver.launches[0][:2] == driver.launches[1][:2]
    _cuda.col2im(columns, None, out, g, g.padding)
    assert driver.launches[-1][2][-2] == 0 and len(_cuda._launches) == 1   # no bias
    apart = torch.empty(6, math.prod(image) + 8)[:, :math.prod(image)].unflatten(1, image)
    _cuda.col2im(columns, bias, apart, g, g.padding)      # planes further apart
    assert len(_cuda._launches) == 2
    assert list(_cuda._launches.values())[-1].structs[0][2] == math.prod(image) + 8
    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 1 << 40)
    _cuda.col2im(columns, bias, out, g, g.padding)
    assert len(_cuda._launches) == 3 and driver.launches[-1][0] != driver.launches[0][0]
    generic = list(_cuda._launches.values())[-1]
    assert list(generic.structs[0]) == g.taps_fields()     # the generic kernel's Taps

    monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    g = Geometry(*PACKED[1])
    aligned, shifted = torch.zeros(6, 4, 16), torch.zeros(6 * 4 * 16 + 1)[1:].view(6, 4, 16)
    for image in (aligned, shifted, torch.zeros(6, 4, 16)):
        _cuda.im2col(image, torch.empty(6, 3, 7, 32), g, g.padding)
    kernels = [k for k, _, _ in driver.launches[-3:]]
    assert kernels[0] != kernels[1] and kernels[2] == kernels[0]     # windows where aligned
    assert len(_cuda._launches) == 5


@pytest.mark.parametrize("stride", [1, 2, 3, 4, 6, 8, 32])
@pytest.mark.parametrize("dilation", [1, 2, 3, 4, 6, 9])
@pytest.mark.parametrize("kernel", [1, 5, 16, 64])
def test_generic_col2im_visits_only_reaching_taps(harness, kernel, stride, dilation):
    """The generic col2im's tap loop (col2im.cu's first_reaching_tap) visits exactly the taps
    k with k * dilation = r (mod stride), for every phase r, negative ones too: about
    kernel / stride of them at coprime dilations, never the whole kernel where the stride
    is larger than one."""
    out = (ctypes.c_longlong * kernel)()
    for r in range(-2 * stride, 3 * stride):
        count = harness.gemmconv_reaching_taps(kernel, stride, dilation, r, out)
        reaching = [k for k in range(kernel) if (r - k * dilation) % stride == 0]
        assert list(out[:count]) == reaching, (r, list(out[:count]))
        if stride > 1 and math.gcd(stride, dilation) == 1:
            assert count <= -(-kernel // stride)


def _interleaved_band(case, dtype, groups, runs):
    """Channels-innermost images ``(S, *image, C)`` inside larger ones (a band of the outer
    rows, samples further apart), NaN, with the grid rows the band needs; C a multiple of
    ``runs`` 16-byte runs and of ``groups``."""
    g, image = _geometry(case), case.output_size
    run = 16 // torch.empty(0, dtype=dtype).element_size()
    channels = groups * run * runs
    samples = max(case.batch, 1)
    o0, o1 = image[0] // 3, max(image[0] // 3 + 1, 2 * image[0] // 3)
    i0, i1 = g.grid_rows(o0, o1, case.size[0])
    whole = torch.full((samples, *image, channels), float("nan"), dtype=dtype)
    return g, whole, whole[:, o0:o1], (i1 - i0, *case.size[1:]), g.band_padding(o0, i0)


def _interleaved(harness, op, dtype, wide, g, columns, image, padding, src, bias, dst):
    array = lambda v: (ctypes.c_longlong * len(v))(*v)
    pointer = lambda t: None if t is None else t.data_ptr()
    extent = _cuda._interleaved_fields(columns, image, g, padding)
    assert harness.gemmconv_host_interleaved(op, DTYPES[dtype][0], g.nd, wide,
                                             array(g.taps_fields()), array(extent),
                                             pointer(src), pointer(bias), pointer(dst)) == 0


# The harness's channels-innermost ops (col2im's; im2col's are one more), by what a thread takes.
INTERLEAVED = {"one-channel": 0, "runs-of-16-bytes": 2, "two-runs-of-16-bytes": 4,
               "three-channels": 6}
RUNS = {0: 1, 2: 1, 4: 2, 6: 3}   # what each takes the channels in multiples of (x 16 bytes)


@pytest.mark.parametrize("variant", INTERLEAVED)
@pytest.mark.parametrize("wide", WIDE)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", GEOMETRIES, ids=lambda c: c.name)
def test_host_col2im_interleaved_matches_torch(harness, case, dtype, wide, variant):
    """Channels innermost, over a band of rows: every output of the band written with the
    PyTorch path's sums (each reaching tap once), nothing outside it."""
    groups = 1 + len(case.name) % 3
    g, whole, band, grid, padding = _interleaved_band(case, dtype, groups, RUNS[INTERLEAVED[variant]])
    gen = generator(case.name, "col2im-interleaved", str(dtype))
    channels = band.shape[-1]
    columns = torch.randn(band.shape[0], *grid, groups, g.taps, channels // groups,
                          generator=gen).to(dtype)
    bias = torch.randn(channels, generator=gen).to(dtype) if case.bias else None
    _interleaved(harness, INTERLEAVED[variant], dtype, WIDE[wide], g, columns, band, padding,
                 columns, bias, band)
    ref = col2im_interleaved(columns.double(), None if bias is None else bias.double(), g,
                             band.shape[1:-1], padding=padding)
    assert rel_error(band, ref) < DTYPES[dtype][1]
    outside = torch.ones(whole.shape[:2], dtype=torch.bool)
    o0 = (band.data_ptr() - whole.data_ptr()) // (whole.element_size() * whole[0, 0].numel())
    outside[:, o0:o0 + band.shape[1]] = False
    assert whole[outside].isnan().all()


@pytest.mark.parametrize("variant", INTERLEAVED)
@pytest.mark.parametrize("wide", WIDE)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", GEOMETRIES, ids=lambda c: c.name)
def test_host_im2col_interleaved_matches_torch(harness, case, dtype, wide, variant):
    """Channels innermost, the grid's second half of rows: an exact copy, zeros outside."""
    groups = 1 + len(case.name) % 3
    g = _geometry(case)
    run = 16 // torch.empty(0, dtype=dtype).element_size()
    samples, channels = max(case.batch, 1), groups * run * (RUNS[INTERLEAVED[variant]])
    gen = generator(case.name, "im2col-interleaved", str(dtype))
    image = torch.randn(samples, *case.output_size, channels, generator=gen).to(dtype)
    grid_rows = case.size[0] // 2, case.size[0]
    grid = (grid_rows[1] - grid_rows[0], *case.size[1:])
    padding = g.band_padding(0, grid_rows[0])
    columns = torch.full((samples, *grid, groups, g.taps, channels // groups), float("nan"),
                         dtype=dtype)
    _interleaved(harness, INTERLEAVED[variant] + 1, dtype, WIDE[wide], g, columns, image,
                 padding, image, None, columns)
    assert torch.equal(columns, im2col_interleaved(image, g, grid, groups, padding=padding))


@pytest.mark.parametrize("case", cases.MMA_WEIGHT_GRADIENT, ids=lambda c: c.name)
def test_rows_weight_gradient_decomposition_matches_float64(harness, case):
    """col2im.cu's tf32_weight_gradient, its decomposition run on the host through its own
    functions (blocks, stages, 16-byte chunks, each lane's mma.sync fragments, the partial
    sums' stores; tests/host/harness.cu) in float64, in the form _cuda picks, in blocks of
    one row tap with more blocks than stages, in blocks of two output tiles where the
    output channels allow, in warps of two tiles of A, in warps of three or five W taps
    where k_w is a multiple of 3 or 5 (refused where not), and in stages of 3 and 5 output
    rows (rows that are no power of two, and odd tails of rows): the partial sums' sum
    against float64's weight gradient, and none of them left unwritten."""
    x, grad, want = weight_gradient_inputs(case, "host-rows-wgrad")
    rows = lambda t: t.float().permute(0, 2, 3, 1).contiguous()
    xr, gr = rows(x), rows(grad)
    shape = (ctypes.c_int * 13)(case.batch, *case.size, case.in_channels, *case.output_size,
                                case.out_channels, *case.kernel_size, *case.padding,
                                *case.dilation)
    form = _cuda.rows_weight_gradient_form(case.kernel_size, case.dilation, case.out_channels)
    stages = case.batch * -(-case.output_size[0] // form.rows) * \
        -(-case.output_size[1] // _cuda.WGRAD_STRIP)
    # (row taps, rows a stage, output tiles, W taps and tiles of A a warp, blocks)
    taps, out_tiles = form.row_taps, form.out_tiles   # (the picked form's)
    forms = [(taps, form.rows, out_tiles, form.w_taps, form.m_tiles, 3),
             (1, form.rows, 1, 1, 4, stages + 2),
             (taps, form.rows, out_tiles, 3, 1, 2),
             (taps, form.rows, out_tiles, 1, 2, 4),
             (taps, form.rows, out_tiles, 5, 1, 3),
             (1, 3, 1, 1, 2, 3),
             (taps, 5, out_tiles, form.w_taps, form.m_tiles, 2)]
    if case.out_channels % 128 == 0:
        forms.append((1, form.rows, 2, 1, 4, 5))
    for row_taps, rows_a_stage, tiles, w_taps, m_tiles, grid in forms:
        partial = torch.full((grid, *case.kernel_size, case.in_channels, case.out_channels),
                             float("nan"), dtype=torch.float64)
        status = harness.gemmconv_rows_weight_gradient(shape, row_taps, rows_a_stage, tiles,
                                                       w_taps, m_tiles, grid, xr.data_ptr(),
                                                       gr.data_ptr(), partial.data_ptr())
        if case.kernel_size[1] % w_taps:
            assert status == 1
            continue
        assert status == 0
        assert not partial.isnan().any()
        got = partial.sum(0).permute(2, 3, 0, 1)
        assert rel_error(got, want) < 1e-6, (row_taps, rows_a_stage, tiles, w_taps, m_tiles, grid)


def test_rows_weight_gradient_forms_launch_within_their_bounds_and_cover_every_tile(harness):
    """Every form _cuda.rows_weight_gradient_form picks, balanced or not, for 2-D kernels
    of 1-9 columns, dilations 1-2 and 64 or 128 output channels: its warps a block
    (_cuda._wgrad_warps, the launch's) at most what the kernel's __launch_bounds__ allow
    for its tiles a warp (col2im.cu's wgrad_max_warps), and its warps' tiles
    (wgrad_warp_tile) each (output tile, row tap, W tap, tile of 16 input channels) of the
    block once. A launch past the bounds fails on the GPU; a tile dealt twice or never
    leaves weights wrong or unwritten."""
    tile = (ctypes.c_int * 4)()
    forms = set()
    for kh, kw, d, out, balanced in itertools.product(range(1, 6), range(1, 10), (1, 2),
                                                      (64, 128), (False, True)):
        form = _cuda.rows_weight_gradient_form((kh, kw), (d, d), out, balanced=balanced)
        if form is None:
            continue
        forms.add(form[4:])
        warps = _cuda._wgrad_warps((kh, kw), form)
        per_warp = form.w_taps * form.m_tiles
        assert warps <= harness.gemmconv_wgrad_max_warps(per_warp), ((kh, kw), form)
        dealt = []
        for warp in range(warps):
            harness.gemmconv_wgrad_warp_tile(kw, form.row_taps, form.w_taps, form.m_tiles,
                                             warp, tile)
            o, tap, j, m = tile
            dealt += [(o, tap, j + v, m + u) for v in range(form.w_taps)
                      for u in range(form.m_tiles)]
        want = itertools.product(range(form.out_tiles), range(form.row_taps), range(kw),
                                 range(4))
        assert sorted(dealt) == sorted(want), ((kh, kw), form)
    assert forms == {(1, 4), (3, 1), (5, 1), (1, 2)}   # (every form a warp may hold)


@pytest.mark.parametrize("case", cases.MMA_WEIGHT_GRADIENT, ids=lambda c: c.name)
def test_rows_weight_gradient_fragment_loads_are_free_of_bank_conflicts(harness, case):
    """tf32_weight_gradient's fragment loads from shared memory, as wgrad_a_float and
    wgrad_b_float place them, for every warp (row tap, W tap's shift, output tile) and step
    of the form _cuda picks: each lane's pair of A (elements e, e + 1, one float2 load)
    adjacent and 8-byte aligned, each half-warp's 16 words of A on distinct pairs of the 32
    banks (one 8-byte access phase), and each B load's 32 floats on distinct banks."""
    form = _cuda.rows_weight_gradient_form(case.kernel_size, case.dilation, case.out_channels)
    taps, rows, out_tiles = form.row_taps, form.rows, form.out_tiles
    box_rows = _cuda.WGRAD_STRIP + (case.kernel_size[1] - 1) * case.dilation[1]
    a, b = torch.empty(4, 4, 32, dtype=torch.int32), torch.empty(8, 2, 32, dtype=torch.int32)
    for tap, j, o in itertools.product(range(taps), range(case.kernel_size[1]), range(out_tiles)):
        shift = (case.kernel_size[1] - 1 - j) * case.dilation[1]
        for kk in range(0, rows * _cuda.WGRAD_STRIP, 8):
            harness.gemmconv_wgrad_fragment_floats(rows, out_tiles, box_rows, case.dilation[0],
                                                   taps, tap, shift, o, kk, a.data_ptr(),
                                                   b.data_ptr())
            assert torch.equal(a[:, 1::2], a[:, 0::2] + 1), (tap, shift, o, kk)
            assert (a[:, 0::2] % 2 == 0).all(), (tap, shift, o, kk)
            words = a[:, 0::2].reshape(-1, 16) // 2 % 16   # (a load's half-warps, lanes)
            assert all(len(set(h.tolist())) == 16 for h in words), (tap, shift, o, kk)
            banks = b.reshape(-1, 32) % 32
            assert all(len(set(load.tolist())) == 32 for load in banks), (tap, shift, o, kk)
