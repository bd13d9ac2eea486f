"""What fused.backward allocates on a channels_last float32 call, against what its count
(fused.backward_bytes) allows. On an H100 (session 61) 2d-3x7-padded-small's backward took
0.72 MB (rows form) and 1.48 MB (planar form) more than every counted term but the
output gradient's channels-innermost copy, which a channels_last output gradient does not
get. On the CPU the tensors torch's dispatcher sees are all counted, so the rest lies
below it: a kernel's scratch, or a reduction's staging.

Per form: every allocation of at least 4 KB the dispatcher sees during the second call
(the first makes the plans), with where in gemmconv it was made; on a GPU also the
caching allocator's own record of the call (torch.cuda.memory._record_memory_history),
its peak over the call against the count.

    PYTHONPATH=. python benches/backward_alloc_probe.py      (TRITON_INTERPRET=1 on a CPU)
"""
import os
import traceback

import torch
from torch.utils._python_dispatch import TorchDispatchMode

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if device.type == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"
from gemmconv import fused  # noqa: E402  (after the interpreter is chosen)
from gemmconv.shapes import conv_transpose_args  # noqa: E402


class Allocations(TorchDispatchMode):
    """Each new storage of at least 4 KB an op returns: (op, bytes, shape, gemmconv frames)."""
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        given = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if (isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in given
                    and t.untyped_storage().nbytes() >= 4096):
                where = [f"{f.name}:{f.lineno}" for f in traceback.extract_stack()
                         if "gemmconv" in f.filename][-3:]
                self.seen.append((func._schema.name, t.untyped_storage().nbytes(),
                                  tuple(t.shape), where))
        return out


layout = torch.channels_last
x = torch.randn(2, 32, 45, 91, device=device).contiguous(memory_format=layout)
w = torch.randn(32, 32, 3, 7, device=device)
grad_out = torch.randn(2, 32, 45, 91, device=device).contiguous(memory_format=layout)
a = conv_transpose_args("conv_transpose2d", 2, x, w, None, 1, (1, 3), 0, 1, 1)
rule = fused.float32_weight_form
try:
    for form in ("rows", "planar"):
        fused.float32_weight_form = lambda a, interleaved, form=form: form
        out = [torch.empty_like(x), torch.empty_like(w), None]
        fused.backward(grad_out, x, w, a, (True, True), None, out=out)   # the plans
        seen = Allocations()
        if device.type == "cuda":
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            torch.cuda.memory._record_memory_history(max_entries=10000)
        with seen:
            fused.backward(grad_out, x, w, a, (True, True), None, out=out)
        for op, nbytes, shape, where in seen.seen:
            print(f"{form:6s} {op:18s} {nbytes:>10,} B {str(shape):22s} {' < '.join(where)}")
        print(f"{form:6s} seen {sum(s[1] for s in seen.seen):,} B; count "
              f"{fused.backward_bytes(a, 4, None, True):,} B", flush=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - before
            snapshot = torch.cuda.memory._snapshot()
            torch.cuda.memory._record_memory_history(enabled=None)
            for trace in snapshot["device_traces"]:
                for event in trace:
                    if event["action"] == "alloc" and event["size"] >= 4096:
                        frames = [f"{f['name']}:{f['line']}" for f in event.get("frames", [])
                                  if "gemmconv" in f["filename"] or "triton" in f["filename"]
                                  or "torch" in f["filename"]][:4]
                        print(f"{form:6s} allocator {event['size']:>10,} B {' < '.join(frames)}")
            print(f"{form:6s} peak over the call {peak:,} B", flush=True)
finally:
    fused.float32_weight_form = rule
