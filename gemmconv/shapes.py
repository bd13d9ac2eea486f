"""Shape arithmetic and argument checks: every rule about sizes lives here.

Along each spatial dim a transposed convolution, and the column buffers it runs on, relate
a *grid* (the input of a transposed convolution, the positions a kernel is applied at) and
an *image* (its output) by

    image position = grid position * stride - padding + tap * dilation

so one :class:`Geometry` describes col2im, im2col and the operators built from them.
Errors are raised here, in Python, before any kernel runs, with torch's wording where torch
has one.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Callable, Sequence, Union

import torch

IntOrTuple = Union[int, Sequence[int]]

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


class ConvArgumentError(ValueError, RuntimeError):
    """A bad argument. A RuntimeError, as torch raises, and a ValueError, as Python expects."""


def check(condition: bool, message: str | Callable[[], str]) -> None:
    """Raises ConvArgumentError(message) unless ``condition``. A message that needs
    formatting comes as a function, so that calls that pass pay nothing for it."""
    if not condition:
        raise ConvArgumentError(message if isinstance(message, str) else message())


def expand(value: IntOrTuple, nd: int, name: str) -> tuple[int, ...]:
    """``value`` as an ``nd``-tuple of ints: an int is repeated, a sequence must have ``nd``."""
    if isinstance(value, torch.SymInt) or isinstance(value, int) and not isinstance(value, bool):
        return (int(value),) * nd
    values = tuple(value)
    check(
        len(values) in (1, nd) and all(isinstance(v, int) and not isinstance(v, bool)
                                       for v in values), lambda:
        f"expected {name} to be a single integer value or a list of {nd} values to match the "
        f"convolution dimensions, but got {name}={list(values)}",
    )
    return values * nd if len(values) == 1 else values


@dataclass(frozen=True)
class Geometry:
    """Per-dim kernel, stride, padding and dilation relating a grid and an image."""

    kernel_size: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]

    @property
    def nd(self) -> int:
        return len(self.kernel_size)

    @property
    def taps(self) -> int:
        return math.prod(self.kernel_size)

    def reach(self, grid: Sequence[int]) -> tuple[int, ...]:
        """Image extent the grid's taps touch, counted from position -padding."""
        return tuple((g - 1) * s + d * (k - 1) + 1 for g, s, d, k in
                     zip(grid, self.stride, self.dilation, self.kernel_size))

    def image_size(self, grid: Sequence[int], output_padding: Sequence[int]) -> tuple[int, ...]:
        """Output size of a transposed convolution over ``grid``."""
        return tuple(r - 2 * p + op for r, p, op in
                     zip(self.reach(grid), self.padding, output_padding))

    def grid_size(self, image: Sequence[int]) -> tuple[int, ...]:
        """Positions a kernel is applied at over ``image`` (a convolution's output size)."""
        return tuple((i + 2 * p - d * (k - 1) - 1) // s + 1 for i, p, d, k, s in
                     zip(image, self.padding, self.dilation, self.kernel_size, self.stride))

    def band_padding(self, image_start: int, grid_start: int) -> tuple[int, ...]:
        """Padding that relates a band of the outermost dim, starting at image row
        ``image_start`` and grid row ``grid_start``, as a geometry of its own."""
        return (self.padding[0] + image_start - grid_start * self.stride[0], *self.padding[1:])

    def grid_rows(self, image_start: int, image_stop: int, grid_rows: int) -> tuple[int, int]:
        """The grid rows [start, stop) whose taps touch image rows [image_start, image_stop)
        of the outermost dim (empty where none do)."""
        k, s, d, p = self.kernel_size[0], self.stride[0], self.dilation[0], self.padding[0]
        start = max(0, -(-(image_start + p - d * (k - 1)) // s))
        stop = min(grid_rows, (image_stop - 1 + p) // s + 1)
        return start, max(start, stop)

    def taps_fields(self) -> list[int]:
        """The kernels' ``Taps<ND>`` (gemmconv/col2im.cu) as a flat list of int64s."""
        return [*self.kernel_size, *self.stride, *self.dilation]

    @staticmethod
    def extent_fields(columns: torch.Tensor, plane_stride: int, image: Sequence[int],
                      padding: Sequence[int]) -> list[int]:
        """The kernels' ``Extent<ND>`` as a flat list of int64s, for ``columns (S, C, K,
        *grid)`` of any strides where each channel's taps lie back to back (the innermost
        grid dim's stride 1) and image planes ``plane_stride`` elements apart."""
        samples, channels, taps, *grid = columns.shape
        strides = columns.stride()
        assert channels == 1 or strides[1] == taps * strides[2], "a channel's taps back to back"
        return [samples * channels, channels, plane_stride, strides[0], strides[2], *grid,
                *image, *padding, *strides[3:]]


@dataclass(frozen=True)
class ConvTransposeArgs:
    """Checked arguments of one transposed convolution call, with its shapes.

    input ``(N, C_in, *grid)``, weight ``(C_in, C_out / groups, *kernel_size)``,
    bias ``(C_out,)`` or None, output ``(N, C_out, *image)``.
    """

    geometry: Geometry
    output_padding: tuple[int, ...]
    groups: int
    batch: int
    in_channels: int
    out_channels: int
    grid: tuple[int, ...]
    image: tuple[int, ...]
    unbatched: bool

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The (batched) input's shape, ``(N, C_in, *grid)``: also the output of the
        convolution this call is the adjoint of, and the input gradient's shape."""
        return (self.batch, self.in_channels, *self.grid)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return (self.batch, self.out_channels, *self.image)

    @property
    def output_elements(self) -> int:
        """Elements of the output: ``N * C_out * prod(image)``."""
        return self.batch * self.out_channels * math.prod(self.image)

    @functools.cached_property   # read on every column-route call
    def pointwise(self) -> bool:
        """Whether the columns are the output itself: one tap, stride 1, no padding and the
        grid's size (no output_padding), so that im2col of the output copies it (a 1x1
        convolution's input, as ops._backward reads it) and col2im copies the columns."""
        g = self.geometry
        return self.grid == self.image and all(
            k == 1 and s == 1 and p == 0 for k, s, p in zip(g.kernel_size, g.stride, g.padding))

    @property
    def column_rows(self) -> int:
        """Rows of one group's column matrix: ``C_out / groups * prod(kernel_size)``."""
        return self.out_channels // self.groups * self.geometry.taps

    def split(self, gathered: Sequence[bool]) -> "Split":
        """The forward pass with the taps of the ``gathered`` dims gathered from the input by
        im2col before the GEMM, and the other dims' taps summed into the output by col2im
        after it (see :class:`Split`). A dim can be gathered where its dilation is a
        multiple of its stride (at stride 1, always). Cached per call shape and route."""
        return _split(self, tuple(bool(d) for d in gathered))

    def _split(self, gathered: tuple[bool, ...]) -> "Split":
        g, groups = self.geometry, self.groups
        check(len(gathered) == g.nd and all(gatherable(g, d) for d in range(g.nd) if gathered[d]),
              lambda: f"only dims whose dilation is a multiple of their stride can be gathered, "
              f"got {gathered} at stride {g.stride}, dilation {g.dilation}")
        pick = lambda mine, other: tuple(m if d else o for m, o, d in zip(mine, other, gathered))
        ones = (1,) * g.nd
        # Along such a dim every tap lands on image positions s * m - p, at phase position
        # m = i + k * d / s: im2col gathers a stride-1 convolution of the input onto the
        # phase positions, and col2im puts them s apart with kernel 1 (bias alone between).
        # Phase positions start at p // s, so col2im pads p % s; at stride 1 they are the
        # image's positions and col2im copies.
        first = [p // s for p, s in zip(g.padding, g.stride)]
        phases = [(i - 1 + p) // s + 1 - m for i, p, s, m in
                  zip(self.image, g.padding, g.stride, first)]
        step = [d // s for d, s in zip(g.dilation, g.stride)]
        conv = [e * (k - 1) - m for e, k, m in zip(step, g.kernel_size, first)]
        gather = Geometry(pick(g.kernel_size, ones), ones, pick(conv, (0,) * g.nd),
                          pick(step, ones)) if any(gathered) else None
        scatter = Geometry(pick(ones, g.kernel_size), g.stride,
                           pick([p % s for p, s in zip(g.padding, g.stride)], g.padding),
                           pick(ones, g.dilation))
        return Split(gathered, gather, scatter, pick(phases, self.grid),
                     self.in_channels // groups * (gather.taps if gather else 1),
                     self.out_channels // groups * scatter.taps)

    def route_cost(self, gathered: Sequence[bool]) -> float:
        """Column elements per sample of the route that gathers the taps of the ``gathered``
        dims, those of routes that gather any over GATHER_MARGIN, for their extra pass."""
        return self.split(gathered).column_elements(self.groups) / (GATHER_MARGIN if any(gathered) else 1)

    def gathered_dims(self) -> tuple[bool, ...]:
        """The forward pass's route, as the dims whose taps im2col gathers (:meth:`split`):
        the one of least :meth:`route_cost`, ties going to fewer gathered dims. Cached per
        call shape: weighing up to eight routes costs tens of microseconds of host time."""
        return _cheapest_route(self)

    def rows_cost(self, gathered: Sequence[bool]) -> float:
        """Column elements per sample of the row-products forward along the split that
        gathers the ``gathered`` dims (ops._forward_by_rows): as :meth:`route_cost`, its
        outer dim's taps costing nothing."""
        split = self.split(gathered)
        return split.overlap_row_elements[0] * math.prod(split.grid) / (
            GATHER_MARGIN if any(gathered[1:]) else 1)

    def padded_rows(self) -> "PaddedRows | None":
        """The channels_last forward by padded rows (:class:`PaddedRows`) where the call
        allows it: one group, two or more dims, the innermost dim gatherable with 2 to
        ROWS_MAX_TAPS taps, one phase position apart. Cached per call shape."""
        return _padded_rows(self)

    def interleaved_route(self) -> tuple[tuple[bool, ...], bool]:
        """The channels_last forward's route: :meth:`gathered_dims`'s split, or for 3-D
        calls the padded rows (True, with the split that gathers the innermost dim) where
        they move fewer bytes (:attr:`PaddedRows.cost` against :meth:`route_cost`). The
        2-D stride-1 calls they would take run fused where they can, faster (session 38:
        padded rows ran them at 0.44-0.64x the fused route's speed), and no other 2-D call
        was measured."""
        best, rows = self.gathered_dims(), self.padded_rows()
        if rows is not None and self.geometry.nd == 3 and rows.cost < self.route_cost(best):
            return rows.split.gathered, True
        return best, False

    def route(self) -> tuple[tuple[bool, ...], bool]:
        """The forward pass's route: the dims whose taps im2col gathers (:meth:`split`), and
        whether it runs as row products. Row products where some split allows them
        (:attr:`Split.overlaps`, one group, at least ROWS_MIN_PRODUCTS grid rows) and the
        cheapest such moves fewer bytes than :meth:`gathered_dims`'s route
        (:meth:`rows_cost` against :meth:`route_cost`). Cached per call shape."""
        return _route(self)

    def forward_chunks(self, limit: int, element_size: int, split: "Split | None" = None):
        """(samples n0:n1, image rows o0:o1, grid rows i0:i1) chunks of the forward pass
        along ``split`` (nothing gathered by default; its grid's rows) whose buffers stay
        within ``limit`` bytes where any split can (one image row of one sample is the least
        a chunk holds): whole samples where they fit, else bands of image rows of one
        sample, each with the grid rows (and halo) it needs."""
        split = split or self.split((False,) * self.geometry.nd)
        g, rows = split.scatter, split.grid[0]
        row_bytes = split.column_elements(self.groups) // rows * element_size
        if row_bytes * rows <= limit:
            return [(n0, n1, 0, self.image[0], 0, rows)
                    for n0, n1, _, _ in row_chunks(self.batch, rows, row_bytes, limit)]
        halo = -(-g.dilation[0] * (g.kernel_size[0] - 1) // g.stride[0]) + 1
        height = max(1, (limit // row_bytes - halo) * g.stride[0])
        return [(n, n + 1, o, min(o + height, self.image[0]),
                 *g.grid_rows(o, min(o + height, self.image[0]), rows))
                for n in range(self.batch) for o in range(0, self.image[0], height)]

    def row_product_chunks(self, limit: int, element_size: int, split: "Split"):
        """(samples n0:n1, image rows o0:o1, grid rows i0:i1) chunks of the row-products
        forward along ``split`` (:attr:`Split.overlaps`; ops._forward_by_rows) whose buffers
        stay within ``limit`` bytes where any can (one grid row, with its halo, of one sample
        is the least a chunk holds): bands of image rows of as many samples as fit, all
        samples where they do, as every sample widens the row products. No chunks for an
        empty batch."""
        if self.batch == 0:
            return []
        g, rows = split.scatter, split.grid[0]
        inner = math.prod(split.grid[1:]) * element_size
        per_row, halo = split.overlap_row_elements
        height = lambda n: (limit // (n * inner) - halo) // per_row     # grid rows a band
        n = self.batch
        while n > 1 and height(n) < 1:
            n = -(-n // 2)
        step = max(1, min(rows, height(n))) * g.stride[0]
        return [(n0, min(n0 + n, self.batch), o, min(o + step, self.image[0]),
                 *g.grid_rows(o, min(o + step, self.image[0]), rows))
                for n0 in range(0, self.batch, n) for o in range(0, self.image[0], step)]

    def backward_chunks(self, limit: int, element_size: int, extra_rows: int = 0):
        """(samples n0:n1, grid rows i0:i1) chunks of im2col(grad_output) within ``limit``,
        its columns having ``extra_rows`` more rows per group (the convolution's bias)."""
        return row_chunks(self.batch, self.grid[0],
                          self.column_row_bytes(element_size, extra_rows), limit)

    def column_row_bytes(self, element_size: int, extra_rows: int = 0) -> int:
        """Column-buffer bytes for one grid row (outermost dim) of one sample."""
        rows = self.out_channels * self.geometry.taps + self.groups * extra_rows
        return rows * math.prod(self.grid[1:]) * element_size

    @property
    def convolution(self) -> Geometry | None:
        """At stride 1 the transposed convolution is a convolution of the input with the
        flipped kernel: this is its geometry (grid = our image, image = our input), else None."""
        g = self.geometry
        if any(s != 1 for s in g.stride):
            return None
        padding = tuple(d * (k - 1) - p for d, k, p in zip(g.dilation, g.kernel_size, g.padding))
        return Geometry(g.kernel_size, g.stride, padding, g.dilation)

    def prefers_im2col(self) -> bool:
        """Whether im2col + GEMM (possible at stride 1) costs less than GEMM + col2im (see
        :meth:`route_cost`): C_in * prod(output) against C_out * prod(input), per tap."""
        nd = self.geometry.nd
        return self.convolution is not None and \
            self.route_cost((True,) * nd) < self.route_cost((False,) * nd)


# Routes that gather taps by im2col before the GEMM run one pass more than GEMM + col2im;
# they are taken where they move at most this fraction of its column bytes.
GATHER_MARGIN = 0.8
# Row products need this many grid rows: 3d-3x5x7's 18 measured 20% slower than its split
# route on the H200, the cases with 66 to 1026 rows 4-18% faster (benches/NOTES.md).
ROWS_MIN_PRODUCTS = 32


@dataclass(frozen=True)
class Split:
    """A forward pass that splits the kernel's taps between the two column kernels.

    With the taps of the gathered dims (dilation a multiple of the stride) taken by im2col
    and the rest by col2im, a transposed convolution is, per sample and group (``Ka``,
    ``Kb`` the taps of the gathered dims and of the others, ``L`` = prod(grid)):

        gathered  (C_in / G * Ka, L)   = im2col(input) along ``gather``, flipped taps
        columns   (C_out / G * Kb, L)  = weight^T @ gathered
        output    (C_out, *image)      = col2im(columns) along ``scatter`` + bias

    ``grid`` is the number of phase positions along the gathered dims (the output size at
    stride 1; at stride s, the output positions that taps reach, s apart) and the input size
    along the others; ``gather`` and ``scatter`` have kernel 1 along the dims the other one
    owns, and ``scatter`` keeps every dim's stride. The column buffers then hold
    ``C_in / G * Ka + C_out / G * Kb`` rows per position, against ``C_out / G * Ka * Kb``
    with nothing gathered (``gather`` None): on a stride-1 3x3 layer with C_in = C_out, 6
    rows a channel instead of 9.
    """

    gathered: tuple[bool, ...]
    gather: Geometry | None
    scatter: Geometry
    grid: tuple[int, ...]
    gather_rows: int
    scatter_rows: int

    @functools.cached_property   # read on every forward call
    def direct(self) -> bool:
        """Whether col2im has nothing left to do, so that the GEMM can write the output
        itself: every dim gathered, or left with kernel 1, stride 1 and no padding."""
        s = self.scatter
        return all(k == 1 and t == 1 and p == 0 for k, t, p in zip(s.kernel_size, s.stride, s.padding))

    @property
    def overlaps(self) -> bool:
        """Whether the outer dim's taps can ride on overlapping GEMM operands instead of
        im2col (ops._forward_by_rows): it has several taps, one phase position apart, and
        is gathered, and not the only dim."""
        return len(self.grid) > 1 and self.gather is not None and self.gathered[0] and \
            self.gather.dilation[0] == 1 and self.gather.kernel_size[0] > 1

    @property
    def overlap_row_elements(self) -> tuple[int, int]:
        """Buffer elements the row-products forward holds per grid row and per sample and
        inner grid position (its im2col's rows without the outer taps, and the GEMM's
        output rows), and for the halo of each band (the outer taps' extra input rows)."""
        rows = self.gather_rows // self.gather.kernel_size[0]
        return rows + self.scatter_rows, (self.gather.kernel_size[0] - 1) * rows

    def column_elements(self, groups: int) -> int:
        """Elements of the column buffers (gathered, then columns unless direct) of one sample."""
        rows = (self.gather_rows if self.gather else 0) + (0 if self.direct else self.scatter_rows)
        return groups * rows * math.prod(self.grid)


# The padded rows' k products each write every kth row of the columns; at 7 taps their
# GEMMs ran at a third of the split route's rate and 3d-3x5x7 lost 10% in float32 (H100,
# benches/NOTES.md, session 38), at 3 taps 3d-96cube gained 31%.
ROWS_MAX_TAPS = 3


@dataclass(frozen=True)
class PaddedRows:
    """A channels_last forward whose innermost dim's taps ride on the GEMM's reduction.

    Channels innermost, the ``k`` taps that reach phase position ``m`` of the innermost dim
    read input positions ``m - left + j`` (``j < k``, :attr:`Split.gather` at dilation 1):
    ``k`` neighbouring positions, whose channels lie back to back in memory. So in a copy of
    the input whose rows along that dim hold ``width`` positions, position ``i`` holding
    input position ``i - left`` (zero where there is none; :attr:`copy`), the gathered operand of
    phase position ``m`` is the run of ``k C_in`` elements starting at position ``m``: rows
    of the GEMM's first operand overlapping ``k - 1`` positions. A matrix's rows cannot
    overlap for cuBLAS (its leading dim is at least its row), so the GEMM runs as ``k``
    products, product ``b`` over copy positions ``b, b + k, b + 2k, ...``, whose runs tile
    the copy (each a dense matrix, its leading dim ``k C_in``). Per sample (``R = rows``, ``Kb`` the other dims' taps)::

        copy     (*grid[:-1], width, C_in)   the input, zero-padded along the innermost dim
        columns  (R, Kb C_out)               = runs @ weight, positions i >= phases unused
        output   (*image, C_out)             = col2im(columns) along ``split.scatter`` + bias

    The copy holds the input once where im2col would write it ``k`` times
    (channels_last.forward_by_rows).
    """

    split: Split   # gathers the innermost dim alone
    taps: int      # k
    left: int      # zeros before each row of the copy (negative: input positions dropped)
    width: int     # positions a row of the copy and of the columns: the phases + k - 1

    @property
    def copy(self) -> Geometry:
        """The copy as im2col of one tap: grid position ``i`` of the innermost dim reads
        input position ``i - left``."""
        nd = len(self.split.grid)
        return Geometry((1,) * nd, (1,) * nd, (0,) * (nd - 1) + (self.left,), (1,) * nd)

    @property
    def rows(self) -> int:
        """Copy (and column) rows a sample."""
        return math.prod(self.split.grid[:-1]) * self.width

    @property
    def cost(self) -> float:
        """Elements of the copy and the columns a sample, over GATHER_MARGIN as routes that
        gather are (:meth:`ConvTransposeArgs.route_cost`): the copy is a pass of its own."""
        channels = self.split.gather_rows // self.taps
        return self.rows * (channels + self.split.scatter_rows) / GATHER_MARGIN


@functools.lru_cache(maxsize=256)
def _padded_rows(a: ConvTransposeArgs) -> PaddedRows | None:
    g = a.geometry
    if a.groups != 1 or g.nd < 2 or not gatherable(g, g.nd - 1):
        return None
    split = a.split((False,) * (g.nd - 1) + (True,))
    taps = split.gather.kernel_size[-1]
    if not 2 <= taps <= ROWS_MAX_TAPS or split.gather.dilation[-1] != 1:
        return None
    return PaddedRows(split, taps, split.gather.padding[-1], split.grid[-1] + taps - 1)


@functools.lru_cache(maxsize=256)
def _split(a: ConvTransposeArgs, gathered: tuple[bool, ...]) -> Split:
    return a._split(gathered)


@functools.lru_cache(maxsize=256)
def _route(a: ConvTransposeArgs) -> tuple[tuple[bool, ...], bool]:
    best = _cheapest_route(a)
    routes = [r for r in _routes(a.geometry) if a.groups == 1 and r[0] and
              a.split(r).overlaps and a.split(r).grid[0] >= ROWS_MIN_PRODUCTS]
    rows = min(routes, key=a.rows_cost, default=None)
    return (rows, True) if rows and a.rows_cost(rows) < a.route_cost(best) else (best, False)


def _routes(g: Geometry) -> list[tuple[bool, ...]]:
    """Every split's gathered dims, fewest gathered first."""
    free = [d for d in range(g.nd) if gatherable(g, d)]
    return [tuple(d in dims for d in range(g.nd))
            for count in range(len(free) + 1) for dims in itertools.combinations(free, count)]


@functools.lru_cache(maxsize=256)
def _cheapest_route(a: ConvTransposeArgs) -> tuple[bool, ...]:
    return min(_routes(a.geometry), key=a.route_cost)   # min keeps the first of equals: fewer gathered


def gatherable(g: Geometry, dim: int) -> bool:
    """Whether a forward route can gather the taps of ``dim`` by im2col
    (:meth:`ConvTransposeArgs.split`)."""
    return g.dilation[dim] % g.stride[dim] == 0


def row_chunks(batch: int, rows: int, row_bytes: int, limit: int):
    """(samples n0:n1, rows r0:r1) covering ``batch`` samples of ``rows`` rows, each chunk
    within ``limit`` bytes at ``row_bytes`` a row where any split can be: whole samples
    where they fit, else bands of rows of one sample (one row at least)."""
    if row_bytes * rows <= limit:
        step = max(1, limit // max(row_bytes * rows, 1))
        return [(n, min(n + step, batch), 0, rows) for n in range(0, batch, step)]
    height = max(1, limit // row_bytes)
    return [(n, n + 1, r, min(r + height, rows)) for n in range(batch) for r in range(0, rows, height)]


def _check_tensors(op: str, nd: int, input: torch.Tensor, weight: torch.Tensor,
                   bias: torch.Tensor | None) -> None:
    for name, t in (("input", input), ("weight", weight), ("bias", bias)):
        if t is not None and not isinstance(t, torch.Tensor):
            raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    check(input.dim() in (nd + 1, nd + 2), lambda:
          f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to {op}, but got input "
          f"of size: {list(input.shape)}")
    check(weight.dim() == nd + 2, lambda:
          f"Expected {nd + 2}D weight to {op}, but got weight of size: {list(weight.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is None:
            continue
        check(t.dtype == input.dtype,
              lambda: f"Input type ({input.dtype}) and {name} type ({t.dtype}) should be the same")
        check(t.device == input.device,
              lambda: f"Expected all tensors to be on the same device, but found input on "
              f"{input.device} and {name} on {t.device}")
    check(input.dtype in DTYPES, lambda:
          f"{op} supports float16, bfloat16, float32 and float64 tensors, got {input.dtype}")


def _check_sizes(input: torch.Tensor, weight: torch.Tensor, spatial: Sequence[int]) -> None:
    check(all(k > 0 for k in weight.shape[1:]),
          lambda: f"weight of size {list(weight.shape)} has an empty dimension")
    check(all(n > 0 for n in spatial),
          lambda: f"Only zero batch or zero channel inputs are supported, but got input shape: "
          f"{list(input.shape)}")


# Checked calls, remembered per signature (see _remembered); cleared at this many.
MAX_SIGNATURES = 4096
# Tensors whose shape, dtype and device are all the checks and kernels need to know of them.
PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


class _Unremembered(Exception):
    """An argument outside what _signature keys on."""


_INT = frozenset((int,))


def _setting(value):
    """What the argument checks read of a setting: an int, string or None itself, a tuple or
    list of ints as a tuple. Anything else (bools, floats, SymInts, tensors, other sequences)
    raises _Unremembered."""
    kind = type(value)
    if kind is int or kind is str or value is None:
        return value
    # (issuperset over map, not all() over a generator: every call of a layer pays this)
    if (kind is tuple or kind is list) and _INT.issuperset(map(type, value)):
        return tuple(value)
    raise _Unremembered


def _tensor(value):
    """What the argument checks read of a tensor argument: a plain tensor's shape, dtype and
    device; None. Anything else raises _Unremembered."""
    if value is None:
        return None
    if type(value) in PLAIN_TENSORS:
        return value.shape, value.dtype, value.device
    raise _Unremembered


def _signature(op: str, nd: int, tensors: tuple, settings: tuple, named: dict) -> tuple | None:
    """A call's arguments as a key of everything the checks read, or None where they read
    more (see _setting and _tensor) or torch.compile is tracing (its sizes may be symbolic)."""
    if torch.compiler.is_compiling():
        return None
    try:
        key = (op, nd, *map(_tensor, tensors), *map(_setting, settings))
        return key + tuple((name, _setting(v)) for name, v in named.items()) if named else key
    except _Unremembered:
        return None


def _remembered(checks: Callable[..., ConvTransposeArgs]) -> Callable[..., ConvTransposeArgs]:
    """``checks`` (conv_transpose_args or conv_args) run once per call signature: the
    ConvTransposeArgs of a call whose arguments _signature keys on come from the first call
    like it. The checks cost about 10 us of host time, more than a small layer's kernels;
    a call that fails them is not remembered, so it fails again each time."""
    remembered: dict[tuple, ConvTransposeArgs] = {}

    @functools.wraps(checks)
    def checked(op: str, nd: int, input, weight, bias, *settings, **named) -> ConvTransposeArgs:
        key = _signature(op, nd, (input, weight, bias), settings, named)
        if key is None:
            return checks(op, nd, input, weight, bias, *settings, **named)
        a = remembered.get(key)
        if a is None:
            if len(remembered) >= MAX_SIGNATURES:
                remembered.clear()
            a = remembered[key] = checks(op, nd, input, weight, bias, *settings, **named)
        return a

    checked.remembered = remembered
    return checked


@_remembered
def conv_transpose_args(op: str, nd: int, input: torch.Tensor, weight: torch.Tensor,
                        bias: torch.Tensor | None, stride: IntOrTuple, padding: IntOrTuple,
                        output_padding: IntOrTuple, groups: int,
                        dilation: IntOrTuple) -> ConvTransposeArgs:
    """Checks a ``conv_transpose{nd}d`` call as torch does, and works out its shapes."""
    _check_tensors(op, nd, input, weight, bias)
    stride, padding, output_padding, dilation = (
        expand(v, nd, name) for v, name in ((stride, "stride"), (padding, "padding"),
                                            (output_padding, "output_padding"),
                                            (dilation, "dilation")))
    check(all(s > 0 for s in stride), "non-positive stride is not supported")
    check(all(p >= 0 for p in padding), "negative padding is not supported")
    check(all(d > 0 for d in dilation), "dilation should be greater than zero")
    check(all(op_ >= 0 for op_ in output_padding), "negative output_padding is not supported")
    check(all(op_ < max(s, d) for op_, s, d in zip(output_padding, stride, dilation)),
          lambda: f"output padding must be smaller than either stride or dilation, but got "
          f"output_padding={list(output_padding)}, stride={list(stride)}, "
          f"dilation={list(dilation)}")
    check(isinstance(groups, int) and groups > 0, "non-positive groups is not supported")

    unbatched = input.dim() == nd + 1
    shape = (1, *input.shape) if unbatched else tuple(input.shape)
    batch, in_channels, grid = shape[0], shape[1], tuple(shape[2:])
    kernel_size = tuple(weight.shape[2:])
    check(weight.shape[0] >= groups, lambda:
          f"Given groups={groups}, expected weight to be at least {groups} at dimension 0, but "
          f"got weight of size {list(weight.shape)} instead")
    check(weight.shape[0] % groups == 0, lambda:
          f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
          f"but got weight of size {list(weight.shape)} instead")
    check(in_channels == weight.shape[0],
          lambda: f"Given transposed=1, weight of size {list(weight.shape)}, expected input"
          f"{list(input.shape)} to have {weight.shape[0]} channels, but got {in_channels} "
          f"channels instead")
    _check_sizes(input, weight, grid)
    out_channels = weight.shape[1] * groups
    if bias is not None:
        check(bias.dim() == 1 and bias.shape[0] == out_channels, lambda:
              f"Given transposed=1, weight of size {list(weight.shape)}, expected bias to be "
              f"1-dimensional with {out_channels} elements, but got bias of size "
              f"{list(bias.shape)} instead")

    geometry = Geometry(kernel_size, stride, padding, dilation)
    image = geometry.image_size(grid, output_padding)
    # (torch gives an empty batch an empty output where the sizes reach exactly 0.)
    check(all(i > 0 for i in image) or (batch == 0 and all(i >= 0 for i in image)), lambda:
          f"Given input size per channel: {list(grid)}. Calculated output size per channel: "
          f"{list(image)}. Output size is too small")
    return ConvTransposeArgs(geometry, output_padding, groups, batch, in_channels,
                             out_channels, grid, image, unbatched)


@_remembered
def conv_args(op: str, nd: int, input: torch.Tensor, weight: torch.Tensor,
              bias: torch.Tensor | None, stride: IntOrTuple, padding: IntOrTuple | str,
              dilation: IntOrTuple, groups: int) -> ConvTransposeArgs:
    """Checks a ``conv{nd}d`` call as torch does. Returns it seen as the transposed
    convolution that is its adjoint: that one's input is our output ``(N, C_out, *grid)``,
    its output is our input ``(N, C_in, *image)``, and the weight is shared as it is."""
    _check_tensors(op, nd, input, weight, bias)
    stride, dilation = expand(stride, nd, "stride"), expand(dilation, nd, "dilation")
    check(all(s > 0 for s in stride), "non-positive stride is not supported")
    check(all(d > 0 for d in dilation), "dilation should be greater than zero")
    check(isinstance(groups, int) and groups > 0, "non-positive groups is not supported")
    unbatched = input.dim() == nd + 1
    shape = (1, *input.shape) if unbatched else tuple(input.shape)
    batch, in_channels, image = shape[0], shape[1], tuple(shape[2:])
    kernel_size = tuple(weight.shape[2:])
    out_channels = weight.shape[0]
    check(out_channels >= groups and out_channels % groups == 0, lambda:
          f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
          f"but got weight of size {list(weight.shape)} instead")
    check(in_channels == weight.shape[1] * groups,
          lambda: f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
          f"{list(input.shape)} to have {weight.shape[1] * groups} channels, but got "
          f"{in_channels} channels instead")
    _check_sizes(input, weight, image)
    if bias is not None:
        check(bias.dim() == 1 and bias.shape[0] == out_channels, lambda:
              f"Given weight of size {list(weight.shape)}, expected bias to be 1-dimensional "
              f"with {out_channels} elements, but got bias of size {list(bias.shape)} instead")
    same = padding == "same"
    if isinstance(padding, str):
        check(padding in ("same", "valid"), lambda: f"Invalid padding string: '{padding}'")
        check(padding == "valid" or all(s == 1 for s in stride),
              "padding='same' is not supported for strided convolutions")
        # 'same' pads d*(k-1) in all, the odd one at the end, as torch does; the kernels
        # take the leading padding and the sizes, so the trailing side needs nothing.
        padding = tuple(d * (k - 1) // 2 if same else 0 for d, k in zip(dilation, kernel_size))
    else:
        padding = expand(padding, nd, "padding")
        check(all(p >= 0 for p in padding), "negative padding is not supported")
    geometry = Geometry(kernel_size, stride, padding, dilation)
    if same:
        grid = image
    else:
        padded = tuple(i + 2 * p for i, p in zip(image, padding))
        check(all(q >= d * (k - 1) + 1 for q, d, k in zip(padded, dilation, kernel_size)), lambda:
              f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
              f"Kernel size: ({' x '.join(map(str, kernel_size))}). Kernel size can't be "
              f"greater than actual input size")
        grid = geometry.grid_size(image)
    output_padding = tuple(i - r for i, r in zip(image, geometry.image_size(grid, (0,) * nd)))
    return ConvTransposeArgs(geometry, output_padding, groups, batch, out_channels,
                             in_channels, grid, image, unbatched)


def fold_geometry(op: str, nd: int | None, kernel_size: IntOrTuple, dilation: IntOrTuple,
                  padding: IntOrTuple, stride: IntOrTuple) -> Geometry:
    """The geometry of a fold/unfold (col2im/im2col) call. Spatial dims come from the first
    tuple argument, or ``nd`` (fold's output_size), else 2 as in torch's fold and unfold."""
    if nd is None:
        nd = next((len(v) for v in (kernel_size, dilation, padding, stride)
                   if not isinstance(v, int)), 2)
    check(nd in (1, 2, 3), lambda: f"{op}: 1, 2 or 3 spatial dims are supported, got {nd}")
    kernel_size, dilation, padding, stride = (
        expand(v, nd, name) for v, name in ((kernel_size, "kernel_size"), (dilation, "dilation"),
                                            (padding, "padding"), (stride, "stride")))
    check(all(k > 0 for k in kernel_size), lambda:
          f"{op}: kernel_size must be positive, got {list(kernel_size)}")
    check(all(d > 0 for d in dilation), lambda:
          f"{op}: dilation must be positive, got {list(dilation)}")
    check(all(p >= 0 for p in padding), lambda:
          f"{op}: padding must be non-negative, got {list(padding)}")
    check(all(s > 0 for s in stride), lambda: f"{op}: stride must be positive, got {list(stride)}")
    return Geometry(kernel_size, stride, padding, dilation)


def blocks(op: str, g: Geometry, image: Sequence[int]) -> tuple[int, ...]:
    """The grid of sliding blocks over ``image``; every dim must have at least one."""
    grid = g.grid_size(image)
    check(all(n > 0 for n in grid), lambda:
          f"{op}: given input with spatial size {tuple(image)}, kernel_size={g.kernel_size}, "
          f"dilation={g.dilation}, padding={g.padding}, calculated shape of the array of "
          f"sliding blocks as {grid}, but its components must be at least one")
    return grid
