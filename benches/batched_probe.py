"""The samples side by side: through a reordered copy, or through a batched product?

On small grids (ops._samples_inner) the planar column routes put the samples side by side
in the columns, ``(C_out K, n L)``, so that one product covers the batch. Today the forward
copies the input into ``(C_in, n L)`` first (ops._samples_side_by_side) and the input
gradient's product writes ``(C_in, n L)`` that a permuted copy puts back in the samples'
order. A product batched over the samples can read and write the samples where they lie
instead: sample i's columns are the i-th block of L columns of the side-by-side matrix (its
leading dim n L, batch stride L). That saves a copy kernel, an allocation and their host
time a call, at whatever it costs cuBLAS to run n products of L columns instead of one of
n L.

Per zoo layer on small grids, float32 and bfloat16: GPU time (CUDA events, median of 30)
and host time (the GPU busy) of each form, forward and input gradient, and whether both give
the same result.

    PYTHONPATH=. python benches/batched_probe.py          # the layers' products alone
    PYTHONPATH=. python benches/batched_probe.py models   # zoo models, in the library

``models``: after ops took batched products (ops._samples_batched), zoo models swapped
blindly, planar, forward and training step, with them on and off in turns in one process
(per call back to back, the fastest of three turns; kernels' own time from the profiler).
"""
import statistics
import sys

import torch

sys.path.insert(0, "benches")
from sync_probe import host_time, sleep_cycles  # noqa: E402

from gemmconv import gemm, ops, zoo  # noqa: E402


def layers():
    """(model, input shape, weight shape) of every planar zoo ConvTranspose2d/1d/3d whose
    replay puts the samples side by side, at full size."""
    found = []
    for entry in zoo.ZOO:
        model = entry.build(False).to("meta")
        shapes = []
        hooks = [m.register_forward_hook(lambda m, i, o: shapes.append((tuple(i[0].shape), m)))
                 for m in model.modules() if isinstance(m, torch.nn.modules.conv._ConvTransposeNd)]
        model(torch.empty(entry.input_shape(False), device="meta"))
        for h in hooks:
            h.remove()
        for shape, m in shapes:
            cells = 1
            for s in shape[2:]:
                cells *= s
            if m.groups == 1 and ops._samples_inner(shape[0], cells) and shape[0] > 1:
                found.append((entry.name, shape, tuple(m.weight.shape)))
    return found


def gpu_us(fn, cycles: int, repeats=30):
    """Median GPU microseconds of a call, all queued behind a sleep kernel so that the events
    time the GPU's work alone (on an idle GPU they would take in the host's gaps)."""
    times = []
    torch.cuda.synchronize()
    torch.cuda._sleep(cycles)
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        times.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in times) * 1e3


def main():
    cycles = sleep_cycles()
    print("layer | dtype | pass | GPU us: copy / batched | host us: copy / batched | "
          "per call back to back, GPU idle at first: copy / batched | same")
    for name, shape, wshape in layers():
        n, cin, cells = shape[0], shape[1], 1
        for s in shape[2:]:
            cells *= s
        m = 1
        for s in wshape[1:]:
            m *= s
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(n, cin, cells, device="cuda", dtype=dtype)
            w = torch.randn(cin, m, device="cuda", dtype=dtype) / cin ** 0.5
            cols = torch.empty(m * n * cells, device="cuda", dtype=dtype)
            wt = w.t().view(1, 1, m, cin)

            def fwd_copy():
                b = x.view(n, 1, cin, cells).permute(1, 2, 0, 3).reshape(1, 1, cin, n * cells)
                return gemm.matmul(wt, b, cols.view(1, 1, m, n * cells))

            def fwd_batched():
                out = cols.as_strided((n, 1, m, cells), (cells, 0, n * cells, 1))
                return gemm.matmul(wt.expand(n, 1, m, cin), x.view(n, 1, cin, cells), out)

            g = torch.randn(m, n * cells, device="cuda", dtype=dtype)
            grad_in = torch.empty(n, cin, cells, device="cuda", dtype=dtype)

            def bwd_copy():
                side = gemm.matmul(w.view(1, 1, cin, m), g.view(1, 1, m, n * cells),
                                   g.new_empty((1, 1, cin, n * cells)))
                grad_in.copy_(side.view(cin, n, cells).permute(1, 0, 2))

            def bwd_batched():
                gemm.matmul(w.view(1, 1, cin, m).expand(n, 1, cin, m),
                            g.as_strided((n, 1, m, cells), (cells, 0, n * cells, 1)),
                            grad_in.view(n, 1, cin, cells))

            for label, forms, result in (
                    ("forward", (fwd_copy, fwd_batched), lambda: cols.clone()),
                    ("input grad", (bwd_copy, bwd_batched), lambda: grad_in.clone())):
                outs = []
                for form in forms:
                    form()
                    outs.append(result())
                same = (outs[0].float() - outs[1].float()).abs().max().item()
                gpu = [gpu_us(f, cycles) for f in forms]
                wall = [gpu_us(f, 0) for f in forms]
                host = [min(host_time(f, 10, cycles) for _ in range(3)) * 1e6 for f in forms]
                print(f"{name} {shape} -> {wshape[1]} | {str(dtype)[6:]} | {label} | "
                      f"{gpu[0]:.0f} / {gpu[1]:.0f} | {host[0]:.0f} / {host[1]:.0f} | "
                      f"{wall[0]:.0f} / {wall[1]:.0f} | "
                      f"{same:.1e}", flush=True)


def models(names=("dcgan", "vae-decoder", "unet2d", "hifigan")):
    from lt_probe import in_turns
    least = ops.BATCHED_MIN_POSITIONS

    def use(batched: bool):
        ops.BATCHED_MIN_POSITIONS = least if batched else 1 << 40
        for cache in (gemm._products, ops._replays, ops._backward_replays):
            cache.clear()
        ops._forward_plan.cache_clear()

    in_turns(use, names, ((torch.float32, False), (torch.bfloat16, False)), ("eval", "train"),
             ("batched", "copies"))


if __name__ == "__main__":
    models() if sys.argv[1:] == ["models"] else main()
