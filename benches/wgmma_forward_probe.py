"""The CUDA C++ forward that loads one box for every W tap (benches/wgmma_forward.cu):
right against float64, and how fast against torch and gemmconv's own route, on the
stride-1 2-D channels_last bfloat16 calls it serves (C_in and C_out multiples of 64).
Needs an H100 or H200 and nvcc; about 60 s.

    PYTHONPATH=. python benches/wgmma_forward_probe.py [--edges | --profile S,P,O,M]

First, small shapes that reach the edges (output widths off 128, padding, dilation, two
chunks of input channels, two tiles of output channels, k_w = 1), each form that fits,
outputs poisoned with NaN: the largest error relative to the reference's largest entry and
the elements left unwritten. Then the bench cases 2d-1024, 2d-3x7-512 and 2d-64to128:
milliseconds and TFLOP/s of torch (cuDNN, channels_last), gemmconv.conv_transpose2d and the
probe in each form (ring depth, warpgroups a block, overlap, m64 fragments a
warpgroup), side by side (measure.timers, in turns), with each one's error
against float64. The probe's weights are laid out once before timing, as a module's would be.
"""
import os
import sys

import cupy
import torch
import torch.nn.functional as F

import gemmconv
from gemmconv.cases import BENCH
from gemmconv.measure import timers
from gemmconv.shapes import Geometry
from wgmma_shift_probe import build   # (benches/ is on the path when run as a script)

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wgmma_forward.cu")
SHARED_LIMIT = 227 * 1024     # an H100's or H200's opt-in shared memory a block
BK, BN = 64, 64               # as in the .cu

# The kernel's forms, as the .cu instantiates them: (ring depth, warpgroups a block, whether
# a stage's wgmmas run on while the next stage's loads are issued, m64 fragments a warpgroup).
FORMS = [(4, 2, 0, 1), (4, 2, 1, 1), (3, 2, 1, 1), (6, 2, 1, 1), (3, 3, 1, 1), (3, 4, 0, 1),
         (3, 4, 1, 1), (4, 4, 1, 1), (4, 2, 1, 2), (3, 3, 1, 2), (2, 3, 0, 2)]
# Forms whose halves are also timed alone on 2d-1024 (3x3): "_a1" without the loads after
# the prologue, "_a2" without the products (their outputs are wrong by design).
ABLATIONS = [(4, 2, 0, 1), (4, 2, 1, 1), (3, 4, 1, 1)]


def shared_bytes(c_in: int, kernel: tuple, dilation_w: int, form: tuple) -> int:
    """The weights of every tap, each warpgroup's boxes (the form's ring depth of them), and
    1 KB to align them to 1,024 bytes."""
    stages, pipes, _, fragments = form
    rows = (64 * fragments + (kernel[1] - 1) * dilation_w + 7) // 8 * 8
    return kernel[0] * kernel[1] * c_in * BN * 2 + pipes * stages * rows * 128 + 1024


def forms_that_fit(c_in: int, kernel: tuple, dilation_w: int) -> list[tuple]:
    return [f for f in FORMS if shared_bytes(c_in, kernel, dilation_w, f) <= SHARED_LIMIT]


