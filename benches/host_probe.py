"""Where small layers' time goes (issue 21's DCGAN, VAE and HiFi-GAN rows): per layer of the
zoo, host-bound time per call back to back, and the kernels' own time (profiler), for torch,
gemmconv's chosen route and the fused route; then the fused call's host stages, and a
training step's host time by function.

    PYTHONPATH=. python benches/host_probe.py
"""
import contextlib
import cProfile
import pstats
import sys

import torch
import torch.nn.functional as F

from gemmconv import fused, ops, zoo
from gemmconv.shapes import conv_transpose_args

sys.path.insert(0, "benches")
from layer import kernel_times  # noqa: E402
from overhead import patched, per_call_us  # noqa: E402


def kernel_us(fn, calls: int = 50) -> float:
    """Microseconds of GPU kernels a call, from the profiler (host time excluded)."""
    return sum(ms for _, ms in kernel_times(fn, calls)) * 1e3


def layers():
    """(model, name, input shape, module) of every transposed convolution in the zoo's DCGAN,
    VAE decoder and HiFi-GAN at full size."""
    found = []
    for entry in zoo.by_name(["dcgan", "vae", "hifigan", "unet2d"]):
        model = entry.build(False).cuda()
        shapes = {}
        def record(module, args, name):
            shapes.setdefault(name, args[0].shape)   # returns None: the call's input stays
        hooks = [m.register_forward_pre_hook(lambda m, args, n=n: record(m, args, n))
                 for n, m in model.named_modules() if isinstance(m, torch.nn.modules.conv._ConvTransposeNd)]
        with torch.no_grad():
            model(entry.input(False, "cuda"))
        for h in hooks:
            h.remove()
        modules = dict(model.named_modules())
        found += [(entry.name, n, s, modules[n]) for n, s in shapes.items()]
    return found


def fused_forced(fn):
    with patched(fused, "preferred", lambda a, interleaved: True):
        return fn()


class Stopwatch:
    """Wall time spent inside chosen functions (inclusive of what they call), by wrapping
    them: far lighter than cProfile, which inflates small calls several-fold."""

    def __init__(self):
        self.time, self.calls, self.undo = {}, {}, []

    def wrap(self, owner, name, label=None):
        import time
        original, label = getattr(owner, name), label or f"{getattr(owner, '__name__', owner)}.{name}"

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.time[label] = self.time.get(label, 0.0) + time.perf_counter() - start
                self.calls[label] = self.calls.get(label, 0) + 1
        setattr(owner, name, timed)
        self.undo.append((owner, name, original))

    def restore(self):
        for owner, name, original in reversed(self.undo):
            setattr(owner, name, original)

    def report(self, steps):
        for label in sorted(self.time, key=self.time.get, reverse=True):
            print(f"    {label:45s} {self.calls[label] / steps:5.1f} calls {self.time[label] / steps * 1e6:8.1f} us a step")


def watched_steps(title: str, in_channels: int, out_channels: int, size: int, batch: int,
                  dtypes: list, wraps: list, calls: int) -> None:
    """Host time by function (Stopwatch over ``wraps``: (owner, names, label prefix or None))
    of a forward without grad and of a training step of a k4 s2 layer, per dtype and layout
    in ``dtypes`` ((dtype, channels_last) pairs)."""
    import time
    from gemmconv import nn as gnn
    for dtype, cl in dtypes:
        m = gnn.ConvTranspose2d(in_channels, out_channels, 4, 2, 1, bias=False).cuda().to(dtype)
        x = torch.randn(batch, in_channels, size, size, device="cuda", dtype=dtype)
        if cl:
            m = m.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        xg = x.clone().requires_grad_()
        g = torch.randn(batch, out_channels, 2 * size, 2 * size, device="cuda", dtype=dtype)
        for label, step in (("forward, no_grad", lambda: m(x)), ("training step", lambda: m(xg).backward(g))):
            with torch.no_grad() if "no_grad" in label else contextlib.nullcontext():
                plain = per_call_us(step, calls)
                watch = Stopwatch()
                for owner, names, prefix in wraps:
                    for name in names:
                        watch.wrap(owner, name, prefix and prefix + name)
                try:
                    per_call_us(step, 50)
                    watch.time.clear(); watch.calls.clear()
                    start = time.perf_counter()
                    for _ in range(calls):
                        step()
                    torch.cuda.synchronize()
                    total = (time.perf_counter() - start) / calls * 1e6
                finally:
                    watch.restore()
            print(f"\n{label}, {title} {str(dtype)[6:]} {'CL' if cl else 'NCHW'}: {plain:.0f} us a step "
                  f"unwatched, {total:.0f} watched", flush=True)
            watch.report(calls)


