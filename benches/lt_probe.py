"""Does cuBLASLt, with its algorithm chosen once per shape, cost less host time a call than
cublasGemmStridedBatchedEx (cuBLAS's heuristics on every call)? And where does a replayed
call's host time go, piece by piece?

    PYTHONPATH=. python benches/lt_probe.py [MODE]

Without a mode: for each product of the replays of DCGAN's layers (forward and backward,
float32 and bfloat16) and of a tiny layer, host time to queue one call (no waiting on the
GPU), the legacy call against this probe's own cuBLASLt call, and whether the two agree.
Modes: ``pieces`` (a replayed tiny forward, piece by piece), ``backward`` and ``steps`` (a
tiny training step's), ``engine`` (work on autograd's device thread against the caller's),
``model`` (DCGAN by function), ``ab`` and ``ab-forward`` (zoo models with gemm.py on
cuBLASLt against the legacy call, in turns), ``gc`` (Python's collector on and off). Session
25's ``batched`` mode (the 17 cases' batched products on cuBLASLt against the legacy call,
results/s26/A/batched.log) went with the limit it toggled (commit f1adba7).
"""
import ctypes
import sys
import time

import numpy as np
import torch

from gemmconv import _cuda, gemm, ops
from gemmconv import nn as gnn

sys.path.insert(0, "benches")
from overhead import per_call_us  # noqa: E402

p, i, u64, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_int64


def lt_library() -> ctypes.CDLL:
    torch.cuda.current_blas_handle()
    with open("/proc/self/maps") as maps:
        paths = sorted({line.split()[-1] for line in maps if "/libcublasLt.so" in line})
    lib = ctypes.CDLL(paths[0])
    lib.cublasLtMatmul.argtypes = [p] * 14 + [ctypes.c_size_t, p]
    lib.cublasLtMatrixLayoutCreate.argtypes = [p, i, u64, u64, i64]
    lib.cublasLtMatrixLayoutSetAttribute.argtypes = [p, i, p, ctypes.c_size_t]
    lib.cublasLtMatmulDescCreate.argtypes = [p, i, i]
    lib.cublasLtMatmulDescSetAttribute.argtypes = [p, i, p, ctypes.c_size_t]
    lib.cublasLtMatmulPreferenceSetAttribute.argtypes = [p, i, p, ctypes.c_size_t]
    lib.cublasLtMatmulAlgoGetHeuristic.argtypes = [p] * 7 + [i, p, p]
    return lib


LT = None
HANDLE = None


def ok(code):
    assert code == 0, f"cuBLASLt status {code}"


class Heuristic(ctypes.Structure):
    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspace", ctypes.c_size_t),
                ("state", ctypes.c_int), ("waves", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


def layout(dtype, rows, cols, ld, count, stride):
    d = p()
    ok(LT.cublasLtMatrixLayoutCreate(ctypes.byref(d), dtype, rows, cols, ld))
    c, s = ctypes.c_int32(count), ctypes.c_int64(stride)
    ok(LT.cublasLtMatrixLayoutSetAttribute(d, 5, ctypes.byref(c), 4))
    ok(LT.cublasLtMatrixLayoutSetAttribute(d, 6, ctypes.byref(s), 8))
    return d


def lt_plan(product):
    """Per call of the product: (offsets, desc, layouts, heuristic, workspace bytes)."""
    global LT, HANDLE
    if LT is None:
        LT = lt_library()
        HANDLE = p()
        ok(LT.cublasLtCreate(ctypes.byref(HANDLE)))
    plans = []
    type_b, type_a, type_c = product.types
    scale = 1 if product.compute == gemm._COMPUTE_64F else 0
    for call in product.calls:
        op_b, op_a, n, m, k, ld_b, s_b, ld_a, s_a, ld_c, s_c, count = call.args
        desc = p()
        ok(LT.cublasLtMatmulDescCreate(ctypes.byref(desc), product.compute, scale))
        for attr, value in ((3, op_b), (4, op_a)):
            v = ctypes.c_int32(value)
            ok(LT.cublasLtMatmulDescSetAttribute(desc, attr, ctypes.byref(v), 4))
        la = layout(type_b, *((n, k) if op_b == 0 else (k, n)), ld_b, count, s_b)
        lb = layout(type_a, *((k, m) if op_a == 0 else (m, k)), ld_a, count, s_a)
        lc = layout(type_c, n, m, ld_c, count, s_c)
        pref = p()
        ok(LT.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)))
        limit = ctypes.c_uint64(32 << 20)
        ok(LT.cublasLtMatmulPreferenceSetAttribute(pref, 1, ctypes.byref(limit), 8))
        result, found = Heuristic(), ctypes.c_int()
        ok(LT.cublasLtMatmulAlgoGetHeuristic(HANDLE, desc, la, lb, lc, lc, pref, 1,
                                             ctypes.byref(result), ctypes.byref(found)))
        assert found.value == 1 and result.state == 0
        plans.append((call.offsets, desc, la, lb, lc, result, result.workspace))
    return plans


