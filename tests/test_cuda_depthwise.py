"""GPU: the depthwise kernels (gemmconv/depthwise.py: forward and backward) and the grouped
direct kernel (forward) on the shared table's depthwise and grouped cases (cases.DEPTHWISE,
cases.GROUPED), against float64, into poisoned outputs, planar and channels_last; that
calls of one input channel a group, or a few, take them and others do not; determinism,
streams, and outputs past 2^31 elements. Marked ``cuda``."""

import pytest
import torch
import torch.nn.functional as F

import gemmconv
from gemmconv import cases, depthwise
from gemmconv.bench import reference as reference64
from helpers import OURS, case_args, check_against_float64, generator, poison_allocator, rel_error
from test_cuda import on_a_busy_stream

pytestmark = pytest.mark.cuda
CUDA = "cuda"
# mode: (dtype, float32 precision policy, tolerance). The kernel multiplies in float32
# whatever the policy: "ieee" holds it to float32's accuracy.
MODES = {
    "float32-ieee": (torch.float32, "ieee", 1e-5),
    "float32-tf32": (torch.float32, "tf32", 5e-3),
    "float16": (torch.float16, "torch", 5e-3),
    "bfloat16": (torch.bfloat16, "torch", 3e-2),
}


@pytest.fixture
def launches(monkeypatch):
    """Counts the depthwise kernels' launches: ``[forward, backward]`` (depthwise.launch, a
    replay's and _forward's; depthwise.launch_backward)."""
    count = [0, 0]
    for i, name in enumerate(("launch", "launch_backward")):
        monkeypatch.setattr(depthwise, name, _counted(getattr(depthwise, name), count, i))
    return count


def _counted(function, count, i):
    def counted(*args, **kwargs):
        count[i] += 1
        return function(*args, **kwargs)
    return counted


def _tensors(case, key, dtype, channels_last):
    x, w, b = case.tensors(dtype, CUDA, generator(case.name, key))
    if channels_last:
        fmt = torch.channels_last if case.nd == 2 else torch.channels_last_3d
        x, w = x.contiguous(memory_format=fmt), w.contiguous(memory_format=fmt)
    return [None if t is None else t.requires_grad_() for t in (x, w, b)]