def parts():
    """Host time by function of a forward and of a training step, on the column routes, for
    DCGAN's layer 3 (NCHW float32, channels_last bfloat16), and bare costs of the pieces."""
    from gemmconv import _cuda, columns, gemm, channels_last
    wraps = [(gemm, ["_call", "matmul"], None), (_cuda, ["_launch_at", "raw_stream"], None),
             (columns, ["col2im", "im2col", "col2im_interleaved", "im2col_interleaved"], None),
             (ops, ["_forward", "_backward", "_conv_transpose_backward", "_bias_grad"], None),
             (channels_last, ["forward", "backward"], None), (ops._Eager, ["forward", "backward"], None),
             (torch.Tensor, ["new_empty", "new_zeros", "contiguous", "sum"], None),
             (_cuda.cublas(), ["cublasGemmStridedBatchedEx", "cublasSetMathMode"], "cublas.")]
    watched_steps("dcgan layer 3", 256, 128, 8, 128,
                  [(torch.float32, False), (torch.bfloat16, True), (torch.bfloat16, False)], wraps, 300)
    # Bare costs of the pieces, one call each.
    x = torch.randn(128, 256, 8, 8, device="cuda")
    a, b = torch.randn(1, 1, 2048, 256, device="cuda"), torch.randn(1, 1, 256, 8192, device="cuda")
    out = torch.empty(1, 1, 2048, 8192, device="cuda")
    print("\nbare pieces, us per call:")
    for label, fn in (("torch.empty", lambda: torch.empty(1000, device="cuda")),
                      ("x.new_empty", lambda: x.new_empty(1000)),
                      ("x.view", lambda: x.view(128, 256, 64)),
                      ("x.as_strided", lambda: x.as_strided((128, 256), (1, 128))),
                      ("torch.matmul out=", lambda: torch.matmul(a, b, out=out)),
                      ("gemm.matmul", lambda: gemm.matmul(a, b, out)),
                      ("current_blas_handle", torch.cuda.current_blas_handle),
                      ("_cuda.on_device", lambda: _cuda.on_device(x.device).__enter__()),
                      ("raw_stream", lambda: _cuda.raw_stream(x.device))):
        print(f"  {label:24s} {per_call_us(fn, 1000):7.1f}", flush=True)


