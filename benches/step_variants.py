"""A case's training step timed against torch's with a routing constant at each of several
values: the shared loop of the probes that decide such a constant
(f32_backward_probe.py, grouped_backward_probe.py)."""
from typing import Callable, Sequence

import torch

from gemmconv import ops
from gemmconv.bench import Workload
from gemmconv.measure import samples, speedups
from gemmconv.shapes import conv_transpose_args
from overhead import patched


def step_row(case, dtype: torch.dtype, device: torch.device, interleaved: bool, owner,
             name: str, variants: Sequence[tuple], takes: Callable, mark: str,
             smoke: bool) -> str:
    """One line: torch's training step (forward + backward) and ours in turns
    (measure.speedups), with ``owner.name`` at each ``(label, value)`` of ``variants``,
    each with its error against float64, and ``mark`` where ``takes(a, x, weight,
    interleaved)`` says the route under test took the call (asked of meta tensors under
    ``smoke``, a CPU run of the script itself: the library describes them as on a GPU)."""
    work = Workload(case, dtype, device, backward=True, interleaved=interleaved)
    cells = []
    for label, value in variants:
        with patched(owner, name, value):
            x, w, b = (t.to("meta") if smoke else t for t in (work.x, work.w, work.b))
            a = conv_transpose_args(f"conv_transpose{case.nd}d", case.nd, x, w, b, case.stride,
                                    case.padding, case.output_padding, case.groups,
                                    case.dilation)
            took = takes(a, x, w, interleaved)
            ops._backward_replays.clear()
            fns = {"torch": work.runner("torch"), "ours": work.runner("gemmconv")}
            error = work.error(fns["ours"]())
            taken = samples(device, fns, 3 if smoke else 15)
        ms = {k: sorted(t for key, t in taken if key == k)[len(taken) // 4] for k in fns}
        cells.append(f"{label}{f' ({mark})' if took else ''}: ours {ms['ours']:7.3f} ms "
                     f"{speedups(taken, 'torch')['ours']:5.2f}x (err {error:.1e})")
    return (f"{case.name:19s} {str(dtype)[6:]:8s} {'CL' if interleaved else 'NCHW':4s} "
            f"torch {ms['torch']:7.3f} ms; " + "; ".join(cells))
