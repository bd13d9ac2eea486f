"""pytest-benchmark: gemmconv.conv2d, im2col (unfold) and col2im (fold) against torch.

Cases: gemmconv.cases.CONV_BENCH and FOLD_BENCH (reduced sizes without a GPU). Each
benchmark checks its result against float64 in the same run.
"""

import pytest
import torch
import torch.nn.functional as F

import gemmconv
from gemmconv import bench, cases

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
SCALE = (lambda c: c) if DEVICE.type == "cuda" else (lambda c: c.scaled(1024))


def _run(benchmark, fn, reference, tolerance):
    def call():
        result = fn()
        if DEVICE.type == "cuda":
            torch.cuda.synchronize()
        return result
    error = bench._rel(call(), reference)
    benchmark.extra_info["rel_error"] = error
    assert error < tolerance
    benchmark.pedantic(call, rounds=10 if DEVICE.type == "cuda" else 2, warmup_rounds=1)


@pytest.mark.parametrize("impl", ["torch", "gemmconv"])
@pytest.mark.parametrize("case", [SCALE(c) for c in cases.CONV_BENCH], ids=lambda c: c.name)
def test_conv2d(benchmark, case, impl):
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(case.batch, case.in_channels, *case.size, generator=gen).to(DEVICE)
    w = torch.rand(case.out_channels, case.in_channels // case.groups, *case.kernel_size, generator=gen).to(DEVICE)
    kw = dict(stride=case.stride, padding=case.padding, groups=case.groups)
    ref = F.conv2d(x.double(), w.double(), **kw)
    fn = F.conv2d if impl == "torch" else gemmconv.conv2d
    benchmark.group = case.name
    _run(benchmark, lambda: fn(x, w, **kw), ref, 5e-3)


@pytest.mark.parametrize("op", ["unfold", "fold"])
@pytest.mark.parametrize("impl", ["torch", "gemmconv"])
@pytest.mark.parametrize("case", [SCALE(c) for c in cases.FOLD_BENCH], ids=lambda c: c.name)
def test_fold_unfold(benchmark, case, impl, op):
    gen = torch.Generator().manual_seed(0)
    kw = dict(kernel_size=case.kernel_size, padding=case.padding, stride=case.stride)
    x = torch.rand(case.batch, case.in_channels, *case.size, generator=gen).to(DEVICE)
    if op == "unfold":
        fn, arg = (F.unfold if impl == "torch" else gemmconv.im2col), x
        ref = F.unfold(x.double(), **kw)
    else:
        arg = F.unfold(x, **kw)
        fn = (lambda u, **k: (F.fold if impl == "torch" else gemmconv.col2im)(u, case.size, **k))
        ref = F.fold(arg.double(), case.size, **kw)
    benchmark.group = f"{case.name} {op}"
    _run(benchmark, lambda: fn(arg, **kw), ref, 1e-6)
