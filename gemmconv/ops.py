"""Transposed convolution as GEMM + col2im: autograd and the functional API.

Shapes (``G`` groups, ``K = prod(kernel_size)``, ``L = prod(input spatial)``,
``M = C_out / G * K``):

    input    (N, C_in, *grid)          viewed as (N, G, C_in / G, L)
    weight   (C_in, C_out / G, *kernel) viewed as (G, C_in / G, M)
    columns  (N, G, M, L)              = weight^T @ input, per sample and group
    output   (N, C_out, *image)        = col2im(columns) + bias

Backward: ``columns = im2col(grad_output)``; ``grad_input = weight @ columns``;
``grad_weight = sum over samples of input @ columns^T``; ``grad_bias`` sums grad_output.

The operators are ``torch.library`` custom ops (``gemmconv::conv_transpose`` and its
backward), so autograd, ``torch.compile`` and fake tensors see one opaque op each. Eager
calls on plain tensors and Parameters run the same functions through one
``torch.autograd.Function`` (``_Eager``), which costs a fraction of the ops' host-side
dispatch.
"""
import functools
import math
import weakref
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
from torch.autograd import forward_ad

from . import channels_last as cl
from . import columns as cols
from . import _node, depthwise, fused, gemm, graphs
from .shapes import (PLAIN_TENSORS, ConvTransposeArgs, Geometry, IntOrTuple, Split, blocks,
                     check, conv_args, conv_transpose_args, expand, fold_geometry)

# 4 GiB: on the H200 forwards ran up to 12% faster than at 1 GiB (fewer, larger chunks;
# none slower), and torch's cuDNN calls take up to about as much (benches/NOTES.md).
_workspace_limit = 4 << 30


def get_workspace_limit() -> int:
    """Bytes of column buffer one call may hold at a time (see set_workspace_limit)."""
    return _workspace_limit


def set_workspace_limit(nbytes: int) -> None:
    """Bounds the column buffer: work is split into chunks of whole samples, or of bands of
    the outermost spatial dim of one sample, whose columns fit in ``nbytes``. The least a
    chunk holds is the columns for one output row of one sample. The fused backward's
    copies keep to it too, in chunks of whole samples (fused.backward). Default 4 GiB:
    lower it where memory is short, at some cost in speed on large inputs."""
    global _workspace_limit
    if not isinstance(nbytes, int) or nbytes <= 0:
        raise ValueError(f"workspace limit must be a positive number of bytes, got {nbytes!r}")
    _workspace_limit = nbytes


def _args_from_lists(input, weight, bias, stride, padding, output_padding, dilation, groups):
    nd = weight.dim() - 2
    return conv_transpose_args(f"conv_transpose{nd}d", nd, input, weight, bias, stride,
                               padding, output_padding, groups, dilation)


# Where a sample has at most this many positions, the GEMMs run on the samples side by side
# (columns (G, M, N, L) rather than (N, G, M, L)): per-sample products L wide keep most of a
# tensor-core tile idle, and the weight gradient's per-sample partial products (N of them,
# each the weight's size) outweigh the columns. The input (and the input gradient) are
# reordered to match, one pass over a tensor that is small where L is; or, where L is not
# that small, products batched over the samples read and write them in place
# (_samples_batched).
SAMPLES_INNER_MAX_POSITIONS = 1024


def _samples_inner(batch: int, cells: int) -> bool:
    return batch > 1 and cells <= SAMPLES_INNER_MAX_POSITIONS


# Where the samples side by side come from a product batched over the samples rather than
# from a reordered copy: the forward's product reads each sample where it lies and writes
# its L columns of the side-by-side matrix (leading dim n L, batch stride L), and the input
# gradient's writes each sample in place rather than through a permuted copy. On the H200
# (benches/NOTES.md, session 26; benches/batched_probe.py) that ran as fast or faster, and
# saved the copy's kernel and host time, on the zoo's layers of at least 64 positions and 64
# input channels a group (DCGAN's 32x32 layer 48 -> 23 us forward); with fewer positions
# (DCGAN's and the VAE's 4x4: 20 -> 41 us) or channels (FCN-32s's 21: input gradient 173 ->
# 437 us) the thin products ran up to 2.5x slower.
BATCHED_MIN_POSITIONS = 64
BATCHED_MIN_CHANNELS = 64


def _samples_batched(cells: int, channels: int) -> bool:
    """Whether samples side by side (_samples_inner) of ``cells`` positions and ``channels``
    input channels a group come from a batched product, not a reordered copy."""
    return cells >= BATCHED_MIN_POSITIONS and channels >= BATCHED_MIN_CHANNELS


def _side_by_side(buffer: torch.Tensor, n: int, channels: int, taps: int,
                  cells: int) -> torch.Tensor:
    """Columns laid out (C, taps, n, L) in ``buffer``, as the column kernels take them:
    ``(n, C, taps, L)``. Strides given outright: a view would give a single tap any stride,
    and the kernels derive a channel's columns from it."""
    return buffer.as_strided((n, channels, taps, cells), (cells, taps * n * cells, n * cells, 1))


class _ForwardPlan(NamedTuple):
    """A forward's route (shapes.Split, and whether by row products), its chunks
    (ConvTransposeArgs.forward_chunks or row_product_chunks), the workspace elements the
    largest chunk needs, and whether its GEMM runs on the samples side by side
    (_samples_inner: where nothing is gathered and every chunk holds whole samples)."""
    split: Split
    by_rows: bool
    chunks: tuple
    workspace: int
    samples_inner: bool = False


@functools.lru_cache(maxsize=256)
def _forward_plan(a: ConvTransposeArgs, gathered: tuple, by_rows: bool, element_size: int,
                  limit: int) -> _ForwardPlan:
    """The plan of a forward, once per call shape: working it out costs a few microseconds of
    host time, which small calls wait for."""
    split = a.split(gathered)
    if by_rows:
        chunks = a.row_product_chunks(limit, element_size, split)
        per_row, halo = split.overlap_row_elements
        positions = math.prod(split.grid[1:])
        workspace = max(((n1 - n0) * positions * ((i1 - i0) * per_row + halo)
                         for n0, n1, _, _, i0, i1 in chunks), default=0)
    else:
        chunks = a.forward_chunks(limit, element_size, split)
        row_elements = split.column_elements(a.groups) // split.grid[0]   # both buffers, a grid row
        workspace = max(((n1 - n0) * (i1 - i0) * row_elements for n0, n1, _, _, i0, i1 in chunks),
                        default=0)
        inner = (split.gather is None and _samples_inner(a.batch, math.prod(split.grid))
                 and all(i1 - i0 == split.grid[0] for *_, i0, i1 in chunks))
        return _ForwardPlan(split, by_rows, tuple(chunks), workspace, inner)
    return _ForwardPlan(split, by_rows, tuple(chunks), workspace)