@pytest.mark.parametrize("layout", ["planar", "channels_last"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", cases.DEPTHWISE + cases.GROUPED, ids=lambda c: c.name)
def test_depthwise_kernel_matches_float64(launches, case, mode, layout):
    """The forward and the gradients by the kernels (once a call each, bitwise the same run
    to run, in the input's layout; the FCN-like cases' pairs in chunks, and their
    channels_last backward on the column routes; the grouped cases' forward by the grouped
    kernel, channels_last too (its vector form), their backward on the column routes), all
    against float64 torch."""
    _check_the_kernels(launches, case, mode, layout)


@pytest.mark.parametrize("layout", ["planar", "channels_last"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", cases.GROUPED, ids=lambda c: c.name)
def test_backward_kernel_of_grouped_calls_matches_float64(monkeypatch, launches, case, mode,
                                                         layout):
    """As above, with the backward kernel taking grouped calls of up to GROUPED_MAX_INPUTS
    input channels a group (depthwise.BACKWARD_MAX_INPUTS, one by default: slower there):
    each input channel's gradients from its group's output-gradient channels."""
    monkeypatch.setattr(depthwise, "BACKWARD_MAX_INPUTS", depthwise.GROUPED_MAX_INPUTS)
    _check_the_kernels(launches, case, mode, layout)


def _check_the_kernels(launches, case, mode, layout):
    if layout == "channels_last" and (case.nd == 1 or case.unbatched):
        pytest.skip("no channels_last layout for 1-D or unbatched inputs")
    dtype, precision, tolerance = MODES[mode]
    leaves = _tensors(case, mode + layout, dtype, layout == "channels_last")
    direct = depthwise.takes(case_args(case, *leaves), leaves[0], leaves[1])

    def one_forward_launch():
        return 1 if launches[0] == direct else 0

    def one_backward_launch():
        assert launches[1] == depthwise.backward_takes(case_args(case, *leaves), leaves[0],
                                                       leaves[1], layout == "channels_last")
    check_against_float64(case, leaves, precision, tolerance, layout, one_forward_launch,
                          one_backward_launch, gradient_in_layout=True)


@pytest.mark.parametrize("why", ["many-a-group", "float64"])
def test_calls_the_depthwise_kernel_cannot_take_go_elsewhere(launches, why):
    inputs = depthwise.GROUPED_MAX_INPUTS + 1 if why == "many-a-group" else 1
    case = cases._c("grouped", 2, 2 * inputs, 8, (4, 4), (9, 9), stride=2, padding=1,
                    groups=2)
    dtype = torch.float64 if why == "float64" else torch.float32
    x, w, b = case.tensors(dtype, CUDA, generator("elsewhere", why))
    with gemmconv.float32_precision("ieee"):
        out = OURS[2](x, w, b, **case.kwargs)
    assert launches == [0, 0]
    assert rel_error(out, reference64(case, x, w, b)[0]) < (1e-12 if why == "float64" else 1e-5)


def test_modules_of_the_zoos_depthwise_decoder_take_the_kernel(launches):
    """ConvTranspose2d(C, C, 4, 2, 1, groups=C) converted, as the zoo's decoder has it, in
    bfloat16 under autocast and channels_last."""
    module = torch.nn.ConvTranspose2d(32, 32, 4, 2, 1, groups=32, bias=False).to(CUDA)
    module = module.to(memory_format=torch.channels_last)
    x = torch.randn(4, 32, 24, 24, device=CUDA).contiguous(memory_format=torch.channels_last)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        want = module(x)
        gemmconv.convert(module)
        out = module(x)
    assert launches[0] == 1 and out.dtype == torch.bfloat16
    assert out.is_contiguous(memory_format=torch.channels_last)
    assert rel_error(out, want) < 3e-2


def test_depthwise_kernel_runs_on_the_current_stream(launches):
    case = next(c for c in cases.DEPTHWISE if c.name == "depthwise-k4s2")
    depthwise._plan.cache_clear()
    for key in ("depthwise-stream", "depthwise-stream-again"):   # the JIT's launch, then the kept one
        x, w, b, out = on_a_busy_stream(case, key,
                                        lambda x, w, b: OURS[case.nd](x, w, b, **case.kwargs))
        assert rel_error(out, reference64(case, x, w, b)[0]) < 1e-5
    assert launches[0] == 2
    depthwise._backward_plan.cache_clear()
    for key in ("depthwise-backward-stream", "depthwise-backward-stream-again"):
        x, w, b, grads = on_a_busy_stream(case, key, lambda x, w, b: torch.autograd.grad(
            OURS[case.nd](x.requires_grad_(), w.requires_grad_(), b, **case.kwargs), [x, w],
            _ones(case)))
        want = reference64(case, x, w, b, _ones(case))
        assert all(rel_error(m, t) < 1e-5 for m, t in zip(grads, want[1:]))
    assert launches[1] == 2


def _ones(case):
    return torch.ones(case.batch, case.out_channels, *case.output_size, device=CUDA)


@pytest.mark.parametrize("groups", [4, 2], ids=["depthwise", "grouped"])
def test_depthwise_kernel_past_2_31_elements(launches, groups):
    """A bfloat16 output of 2^32 elements: the kernels' offsets are 64-bit (the depthwise
    kernel's, and the grouped one's with two input channels a group)."""
    x = torch.randn(1, 4, 16384, 16384, device=CUDA, dtype=torch.bfloat16)
    w = torch.randn(4, 4 // groups, 2, 2, device=CUDA, dtype=torch.bfloat16)
    b = torch.randn(4, device=CUDA, dtype=torch.bfloat16)
    poison_allocator(2**33)
    out = gemmconv.conv_transpose2d(x, w, b, stride=2, groups=groups)
    assert launches[0] == 1 and out.shape == (1, 4, 32768, 32768) and not out.isnan().any()
    for r in (0, 5000, 12000, 16384 - 8):                      # the last rows are past 2^31
        ref = F.conv_transpose2d(x[..., r:r + 8, :].double(), w.double(), b.double(), stride=2,
                                 groups=groups)
        assert rel_error(out[..., 2 * r:2 * r + 16, :], ref) < 3e-2


def test_depthwise_kernel_reads_strided_input_and_bias(launches):
    """An input that is a slice and a bias of stride 2, through the public call."""
    case = next(c for c in cases.DEPTHWISE if c.name == "depthwise-k4s2")
    x, w, b = case.tensors(torch.float32, CUDA, generator("strided", "cuda"))
    wide, spaced = torch.randn(*x.shape[:-1], 2 * x.shape[-1], device=CUDA), torch.randn(64, device=CUDA)
    wide[..., ::2], spaced[::2] = x, torch.randn(32, device=CUDA)
    x, b = wide[..., ::2], spaced[::2]
    with gemmconv.float32_precision("ieee"):
        out = OURS[case.nd](x, w, b, **case.kwargs)
    assert launches[0] == 1
    assert rel_error(out, reference64(case, x, w, b)[0]) < 1e-5
