"""Should float32 3-D backwards take the fused kernels again? They have taken the column
routes since session 29, when the column routes' training step ran 1.1-1.5x faster
(results/s29/D); the fused kernels' weight gradient has been rebuilt since (sessions
58-63). Channels_last float32 3d-64cube's training step read 0.98x torch in session 65's
G (H100): its backward's im2col took 9.6 of its 20.1 ms.

Per 3-D stride-1 case of the table, float32, channels_last then planar: the training step
(forward + backward) of torch and of ours in turns (measure.speedups), first as the cost
model sends it, then with fused.FLOAT32_BACKWARD_DIMS taking 3-D calls (where the fused
forward takes the call and the rest of backward_unavailable allows it), each with its
error against float64 and whether the fused backward took it.

    PYTHONPATH=. python benches/f32_3d_backward_probe.py [CASE ...]
    (SMOKE=1: on the CPU, the cases scaled down, to check the script itself.)
"""
import os
import sys

import torch

from gemmconv import cases, fused, ops
from gemmconv.bench import Workload
from gemmconv.measure import samples, speedups
from gemmconv.shapes import conv_transpose_args

sys.path.insert(0, "benches")
from overhead import patched  # noqa: E402

NAMES = sys.argv[1:] or ["3d-64cube", "3d-3x5x7", "3d-32to64", "3d-96cube"]
smoke = os.environ.get("SMOKE") == "1"
device = torch.device("cpu" if smoke else "cuda")

for name in NAMES:
    case = next(c for c in cases.BENCH if c.name == name)
    case = case.scaled(512) if smoke else case
    for interleaved in (True, False):
        work = Workload(case, torch.float32, device, backward=True, interleaved=interleaved)
        row = []
        for variant, dims in (("cost model", fused.FLOAT32_BACKWARD_DIMS), ("fused", (2, 3))):
            with patched(fused, "FLOAT32_BACKWARD_DIMS", dims):
                # (SMOKE: asked of meta tensors, which the library describes as on a GPU)
                x, w, b = (t.to("meta") if smoke else t for t in (work.x, work.w, work.b))
                a = conv_transpose_args("conv_transpose3d", 3, x, w, b, case.stride,
                                        case.padding, case.output_padding, case.groups,
                                        case.dilation)
                took = fused.backward_takes(a, x, w, interleaved)
                ops._backward_replays.clear()
                fns = {"torch": work.runner("torch"), "ours": work.runner("gemmconv")}
                error = work.error(fns["ours"]())
                taken = samples(device, fns, 3 if smoke else 15)
            ms = {k: sorted(t for key, t in taken if key == k)[len(taken) // 4] for k in fns}
            row.append(f"{variant}{' (fused)' if took else ''}: ours {ms['ours']:7.3f} ms "
                       f"{speedups(taken, 'torch')['ours']:5.2f}x (err {error:.1e})")
        print(f"{name:12s} {'CL' if interleaved else 'NCHW':4s} torch {ms['torch']:7.3f} ms; "
              + "; ".join(row), flush=True)
