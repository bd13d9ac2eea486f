"""A fuzz of the public API against torch's float64 modules on the CPU: random geometry
(1-3-D, stride, padding, output_padding, dilation, groups, bias), dtypes (float64; float32
and bfloat16 within their tolerance, torch on the same rounded operands), input layouts
(contiguous, channels_last, strided views, unbatched, empty batches), ConvTranspose modules
with and without output_size, Conv modules with every padding mode, Fold and Unfold,
im2col against a one-hot convolution and col2im as its adjoint in 1-3 dims, and
invalid arguments (where torch raises, ours must raise a Python exception too; where torch
does not, ours must not). Forward and the three gradients are compared.

    python benches/fuzz_cpu.py [DRAWS] [SEED]

Prints each mismatch and a count per kind; exits 1 if any."""
import math
import random
import sys
import traceback

import torch

import gemmconv
from gemmconv import nn as gnn

TORCH_T = {1: torch.nn.ConvTranspose1d, 2: torch.nn.ConvTranspose2d, 3: torch.nn.ConvTranspose3d}
OURS_T = {1: gnn.ConvTranspose1d, 2: gnn.ConvTranspose2d, 3: gnn.ConvTranspose3d}
TORCH_C = {1: torch.nn.Conv1d, 2: torch.nn.Conv2d, 3: torch.nn.Conv3d}
OURS_C = {1: gnn.Conv1d, 2: gnn.Conv2d, 3: gnn.Conv3d}


def _geometry(rng: random.Random, nd: int, valid: bool) -> dict:
    pick = lambda lo, hi: tuple(rng.randint(lo, hi) for _ in range(nd))
    g = dict(kernel_size=pick(1, 4), stride=pick(1, 3), padding=pick(0, 2), dilation=pick(1, 3))
    g["output_padding"] = tuple(rng.randint(0, max(s, d) - 1)
                                for s, d in zip(g["stride"], g["dilation"]))
    if not valid:   # one argument out of range
        key = rng.choice(["kernel_size", "stride", "padding", "dilation", "output_padding"])
        bad = {"kernel_size": 0, "stride": 0, "padding": -1, "dilation": 0,
               "output_padding": 7}[key]
        g[key] = tuple(bad if i == 0 else v for i, v in enumerate(g[key]))
    if rng.random() < 0.3:   # an int for every tuple, as torch allows
        g = {k: v[0] for k, v in g.items()} if nd == 1 or rng.random() < 0.5 else g
    return g


def _input(rng: random.Random, nd: int, batch: int, channels: int, size: tuple) -> torch.Tensor:
    layout = rng.choice(["contiguous", "channels_last", "strided", "unbatched"])
    if layout == "unbatched":
        return torch.randn(channels, *size, dtype=torch.float64)
    if layout == "strided":   # a view every other element along the last dim
        x = torch.randn(batch, channels, *size[:-1], 2 * size[-1], dtype=torch.float64)
        return x[..., ::2]
    x = torch.randn(batch, channels, *size, dtype=torch.float64)
    if layout == "channels_last" and nd in (2, 3):
        x = x.contiguous(memory_format=torch.channels_last if nd == 2 else torch.channels_last_3d)
    return x


def _close(a: torch.Tensor, b: torch.Tensor, bound: torch.Tensor) -> bool:
    """``a`` (the draw's dtype) against the float64 reference ``b``, each element within the
    dtype's tolerance of ``bound``, the same sum over absolute values (the rounding errors'
    scale, which cancellation in ``b`` does not shrink)."""
    tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2e-2}[a.dtype]
    if a.shape != b.shape:
        return False
    return bool(((a.double() - b).abs() <= tol * bound + 1e-300).all())