def tiles(weight: torch.Tensor) -> torch.Tensor:
    """``weight (C_in, C_out, k_h, k_w)`` as the kernel reads it: (C_out / 64, k_h, k_w,
    C_in / 64, 64 output channels, 64 input channels)."""
    c_in, c_out, kh, kw = weight.shape
    w = weight.permute(1, 2, 3, 0).reshape(c_out // BN, BN, kh, kw, c_in // BK, BK)
    return w.permute(0, 2, 3, 4, 1, 5).contiguous()


class Probe:
    """One form of the kernel bound to one call's tensors: its weights laid out, its output
    allocated, its launch set up; calling it launches the kernel and returns the output."""

    def __init__(self, module: cupy.RawModule, x: torch.Tensor, weight: torch.Tensor,
                 bias, padding: tuple, dilation: tuple, form: tuple, ablate: str = ""):
        n, c_in, h, w = x.shape
        _, c_out, kh, kw = weight.shape
        image = Geometry((kh, kw), (1, 1), padding, dilation).image_size((h, w), (0, 0))
        self.out = torch.empty(n, c_out, *image, device=x.device, dtype=x.dtype,
                               memory_format=torch.channels_last)
        self.w = tiles(weight)
        self.bias = (bias if bias is not None else torch.zeros(1, device=x.device)).float()
        stages, pipes, overlap, fragments = form
        self.kernel = module.get_function(
            f"forward_k{kw}_s{stages}_p{pipes}_o{overlap}_m{fragments}{ablate}")
        self.shared = shared_bytes(c_in, (kh, kw), dilation[1], form)
        self.block = (128 * pipes,)
        self.kernel.max_dynamic_shared_size_bytes = self.shared
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        co_tiles = c_out // BN
        self.grid = (co_tiles * max(sms // co_tiles, 1),)
        i32 = cupy.int32
        self.args = (cupy.asarray(x.view(torch.int16)), cupy.asarray(self.w.view(torch.int16)),
                     cupy.asarray(self.bias), cupy.asarray(self.out.view(torch.int16)),
                     i32(bias is not None), i32(n), i32(h), i32(w), i32(c_in),
                     i32(self.out.shape[2]), i32(self.out.shape[3]), i32(c_out), i32(kh),
                     i32(padding[0]), i32(padding[1]), i32(dilation[0]), i32(dilation[1]))

    def __call__(self) -> torch.Tensor:
        self.kernel(self.grid, self.block, self.args, shared_mem=self.shared)
        return self.out


def error(out: torch.Tensor, want: torch.Tensor) -> float:
    return float((out.double() - want).abs().max() / want.abs().max())


def inputs(n, c_in, c_out, kernel, size, bias=True, gen=None):
    x = torch.randn(n, c_in, *size, device="cuda", generator=gen).to(torch.bfloat16)
    w = torch.randn(c_in, c_out, *kernel, device="cuda", generator=gen).to(torch.bfloat16)
    b = torch.randn(c_out, device="cuda", generator=gen).to(torch.bfloat16) if bias else None
    return x.contiguous(memory_format=torch.channels_last), w, b


def reference(x, w, b, padding, dilation):
    return F.conv_transpose2d(x.double(), w.double(), None if b is None else b.double(),
                              padding=padding, dilation=dilation)


# (batch, C_in, C_out, kernel, size, padding, dilation, bias); each needs a form whose
# resident weights and ring fit in shared memory (3x7 and 5x5 with 64 input channels fit
# none of session 68's later forms, so those edges are 2x7 and 3x5).
EDGES = [
    (2, 64, 64, (3, 3), (20, 300), (0, 0), (1, 1), True),
    (2, 128, 128, (2, 3), (9, 140), (1, 2), (2, 2), True),
    (1, 64, 64, (2, 7), (7, 129), (0, 3), (1, 2), False),
    (2, 64, 192, (2, 1), (6, 250), (0, 0), (1, 1), True),
    (3, 64, 64, (3, 5), (4, 10), (2, 4), (1, 1), True),
]


def edges(module, gen) -> None:
    for n, c_in, c_out, kernel, size, padding, dilation, bias in EDGES:
        x, w, b = inputs(n, c_in, c_out, kernel, size, bias, gen)
        want = reference(x, w, b, padding, dilation)
        forms = forms_that_fit(c_in, kernel, dilation[1])
        if not forms:   # (an edge no form can take would test nothing)
            raise ValueError(f"edge {(n, c_in, c_out, kernel, size)}: no form fits")
        for form in forms:
            probe = Probe(module, x, w, b, padding, dilation, form)
            probe.out.fill_(float("nan"))
            out = probe()
            torch.cuda.synchronize()
            print(f"edge {(n, c_in, c_out, kernel, size, padding, dilation, bias)} form "
                  f"{form}: error {error(out, want):.1e}, unwritten "
                  f"{int(out.isnan().sum())} of {out.numel()}", flush=True)


def timed(module, gen) -> None:
    for case in BENCH:
        if case.name not in ("2d-1024", "2d-3x7-512", "2d-64to128"):
            continue
        x, w, b = inputs(case.batch, case.in_channels, case.out_channels, case.kernel_size,
                         case.size, case.bias, gen)
        padding, dilation = case.padding, case.dilation
        want = reference(x, w, b, padding, dilation)
        calls = {"torch": lambda: F.conv_transpose2d(x, w, b, padding=padding,
                                                      dilation=dilation),
                 "gemmconv": lambda: gemmconv.conv_transpose2d(x, w, b, padding=padding,
                                                               dilation=dilation)}
        for form in forms_that_fit(case.in_channels, case.kernel_size, dilation[1]):
            calls["probe s{}p{}o{}m{}".format(*form)] = Probe(module, x, w, b, padding,
                                                              dilation, form)
        if case.name == "2d-1024":
            for form in ABLATIONS:
                for ablate in ("_a1", "_a2"):
                    calls["probe s{}p{}o{}m{}".format(*form) + ablate] = Probe(
                        module, x, w, b, padding, dilation, form, ablate)
        errors = {}
        for name, call in calls.items():
            if name.startswith("probe"):
                call.out.fill_(float("nan"))
            errors[name] = error(call(), want)
        del want
        ms = timers(torch.device("cuda"), calls, 15)
        print(f"{case.name} {tuple(x.shape)} k{case.kernel_size} bf16 channels_last:", flush=True)
        for name in calls:
            print(f"  {name:17s} {ms[name]:7.3f} ms  {case.flops / ms[name] / 1e9:5.0f} TFLOP/s"
                  f"  {ms['torch'] / ms[name]:5.2f}x torch  error {errors[name]:.1e}", flush=True)


def profiled(module, gen, form: tuple) -> None:
    """2d-1024 in ``form``, called three times and nothing else: for ncu's
    ``--launch-skip 2 --launch-count 1`` on the kernel."""
    case = next(c for c in BENCH if c.name == "2d-1024")
    x, w, b = inputs(case.batch, case.in_channels, case.out_channels, case.kernel_size,
                     case.size, case.bias, gen)
    probe = Probe(module, x, w, b, case.padding, case.dilation, form)
    for _ in range(3):
        probe()
    torch.cuda.synchronize()


def main() -> None:
    module = build(SOURCE)
    gen = torch.Generator("cuda").manual_seed(0)
    if "--profile" in sys.argv:   # --profile S,P,O,M: one form's kernel for ncu
        form = tuple(int(v) for v in sys.argv[sys.argv.index("--profile") + 1].split(","))
        profiled(module, gen, form)
        return
    edges(module, gen)
    if "--edges" not in sys.argv:   # (--edges: the small shapes only, as under a sanitizer)
        timed(module, gen)


if __name__ == "__main__":
    main()
