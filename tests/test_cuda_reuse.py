"""GPU: convolutions, fold/unfold, torch.compile, CUDA graphs, autocast. Marked ``cuda``."""
import copy

import pytest
import torch
import torch.nn.functional as F

import gemmconv
from gemmconv import _cuda
from helpers import generator, rel_error
from test_reuse import CONV, CONV_CASES, FOLDABLE, _conv_kwargs, _fold_args, _model

pytestmark = pytest.mark.cuda
CUDA = "cuda"
MODES = {"float64": (torch.float64, 1e-12), "float32-tf32": (torch.float32, 5e-3),
         "bfloat16": (torch.bfloat16, 3e-2)}


@pytest.mark.parametrize("fixed", [False, True], ids=["generic", "specialised"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CONV_CASES[:50], ids=lambda c: c.name)
def test_conv_matches_float64(monkeypatch, case, mode, fixed):
    if fixed:
        monkeypatch.setattr(_cuda, "SPECIALIZE_MIN_ELEMENTS", 0)
    dtype, tolerance = MODES[mode]
    theirs, ours = CONV[case.nd]
    gen = generator(case.name, mode)
    shape = (case.in_channels, *case.size) if case.unbatched else (case.batch, case.in_channels, *case.size)
    x64 = torch.randn(shape, generator=gen, dtype=torch.float64)
    w64 = torch.randn(case.out_channels, case.in_channels // case.groups, *case.kernel_size,
                      generator=gen, dtype=torch.float64)
    b64 = torch.randn(case.out_channels, generator=gen, dtype=torch.float64)
    x, w, b = (t.to(CUDA, dtype).requires_grad_() for t in (x64, w64, b64))
    out = ours(x, w, b, **_conv_kwargs(case))
    ref64 = [t.to(dtype).double().to(CUDA).requires_grad_() for t in (x64, w64, b64)]
    ref = theirs(*ref64, **_conv_kwargs(case))
    assert out.dtype == dtype and rel_error(out, ref) < tolerance
    if out.numel():
        grad = torch.randn(out.shape, generator=generator(case.name, "g"), dtype=torch.float64).to(CUDA)
        for m, t in zip(torch.autograd.grad(out, (x, w, b), grad.to(dtype)),
                        torch.autograd.grad(ref, ref64, grad)):
            assert m.dtype == dtype and rel_error(m, t) < tolerance


@pytest.mark.parametrize("case", [c for c in FOLDABLE if c.nd == 2][:40] +
                         [c for c in FOLDABLE if c.nd == 2 and c.batch == 0], ids=lambda c: c.name)
def test_fold_unfold_on_cuda_match_torch(case):
    x = torch.randn(case.batch, case.in_channels, *case.output_size,
                    generator=generator(case.name, "fold")).to(CUDA)
    kw = _fold_args(case)
    columns = gemmconv.im2col(x, **kw)
    assert torch.equal(columns, F.unfold(x, **kw))
    u = torch.randn(columns.shape, generator=generator(case.name, "u")).to(CUDA)
    assert rel_error(gemmconv.col2im(u, case.output_size, **kw), F.fold(u, case.output_size, **kw)) < 1e-6


def test_torch_compile_inductor_fullgraph():
    model = gemmconv.convert(_model().float().to(CUDA), types=(torch.nn.Conv2d, torch.nn.ConvTranspose2d))
    compiled = torch.compile(model, fullgraph=True)
    x = torch.randn(2, 3, 20, 18, device=CUDA, requires_grad=True)
    out, ref = compiled(x), model(x)
    assert rel_error(out, ref) < 1e-5
    assert rel_error(torch.autograd.grad(out.sum(), x)[0], torch.autograd.grad(ref.sum(), x)[0]) < 1e-5


def test_cuda_graph_capture_and_replay():
    model = gemmconv.convert(_model().float().to(CUDA), types=(torch.nn.Conv2d, torch.nn.ConvTranspose2d))
    static_x = torch.randn(2, 3, 20, 18, device=CUDA)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):                 # warm up: compile kernels, create the cuBLAS handle
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = model(static_x)
    for seed in range(3):
        x = torch.randn(2, 3, 20, 18, device=CUDA, generator=torch.Generator(CUDA).manual_seed(seed))
        static_x.copy_(x)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(static_out, model(x))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_autocast_on_cuda_casts_like_torch(dtype):
    x = torch.randn(2, 4, 9, 7, device=CUDA)
    for torch_module in (torch.nn.ConvTranspose2d(4, 3, 3, stride=2).to(CUDA), torch.nn.Conv2d(4, 3, 3).to(CUDA)):
        ours = gemmconv.convert(copy.deepcopy(torch.nn.Sequential(torch_module)), types=(type(torch_module),))[0]
        with torch.autocast("cuda", dtype=dtype):
            mine, theirs = ours(x), torch_module(x)
        assert mine.dtype == theirs.dtype == dtype and rel_error(mine, theirs) < 3e-2


