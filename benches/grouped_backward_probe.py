"""Should grouped calls' backward take the depthwise backward kernel? Since session 65 it
computes grouped calls too (each input channel from its group's output-gradient channels;
matched float64 through the interpreter), but until timed they stay on the column routes
(depthwise.BACKWARD_MAX_INPUTS = 1). In session 65's G (H100) the grouped cases'
channels_last training steps read 0.57-0.95 of their NCHW speedups.

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

from gemmconv import cases, depthwise, ops
from gemmconv.bench import Workload
from gemmconv.measure import samples, speedups
from gemmconv.shapes import conv_transpose_args

sys.path.insert(0, "benches")
from overhead import patched  # noqa: E402

smoke = os.environ.get("SMOKE") == "1"
device = torch.device("cpu" if smoke else "cuda")
chosen = [c for c in cases.BENCH if c.groups > 1 and c.in_channels // c.groups > 1
          and (len(sys.argv) < 2 or c.name in sys.argv[1:])]

for case in chosen:
    case = case.scaled(512) if smoke else case
    for dtype in (torch.float32, torch.bfloat16):
        for interleaved in (True, False):
            work = Workload(case, dtype, device, backward=True, interleaved=interleaved)
            row = []
            for variant, most in (("cost model", depthwise.BACKWARD_MAX_INPUTS),
                                  ("kernel", depthwise.GROUPED_MAX_INPUTS)):
                with patched(depthwise, "BACKWARD_MAX_INPUTS", most):
                    # (SMOKE: asked of meta tensors, which the library describes as on a GPU)
                    x, w, b = (t.to("meta") if smoke else t for t in (work.x, work.w, work.b))
                    a = conv_transpose_args(f"conv_transpose{case.nd}d", case.nd, x, w, b,
                                            case.stride, case.padding, case.output_padding,
                                            case.groups, case.dilation)
                    took = depthwise.backward_takes(a, x, w, interleaved)
                    ops._backward_replays.clear()
                    fns = {"torch": work.runner("torch"), "ours": work.runner("gemmconv")}
                    error = work.error(fns["ours"]())
                    taken = samples(device, fns, 3 if smoke else 15)
                ms = {k: sorted(t for key, t in taken if key == k)[len(taken) // 4] for k in fns}
                row.append(f"{variant}{' (kernel)' if took else ''}: ours {ms['ours']:7.3f} ms "
                           f"{speedups(taken, 'torch')['ours']:5.2f}x (err {error:.1e})")
            print(f"{case.name:19s} {str(dtype)[6:]:8s} {'CL' if interleaved else 'NCHW':4s} "
                  f"torch {ms['torch']:7.3f} ms; " + "; ".join(row), flush=True)
