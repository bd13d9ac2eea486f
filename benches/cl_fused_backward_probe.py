"""Whether the fused backward should take more channels_last calls. Written in session 57,
when 156 sent only 2-D 16-bit channels_last stride-1 calls there; its run in session 58
(results/s58/B) set 157's rule: 16-bit 3-D calls too, and float32 2-D ones of at most 64
output channels (whose weight gradient reads the output gradient's rows, not its copies
moved along W). Rerun it after a change to either kernel.

Per case and dtype, the channels_last training step (forward + backward) of torch and of
ours in turns (measure.speedups), first as the cost model sends it, then with
fused.backward_takes asked as for a planar call (so the fused backward takes every
channels_last call its planar twin would), each phase's backward replays planned afresh;
with each variant's error against float64.

    PYTHONPATH=. python benches/cl_fused_backward_probe.py [CASE ...]
    (SMOKE=1: on the CPU, the cases scaled down, to check the script itself.)
"""
import os
import sys

import torch

from gemmconv import cases, fused, ops
from gemmconv.bench import Workload
from gemmconv.measure import samples, speedups

NAMES = sys.argv[1:] or ["2d-1024", "2d-3x7-512", "2d-64to128", "2d-512x1024", "2d-3x7-padded",
                         "3d-3x5x7", "3d-64cube", "3d-32to64", "3d-96cube"]
smoke = os.environ.get("SMOKE") == "1"
device = torch.device("cpu" if smoke else "cuda")
takes = fused.backward_takes


def as_planar(a, x, weight, interleaved=False, limit=None):
    return takes(a, x, weight, False, limit)


for name in NAMES:
    case = next(c for c in cases.BENCH if c.name == name)
    case = case.scaled(4096) if smoke else case
    for dtype in (torch.float32, torch.bfloat16):
        work = Workload(case, dtype, device, backward=True, interleaved=True)
        row = []
        for variant in ("cost model", "fused"):
            fused.backward_takes = as_planar if variant == "fused" else takes
            ops._backward_replays.clear()
            fns = {"torch": work.runner("torch"), "ours": work.runner("gemmconv")}
            error = work.error(fns["ours"]())
            taken = samples(device, fns, 15)
            ms = {k: sorted(t for key, t in taken if key == k)[len(taken) // 4] for k in fns}
            row.append(f"{variant}: ours {ms['ours']:7.3f} ms {speedups(taken, 'torch')['ours']:5.2f}x"
                       f" (err {error:.1e})")
        fused.backward_takes = takes
        print(f"{name:14s} {str(dtype):15s} torch {ms['torch']:7.3f} ms; " + "; ".join(row),
              flush=True)
