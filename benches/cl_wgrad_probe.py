"""The float32 weight gradient of a channels_last stride-1 call (session 58's lever): on the
H200 it read the output gradient's rows as they lie and took 10.89 ms of 2d-1024's
17.9-ms training step, where the planar form (moved copies 2.46 + kernel 5.79) and
cuDNN's (5.86) take about half. The other form: the output gradient's copies moved along
W, made from its rows (`fused.shifted_copies` on a channels_last tensor), the input's
rows as the tensor cores' A operand through registers (`weight_gradient(shifted=True)` on
a channels_last input).

Per case (the stride-1 2-D cases of the table, float32, TF32), weight gradient alone in
ms (the copies inside; CUDA events in turns): cuDNN's on channels_last tensors, the rows
form, the moved form, the planar form on planar twins; each form's error against cuDNN
in full float32. Then the channels_last training step, torch against ours with the rows
form (as fused.backward sends it) and with the moved form, in turns (measure.speedups);
with every case's backward asked as for the fused kernels (fused.backward_takes as for a
planar call, so 2d-64to128's 128 channels too).

    PYTHONPATH=. python benches/cl_wgrad_probe.py [CASE ...]
    (SMOKE=1: on the CPU, the cases scaled down, to check the script itself.)
"""
import os
import sys

import torch

from gemmconv import cases, fused, ops
from gemmconv.bench import Workload
from gemmconv.measure import samples, speedups, timers
from gemmconv.shapes import Geometry

NAMES = sys.argv[1:] or ["2d-1024", "2d-3x7-512", "2d-64to128", "2d-512x1024", "2d-3x7-padded"]
smoke = os.environ.get("SMOKE") == "1"
device = torch.device("cpu" if smoke else "cuda")
rows_form, takes = fused.weight_gradient, fused.backward_takes


def moved_form(x, grad, g, precision="tf32", cfg=None, rounded=False, shifted=False,
               dtype=None, planes=False, moved_input=False):
    """fused.weight_gradient, a channels_last float32 input's call (``grad`` its output
    gradient's rows ``(N, *image, C)``) sent to the moved copies."""
    if x.dtype == torch.float32 and fused._channels_last_rows(x) is not None and not planes:
        return rows_form(x, grad.movedim(-1, 1), g, precision, shifted=True, dtype=dtype)
    return rows_form(x, grad, g, precision, cfg, rounded, shifted, dtype, planes, moved_input)


def as_planar(a, x, weight, interleaved=False, limit=None):
    return takes(a, x, weight, False, limit)


def error(got, exact):
    return ((got.double() - exact.double()).norm() / exact.double().norm()).item()


for name in NAMES:
    case = next(c for c in cases.BENCH if c.name == name)
    case = case.scaled(4096) if smoke else case
    x, w, _ = case.tensors(torch.float32, device)
    g = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
    y = torch.nn.functional.conv_transpose2d(x, w, **case.kwargs)
    gy = torch.randn_like(y)
    xc, gyc = (t.contiguous(memory_format=torch.channels_last) for t in (x, gy))
    rows = gyc.movedim(1, -1)
    wr = w.detach().requires_grad_()

    def cudnn():
        out = torch.nn.functional.conv_transpose2d(xc, wr, **case.kwargs)
        return torch.autograd.grad(out, wr, gyc)[0]
    fns = {"cudnn": cudnn,
           "rows": lambda: rows_form(xc, rows, g, shifted=False),
           "moved": lambda: rows_form(xc, gyc, g, shifted=True),
           "planar": lambda: rows_form(x, gy, g, shifted=True)}
    ms = timers(device, fns, 3 if smoke else 15)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        exact = cudnn()
    errs = {k: error(fns[k](), exact) for k in ("rows", "moved", "planar")}
    print(f"{name:14s} weight gradient ms: " + ", ".join(
        f"{k} {ms[k]:.3f}" + (f" (err {errs[k]:.1e})" if k in errs else "") for k in fns),
        flush=True)

    work = Workload(case, torch.float32, device, backward=True, interleaved=True)
    row = []
    fused.backward_takes = as_planar
    try:
        for form in ("rows", "moved"):
            fused.weight_gradient = moved_form if form == "moved" else rows_form
            ops._backward_replays.clear()
            steps = {"torch": work.runner("torch"), "ours": work.runner("gemmconv")}
            err = work.error(steps["ours"]())
            taken = samples(device, steps, 3 if smoke else 15)
            med = {k: sorted(t for key, t in taken if key == k)[len(taken) // 4] for k in steps}
            row.append(f"{form}: ours {med['ours']:7.3f} ms {speedups(taken, 'torch')['ours']:5.2f}x"
                       f" (err {err:.1e})")
    finally:
        fused.weight_gradient, fused.backward_takes = rows_form, takes
    print(f"{name:14s} channels_last step: torch {med['torch']:7.3f} ms; " + "; ".join(row),
          flush=True)
