"""The float32 weight gradient's moved form, three ways of feeding the tensor cores, on the
stride-1 2-D cases of the table. At 64 x 64 tiles each tap's product reads both of its
tiles from shared memory, as many bytes as the tensor cores take cycles (benches/NOTES.md,
session 59), and the kernel ran at about a quarter of the TF32 rate. The forms:

- "taps": as the package had it, up to four taps a program sharing one box, each tap's
  product of its moved tile (A, from shared memory) and the shared tile (B, likewise);
- "a-shared": the shared tile as A, through registers once a step for every tap, each
  tap's moved tile as B (fused.shared_as_a patched true);
- "columns": the taps of a column of the kernel side by side as one B operand, a box of
  rows of H of one moved copy (_triton.weight_gradient_columns), four rows a box (Triton's
  blocks are powers of two, so a 3-tap column reads and multiplies a fourth row it
  drops); "columns-2" the same two rows a box (a 3-tap column in two programs, the
  second's box half dropped).

Per case, the weight gradient alone in ms (the copies inside; CUDA events, in turns) on
planar and on channels_last tensors, with cuDNN's forward + weight gradient beside it, each
form's error against cuDNN in full float32; then the training step in both formats, torch
against ours in each form (measure.speedups), with every case's backward asked as for the
fused kernels.

    PYTHONPATH=. python benches/wgrad_forms_probe.py [CASE ...]
    (SMOKE=1: on the CPU, the cases scaled down to SMOKE_ELEMENTS (4096).)
"""
import os
import sys

import torch

from gemmconv import cases, fused, ops
from gemmconv.bench import Workload
from gemmconv.measure import samples, speedups, timers
from gemmconv.shapes import Geometry, conv_transpose_args

NAMES = sys.argv[1:] or ["2d-1024", "2d-3x7-512", "2d-64to128", "2d-512x1024", "2d-3x7-padded"]
smoke = os.environ.get("SMOKE") == "1"
device = torch.device("cpu" if smoke else "cuda")
takes, column, shared, config = (fused.backward_takes, fused.stacked_column, fused.shared_as_a,
                                 fused.grad_config)


def two_rows(*args, **kwargs):
    cfg = config(*args, **kwargs)
    return cfg._replace(taps=2) if cfg.column else cfg


FORMS = {"taps": (lambda g, c_in, moved_input: 0, shared, config),
         "a-shared": (lambda g, c_in, moved_input: 0, lambda moved_input, cfg: True, config),
         "columns": (column, shared, config),
         "columns-2": (column, shared, two_rows)}


def form(name: str) -> None:
    fused.stacked_column, fused.shared_as_a, fused.grad_config = FORMS[name]
    fused.forget_plans()
    ops._backward_replays.clear()


def as_planar(a, x, weight, interleaved=False, limit=None):
    return takes(a, x, weight, False, limit)


def error(got, exact):
    return ((got.double() - exact.double()).norm() / exact.double().norm()).item()


try:
    fused.backward_takes = as_planar
    for name in NAMES:
        case = next(c for c in cases.BENCH if c.name == name)
        case = case.scaled(int(os.environ.get("SMOKE_ELEMENTS", 4096))) if smoke else case
        x, w, _ = case.tensors(torch.float32, device)
        g = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
        y = torch.nn.functional.conv_transpose2d(x, w, **case.kwargs)
        gy = torch.randn_like(y)
        xc, gyc = (t.contiguous(memory_format=torch.channels_last) for t in (x, gy))
        wr = w.detach().requires_grad_()
        a = conv_transpose_args("conv_transpose2d", 2, x, w, None, case.stride, case.padding,
                                case.output_padding, case.groups, case.dilation)
        mi = fused.moves_input(a, 4)
        for layout, (xs, gys) in {"planar": (x, gy), "channels_last": (xc, gyc)}.items():
            def cudnn():
                out = torch.nn.functional.conv_transpose2d(xs, wr, **case.kwargs)
                return torch.autograd.grad(out, wr, gys)[0]
            with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
                exact = cudnn()
            ms, errs = {}, {}
            for f in FORMS:
                form(f)
                fn = lambda: fused.weight_gradient(xs, gys, g, shifted=True, moved_input=mi)
                errs[f] = error(fn(), exact)
                ms.update(timers(device, {"cudnn fwd+wgrad": cudnn, f: fn}, 3 if smoke else 15))
            print(f"{name:14s} {layout:13s} (input moved: {mi}) weight gradient ms: " + ", ".join(
                f"{k} {ms[k]:.3f}" + (f" (err {errs[k]:.1e})" if k in errs else "") for k in ms),
                flush=True)
        for interleaved in (False, True):
            work = Workload(case, torch.float32, device, backward=True, interleaved=interleaved)
            row = []
            for f in FORMS:
                form(f)
                steps = {"torch": work.runner("torch"), "ours": work.runner("gemmconv")}
                err = work.error(steps["ours"]())
                taken = samples(device, steps, 3 if smoke else 15)
                med = {k: sorted(t for key, t in taken if key == k)[len(taken) // 4] for k in steps}
                row.append(f"{f} {med['ours']:7.3f} ms {speedups(taken, 'torch')['ours']:5.2f}x"
                           f" (err {err:.1e})")
            print(f"{name:14s} {'channels_last' if interleaved else 'planar':13s} step: torch "
                  f"{med['torch']:7.3f} ms; " + "; ".join(row), flush=True)
finally:
    fused.backward_takes, fused.stacked_column, fused.shared_as_a, fused.grad_config = \
        takes, column, shared, config
