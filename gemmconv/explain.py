"""What a transposed-convolution call will run, without running it: its route, the cost
model's figures behind the choice, the kernels of each chunk and the workspace they need.

:func:`explain` works the call out from the same plans the operators use (ops.py's and
channels_last.py's), so what it says is what a call does. Tensors on the ``meta`` device
give the plan of a shape without allocating it (described as on a CUDA device).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

import torch

from . import channels_last as cl
from . import depthwise, fused, gemm, graphs, ops
from .shapes import GATHER_MARGIN, ConvTransposeArgs, Geometry, IntOrTuple, _routes, conv_transpose_args

SPLIT_DESCRIPTION = "taps of {} gathered by im2col, the others summed by col2im"


@dataclasses.dataclass
class Explanation:
    """A call's plan (see the module docs). ``candidates`` holds each route the cost model
    weighed: (description, column elements per sample and group as it counts them, chosen)."""
    call: str
    output_shape: tuple[int, ...]
    layout: str
    route: str
    candidates: list[tuple[str, float, bool]]
    steps: list[str]
    chunks: int
    workspace_bytes: int
    backward_workspace_bytes: int
    precision: str
    backward: str = ""

    def __str__(self) -> str:
        lines = [self.call, f"output {self.output_shape}, {self.layout}",
                 f"route: {self.route}",
                 "cost model: column elements per sample (routes that gather divided by "
                 f"{GATHER_MARGIN} for their extra pass; row products' outer taps free):"]
        for description, cost, chosen in self.candidates:
            lines.append(f"  {'->' if chosen else '  '} {cost:14,.0f}  {description}")
        lines.append(f"forward, per chunk ({self.chunks} chunk{'s' * (self.chunks != 1)}):")
        lines += [f"  {i}. {step}" for i, step in enumerate(self.steps, 1)]
        if self.backward:
            lines.append(f"backward: {self.backward}")
        lines.append(f"workspace: forward {_megabytes(self.workspace_bytes)}, backward "
                     f"{_megabytes(self.backward_workspace_bytes)} (limit "
                     f"{_megabytes(ops.get_workspace_limit())}; gemmconv.set_workspace_limit)")
        lines.append(f"GEMM precision: {self.precision}")
        return "\n".join(lines)


DEPTHWISE_PRECISION = "; the depthwise kernels multiply in float32 (no GEMM)"
GROUPED_PRECISION = "; the forward's grouped direct kernel multiplies in float32 (no GEMM)"
DEPTHWISE_STEP = ("one Triton kernel: each output sums, over the taps that reach its phase, "
                  "the tap's weight times its group's input channel{bias}")
GROUPED_STEP = ("one Triton kernel, a stride phase a program: each output sums, over the taps "
                "that reach its phase and its group's {inputs} input channels, the tap's "
                "weight times the channel{bias}")
FUSED_STEP = ("one Triton kernel over {phases} stride phase(s): per output tile, the taps "
              "that reach it times the input's shifted boxes, accumulated on chip{bias}{rows}")
ROWS = ("; {} output rows a program, each box loaded once for every row's taps (columns of "
        "{} taps along H)")


BACKWARD_FUSED = ("the fused kernels: the input gradient by the forward's kernel over the "
                  "convolution's taps, the weight gradient in partials over samples and "
                  "positions")


BACKWARD_MOVED = ", in float32 from copies of the {} moved along W"
BACKWARD_ROWS = ", in float32 on both operands' channels_last rows as they lie"
BACKWARD_MMA = (", in float32 on both operands' channels_last rows as they lie, its weight "
                "gradient on mma.sync (every W tap at a shifted row of one box of inputs)")


BACKWARD_DEPTHWISE = ("the depthwise kernel: per input position and tap, the output gradient "
                      "times the weight into the input gradient and times the input into "
                      "float32 partials of the weight gradient, summed after")


BACKWARD_FOLDED = (", both reducing over the output gradient's rows with W's {} taps folded "
                   "into its channels (an im2col along W)")


# How a planar backward on the column routes launches (ops.py's _backward_replay): the
# samples side by side (_BackwardReplay), sample by sample as one graph (_GraphedBackward),
# or eagerly.
BACKWARD_SIDE_BY_SIDE = ("; one im2col of the output gradient and one GEMM per gradient over "
                         "the samples side by side, as a CUDA graph from its second call where "
                         "its memory (its GEMMs' workspace included) fits the graph memory limit")
BACKWARD_GRAPHED = ("; im2col and GEMMs sample by sample ({positions:,} positions a sample, over "
                    "{most:,}), {verdict}")
BACKWARD_IN_GRAPH = "launched as one CUDA graph from its second call ({bytes} while it runs)"
BACKWARD_OVER_LIMIT = ("run eagerly every call: its graph would take {bytes}, over the graph "
                       "memory limit of {limit} (gemmconv.set_graph_memory_limit)")
BACKWARD_EAGER = "; im2col and GEMMs run eagerly every call, no CUDA graph: {why}"

COPY_STEP = "copy the input channels innermost, {shape}{tf32} (one Triton kernel)"


def _planar_backward_workspace(a: ConvTransposeArgs, size: int, limit: int) -> int:
    cells = math.prod(a.grid) // a.grid[0]
    return max(((n1 - n0) * a.groups * a.column_rows * (i1 - i0) * cells
                for n0, n1, i0, i1 in a.backward_chunks(limit, size)), default=0)


def _megabytes(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def _planar_backward_launch(a: ConvTransposeArgs, input: torch.Tensor, weight: torch.Tensor,
                            size: int, limit: int) -> str:
    """How a planar column-route backward of call ``a`` launches its kernels, as ops.py's
    backward replays decide it (for both gradients asked), and whether its CUDA graph fits
    the graph memory limit where that is known before the call."""
    how, count = ops.planar_backward_launch(a, size, limit)
    if how == "chunks":
        return BACKWARD_EAGER.format(why=f"{count} chunks (gemmconv.set_workspace_limit)")
    if how == "side by side":
        return BACKWARD_SIDE_BY_SIDE
    if how == "eager":
        return BACKWARD_EAGER.format(
            why=f"{count:,} column elements, over {ops.GRAPHED_BACKWARD_MAX_COLUMNS:,}")
    batched = input.unsqueeze(0) if a.unbatched else input
    # (graph_bytes reads sizes only: a meta output gradient allocates nothing.)
    grad_out = torch.empty(a.output_shape, device="meta", dtype=input.dtype)
    nbytes = ops._GraphedBackward(count).graph_bytes(grad_out, batched, weight, a)
    graph_limit = graphs.get_graph_memory_limit()
    verdict = BACKWARD_IN_GRAPH.format(bytes=_megabytes(nbytes)) if nbytes <= graph_limit else \
        BACKWARD_OVER_LIMIT.format(bytes=_megabytes(nbytes), limit=_megabytes(graph_limit))
    return BACKWARD_GRAPHED.format(positions=math.prod(a.grid),
                                   most=ops.SAMPLES_INNER_MAX_POSITIONS, verdict=verdict)


def _dims(gathered, nd: int) -> str:
    return "".join(n for n, g in zip("DHW"[3 - nd:], gathered) if g)


def _kernel(name: str, g: Geometry, elements: int, on_cuda: bool) -> str:
    """A column kernel's description: compiled for the layer's taps, or the generic one."""
    if not on_cuda:
        return f"{name} (CPU: PyTorch strided slices, one per tap)"
    from . import _cuda
    fixed = elements >= _cuda.SPECIALIZE_MIN_ELEMENTS and g.taps <= _cuda.MAX_FIXED_TAPS
    return (f"{name} kernel {'compiled for the taps' if fixed else 'generic'}: kernel "
            f"{g.kernel_size}, stride {g.stride}, dilation {g.dilation}")


def _precision(dtype: torch.dtype, on_cuda: bool) -> str:
    if not on_cuda:
        return f"{dtype} (torch.matmul on the CPU)"
    if dtype == torch.float32:
        return ("TF32 tensor cores" if gemm.uses_tf32() else "full float32") + \
            f" (policy {gemm.get_float32_precision()!r})"
    return f"{dtype}, float32 accumulation" if dtype != torch.float64 else "float64"


def _candidates(a: ConvTransposeArgs, interleaved: bool,
                route: tuple) -> list[tuple[str, float, bool]]:
    """The cost model's routes, ``route`` the channels_last one (channels_last.route) where
    ``interleaved``."""
    nd = a.geometry.nd
    if interleaved:
        (chosen, padded), by_rows = route, False
    else:
        (chosen, by_rows), padded = a.route(), None
    rows = []
    if interleaved and a.padded_rows() is not None:
        rows.append((PADDED_ROWS_CANDIDATE, a.padded_rows().cost,
                     padded is not None))
    for r in _routes(a.geometry):
        split = a.split(r)
        what = "GEMM writes the output" if split.direct else "GEMM + col2im"
        name = (SPLIT_DESCRIPTION.format(_dims(r, nd)) if any(r) else "nothing gathered") + \
            f" ({what})"
        rows.append((name, a.route_cost(r), r == chosen and not by_rows and padded is None))
        if not interleaved and a.groups == 1 and r[0] and split.overlaps:
            rows.append((f"row products over {_dims(r, nd)[0]}, "
                         + (f"im2col of {_dims((False, *r[1:]), nd)}" if any(r[1:]) else
                            "nothing else gathered"), a.rows_cost(r), r == chosen and by_rows))
    return rows


def _planar_steps(a: ConvTransposeArgs, plan, on_cuda: bool, bias: bool) -> list[str]:
    split, groups = plan.split, a.groups
    if split.direct and ops._columns_in_place(ops._adjoint(a), [True, False, False], bias):
        return [f"GEMM: weight ({groups} x {a.out_channels // groups} x "
                f"{a.in_channels // groups}) @ the input where it lies (a pointwise call: "
                f"the columns are the input), into the output"] + \
            (["the bias added to the output"] if bias else [])
    if split.direct:
        conv = a.convolution
        return [_kernel("im2col of the input, for the convolution with the flipped kernel",
                        conv, a.output_elements, on_cuda),
                f"GEMM: weight ({groups} x {a.out_channels // groups} x "
                f"{a.in_channels // groups * conv.taps}) @ columns, into the output"
                + (" (bias as rows of ones)" if bias else "")]
    steps = []
    n = plan.chunks[0][1] - plan.chunks[0][0] if plan.chunks else 0
    cells = math.prod(split.grid)
    if plan.by_rows:
        steps.append(_kernel("im2col of the inner taps, outer grid dim outermost",
                             split.gather, n * split.gather_rows * cells, on_cuda))
        steps.append(f"GEMMs: one row product per grid row, weight ({split.scatter_rows} x "
                     f"{split.gather_rows}) @ {split.gather.kernel_size[0]} overlapping rows")
    else:
        if split.gather is not None:
            steps.append(_kernel("im2col of the input", split.gather,
                                 n * groups * split.gather_rows * cells, on_cuda))
        side = "the samples side by side" if plan.samples_inner else "per sample"
        steps.append(f"GEMM ({side}): {groups} group(s) of weight^T ({split.scatter_rows} x "
                     f"{split.gather_rows}) @ ({split.gather_rows} x positions)")
    steps.append(_kernel("col2im" + (" + bias" if bias else ""), split.scatter,
                         n * a.out_channels * math.prod(a.image), on_cuda))
    return steps


def _interleaved_steps(a: ConvTransposeArgs, gathered, plan, dtype: torch.dtype,
                       on_cuda: bool, bias: bool) -> list[str]:
    split, groups = a.split(gathered), a.groups
    count = plan.rows[0][1] if plan.rows else 0      # positions of the first chunk
    if split.direct and a.pointwise:
        return [f"GEMM: (positions x {a.in_channels}) @ weight, the input where it lies (a "
                f"pointwise call: the columns are the input), into the output"
                + (", then the bias added" if bias else "")]
    if split.direct:
        conv = a.convolution
        return [_kernel("channels_last im2col of the input, for the convolution with the "
                        "flipped kernel", conv, count * a.out_channels * conv.taps, on_cuda),
                "GEMM: (positions x taps C_out) @ flipped weight, into the output"
                + (", then the bias added" if bias else "")]
    steps = []
    width = cl.padded_channels(a, torch.empty((), dtype=dtype).element_size())
    if split.gather is None and width != a.in_channels:
        steps.append(f"copy the input and the weight zero-padded from {a.in_channels} to "
                     f"{width} channels (whole 16-byte units, which cuBLAS's fast kernels need)")
    if split.gather is not None:
        steps.append(_kernel("channels_last im2col of the input", split.gather,
                             count * groups * split.gather_rows, on_cuda))
    dense = gemm.dense_groups(dtype, on_cuda, groups, split.gather_rows)
    steps.append(f"GEMM: (positions x {groups * split.gather_rows}) @ weight "
                 + ("(block-diagonal over the groups, the columns an ungrouped layer's)" if dense
                    else f"({groups} group(s))")
                 + f" -> (positions x {groups * split.scatter_rows})")
    elements = a.output_elements // max(len(plan.chunks), 1)
    steps.append(_kernel("channels_last col2im" + (" + bias" if bias else ""), split.scatter,
                         elements, on_cuda))
    return steps


PADDED_ROWS_CANDIDATE = ("padded rows over W: the input copied once, zero-padded, W's taps in "
                         "the GEMM's reduction (GEMM + col2im)")


def _padded_rows_steps(a: ConvTransposeArgs, plan, on_cuda: bool, bias: bool) -> list[str]:
    rows = plan.rows
    split, k = rows.split, rows.taps
    n = plan.chunks[0][1] - plan.chunks[0][0] if plan.chunks else 0
    return [_kernel(f"channels_last im2col of one tap: the input zero-padded along W to "
                    f"rows of {rows.width} positions", rows.copy,
                    n * rows.rows * a.in_channels, on_cuda),
            f"GEMM: {k} products, product b over the copy's positions b, b + {k}, b + "
            f"{2 * k}, ..., each row the {k} positions from there ({k * a.in_channels} "
            f"elements) @ weight -> (positions x {split.scatter_rows})",
            _kernel("channels_last col2im" + (" + bias" if bias else ""), split.scatter,
                    a.output_elements // max(len(plan.chunks), 1), on_cuda)]


def _interleaved_format(a: ConvTransposeArgs, element_size: int, route: tuple) -> str:
    gathered, padded = route
    if cl.padded_channels(a, element_size) != a.in_channels and not any(gathered) and padded is None:
        return "channels_last (channels zero-padded; no layout copies)"
    return "channels_last (no layout copies)"


EMPTY_ROUTE = "none: an empty batch whose output sizes reach 0 (an empty output, zero gradients)"


def _call_text(nd: int, input: torch.Tensor, weight: torch.Tensor,
               bias: Optional[torch.Tensor], a) -> str:
    """The call ``a`` as explain's first line writes it."""
    kwargs = ", ".join(f"{k}={v}" for k, v in (("stride", a.geometry.stride),
                                               ("padding", a.geometry.padding),
                                               ("output_padding", a.output_padding),
                                               ("groups", a.groups),
                                               ("dilation", a.geometry.dilation)))
    return (f"gemmconv.conv_transpose{nd}d(input {tuple(input.shape)} {input.dtype} on "
            f"{input.device}, weight {tuple(weight.shape)}, bias "
            f"{'yes' if bias is not None else 'None'}, {kwargs})")


