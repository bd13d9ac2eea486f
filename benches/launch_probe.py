"""Where a fused channels_last forward's host time goes, piece by piece, on the device's
host (session 31). Each figure is the median host time of one piece with the GPU kept busy
by a sleep queued first (benches/overhead.busy_host_us), so that nothing waits for it:
- the call through the library, and torch's;
- the call with the fused kernel's Python replaced by a return (the ops layer alone);
- fused.forward, tap_weights, implicit_gemm;
- the Triton launch through the JIT function (its argument binder and cache key), and
  through the compiled kernel it returned (``compiled[grid](*args)``), descriptors made;
- two TensorDescriptors made; torch.cuda.device's context; torch.empty; one small op.

    PYTHONPATH=. python benches/launch_probe.py [CASE]
"""
import sys

import torch
import torch.nn.functional as F
from triton.tools.tensor_descriptor import TensorDescriptor

from gemmconv import _triton, cases, conv_transpose2d, fused
from gemmconv.shapes import Geometry

sys.path.insert(0, "benches")
from overhead import busy_host_us  # noqa: E402

SLEEP = 20_000_000


def pieces(case, dtype):
    x, w, b = case.tensors(dtype, "cuda")
    x = x.to(memory_format=torch.channels_last)
    out = conv_transpose2d(x, w, b, **case.kwargs)
    g = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
    taps = fused.transposed_taps(g)
    rows, tw, view = x.movedim(1, -1), fused.tap_weights(w), out.movedim(1, -1)
    rounds = dtype == torch.float32
    # The launch's arguments as implicit_gemm makes them.
    batch, c_in, c_out = rows.shape[0], rows.shape[-1], view.shape[-1]
    grid, image = fused._padded(rows.shape[1:-1], 1), fused._padded(view.shape[1:-1], 1)
    extent = [-(-i // s) for i, s in zip(image, taps.stride)]
    cfg = fused.config(batch, extent, c_in, c_out, len(taps.count), rows.element_size(), rounds)
    programs = fused._programs(batch, extent, c_out, len(taps.count), cfg.box, cfg.bn)
    x_shape, w_shape = [batch, *grid, c_in], list(tw.shape)
    descriptors = lambda: (TensorDescriptor(rows, x_shape, fused._dense(x_shape), [*cfg.box, cfg.bk]),
                           TensorDescriptor(tw, w_shape, fused._dense(w_shape), [1, cfg.bn, cfg.bk]))
    x_desc, w_desc = descriptors()
    offsets, index, count = fused._table_tensor(taps, rows.device)
    ints = (batch, *image, *taps.stride, view.stride(0), *fused._padded(view.stride()[1:-1], 0),
            view.stride(-1), c_in, c_out, len(taps.index[0]),
            *fused._tiles(batch, extent, cfg.box), -(-c_out // cfg.bn))
    consts = dict(BB=cfg.box[0], B0=cfg.box[1], B1=cfg.box[2], B2=cfg.box[3], BK=cfg.bk,
                  BN=cfg.bn, ROUND=rounds, HAS_BIAS=True, PRECISION="tf32")
    jit = lambda: _triton.implicit_gemm[(programs,)](
        x_desc, w_desc, view, b, offsets, index, count, *ints, **consts,
        num_warps=cfg.warps, num_stages=cfg.stages)
    compiled = jit()
    stream = torch.cuda.current_stream().cuda_stream
    launcher = compiled[(programs, 1, 1)]
    args = (x_desc, w_desc, view, b, offsets, index, count, *ints, *consts.values())
    direct = lambda: launcher(*args, stream=stream)
    direct_made = lambda: launcher(*descriptors(), *args[2:], stream=stream)
    device = torch.cuda.device(x.device)

    def context():
        with device:
            pass

    real, a = fused.forward, _args(x, w, b, case)
    return {
        "torch call": lambda: F.conv_transpose2d(x, w, b, **case.kwargs),
        "our call": lambda: conv_transpose2d(x, w, b, **case.kwargs),
        "ops layer alone": (lambda: conv_transpose2d(x, w, b, **case.kwargs), real),
        "fused.forward": lambda: real(x, w, b, a, out),
        "tap_weights": lambda: fused.tap_weights(w),
        "implicit_gemm": lambda: fused.implicit_gemm(rows, tw, b, taps, view, round_input=rounds),
        "launch via JIT": jit,
        "launch compiled": direct,
        "launch compiled + 2 descriptors": direct_made,
        "2 TensorDescriptors": descriptors,
        "cuda.device context": context,
        "torch.empty channels_last": lambda: torch.empty(out.shape, dtype=dtype, device="cuda",
                                                         memory_format=torch.channels_last),
        "one small op (w + 1)": lambda: w + 1,
        "config()": lambda: fused.config(batch, extent, c_in, c_out, len(taps.count),
                                         rows.element_size(), rounds),
    }


def _args(x, w, b, case):
    from gemmconv.shapes import conv_transpose_args
    return conv_transpose_args("conv_transpose2d", 2, x, w, b, case.stride, case.padding,
                               case.output_padding, 1, case.dilation)


def main() -> int:
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else ["2d-512x1024"]
    print(torch.cuda.get_device_name(), flush=True)
    for name in names:
        case = next(c for c in cases.BENCH if c.name == name)
        for dtype in (torch.float32, torch.bfloat16):
            cells = []
            for label, fn in pieces(case, dtype).items():
                if isinstance(fn, tuple):   # the call with fused.forward returning at once
                    fn, real = fn
                    fused.forward = lambda x, weight, bias, a, out: out
                    try:
                        us = busy_host_us(fn, SLEEP)
                    finally:
                        fused.forward = real
                else:
                    us = busy_host_us(fn, SLEEP)
                cells.append(f"{label} {us:.0f}")
            print(f"{name} channels_last {dtype}: host us | " + " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