def lt_run(product, plans, a, b, out, device):
    one, zero = gemm._SCALARS[np.float64 if product.compute == gemm._COMPUTE_64F else np.float32]
    stream = _cuda.raw_stream(device)
    for (ob, oa, oc), desc, la, lb, lc, result, ws in plans:
        w = torch.empty(ws, dtype=torch.uint8, device=device) if ws else None
        ok(LT.cublasLtMatmul(HANDLE, desc, one, b + ob, la, a + oa, lb, zero, out + oc, lc,
                             out + oc, lc, ctypes.byref(result.algo), w.data_ptr() if ws else None,
                             ws, stream))


def enqueue_us(fn, calls=100):
    """Host time to queue one call: the loop's time without waiting for the GPU after."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return best


def products():
    """(label, product) of the replays of DCGAN's layers and of a tiny layer."""
    found = []
    specs = [("tiny", 8, 8, 4, 2), ("dcgan-2", 512, 256, 4, 128), ("dcgan-3", 256, 128, 8, 128),
             ("dcgan-4", 128, 64, 16, 128)]
    for dtype in (torch.float32, torch.bfloat16):
        for name, cin, cout, size, batch in specs:
            ops._replays.clear()
            ops._backward_replays.clear()
            m = gnn.ConvTranspose2d(cin, cout, 4, 2, 1, bias=False).cuda().to(dtype)
            x = torch.randn(batch, cin, size, size, device="cuda", dtype=dtype, requires_grad=True)
            m(x).sum().backward()
            for r in ops._replays.values():
                if r is not None:
                    found.append((f"{name} {str(dtype)[6:]} fwd", r.product))
            for r in ops._backward_replays.values():
                if r is not None:
                    found += [(f"{name} {str(dtype)[6:]} bwd-{k}", q) for k, q in
                              (("input", r.input), ("weight", r.weight)) if q is not None]
    return found


def operands(product):
    """Random operands for the product's first call (a, b, out as flat tensors)."""
    op_b, op_a, n, m, k, ld_b, s_b, ld_a, s_a, ld_c, s_c, count = product.calls[0].args
    dtypes = {0: torch.float32, 14: torch.bfloat16, 2: torch.float16, 1: torch.float64}
    tb, ta, tc = (dtypes[t] for t in product.types)
    size = lambda ld, cols, s: ld * cols + s * (count - 1) + 64
    b = torch.randn(size(ld_b, k if op_b == 0 else n, s_b), device="cuda", dtype=tb)
    a = torch.randn(size(ld_a, m if op_a == 0 else k, s_a), device="cuda", dtype=ta)
    out = torch.empty(size(ld_c, m, s_c), device="cuda", dtype=tc)
    return a, b, out


