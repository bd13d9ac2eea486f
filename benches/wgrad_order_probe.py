"""The weight gradient's boxes walked W first or H first (fused.BOXES_DOWN_H; the package's
walk since session 62, on this probe's figures: results/s62/O), on the stride-1 2-D cases
of the table.

Why (benches/NOTES.md, session 61): the weight gradient of 2d-1024 reads about 25.8 GB in
its kernel, with 8.7 GB more in its copies. That traffic, at each card's copy rate, gives
its time on the H200 and on the H100 within 4%. The groups of taps one row of the kernel
apart run side by side and read the same rows of the output gradient (or of the input,
where the input moves):
- walking W first, those reads are a row of boxes apart (2d-1024: 32 steps of every
  program in flight), more than L2 holds;
- walking H first, they are one step apart.
Prediction: 2d-1024's float32 weight gradient from 7.9 ms toward 5 on the H200 (its
copies' reads from memory down to a third), less on the cases with fewer rows of taps or
less time in memory (2d-3x7-padded ran as fast on the H100 as on the H200).

Per case: the weight gradient alone in ms (copies inside; CUDA events; each order twice,
alternating), float32 NCHW and channels_last and bfloat16 channels-innermost, its error
against cuDNN in full float32 (float32) or float64 (bfloat16). Then the training step, torch
against ours, each order (measure.speedups): float32 in both formats, bfloat16 NCHW.
Every case's backward is sent to the fused kernels.

    PYTHONPATH=. python benches/wgrad_order_probe.py [CASE ...]
    (SMOKE=1: on the CPU, the cases scaled down to SMOKE_ELEMENTS (4096); the bfloat16
    figures mean nothing there: Triton's interpreter multiplies bfloat16 bit patterns in
    tl.dot, triton-lang/triton#11584.)
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
takes, default = fused.backward_takes, fused.BOXES_DOWN_H
ORDERS = {"W first": False, "H first": True}


def order(down_h: bool) -> None:
    fused.BOXES_DOWN_H = down_h
    fused.forget_plans()
    ops._backward_replays.clear()


def weight_gradient_row(name, label, fn, exact):
    """``fn`` in each order, the orders alternating twice (switching one forgets the plans,
    so the two cannot share a timer's turns)."""
    ms, errs = {key: [] for key in ORDERS}, {}
    for _ in range(2):
        for key, down_h in ORDERS.items():
            order(down_h)
            errs[key] = error(fn(), exact)
            ms[key].append(timers(device, {key: fn}, 3 if smoke else 15)[key])
    ratio = min(ms["H first"]) / min(ms["W first"])
    print(f"{name:14s} {label:16s} weight gradient ms: " + ", ".join(
        f"{k} {t[0]:.3f} {t[1]:.3f} (err {errs[k]:.1e})" for k, t in ms.items())
        + f"; H first / W first {ratio:.3f}", flush=True)


try:
    fused.backward_takes = backward_as_planar(takes)
    for name in NAMES:
        case, x, w, g, gy, a = weight_gradient_problem(name, device, smoke)
        mi = fused.moves_input(a, 4)
        wr = w.detach().requires_grad_()
        for label, fmt in (("float32 NCHW", torch.contiguous_format),
                           ("float32 CL", torch.channels_last)):
            xs, gys = (t.contiguous(memory_format=fmt) for t in (x, gy))
            with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
                out = torch.nn.functional.conv_transpose2d(xs, wr, **case.kwargs)
                exact = torch.autograd.grad(out, wr, gys)[0]
            weight_gradient_row(name, label, lambda: fused.weight_gradient(
                xs, gys, g, shifted=True, moved_input=mi), exact)
        xb, gb = x.bfloat16(), gy.bfloat16()
        out = torch.nn.functional.conv_transpose2d(xb.double(), wr.double(), **case.kwargs)
        exact = torch.autograd.grad(out, wr, gb.double())[0]
        rows = gb.movedim(1, -1).contiguous()
        weight_gradient_row(name, "bfloat16 rows", lambda: fused.weight_gradient(
            xb, rows, g, dtype=torch.float32), exact)
        for dtype, interleaved in ((torch.float32, False), (torch.float32, True),
                                   (torch.bfloat16, False)):
            work = Workload(case, dtype, device, backward=True, interleaved=interleaved)
            row = []
            for key, down_h in ORDERS.items():
                order(down_h)
                theirs, ours, speedup, err = step_against_torch(work, device, 3 if smoke else 15)
                row.append(f"{key} {ours:7.3f} ms {speedup:5.2f}x (err {err:.1e})")
            label = f"{str(dtype)[6:]} {'CL' if interleaved else 'NCHW'}"
            print(f"{name:14s} {label:16s} step: torch {theirs:7.3f} ms; " + "; ".join(row),
                  flush=True)
finally:
    fused.backward_takes = takes
    order(default)
