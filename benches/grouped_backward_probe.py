"""Should grouped calls' backward take the depthwise backward kernel? Since session 65 it
computes grouped calls too (each input channel from its group's output-gradient channels;
matched float64 through the interpreter), but they stay on the column routes
(depthwise.BACKWARD_MAX_INPUTS = 1): timed in session 66, the kernel's steps ran 2.2-7.5x
theirs (H100, results/s66/B). In session 65's G (H100) the grouped cases' channels_last
training steps read 0.57-0.95 of their NCHW speedups.

Per grouped case of the table, float32 and bfloat16, channels_last then planar: the
training step (forward + backward) of torch and of ours in turns (measure.speedups), first
as the cost model sends it, then with BACKWARD_MAX_INPUTS = GROUPED_MAX_INPUTS, each with
its error against float64 and "(kernel)" where the backward kernel took it (channels_last
calls of more (m, k) pairs an input channel than MAX_PAIRS keep the column routes).

    PYTHONPATH=. python benches/grouped_backward_probe.py [CASE ...]
    (SMOKE=1: on the CPU, the cases scaled down, to check the script itself.)
"""
import os
import sys

import torch

from gemmconv import cases, depthwise

sys.path.insert(0, "benches")
from step_variants import step_row  # noqa: E402

smoke = os.environ.get("SMOKE") == "1"
device = torch.device("cpu" if smoke else "cuda")
chosen = [c for c in cases.BENCH if c.groups > 1 and c.in_channels // c.groups > 1
          and (len(sys.argv) < 2 or c.name in sys.argv[1:])]

for case in chosen:
    case = case.scaled(512) if smoke else case
    for dtype in (torch.float32, torch.bfloat16):
        for interleaved in (True, False):
            print(step_row(case, dtype, device, interleaved, depthwise, "BACKWARD_MAX_INPUTS",
                           (("cost model", depthwise.BACKWARD_MAX_INPUTS),
                            ("kernel", depthwise.GROUPED_MAX_INPUTS)),
                           depthwise.backward_takes, "kernel", smoke), flush=True)
