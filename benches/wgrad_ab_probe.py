"""The weight gradient with one of fused's switches off and on (BOXES_DOWN_H),
on the stride-1 2-D cases of the table.

- BOXES_DOWN_H (session 61's lead; on since session 62 on its figures, results/s62/O, then
  run as wgrad_order_probe.py): a split's boxes walked H first rather than W first, so the
  groups of taps one row of the kernel apart read the same rows one step apart, from L2.
- SHARED_ROWS (session 62; lost in every case in session 63, results/s63/S, and gone).

Per case: the weight gradient alone in ms (copies inside; CUDA events; each setting twice,
alternating), float32 NCHW and channels_last and bfloat16 channels-innermost, its error
against cuDNN in full float32 (float32) or float64 (bfloat16). Then the training step, torch
against ours, each setting (measure.speedups): float32 in both formats, bfloat16 NCHW.
Every case's backward is sent to the fused kernels.

    PYTHONPATH=. python benches/wgrad_ab_probe.py SWITCH [CASE ...]
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

SWITCH = sys.argv[1]
if not isinstance(getattr(fused, SWITCH, None), bool):
    sys.exit(f"fused.{SWITCH} is no switch of fused (BOXES_DOWN_H)")
NAMES = sys.argv[2:] or STRIDE_ONE_2D
smoke = os.environ.get("SMOKE") == "1"
device = torch.device("cpu" if smoke else "cuda")
takes, default = fused.backward_takes, getattr(fused, SWITCH)
SETTINGS = {"off": False, "on": True}


def setting(on: bool) -> None:
    setattr(fused, SWITCH, on)
    fused.forget_plans()
    ops._backward_replays.clear()


def weight_gradient_row(name, label, fn, exact):
    """``fn`` in each setting, the two alternating twice (switching forgets the plans, so
    the two cannot share a timer's turns)."""
    ms, errs = {key: [] for key in SETTINGS}, {}
    for _ in range(2):
        for key, on in SETTINGS.items():
            setting(on)
            errs[key] = error(fn(), exact)
            ms[key].append(timers(device, {key: fn}, 3 if smoke else 15)[key])
    ratio = min(ms["on"]) / min(ms["off"])
    print(f"{name:14s} {label:16s} weight gradient ms: " + ", ".join(
        f"{SWITCH} {k} {t[0]:.3f} {t[1]:.3f} (err {errs[k]:.1e})" for k, t in ms.items())
        + f"; on / off {ratio:.3f}", flush=True)


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
            for key, on in SETTINGS.items():
                setting(on)
                theirs, ours, speedup, err = step_against_torch(work, device, 3 if smoke else 15)
                row.append(f"{SWITCH} {key} {ours:7.3f} ms {speedup:5.2f}x (err {err:.1e})")
            label = f"{str(dtype)[6:]} {'CL' if interleaved else 'NCHW'}"
            print(f"{name:14s} {label:16s} step: torch {theirs:7.3f} ms; " + "; ".join(row),
                  flush=True)
finally:
    fused.backward_takes = takes
    setting(default)