def _weight_casts(out: torch.Tensor, weight: torch.Tensor) -> list:
    """The autograd nodes through which ``out`` reaches ``weight``'s gradient: its casts.
    (A C++ node's Python object is made when asked for and kept while it lives: so one
    node reads as one object only while its object is kept.)"""
    return [fn for fn, _ in out.grad_fn.next_functions if fn is not None and
            any(getattr(f, "variable", None) is weight for f, _ in fn.next_functions)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_autocast_on_cuda_casts_a_weight_once_a_region(dtype):
    """A converted layer trained in a loop inside one autocast region (steady from its third
    call: kept graphs, the C++ node) reaches its weight through one cast, as torch's layer
    does, and each step's output and gradients match float64's on a fresh input; float64
    calls stay float64."""
    for torch_module in (torch.nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1).to(CUDA),
                         torch.nn.Conv2d(64, 32, 3, padding=1).to(CUDA)):
        ours = gemmconv.convert(copy.deepcopy(torch.nn.Sequential(torch_module)), types=(type(torch_module),))[0]
        double = copy.deepcopy(torch_module).double()
        for module in (torch_module, ours):
            casts = []   # (kept: see _weight_casts)
            with torch.autocast("cuda", dtype=dtype):
                for step in range(5):
                    g = generator(type(module).__name__, str(dtype), step)
                    x = torch.randn(8, 64, 12, 10, generator=g, dtype=torch.float64).to(CUDA)
                    out = module(x.float().requires_grad_())
                    assert out.dtype == dtype
                    grad = torch.randn(out.shape, generator=g, dtype=torch.float64).to(CUDA)
                    mine = torch.autograd.grad(out, module.weight, grad.to(dtype))[0]
                    out64 = double(x)   # (float64: autocast leaves it alone)
                    ref = torch.autograd.grad(out64, double.weight, grad)[0]
                    assert out64.dtype == torch.float64
                    assert rel_error(out, out64) < 2e-2 and rel_error(mine, ref) < 2e-2
                    casts += _weight_casts(out, module.weight)
                w = torch.randn(64, 3, 3, 3, generator=g, dtype=torch.float64).to(CUDA)
                out = gemmconv.conv_transpose2d(x, w)
                assert out.dtype == torch.float64 and rel_error(out, F.conv_transpose2d(x, w)) < 1e-12
            assert len(casts) == 5 and len({id(c) for c in casts}) == 1, \
                f"{'torch' if module is torch_module else 'ours'}, {type(module).__name__}: " \
                f"{len({id(c) for c in casts})} casts of its weight"


def test_channels_last_and_module_moves_on_cuda():
    model = gemmconv.convert(_model(), types=(torch.nn.Conv2d, torch.nn.ConvTranspose2d))
    x = torch.randn(2, 3, 12, 10, dtype=torch.float64)
    ref = model(x)
    model.to(CUDA)
    assert rel_error(model(x.to(CUDA).to(memory_format=torch.channels_last)), ref) < 1e-12
    model.half()
    out = model(x.to(CUDA, torch.float16))
    assert out.dtype == torch.float16 and rel_error(out, ref) < 1e-2
    model.to("cpu", torch.float64)
    assert rel_error(model(x), ref) < 1e-3