def _forward(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
             a: ConvTransposeArgs, gathered: Optional[Sequence[bool]] = None,
             by_rows: bool = False, interleaved: Optional[bool] = None) -> torch.Tensor:
    """The output of ``a`` along the route that gathers the taps of the ``gathered`` dims
    before the GEMM (shapes.Split), by row products where ``by_rows`` (_forward_by_rows).
    By default the fused route (fused.py: no columns in memory) where the call can take it
    (fused.unavailable), or the depthwise kernels (depthwise.py: no GEMM either) for one
    input channel a group or a few, else the route that moves the fewest bytes
    (ConvTransposeArgs.route). On channels_last tensors where ``interleaved``
    (channels_last.py); None: where the input or weight is channels_last, as torch decides
    its output's memory format."""
    if 0 in a.image:   # (an empty batch whose output sizes reach 0: no route plans for it)
        return cl.empty(x, a.output_shape,
                        cl.suggested(x, weight) if interleaved is None else interleaved)
    if gathered is None and x.is_cuda:
        out = _replayed(x, weight, bias, a, interleaved)
        if out is not None:
            return out
    if interleaved is None:
        interleaved = gathered is None and cl.suggested(x, weight)
    if gathered is None and x.is_cuda:
        if fused.takes(a, x, weight, interleaved):   # (while a CUDA graph is captured)
            return fused.forward(x, weight, bias, a, cl.empty(x, a.output_shape, interleaved))
        if depthwise.takes(a, x, weight):
            return depthwise.forward(x, weight, bias, a, cl.empty(x, a.output_shape, interleaved))
    if interleaved:   # padded rows, the cheapest split, or where its GEMM writes the output, by im2col
        gathered, rows = cl.route(a, x.element_size(), _workspace_limit)
        if rows is not None:
            return cl.forward_by_rows(x, weight, bias, a, rows)
        split = a.split(gathered)
        if split.direct:
            return _forward_by_im2col(x, weight, bias, a, True)
        return cl.forward(x, weight, bias, a, split.gathered, _workspace_limit)
    if gathered is None:
        gathered, by_rows = a.route()
    plan = _forward_plan(a, tuple(gathered), by_rows, x.element_size(), _workspace_limit)
    split = plan.split
    if by_rows:
        return _forward_by_rows(x, weight, bias, a, plan)
    if split.direct:
        return _forward_by_im2col(x, weight, bias, a)
    groups, gather = a.groups, split.gather
    rows, m, cells = split.gather_rows, split.scatter_rows, math.prod(split.grid)
    inner = cells // split.grid[0]
    x = x.contiguous()
    workspace = x.new_empty(plan.workspace)
    w = out = None
    batched = plan.samples_inner and _samples_batched(cells, rows)
    for n0, n1, o0, o1, i0, i1 in plan.chunks:
        n, band = n1 - n0, (i1 - i0) * inner
        if gather:             # the gathered columns follow the GEMM's output in the workspace
            gathered_columns = cols.im2col(
                x[n0:n1].view(n * a.in_channels, *a.grid), gather, (i1 - i0, *split.grid[1:]),
                padding=gather.band_padding(0, i0),
                out=workspace[n * groups * m * band:n * groups * (m + rows) * band],
            ).view(n, groups, rows, band)
        elif plan.samples_inner and batched:   # each sample where it lies
            gathered_columns = x[n0:n1].view(n, groups, rows, cells)
        elif plan.samples_inner:   # (1, G, rows, n L): the samples side by side
            gathered_columns = _samples_side_by_side(x[n0:n1], groups, cells)
        elif n == a.batch and band == cells:   # the whole input: no slices to take
            gathered_columns = x.view(n, groups, rows, cells)
        else:
            gathered_columns = x.view(a.batch, groups, rows, cells)[n0:n1, ..., i0 * inner:i1 * inner]
        if w is None:   # regrouped once the first gather is queued: the GPU starts meanwhile
            w = _split_weight(weight, a, split)
        # One as_strided each, as every step of a view costs microseconds of host time before
        # the GEMM starts: the weight (1, G, rows, m) transposed and broadcast over the
        # samples, and the GEMM's output at the front of the workspace.
        taps = split.scatter.taps
        if plan.samples_inner:   # columns (G, m, n, L), seen by col2im as (n, C_out, taps, L)
            k = n if batched else 1   # products: one a sample, or one over n L columns
            gemm.matmul(w.as_strided((k, groups, m, rows), (0, rows * m, 1, m)), gathered_columns,
                        workspace.as_strided((k, groups, m, n * band // k),
                                             (band, m * n * band, n * band, 1)))
            columns = _side_by_side(workspace, n, a.out_channels, taps, band)
        else:
            columns = workspace.as_strided((n, groups, m, band), (groups * m * band, m * band, band, 1))
            gemm.matmul(w.as_strided((n, groups, m, rows), (0, rows * m, 1, m)),
                        gathered_columns, columns)
            columns = columns.view(n, a.out_channels, taps, band)
        if out is None:        # allocated once the first GEMM is queued, likewise
            out = x.new_empty(a.output_shape)
            planes = out.view(a.batch * a.out_channels, *a.image)
        cols.col2im(columns, bias,
                    split.scatter, (i1 - i0, *split.grid[1:]), (o1 - o0, *a.image[1:]),
                    out=planes[n0 * a.out_channels:n1 * a.out_channels, o0:o1],
                    padding=split.scatter.band_padding(o0, i0))
    return x.new_empty(a.output_shape) if out is None else out   # None: no samples, no chunks


class _FusedReplay(NamedTuple):
    """A CUDA forward that takes the fused route (fused.takes), decided on its first call:
    its checks of the device, the precision policy and the cost model took 15-30 us of the
    H200's host time a call (benches/NOTES.md, session 31). Launched as a CUDA graph where
    one is kept (as _Replay.graphed), whatever its size: the host's work before the kernel
    starts (the weight's reorder, the plan's lookup, the descriptors, Triton's launch) adds
    to every call from an idle GPU, 0.25 ms of 2d-64to128's channels_last call on an H100
    (2.74 ms launched, 2.54 graphed; benches/NOTES.md, session 41)."""
    interleaved: bool

    def run(self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
            a: ConvTransposeArgs, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        if out is None:
            out = cl.empty(x, a.output_shape, self.interleaved)
        return fused.forward(x, weight, bias, a, out)

    def graphed(self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                a: ConvTransposeArgs) -> torch.Tensor:
        """The output of call ``a`` as :meth:`run` gives it, as a CUDA graph where one is
        kept (a planar input's copy counts against the graphs' memory limit)."""
        return _graphed_forward(self, x, weight, bias, a,
                                lambda: fused.forward_bytes(x, weight, a.out_channels))


class _DepthwiseReplay(NamedTuple):
    """A CUDA forward that takes the depthwise kernel (depthwise.takes), decided on its
    first call as _FusedReplay's route is, with the kernel's launch planned then, and
    launched as a CUDA graph where one is kept (as _Replay.graphed): a Triton launch costs
    the host more than a graph's (benches/NOTES.md, session 35)."""
    interleaved: bool
    plan: depthwise.Plan

    def run(self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
            a: ConvTransposeArgs, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        if out is None:
            out = cl.empty(x, a.output_shape, self.interleaved)
        return depthwise.launch(self.plan, x, weight, bias, a, out)

    def graphed(self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                a: ConvTransposeArgs) -> torch.Tensor:
        """The output of call ``a`` as :meth:`run` gives it, as a CUDA graph where one is
        kept. (What run allocates: a copy of the weight and of the bias, at most.)"""
        return _graphed_forward(self, x, weight, bias, a,
                                lambda: depthwise.launch_bytes(self.plan, a, x.element_size()))


class _Replay(NamedTuple):
    """A CUDA forward that runs as one GEMM and one col2im over the whole call: the column
    route with nothing gathered, in one chunk, planar or channels_last. Its cuBLAS calls
    (``product``) and col2im launch are worked out on the first call of its shape; later
    calls only allocate and launch. On small layers the GPU waits for the host, and the
    views and plans of _forward and channels_last.forward cost 2-3 times these launches
    there (benches/NOTES.md, session 24). ``samples_inner``: the GEMM reads the samples side
    by side, from a reordered copy of the input (_samples_inner; not where a product
    batched over the samples reads them in place, _samples_batched)."""
    product: gemm._Product
    launch: object               # _cuda.Launch
    workspace: int
    interleaved: bool
    samples_inner: bool
    weight_view: tuple = ()      # the planar GEMM's weight operand: (size, stride) of the weight
    padded: int = 0              # channels_last: the input channels zero-padded to, or 0
    dense: int = 0               # channels_last: the groups of a block-diagonal weight, or 0

    def run(self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
            a: ConvTransposeArgs, workspace: Optional[torch.Tensor] = None,
            out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The output of call ``a``, into ``workspace`` and ``out`` where given (those its
        plans were worked out on, or an output of the layout it gives), else new ones."""
        from . import _cuda
        if out is None:
            out = cl.empty(x, a.output_shape, self.interleaved)
        x, weight = _in_layout(x, weight, self.interleaved)
        if workspace is None:
            workspace = x.new_empty(self.workspace)
        if self.interleaved:      # positions x C_in @ the reordered weight (channels_last.py)
            x_rows, w = cl.gemm_operands(x, weight, a, self.padded or a.in_channels,
                                         bool(self.dense))
            operands = (x_rows.data_ptr(), w.data_ptr())
        else:   # the weight, or its copy where gemm.py's layout choice keeps one
            w = gemm.first_operand(self.product, weight.as_strided(*self.weight_view)) \
                if self.product.copied else weight
            rows = _samples_side_by_side(x, a.groups, math.prod(a.grid)) \
                if self.samples_inner else x
            operands = (w.data_ptr(), rows.data_ptr())
        gemm.run(self.product, *operands, workspace.data_ptr(), x.device)
        _cuda.run_col2im(self.launch, x.device, workspace.data_ptr(),
                         0 if bias is None else bias.data_ptr(), out.data_ptr())
        return out

    def graphed(self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                a: ConvTransposeArgs) -> torch.Tensor:
        """The output of call ``a`` as :meth:`run` gives it, as a CUDA graph where one is
        kept."""
        return _graphed_forward(self, x, weight, bias, a, lambda: self.graph_bytes(x, weight))

    def graph_bytes(self, x: torch.Tensor, weight: torch.Tensor) -> int:
        """The memory a graph of this call takes while it runs: its workspace, and the copies
        run makes (the input's, the weight's reorder, their padding, its block-diagonal form),
        at most."""
        copies = x.numel() * (2 if self.padded else 1) + weight.numel() * (3 + self.dense)
        return (self.workspace + copies) * x.element_size() + gemm.workspace_bytes(self.product)


def _graphed_forward(replay, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                     a: ConvTransposeArgs, nbytes: Callable[[], int],
                     shape: Optional[tuple] = None) -> torch.Tensor:
    """The output of a forward replay (_Replay, _FusedReplay, _DepthwiseReplay, _ConvReplay,
    _ConvFusedReplay: its ``run`` into an output of its layout, of ``shape``, by default
    ``a``'s output's), launched as a CUDA graph where one is kept for these tensors'
    addresses (graphs.py); ``nbytes()``: the memory a graph of the call takes while it
    runs."""
    from . import _cuda
    out = cl.empty(x, a.output_shape if shape is None else shape, replay.interleaved)
    addresses = _forward_addresses(x, weight, bias, out)
    run = lambda: replay.run(x, weight, bias, a, out=out)   # noqa: E731
    if not graphs.launch(replay, addresses, run, nbytes, x.device, _cuda.raw_stream(x.device)):
        run()
    return out


def _forward_addresses(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                       out: torch.Tensor) -> tuple:
    """The addresses a forward's graph is kept by (graphs.launch): the C++ forward matches
    them too, with the stream (_Steady.with_node)."""
    return (x.data_ptr(), weight.data_ptr(), 0 if bias is None else bias.data_ptr(),
            out.data_ptr())


def _in_layout(x: torch.Tensor, weight: torch.Tensor, interleaved: bool) -> tuple:
    """``x`` and ``weight`` as the column routes read them, copied only where they are not:
    channels_last ``x`` where ``interleaved`` (the weight is reordered anyway), else both
    contiguous."""
    if interleaved:
        return cl.ordered(x), weight
    return x.contiguous(), weight.contiguous()


def _samples_side_by_side(x: torch.Tensor, groups: int, cells: int) -> torch.Tensor:
    """Samples ``x (n, C, *grid)`` (contiguous; or ``(n, G, C / G, L)``) as a GEMM operand
    with the samples side by side (_samples_inner): ``(1, G, C / G, n L)``, a copy."""
    n = x.shape[0]
    return x.view(n, groups, -1, cells).permute(1, 2, 0, 3).reshape(1, groups, -1, n * cells)


# Replays by call: the checked arguments, the tensors' layouts, dtypes, device and 16-byte
# alignment, the precision policy and the workspace limit. None where a call is not one.
_replays: dict[tuple, Union[_Replay, _FusedReplay, _DepthwiseReplay, None]] = {}
MAX_REPLAYS = 4096
_UNSEEN = object()


def _replay_key(a: ConvTransposeArgs, interleaved: bool, *tensors: Optional[torch.Tensor]) -> tuple:
    """What a replay's plans depend on beyond the checked arguments ``a``: the layout, the
    tensors' strides and 16-byte alignment, dtype and device, the precision policy and the
    workspace limit."""
    x = tensors[0]
    return (a, interleaved, x.dtype, x.device, gemm._compute_type(x.dtype), _workspace_limit,
            *[None if t is None else (t.stride(), t.data_ptr() % 16) for t in tensors])


def _layout(interleaved: Optional[bool], x: torch.Tensor, weight: torch.Tensor) -> bool:
    """``interleaved``, or where None, whether the call takes the channels_last route."""
    return cl.suggested(x, weight) if interleaved is None else interleaved


def _kept(cache: dict, key: tuple, work_out: Callable[[], tuple]):
    """``(replay, buffers)``: the replay kept under ``key`` (None where the call is not
    one), else the one ``work_out()`` gives, kept, with the buffers its plans were worked out
    on; ``(None, ())`` while a CUDA graph is being captured and nothing is kept yet (gemm.py
    remembers no layout choice then)."""
    replay = cache.get(key, _UNSEEN)
    if replay is not _UNSEEN:
        return replay, ()
    if torch.cuda.is_current_stream_capturing():
        return None, ()
    replay, buffers = work_out()
    if len(cache) >= MAX_REPLAYS:
        cache.clear()
    cache[key] = replay
    return replay, buffers


def _replayed(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
              a: ConvTransposeArgs, interleaved: Optional[bool]) -> Optional[torch.Tensor]:
    """The output of a CUDA forward by its replay (_Replay, _FusedReplay or
    _DepthwiseReplay), worked out on its first call; None where the call takes neither the
    fused route nor the depthwise kernel nor runs as one GEMM and one col2im (or see
    _kept). ``interleaved`` None: as cl.suggested says, asked on the first call only (the
    key holds the strides it reads)."""
    replay, buffers = _kept(_replays, _replay_key(a, interleaved, x, weight, bias), lambda:
                            _work_out_replay(x, weight, bias, a, _layout(interleaved, x, weight)))
    if replay is None:
        return None
    if buffers:
        return replay.run(x, weight, bias, a, *buffers)
    return replay.graphed(x, weight, bias, a)


def _work_out_replay(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                     a: ConvTransposeArgs, interleaved: bool) -> tuple:
    """``(replay, (workspace, out))``: the plans _forward (planar) or channels_last.forward
    would make for this call, taken from the views they would pass on the buffers given
    back, where it is one GEMM and one col2im with no copies but the ones _Replay.run
    makes (_in_layout's, as those routes make them); ``(_FusedReplay, ())`` where it takes
    the fused route, ``(_DepthwiseReplay, ())`` the depthwise kernel; ``(None, ())`` where
    none of these."""
    from . import _cuda
    if fused.takes(a, x, weight, interleaved):
        return _FusedReplay(interleaved), ()
    if depthwise.takes(a, x, weight):
        out = cl.empty(x, a.output_shape, interleaved, "meta")   # (its strides, for the plan)
        return _DepthwiseReplay(interleaved, depthwise.plan(a, x, out, bias is not None)), ()
    groups, cells = a.groups, math.prod(a.grid)
    if (bias is not None and bias.stride(0) != 1) or \
            0 in (a.batch, a.in_channels, a.out_channels, cells, math.prod(a.image)):
        return None, ()
    x, weight = _in_layout(x, weight, interleaved)
    if interleaved:
        gathered, rows = cl.route(a, x.element_size(), _workspace_limit)
        if rows is not None:
            return None, ()
        split = a.split(gathered)
        plan = cl.forward_plan(a, tuple(gathered), x.element_size(), _workspace_limit)
        if split.gather or split.direct or len(plan.chunks) != 1:
            return None, ()
        m, (_, count) = split.scatter_rows, plan.rows[0]
        padded = cl.padded_channels(a, x.element_size())
        dense = gemm.dense_groups(x.dtype, True, groups, split.gather_rows)
        x_rows, w = cl.gemm_operands(x, weight, a, padded, dense)
        workspace, out = x.new_empty(plan.workspace), cl.empty(x, a.output_shape, True)
        columns = workspace[:count * groups * m].view(count, groups * m)
        products = 1 if dense else groups
        product = gemm.plan(cl._group_rows(x_rows, products), w.unsqueeze(0),
                            cl._group_rows(columns, products), False)
        launch = _cuda.interleaved_launch(
            "col2im", columns.view(a.batch, *split.grid, products, split.scatter.taps,
                                   a.out_channels // products),
            cl._positions(out), split.scatter, split.scatter.band_padding(0, 0))
    else:
        gathered, by_rows = a.route()
        if by_rows:
            return None, ()
        plan = _forward_plan(a, tuple(gathered), by_rows, x.element_size(), _workspace_limit)
        split = plan.split
        if split.gather or split.direct or len(plan.chunks) != 1 or \
                tuple(plan.chunks[0]) != (0, a.batch, 0, a.image[0], 0, split.grid[0]):
            return None, ()
        rows, m, taps, n = split.gather_rows, split.scatter_rows, split.scatter.taps, a.batch
        cells = math.prod(split.grid)
        workspace, out = x.new_empty(plan.workspace), x.new_empty(a.output_shape)
        w = _split_weight(weight, a, split)
        batched = plan.samples_inner and _samples_batched(cells, rows)
        samples_inner = plan.samples_inner and not batched   # (the input reordered)
        weight_view = ((1 if samples_inner else n, groups, m, rows), (0, rows * m, 1, m))
        if plan.samples_inner:
            k = n if batched else 1
            side = workspace.as_strided((k, groups, m, n * cells // k),
                                        (cells, m * n * cells, n * cells, 1))
            product = gemm.plan(w.as_strided(*weight_view), x.view(n, groups, rows, cells)
                                if batched else _samples_side_by_side(x, groups, cells), side)
            columns = _side_by_side(workspace, n, a.out_channels, taps, cells)
        else:
            columns = workspace.as_strided((n, groups, m, cells),
                                           (groups * m * cells, m * cells, cells, 1))
            product = gemm.plan(w.as_strided(*weight_view), x.view(n, groups, rows, cells), columns)
            columns = columns.view(n, a.out_channels, taps, cells)
        launch = cols.col2im_launch(columns, bias, split.scatter, split.grid, a.image,
                                    out.view(n * a.out_channels, *a.image),
                                    split.scatter.band_padding(0, 0))
        if any(product.contiguous):
            return None, ()
        replay = _Replay(product, launch, plan.workspace, False, samples_inner, weight_view)
        return replay, (workspace, out)
    if product.copied or any(product.contiguous):
        return None, ()
    return _Replay(product, launch, plan.workspace, True, False,
                   padded=0 if padded == a.in_channels else padded,
                   dense=groups if dense else 0), (workspace, out)


def _forward_by_rows(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                     a: ConvTransposeArgs, plan: _ForwardPlan) -> torch.Tensor:
    """The forward along ``plan.split`` (one group, :attr:`shapes.Split.overlaps`) with the outer
    dim's ``k0`` taps carried by the GEMM rather than gathered. Per band of ``R`` grid rows
    (``Ka'`` = the inner gathered taps, ``L'`` = prod(inner grid), ``K = k0 C_in Ka'``):

        gathered  (R + k0 - 1, C_in Ka', N, L')   im2col of the input, outer dim outermost
        columns   (R, C_out Kb, N, L')            row r = weight (C_out Kb, K) @ gathered[r : r + k0]
        output    (N, C_out, *image)              col2im(columns) along ``scatter`` + bias

    Rows of ``gathered`` lie ``C_in Ka' N L'`` apart, so rows r to r + k0 - 1 are one
    ``K x N L'`` matrix, and neighbouring rows' matrices overlap: the outer taps cost no
    column bytes, and each product is N L' columns wide (per-sample products of one row
    each, ``L'`` wide, run cuBLAS's batched GEMM far below its rate; NOTES change 28)."""
    split = plan.split
    gather, scatter, k0 = split.gather, split.scatter, split.gather.kernel_size[0]
    inner_gather = Geometry((1, *gather.kernel_size[1:]), gather.stride, gather.padding,
                            gather.dilation)
    cin, cout, kb = a.in_channels, a.out_channels, scatter.taps
    ka, m, inner = inner_gather.taps, split.scatter_rows, split.grid[1:]
    k, positions = k0 * cin * ka, math.prod(inner)
    x = x.contiguous()
    workspace = x.new_empty(plan.workspace)
    w = out = None
    for n0, n1, o0, o1, i0, i1 in plan.chunks:
        n, r = n1 - n0, i1 - i0      # r = 0 where no tap reaches the band: col2im adds the bias
        width = n * positions                          # columns of each row product
        gathered = workspace[:(r + k0 - 1) * cin * ka * width].view(r + k0 - 1, cin, ka, n, *inner)
        cols.im2col(x[n0:n1].view(n * cin, *a.grid), inner_gather, (r + k0 - 1, *inner),
                    padding=inner_gather.band_padding(0, i0), out=gathered.movedim(3, 0).movedim(1, 3))
        if w is None:   # regrouped, and the output allocated, once the first gather is queued:
            # the GPU starts meanwhile. (ci, k0, ka) rows, as _split_weight gives them,
            # reordered to (k0, ci, ka).
            w = _split_weight(weight, a, split).view(cin, k0, ka, m).transpose(0, 1).reshape(k, m).t()
            out = x.new_empty(a.output_shape)
            planes = out.view(a.batch * cout, *a.image)
        operands = gathered.as_strided((1, r, k, width), (0, cin * ka * width, width, 1),
                                       gathered.storage_offset())
        products = workspace[gathered.numel():gathered.numel() + r * m * width].view(1, r, m, width)
        gemm.matmul(w.view(1, 1, m, k).expand(1, r, m, k), operands, products)
        cols.col2im(products.view(r, cout, kb, n, *inner).movedim(3, 0).movedim(1, 3), bias,
                    scatter, (r, *inner), (o1 - o0, *a.image[1:]),
                    out=planes[n0 * cout:n1 * cout, o0:o1], padding=scatter.band_padding(o0, i0))
    return x.new_empty(a.output_shape) if out is None else out   # None: no samples, no chunks


def describe_route(a: ConvTransposeArgs, interleaved: bool = False, on_chip: bool = False,
                   direct: bool = False, element_size: int = 4) -> str:
    """The forward route of ``a`` in words, dims named D, H, W: which dims' taps ride on row
    products, which im2col gathers, and whether col2im follows the GEMM (e.g. ``"rows H,
    GEMM + col2im"``, ``"im2col W, GEMM"``); on channels_last tensors where ``interleaved``
    (``"channels_last: im2col W, GEMM + col2im"``, ``"channels_last: padded rows W, GEMM +
    col2im"`` for elements of ``element_size`` bytes); the fused route where ``on_chip``, the
    depthwise kernel (or the grouped one, for a few input channels a group) where ``direct``
    (see _forward)."""
    if on_chip or direct:
        return ("channels_last: " if interleaved else "") + \
            (FUSED_ROUTE if on_chip else direct_route(a))
    if interleaved:
        gathered, rows = cl.route(a, element_size, _workspace_limit)
        if rows is not None:
            return "channels_last: padded rows W, GEMM + col2im"
        by_rows = False
    else:
        gathered, by_rows = a.route()
    names = "DHW"[3 - a.geometry.nd:]
    by_im2col = (False, *gathered[1:]) if by_rows else gathered
    parts = [f"rows {names[0]}"] if by_rows else []
    if any(by_im2col):
        parts.append("im2col " + "".join(n for n, g in zip(names, by_im2col) if g))
    parts.append("GEMM" if a.split(gathered).direct else "GEMM + col2im")
    return ("channels_last: " if interleaved else "") + ", ".join(parts)


FUSED_ROUTE = "fused implicit GEMM (columns on chip)"
DEPTHWISE_ROUTE = "depthwise kernel (no GEMM, no columns)"
GROUPED_ROUTE = "grouped direct kernel (no GEMM, no columns)"


def direct_route(a: ConvTransposeArgs) -> str:
    """The name of the depthwise module's kernel a call that takes it runs: the depthwise
    one for one input channel a group, else the grouped one."""
    return DEPTHWISE_ROUTE if a.in_channels == a.groups else GROUPED_ROUTE


def _split_weight(weight: torch.Tensor, a: ConvTransposeArgs, split) -> torch.Tensor:
    """The weight as the GEMM of ``split`` reads it: ``(1, G, C_in / G * Ka, C_out / G * Kb)``,
    contiguous, rows (input channel, gathered taps flipped), columns (output channel, other
    taps). With nothing gathered and a contiguous weight this is a view of it."""
    nd, groups = a.geometry.nd, a.groups
    if not any(split.gathered):
        return weight.contiguous().view(1, groups, split.gather_rows, split.scatter_rows)
    dims = range(nd)
    kept = [d for d in dims if not split.gathered[d]]
    taken = [d for d in dims if split.gathered[d]]
    w = weight.flip([2 + d for d in taken]) if taken else weight
    w = w.view(groups, a.in_channels // groups, a.out_channels // groups, *a.geometry.kernel_size)
    w = w.permute(0, 1, *[3 + d for d in taken], 2, *[3 + d for d in kept])
    return w.reshape(1, groups, split.gather_rows, split.scatter_rows).contiguous()


# Split-K for the weight gradient: a band's positions are cut into pieces of at least this
# many, multiplied side by side, and the partial products summed.
SPLIT_MIN_POSITIONS = 4096
SPLIT_TARGET_TILES = 264   # two waves of 128 x 128 output tiles on 132 SMs
SPLIT_ALIGN = 16           # pieces of whole multiples of this many positions


def _add_weight_grad(grad_weight: torch.Tensor, x: torch.Tensor, columns: torch.Tensor,
                     n0: int, start: int) -> None:
    """``grad_weight (G, C_in/G, M) += sum over samples and positions of x @ columns^T`` for
    ``columns (n, G, M, band)`` and the matching positions ``start:start + band`` of samples
    ``n0:n0 + n`` of ``x (N, G, C_in/G, L)``. The product's output is small and its inner
    dim long: where the batch makes less than half of SPLIT_TARGET_TILES output tiles,
    cutting the positions into pieces batched side by side (split-K) fills the GPU.
    Deterministic: fixed pieces, fixed order of summation."""
    n, groups, m, band = columns.shape
    cin = x.shape[2]
    if gemm.dense_groups(x.dtype, x.is_cuda, groups, cin):
        dense = grad_weight.new_zeros(1, groups * cin, groups * m)
        _add_weight_grad(dense, x.view(x.shape[0], 1, groups * cin, x.shape[3]),
                         columns.reshape(n, 1, groups * m, band), n0, start)
        diagonal = dense.view(groups, cin, groups, m).diagonal(dim1=0, dim2=2)   # (C_in/G, M, G)
        grad_weight += diagonal.permute(2, 0, 1)
        return
    pieces, size = _split_k(n, groups, cin, m, band)
    acc = grad_weight.dtype
    if pieces == 1:                              # enough tiles already: one call for all groups
        partial = x.new_empty((n, groups, cin, m), dtype=acc)
        gemm.matmul(x[n0:n0 + n, ..., start:start + band], columns.transpose(-1, -2), partial)
        grad_weight += partial.sum(0)
        return
    for g in range(groups):
        a = x.as_strided((n, pieces, cin, size), (x.stride(0), size, x.stride(2), 1),
                         x.storage_offset() + n0 * x.stride(0) + g * x.stride(1) + start)
        b = columns.as_strided((n, pieces, size, m), (columns.stride(0), size, 1, columns.stride(2)),
                               columns.storage_offset() + g * columns.stride(1))
        partial = gemm.matmul(a, b, x.new_empty((n, pieces, cin, m), dtype=acc))
        tail = band - pieces * size
        if tail:                                 # what the equal pieces leave over
            rest = gemm.matmul(x[n0:n0 + n, g:g + 1, :, start + pieces * size:start + band],
                               columns[:, g:g + 1, :, pieces * size:].transpose(-1, -2),
                               x.new_empty((n, 1, cin, m), dtype=acc))
            partial = torch.cat([partial, rest], 1)
        grad_weight[g] += partial.sum((0, 1))


def _split_k(n: int, groups: int, cin: int, m: int, band: int) -> Tuple[int, int]:
    """How _add_weight_grad cuts a band of ``band`` positions of ``n`` samples' columns
    ``(n, G, M, band)`` against ``C_in / G = cin`` input channels: (pieces, positions a
    piece); one piece of the whole band where the batch makes enough output tiles."""
    tiles = n * groups * -(-cin // 128) * -(-m // 128)
    pieces = 1 if 2 * tiles >= SPLIT_TARGET_TILES else \
        max(1, min(band // SPLIT_MIN_POSITIONS, -(-SPLIT_TARGET_TILES // tiles)))
    # Whole multiples of 16 elements keep every piece's pointers 16-byte aligned for cuBLAS
    # (a piece has at least SPLIT_MIN_POSITIONS positions, so none is empty).
    return (pieces, band // pieces // SPLIT_ALIGN * SPLIT_ALIGN) if pieces > 1 else (1, band)


def _weight_grad_partials(n: int, groups: int, cin: int, m: int, band: int, dense: bool) -> int:
    """The most elements, in the accumulation dtype, that _add_weight_grad's partial products
    and their sums take at once for these columns (as _split_k), its groups run as one
    dense product where ``dense`` (gemm.dense_groups)."""
    if dense:   # the dense product, and the partials of the call that fills it
        return groups * cin * groups * m + _weight_grad_partials(n, 1, groups * cin,
                                                                 groups * m, band, False)
    pieces, _ = _split_k(n, groups, cin, m, band)
    if pieces == 1:   # every sample's product, and their sum
        return (n + 1) * groups * cin * m
    # The most at once: a group's pieces' products, its tail's, both concatenated, and their
    # sum (the previous group's concatenation and tail, alive while the next group's pieces
    # are made, take no more).
    return (2 * n * (pieces + 1) + 1) * cin * m


def _laid_out(t: torch.Tensor, interleaved: bool) -> bool:
    """Whether ``t`` is in the layout the column routes read (channels_last where
    ``interleaved``, else contiguous): not copied by _in_layout or _gradient_in_layout."""
    return t.is_contiguous(memory_format=cl.memory_format(t.dim())) if interleaved \
        else t.is_contiguous()


# torch's sum of many rows into few outputs stages partial sums in a buffer of its own, as
# large as 8 bytes an element summed: 128 MiB for the 16.7M elements of the 3-D U-Net's ups.1
# output gradient, channels_last, in float32 and bfloat16 alike (H200, torch 2.11;
# benches/results/s54/D). A graph's pool keeps it for as long as the graph is kept.
SUM_STAGING_BYTES = 8


def _bias_grad_bytes(grad: torch.Tensor) -> int:
    """The most memory _bias_grad takes while it sums ``grad (N, C, *spatial)``: torch's
    staging of partial sums (SUM_STAGING_BYTES an element), and the sums in the
    accumulation dtype (per sample or per cl.SIDE_BY_SIDE rows, then their total, then its
    cast)."""
    rows = max(grad.shape[0], cl.SIDE_BY_SIDE) + 2
    return SUM_STAGING_BYTES * grad.numel() + \
        rows * grad.shape[1] * cols.accumulation_dtype(grad.dtype).itemsize


def _bias_grad(grad: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """A bias's gradient: the sum of ``grad (N, C, *spatial)`` over all dims but the
    channels, accumulated in float32 at least, read in the call's layout (channels_last
    where ``interleaved``: cl.channel_sums). Planar: positions first, then samples, as the
    contiguous reduction streams at the copy rate, where one reduction over both dims ran at
    60% of it (H200)."""
    if interleaved:
        return cl.channel_sums(grad)
    acc = cols.accumulation_dtype(grad.dtype)
    rows = grad.reshape(*grad.shape[:2], math.prod(grad.shape[2:]))
    return rows.sum(2, dtype=acc).sum(0).to(grad.dtype) if rows.numel() else \
        grad.new_zeros(grad.shape[1])


@functools.lru_cache(maxsize=256)
def _adjoint(a: ConvTransposeArgs) -> ConvTransposeArgs:
    """At stride 1 the transposed convolution ``a`` is the convolution of its input with the
    flipped kernel (_convolution_weight): the transposed convolution that convolution is the
    adjoint of, as shapes.conv_args gives it."""
    return ConvTransposeArgs(a.convolution, a.output_padding, a.groups, a.batch, a.out_channels,
                             a.in_channels, a.image, a.grid, False)


def _convolution_weight(weight: torch.Tensor, a: ConvTransposeArgs) -> torch.Tensor:
    """The weight of _adjoint's convolution, ``(C_out, C_in / G, *kernel)``: ``weight``'s
    kernel flipped, its channels swapped within each group."""
    groups, nd = a.groups, a.geometry.nd
    cin, cout = a.in_channels // groups, a.out_channels // groups
    w = weight.flip(list(range(2, 2 + nd))).view(groups, cin, cout, *a.geometry.kernel_size)
    return w.transpose(1, 2).reshape(a.out_channels, cin, *a.geometry.kernel_size)


def _from_convolution_weight(grad: torch.Tensor, a: ConvTransposeArgs) -> torch.Tensor:
    """A gradient for _convolution_weight, in the transposed convolution's layout."""
    groups, nd = a.groups, a.geometry.nd
    cin, cout = a.in_channels // groups, a.out_channels // groups
    grad = grad.view(groups, cout, cin, *a.geometry.kernel_size).transpose(1, 2)
    return grad.reshape(a.in_channels, cout, *a.geometry.kernel_size).flip(list(range(2, 2 + nd)))


def _forward_by_im2col(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                       a: ConvTransposeArgs, interleaved: bool = False) -> torch.Tensor:
    """Stride 1 only, as a convolution: ``output = flipped weight @ im2col(input)``. Its
    columns ``(N, G, C_in / G * K, prod(output))`` outweigh GEMM + col2im's by C_in / C_out
    per output position against input position, which can be fewer bytes."""
    # The flipped weight is built once the first im2col is queued (see _backward).
    return _conv_forward(x, functools.partial(_convolution_weight, weight, a), bias, _adjoint(a),
                         interleaved)


def _backward_by_im2col(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                        a: ConvTransposeArgs, need: List[bool],
                        interleaved: bool = False) -> List[torch.Tensor]:
    """The backward of _forward_by_im2col, on the same smaller columns: the convolution's
    backward (_conv_backward), its weight gradient brought back to our layout."""
    adjoint, w = _adjoint(a), _convolution_weight(weight, a)
    grad_input, grad_weight, grad_bias = _conv_backward(grad_out, x, w, adjoint, need, interleaved)
    if need[1]:
        grad_weight = _from_convolution_weight(grad_weight, a)
    return [grad_input, grad_weight, grad_bias]


def _backward(grad_out: torch.Tensor, x: Optional[torch.Tensor],
              weight: Union[torch.Tensor, Callable[[], torch.Tensor]], a: ConvTransposeArgs,
              need: List[bool], bias: Optional[torch.Tensor] = None,
              interleaved: Optional[bool] = None,
              out: Optional[list] = None) -> List[Optional[torch.Tensor]]:
    """Gradients of input, weight and bias, as ``need`` asks (``x`` is read for the weight's
    only, ``weight`` for the input's, or a function making it, called once the first im2col
    is queued). Its input gradient is also the forward pass of the convolution ``a`` is the
    adjoint of (see shapes.conv_args), whose ``bias (C_in,)`` it then adds through the GEMM:
    each sample's and group's columns get rows of ones, the weight columns that sum to the
    bias (_bias_columns). That costs a few rows in the columns where adding the bias to the
    output afterwards would read and write the whole output once more; a pointwise call
    whose GEMMs read grad_out where it lies adds it afterwards (below). On channels_last
    tensors where ``interleaved`` (channels_last.py); None: where ``grad_out``, ``x`` or the
    weight is channels_last. Planar, ``out`` (a gradient per ``need``, None for the others:
    the input's contiguous) takes the gradients, and is returned (a graph's run,
    _GraphedBackward, _ConvReplay); channels_last, it takes the input gradient alone."""
    if interleaved is None:
        interleaved = cl.suggested(grad_out, x, None if callable(weight) else weight)
    if interleaved:
        assert out is None or not (need[1] or need[2]), \
            "the channels_last backward allocates its weight and bias gradients"
        return cl.backward(grad_out, x, weight, a, need, _workspace_limit, bias,
                           None if out is None else out[0])
    g, groups = a.geometry, a.groups
    cin, m, cells = a.in_channels // groups, a.column_rows, math.prod(a.grid)
    inner = cells // a.grid[0]
    in_place = _columns_in_place(a, need, bias is not None)
    # Two rows of ones carry the bias; more, to a whole 16 bytes a weight row, keep cuBLAS on
    # its aligned kernels (a 162-element row measured 1.6x slower than 160 on the H200).
    align = 16 // grad_out.element_size()
    ones = 0 if bias is None or in_place else 2 + (-(m + 2)) % align
    assert not (ones and need[1]), "the bias rows serve the input gradient alone"
    grad_out = grad_out.contiguous().view(a.batch * a.out_channels, *a.image)
    x = x.contiguous().view(a.batch, groups, cin, cells) if need[1] else None
    acc = cols.accumulation_dtype(grad_out.dtype)
    empty = lambda: grad_out.new_empty(0)   # a fresh one per unused gradient: none may alias
    input_shape = (a.batch, groups, cin, cells)
    grad_input = None if need[0] else empty()   # allocated with the operand (below)
    grad_weight = grad_out.new_zeros((groups, cin, m), dtype=acc) if need[1] else None
    if need[0] or need[1]:
        chunks = a.backward_chunks(_workspace_limit, grad_out.element_size(), ones)
        workspace = grad_out.new_empty(0 if in_place else max(
            ((n1 - n0) * groups * (m + ones) * (i1 - i0) * inner for n0, n1, i0, i1 in chunks),
            default=0))
        # The samples side by side (_samples_inner): columns (1, G, M, n L), each product one
        # call over all the chunk's samples.
        side_by_side = not ones and not in_place and _samples_inner(a.batch, cells) and \
            all(i1 - i0 == a.grid[0] for *_, i0, i1 in chunks)
        operand = None
        for n0, n1, i0, i1 in chunks:
            n, band = n1 - n0, (i1 - i0) * inner
            if in_place:   # the columns are grad_out's rows
                columns = grad_out.view(a.batch, groups, m, cells)[n0:n1, ..., i0 * inner:i1 * inner]
            elif side_by_side:
                buffer = workspace[:groups * m * n * band]
                cols.im2col(grad_out[n0 * a.out_channels:n1 * a.out_channels], g, a.grid,
                            out=_side_by_side(buffer, n, a.out_channels, g.taps, band))
                columns = buffer.view(1, groups, m, n * band)
            else:
                buffer = workspace[:n * groups * (m + ones) * band].view(n * groups, m + ones, band)
                cols.im2col(grad_out[n0 * a.out_channels:n1 * a.out_channels], g,
                            (i1 - i0, *a.grid[1:]), padding=g.band_padding(0, i0),
                            out=buffer[:, :m].unflatten(1, (a.out_channels // groups, g.taps)))
                if ones:
                    buffer[:, m:].fill_(1)
                columns = buffer.view(n, groups, m + ones, band)
            if need[0] and operand is None:
                # Built, and the input gradient allocated, once the first im2col is queued,
                # so that the GPU starts meanwhile (the bias columns take several small kernels).
                # Returned as allocated, never as a view: a view returned from inside an
                # autograd Function may not be modified in place (a ReLU(inplace=True) next).
                grad_input = grad_out.new_empty(a.input_shape) if out is None else out[0]
                products = grad_input.view(input_shape)
                operand = (weight() if callable(weight) else weight).contiguous().view(
                    1, groups, cin, m)
                if ones:
                    operand = torch.cat([operand, _bias_columns(bias, groups, ones)], -1)
            if need[0] and side_by_side and _samples_batched(band, cin):   # each sample in place
                gemm.matmul(operand.expand(n, -1, -1, -1),
                            buffer.as_strided((n, groups, m, band), (band, m * n * band, n * band, 1)),
                            products[n0:n1])
            elif need[0] and side_by_side:   # (G, C_in/G, n, L), then into the samples' order
                side = gemm.matmul(operand, columns, grad_out.new_empty((1, groups, cin, n * band)))
                products[n0:n1].copy_(side.view(groups, cin, n, band).permute(2, 0, 1, 3))
            elif need[0]:
                gemm.matmul(operand.expand(n, -1, -1, -1), columns,
                            products[n0:n1, ..., i0 * inner:i1 * inner])
            if need[1] and side_by_side:   # x as (1, G, C_in/G, n L): one product, all samples
                samples = _samples_side_by_side(x[n0:n1], groups, band)
                grad_weight += gemm.matmul(samples, columns.transpose(-1, -2),
                                           grad_weight.new_empty((1, groups, cin, m)))[0]
            elif need[1]:
                _add_weight_grad(grad_weight, x, columns, n0, i0 * inner)
        if in_place and bias is not None and operand is not None:
            grad_input.view(input_shape).add_(bias.view(1, groups, cin, 1))
    if grad_input is None:   # no chunks: no samples
        grad_input = grad_out.new_empty(a.input_shape) if out is None else out[0]
    grad_weight = (grad_weight.to(grad_out.dtype).view(a.in_channels, -1, *g.kernel_size)
                   if need[1] else empty())
    grad_bias = (_bias_grad(grad_out.view(a.batch, a.out_channels, *a.image), False)
                 if need[2] else empty())
    if out is None:
        return [grad_input, grad_weight, grad_bias]
    for given, grad, asked in zip(out[1:], (grad_weight, grad_bias), need[1:]):
        if asked:
            given.copy_(grad)
    return out


def _columns_in_place(a: ConvTransposeArgs, need: List[bool], bias: bool) -> bool:
    """Whether :func:`_backward`'s planar GEMMs read the columns of the pointwise call ``a``
    (ConvTransposeArgs.pointwise), grad_out itself, where they lie, for the gradients
    ``need`` asks (with a ``bias`` to add): one pass of im2col's copy less, and no
    workspace. Not where the samples go side by side (_samples_inner: a reordered copy,
    which im2col makes; but the input gradient's products batched over the samples,
    _samples_batched, read them in place, as here), nor where adding the bias afterwards,
    one pass over the input gradient, moves more than the copy (more channels out than in)."""
    cells = math.prod(a.grid)
    return a.pointwise and (not bias or a.in_channels <= a.out_channels) and \
        (not _samples_inner(a.batch, cells) or
         not need[1] and _samples_batched(cells, a.in_channels // a.groups))


def _bias_columns(bias: torch.Tensor, groups: int, rows: int) -> torch.Tensor:
    """``bias (C,)`` as weight columns ``(1, G, C / G, rows)`` for as many rows of ones: two
    that sum to the bias, then zeros. Where float32 products run on TF32, which keeps 10 of
    float32's 23 mantissa bits, the first is the bias with its 13 low bits cleared (exact in
    TF32) and the second the rest, so that their sum carries the bias to float32 accuracy."""
    bias = bias.contiguous()
    high = bias
    if bias.dtype == torch.float32 and bias.is_cuda and gemm.uses_tf32():
        high = (bias.view(torch.int32) & -(1 << 13)).view(torch.float32)
    columns = bias.new_zeros(bias.shape[0], rows)
    columns[:, 0], columns[:, 1] = high, bias - high
    return columns.view(1, groups, -1, rows)


def _conv_transpose_backward(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                             a: ConvTransposeArgs,
                             need: List[bool]) -> List[Optional[torch.Tensor]]:
    """The gradients of call ``a`` asked for by ``need`` (input, weight, bias); the others
    empty, or None (a replay's)."""
    if 0 in a.image:   # (an empty batch whose output sizes reach 0, as _forward: no terms)
        return [torch.zeros_like(x) if need[0] else None,
                torch.zeros_like(weight) if need[1] else None,
                weight.new_zeros(a.out_channels) if need[2] else None]
    if x.is_cuda:   # (the forward's layout, as cl.suggested says, asked on a first call only)
        grads = _replayed_backward(grad_out, x, weight, a, need, None)
        if grads is not None:
            return grads
    interleaved = cl.suggested(x, weight)   # the forward's layout, whatever grad_out's
    if x.is_cuda:
        if fused.backward_takes(a, x, weight, interleaved, _workspace_limit):   # (capturing)
            return _fused_backward(grad_out, x, weight, a, need)
        if depthwise.backward_takes(a, x, weight, interleaved):   # (capturing)
            return _DepthwiseBackward.planned(grad_out, x, a, need, interleaved).run(
                grad_out, x, weight, a, need)
    if a.prefers_im2col():
        return _backward_by_im2col(grad_out, x, weight, a, need, interleaved)
    return _backward(grad_out, x, weight, a, need, interleaved=interleaved)


def _fused_backward(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                    a: ConvTransposeArgs, need: List[bool]) -> List[torch.Tensor]:
    """The gradients of call ``a`` asked for by ``need`` by the fused kernels (fused.py)."""
    grad_input, grad_weight, grad_bias = fused.backward(grad_out, x, weight, a, need,
                                                        _workspace_limit)
    empty = lambda: grad_out.new_empty(0)   # a fresh one per unused gradient: none may alias
    if grad_bias is None:   # (no copy to sum it from: a planar one's rows, or channels_last)
        grad_bias = _bias_grad(grad_out, cl.suggested(grad_out)) if need[2] else empty()
    return [grad_input if need[0] else empty(), grad_weight if need[1] else empty(), grad_bias]


class _FusedBackward(NamedTuple):
    """A CUDA call's backward that takes the fused kernels (fused.backward_takes), decided
    on its first call, as _FusedReplay decides a forward. Launched as a CUDA graph where
    one is kept, as _BackwardReplay.graphed: the fused backward's host time (its copies,
    launches, partials' sum and casts: 1.6 ms of 3d-3x5x7's bfloat16 step on the H200's
    host, whose kernels took 1.3; benches/NOTES.md, session 30) is where such steps wait."""
    interleaved: bool = False   # channels_last (which calls: fused.backward_unavailable)

    def run(self, grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
            a: ConvTransposeArgs, need: List[bool],
            grads: Optional[list] = None) -> List[Optional[torch.Tensor]]:
        """The gradients asked for (None for the others), written into ``grads`` where
        given (as _new_gradients allocates them), else into new ones."""
        grads = grads or _new_gradients(x, weight, a, need, self.interleaved)
        grad_input, grad_weight, grad_bias = fused.backward(grad_out, x, weight, a, need,
                                                            _workspace_limit, out=grads)
        if grad_bias is None and need[2]:   # (no copy to sum it from)
            grad_bias = grads[2].copy_(_bias_grad(grad_out, cl.suggested(grad_out)))
        return [grad_input, grad_weight, grad_bias]

    def graphed(self, grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                a: ConvTransposeArgs, need: List[bool]) -> List[Optional[torch.Tensor]]:
        """The gradients as :meth:`run` gives them, as a CUDA graph where one is kept."""
        return _graphed_backward(self, grad_out, x, weight, a, need)

    def graph_bytes(self, grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                    a: ConvTransposeArgs) -> int:
        """The memory a graph of this call takes while it runs, at most: fused.backward's,
        the contiguous copies it makes of the output gradient and the input (none of a
        channels_last one: it reads their rows), and the bias gradient's sums where that is
        not summed from a copy."""
        rows = fused.reads_grad_rows(grad_out, x)
        x_rows = fused._channels_last_rows(x) is not None
        copies = (0 if x_rows or x.is_contiguous() else x.numel()) + \
            (0 if rows or grad_out.is_contiguous() else grad_out.numel())
        return fused.backward_bytes(a, x.element_size(), _workspace_limit, self.interleaved,
                                    rows) + copies * x.element_size() + 4 * a.batch * a.out_channels


class _DepthwiseBackward(NamedTuple):
    """A CUDA call's backward that takes the depthwise kernel (depthwise.backward_takes),
    decided and planned on its first call: the input gradient in the forward's layout.
    Launched as a CUDA graph where one is kept, as _BackwardReplay.graphed."""
    interleaved: bool
    plan: depthwise.BackwardPlan

    @staticmethod
    def planned(grad_out: torch.Tensor, x: torch.Tensor, a: ConvTransposeArgs,
                need: List[bool], interleaved: bool) -> "_DepthwiseBackward":
        grad_x = cl.empty(x, x.shape, interleaved, "meta") if need[0] else None   # (strides)
        return _DepthwiseBackward(interleaved,
                                  depthwise.backward_plan(a, grad_out, x, grad_x, need[1]))

    def run(self, grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
            a: ConvTransposeArgs, need: List[bool],
            grads: Optional[list] = None) -> List[Optional[torch.Tensor]]:
        """The gradients asked for (None for the others), written into ``grads`` where
        given (as _new_gradients allocates them), else into new ones."""
        grad_x, grad_w, grad_bias = grads or _new_gradients(x, weight, a, need, self.interleaved)
        depthwise.launch_backward(self.plan, grad_out, x, weight, a, grad_x, grad_w)
        if grad_bias is not None:
            grad_bias.copy_(_bias_grad(grad_out, self.interleaved))
        return [grad_x, grad_w, grad_bias]

    def graphed(self, grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                a: ConvTransposeArgs, need: List[bool]) -> List[Optional[torch.Tensor]]:
        """The gradients as :meth:`run` gives them, as a CUDA graph where one is kept."""
        return _graphed_backward(self, grad_out, x, weight, a, need)

    def graph_bytes(self, grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                    a: ConvTransposeArgs) -> int:
        """The memory a graph of this call takes while it runs: the weight gradient's
        partials and their sum, the weight's contiguous copy, the bias gradient's copy of
        the output gradient and its sums, at most."""
        pairs = a.out_channels // a.groups * a.geometry.taps
        return 4 * (self.plan.splits + 2) * a.in_channels * pairs + \
            weight.numel() * weight.element_size() + 3 * grad_out.numel() * grad_out.element_size()


class _BackwardReplay(NamedTuple):
    """The backward of a CUDA call that runs as one im2col of the output gradient and a GEMM
    per gradient over the whole call, planned on its first call as _Replay plans a forward:
    the planar route with the samples side by side (_samples_inner), or the channels_last
    route (channels_last.backward), in one chunk each, with no dense groups. ``input`` and
    ``weight`` are the products of the gradients asked for (None for the others).
    ``im2col`` is None for a pointwise channels_last call, whose columns are the output
    gradient's rows (ConvTransposeArgs.pointwise), which the products read where they lie."""
    im2col: object               # _cuda.Launch, or None
    input: Optional[gemm._Product]
    weight: Optional[gemm._Product]
    workspace: int
    interleaved: bool
    views: tuple = ((), ())      # planar: (size, stride) of each product's first operand
    batched: bool = False        # planar: the input gradient's product batched over samples

    def run(self, grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
            a: ConvTransposeArgs, need: List[bool],
            grads: Optional[list] = None) -> List[Optional[torch.Tensor]]:
        """The gradients asked for (None for the others), written into ``grads`` where
        given (as _new_gradients allocates them), else into new ones."""
        from . import _cuda
        grad_input, grad_weight, grad_bias = grads or _new_gradients(x, weight, a, need,
                                                                     self.interleaved)
        grad_out = _gradient_in_layout(grad_out, self.interleaved)
        x, weight = _in_layout(x, weight, self.interleaved)
        device, groups, cin = x.device, a.groups, a.in_channels // a.groups
        acc = cols.accumulation_dtype(x.dtype)
        workspace = grad_out.new_empty(self.workspace)
        if self.im2col is None:   # pointwise: the output gradient's rows are the columns
            columns = grad_out.data_ptr()
        else:
            columns = workspace.data_ptr()
            _cuda.run_im2col(self.im2col, device, grad_out.data_ptr(), columns)
        cells, m = math.prod(a.grid), a.column_rows
        if self.input is not None:
            if self.interleaved:   # columns @ the reordered weight, transposed
                w = cl._weight(weight, a).transpose(1, 2)
                gemm.run(self.input, columns, w.data_ptr(), grad_input.data_ptr(), device)
            else:   # each sample in place, or (G, C_in / G, N L) then into the samples' order
                w = gemm.first_operand(self.input, weight.as_strided(*self.views[0])) \
                    if self.input.copied else weight
                side = grad_input if self.batched else \
                    grad_out.new_empty((groups, cin, a.batch, cells))
                gemm.run(self.input, w.data_ptr(), columns, side.data_ptr(), device)
                if not self.batched:
                    grad_input.view(a.batch, groups, cin, cells).copy_(side.permute(2, 0, 1, 3))
        if self.weight is not None:
            # (G, C_in / G, M): channels_last (C_in, K, C_out / G), planar (C_in, C_out / G,
            # K), as the weight. Summed into the gradient itself where it is in ``acc``.
            direct = acc == x.dtype and not self.interleaved
            product = grad_weight if direct else grad_out.new_empty((groups, cin, m), dtype=acc)
            rows = x if self.interleaved else _samples_side_by_side(x, a.groups, cells)
            if self.weight.copied:
                rows = gemm.first_operand(self.weight, rows.as_strided(*self.views[1]))
            gemm.run(self.weight, rows.data_ptr(), columns, product.data_ptr(), device)
            if self.interleaved:
                taps = a.geometry.taps
                grad_weight.view(a.in_channels, -1, taps).copy_(
                    product.view(a.in_channels, taps, -1).transpose(1, 2))
            elif not direct:
                grad_weight.copy_(product.view(grad_weight.shape))
        if grad_bias is not None:
            grad_bias.copy_(_bias_grad(grad_out, self.interleaved))
        return [grad_input, grad_weight, grad_bias]

    def graphed(self, grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                a: ConvTransposeArgs, need: List[bool]) -> List[Optional[torch.Tensor]]:
        """The gradients as :meth:`run` gives them, as a CUDA graph where one is kept."""
        return _graphed_backward(self, grad_out, x, weight, a, need)

    def graph_bytes(self, grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                    a: ConvTransposeArgs) -> int:
        """The memory a graph of this call takes while it runs, at most, as :meth:`run`
        allocates it: its workspace; the output gradient and the input copied where they
        are not in the call's layout; the weight as the input gradient's product reads it;
        the input's rows as the weight gradient's product reads them; the products that
        are cast or reordered afterwards; the bias gradient's sums (_bias_grad_bytes);
        cuBLAS's workspaces."""
        def copied(t: torch.Tensor) -> int:
            return 0 if _laid_out(t, self.interleaved) else t.numel()
        elements = self.workspace + copied(grad_out) + copied(x)
        acc = 0   # elements in the accumulation dtype
        if self.interleaved:
            elements += weight.numel() if self.input is not None else 0   # (reordered)
            acc += weight.numel() if self.weight is not None else 0
        else:
            elements += copied(weight)
            if self.input is not None:
                elements += weight.numel() * self.input.copied + x.numel() * (not self.batched)
            if self.weight is not None:   # the samples side by side, and their other layout
                elements += x.numel() * (1 + self.weight.copied)
                acc += weight.numel() if x.dtype != cols.accumulation_dtype(x.dtype) else 0
        return elements * x.element_size() + acc * cols.accumulation_dtype(x.dtype).itemsize + \
            _bias_grad_bytes(grad_out) + \
            sum(gemm.workspace_bytes(p) for p in (self.input, self.weight) if p is not None)


# The most column elements a _GraphedBackward call takes. Its graph saves host time, which
# the small layers of real models wait for (the VAE decoder's last, 19M elements: its step
# 0.74 -> 0.87x against torch, benches/NOTES.md, session 36), and cost GPU-bound ones
# (3d-stride2-dil2 of the 17 cases, 226M elements: its bfloat16 training step 2.18 ->
# 2.66 ms).
GRAPHED_BACKWARD_MAX_COLUMNS = 1 << 25


def planar_backward_launch(a: ConvTransposeArgs, element_size: int,
                           limit: int) -> Tuple[str, int]:
    """How a planar CUDA call's backward on the column routes launches, both gradients
    asked, as _backward_replay plans it (within workspace ``limit``): ("chunks", how many)
    where its columns take several chunks, run eagerly (_backward); ("side by side",
    column elements), a _BackwardReplay of the samples side by side; ("graphed", column
    elements), a _GraphedBackward of the samples one by one; ("eager", column elements)
    where those are over GRAPHED_BACKWARD_MAX_COLUMNS."""
    n, cells = a.batch, math.prod(a.grid)
    chunks = a.backward_chunks(limit, element_size)
    if len(chunks) != 1 or tuple(chunks[0]) != (0, n, 0, a.grid[0]):
        return "chunks", len(chunks)
    columns = a.groups * a.column_rows * n * cells
    if _samples_inner(n, cells):
        return "side by side", columns
    return "graphed" if columns <= GRAPHED_BACKWARD_MAX_COLUMNS else "eager", columns


class _GraphedBackward(NamedTuple):
    """The backward of a planar CUDA call that _backward runs in one chunk with its samples
    outer (over SAMPLES_INNER_MAX_POSITIONS positions a sample: the input gradient's product
    batched over the samples, the weight's summed over per-sample or split-K products), which
    no single GEMM a gradient plans: _backward itself, into gradients allocated before, as a
    CUDA graph where one is kept. Such calls are small enough to be bound by host time in
    real models (the VAE decoder's last layer: about ten launches and their Python a step)."""
    columns: int   # elements of _backward's columns: one chunk of every sample

    def run(self, grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
            a: ConvTransposeArgs, need: List[bool],
            grads: Optional[list] = None) -> List[Optional[torch.Tensor]]:
        """The gradients asked for (None for the others), written into ``grads`` where
        given (as _new_gradients allocates them), else into new ones."""
        return _backward(grad_out, x, weight, a, need, interleaved=False,
                         out=grads or _new_gradients(x, weight, a, need, False))

    @property
    def interleaved(self) -> bool:
        return False   # (planar calls only)

    def graphed(self, grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                a: ConvTransposeArgs, need: List[bool]) -> List[Optional[torch.Tensor]]:
        """The gradients as :meth:`run` gives them, as a CUDA graph where one is kept."""
        return _graphed_backward(self, grad_out, x, weight, a, need)

    def graph_bytes(self, grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                    a: ConvTransposeArgs) -> int:
        """The memory a graph of this call takes while it runs, at most, as _backward
        allocates it: the columns; the output gradient, the input and the weight copied
        where they are not contiguous; the weight gradient in the accumulation dtype, its
        partial products (_weight_grad_partials) and its cast; the bias gradient's sums
        (_bias_grad_bytes); one cuBLAS workspace."""
        groups, cin = a.groups, a.in_channels // a.groups
        copies = sum(t.numel() for t in (grad_out, x, weight) if not t.is_contiguous())
        dense = gemm.dense_groups(x.dtype, True, groups, cin)   # (graphs are of CUDA calls)
        acc = weight.numel() + _weight_grad_partials(a.batch, groups, cin, a.column_rows,
                                                     math.prod(a.grid), dense)
        return (self.columns + copies + weight.numel()) * x.element_size() + \
            acc * cols.accumulation_dtype(x.dtype).itemsize + _bias_grad_bytes(grad_out) + \
            gemm.LT_WORKSPACE


def _new_gradients(x: torch.Tensor, weight: torch.Tensor, a: ConvTransposeArgs,
                   need: List[bool], interleaved: bool) -> List[Optional[torch.Tensor]]:
    """New tensors for the gradients of call ``a`` that ``need`` asks for (input, weight,
    bias; None for the others), as a backward replay's run writes them: the input's in the
    layout the call runs in (channels_last where ``interleaved``), the weight's and the
    bias's contiguous."""
    return [cl.empty(x, x.shape, interleaved) if need[0] else None,
            weight.new_empty(weight.shape) if need[1] else None,
            x.new_empty((a.out_channels,)) if need[2] else None]


def _graphed_backward(replay, grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                      a: ConvTransposeArgs, need: List[bool],
                      grads: Optional[List[Optional[torch.Tensor]]] = None
                      ) -> List[Optional[torch.Tensor]]:
    """The gradients of a backward replay (_BackwardReplay, _DepthwiseBackward,
    _GraphedBackward, _ConvBackwardReplay: its gradients ``grads``, by default allocated
    by _new_gradients in its layout, then written by its ``run``), launched as a CUDA
    graph where one is kept for these tensors' addresses (graphs.py), if its
    ``graph_bytes(grad_out, x, weight, a)`` (the memory a graph of the call takes while it
    runs) fits the graph memory limit."""
    from . import _cuda
    if grads is None:
        grads = _new_gradients(x, weight, a, need, replay.interleaved)
    addresses = _backward_addresses(grad_out, x, weight, grads)
    run = lambda: replay.run(grad_out, x, weight, a, need, grads)   # noqa: E731
    nbytes = lambda: replay.graph_bytes(grad_out, x, weight, a)   # noqa: E731
    if not graphs.launch(replay, addresses, run, nbytes, x.device, _cuda.raw_stream(x.device)):
        run()
    return grads


def _backward_addresses(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                        grads: List[Optional[torch.Tensor]]) -> tuple:
    """What a backward's graph is kept by (graphs.launch): the addresses of the tensors it
    reads and writes (0 for a gradient not asked for). The C++ node matches them too, with
    the stream."""
    return (grad_out.data_ptr(), x.data_ptr(), weight.data_ptr(),
            *(0 if g is None else g.data_ptr() for g in grads))


def _gradient_in_layout(grad_out: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """The output gradient as the column routes' backward reads it (as _in_layout)."""
    return cl.ordered(grad_out) if interleaved else grad_out.contiguous()


# Backward replays by call, as _replays.
_backward_replays: dict[tuple, Union[_BackwardReplay, _GraphedBackward, _FusedBackward,
                                     _DepthwiseBackward, None]] = {}


def _backward_key(a: ConvTransposeArgs, need: List[bool], interleaved: Optional[bool],
                  x: torch.Tensor, weight: torch.Tensor, grad_out: torch.Tensor) -> tuple:
    """A backward replay's key in _backward_replays: what is asked, and _replay_key's."""
    return (tuple(need), *_replay_key(a, interleaved, x, weight, grad_out))


def _replayed_backward(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                       a: ConvTransposeArgs, need: List[bool],
                       interleaved: Optional[bool]) -> Optional[List[torch.Tensor]]:
    """The gradients of a CUDA call by its replay (_BackwardReplay, _GraphedBackward,
    _FusedBackward or _DepthwiseBackward), planned on its first call; None where it has none,
    as _replayed (``interleaved`` too)."""
    key = _backward_key(a, need, interleaved, x, weight, grad_out)
    replay, _ = _kept(_backward_replays, key, lambda: (_work_out_backward_replay(
        grad_out, x, weight, a, need, _layout(interleaved, x, weight)), ()))
    if replay is None:
        return None
    return replay.graphed(grad_out, x, weight, a, need)


def _work_out_backward_replay(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                              a: ConvTransposeArgs, need: List[bool],
                              interleaved: bool) -> Union[_BackwardReplay, _GraphedBackward,
                                                          _FusedBackward, _DepthwiseBackward,
                                                          None]:
    """The plans _backward (planar) or channels_last.backward would make for this call, from
    the views they would pass, where it is one im2col and a GEMM per gradient with no copies
    but the ones _BackwardReplay.run makes (those of _in_layout and _gradient_in_layout,
    as those routes make them); _GraphedBackward where _backward runs it planar in one
    chunk with its samples outer; else None. Or, where the call's backward takes the fused
    kernels, _FusedBackward; the depthwise kernel, _DepthwiseBackward."""
    from . import _cuda
    if fused.backward_takes(a, x, weight, interleaved, _workspace_limit):
        return _FusedBackward(interleaved)
    if depthwise.backward_takes(a, x, weight, interleaved):
        return _DepthwiseBackward.planned(grad_out, x, a, need, interleaved)
    if a.prefers_im2col():
        return None
    g, groups, n, cells = a.geometry, a.groups, a.batch, math.prod(a.grid)
    cin, cout, m = a.in_channels // groups, a.out_channels // groups, a.column_rows
    if not (need[0] or need[1]) or \
            0 in (n, a.in_channels, a.out_channels, cells, math.prod(a.image)):
        return None
    acc = cols.accumulation_dtype(x.dtype)
    grad_out = _gradient_in_layout(grad_out, interleaved)
    x, weight = _in_layout(x, weight, interleaved)
    batched = False
    if interleaved:
        if gemm.dense_groups(x.dtype, True, groups, cin) or \
                cl.padded_channels(a, x.element_size()) != a.in_channels:   # copies first
            return None
        plan = cl.backward_plan(a, grad_out.element_size(), _workspace_limit)
        if len(plan.chunks) != 1:
            return None
        workspace = grad_out.new_empty(plan.workspace)
        grad_rows = cl._positions(grad_out)
        if a.pointwise:   # the columns are grad_out's rows, read where they lie
            columns, im2col = grad_rows.reshape(n * cells, groups * m), None
        else:
            columns = workspace[:n * cells * groups * m].view(n * cells, groups * m)
            im2col = _cuda.interleaved_launch(
                "im2col", columns.view(n, *a.grid, groups, g.taps, cout), grad_rows, g,
                g.band_padding(0, 0))
        input_product = weight_product = None
        if need[0]:
            w = cl._weight(weight, a).transpose(1, 2)
            rows = cl._positions(cl.empty(x, x.shape, True)).reshape(-1, a.in_channels)
            input_product = gemm.plan(cl._group_rows(columns, groups), w.unsqueeze(0),
                                      cl._group_rows(rows, groups), False)
        if need[1]:
            x_rows = cl._positions(x).reshape(-1, a.in_channels)
            weight_product = gemm.plan(cl._group_rows(x_rows, groups).transpose(-1, -2),
                                       cl._group_rows(columns, groups),
                                       grad_out.new_empty((1, groups, cin, m), dtype=acc), False)
    else:
        how, count = planar_backward_launch(a, grad_out.element_size(), _workspace_limit)
        if how != "side by side":
            return _GraphedBackward(count) if how == "graphed" else None
        workspace = grad_out.new_empty(groups * m * n * cells)
        planes = grad_out.view(n * a.out_channels, *a.image)
        im2col = cols.im2col_launch(planes, g, a.grid, _side_by_side(workspace, n, a.out_channels,
                                                                     g.taps, cells))
        columns = workspace.view(1, groups, m, n * cells)
        input_product = weight_product = None
        w, rows = weight.view(1, groups, cin, m), _samples_side_by_side(x, groups, cells)
        batched = _samples_batched(cells, cin)
        if need[0] and batched:   # as _backward: each sample's input gradient in place
            w = w.expand(n, -1, -1, -1)
            input_product = gemm.plan(
                w, workspace.as_strided((n, groups, m, cells), (cells, m * n * cells, n * cells, 1)),
                grad_out.new_empty((n, groups, cin, cells)))
        elif need[0]:
            input_product = gemm.plan(w, columns, grad_out.new_empty((1, groups, cin, n * cells)))
        if need[1]:
            weight_product = gemm.plan(rows, columns.transpose(-1, -2),
                                       grad_out.new_empty((1, groups, cin, m), dtype=acc))
        views = ((w.shape, w.stride()), (rows.shape, rows.stride()))
    for product in (input_product, weight_product):
        if product is not None and (product.copied and interleaved or any(product.contiguous)):
            return None
    return _BackwardReplay(im2col, input_product, weight_product, workspace.numel(), interleaved,
                           () if interleaved else views, batched)


@torch.library.custom_op("gemmconv::conv_transpose", mutates_args=())
def _conv_transpose_op(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                       stride: List[int], padding: List[int], output_padding: List[int],
                       dilation: List[int], groups: int) -> torch.Tensor:
    a = _args_from_lists(input, weight, bias, stride, padding, output_padding, dilation, groups)
    return _forward(input, weight, bias, a)


@_conv_transpose_op.register_fake
def _(input, weight, bias, stride, padding, output_padding, dilation, groups):
    a = _args_from_lists(input, weight, bias, stride, padding, output_padding, dilation, groups)
    return cl.empty(input, a.output_shape, cl.suggested(input, weight))


def _fake_grads(input: torch.Tensor, weight: torch.Tensor, bias_size: int,
                output_mask: List[bool]) -> List[torch.Tensor]:
    """The backward ops' gradients as fake tensors: the input's in the forward's layout."""
    shapes = (input.shape, weight.shape, (bias_size,))
    grads = [input.new_empty(s if keep else 0) for s, keep in zip(shapes, output_mask)]
    if output_mask[0]:
        grads[0] = cl.empty(input, input.shape, cl.suggested(input, weight))
    return grads


@torch.library.custom_op("gemmconv::conv_transpose_backward", mutates_args=())
def _conv_transpose_backward_op(grad_output: torch.Tensor, input: torch.Tensor,
                                weight: torch.Tensor, stride: List[int], padding: List[int],
                                output_padding: List[int], dilation: List[int], groups: int,
                                output_mask: List[bool]) -> List[torch.Tensor]:
    a = _args_from_lists(input, weight, None, stride, padding, output_padding, dilation, groups)
    grads = _conv_transpose_backward(grad_output, input, weight, a, output_mask)
    # A fresh empty tensor per gradient not asked for (none may alias): a replay gives None.
    return [input.new_empty(0) if g is None else g for g in grads]


@_conv_transpose_backward_op.register_fake
def _(grad_output, input, weight, stride, padding, output_padding, dilation, groups, output_mask):
    return _fake_grads(input, weight, weight.shape[1] * groups, output_mask)


def _asked(grads: List[torch.Tensor], mask: List[bool]) -> tuple:
    """The gradients autograd asked for, None in place of the others."""
    return tuple(g if keep else None for g, keep in zip(grads, mask))


def _register_autograd(op, backward_op) -> None:
    """Autograd for an op called as (input, weight, bias, *settings): its backward op takes
    (grad_output, input, weight, *settings, output_mask) and returns the three gradients."""
    def setup_context(ctx, inputs, output):
        input, weight, _, *settings = inputs
        ctx.save_for_backward(input, weight)
        ctx.settings = settings

    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        mask = list(ctx.needs_input_grad[:3])
        grads = backward_op(grad_output, input, weight, *ctx.settings, mask)
        return (*_asked(grads, mask), *[None] * len(ctx.settings))

    op.register_autograd(backward, setup_context=setup_context)


_register_autograd(_conv_transpose_op, _conv_transpose_backward_op)


class _Eager(torch.autograd.Function):
    """The custom ops' autograd without their dispatch, for plain tensors and Parameters
    outside torch.compile: ``apply(input, weight, bias, a, forward, backward)`` with the op's
    checked arguments ``a``, ``forward(input, weight, bias, a)`` and
    ``backward(grad_output, input, weight, a, output_mask)``, the functions the ops run.
    The ops' Python dispatch and autograd wrappers cost about 90 us of host time a forward
    and 380 a backward on the H200's host, where the first kernel waits for them."""

    @staticmethod
    def forward(ctx, input, weight, bias, a, forward, backward):
        ctx.save_for_backward(input, weight)
        ctx.a, ctx.backward_fn = a, backward
        return forward(input, weight, bias, a)

    @staticmethod
    def backward(ctx, grad_output):
        if torch.is_grad_enabled():   # create_graph: as the ops, no formula for a second order
            return _once_differentiable_gradients(ctx, grad_output)
        # (once_differentiable's no_grad block would only cost host time here: grad is off)
        return _gradients(ctx, grad_output)


def _gradients(ctx, grad_output) -> tuple:
    """_Eager.backward's gradients (see _Eager)."""
    input, weight = ctx.saved_tensors
    mask = list(ctx.needs_input_grad[:3])
    grads = ctx.backward_fn(grad_output, input, weight, ctx.a, mask)
    return (*_asked(grads, mask), None, None, None)


_once_differentiable_gradients = torch.autograd.function.once_differentiable(_gradients)


def _eager(*tensors: Optional[torch.Tensor]) -> bool:
    """Whether a call may take _Eager: not while torch.compile traces it (which needs the
    opaque ops), and only on plain CPU or CUDA tensors or Parameters (fake and meta tensors
    need the ops' fake implementations, other subclasses their own dispatch)."""
    if torch.compiler.is_compiling():
        return False
    for t in tensors:   # (a loop, not all() over a generator: every call pays this)
        if t is not None and not (type(t) in PLAIN_TENSORS and (t.is_cuda or t.is_cpu)):
            return False
    return True


def _run(a: ConvTransposeArgs, input: torch.Tensor, weight: torch.Tensor,
         bias: Optional[torch.Tensor], forward, backward, op,
         settings: Callable[[], tuple]) -> torch.Tensor:
    """A checked call ``a``: ``forward``/``backward`` through _Eager where it may (_applied),
    else the custom ``op(input, weight, bias, *settings())`` (its lists built only then: 1-2
    us of a small layer's host time); an unbatched input runs as a batch of one."""
    if _eager(input, weight, bias):
        return _applied(a, input, weight, bias, forward, backward)
    batched = input.unsqueeze(0) if a.unbatched else input
    out = op(batched, weight, bias, *settings())
    return out.squeeze(0) if a.unbatched else out


def _applied(a: ConvTransposeArgs, input: torch.Tensor, weight: torch.Tensor,
             bias: Optional[torch.Tensor], forward, backward) -> torch.Tensor:
    """``forward(input, weight, bias, a)`` of a call that may take _Eager (see _eager),
    through it where anything requires grad; an unbatched input runs as a batch of one."""
    batched = input.unsqueeze(0) if a.unbatched else input
    if _needs_grad(input, weight, bias):
        out = _Eager.apply(batched, weight, bias, a, forward, backward)
    else:   # nothing to differentiate: the Function's bookkeeping would be host time only
        out = forward(batched, weight, bias, a)
    return out.squeeze(0) if a.unbatched else out


def _needs_grad(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> bool:
    """Whether a call on these tensors records autograd's graph."""
    return torch.is_grad_enabled() and (input.requires_grad or weight.requires_grad
                                        or (bias is not None and bias.requires_grad))


def _autocast(*tensors: Optional[torch.Tensor]):
    """The tensors as torch's autocast hands them to its convolutions: where autocast is on
    for their device, each floating tensor on it but a float64 one in the autocast dtype
    (torch computes a float64 call in float64 there), else unchanged. The casts go through
    autocast's cache where the C++ extension is built (_node: a leaf parameter is cast once
    a region, as torch's convolutions cast it), else one a call, as also while
    torch.compile traces a graph (it cannot trace into the extension)."""
    device = tensors[0].device
    if device.type not in ("cuda", "cpu") or not torch.is_autocast_enabled(device.type):
        return tensors
    dtype = torch.get_autocast_dtype(device.type)
    node = None if torch.compiler.is_compiling() else _node.load()
    if node is not None:
        return tuple(None if t is None else node.autocast_cast(t, dtype, device) for t in tensors)
    return tuple(t.to(dtype) if t is not None and t.is_floating_point() and
                 t.dtype != torch.float64 and t.device.type == device.type else t
                 for t in tensors)


def _conv_transpose(nd: int, input: torch.Tensor, weight: torch.Tensor,
                    bias: Optional[torch.Tensor], stride: IntOrTuple, padding: IntOrTuple,
                    output_padding: IntOrTuple, groups: int, dilation: IntOrTuple) -> torch.Tensor:
    input, weight, bias = _autocast(input, weight, bias)
    a = conv_transpose_args(f"conv_transpose{nd}d", nd, input, weight, bias, stride, padding,
                            output_padding, groups, dilation)
    return _run_conv_transpose(a, input, weight, bias)


def _run_conv_transpose(a: ConvTransposeArgs, input: torch.Tensor, weight: torch.Tensor,
                        bias: Optional[torch.Tensor]) -> torch.Tensor:
    """The checked call ``a`` on tensors already autocast."""
    g = a.geometry
    return _run(a, input, weight, bias, _forward, _conv_transpose_backward, _conv_transpose_op,
                lambda: (list(g.stride), list(g.padding), list(a.output_padding),
                         list(g.dilation), a.groups))


class _Steady:
    """A module's CUDA call that ran by a replay (see module_conv_transpose): its checked
    arguments and its forward replay, the backward replays its calls have taken, by what a
    backward reads beyond the forward's key (_Steady.kind), and the table of the forward's
    and backwards' graphs that the C++ extension launches (gemmconv/_node.py; made at its
    first call there)."""
    __slots__ = ("a", "replay", "backwards", "table")
    MAX_BACKWARDS = 16
    NAME = "gemmconv::ConvTransposeBackward"   # its C++ nodes' (grad_fn's)

    def __init__(self, a: ConvTransposeArgs, replay) -> None:
        self.a, self.replay, self.backwards, self.table = a, replay, {}, None

    @property
    def output_shape(self) -> tuple:
        """The (batched) output's shape, as the C++ node's output gradient has it."""
        return self.a.output_shape

    @staticmethod
    def gradients(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                  a: ConvTransposeArgs, need: List[bool]) -> List[Optional[torch.Tensor]]:
        """The call's gradients as its functional call's backward gives them."""
        return _conv_transpose_backward(grad_out, x, weight, a, need)

    @staticmethod
    def kept_replay(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                    a: ConvTransposeArgs, need: List[bool]):
        """The backward replay :meth:`gradients` kept for this kind of call, or None."""
        return _backward_replays.get(_backward_key(a, need, None, x, weight, grad_out))

    @staticmethod
    def kept_forward(a: ConvTransposeArgs, x: torch.Tensor, weight: torch.Tensor,
                     bias: Optional[torch.Tensor]):
        """The forward replay the call ``a`` on (batched) ``x`` kept, or None."""
        return _replays.get(_replay_key(a, None, x, weight, bias))

    @staticmethod
    def kind(grad_out: torch.Tensor, x: torch.Tensor, need: List[bool]) -> tuple:
        """What a backward of this call reads beyond the forward's key: what is asked, the
        output gradient's strides and alignment, the precision policy and workspace limit."""
        return (*need, grad_out.stride(), grad_out.data_ptr() % 16,
                gemm._compute_type(x.dtype), _workspace_limit)

    def backward(self, grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                 a: ConvTransposeArgs, need: List[bool]) -> List[Optional[torch.Tensor]]:
        """_conv_transpose_backward of a call this one's forward ran: by the backward replay
        kept for its kind (x and weight are the forward's), else the whole lookup, whose
        replay is then kept here."""
        key = self.kind(grad_out, x, need)
        replay = self.backwards.get(key)
        if replay is not None:
            return replay.graphed(grad_out, x, weight, a, need)
        grads = self.gradients(grad_out, x, weight, a, need)
        replay = self.kept_replay(grad_out, x, weight, a, need)
        if replay is not None:
            if len(self.backwards) >= self.MAX_BACKWARDS:
                self.backwards.clear()
            self.backwards[key] = replay
        return grads

    def with_node(self, node, x: torch.Tensor, weight: torch.Tensor,
                  bias: Optional[torch.Tensor], compute: int, limit: int,
                  grad: bool = True) -> torch.Tensor:
        """The call's output through the C++ extension (``node``: its module), as _applied
        gives it: launched there by the forward graph kept for these addresses where its
        table knows one, else by the forward replay, whose kept graph the table then learns
        of. Where ``grad``, its autograd node is the C++ one, whose backward launches a kept
        graph without Python (see _steady_backward). ``compute`` and ``limit``: the
        precision policy and workspace limit of this forward, which a backward graph must
        have been captured under."""
        if self.table is None:
            self.table = node.Table(self.NAME)
        from . import _cuda
        stream = _cuda.raw_stream(x.device) if x.is_cuda else 0
        a = self.a
        out = node.forward(x, weight, bias, self, self.table, stream, compute, limit,
                           a.unbatched, grad)
        if out is not None:
            return out
        batched = x.unsqueeze(0) if a.unbatched else x
        with torch.no_grad():
            out = self.replay.graphed(batched, weight, bias, a)
        if x.is_cuda:
            addresses = _forward_addresses(batched, weight, bias, out)
            serial = graphs.serial(self.replay, stream, addresses)
            if serial is not None:
                self.table.add_forward(out, (stream, *addresses), serial)
        if grad:
            node.attach(out, batched, weight, bias, self, self.table, stream, compute, limit)
        return out.squeeze(0) if a.unbatched else out


def _steady_backward(steady: _Steady, grad_out: Optional[torch.Tensor], x: torch.Tensor,
                     weight: torch.Tensor, need: tuple) -> tuple:
    """The input, weight and bias gradients of a steady call's C++ node where the node
    launched no graph (autograd_node.cpp), as _Eager.backward gives them. Where the
    backward ran as a kept graph, the node's table learns of it: for the same kind of
    backward at the same addresses, the node launches it itself. (Such a graph ran under
    the policy of the backward that captured it, which the node's forward must match.)"""
    a, need = steady.a, list(need)
    if grad_out is None:   # (autograd passes none for an output it did not reach; x batched)
        grad_out = x.new_zeros(steady.output_shape)
    if torch.is_grad_enabled():   # create_graph: as _Eager
        context = _NodeContext((x, weight), need, steady.backward, a)
        return _once_differentiable_gradients(context, grad_out)[:3]
    grads = steady.backward(grad_out, x, weight, a, need)
    kind = steady.kind(grad_out, x, need)
    replay = steady.backwards.get(kind)
    if replay is not None:
        from . import _cuda
        stream = _cuda.raw_stream(x.device)
        addresses = _backward_addresses(grad_out, x, weight, grads)
        serial = graphs.serial(replay, stream, addresses)
        if serial is not None:
            steady.table.add(kind[:3], kind[3], *kind[4:], grads, (stream, *addresses), serial)
    return _asked(grads, need)


class _NodeContext(NamedTuple):
    """What _gradients reads of an _Eager context, for _steady_backward."""
    saved_tensors: tuple
    needs_input_grad: list
    backward_fn: Callable
    a: ConvTransposeArgs


# Each module's calls that ran by replays, while the module lives: {_steady_key: _Steady},
# at most MAX_STEADY of them (a layer called at a few sizes keeps each).
_steady: "weakref.WeakKeyDictionary[torch.nn.Module, dict]" = weakref.WeakKeyDictionary()
MAX_STEADY = 4


def _steady_key(module: torch.nn.Module, x: torch.Tensor, weight: torch.Tensor,
                bias: Optional[torch.Tensor]) -> tuple:
    """What a module's call on plain CUDA tensors reads that its checks and its replay
    depend on: the precision policy and the workspace limit (first: _Steady.with_node
    reads them); the module's settings; the tensors' shapes, strides, dtypes, devices and
    16-byte alignment (the keys of conv_transpose_args's memo and of _replays in one)."""
    tensors = (x, weight) if bias is None else (x, weight, bias)
    return (gemm._compute_type(x.dtype), _workspace_limit, module.stride, module.padding,
            module.output_padding, module.groups, module.dilation,
            *[(t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 16) for t in tensors])


def module_conv_transpose(module: torch.nn.Module, input: torch.Tensor) -> torch.Tensor:
    """The call of ``module`` (a gemmconv.nn.ConvTranspose1d/2d/3d, no ``output_size``) on
    ``input``: as ``conv_transpose{nd}d`` with the module's parameters and settings.

    On a small layer the argument checks and the replays' lookups cost the host more than
    the layer's kernels take (60 us a forward of DCGAN's layers on an H100's host, where
    torch's takes 30-40; benches/NOTES.md, session 49). So each module keeps its CUDA calls
    that ran by replays (_Steady, the last MAX_STEADY of them), and a call that reads the
    same as one of them (_steady_key) goes straight to its replay, forward and backward.
    There the C++ extension (_Steady.with_node) launches the forward's kept graph (a steady
    call took the H200's host 26-37 us with that launch in Python, 14-18 us with it in C++,
    session 52), and where the call needs gradients its autograd node is a C++ one: on
    autograd's device thread our Python node cost a small model's training step more than
    its kernels saved (session 50)."""
    def call(x: torch.Tensor, weight: torch.Tensor,
             bias: Optional[torch.Tensor]) -> Tuple[ConvTransposeArgs, torch.Tensor]:
        nd = len(module.kernel_size)
        a = conv_transpose_args(f"conv_transpose{nd}d", nd, x, weight, bias, module.stride,
                                module.padding, module.output_padding, module.groups,
                                module.dilation)
        return a, _run_conv_transpose(a, x, weight, bias)
    return _module_call(module, input, _Steady, call)


def _module_call(module: torch.nn.Module, input: torch.Tensor, steady_class: type,
                 call: Callable) -> torch.Tensor:
    """A module's call on ``input`` with its parameters: straight to its steady call (of
    ``steady_class``) where it keeps one that reads the same (_steady_key), else
    ``call(x, weight, bias)``, the checked call (``(a, output)``), whose forward replay
    (``steady_class.kept_forward``), where it ran by one, is then kept as a steady call
    (see module_conv_transpose)."""
    x, weight, bias = _autocast(input, module.weight, module.bias)
    key = steadies = None
    if x.is_cuda and _eager(x, weight, bias):   # (others take the custom op: see _run)
        key = _steady_key(module, x, weight, bias)
        steadies = _steady.get(module)
        steady = None if steadies is None else steadies.get(key)
        if steady is not None:
            # (Inside forward-mode AD's dual_level, _Eager raises as a Function without jvp
            # does, where the node would give an output without a tangent.)
            if forward_ad._current_level < 0:
                node = _node.load()
                if node is not None:
                    return steady.with_node(node, x, weight, bias, *key[:2],
                                            _needs_grad(x, weight, bias))
            return _applied(steady.a, x, weight, bias, steady.replay.graphed, steady.backward)
    a, out = call(x, weight, bias)
    if key is not None:
        replay = steady_class.kept_forward(a, x.unsqueeze(0) if a.unbatched else x, weight, bias)
        if replay is not None:
            if steadies is None:
                steadies = _steady[module] = {}
            elif len(steadies) >= MAX_STEADY:
                steadies.clear()
            steadies[key] = steady_class(a, replay)
    return out


def conv_transpose1d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                     stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                     groups: int = 1, dilation: IntOrTuple = 1) -> torch.Tensor:
    """1-D transposed convolution, as ``torch.nn.functional.conv_transpose1d``.

    input ``(N, C_in, L_in)`` or ``(C_in, L_in)``; weight ``(C_in, C_out / groups, kW)``;
    bias ``(C_out,)``; returns ``(N, C_out, L_out)`` (or ``(C_out, L_out)``) with
    ``L_out = (L_in - 1) * stride - 2 * padding + dilation * (kW - 1) + output_padding + 1``.
    """
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                     stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                     groups: int = 1, dilation: IntOrTuple = 1) -> torch.Tensor:
    """2-D transposed convolution, as ``torch.nn.functional.conv_transpose2d``.

    input ``(N, C_in, H_in, W_in)`` or unbatched ``(C_in, H_in, W_in)``; weight
    ``(C_in, C_out / groups, kH, kW)``; bias ``(C_out,)``; returns ``(N, C_out, H_out, W_out)``,
    each output size as in :func:`conv_transpose1d`, per dim.
    """
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                     stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                     groups: int = 1, dilation: IntOrTuple = 1) -> torch.Tensor:
    """3-D transposed convolution, as ``torch.nn.functional.conv_transpose3d``.

    input ``(N, C_in, D_in, H_in, W_in)`` or unbatched ``(C_in, D_in, H_in, W_in)``; weight
    ``(C_in, C_out / groups, kD, kH, kW)``; bias ``(C_out,)``; returns
    ``(N, C_out, D_out, H_out, W_out)``, each output size as in :func:`conv_transpose1d`.
    """
    return _conv_transpose(3, input, weight, bias, stride, padding, output_padding, groups, dilation)


# ---------------------------------------------------------------------------------------
# Convolution: the adjoint of a transposed convolution, on the same GEMMs and kernels.
# Forward: im2col(input) then GEMM (the transposed convolution's input gradient); backward:
# GEMM then col2im for the input (its forward), and its weight gradient with roles swapped.

def _conv_from_lists(input, weight, bias, stride, padding, dilation, groups, same):
    nd = weight.dim() - 2
    return conv_args(f"conv{nd}d", nd, input, weight, bias, stride, "same" if same else padding,
                     dilation, groups)


def _conv_forward(input: torch.Tensor, weight: Union[torch.Tensor, Callable[[], torch.Tensor]],
                  bias: Optional[torch.Tensor], a: ConvTransposeArgs,
                  interleaved: Optional[bool] = None) -> torch.Tensor:
    """The output of the convolution ``a`` is the adjoint of: by its replay where a CUDA
    call has one (_conv_replay), else _backward's input gradient (``interleaved``: as there)."""
    if interleaved is None and input.is_cuda and not callable(weight):
        replay, _ = _kept(_conv_replays, _replay_key(a, None, input, weight, bias),
                          lambda: (_conv_replay(input, weight, a), ()))
        if replay is not None:
            return replay.graphed(input, weight, bias, a)
    return _backward(input, None, weight, a, [True, False, False], bias, interleaved)[0]


# The most column elements a _ConvReplay call takes. The VAE decoder's 3x3 convolutions
# took 0.17-0.50 ms a forward whose kernels took 0.02-0.15 (session 74, H100), the largest
# of 80M column elements (as CONV_BENCH's conv2d-strided; its others have 0.7-1.2G).
GRAPHED_CONV_MAX_COLUMNS = 1 << 27


class _ConvReplay(NamedTuple):
    """A CUDA convolution's forward small enough (GRAPHED_CONV_MAX_COLUMNS) to wait on the
    host: its im2col, weight views, bias columns and GEMM (_backward's, or
    channels_last.backward's where ``interleaved``), as they run eagerly, launched as a
    CUDA graph where one is kept."""
    interleaved: bool
    columns: int   # elements of the columns, the bias's rows of ones too

    @staticmethod
    def planned(x: torch.Tensor, weight: torch.Tensor,
                a: ConvTransposeArgs) -> Optional["_ConvReplay"]:
        """The replay of the call ``a`` (a convolution's forward on ``x``), or None where
        it has none: no positions or channels, or more columns than a graph is worth."""
        cells = math.prod(a.grid)
        if 0 in (a.batch, a.in_channels, a.out_channels, cells, math.prod(a.image)):
            return None
        columns = a.batch * cells * a.groups * (a.column_rows + 16)   # (16 rows of ones at most)
        if columns > GRAPHED_CONV_MAX_COLUMNS:
            return None
        return _ConvReplay(cl.suggested(x, weight), columns)

    def run(self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
            a: ConvTransposeArgs, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The convolution's output ``(N, C_out, *grid)`` (``a``'s input's shape), into
        ``out`` where given (contiguous, or channels_last where ``interleaved``)."""
        return _backward(x, None, weight, a, [True, False, False], bias, self.interleaved,
                         None if out is None else [out, None, None])[0]

    def graphed(self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                a: ConvTransposeArgs) -> torch.Tensor:
        """The output as :meth:`run` gives it, as a CUDA graph where one is kept."""
        return _graphed_forward(self, x, weight, bias, a, lambda: self.graph_bytes(x, weight, a),
                                a.input_shape)

    def graph_bytes(self, x: torch.Tensor, weight: torch.Tensor, a: ConvTransposeArgs) -> int:
        """The memory a graph of this call takes while it runs, at most: its columns; the
        input's copy in the call's layout; the output again (the planar products side by
        side, or the channels_last products over padded channels, cl.padded_channels);
        the weight's copies (contiguous, reordered, block-diagonal over the groups, padded,
        with the bias's columns: 16 more a row or column at most); cuBLAS's workspace."""
        width = cl.padded_channels(a, x.element_size()) if self.interleaved else a.in_channels
        outputs = a.batch * math.prod(a.grid) * (a.in_channels + width)
        weights = weight.numel() * (4 + a.groups) + 16 * (a.in_channels + a.groups * a.column_rows)
        return (self.columns + x.numel() + outputs + weights) * x.element_size() + \
            gemm.LT_WORKSPACE


class _ConvFusedReplay(NamedTuple):
    """A CUDA convolution's forward that takes the fused kernel (fused.convolution_takes):
    no columns in memory. Launched as a CUDA graph where one is kept, whatever its size,
    as _FusedReplay is."""
    interleaved: bool

    def run(self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
            a: ConvTransposeArgs, out: torch.Tensor) -> torch.Tensor:
        """The convolution's output ``(N, C_out, *grid)``, into ``out`` (of any layout:
        :meth:`graphed` gives it channels_last where ``interleaved``)."""
        return fused.convolution(x, weight, bias, a, out)

    def graphed(self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                a: ConvTransposeArgs) -> torch.Tensor:
        """The output as :meth:`run` gives it, as a CUDA graph where one is kept."""
        return _graphed_forward(self, x, weight, bias, a,
                                lambda: fused.forward_bytes(x, weight, a.in_channels),
                                a.input_shape)


def _conv_replay(x: torch.Tensor, weight: torch.Tensor,
                 a: ConvTransposeArgs) -> Union[_ConvFusedReplay, _ConvReplay, None]:
    """The replay of a CUDA convolution's forward ``a`` on ``x``: the fused kernel's where
    it takes the call, else the column route's where a graph is worth it, else None."""
    if fused.convolution_takes(a, x, weight):
        return _ConvFusedReplay(cl.suggested(x, weight))
    return _ConvReplay.planned(x, weight, a)


# Convolutions' forward replays by call, as _replays.
_conv_replays: dict[tuple, Union[_ConvFusedReplay, _ConvReplay, None]] = {}


def _conv_backward(grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                   a: ConvTransposeArgs, need: List[bool],
                   interleaved: Optional[bool] = None) -> List[torch.Tensor]:
    """The gradients of the convolution ``a`` is the adjoint of (input, weight, bias; an
    empty tensor for one not in ``need``): by its replay where a CUDA call has one
    (_ConvBackwardReplay, with GRAPHED_CONV_BACKWARD), else :func:`_conv_gradients`."""
    if interleaved is None and input.is_cuda and GRAPHED_CONV_BACKWARD:
        replay, _ = _kept(_conv_backward_replays,
                          _backward_key(a, need, None, input, weight, grad_output),
                          lambda: (_ConvBackwardReplay.planned(grad_output, input, weight, a),
                                   ()))
        if replay is not None:
            grads = replay.graphed(grad_output, input, weight, a, need)
            return [input.new_empty(0) if g is None else g for g in grads]
    return _conv_gradients(grad_output, input, weight, a, need, interleaved)


def _conv_gradients(grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                    a: ConvTransposeArgs, need: List[bool],
                    interleaved: Optional[bool] = None) -> List[torch.Tensor]:
    """:func:`_conv_backward`'s gradients launched one by one: the input's by the
    transposed convolution's forward of ``grad_output``, the weight's as
    :func:`_conv_weight_grad` says, the bias's by :func:`_bias_grad`."""
    if interleaved is None:   # the forward's layout, whatever grad_output's
        interleaved = cl.suggested(input, weight)
    empty = lambda: input.new_empty(0)
    return [_forward(grad_output, weight, None, a, interleaved=interleaved) if need[0] else empty(),
            _conv_weight_grad(grad_output, input, weight, a, interleaved) if need[1] else empty(),
            _bias_grad(grad_output, interleaved) if need[2] else empty()]


# Whether a small CUDA convolution's backward runs as one CUDA graph (_ConvBackwardReplay).
# Launched one by one, the backward of the VAE decoder's Conv2d(512, 512) on 8x8 images
# cost the host about 0.57 ms of a 0.68 ms bfloat16 channels_last step whose kernels took
# 0.11 (torch's step 0.16; H100, benches/conv_step_profile.py). Graphed, the VAE decoder's
# six 3x3 layers' steps read 0.83-1.13x of torch's where eager ones read 0.33-0.71x; as
# modules' steady calls (STEADY_CONVOLUTIONS), 1.07-1.63x (session 77, H100, four
# precisions and layouts, benches/conv_wgrad_replay_probe.py).
GRAPHED_CONV_BACKWARD = True


class _ConvBackwardReplay(NamedTuple):
    """A small CUDA convolution's backward (its forward's columns within
    GRAPHED_CONV_MAX_COLUMNS, as _ConvReplay): :func:`_conv_gradients`, each gradient
    then copied into one allocated before, launched as one CUDA graph where one is kept.
    The input gradient's route (any of the transposed convolution's forward routes, some
    with no replay of their own) and the weight gradient's run as they do eagerly; the
    copies keep the graph's outputs at addresses the caller gives, one pass over the
    gradients, which these layers' steps, bound by host time, do not wait for. A call
    whose graph would take more than the graphs' memory limit launches
    :func:`_conv_gradients` alone, without the copies."""
    interleaved: bool
    columns: int   # elements of the weight gradient's columns (_ConvReplay's)
    nbytes: int    # the call's bound (_conv_backward_bytes), planned once

    @staticmethod
    def planned(grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                a: ConvTransposeArgs) -> Optional["_ConvBackwardReplay"]:
        """The replay of the backward of the call ``a`` (a convolution on ``input``), or
        None where its forward has none (_ConvReplay.planned)."""
        forward = _ConvReplay.planned(input, weight, a)
        if forward is None:
            return None
        return _ConvBackwardReplay(forward.interleaved, forward.columns, _conv_backward_bytes(
            forward.columns, grad_output, input, weight, a))

    def run(self, grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
            a: ConvTransposeArgs, need: List[bool],
            grads: List[Optional[torch.Tensor]]) -> List[Optional[torch.Tensor]]:
        """The gradients ``need`` asks for, written into ``grads`` (as :meth:`gradients`
        allocates them; None for the others), one after another, so that what one takes is
        free again before the next starts (_conv_backward_bytes)."""
        for i, given in enumerate(grads):
            if given is not None:
                alone = [j == i for j in range(len(grads))]
                given.copy_(_conv_gradients(grad_output, input, weight, a, alone,
                                            self.interleaved)[i])
        return grads

    def gradients(self, grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                  need: List[bool]) -> List[Optional[torch.Tensor]]:
        """New tensors for the gradients ``need`` asks for (None for the others): the
        input's in the call's layout (channels_last where ``interleaved``), the weight's in
        the weight's (as autograd keeps a parameter's gradient), the bias's."""
        return [cl.empty(input, input.shape, self.interleaved) if need[0] else None,
                torch.empty_like(weight) if need[1] else None,
                grad_output.new_empty(grad_output.shape[1]) if need[2] else None]

    def graphed(self, grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                a: ConvTransposeArgs, need: List[bool]) -> List[Optional[torch.Tensor]]:
        """The gradients as :meth:`run` gives them, as a CUDA graph where one is kept;
        where none can be (over the graphs' memory limit), as :func:`_conv_gradients`
        makes them. (Where one may be, the first call writes into the tensors allocated
        for it too: an eager call's outputs would move the allocator's blocks, and the
        next call's addresses with them, away from the ones its graph is kept by.)"""
        if self.nbytes > graphs.get_graph_memory_limit():
            return _conv_gradients(grad_output, input, weight, a, need, self.interleaved)
        return _graphed_backward(self, grad_output, input, weight, a, need,
                                 self.gradients(grad_output, input, weight, need))

    def graph_bytes(self, grad_output: torch.Tensor, input: torch.Tensor,
                    weight: torch.Tensor, a: ConvTransposeArgs) -> int:
        """The memory a graph of this call takes while it runs, at most: as planned
        (:func:`_conv_backward_bytes`)."""
        return self.nbytes


def _conv_backward_bytes(columns: int, grad_output: torch.Tensor, input: torch.Tensor,
                         weight: torch.Tensor, a: ConvTransposeArgs) -> int:
    """The memory a graph of _ConvBackwardReplay's ``run`` takes while it runs, at most
    (``columns``: the weight gradient's elements of columns): the most that one of its
    gradients takes (each is freed before the next starts), each piece of it counted whole
    as if none were freed before the next, and two cuBLAS workspaces:
    - the input gradient's: its route's columns, its output, and the output gradient and
      weight copied (the weight four times: the flipped, reordered, padded and
      block-diagonal forms). Any split of the taps (shapes.Split) holds ``C_a K_a +
      C_b K_b`` rows a position where ``K_a K_b`` is the taps, at most ``C (K + 1)`` for
      the larger channel count ``C`` (its channels padded to 16-byte units, as
      channels_last routes may) over the larger of the input's and output's positions;
    - the weight gradient's: its columns, the output gradient and input copied, its
      output, and the sums and partial products in the accumulation dtype
      (_weight_grad_partials);
    - the bias gradient's sums (_bias_grad_bytes)."""
    g, groups, cells = a.geometry, a.groups, math.prod(a.grid)
    size, unit = input.element_size(), max(1, 16 // input.element_size())
    channels = -(-max(a.in_channels, a.out_channels) // unit) * unit
    spans = math.prod(max(i, o) for i, o in zip(a.grid, a.image))
    route = a.batch * channels * (g.taps + 1) * spans
    cin = a.in_channels // groups
    dense = gemm.dense_groups(input.dtype, True, groups, cin)
    acc = weight.numel() + _weight_grad_partials(a.batch, groups, cin, a.column_rows,
                                                 cells, dense)
    input_grad = route + grad_output.numel() + input.numel() + 4 * weight.numel()
    weight_grad = columns + grad_output.numel() + input.numel() + weight.numel()
    return max(input_grad * size,
               weight_grad * size + acc * cols.accumulation_dtype(input.dtype).itemsize,
               _bias_grad_bytes(grad_output)) + 2 * gemm.LT_WORKSPACE


# Convolutions' backward replays by call, as _backward_replays.
_conv_backward_replays: dict[tuple, Optional[_ConvBackwardReplay]] = {}


# Whether a CUDA convolution's weight gradient takes the transposed convolution's backward
# replay (_conv_weight_grad). Off: on the VAE decoder's 3x3 layers (session 76, H100,
# benches/conv_wgrad_replay_probe.py) it sped the step up in bfloat16 channels_last (0.43-0.67x
# of torch's to 0.52-0.86x) and lost in bfloat16 planar (0.51-0.75x to 0.52-0.68x, worse on
# five layers of six); float32 was mixed. Where the step's time goes: benches/conv_step_profile.py.
CONV_WEIGHT_GRAD_REPLAYED = False


def _conv_weight_grad(grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                      a: ConvTransposeArgs, interleaved: bool) -> torch.Tensor:
    """The weight gradient ``(C_out, C_in / groups, *kernel)`` of the convolution ``a`` is
    the adjoint of: the transposed convolution's, its input ``grad_output`` and its output
    gradient ``input``, by that call's backward replay where a CUDA call has one and
    CONV_WEIGHT_GRAD_REPLAYED (_replayed_backward: graphed, or the fused or depthwise
    kernels where their cost models send it), else _backward's."""
    if input.is_cuda and CONV_WEIGHT_GRAD_REPLAYED:
        replayed = _replayed_backward(input, grad_output, weight, a, [False, True, False],
                                      interleaved)
        if replayed is not None:
            return replayed[1]
    return _backward(input, grad_output, weight, a, [False, True, False],
                     interleaved=interleaved)[1]


@torch.library.custom_op("gemmconv::convolution", mutates_args=())
def _conv_op(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
             stride: List[int], padding: List[int], dilation: List[int], groups: int,
             same: bool) -> torch.Tensor:
    a = _conv_from_lists(input, weight, bias, stride, padding, dilation, groups, same)
    return _conv_forward(input, weight, bias, a)


@_conv_op.register_fake
def _(input, weight, bias, stride, padding, dilation, groups, same):
    a = _conv_from_lists(input, weight, bias, stride, padding, dilation, groups, same)
    return cl.empty(input, a.input_shape, cl.suggested(input, weight))


@torch.library.custom_op("gemmconv::convolution_backward", mutates_args=())
def _conv_backward_op(grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                      stride: List[int], padding: List[int], dilation: List[int], groups: int,
                      same: bool, output_mask: List[bool]) -> List[torch.Tensor]:
    a = _conv_from_lists(input, weight, None, stride, padding, dilation, groups, same)
    return _conv_backward(grad_output, input, weight, a, output_mask)


@_conv_backward_op.register_fake
def _(grad_output, input, weight, stride, padding, dilation, groups, same, output_mask):
    return _fake_grads(input, weight, weight.shape[0], output_mask)


_register_autograd(_conv_op, _conv_backward_op)


def _conv(nd: int, input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
          stride: IntOrTuple, padding: Union[IntOrTuple, str], dilation: IntOrTuple,
          groups: int) -> torch.Tensor:
    input, weight, bias = _autocast(input, weight, bias)
    a = conv_args(f"conv{nd}d", nd, input, weight, bias, stride, padding, dilation, groups)
    return _run_conv(a, input, weight, bias, padding == "same")


def _run_conv(a: ConvTransposeArgs, input: torch.Tensor, weight: torch.Tensor,
              bias: Optional[torch.Tensor], same: bool) -> torch.Tensor:
    """The checked convolution ``a`` on tensors already autocast (``same``: its padding
    was "same")."""
    g = a.geometry
    return _run(a, input, weight, bias, _conv_forward, _conv_backward, _conv_op,
                lambda: (list(g.stride), list(g.padding), list(g.dilation), a.groups, same))


# Whether a gemmconv.nn.Conv1d/2d/3d keeps its CUDA calls that ran by replays as steady
# calls (module_conv: the C++ node's forward and backward graphs, as the transposed
# modules'); its backward graph is _ConvBackwardReplay's (GRAPHED_CONV_BACKWARD), without
# which the node calls Python. On: the VAE decoder's 3x3 layers' steps 1.07-1.63x of
# torch's (torch's own module 0.91-1.19x), and the zoo's VAE decoder with every layer type
# swapped 1.21-1.37x where it read 1.00-1.35x without the two switches (session 77, H100).
STEADY_CONVOLUTIONS = True


class _SteadyConvolution(_Steady):
    """A convolution module's steady call (module_conv): a _Steady whose gradients are
    _conv_backward's (None for those not asked) and whose replays are the convolution's."""
    __slots__ = ()
    NAME = "gemmconv::ConvolutionBackward"

    @property
    def output_shape(self) -> tuple:
        return self.a.input_shape   # (a convolution's output: its adjoint's input)

    @staticmethod
    def gradients(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                  a: ConvTransposeArgs, need: List[bool]) -> List[Optional[torch.Tensor]]:
        grads = _conv_backward(grad_out, x, weight, a, need)
        return [g if asked else None for g, asked in zip(grads, need)]

    @staticmethod
    def kept_replay(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                    a: ConvTransposeArgs, need: List[bool]) -> Optional[_ConvBackwardReplay]:
        return _conv_backward_replays.get(_backward_key(a, need, None, x, weight, grad_out))

    @staticmethod
    def kept_forward(a: ConvTransposeArgs, x: torch.Tensor, weight: torch.Tensor,
                     bias: Optional[torch.Tensor]):
        return _conv_replays.get(_replay_key(a, None, x, weight, bias))


def module_conv(module: torch.nn.Module, input: torch.Tensor, weight: torch.Tensor,
                bias: Optional[torch.Tensor]) -> torch.Tensor:
    """The call of ``module`` (a gemmconv.nn.Conv1d/2d/3d, padding mode "zeros") on
    ``input`` with ``weight`` and ``bias`` (as torch's _conv_forward gets them): as
    ``conv{nd}d`` with the module's settings; where STEADY_CONVOLUTIONS and they are the
    module's own parameters, by its steady calls as module_conv_transpose's are
    (_SteadyConvolution)."""
    nd = len(module.kernel_size)
    if not (STEADY_CONVOLUTIONS and weight is module.weight and bias is module.bias):
        return _conv(nd, input, weight, bias, module.stride, module.padding, module.dilation,
                     module.groups)

    def call(x: torch.Tensor, weight: torch.Tensor,
             bias: Optional[torch.Tensor]) -> Tuple[ConvTransposeArgs, torch.Tensor]:
        a = conv_args(f"conv{nd}d", nd, x, weight, bias, module.stride, module.padding,
                      module.dilation, module.groups)
        return a, _run_conv(a, x, weight, bias, module.padding == "same")
    return _module_call(module, input, _SteadyConvolution, call)


def conv1d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           stride: IntOrTuple = 1, padding: Union[IntOrTuple, str] = 0,
           dilation: IntOrTuple = 1, groups: int = 1) -> torch.Tensor:
    """1-D convolution, as ``torch.nn.functional.conv1d``: input ``(N, C_in, L)`` or
    ``(C_in, L)``, weight ``(C_out, C_in / groups, kW)``, bias ``(C_out,)``; padding an int,
    a tuple, ``'valid'`` or ``'same'``. Returns ``(N, C_out, L_out)``."""
    return _conv(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           stride: IntOrTuple = 1, padding: Union[IntOrTuple, str] = 0,
           dilation: IntOrTuple = 1, groups: int = 1) -> torch.Tensor:
    """2-D convolution, as ``torch.nn.functional.conv2d``: input ``(N, C_in, H, W)`` or
    unbatched, weight ``(C_out, C_in / groups, kH, kW)``. Returns ``(N, C_out, H_out, W_out)``."""
    return _conv(2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           stride: IntOrTuple = 1, padding: Union[IntOrTuple, str] = 0,
           dilation: IntOrTuple = 1, groups: int = 1) -> torch.Tensor:
    """3-D convolution, as ``torch.nn.functional.conv3d``: input ``(N, C_in, D, H, W)`` or
    unbatched, weight ``(C_out, C_in / groups, kD, kH, kW)``. Returns ``(N, C_out, D', H', W')``."""
    return _conv(3, input, weight, bias, stride, padding, dilation, groups)


# ---------------------------------------------------------------------------------------
# im2col and col2im as operators (torch's unfold and fold, in 1, 2 or 3 spatial dims), each
# the other's backward.

@torch.library.custom_op("gemmconv::im2col", mutates_args=())
def _im2col_op(input: torch.Tensor, kernel_size: List[int], dilation: List[int],
               padding: List[int], stride: List[int]) -> torch.Tensor:
    g = Geometry(tuple(kernel_size), tuple(stride), tuple(padding), tuple(dilation))
    n, c, image = input.shape[0], input.shape[1], input.shape[2:]
    grid = g.grid_size(image)
    cells = math.prod(grid)   # (named, not inferred: an empty batch has none to infer from)
    # The result as allocated, not a view of it: autograd forbids in-place changes of a view
    # made inside the op.
    out = input.new_empty((n, c * g.taps, cells))
    cols.im2col(input.reshape(n * c, *image), g, grid, out=out.view(n * c, g.taps, cells))
    return out


@_im2col_op.register_fake
def _(input, kernel_size, dilation, padding, stride):
    g = Geometry(tuple(kernel_size), tuple(stride), tuple(padding), tuple(dilation))
    grid = g.grid_size(input.shape[2:])
    return input.new_empty((input.shape[0], input.shape[1] * g.taps, math.prod(grid)))


@torch.library.custom_op("gemmconv::col2im", mutates_args=())
def _col2im_op(input: torch.Tensor, output_size: List[int], kernel_size: List[int],
               dilation: List[int], padding: List[int], stride: List[int]) -> torch.Tensor:
    g = Geometry(tuple(kernel_size), tuple(stride), tuple(padding), tuple(dilation))
    n, c = input.shape[0], input.shape[1] // g.taps
    grid = g.grid_size(output_size)
    out = input.new_empty((n, c, *output_size))     # as allocated, as _im2col_op's
    cols.col2im(input.reshape(n * c, g.taps, input.shape[2]).contiguous(), None, g, grid,
                output_size, out=out.view(n * c, *output_size))
    return out


@_col2im_op.register_fake
def _(input, output_size, kernel_size, dilation, padding, stride):
    taps = math.prod(kernel_size)
    return input.new_empty((input.shape[0], input.shape[1] // taps, *output_size))


def _im2col_setup(ctx, inputs, output):
    ctx.image, ctx.rest = list(inputs[0].shape[2:]), inputs[1:]


def _col2im_setup(ctx, inputs, output):
    ctx.rest = inputs[2:]


_im2col_op.register_autograd(
    lambda ctx, grad: (_col2im_op(grad, ctx.image, *ctx.rest), None, None, None, None),
    setup_context=_im2col_setup)
_col2im_op.register_autograd(
    lambda ctx, grad: (_im2col_op(grad, *ctx.rest), None, None, None, None, None),
    setup_context=_col2im_setup)


def im2col(input: torch.Tensor, kernel_size: IntOrTuple, dilation: IntOrTuple = 1,
           padding: IntOrTuple = 0, stride: IntOrTuple = 1) -> torch.Tensor:
    """Sliding blocks of ``input`` as columns: ``torch.nn.functional.unfold`` in 1, 2 or 3
    spatial dims (the number of dims comes from the first tuple argument; all ints mean 2).

    input ``(N, C, *spatial)`` or ``(C, *spatial)``; returns ``(N, C * prod(kernel_size), L)``
    (or ``(C * prod(kernel_size), L)``), ``L`` the number of blocks, channel-major as
    torch lays it out. Differentiable; its backward is :func:`col2im`.
    """
    g = fold_geometry("im2col", None, kernel_size, dilation, padding, stride)
    check(isinstance(input, torch.Tensor) and input.dim() in (g.nd + 1, g.nd + 2), lambda:
          f"im2col: expected a {g.nd + 1}-D (unbatched) or {g.nd + 2}-D (batched) input for "
          f"{g.nd} spatial dims, got {tuple(getattr(input, 'shape', ()))}")
    unbatched = input.dim() == g.nd + 1
    batched = input.unsqueeze(0) if unbatched else input
    blocks("im2col", g, batched.shape[2:])
    out = _im2col_op(batched, list(g.kernel_size), list(g.dilation), list(g.padding), list(g.stride))
    return out.squeeze(0) if unbatched else out


def col2im(input: torch.Tensor, output_size: IntOrTuple, kernel_size: IntOrTuple,
           dilation: IntOrTuple = 1, padding: IntOrTuple = 0, stride: IntOrTuple = 1) -> torch.Tensor:
    """Sums columns back into an image: ``torch.nn.functional.fold`` in 1, 2 or 3 spatial
    dims (from ``output_size`` or the first tuple argument; all ints mean 2).

    input ``(N, C * prod(kernel_size), L)`` or ``(C * prod(kernel_size), L)``; returns
    ``(N, C, *output_size)``. Overlapping blocks add up. Differentiable; its backward is
    :func:`im2col`.
    """
    nd = None if isinstance(output_size, int) else len(output_size)
    g = fold_geometry("col2im", nd, kernel_size, dilation, padding, stride)
    output_size = expand(output_size, g.nd, "output_size")
    check(isinstance(input, torch.Tensor) and input.dim() in (2, 3),
          lambda: f"col2im: expected a 2-D (unbatched) or 3-D (batched) input, got "
          f"{tuple(getattr(input, 'shape', ()))}")
    unbatched = input.dim() == 2
    batched = input.unsqueeze(0) if unbatched else input
    check(batched.shape[1] % g.taps == 0,
          lambda: f"Expected size of input's dimension 1 to be divisible by the product of "
          f"kernel_size, but got input.size(1)={batched.shape[1]} and "
          f"kernel_size={g.kernel_size}.")
    grid = blocks("col2im", g, output_size)
    check(batched.shape[2] == math.prod(grid), lambda:
          f"Given output_size={output_size}, kernel_size={g.kernel_size}, dilation={g.dilation}, "
          f"padding={g.padding}, stride={g.stride}, expected size of input's dimension 2 to "
          f"match the calculated number of sliding blocks {' * '.join(map(str, grid))} = "
          f"{math.prod(grid)}, but got input.size(2)={batched.shape[2]}.")
    out = _col2im_op(batched, list(output_size), list(g.kernel_size), list(g.dilation),
                     list(g.padding), list(g.stride))
    return out.squeeze(0) if unbatched else out
