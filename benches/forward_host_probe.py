"""Why our channels_last forward of a small layer costs the host more than our planar one.
Session 48's H (backward_host_probe.py, H100, GPU busy): DCGAN's k4 s2 layer (128, 256, 8,
8) forward with grad on took 84 us channels_last against 59 planar; torch's 31 and 67. Per
layout: host us of the module's forward with grad off and on (GPU busy), cProfile of 400
forwards with grad on by own time, and the pieces of our call path timed alone (us a call,
best of five runs of 2000 calls).

    PYTHONPATH=. python benches/forward_host_probe.py
"""
import sys
import time

import torch

from gemmconv import channels_last as cl
from gemmconv import ops
from gemmconv.shapes import conv_transpose_args

sys.path.insert(0, "benches")
from probe_lib import busy_us, layer_pair, profiled  # noqa: E402
from sync_probe import sleep_cycles  # noqa: E402


def us(fn, n: int = 2000) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def main() -> None:
    print(torch.cuda.get_device_name(), flush=True)
    cycles = sleep_cycles()
    for layout in ("planar", "channels_last"):
        theirs, ours, x = layer_pair("dcgan", layout)
        row = []
        for label, m in (("torch", theirs), ("ours", ours)):
            for _ in range(5):
                m(x)
            with torch.no_grad():
                off = busy_us(lambda _: m(x), cycles)
            row.append(f"{label} {off:.0f} / {busy_us(lambda _: m(x), cycles):.0f}")
        print(f"== dcgan {layout}: forward host us, grad off / on: " + " | ".join(row), flush=True)
        w = ours.weight
        a = conv_transpose_args("conv_transpose2d", 2, x, w, None, ours.stride, ours.padding,
                                ours.output_padding, ours.groups, ours.dilation)
        inter = layout == "channels_last"
        pieces = {
            "x.new_empty(out)": lambda: x.new_empty(a.output_shape),
            "cl.empty(x, out, interleaved)": lambda: cl.empty(x, a.output_shape, inter),
            "cl.suggested(x, w)": lambda: cl.suggested(x, w),
            "_replay_key(a, ., x, w, None)": lambda: ops._replay_key(a, inter, x, w, None),
            "conv_transpose_args": lambda: conv_transpose_args(
                "conv_transpose2d", 2, x, w, None, ours.stride, ours.padding,
                ours.output_padding, ours.groups, ours.dilation),
            "ops._autocast(x, w, None)": lambda: ops._autocast(x, w, None),
            "x.stride(), w.stride()": lambda: (x.stride(), w.stride()),
        }
        print("  pieces, us a call: " + ", ".join(f"{k} {us(f):.2f}" for k, f in pieces.items()),
              flush=True)

        def forwards():
            for _ in range(400):
                ours(x)
        profiled(forwards, 400, cycles, "our forward (grad on)", top=22)

if __name__ == "__main__":
    main()
