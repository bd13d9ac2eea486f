"""Where a converted layer's step spends the host's time when autograd runs its backward on
a device thread, as every training step does.

host_floor_probe.py (session 45, B, H100) read the VAE decoder's float32 channels_last
layers' steps at 344-597 us of host time against torch's 258-310, and DCGAN's channels_last
model step at 3.72 ms against 2.38 (ours' NCHW 2.15 against 1.90), while cProfile with the
device threads off saw no more Python in channels_last than planar. Here, per layer and
layout, torch's module, ours and a free layer (bench.free_layers), with autograd's device
threads on and off: the host's time a step (GPU kept busy), how long our backward's Python
took inside it (its wall time, on whichever thread), and how many of our calls were graph
launches.

    PYTHONPATH=. python benches/thread_probe.py
"""
import copy
import sys
import time

import torch

sys.path.insert(0, "benches")
from sync_probe import host_time, sleep_cycles  # noqa: E402

from gemmconv import bench, graphs, ops, zoo  # noqa: E402
from gemmconv import nn as gnn  # noqa: E402

LAYERS = {   # (module arguments, input shape)
    "dcgan-2": (dict(in_channels=256, out_channels=128, kernel_size=4, stride=2, padding=1,
                     bias=False), (128, 256, 8, 8)),
    "vae-3": (dict(in_channels=256, out_channels=128, kernel_size=3, stride=2, padding=1,
                   output_padding=1), (16, 256, 16, 16)),
}


class Clock:
    """Wall time spent inside ops._Eager.backward and CUDA graph replays, and their counts."""

    def __init__(self):
        self.backward_s, self.backwards, self.replays = 0.0, 0, 0
        self._backward, self._replay = ops._Eager.backward, torch.cuda.CUDAGraph.replay

    def __enter__(self):
        def backward(ctx, grad_output):
            t0 = time.perf_counter()
            try:
                return self._backward(ctx, grad_output)
            finally:
                self.backward_s += time.perf_counter() - t0
                self.backwards += 1

        def replay(graph):
            self.replays += 1
            return self._replay(graph)
        ops._Eager.backward = staticmethod(backward)
        torch.cuda.CUDAGraph.replay = replay
        return self

    def __exit__(self, *exc):
        ops._Eager.backward = staticmethod(self._backward)
        torch.cuda.CUDAGraph.replay = self._replay


def on_and_off(kind: str, step, cycles: int, repeats: int, scale: float, digits: int) -> list:
    """``kind``'s host time a ``step`` (seconds times ``scale``; the GPU kept busy), the best
    of five runs of ``repeats`` steps, with autograd's device threads on and off; for ours,
    also its backward's Python and graph launches a step."""
    row = []
    for threads in (True, False):
        with torch.autograd.set_multithreading_enabled(threads):
            for _ in range(5):
                step()
            with Clock() as clock:
                t = min(host_time(step, repeats, cycles) for _ in range(5)) * scale
        steps = 5 * repeats
        extra = (f" (backward {clock.backward_s / steps * scale:.{digits}f}, graphs "
                 f"{clock.replays / steps:.1f} a step)") if kind == "ours" else ""
        row.append(f"{kind} {'on' if threads else 'off'} {t:.{digits}f}{extra}")
    return row


def main():
    cycles = sleep_cycles() // 4
    for dtype in (torch.float32, torch.bfloat16):
        for name, (kwargs, shape) in LAYERS.items():
            for layout in ("NCHW", "channels_last"):
                torch.manual_seed(0)
                theirs = torch.nn.ConvTranspose2d(**kwargs).to("cuda", dtype)
                x = torch.randn(shape, device="cuda", dtype=dtype)
                if layout == "channels_last":
                    theirs = theirs.to(memory_format=torch.channels_last)
                    x = x.contiguous(memory_format=torch.channels_last)
                x.requires_grad_()
                grad = torch.randn_like(theirs(x))
                ours = gnn.convert(copy.deepcopy(theirs))
                free = bench.free_layers(copy.deepcopy(theirs), x)
                row = []
                for kind, m in (("torch", theirs), ("ours", ours), ("free", free)):
                    leaves = [x, *m.parameters()]

                    def step(m=m, leaves=leaves):
                        torch.autograd.grad(m(x), leaves, grad)
                    row += on_and_off(kind, step, cycles, 20, 1e6, 0)
                print(f"{name} {str(dtype)[6:]} {layout}, host us a step (device threads on / "
                      f"off): " + " | ".join(row), flush=True)
                print(f"  graphs kept {graphs.kept()}", flush=True)
    for precision, layout in (("float32", "NCHW"), ("float32", "channels_last"),
                              ("bf16-autocast", "channels_last")):
        entry = zoo.by_name(["dcgan"])[0]
        model, x, cast, grad_mode, _ = bench.model_setup(entry, False, torch.device("cuda"),
                                                         precision, layout, "train")
        with cast, grad_mode:
            grad = torch.randn_like(model(x))
            free = bench.free_layers(copy.deepcopy(model), x)
        row = []
        for kind, m in (("torch", model), ("ours", gnn.convert(copy.deepcopy(model))),
                        ("free", free)):
            row += on_and_off(kind, bench.model_step(m, x, cast, grad_mode, grad), cycles, 10,
                              1e3, 3)
        print(f"dcgan model {precision} {layout}, host ms a step (device threads on / off): "
              + " | ".join(row), flush=True)


if __name__ == "__main__":
    main()