def bare():
    """Host time of single calls on tensors too small for the GPU to matter."""
    import numpy as np
    from gemmconv import _cuda, columns, gemm
    from gemmconv.shapes import Geometry
    lib = _cuda.cublas()
    x = torch.randn(2, 8, 4, 4, device="cuda")
    a, b = torch.randn(1, 1, 32, 16, device="cuda"), torch.randn(1, 1, 16, 64, device="cuda")
    out = torch.empty(1, 1, 32, 64, device="cuda")
    a3, b3, out3 = a[0], b[0], out[0]
    product = gemm._product(a, b, out)
    handle = torch.cuda.current_blas_handle()
    one, zero = gemm._SCALARS[np.float32]
    call = product.calls[0]
    op_b, op_a, n, m, k, ld_b, s_b, ld_a, s_a, ld_c, s_c, count = call.args
    pa, pb, pc = a.data_ptr(), b.data_ptr(), out.data_ptr()
    raw = lambda: lib.cublasGemmStridedBatchedEx(handle, op_b, op_a, n, m, k, one, pb, 0, ld_b, s_b, pa, 0,
                                                 ld_a, s_a, zero, pc, 0, ld_c, s_c, count, product.compute, -1)
    g = Geometry((2, 2), (2, 2), (0, 0), (1, 1))
    cols = torch.randn(2, 8, 4, 4, 4, device="cuda")
    img = torch.empty(16, 8, 8, device="cuda")
    w = torch.randn(8, 8, 4, 4, device="cuda")
    print("bare host time, us per call (tiny tensors):")
    for label, fn in (("torch.empty", lambda: torch.empty(1000, device="cuda")),
                      ("x.view", lambda: x.view(2, 8, 16)),
                      ("x.contiguous (is)", lambda: x.contiguous()),
                      ("x.data_ptr", lambda: x.data_ptr()),
                      ("torch.bmm out=", lambda: torch.bmm(a3, b3, out=out3)),
                      ("torch.matmul out=", lambda: torch.matmul(a, b, out=out)),
                      ("cublas raw ctypes", raw),
                      ("cublasSetMathMode", lambda: lib.cublasSetMathMode(handle, 0)),
                      ("gemm._call", lambda: gemm._call(product, a, b, out)),
                      ("gemm.matmul", lambda: gemm.matmul(a, b, out)),
                      ("columns.col2im", lambda: columns.col2im(cols, None, g, (4, 4), (8, 8), out=img)),
                      ("F.conv_transpose2d", lambda: F.conv_transpose2d(x, w, None, 2, 1)),
                      ("ops.conv_transpose2d", lambda: ops.conv_transpose2d(x, w, None, 2, 1)),
                      ("x + 1", lambda: x + 1)):
        print(f"  {label:24s} {per_call_us(fn, 2000):7.1f}", flush=True)


def glue():
    """Host time by function of calls too small for the GPU to matter (inclusive times)."""
    from gemmconv import _cuda, columns, gemm, channels_last, shapes
    wraps = [(ops, ["_conv_transpose", "_autocast", "conv_transpose_args", "_run", "_eager", "_forward",
                    "_forward_plan", "_split_weight", "_backward", "_conv_transpose_backward",
                    "_bias_grad", "_asked"], None),
             (ops._Eager, ["apply", "forward", "backward"], None),
             (fused, ["unavailable", "backward_unavailable"], None),
             (gemm, ["matmul", "_product", "_call", "uses_tf32", "torch_convolutions_use_tf32"], None),
             (columns, ["col2im", "im2col", "col2im_interleaved", "im2col_interleaved"], None),
             (_cuda, ["col2im", "im2col", "_col2im_plan", "_im2col_plan", "_launch_at", "run_col2im",
                      "run_im2col"], None),
             (channels_last, ["suggested", "empty", "forward", "backward", "forward_plan",
                              "backward_plan"], None),
             (shapes, ["_signature"], None)]
    watched_steps("tiny k4 s2", 8, 8, 4, 2, [(torch.float32, False), (torch.float32, True)], wraps, 500)


def main():
    if sys.argv[1:] == ["layers"]:
        return layers_table()
    if sys.argv[1:] == ["glue"]:
        return glue()
    if sys.argv[1:] == ["bare"]:
        return bare()
    if sys.argv[1:] == ["parts"]:
        return parts()
    layers_table()
    stages()
    training()