def main():
    print("torch", torch.__version__, torch.cuda.get_device_name())
    handle = torch.cuda.current_blas_handle()
    lib = _cuda.cublas()
    dev = torch.device("cuda", 0)
    print(f"current_blas_handle {per_call_us(torch.cuda.current_blas_handle, 2000):.1f} us, "
          f"cublasSetMathMode {per_call_us(lambda: lib.cublasSetMathMode(handle, 0), 2000):.1f} us, "
          f"raw_stream {per_call_us(lambda: _cuda.raw_stream(dev), 2000):.1f} us, "
          f"torch.empty {per_call_us(lambda: torch.empty(4096, device=dev), 2000):.1f} us")
    print("product | m n k count | queue us: legacy / Lt | GPU us: legacy / Lt | max rel diff | Lt workspace")
    for label, product in products():
        if len(product.calls) != 1:
            print(label, "several calls, skipped")
            continue
        a, b, out = operands(product)
        plans = lt_plan(product)
        pa, pb, pc = a.data_ptr(), b.data_ptr(), out.data_ptr()
        call = product.calls[0]
        legacy = lambda: gemm._legacy(product, call, *(p + o for p, o in zip((pb, pa, pc), call.offsets)), dev)
        lt = lambda: lt_run(product, plans, pa, pb, pc, dev)
        legacy()
        expected = out.clone()
        out.fill_(float("nan"))
        lt()
        torch.cuda.synchronize()
        n_out = product.calls[0].args[9] * product.calls[0].args[3]   # first matrix only
        diff = ((out[:n_out].double() - expected[:n_out].double()).abs().max()
                / expected[:n_out].double().abs().max()).item()
        q = [enqueue_us(legacy), enqueue_us(lt)]
        g = [per_call_us(legacy, 50), per_call_us(lt, 50)]
        op_b, op_a, n, m, k, *_, count = product.calls[0].args
        print(f"{label} | {m} {n} {k} {count} | {q[0]:.1f} / {q[1]:.1f} | {g[0]:.1f} / {g[1]:.1f} | "
              f"{diff:.1e} | {plans[0][-1]}", flush=True)




def tiny_layer():
    """A tiny k4 s2 layer on the GPU, its calls too small for the GPU to matter: ``(device,
    x (2, 8, 4, 4), weight, checked arguments, output gradient, x and weight requiring
    grad)``, one forward and training step run (so its replays are worked out)."""
    from gemmconv.shapes import conv_transpose_args
    dev = torch.device("cuda", 0)
    x = torch.randn(2, 8, 4, 4, device=dev)
    w = torch.randn(8, 8, 4, 4, device=dev)
    a = conv_transpose_args("conv_transpose2d", 2, x, w, None, 2, 1, 0, 1, 1)
    g = torch.randn(a.output_shape, device=dev)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    ops.conv_transpose2d(x, w, None, 2, 1)
    ops.conv_transpose2d(xg, wg, None, 2, 1).backward(g)
    return dev, x, w, a, g, xg, wg


def print_rows(title: str, rows: list) -> None:
    """Host time a call of each (label, function) of ``rows``."""
    print(f"\n{title}, us a call:")
    for label, fn in rows:
        print(f"  {label:32s} {per_call_us(fn, 1000):7.1f}", flush=True)