def _compare(make_torch, make_ours, x: torch.Tensor, call_kwargs: dict, valid: bool) -> str:
    """'' where ours agrees with torch in float64 on the same rounded operands (values,
    the input's and the parameters' gradients, or both refusing), else what differs. torch's float64 module is the
    reference: its CPU float32 and bfloat16 paths differ from it in what they refuse (an
    output size of 0 along a dim) and once gave a bfloat16 weight gradient off by 1e37 on a
    channels_last_3d input (seed 64). On invalid arguments ours may refuse where torch
    does not (torch skips some checks on empty batches)."""
    try:
        ref_module = make_torch()
    except Exception as error:   # torch refuses the module's arguments
        try:
            make_ours()
        except (ValueError, TypeError, RuntimeError):
            return ""
        return f"torch refused the module ({error!r}); ours took it"
    try:
        mine = make_ours()
    except Exception as error:
        return "" if not valid and isinstance(error, ValueError) else \
            f"ours refused the module: {error!r}"
    with torch.no_grad():   # the reference takes the parameters as ours rounds them
        for p, q in zip(mine.parameters(), ref_module.parameters()):
            p.copy_(q)
            q.copy_(p)
    xr, xm = x.double().requires_grad_(), x.clone().requires_grad_()
    try:
        ref = ref_module(xr, **call_kwargs)
    except Exception as error:
        try:
            mine(xm, **call_kwargs)
        except (ValueError, TypeError, RuntimeError, IndexError):
            return ""
        return f"torch raised {error!r}; ours returned"
    try:
        out = mine(xm, **call_kwargs)
    except Exception as error:
        return "" if not valid and isinstance(error, ValueError) else \
            f"ours raised {type(error).__name__}: {error}"
    if out.shape != ref.shape or out.dtype != x.dtype:
        return f"shape {tuple(out.shape)} {out.dtype} against {tuple(ref.shape)} {x.dtype}"
    grad = torch.randn_like(ref).to(x.dtype)
    # The same sums over absolute values: every term's size, for the tolerances.
    abs_module = make_torch()
    with torch.no_grad():
        for p, q in zip(abs_module.parameters(), ref_module.parameters()):
            p.copy_(q.abs())
    xa = xr.detach().abs().requires_grad_()
    bound = abs_module(xa, **call_kwargs)
    if not _close(out, ref, bound):
        return f"output differs by {(out.double() - ref).abs().max().item():.3g}"
    got_r = torch.autograd.grad(ref, [xr, *ref_module.parameters()], grad.double(),
                                allow_unused=True)
    got_m = torch.autograd.grad(out, [xm, *mine.parameters()], grad, allow_unused=True)
    bounds = torch.autograd.grad(bound, [xa, *abs_module.parameters()], grad.double().abs(),
                                 allow_unused=True)
    for name, a, b, c in zip(("input", "weight", "bias"), got_m, got_r, bounds):
        if a is None and b is None:
            continue
        a = torch.zeros_like(b, dtype=x.dtype) if a is None else a
        b = torch.zeros_like(a, dtype=torch.float64) if b is None else b
        c = torch.zeros_like(b) if c is None else c
        if not _close(a, b, c):
            return f"{name} gradient differs by {(a.double() - b).abs().max().item():.3g}"
    return ""


def _columns_reference(x: torch.Tensor, kernel, dilation, padding, stride) -> torch.Tensor:
    """im2col in 1-3 dims as a grouped convolution with one-hot weights: row ``c K + k`` of
    the columns is channel ``c`` read at tap ``k``."""
    nd, channels = len(kernel), x.shape[1]
    taps = math.prod(kernel)
    weight = torch.eye(taps, dtype=x.dtype).reshape(taps, 1, *kernel).repeat(channels, 1, *(1,) * nd)
    conv = (torch.nn.functional.conv1d, torch.nn.functional.conv2d, torch.nn.functional.conv3d)[nd - 1]
    return conv(x, weight, None, stride, padding, dilation, channels).flatten(2)


def _columns_draw(rng: random.Random) -> str:
    """gemmconv.im2col in 1-3 dims against _columns_reference, and col2im as its adjoint:
    <im2col(x), c> = <x, col2im(c)>."""
    nd = rng.randint(1, 3)
    g = _geometry(rng, nd, True)
    kernel, dilation, padding, stride = (g[k] if isinstance(g[k], tuple) else (g[k],) * nd
                                         for k in ("kernel_size", "dilation", "padding", "stride"))
    batch, channels = rng.choice([0, 1, 2]), rng.randint(1, 3)
    size = tuple(rng.randint(1, 6 if nd == 3 else 9) for _ in range(nd))
    x = torch.randn(batch, channels, *size, dtype=torch.float64)
    args = (kernel, dilation, padding, stride)
    try:
        ref = _columns_reference(x, *args)
    except Exception:   # no block fits: ours must refuse
        try:
            gemmconv.im2col(x, *args)
        except (ValueError, RuntimeError):
            return ""
        return "torch found no block; ours returned columns"
    cols = gemmconv.im2col(x, *args)
    if cols.shape != ref.shape or not torch.allclose(cols, ref, rtol=0, atol=0):
        return f"im2col differs: {tuple(cols.shape)} against {tuple(ref.shape)}"
    c = torch.randn_like(cols)
    image = gemmconv.col2im(c, size, *args)
    lhs, rhs = (cols * c).sum().item(), (x * image).sum().item()
    scale = (cols.abs() * c.abs()).sum().item()
    if image.shape != x.shape or abs(lhs - rhs) > 1e-12 * max(scale, 1e-300):
        return f"col2im is not im2col's adjoint: {lhs} against {rhs}"
    return ""


