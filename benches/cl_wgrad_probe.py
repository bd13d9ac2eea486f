"""The float32 weight gradient of a channels_last stride-1 call: on the H200 it read the
output gradient's rows as they lie ("rows") and took 10.89 ms of 2d-1024's 17.9-ms
training step, where the planar form (moved copies 2.46 + kernel 5.79) and cuDNN's
(5.86) take about half. The other form (fused.float32_weight_form's "planar"): the
moved copies of one operand made from its rows, and one planar copy of the other
(fused._planar). Session 58's third form, the input's rows turned on chip into the
tensor cores' A operand, lost to it on every case (results/s59/B) and is gone.

Session 62 (run-s63.sh S): the boxes now walk down H (fused.BOXES_DOWN_H), which cut the
planar form's kernel by a third on 2d-1024 (reads of rows one kernel row apart from L2);
the rows form reads the output gradient at the taps' offsets too, so CHANNELS_LAST_PLANAR_
PRODUCTS may move. Its third form then, "shared rows" (the planar form with the operand
the taps share read as its rows, its box turned in shared memory: fused.SHARED_ROWS),
lost to planar on all five cases, alone by 3-20% and in the step by 0.04-0.10x (H100,
results/s63/S), and is gone (commit 689d30b has it).

Per case (the stride-1 2-D cases of the table, float32, TF32), weight gradient alone in
ms (the copies inside; CUDA events in turns): cuDNN's forward + weight gradient on
channels_last tensors, each form, and the planar form on planar twins; each form's error
against cuDNN in full float32. Then the channels_last training step, torch against ours
with each form (fused.float32_weight_form patched), in turns (measure.speedups); with
every case's backward asked as for the fused kernels (fused.backward_takes as for a
planar call, so 2d-64to128's 128 channels too).

    PYTHONPATH=. python benches/cl_wgrad_probe.py [CASE ...]
    (SMOKE=1: on the CPU, the cases scaled down to SMOKE_ELEMENTS (4096), to check the
    script itself.)
"""
import os
import sys

import torch

from gemmconv import fused, ops
from gemmconv.bench import Workload
from gemmconv.measure import timers

sys.path.insert(0, "benches")
from probe_lib import (STRIDE_ONE_2D, backward_as_planar, relative_error as error,  # noqa: E402
                       step_against_torch, weight_gradient_problem)

NAMES = sys.argv[1:] or STRIDE_ONE_2D
smoke = os.environ.get("SMOKE") == "1"
device = torch.device("cpu" if smoke else "cuda")
takes, rule = fused.backward_takes, fused.float32_weight_form
as_planar = backward_as_planar(takes)


for name in NAMES:
    case, x, w, g, gy, a = weight_gradient_problem(name, device, smoke)
    xc, gyc = (t.contiguous(memory_format=torch.channels_last) for t in (x, gy))
    rows = gyc.movedim(1, -1)
    wr = w.detach().requires_grad_()

    def cudnn():
        out = torch.nn.functional.conv_transpose2d(xc, wr, **case.kwargs)
        return torch.autograd.grad(out, wr, gyc)[0]
    mi = fused.moves_input(a, 4)
    wg = fused.weight_gradient
    fns = {"cudnn fwd+wgrad": cudnn,
           "rows": lambda: wg(xc, rows, g, shifted=False),
           "copied": lambda: wg(xc, gyc, g, shifted=True, moved_input=mi),
           "planar": lambda: wg(x, gy, g, shifted=True, moved_input=mi)}
    ms = timers(device, fns, 3 if smoke else 15)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        exact = cudnn()
    errs = {k: error(fns[k](), exact) for k in ("rows", "copied", "planar")}
    print(f"{name:14s} (input moved: {mi}; the rule's form: {rule(a, True)}) weight gradient ms: " + ", ".join(
        f"{k} {ms[k]:.3f}" + (f" (err {errs[k]:.1e})" if k in errs else "") for k in fns),
        flush=True)

    work = Workload(case, torch.float32, device, backward=True, interleaved=True)
    row = []
    fused.backward_takes = as_planar
    try:
        for form in ("rows", "planar"):
            fused.float32_weight_form = lambda a, interleaved, form=form: \
                form if interleaved else "planar"
            ops._backward_replays.clear()
            theirs, ours, speedup, err = step_against_torch(work, device, 3 if smoke else 15)
            row.append(f"{form}: ours {ours:7.3f} ms {speedup:5.2f}x (err {err:.1e})")
    finally:
        fused.float32_weight_form, fused.backward_takes = rule, takes
    print(f"{name:14s} channels_last step: torch {theirs:7.3f} ms; " + "; ".join(row),
          flush=True)