def layers_table():
    """Per layer of the zoo's small-layer models: per call and kernel times."""
    import triton
    print("triton", triton.__version__, "torch", torch.__version__, flush=True)
    print("layer | dtype layout | per call us: torch / ours / fused | kernels us: torch / ours / fused | ours route")
    for model, name, shape, m in layers():
        nd = len(shape) - 2
        for dtype in (torch.float32, torch.bfloat16):
            for cl in ((False, True) if nd == 2 else (False,)):
                x = torch.randn(shape, device="cuda", dtype=dtype)
                w = m.weight.detach().to(dtype)
                b = None if m.bias is None else m.bias.detach().to(dtype)
                if cl:
                    x = x.contiguous(memory_format=torch.channels_last)
                    w = w.contiguous(memory_format=torch.channels_last)
                kw = dict(stride=m.stride, padding=m.padding, output_padding=m.output_padding,
                          groups=m.groups, dilation=m.dilation)
                theirs = lambda: getattr(F, f"conv_transpose{nd}d")(x, w, b, **kw)
                ours = lambda: getattr(ops, f"conv_transpose{nd}d")(x, w, b, **kw)
                a = conv_transpose_args(f"conv_transpose{nd}d", nd, x, w, b, m.stride, m.padding,
                                        m.output_padding, m.groups, m.dilation)
                why = fused_forced(lambda: fused.unavailable(a, x, w, cl))
                t = [per_call_us(theirs), per_call_us(ours)]
                k = [kernel_us(theirs), kernel_us(ours)]
                if why is None:
                    t.append(fused_forced(lambda: per_call_us(ours)))
                    k.append(fused_forced(lambda: kernel_us(ours)))
                else:
                    t.append(float("nan"))
                    k.append(float("nan"))
                route = ops.describe_route(a, cl, fused.unavailable(a, x, w, cl) is None)
                print(f"{model} {name} {tuple(shape)} -> {a.out_channels} k{m.kernel_size} s{m.stride} | "
                      f"{str(dtype)[6:]} {'CL' if cl else 'NCHW'} | "
                      f"{t[0]:.0f} / {t[1]:.0f} / {t[2]:.0f} | {k[0]:.0f} / {k[1]:.0f} / {k[2]:.0f} | {route}"
                      + ("" if why is None else f" (fused: {why})"), flush=True)


