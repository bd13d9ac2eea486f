"""Do copies of one and the same model time alike? The zoo's rows "with a sample" that kept
no layer of ours time torch's model against a deep copy of itself, and read 0.92-0.97x on
DCGAN's channels_last steps (results/s38/J): a bias of the bench, not of gemmconv.

Times, with the bench's timer (measure.timers, back to back, in turns), torch's model
against three deep copies of it, three times, then with gemmconv's converted copy among
them as the bench times it: under session 38's timer (samples of at least 2 ms, rounds in
rotation) and under session 39's (10 ms, measure.sample_order). Each line gives each
variant's time over the original's. (Session 39's B found Python's garbage collector off
during the timing no cure at 2 ms.)

    PYTHONPATH=. python benches/copies_probe.py [model] [precision] [layout] [mode]
"""
import copy
import sys

import torch

from gemmconv import nn as gnn
from gemmconv import measure
from gemmconv.measure import timers

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from probe_lib import zoo_config  # noqa: E402


def main() -> None:
    name, precision, layout, mode = (sys.argv[1:] + ["dcgan", "float32", "channels_last",
                                                     "train"][len(sys.argv) - 1:])[:4]
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    base, step = zoo_config(f"{name}:{precision}:{layout}:{mode}", device)
    copies = {"torch": base, **{f"copy{i}": copy.deepcopy(base) for i in (1, 2, 3)}}
    converted = gnn.convert(copy.deepcopy(base))
    print(torch.cuda.get_device_name() if device.type == "cuda" else "CPU (small)", name, precision, layout, mode, flush=True)

    def line(label: str, models: dict) -> float:
        t = timers(device, {k: step(m) for k, m in models.items()}, 10, back_to_back=True)
        ratios = {k: t["torch"] / v for k, v in t.items() if k != "torch"}
        print(f"{label:<34} torch {t['torch']:.3f} ms | " + " ".join(
            f"{k} {r:.3f}x" for k, r in ratios.items()), flush=True)
        return max(abs(r - 1) for k, r in ratios.items() if k.startswith("copy"))

    rotation = lambda count, repeats: [(r + i) % count for r in range(repeats)
                                       for i in range(count)]
    euler = measure.sample_order
    # (MIN_SAMPLE_MS, the samples' order): session 38's bench, then session 39's.
    for sample_ms, order, name in [(2.0, rotation, "rotation"), (10.0, euler, "Euler order")]:
        measure.MIN_SAMPLE_MS, measure.sample_order = sample_ms, order
        label = f"{sample_ms:g} ms, {name}"
        worst = max(line(f"four copies, {label}", copies) for _ in range(3))
        for _ in range(2):
            line(f"ours second, {label}", {"torch": base, "ours": converted,
                                           "copy1": copies["copy1"], "copy2": copies["copy2"]})
        print(f"  largest copy's deviation, {label}: {worst:.1%}", flush=True)

if __name__ == "__main__":
    main()
