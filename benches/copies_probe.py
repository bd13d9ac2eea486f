"""Do copies of one and the same model time alike? The zoo's rows "with a sample" that kept
no layer of ours time torch's model against a deep copy of itself, and read 0.92-0.97x on
DCGAN's channels_last steps (results/s38/J): a bias of the bench, not of gemmconv.

Times, with the bench's timer (measure.timers, back to back, in turns), torch's model
against three deep copies of it; then the same with gemmconv's converted copy among them,
as the bench times it; then the four copies again with Python's garbage collector off
during the timing. Each line gives each variant's time over the original's.

    PYTHONPATH=. python benches/copies_probe.py [model] [precision] [layout] [mode]
"""
import copy
import gc
import sys

import torch

from gemmconv import nn as gnn, zoo
from gemmconv.bench import model_setup, model_step
from gemmconv.measure import timers


def main() -> None:
    name, precision, layout, mode = (sys.argv[1:] + ["dcgan", "float32", "channels_last",
                                                     "train"][len(sys.argv) - 1:])[:4]
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    entry = zoo.by_name([name])[0]
    base, x, cast, grad_mode, fmt = model_setup(entry, device.type == "cpu", device, precision,
                                                layout, mode)
    with cast, grad_mode:
        shape = base(x).shape
    grad = torch.randn(shape, device=device)
    if fmt is not None and grad.dim() == x.dim():
        grad = grad.contiguous(memory_format=fmt)
    grad = grad if mode == "train" else None
    step = lambda m: model_step(m, x, cast, grad_mode, grad)
    copies = {"torch": base, **{f"copy{i}": copy.deepcopy(base) for i in (1, 2, 3)}}
    converted = gnn.convert(copy.deepcopy(base))
    print(torch.cuda.get_device_name() if device.type == "cuda" else "CPU (small)", name, precision, layout, mode, flush=True)

    def line(label: str, models: dict, collect: bool = True) -> None:
        gc.collect()
        if not collect:
            gc.disable()
        try:
            t = timers(device, {k: step(m) for k, m in models.items()}, 10, back_to_back=True)
        finally:
            gc.enable()
        print(f"{label:<28} torch {t['torch']:.3f} ms | " + " ".join(
            f"{k} {t['torch'] / v:.3f}x" for k, v in t.items() if k != "torch"), flush=True)

    for _ in range(3):
        line("four copies", copies)
    for _ in range(3):
        line("with ours second", {"torch": base, "ours": converted, "copy1": copies["copy1"],
                                  "copy2": copies["copy2"]})
    for _ in range(3):
        line("four copies, no gc", copies, collect=False)
    for _ in range(2):
        line("with ours second, no gc", {"torch": base, "ours": converted,
                                         "copy1": copies["copy1"], "copy2": copies["copy2"]},
             collect=False)


if __name__ == "__main__":
    main()