def draw(rng: random.Random) -> tuple:
    """(kind, text, result) of one random draw."""
    nd = rng.randint(1, 3)
    valid = rng.random() < 0.85
    g = _geometry(rng, nd, valid)
    groups = rng.choice([1, 1, 2, 3])
    c_in, c_out = groups * rng.randint(1, 3), groups * rng.randint(1, 3)
    if not valid and rng.random() < 0.3:
        c_in += 1   # channels not divisible by groups
    batch = rng.choice([0, 1, 2, 3])
    size = tuple(rng.randint(1, 6 if nd == 3 else 9) for _ in range(nd))
    bias = rng.random() < 0.7
    dtype = rng.choices([torch.float64, torch.float32, torch.bfloat16], [7, 2, 1])[0]
    x = _input(rng, nd, batch, c_in, size).to(dtype)
    if rng.random() < 0.5:   # a transposed convolution module
        kwargs = dict(g, groups=groups, bias=bias, dtype=dtype)
        call = {}
        if rng.random() < 0.25:   # output_size: any that the geometry allows
            k, s, p, d = (g[key] if isinstance(g[key], tuple) else (g[key],) * nd
                          for key in ("kernel_size", "stride", "padding", "dilation"))
            low = [(i - 1) * si - 2 * pi + di * (ki - 1) + 1
                   for i, ki, si, pi, di in zip(size, k, s, p, d)]
            call["output_size"] = [v + rng.randint(0, max(si, di) - 1) for v, si, di in zip(low, s, d)]
            kwargs.pop("output_padding")
        text = f"ConvTranspose{nd}d({c_in}, {c_out}, {kwargs}) on {tuple(x.shape)} " \
               f"strides {x.stride()} {call}"
        result = _compare(lambda: TORCH_T[nd](c_in, c_out, **dict(kwargs, dtype=torch.float64)),
                          lambda: OURS_T[nd](c_in, c_out, **kwargs), x, call, valid)
        return "conv_transpose", text, result
    if rng.random() < 0.1:
        return "columns", "im2col/col2im", _columns_draw(rng)
    if rng.random() < 0.2:   # Unfold, or Fold of columns that some image size takes
        g = _geometry(rng, 2, valid)
        g.pop("output_padding")
        channels, size = rng.randint(1, 3), tuple(rng.randint(1, 9) for _ in range(2))
        image = torch.randn(batch, channels, *size, dtype=torch.float64)
        if rng.random() < 0.5:
            text = f"Unfold({g}) on {tuple(image.shape)}"
            return "unfold", text, _compare(lambda: torch.nn.Unfold(**g), lambda: gnn.Unfold(**g),
                                            image, {}, valid)
        try:
            columns = torch.nn.Unfold(**g)(image)
        except Exception:
            columns = torch.randn(batch, channels * 4, 3, dtype=torch.float64)
        text = f"Fold({size}, {g}) on {tuple(columns.shape)}"
        return "fold", text, _compare(lambda: torch.nn.Fold(size, **g), lambda: gnn.Fold(size, **g),
                                      torch.randn_like(columns), {}, valid)
    mode = rng.choice(["zeros", "reflect", "replicate", "circular"])
    padding = rng.choice([g["padding"], "same", "valid"])
    kwargs = dict(kernel_size=g["kernel_size"], stride=g["stride"] if padding != "same" else 1,
                  padding=padding, dilation=g["dilation"], groups=groups, bias=bias,
                  padding_mode=mode, dtype=dtype)
    text = f"Conv{nd}d({c_in}, {c_out}, {kwargs}) on {tuple(x.shape)} strides {x.stride()}"
    result = _compare(lambda: TORCH_C[nd](c_in, c_out, **dict(kwargs, dtype=torch.float64)),
                      lambda: OURS_C[nd](c_in, c_out, **kwargs), x, {}, valid)
    return "conv", text, result


def main(draws: int, seed: int) -> int:
    rng = random.Random(seed)
    torch.manual_seed(seed)
    counts, bad = {}, 0
    for i in range(draws):
        try:
            kind, text, result = draw(rng)
        except Exception:
            kind, text, result = "harness", f"draw {i}", traceback.format_exc(limit=3)
        total, failed = counts.get(kind, (0, 0))
        counts[kind] = (total + 1, failed + bool(result))
        if result:
            bad += 1
            print(f"MISMATCH {kind}: {text}\n    {result}")
    for kind, (total, failed) in sorted(counts.items()):
        print(f"{kind}: {total} draws, {failed} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    sys.exit(main(args[0] if args else 300, args[1] if len(args) > 1 else 60))
