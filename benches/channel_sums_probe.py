"""A channels_last bias gradient's sum, formulation by formulation (session 50: the 2-D
U-Net's last up-convolution spends 0.142 ms of its 0.59 ms training step's kernels in
cl.channel_sums, a reduction of 134 MB at 0.94 TB/s).

For output gradients of the zoo's and the cases' channels_last layers, float32 and
bfloat16, the kernel time (CUDA events, median) of the sum over positions of the dense
``(P, C)`` view, by:
  sum        ``view(P, C).sum(0)`` (cl.channel_sums now);
  rows R     ``view(P / R, R C).sum(0).view(R, C).sum(0)`` (R rows side by side: more
             outputs for the first reduction);
  mv         ``torch.mv(view(P, C).t(), ones(P))`` (cuBLAS's matrix-vector product);
each with its bytes' rate, and its largest difference from float64's sum, relative to the
sum of magnitudes.

    PYTHONPATH=. python benches/channel_sums_probe.py
"""
import statistics

import torch

SHAPES = [(8, 64, 256, 256), (8, 512, 32, 32), (16, 32, 128, 128), (128, 64, 32, 32),
          (8, 64, 1026, 1026), (8, 32, 514, 1026)]


def timed(fn, repeats: int = 30) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    print(torch.cuda.get_device_name(), flush=True)
    for shape in SHAPES:
        for dtype in (torch.float32, torch.bfloat16):
            g = torch.randn(shape, device="cuda", dtype=dtype).contiguous(
                memory_format=torch.channels_last)
            c = shape[1]
            rows = g.permute(0, 2, 3, 1).reshape(-1, c)
            p = rows.shape[0]
            acc = torch.float32
            ones = torch.ones(p, device="cuda", dtype=dtype)
            ways = {"sum": lambda: rows.sum(0, dtype=acc)}
            for r in (8, 32, 128):
                if p % r == 0:
                    ways[f"rows {r}"] = lambda r=r: rows.view(p // r, r * c).sum(
                        0, dtype=acc).view(r, c).sum(0)
            ways["mv"] = lambda: torch.mv(rows.t(), ones)
            exact = rows.double().sum(0)
            scale = rows.double().abs().sum(0)
            line = []
            for name, fn in ways.items():
                ms = timed(fn)
                err = ((fn().double() - exact).abs() / scale).max().item()
                line.append(f"{name} {ms * 1e3:.0f} us ({g.nbytes / ms / 1e9:.2f} TB/s, err {err:.1e})")
            print(f"{tuple(shape)} {str(dtype)[6:]}: " + "; ".join(line), flush=True)


if __name__ == "__main__":
    main()
