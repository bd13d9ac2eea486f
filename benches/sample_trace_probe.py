"""How the timer's samples of one and the same model spread, sample by sample: torch's
zoo model against three deep copies of itself and gemmconv's converted copy, timed in
turns (measure.samples, 10 ms samples back to back, the Euler order) with many repeats.
Per variant: the ratio of medians (the bench's speedup, session 47) and the paired
speedup (measure.speedups: each sample against torch's samples either side of it), per
third of the run, so that both estimators' spread over one and the same model shows.
Writes every sample in order to ``$OUT/traces.json`` (or ./traces.json).

    PYTHONPATH=. python benches/sample_trace_probe.py [model:precision:layout:mode ...]
"""
import copy
import json
import os
import statistics
import sys

import torch

from gemmconv import measure
from gemmconv import nn as gnn

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from probe_lib import zoo_config  # noqa: E402

CONFIGS = ["dcgan:float32:channels_last:train", "dcgan:bf16-autocast:channels_last:train",
           "dcgan:bf16-autocast:NCHW:forward", "vae-decoder:float32:NCHW:train",
           "vae-decoder:float32:channels_last:forward"]


def main() -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    small = device.type == "cpu"
    repeats = 8 if small else 36
    print("CPU (small)" if small else torch.cuda.get_device_name(), flush=True)
    traces = {}
    for config in sys.argv[1:] or CONFIGS:
        base, step = zoo_config(config, device)
        models = {"torch": base, **{f"copy{i}": copy.deepcopy(base) for i in (1, 2, 3)},
                  "ours": gnn.convert(copy.deepcopy(base))}
        fns = {k: step(m) for k, m in models.items()}
        taken = measure.samples(device, fns, repeats, back_to_back=True)
        traces[config] = [[k, ms] for k, ms in taken]
        print(f"== {config}: {len(taken)} samples", flush=True)
        thirds = [taken[i * len(taken) // 3:(i + 1) * len(taken) // 3] for i in range(3)]
        parts = [("whole", taken)] + [(f"third {i + 1}", t) for i, t in enumerate(thirds)]
        for label, part in parts:
            medians = {k: statistics.median(ms for kk, ms in part if kk == k) for k in fns}
            paired = measure.speedups(part, "torch")
            print(f"  {label:<8} torch {medians['torch']:.3f} ms | medians: " + " ".join(
                f"{k} {medians['torch'] / medians[k]:.3f}x" for k in fns if k != "torch")
                + " | paired: " + " ".join(f"{k} {paired[k]:.3f}x" for k in fns if k != "torch"),
                flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), "traces.json"), "w") as f:
        json.dump(traces, f)


if __name__ == "__main__":
    main()
