"""What a fused call costs beyond its kernel, on the stride-1 2-D cases. Run A (session 30)
had the channels_last forward's kernel at 0.79-2.49 ms in do_bench against the library's
call at 1.17-3.05 ms in the bench's timer (a call from an idle GPU): 0.24-0.56 ms more.
Per case and layout:
- kernel: fused.implicit_gemm alone, input and weights ready, in do_bench and in the
  bench's timer (so the timer's own share shows);
- call: the library's call in the bench's timer, and back to back;
- host: host time of the call and of its parts (the weights' reorder, the launch) while
  the GPU is busy with a sleep queued first, so nothing waits for it.

    PYTHONPATH=. python benches/fused_call_probe.py
"""
import statistics
import sys
import time

import torch
import triton.testing

from gemmconv import cases, conv_transpose2d, fused
from gemmconv.measure import timer
from gemmconv.shapes import Geometry

NAMES = ["2d-1024", "2d-3x7-512", "2d-64to128", "2d-512x1024", "2d-3x7-padded"]


def host_us(fn, calls=20):
    """Median host microseconds of ``fn`` with a sleep queued ahead on the GPU."""
    samples = []
    for _ in range(calls):
        torch.cuda._sleep(20_000_000)   # tens of ms: the GPU stays busy through the call
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(samples)


def back_to_back_ms(fn, calls=20):
    fn()
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def main():
    device = torch.device("cuda")
    print(torch.cuda.get_device_name(), flush=True)
    for case in (c for c in cases.BENCH if c.name in NAMES):
        for layout in ("channels_last", "planar"):
            x, w, b = case.tensors(torch.float32, "cuda")
            if layout == "channels_last":
                x = x.to(memory_format=torch.channels_last)
            call = lambda: conv_transpose2d(x, w, b, **case.kwargs)
            out = call()
            taps = fused.transposed_taps(Geometry(case.kernel_size, case.stride, case.padding,
                                                  case.dilation))
            rows = x.movedim(1, -1) if layout == "channels_last" else fused.channels_innermost(x, True)
            tw = fused.tap_weights(w)
            kernel = lambda: fused.implicit_gemm(rows, tw, b, taps, out.movedim(1, -1),
                                                 round_input=layout == "channels_last")
            cells = [
                f"kernel do_bench {triton.testing.do_bench(kernel, warmup=5, rep=40, return_mode='median'):.3f}",
                f"kernel timer {timer(device, kernel, 10):.3f}",
                f"call timer {timer(device, call, 10):.3f}",
                f"call back-to-back {back_to_back_ms(call):.3f}",
                f"host us: call {host_us(call):.0f}, tap_weights {host_us(lambda: fused.tap_weights(w)):.0f}, "
                f"launch {host_us(kernel):.0f}",
            ]
            if layout == "planar":
                cells.append(f"copy us {host_us(lambda: fused.channels_innermost(x, True)):.0f}")
            print(f"{case.name} {layout} | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    sys.exit(main())
