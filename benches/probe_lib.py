"""What session 48's probes share: a zoo model's step in one configuration, a small layer
as torch's and gemmconv's module in one layout, graphs.launch's outcomes counted, and a
cProfile's table by own time; and what the weight-gradient probes share (session 61): a
stride-1 2-D case's float32 problem, the fused backward asked as for a planar call, the
relative error."""
import collections
import contextlib
import pstats
import time
from typing import Callable, Iterator

import torch

from gemmconv import cases, graphs, zoo
from gemmconv import nn as gnn
from gemmconv.bench import ModelSetup, model_setup, model_step
from gemmconv.shapes import ConvTransposeArgs, Geometry, conv_transpose_args
from sync_probe import busy_profile   # (benches/, as the probes' own imports)

LAYERS = {   # (module arguments, input shape): DCGAN's second up-conv, the VAE decoder's third
    "dcgan": (dict(in_channels=256, out_channels=128, kernel_size=4, stride=2, padding=1,
                   bias=False), (128, 256, 8, 8)),
    "vae": (dict(in_channels=256, out_channels=128, kernel_size=3, stride=2, padding=1,
                 output_padding=1), (16, 256, 16, 16)),
}


BUSY_CALLS = 40


def busy_us(fn, cycles: int, prepare=None, calls: int = BUSY_CALLS) -> float:
    """Host us a call of ``fn(i)``, ``calls`` calls with the GPU busy (the best of three
    rounds); ``prepare(i)`` runs first, untimed, for each."""
    best = float("inf")
    for _ in range(3):
        args = [prepare(i) if prepare else i for i in range(calls)]
        torch.cuda.synchronize()
        torch.cuda._sleep(cycles)
        t0 = time.perf_counter()
        for a in args:
            fn(a)
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return best


def zoo_setup(config: str, device: torch.device) -> tuple[ModelSetup, Callable]:
    """``config`` ("model:precision:layout:mode", as bench.model_configs names them): the
    model built as the zoo builds it (reduced sizes on the CPU), with its input and
    contexts (bench.ModelSetup), and ``step(model)``, a call of that model (or a copy of
    it) as the zoo times it, its output gradient drawn once in the model's layout."""
    name, precision, layout, mode = config.split(":")
    setup = model_setup(zoo.by_name([name])[0], device.type == "cpu", device, precision,
                        layout, mode)
    base, x, cast, grad_mode, fmt = setup
    with cast, grad_mode:
        shape = base(x).shape
    grad = torch.randn(shape, device=device)
    if fmt is not None and grad.dim() == x.dim():
        grad = grad.contiguous(memory_format=fmt)
    grad = grad if mode == "train" else None
    return setup, lambda model: model_step(model, x, cast, grad_mode, grad)


def zoo_config(config: str, device: torch.device) -> tuple[torch.nn.Module, Callable]:
    """zoo_setup's model and ``step(model)``."""
    setup, step = zoo_setup(config, device)
    return setup.model, step


def graphs_paused(step: Callable) -> Callable:
    """``step`` with gemmconv's CUDA graphs paused around it (each call launches its
    kernels one by one; the kept graphs stay kept)."""
    def run():
        with graphs.paused():
            return step()
    return run


def layer_pair(name: str, layout: str) -> tuple[torch.nn.Module, torch.nn.Module, torch.Tensor]:
    """LAYERS[name] on the GPU as torch's module and gemmconv's (the same parameters), and
    an input that requires grad, all in ``layout`` ("planar" or "channels_last")."""
    kwargs, shape = LAYERS[name]
    torch.manual_seed(0)
    theirs = torch.nn.ConvTranspose2d(**kwargs).cuda()
    ours = gnn.ConvTranspose2d(**kwargs).cuda()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(shape, device="cuda")
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
        theirs, ours = (m.to(memory_format=torch.channels_last) for m in (theirs, ours))
    return theirs, ours, x.requires_grad_()


def layer_cases() -> Iterator[tuple]:
    """``(name, layout, theirs, ours, x, grad)`` for each of LAYERS in each layout (see
    layer_pair), with an output gradient drawn in the output's layout."""
    for name in LAYERS:
        for layout in ("planar", "channels_last"):
            theirs, ours, x = layer_pair(name, layout)
            yield name, layout, theirs, ours, x, torch.randn_like(theirs(x))


@contextlib.contextmanager
def launches_counted() -> Iterator[collections.Counter]:
    """Inside, each call of graphs.launch counts, by what it finds for the call's key:
    "replayed" (a kept graph), "dropped" (a graph let go), "captured" (seen once before)
    or "first seen" (or over the graphs' memory limit)."""
    outcomes: collections.Counter = collections.Counter()
    launch = graphs.launch

    def counted(owner, addresses, run, nbytes, device, stream):
        key = (id(owner), stream, *addresses)
        outcomes["replayed" if key in graphs._graphs else "dropped" if key in graphs._dropped
                 else "captured" if key in graphs._seen else "first seen"] += 1
        return launch(owner, addresses, run, nbytes, device, stream)
    graphs.launch = counted
    try:
        yield outcomes
    finally:
        graphs.launch = launch


