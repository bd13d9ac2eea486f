"""The float32 weight gradient with the input moved (``MOVED_X``) on tiles of 64 output by
32 input channels: the input's moved tile as the tensor cores' A operand from shared memory
(M = 32, too few for wgmma: mma.sync), against the output gradient's tile as A through
registers (``SWAP``: wgmma, M = 64), and against the output gradient moved instead (wgmma,
A from shared memory). The weight gradient alone (copies and kernel, do_bench) on the
stride-1 cases of 32 input channels, its difference from the first variant's, and
gemmconv's float32 training step with each (do_bench, the variants one after the other).

    PYTHONPATH=. python benches/moved_swap_probe.py
"""
import math
import sys

import torch
import triton.testing

from gemmconv import _triton, cases, fused
from gemmconv.bench import OURS
from gemmconv.shapes import Geometry, conv_transpose_args

NAMES = ["2d-512x1024", "2d-3x7-padded", "1d-dil3"]
Launch = _triton.Launch


def swapped(swap):
    """_triton.Launch with the weight gradient's SWAP forced."""
    class Forced(Launch):
        def __init__(self, kernel, grid, sizes, **constants):
            if kernel is _triton.weight_gradient and constants.get("MOVED_X"):
                constants["SWAP"] = swap
            super().__init__(kernel, grid, sizes, **constants)
    return Forced


def main() -> None:
    print(torch.cuda.get_device_name(), flush=True)
    for case in (c for c in cases.BENCH if c.name in NAMES):
        x, w, b = case.tensors(torch.float32, "cuda")
        a = conv_transpose_args(f"conv_transpose{case.nd}d", case.nd, x, w, b, case.stride,
                                case.padding, case.output_padding, case.groups, case.dilation)
        geo = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
        gy = torch.randn(a.output_shape, device="cuda")
        flops = 2 * case.batch * case.in_channels * case.out_channels * \
            math.prod(case.kernel_size) * math.prod(case.size)
        leaves = [t.detach().clone().requires_grad_() for t in (x, w, b)]
        conv = OURS[case.nd]

        def step():
            torch.autograd.grad(conv(*leaves, **case.kwargs), leaves, gy)

        line, first = [f"{case.name} (input moved by the rule: {fused.moves_input(a, 4)})"], None
        for label, moved, swap in (("x moved, mma.sync", True, False),
                                   ("x moved, SWAP wgmma", True, True),
                                   ("g moved, wgmma", False, False)):
            _triton.Launch = swapped(swap)
            fused.forget_plans()
            try:
                run = lambda: fused.weight_gradient(x, gy, geo, shifted=True, moved_input=moved)
                got = run()
                first = got if first is None else first
                ms = triton.testing.do_bench(run, warmup=3, rep=50, return_mode="median")
                rule = fused.moves_input
                fused.moves_input = lambda a, element_size: moved
                try:
                    t_step = triton.testing.do_bench(step, warmup=3, rep=200, return_mode="median")
                finally:
                    fused.moves_input = rule
                line.append(f"{label} {ms:.3f} ms ({flops / ms / 1e9:.0f} TF/s) diff "
                            f"{((got - first).norm() / first.norm()).item():.1e}, "
                            f"training step {t_step:.3f} ms")
            except Exception as e:   # noqa: BLE001 (a probe: report and go on)
                line.append(f"{label} failed {str(e).splitlines()[0][:80]}")
            finally:
                _triton.Launch = Launch
        fused.forget_plans()
        print(" | ".join(line), flush=True)


if __name__ == "__main__":
    sys.exit(main())