def explain(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
            stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
            groups: int = 1, dilation: IntOrTuple = 1) -> Explanation:
    """The plan of ``gemmconv.conv_transpose{1,2,3}d(input, weight, bias, ...)`` (the number
    of dims from ``weight``), with the same argument checks, without running it. Print it
    for a readable account. Input ``(N, C_in, *grid)`` or unbatched, weight ``(C_in,
    C_out / groups, *kernel)``."""
    nd = weight.dim() - 2 if isinstance(weight, torch.Tensor) else 0
    a = conv_transpose_args(f"conv_transpose{nd}d", nd, input, weight, bias, stride, padding,
                            output_padding, groups, dilation)
    on_cuda = input.device.type in ("cuda", "meta")
    interleaved = cl.suggested(input.unsqueeze(0) if a.unbatched else input, weight)
    size, limit = input.element_size(), ops.get_workspace_limit()
    if 0 in a.image:   # (an empty batch whose output sizes reach 0: no route plans it)
        return Explanation(_call_text(nd, input, weight, bias, a), a.output_shape,
                           "channels_last" if interleaved else "NCHW-contiguous", EMPTY_ROUTE,
                           [], [], 0, 0, 0, _precision(input.dtype, on_cuda))
    why_not = fused.unavailable(a, input, weight, interleaved)
    why_not_direct = depthwise.unavailable(a, input, weight)
    direct = why_not is not None and on_cuda and why_not_direct is None
    one_input = a.in_channels == a.groups   # (the depthwise kernel's calls, forward and backward)
    route = cl.route(a, size, limit) if interleaved else (None, None)
    gathered, padded = route
    candidates = _candidates(a, interleaved, route)
    copy = 0
    if direct:
        plan = None
        with_bias = ", + bias" if bias is not None else ""
        steps = [DEPTHWISE_STEP.format(bias=with_bias) if one_input else
                 GROUPED_STEP.format(inputs=a.in_channels // a.groups, bias=with_bias)]
        candidates = [(c, cost, False) for c, cost, _ in candidates]
        candidates.insert(0, (ops.direct_route(a), 0, True))
        backward = cl.backward_plan(a, size, limit).workspace if interleaved else \
            _planar_backward_workspace(a, size, limit)
    elif why_not is None:
        plan = None
        batched = input.unsqueeze(0) if a.unbatched else input
        taps = fused.transposed_taps(a.geometry)
        count = fused.forward_tile(a, batched, not interleaved).rows
        rows = ROWS.format(("two", "three")[count - 2], fused.row_columns(taps).height) \
            if count > 1 else ""
        steps = [FUSED_STEP.format(phases=len(taps.count), rows=rows,
                                   bias=", + bias" if bias is not None else "")]
        if fused.copies_input(batched):
            copy = input.numel() * size
            steps.insert(0, COPY_STEP.format(shape=(a.batch, *a.grid, a.in_channels),
                                             tf32=", rounded to TF32" if input.dtype == torch.float32 else ""))
        candidates = [(c, cost, False) for c, cost, _ in candidates]
        candidates.insert(0, (ops.FUSED_ROUTE, 0, True))
        backward = cl.backward_plan(a, size, limit).workspace if interleaved else \
            _planar_backward_workspace(a, size, limit)
    elif interleaved and padded is not None:
        plan = padded
        steps = _padded_rows_steps(a, plan, on_cuda, bias is not None)
        backward = cl.backward_plan(a, size, limit).workspace
    elif interleaved:
        split = a.split(gathered)
        if split.direct:
            adjoint = ops._adjoint(a)
            plan = cl.backward_plan(adjoint, size, limit)
        else:
            plan = cl.forward_plan(a, gathered, size, limit)
        steps = _interleaved_steps(a, gathered, plan, input.dtype, on_cuda, bias is not None)
        backward = cl.backward_plan(a, size, limit).workspace
    else:
        gathered, by_rows = a.route()
        plan = ops._forward_plan(a, gathered, by_rows, size, limit)
        steps = _planar_steps(a, plan, on_cuda, bias is not None)
        backward = _planar_backward_workspace(a, size, limit)
    if why_not is not None and on_cuda:
        steps.append(f"(not the fused route: {why_not})")
    if on_cuda and a.groups > 1 and why_not_direct is not None:
        steps.append(f"(not the direct kernels: {why_not_direct})")
    backward_route = ""
    if on_cuda:
        batched = input.unsqueeze(0) if a.unbatched else input
        why_not_back = fused.backward_unavailable(a, batched, weight, interleaved, limit)
        why_not_depthwise = depthwise.backward_unavailable(a, batched, weight, interleaved)
        if why_not_back is not None and why_not_depthwise is None:
            backward = -(-depthwise.backward_workspace(a, interleaved) // size)
            backward_route = BACKWARD_DEPTHWISE
        elif why_not_back is None:
            backward = fused.backward_workspace(
                a, size, fused.backward_samples(a, size, limit, interleaved), interleaved)
            backward_route = BACKWARD_FUSED
            fold = fused.folded_taps(a.geometry, a.out_channels, size)
            if fold > 1:
                backward_route += BACKWARD_FOLDED.format(fold)
            elif size == 4:
                moved = fused.moved_operand(a, size, interleaved)
                if fused.takes_mma(a, size, interleaved):
                    backward_route += BACKWARD_MMA
                else:
                    backward_route += BACKWARD_ROWS if moved is None else BACKWARD_MOVED.format(
                        "input" if moved == "input" else "output gradient")
        else:
            why = f"not the fused kernels: {why_not_back}"
            if direct:
                why += f"; not the depthwise kernel: {why_not_depthwise}"
            backward_route = f"the column routes ({why})"
            if not interleaved and not (direct and one_input):
                backward_route += _planar_backward_launch(a, input, weight, size, limit)
    shape = a.output_shape[1:] if a.unbatched else a.output_shape
    return Explanation(_call_text(nd, input, weight, bias, a), tuple(shape),
                       _interleaved_format(a, size, route) if interleaved
                       else "NCHW-contiguous",
                       ops.describe_route(a, interleaved, why_not is None, direct, size), candidates, steps,
                       len(plan.chunks) if plan else 1, plan.workspace * size if plan else copy,
                       backward * size,
                       _precision(input.dtype, on_cuda) + (
                           "" if not direct else DEPTHWISE_PRECISION if one_input else GROUPED_PRECISION),
                       backward_route)