def profiled(fn: Callable[[], None], calls: int, busy_cycles: int, title: str,
             top: int = 24) -> None:
    """cProfile of ``fn`` (``calls`` calls of something) with the GPU kept busy by a sleep
    kernel of ``busy_cycles`` first: prints the own time a call in all, and by function."""
    stats = pstats.Stats(busy_profile(fn, busy_cycles)).stats
    print(f"  cProfile of {title}: {sum(v[2] for v in stats.values()) / calls * 1e6:.0f} us "
          "own time a call")
    for (file, line, func), (cc, nc, tt, ct, _) in sorted(stats.items(),
                                                          key=lambda kv: -kv[1][2])[:top]:
        where = file.split("site-packages/")[-1].split("/work/main/")[-1]
        print(f"    {tt / calls * 1e6:7.1f} {nc / calls:5.1f}  {func} ({where}:{line})")


def paired_variants(args: list[str], configs: list[str],
                    variants: Callable[[Callable], dict],
                    before: Callable[[], None] = lambda: None,
                    after: Callable[[], str] = lambda: "") -> None:
    """Per zoo configuration (``args`` after an optional REPEATS, else ``configs``), torch's
    model's step paired in turns (measure.timed) against each of ``variants(step)``: named
    steps made from the converted model's ``step``. Prints each variant's ms and speedup,
    then ``after()`` (``before()`` runs before the timings)."""
    import copy

    from gemmconv import measure
    repeats = int(args.pop(0)) if args and args[0].isdigit() else 15
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(torch.cuda.get_device_name() if device.type == "cuda" else "CPU, reduced sizes",
          flush=True)
    for config in args or configs:
        setup, step_of = zoo_setup(config, device)
        steps = {"torch": step_of(setup.model),
                 **variants(step_of(gnn.convert(copy.deepcopy(setup.model))))}
        before()
        timed = measure.timed(device, steps, repeats, "torch")
        print(f"== {config}: torch {timed.ms['torch']:.3f} ms a step; graphs kept "
              f"{graphs.kept()}", flush=True)
        for k in steps:
            if k != "torch":
                print(f"  {k:18s} {timed.ms[k]:.3f} ms {timed.speedup[k]:.3f}x", flush=True)
        print(after(), end="", flush=True)



# The stride-1 2-D cases of the table: the fused backward's, in float32 in both formats.
STRIDE_ONE_2D = ["2d-1024", "2d-3x7-512", "2d-64to128", "2d-512x1024", "2d-3x7-padded"]


def weight_gradient_problem(name: str, device: torch.device, smoke: bool) -> tuple:
    """Case ``name`` of the table (a stride-1 2-D one; where ``smoke``, scaled down to
    SMOKE_ELEMENTS, 4096 by default) in float32: ``(case, x, w, geometry, grad_out, args)``,
    the output gradient drawn at random."""
    import os
    case = next(c for c in cases.BENCH if c.name == name)
    case = case.scaled(int(os.environ.get("SMOKE_ELEMENTS", 4096))) if smoke else case
    x, w, _ = case.tensors(torch.float32, device)
    g = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
    grad_out = torch.randn_like(torch.nn.functional.conv_transpose2d(x, w, **case.kwargs))
    a = conv_transpose_args("conv_transpose2d", 2, x, w, None, case.stride, case.padding,
                            case.output_padding, case.groups, case.dilation)
    return case, x, w, g, grad_out, a


def backward_as_planar(takes: Callable) -> Callable:
    """``takes`` (fused.backward_takes) asked as for a planar call, so that channels_last
    calls take the fused backward where their planar twins would."""
    def as_planar(a: ConvTransposeArgs, x, weight, interleaved=False, limit=None) -> bool:
        return takes(a, x, weight, False, limit)
    return as_planar


def relative_error(got: torch.Tensor, exact: torch.Tensor) -> float:
    return ((got.double() - exact.double()).norm() / exact.double().norm()).item()


def step_against_torch(work, device: torch.device, repeats: int) -> tuple:
    """A bench.Workload's step, torch's and ours in turns (measure.samples): ``(torch ms,
    ours ms, ours' speedup, ours' error)``, the times the lower quartiles of the samples."""
    from gemmconv.measure import samples, speedups
    steps = {"torch": work.runner("torch"), "ours": work.runner("gemmconv")}
    err = work.error(steps["ours"]())
    taken = samples(device, steps, repeats)
    ms = {k: sorted(t for key, t in taken if key == k)[len(taken) // 4] for k in steps}
    return ms["torch"], ms["ours"], speedups(taken, "torch")["ours"], err
