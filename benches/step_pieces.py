"""Where a fused training step's host time goes (session 31: run A read 0.7-1.1 ms of host
time for 2d-3x7-512's forward with autograd recording, and 1.5-1.9 ms for its backward,
against torch's 0.14-0.15 and 0.48-0.88). Host microseconds with the GPU kept busy
(benches/overhead.busy_host_us) of the forward without and with autograd, of
fused.forward and fused.backward called directly, of the backward's pieces, and cProfile
of the forward with autograd and of the backward (by own time; cProfile inflates small
calls, so read the shares).

    PYTHONPATH=. python benches/step_pieces.py CASE [DTYPE]
"""
import pstats
import sys

import torch

from gemmconv import bench, cases, fused
from gemmconv.shapes import conv_transpose_args

sys.path.insert(0, "benches")
from overhead import busy_host_us, profiled  # noqa: E402

SLEEP = 50_000_000


def main() -> int:
    case = next(c for c in cases.BENCH if c.name == sys.argv[1])
    dtype = getattr(torch, sys.argv[2]) if len(sys.argv) > 2 else torch.float32
    work = bench.Workload(case, dtype, torch.device("cuda"), True)
    x, w, b = work.x, work.w, work.b
    grad = work.grad_out.to(dtype)
    fn = bench.OURS[case.nd]
    forward = lambda: fn(x, w, b, **case.kwargs)
    out = forward()
    backward = lambda: torch.autograd.grad(out, work.leaves, grad, retain_graph=True)
    a = conv_transpose_args(f"conv_transpose{case.nd}d", case.nd, x, w, b, case.stride,
                            case.padding, case.output_padding, case.groups, case.dilation)
    xd, wd = x.detach(), w.detach()
    for _ in range(3):
        forward(), backward()
    torch.cuda.synchronize()

    def no_grad():
        with torch.no_grad():
            forward()

    pieces = {
        "forward no_grad": no_grad,
        "forward autograd": forward,
        "fused.forward": lambda: fused.forward(xd, wd, b.detach(), a, torch.empty_like(out)),
        "backward (autograd.grad)": backward,
        "fused.backward": lambda: fused.backward(grad, xd, wd, a, [True, True]),
        "fused.backward input only": lambda: fused.backward(grad, xd, wd, a, [True, False]),
        "fused.backward weight only": lambda: fused.backward(grad, xd, wd, a, [False, True]),
        "channels_innermost": lambda: fused.channels_innermost(grad, dtype == torch.float32),
        "tap_weights transposed": lambda: fused.tap_weights(wd, transpose=True),
        "grad.sum (bias)": lambda: grad.sum((0, 2, 3)),
    }
    print(torch.cuda.get_device_name(), case.name, dtype, "takes fused backward:",
          fused.backward_takes(a, xd, wd), flush=True)
    for label, piece in pieces.items():
        print(f"{label}: {busy_host_us(piece, SLEEP):.0f} us", flush=True)
    for label, piece in (("forward autograd", forward), ("backward", backward)):
        profiler = profiled(piece, 20, SLEEP * 4)
        print(f"--- {label}, 20 calls", flush=True)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(22)
    return 0


if __name__ == "__main__":
    sys.exit(main())
