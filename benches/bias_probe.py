"""The fused backward's bias gradient from the output gradient's channels-innermost copy
(session 39) against a pass of its own (before): training steps of the 17 cases that take
the fused backward, torch / ours before / ours now, in turns in one process (measure.timers,
each sample a step from an idle GPU, as the tables time them), float32 and bfloat16.

    PYTHONPATH=. python benches/bias_probe.py
"""
import sys

import torch

from gemmconv import bench, cases, fused, ops
from gemmconv.measure import timers
from gemmconv.shapes import conv_transpose_args


def before(grad_out, x, weight, a, need):
    """ops._fused_backward as session 38 ran it: the bias gradient in a pass of its own."""
    grad_input, grad_weight, _ = fused.backward(grad_out, x, weight, a, need[:2],
                                                ops._workspace_limit)
    empty = lambda: grad_out.new_empty(0)
    return [grad_input if need[0] else empty(), grad_weight if need[1] else empty(),
            ops._bias_grad(grad_out, False) if need[2] else empty()]


def main() -> int:
    device = torch.device("cuda")
    print(torch.cuda.get_device_name(), flush=True)
    now = ops._fused_backward
    for dtype in (torch.float32, torch.bfloat16):
        ratios = []
        for case in cases.BENCH:
            work = bench.Workload(case, dtype, device, True)
            a = conv_transpose_args(f"conv_transpose{case.nd}d", case.nd, work.x, work.w, work.b,
                                    case.stride, case.padding, case.output_padding, case.groups,
                                    case.dilation)
            if not fused.backward_takes(a, work.x, work.w, False, ops._workspace_limit):
                continue
            ours, theirs = work.runner("gemmconv"), work.runner("torch")

            def old():
                ops._fused_backward = before
                try:
                    return ours()
                finally:
                    ops._fused_backward = now
            got, want = old(), ours()   # [output, input, weight and bias gradients]
            same = all(torch.equal(p, q) for p, q in zip(got[1:3], want[1:3]))
            errors = [bench._rel(r[3], work.refs[3]) for r in (got, want)]
            t = timers(device, {"torch": theirs, "before": old, "now": ours}, 10)
            ratios.append(t["before"] / t["now"])
            print(f"{case.name:<14} {str(dtype)[6:]:<9} torch {t['torch']:7.3f} ms | before "
                  f"{t['before']:7.3f} ({t['torch'] / t['before']:.2f}x) | now {t['now']:7.3f} "
                  f"({t['torch'] / t['now']:.2f}x) | now/before {t['now'] / t['before']:.3f} | "
                  f"input and weight gradients equal: {same} | bias err before {errors[0]:.1e}, now "
                  f"{errors[1]:.1e}", flush=True)
            del work
        if ratios:
            geo = torch.tensor(ratios).log().mean().exp().item()
            print(f"{dtype}: before over now, geometric mean over {len(ratios)} cases: "
                  f"{geo:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