def pieces():
    """Host time of a replayed tiny forward's pieces, one at a time (us a call)."""
    import torch.nn.functional as F
    from gemmconv import channels_last as cl
    from gemmconv.shapes import conv_transpose_args
    dev, x, w, a, g, xg, _ = tiny_layer()
    replay = next(r for r in ops._replays.values() if r is not None)
    key = lambda: ops._replay_key(a, False, x, w, None)
    k = key()
    ws, out = x.new_empty(replay.workspace), x.new_empty(a.output_shape)

    class Identity(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t.view_as(t)

        @staticmethod
        def backward(ctx, grad):
            return grad

    xf = x.clone().requires_grad_()
    wf, gf = w.clone().requires_grad_(), g
    rows = [
        ("F.conv_transpose2d", lambda: F.conv_transpose2d(x, w, None, 2, 1)),
        ("ops.conv_transpose2d", lambda: ops.conv_transpose2d(x, w, None, 2, 1)),
        ("conv_transpose_args", lambda: conv_transpose_args("conv_transpose2d", 2, x, w, None, 2, 1, 0, 1, 1)),
        ("_autocast", lambda: ops._autocast(x, w, None)),
        ("_eager", lambda: ops._eager(x, w, None)),
        ("hash(a)", lambda: hash(a)),
        ("replay key", key),
        ("_replays.get", lambda: ops._replays.get(k)),
        ("gemm._compute_type", lambda: gemm._compute_type(x.dtype)),
        ("fused.takes", lambda: ops.fused.takes(a, x, w, False)),
        ("a.route()", lambda: a.route()),
        ("a.prefers_im2col()", lambda: a.prefers_im2col()),
        ("replay.run (buffers given)", lambda: replay.run(x, w, None, a, ws, out)),
        ("replay.run", lambda: replay.run(x, w, None, a)),
        ("_in_layout", lambda: ops._in_layout(x, w, False)),
        ("x.new_empty", lambda: x.new_empty(replay.workspace)),
        ("cl.empty", lambda: cl.empty(x, a.output_shape, False)),
        ("gemm.run", lambda: gemm.run(replay.product, w.data_ptr(), x.data_ptr(), ws.data_ptr(), dev)),
        ("run_col2im", lambda: _cuda.run_col2im(replay.launch, dev, ws.data_ptr(), 0, out.data_ptr())),
        ("torch step F (fwd+bwd)", lambda: F.conv_transpose2d(xf, wf, None, 2, 1).backward(gf)),
        ("ours step (fwd+bwd)", lambda: ops.conv_transpose2d(xf, wf, None, 2, 1).backward(gf)),
        ("Identity Function step", lambda: Identity.apply(xg).backward(x)),
        ("plain view step", lambda: xg.view_as(xg).backward(x)),
    ]
    print_rows("host time of a tiny replayed forward's pieces", rows)


def backward_pieces():
    """Host time of a tiny training step's pieces, on the main thread and in autograd."""
    dev, x, w, a, g, xg, wg = tiny_layer()
    need = [True, True, False]
    replay = next(r for r in ops._backward_replays.values() if r is not None)
    ws = g.new_empty(replay.workspace)

    class Busy(torch.autograd.Function):
        """Twenty small torch ops in the backward: does the engine's thread run them slower?"""
        @staticmethod
        def forward(ctx, t):
            return t.view_as(t)

        @staticmethod
        def backward(ctx, grad):
            for _ in range(20):
                grad.new_empty(16)
            return grad

    def twenty():
        for _ in range(20):
            x.new_empty(16)

    rows = [
        ("_conv_transpose_backward", lambda: ops._conv_transpose_backward(g, x, w, a, need)),
        ("_replayed_backward", lambda: ops._replayed_backward(g, x, w, a, need, False)),
        ("backward replay.run", lambda: replay.run(g, x, w, a, need)),
        ("run_im2col", lambda: _cuda.run_im2col(replay.im2col, dev, g.data_ptr(), ws.data_ptr())),
        ("gemm.run (input)", lambda: gemm.run(replay.input, w.data_ptr(), ws.data_ptr(), ws.data_ptr(), dev)),
        ("_samples_side_by_side", lambda: ops._samples_side_by_side(x, 1, 16)),
        ("new_empty", lambda: g.new_empty(replay.workspace)),
        ("_forward", lambda: ops._forward(x, w, None, a)),
        ("_Eager.apply (grad)", lambda: ops._Eager.apply(xg, wg, None, a, ops._forward,
                                                          ops._conv_transpose_backward)),
        ("ops.conv_transpose2d (grad)", lambda: ops.conv_transpose2d(xg, wg, None, 2, 1)),
        ("ops.conv_transpose2d (no grad)", lambda: ops.conv_transpose2d(x, w, None, 2, 1)),
        ("step", lambda: ops.conv_transpose2d(xg, wg, None, 2, 1).backward(g)),
        ("twenty new_empty, main", twenty),
        ("Busy step", lambda: Busy.apply(xg).backward(x)),
        ("plain view step", lambda: xg.view_as(xg).backward(x)),
    ]
    print_rows("host time of a tiny training step's pieces", rows)


def step_pieces():
    """Where a tiny training step's host time goes: wrapped functions timed on whichever
    thread runs them, and the step with autograd's device threads off."""
    from gemmconv import channels_last as cl
    _, _, _, _, g, xg, wg = tiny_layer()
    step = lambda: ops.conv_transpose2d(xg, wg, None, 2, 1).backward(g)
    by_grad = lambda: torch.autograd.grad(ops.conv_transpose2d(xg, wg, None, 2, 1), (xg, wg), g)
    torch_step = lambda: torch.nn.functional.conv_transpose2d(xg, wg, None, 2, 1).backward(g)
    print("\ntiny training step, us a call:")
    print(f"  step {per_call_us(step, 1000):.1f}, autograd.grad {per_call_us(by_grad, 1000):.1f}, "
          f"torch step {per_call_us(torch_step, 1000):.1f}")
    with torch.autograd.set_multithreading_enabled(False):
        print(f"  without device threads: step {per_call_us(step, 1000):.1f}, "
              f"torch step {per_call_us(torch_step, 1000):.1f}")
    watched(step, ((ops._Eager, ["forward", "backward", "apply"]),
                   (ops, ["_conv_transpose_backward", "_replayed_backward", "_forward",
                          "_samples_side_by_side", "_gradient_in_layout", "_in_layout",
                          "_asked", "_conv_transpose"]),
                   (ops._BackwardReplay, ["run"]), (ops._Replay, ["run"]),
                   (gemm, ["run"]), (_cuda, ["run_im2col", "run_col2im", "_launch_at"]),
                   (cl, ["empty"]), (torch.Tensor, ["backward", "new_empty", "copy_"])), 100, 500)


def watched(fn, wraps, warm: int, calls: int) -> None:
    """Prints the host time a call of ``fn`` with the functions of ``wraps`` ((owner, names)
    pairs) timed by host_probe's Stopwatch, and theirs a call, after ``warm`` calls."""
    from host_probe import Stopwatch
    watch = Stopwatch()
    for owner, names in wraps:
        for name in names:
            watch.wrap(owner, name)
    try:
        per_call_us(fn, warm)
        watch.time.clear(); watch.calls.clear()
        total = per_call_us(fn, calls)
    finally:
        watch.restore()
    print(f"  watched {total:.1f} us a call")
    watch.report(calls + 20)   # per_call_us warms up with 20 calls of its own


def zoo_pair(name: str, dtype: torch.dtype, channels_last: bool):
    """``(torch's model, convert(copy of it), input, autocast context)`` of zoo model ``name``
    at full size on the GPU, in ``dtype`` (float32, or bfloat16 by autocast) and layout."""
    import copy
    from gemmconv import zoo
    entry = zoo.by_name([name])[0]
    base = entry.build(False).cuda()
    x = entry.input(False, "cuda")
    if channels_last:
        base, x = base.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
    cast = lambda: torch.autocast("cuda", torch.bfloat16, enabled=dtype == torch.bfloat16)
    return base, gnn.convert(copy.deepcopy(base)), x, cast


def zoo_config(config: str):
    """``(torch's model, convert(copy of it), input, autocast context, mode)`` of a
    configuration written ``model:mode:precision:layout`` (as ``dcgan:forward:float32:NCHW``;
    precision float32 or bf16-autocast, layout NCHW or channels_last), mode "eval" for a
    forward and "train" for a training step, as model_step takes it."""
    name, mode, precision, layout = config.split(":")
    dtype = torch.bfloat16 if precision.startswith("bf16") else torch.float32
    base, ours, x, cast = zoo_pair(name, dtype, layout == "channels_last")
    return base, ours, x, cast, "eval" if mode == "forward" else "train"


def model_step(m: torch.nn.Module, x: torch.Tensor, cast, mode: str):
    """A call of ``m`` on ``x``: "eval" a forward without grad, "train" a training step."""
    m.train(mode == "train")

    def fn():
        if mode == "eval":
            with torch.no_grad(), cast():
                m(x)
        else:
            with cast():
                out = m(x)
            out.float().square().mean().backward()
    return fn


def model_pieces():
    """DCGAN's forward and training step, torch and convert(model): time a call back to back,
    host time to queue one (no waiting), and the kernels' own time; then ours by function."""
    from host_probe import kernel_us
    from gemmconv import channels_last as cl
    for dtype, last in ((torch.float32, False), (torch.bfloat16, True)):
        model, ours, x, cast = zoo_pair("dcgan", dtype, last)
        for mode in ("eval", "train"):
            for label, m in (("torch", model), ("ours", ours)):
                fn = model_step(m, x, cast, mode)
                print(f"dcgan {mode} {str(dtype)[6:]} {'CL' if last else 'NCHW'} {label}: per call "
                      f"{per_call_us(fn, 50):.0f} us, queue {enqueue_us(fn, 20):.0f} us, "
                      f"kernels {kernel_us(fn, 20):.0f} us", flush=True)
            watched(fn, ((ops, ["_conv_transpose", "_forward", "_replayed", "_conv_transpose_backward"]),
                         (ops._Replay, ["run"]), (ops._BackwardReplay, ["run"]),
                         (ops.fused, ["forward", "backward"]), (cl, ["forward", "backward"]),
                         (ops, ["_backward", "_forward_by_im2col", "_backward_by_im2col"]),
                         (gemm, ["run"]), (_cuda, ["_launch_at"]), (torch.Tensor, ["backward"])),
                    30, 50)


def engine_pieces():
    """Which work costs more in a backward that autograd's device thread runs than on the
    calling thread: Functions whose backward does one kind of work twenty times."""
    dev, x, w, a, g, xg, wg = tiny_layer()
    fwd = next(r for r in ops._replays.values() if r is not None)
    bwd = next(r for r in ops._backward_replays.values() if r is not None)
    ws = g.new_empty(bwd.workspace)
    libc = ctypes.CDLL(None)
    libc.labs.argtypes = [ctypes.c_long]
    work = {
        "nothing": lambda: None,
        "ctypes labs": lambda: libc.labs(-3),
        "new_empty": lambda: x.new_empty(16),
        "torch add": lambda: x.add(1),
        "run_im2col": lambda: _cuda.run_im2col(bwd.im2col, dev, g.data_ptr(), ws.data_ptr()),
        "gemm.run": lambda: gemm.run(fwd.product, w.data_ptr(), x.data_ptr(), ws.data_ptr(), dev),
        "current_blas_handle": torch.cuda.current_blas_handle,
        "raw_stream": lambda: _cuda.raw_stream(dev),
        "our backward": lambda: ops._conv_transpose_backward(g, x, w, a, [True, True, False]),
    }
    print("\nsteps whose backward does the work 20 times, us a step: device threads on / off")
    for label, fn in work.items():
        class Busy(torch.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                return t.view_as(t)

            @staticmethod
            def backward(ctx, grad, fn=fn):
                for _ in range(20):
                    fn()
                return grad
        step = lambda: Busy.apply(xg).backward(x)
        on = per_call_us(step, 300)
        with torch.autograd.set_multithreading_enabled(False):
            off = per_call_us(step, 300)
        main = per_call_us(lambda: [fn() for _ in range(20)], 300)
        print(f"  {label:22s} {on:8.1f} / {off:8.1f}   (the work alone on this thread: {main:8.1f})", flush=True)


def in_turns(use, names, variants, modes, labels):
    """One machine, one process: zoo models ``names`` in ``variants`` ((dtype, channels_last)
    pairs) and ``modes``, torch's beside ours with ``use(True)`` and ``use(False)`` in turns
    (per call, back to back; the fastest of three turns each), and the kernels' own time
    (profiler). ``labels`` name the two settings; ``use(True)`` is left on."""
    from host_probe import kernel_us
    print(f"\nmodel | mode dtype layout | per call us: torch / {labels[0]} / {labels[1]} | "
          f"kernels us: torch / {labels[0]} / {labels[1]}")
    for name in names:
        for dtype, last in variants:
            base, ours, x, cast = zoo_pair(name, dtype, last)
            for mode in modes:
                step = lambda m: model_step(m, x, cast, mode)
                best = {"torch": float("inf"), True: float("inf"), False: float("inf")}
                kernels = {"torch": kernel_us(step(base), 10)}
                for _ in range(3):
                    best["torch"] = min(best["torch"], per_call_us(step(base), 30))
                    for setting in (True, False):
                        use(setting)
                        best[setting] = min(best[setting], per_call_us(step(ours), 30))
                        kernels.setdefault(setting, kernel_us(step(ours), 10))
                print(f"{name} | {mode} {str(dtype)[6:]} {'CL' if last else 'NCHW'} | "
                      f"{best['torch']:.0f} / {best[True]:.0f} / {best[False]:.0f} | "
                      f"{kernels['torch']:.0f} / {kernels[True]:.0f} / {kernels[False]:.0f}", flush=True)
    use(True)


def lt_against_legacy(names=("dcgan", "vae-decoder"), modes=("eval", "train")):
    """Zoo models with gemm.py's products on cuBLASLt against cublasGemmStridedBatchedEx,
    in turns (in_turns)."""
    choose = gemm._lt_choice
    legacy = lambda *args: gemm._NO_ALGORITHM

    def use(lt: bool):
        gemm._lt_choice = choose if lt else legacy
        for cache in (gemm._products, ops._replays, ops._backward_replays):
            cache.clear()

    in_turns(use, names, ((torch.float32, False), (torch.bfloat16, False), (torch.bfloat16, True)),
             modes, ("Lt", "legacy"))


def garbage_collector():
    """DCGAN's forward and training step with Python's cyclic garbage collector on and off
    (torch and ours, in turns): does the collector's work explain why our calls cost several
    times more inside a model than back to back alone? Also counts collections a step."""
    import gc
    print("\nmodel | mode dtype layout | us a call: torch gc on / off | ours gc on / off | "
          "gen0 collections a step: torch / ours")
    for dtype, last in ((torch.float32, False), (torch.bfloat16, True)):
        base, ours, x, cast = zoo_pair("dcgan", dtype, last)
        for mode in ("eval", "train"):
            step = lambda m: model_step(m, x, cast, mode)
            best = {}
            for _ in range(3):
                for label, m in (("torch", base), ("ours", ours)):
                    for on in (True, False):
                        (gc.enable if on else gc.disable)()
                        t = per_call_us(step(m), 50)
                        best[label, on] = min(best.get((label, on), float("inf")), t)
            gc.enable()
            counts = []
            for m in (base, ours):
                fn = step(m)
                fn()
                before = gc.get_stats()[0]["collections"]
                for _ in range(100):
                    fn()
                counts.append((gc.get_stats()[0]["collections"] - before) / 100)
            print(f"dcgan | {mode} {str(dtype)[6:]} {'CL' if last else 'NCHW'} | "
                  f"{best['torch', True]:.0f} / {best['torch', False]:.0f} | "
                  f"{best['ours', True]:.0f} / {best['ours', False]:.0f} | "
                  f"{counts[0]:.2f} / {counts[1]:.2f}", flush=True)


if __name__ == "__main__":
    {"gc": garbage_collector, "ab": lt_against_legacy, "ab-forward": lambda: lt_against_legacy(("dcgan", "depthwise", "unet2d", "unet3d"), ("eval",)), "engine": engine_pieces, "model": model_pieces, "pieces": pieces, "backward": backward_pieces, "steps": step_pieces}.get((sys.argv[1:] or [""])[0], main)()