def stages():
    """The fused call's host stages on DCGAN's second layer, bfloat16 channels_last."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    from gemmconv import _triton
    dtype = torch.bfloat16
    x = torch.randn(128, 512, 4, 4, device="cuda", dtype=dtype).contiguous(memory_format=torch.channels_last)
    w = torch.randn(512, 256, 4, 4, device="cuda", dtype=dtype)
    a = conv_transpose_args("conv_transpose2d", 2, x, w, None, 2, 1, 0, 1, 1)
    out = torch.empty(a.output_shape, device="cuda", dtype=dtype, memory_format=torch.channels_last)
    rows, taps, tw = x.movedim(1, -1), fused.transposed_taps(a.geometry), fused.tap_weights(w)
    o = out.movedim(1, -1)
    print("\nfused host stages, us per call (dcgan layer 2, bf16 channels_last):")
    pieces = {
        "torch.empty out": lambda: torch.empty(a.output_shape, device="cuda", dtype=dtype,
                                               memory_format=torch.channels_last),
        "tap_weights": lambda: fused.tap_weights(w),
        "tap_weights fp32": lambda: fused.tap_weights(w.float()),
        "movedim": lambda: x.movedim(1, -1),
        "TensorDescriptor": lambda: TensorDescriptor(rows, [128, 1, 4, 4, 512], [8192, 8192, 2048, 512, 1],
                                                     [1, 1, 8, 8, 64]),
        "torch.cuda.device ctx": lambda: fused._on(x.device).__enter__(),
        "current_stream": lambda: torch.cuda.current_stream(x.device).cuda_stream,
        "implicit_gemm (jit launch)": lambda: fused.implicit_gemm(rows, tw, None, taps, o),
        "forward (ours)": lambda: ops.conv_transpose2d(x, w, None, 2, 1),
    }
    for label, fn in pieces.items():
        print(f"  {label:28s} {per_call_us(fn, 500):7.1f}", flush=True)
    # The same launch through the compiled kernel's runner, arguments built once.
    batch, c_in, c_out = 128, 512, 256
    extent = [1, 4, 4]
    cfg = fused.config(batch, extent, c_in, c_out, len(taps.count), 2)
    programs = fused._programs(batch, extent, c_out, len(taps.count), cfg.box, cfg.bn)
    xd = TensorDescriptor(rows, [batch, 1, 4, 4, c_in], fused._dense([batch, 1, 4, 4, c_in]), [*cfg.box, cfg.bk])
    wd = TensorDescriptor(tw, list(tw.shape), fused._dense(list(tw.shape)), [1, cfg.bn, cfg.bk])
    offsets, index, count = fused._table_tensor(taps, x.device)
    strides = fused._padded(o.stride()[1:-1], 0)
    args = [xd, wd, o, o, offsets, index, count, batch, 1, 8, 8, *taps.stride, o.stride(0), *strides,
            o.stride(-1), c_in, c_out, len(taps.index[0]), *fused._tiles(batch, extent, cfg.box),
            -(-c_out // cfg.bn)]
    consts = dict(BB=cfg.box[0], B0=cfg.box[1], B1=cfg.box[2], B2=cfg.box[3], BK=cfg.bk, BN=cfg.bn,
                  ROUND=False, HAS_BIAS=False, PRECISION="tf32")
    kernel = _triton.implicit_gemm[(programs,)](*args, **consts, num_warps=cfg.warps, num_stages=cfg.stages)
    print("  jit launch, args prebuilt     ", f"{per_call_us(lambda: _triton.implicit_gemm[(programs,)](*args, **consts, num_warps=cfg.warps, num_stages=cfg.stages), 500):7.1f}")
    stream = torch.cuda.current_stream().cuda_stream
    runner = kernel[(programs, 1, 1)]
    every = [*args, *consts.values()]
    expected = o.clone()
    o.fill_(float("nan"))
    runner(*every, stream=stream)
    torch.cuda.synchronize()
    print("  compiled runner, same args    ", f"{per_call_us(lambda: runner(*every, stream=stream), 500):7.1f}",
          "same result:", torch.equal(o, expected))
    runner_nodesc = lambda: kernel[(programs, 1, 1)](*every, stream=stream)
    print("  compiled [grid] + runner      ", f"{per_call_us(runner_nodesc, 500):7.1f}")
    def fresh():
        d1 = TensorDescriptor(rows, [batch, 1, 4, 4, c_in], [8192, 8192, 2048, 512, 1], [*cfg.box, cfg.bk])
        d2 = TensorDescriptor(tw, list(tw.shape), list(tw.stride()), [1, cfg.bn, cfg.bk])
        runner(d1, d2, *every[2:], stream=stream)
    print("  runner + two new descriptors  ", f"{per_call_us(fresh, 500):7.1f}")


def training():
    """Host time of a training step of one DCGAN layer (forward, backward), by function."""
    for dtype, cl in ((torch.float32, False), (torch.bfloat16, True)):
        m = torch.nn.ConvTranspose2d(256, 128, 4, 2, 1, bias=False).cuda().to(dtype)
        x = torch.randn(128, 256, 8, 8, device="cuda", dtype=dtype, requires_grad=True)
        if cl:
            m = m.to(memory_format=torch.channels_last)
            x = x.detach().contiguous(memory_format=torch.channels_last).requires_grad_()
        from gemmconv import nn as gnn
        ours = gnn.ConvTranspose2d(256, 128, 4, 2, 1, bias=False).cuda().to(dtype)
        if cl:
            ours = ours.to(memory_format=torch.channels_last)
        g = torch.randn(128, 128, 16, 16, device="cuda", dtype=dtype)
        step_t = lambda: m(x).backward(g)
        step_o = lambda: ours(x).backward(g)
        print(f"\ntraining step, dcgan layer 3 {str(dtype)[6:]} {'CL' if cl else 'NCHW'}: "
              f"torch {per_call_us(step_t, 200):.0f} us ({kernel_us(step_t):.0f} kernels), "
              f"ours {per_call_us(step_o, 200):.0f} us ({kernel_us(step_o):.0f} kernels)", flush=True)
        profiler = cProfile.Profile()
        profiler.runcall(lambda: [step_o() for _ in range(200)])
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
