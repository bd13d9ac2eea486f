"""col2im.cu's tf32_weight_gradient on one bench case, float32 channels_last, launched ten
times through gemmconv's own path (fused.rows_weight_gradient), on one generator's inputs:
``PYTHONPATH=. python3 benches/rows_wgrad_ncu.py [CASE]`` (default 2d-1024) prints the
form, the median CUDA-event time and a checksum of the result (equal across builds whose
sums run in the same order; PYTHONPATH may point at another copy of the package). For ncu
on the third launch: ``ncu -k regex:tf32_weight_gradient --launch-skip 2 --launch-count 1
python3 benches/rows_wgrad_ncu.py``. (Session 70's A ran it as wgrad_ncu.py, a name that
is session 62's probe of the planar weight gradient's kernel.) A second argument sets
_cuda.WGRAD_BALANCED (1: the block's tiles of A dealt to balanced warps, sessions 71-72's
forms); the checksum should not move with it, since every weight's sum runs over the same
blocks, stages and mma.sync steps in the same order. A third, ``ROWS,STAGES``, forces the
form's output rows a stage and the ring's depth (session 73's candidates: more rows a
barrier where shared memory allows), after checking that they fit; those change the
blocks' stages, so the checksum moves by rounding only."""
import sys

import torch

from gemmconv import _cuda, fused
from gemmconv.cases import BENCH
from gemmconv.shapes import Geometry

case = next(c for c in BENCH if c.name == (sys.argv[1] if len(sys.argv) > 1 else "2d-1024"))
if len(sys.argv) > 2:
    _cuda.WGRAD_BALANCED = bool(int(sys.argv[2]))
if len(sys.argv) > 3:
    rows, stages = map(int, sys.argv[3].split(","))
    picked = _cuda.rows_weight_gradient_form

    def forced(kernel, dilation, out_channels, balanced=None):
        form = picked(kernel, dilation, out_channels, balanced)._replace(rows=rows, stages=stages)
        assert _cuda._wgrad_shared(kernel, dilation, form) <= _cuda.SHARED_LIMIT, form
        return form
    _cuda.rows_weight_gradient_form = forced
gen = torch.Generator("cuda").manual_seed(0)
x = torch.randn(case.batch, *case.size, case.in_channels, device="cuda", generator=gen)
grad = torch.randn(case.batch, *case.output_size, case.out_channels, device="cuda", generator=gen)
g = Geometry(case.kernel_size, (1, 1), case.padding, case.dilation)
events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(10)]
for start, end in events:
    start.record()
    out = fused.rows_weight_gradient(x, grad, g)
    end.record()
torch.cuda.synchronize()
times = sorted(start.elapsed_time(end) for start, end in events)
try:
    form = _cuda.rows_weight_gradient_form(case.kernel_size, case.dilation, case.out_channels)
except TypeError:   # (builds before session 70's: no output tiles)
    form = _cuda.rows_weight_gradient_form(case.kernel_size, case.dilation)
print(case.name, "form", form, f"median {times[5]:.3f} ms (least {times[0]:.3f}), "
      f"sum {out.double().sum().item():.6e}")
