"""What a fused call costs beyond its kernel, on the stride-1 2-D cases. Run A (session 30)
had the channels_last forward's kernel at 0.79-2.49 ms in do_bench against the library's
call at 1.17-3.05 ms in the bench's timer (a call from an idle GPU): 0.24-0.56 ms more.
Per case and layout:
- kernel: fused.implicit_gemm alone, input and weights ready, in do_bench and in the
  bench's timer (so the timer's own share shows);
- call: the library's call in the bench's timer, and back to back;
- host: host time of the call and of its parts (the weights' reorder, the launch) while
  the GPU is busy with a sleep queued first, so nothing waits for it.

    PYTHONPATH=. python benches/fused_call_probe.py [CASES]
"""
import sys

import torch
import triton.testing

from gemmconv import cases, conv_transpose2d, fused
from gemmconv.measure import timer, timers
from gemmconv.shapes import Geometry

sys.path.insert(0, "benches")
from overhead import busy_host_us  # noqa: E402

NAMES = ["2d-1024", "2d-3x7-512", "2d-64to128", "2d-512x1024", "2d-3x7-padded"]
SLEEP = 20_000_000   # cycles of the sleep queued ahead: longer than any of these calls


def host_us(fn) -> float:
    return busy_host_us(fn, SLEEP)


def main():
    device = torch.device("cuda")
    print(torch.cuda.get_device_name(), flush=True)
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else NAMES
    for case in (c for c in cases.BENCH if c.name in names):
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
            fresh = lambda: fused.implicit_gemm(rows, tw, b, taps, torch.empty_like(out).movedim(1, -1),
                                                round_input=layout == "channels_last")
            cells = [
                f"kernel do_bench {triton.testing.do_bench(kernel, warmup=5, rep=40, return_mode='median'):.3f}",
                f"kernel timer {timer(device, kernel, 10):.3f}",
                f"kernel timer, new output {timer(device, fresh, 10):.3f}",
                f"call timer {timer(device, call, 10):.3f}",
                f"call back-to-back {timers(device, {0: call}, 10, back_to_back=True)[0]:.3f}",
                f"host us: call {host_us(call):.0f}, "
                f"tap_weights {host_us(lambda: fused.tap_weights(w)):.0f}, launch {host_us(kernel):.0f}",
            ]
            if layout == "planar":
                cells.append(f"copy us {host_us(lambda: fused.channels_innermost(x, True)):.0f}")
            print(f"{case.name} {layout} | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    sys.exit(main())
