"""Should float32 backwards of more dims take the fused kernels? (fused.FLOAT32_BACKWARD_DIMS)
Written in session 65 for 3-D, whose float32 backward had taken the column routes since
session 29 (results/s29/D) and won on the fused kernels rebuilt since (results/s65/F2:
channels_last 3d-64cube's training step 0.98x -> 2.05x torch). 1-D's has taken the column
routes since session 27 (results/s27/B), on the same grounds.

Per case (the 3-D stride-1 cases and the 1-D ones of the table by default), float32,
channels_last (2-D and 3-D) then planar: the training step (forward + backward) of torch
and of ours in turns (measure.speedups), first as the cost model sends it, then with
FLOAT32_BACKWARD_DIMS taking the case's dims (where the cost model and the rest of
backward_unavailable allow it), each with its error against float64 and "(fused)" where
the fused backward took it.

    PYTHONPATH=. python benches/f32_backward_probe.py [CASE ...]
    (SMOKE=1: on the CPU, the cases scaled down, to check the script itself.)
"""
import os
import sys

import torch

from gemmconv import cases, fused

sys.path.insert(0, "benches")
from step_variants import step_row  # noqa: E402

NAMES = sys.argv[1:] or ["3d-64cube", "3d-3x5x7", "3d-32to64", "3d-96cube", "1d-65536", "1d-dil3"]
smoke = os.environ.get("SMOKE") == "1"
device = torch.device("cpu" if smoke else "cuda")

for name in NAMES:
    case = next(c for c in cases.BENCH if c.name == name)
    case = case.scaled(512) if smoke else case
    dims = tuple(sorted(set(fused.FLOAT32_BACKWARD_DIMS) | {case.nd}))
    for interleaved in (True, False) if case.nd > 1 else (False,):
        print(step_row(case, torch.float32, device, interleaved, fused, "FLOAT32_BACKWARD_DIMS",
                       (("cost model", fused.FLOAT32_BACKWARD_DIMS), ("fused", dims)),
                       fused.backward_takes, "fused", smoke), flush=True)
