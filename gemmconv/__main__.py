"""``python -m gemmconv bench``: gemmconv against torch on the shared benchmark cases, on one
layer of the user's (``--shape``), or (``--models``) on the model zoo; ``python -m gemmconv
info``: the versions and settings a bug report needs."""
from __future__ import annotations

import argparse
import json
import math
import sys

import torch

from . import bench
from .gemm import float32_precision

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64}


def _table(rows: list[bench.Row], ceiling: bench.Ceilings) -> str:
    head = (f"{'case':<20} {'input, kernel':<36} {'torch ms':>9} {'ours ms':>9} {'speedup':>8} "
            f"{'floor ms':>9} {'err torch':>9} {'err ours':>9} {'MB torch':>9} {'MB ours':>9}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.case:<20} {r.shapes:<36} {r.torch_ms:9.3f} {r.ours_ms:9.3f} "
                     f"{r.speedup:7.2f}x {r.floor_ms:9.3f} {r.torch_error:9.1e} {r.ours_error:9.1e} "
                     f"{r.torch_extra_mb:9.0f} {r.ours_extra_mb:9.0f}")
    if rows:
        geo = math.exp(sum(math.log(r.speedup) for r in rows) / len(rows))
        lines.append(f"geometric-mean speedup {geo:.2f}x over {len(rows)} cases; "
                     f"min {min(r.speedup for r in rows):.2f}x")
    lines.append(f"ceilings: matmul {ceiling.flops / 1e12:.0f} TFLOP/s, copy "
                 f"{ceiling.bandwidth / 1e12:.2f} TB/s (read + write)")
    return "\n".join(lines)


def _progress(r: bench.Row | bench.LayoutRow) -> str:
    """A row of the case table in one line: its times and speedups."""
    if isinstance(r, bench.LayoutRow):
        return ", ".join(f"{layout} torch {r.ms['torch ' + layout]:.3f} ms, ours "
                         f"{r.ms['gemmconv ' + layout]:.3f} ms, {r.speedup[layout]:.2f}x"
                         for layout in bench.LAYOUTS)
    return f"torch {r.torch_ms:.3f} ms, ours {r.ours_ms:.3f} ms, {r.speedup:.2f}x"


def _layouts_table(rows: list[bench.LayoutRow]) -> str:
    head = (f"{'case':<20} {'input, kernel':<36} {'torch NCHW':>10} {'ours':>9} {'speedup':>8} "
            f"{'torch CL':>9} {'ours':>9} {'speedup':>8} {'CL/NCHW':>8} {'err torch':>9} "
            f"{'err ours':>9}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.case:<20} {r.shapes:<36} {r.ms['torch NCHW']:10.3f} "
                     f"{r.ms['gemmconv NCHW']:9.3f} {r.speedup['NCHW']:7.2f}x "
                     f"{r.ms['torch channels_last']:9.3f} {r.ms['gemmconv channels_last']:9.3f} "
                     f"{r.speedup['channels_last']:7.2f}x {r.ratio:8.2f} {r.torch_error:9.1e} "
                     f"{r.ours_error:9.1e}")
    if rows:
        geo = {layout: math.exp(sum(math.log(r.speedup[layout]) for r in rows) / len(rows))
               for layout in bench.LAYOUTS}
        least = min(rows, key=lambda r: r.ratio)
        lines.append(f"geometric-mean speedup: NCHW {geo['NCHW']:.2f}x, channels_last "
                     f"{geo['channels_last']:.2f}x over {len(rows)} cases")
        lines.append(f"channels_last's speedup within 10% of NCHW's (CL/NCHW >= 0.9): "
                     f"{sum(r.ratio >= 0.9 for r in rows)} of {len(rows)} cases; least "
                     f"{least.ratio:.2f} ({least.case})")
    lines.append("ms: median a call, the four calls of a case in turns; speedup: each sample "
                 "of ours against torch's samples of its format either side of it")
    return "\n".join(lines)


def _model_table(rows: list[bench.ModelRow]) -> str:
    head = (f"{'model':<12} {'mode':<8} {'precision':<14} {'layout':<14} {'torch ms':>9} "
            f"{'copy':>6} {'convert':>16} {'with sample':>22} {'all types, sample':>22} "
            f"{'err torch':>9} {'err ours':>9}")
    bound = any(r.free_ms is not None for r in rows)
    if bound:
        head += f" {'bound':>16}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.model:<12} {r.mode:<8} {r.precision:<14} {r.layout:<14} {r.torch_ms:9.3f} "
            f"{r.speedup('copy'):5.2f}x {r.every_ms:9.3f} {r.speedup('every'):5.2f}x "
            f"{r.chosen_ms:9.3f} {r.speedup('chosen'):5.2f}x {r.chosen:>5} {r.chosen_all_ms:9.3f} "
            f"{r.speedup('chosen_all'):5.2f}x {r.chosen_all:>5} "
            f"{r.torch_error:9.1e} {max(r.every_error, r.chosen_error, r.chosen_all_error):9.1e}"
            + (f" {r.free_ms:9.3f} {r.speedup('free'):5.2f}x" if bound else ""))
    for variant, name in (("copy", "a copy of torch's model (the measurement's error)"),
                          ("every", "convert(model)"), ("chosen", "convert(model, sample=x)"),
                          ("chosen_all", "every layer type, with a sample"),
                          ("free", "bound: the transposed convolutions free")):
        if rows and (variant != "free" or bound):
            speedups = [r.speedup(variant) for r in rows]
            geo = math.exp(sum(map(math.log, speedups)) / len(speedups))
            lines.append(f"{name}: geometric mean {geo:.2f}x, min {min(speedups):.2f}x")
    lines.append("ms: median a step; speedup over torch per variant, each sample against "
                 "torch's samples either side of it (copy: a deep copy of torch's model, "
                 "timed alike); k/n: layers swapped of those measured; "
                 "err: relative to float64 (output, parameter gradients), ours the largest "
                 "of the three variants'")
    if bound:
        lines.append("bound: the model with its transposed convolutions launching nothing "
                     "(only an autograd Function's host time): no implementation of them "
                     "can make the model faster than this")
    return "\n".join(lines)


def _models(args, device: torch.device) -> int:
    from . import zoo
    small = device.type != "cuda"
    rows = []
    for entry in zoo.by_name(args.model):
        for precision, layout, mode in bench.model_configs(entry):
            print(f"{entry.name} {mode} {precision} {layout} ...", file=sys.stderr, flush=True)
            rows.append(bench.measure_model(entry, small, device, precision, layout, mode,
                                            args.repeats, args.bound))
            r = rows[-1]
            print(f"  torch {r.torch_ms:.3f} ms, a copy {r.speedup('copy'):.2f}x; convert "
                  f"{r.speedup('every'):.2f}x, with sample {r.speedup('chosen'):.2f}x "
                  f"({r.chosen}), all types {r.speedup('chosen_all'):.2f}x ({r.chosen_all})"
                  + (f", bound {r.speedup('free'):.2f}x" if args.bound else ""),
                  file=sys.stderr, flush=True)
            if args.layers:
                for variant, report in rows[-1].reports.items():
                    print(f"\n{entry.name} {mode} {precision} {layout}, "
                          f"{'every layer type' if variant == 'chosen_all' else 'transposed'}:\n"
                          f"{report}\n")
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU, reduced sizes"
    print(f"\nmodel zoo on {where}; one-time kernel compilation: "
          f"{bench.compile_seconds():.2f} s (not in the timings)")
    print(_model_table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{k: v for k, v in vars(r).items() if k != "reports"} for r in rows], f,
                      indent=1)
    try:
        labels = [f"{r.model} {r.mode} {r.precision} {r.layout}" for r in rows]
        _chart(labels, {"convert(model)": [r.speedup("every") for r in rows],
                        "with sample": [r.speedup("chosen") for r in rows],
                        "all types, with sample": [r.speedup("chosen_all") for r in rows]},
               args.png, "gemmconv.convert vs torch, model zoo")
        print(f"chart: {args.png}")
    except ImportError:
        print("matplotlib not installed: no chart (pip install gemmconv[bench])")
    return 0


def _explain(case, dtype: torch.dtype, device: torch.device, interleaved: bool):
    """gemmconv.explain of ``case``'s call on ``device`` (for CUDA, on meta tensors, which
    it describes as CUDA's: nothing is allocated)."""
    from .channels_last import memory_format
    from .explain import explain
    where = "meta" if device.type == "cuda" else "cpu"
    empty = lambda *shape: torch.empty(shape, dtype=dtype, device=where)
    x = empty(case.batch, case.in_channels, *case.size)
    if interleaved:
        x = x.contiguous(memory_format=memory_format(x.dim()))
    w = empty(case.in_channels, case.out_channels // case.groups, *case.kernel_size)
    return explain(x, w, empty(case.out_channels) if case.bias else None, **case.kwargs)


def _chart(labels: list[str], series: dict[str, list[float]], path: str, title: str) -> None:
    """Bars of speedups over torch, a group per label, one bar per series (log scale)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(max(6, 0.55 * len(labels) * len(series) + 2), 4.5))
    width = 0.8 / len(series)
    for i, (name, speedups) in enumerate(series.items()):
        at = [x + (i - (len(series) - 1) / 2) * width for x in range(len(labels))]
        bars = ax.bar(at, speedups, width, label=name if len(series) > 1 else None,
                      color=["tab:green" if s >= 1 else "tab:red" for s in speedups])
        if len(series) > 1:
            for bar in bars:
                bar.set_alpha(1 - 0.25 * i)
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_yscale("log")
    if len(series) > 1:
        ax.legend(fontsize=8)
    ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("speedup over torch (log scale)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gemmconv")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("bench", help="time gemmconv against torch on the benchmark cases")
    p.add_argument("--full", action="store_true", help="all cases (default: a quick subset)")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--backward", action="store_true", help="time forward + backward")
    p.add_argument("--case", action="append",
                   help="cases whose name contains this (from all cases; repeatable)")
    p.add_argument("--channels-last", action="store_true",
                   help="inputs and output gradients channels_last (the 2-D and 3-D cases)")
    p.add_argument("--layouts", action="store_true",
                   help="time each 2-D and 3-D case on NCHW and on channels_last tensors in "
                        "turns: each format's speedup, and channels_last's over NCHW's")
    p.add_argument("--no-tf32", action="store_true",
                   help="full float32 on both sides (sets torch's cuDNN flag for this run)")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--png", default="gemmconv-bench.png", help="bar chart of speedups")
    p.add_argument("--json", help="write the rows here too")
    p.add_argument("--models", action="store_true",
                   help="time the model zoo (gemmconv.zoo) against gemmconv.convert instead: "
                        "forward and training step, float32 and bf16 autocast, NCHW and "
                        "channels_last")
    p.add_argument("--model", action="append",
                   help="with --models: models whose name contains this (repeatable)")
    p.add_argument("--layers", action="store_true",
                   help="with --models: print each layer's shape, times and route as "
                        "convert(model, sample=x) measured them")
    p.add_argument("--bound", action="store_true",
                   help="with --models: also time each model with its transposed "
                        "convolutions free (no kernels; bench.free_layers), the speedup no "
                        "implementation of them could beat")
    p.add_argument("--shape", metavar="LAYER",
                   help='one layer as torch.nn writes it, e.g. "ConvTranspose2d(256, 128, 4, '
                        'stride=2, padding=1)", on the input of --input: its row of the case '
                        'table, then the route gemmconv takes and why (gemmconv.explain)')
    p.add_argument("--input", metavar="N,C,...", help="with --shape: the input's shape")
    sub.add_parser("info", help="versions, GPU, NVRTC, kernel cache and settings, for a bug report")
    args = parser.parse_args(argv)
    if args.command == "info":
        from . import info
        print(info.report())
        return 0
    if (args.shape is None) != (args.input is None):
        parser.error("--shape and --input go together")
    if args.shape is not None:
        try:
            shape = tuple(int(n) for n in args.input.split(","))
            case = bench.case_from_layer(args.shape, shape)
        except ValueError as error:
            parser.error(str(error))

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        print(f"No CUDA GPU: timing the CPU path{'' if args.shape else ' at reduced sizes'}; "
              "these numbers say nothing about GPU speed.")
    if args.models:
        return _models(args, device)
    dtype = DTYPES[args.dtype]
    chosen = [case] if args.shape is not None else bench.select(args.case, args.full, device)
    if args.layouts and args.channels_last:
        parser.error("--layouts times both memory formats: leave out --channels-last")
    if args.channels_last or args.layouts:   # 1-D tensors have no channels_last format
        chosen = [c for c in chosen if c.nd > 1]
        if not chosen:
            flag = "--layouts" if args.layouts else "--channels-last"
            parser.error(f"{flag}: 1-D tensors have no channels_last format")
    conv = torch.backends.cudnn.conv
    before = conv.fp32_precision
    rows = []
    try:
        if args.no_tf32:
            conv.fp32_precision = "ieee"
        with float32_precision("ieee" if args.no_tf32 else "torch"):
            ceiling = bench.ceilings(device, dtype)
            for i, case in enumerate(chosen, 1):
                print(f"[{i}/{len(chosen)}] {case.name} ...", file=sys.stderr, flush=True)
                rows.append(bench.measure_layouts(case, dtype, device, args.backward, args.repeats)
                            if args.layouts else
                            bench.measure(case, dtype, device, args.backward, ceiling, args.repeats,
                                          args.channels_last))
                # As it goes, so that a run cut short still says what it measured.
                print(f"  {_progress(rows[-1])}", file=sys.stderr, flush=True)
    finally:
        conv.fp32_precision = before
    mode = (f"{args.dtype}{' no-TF32' if args.no_tf32 else ''}"
            f"{' channels_last' if args.channels_last else ''}"
            f"{' NCHW and channels_last' if args.layouts else ''}"
            f"{' fwd+bwd' if args.backward else ' forward'}")
    print(f"\n{mode} on {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU'}; "
          f"one-time kernel compilation: {bench.compile_seconds():.2f} s (not in the timings)")
    print(_layouts_table(rows) if args.layouts else _table(rows, ceiling))
    if args.shape is not None:
        print()
        print(_explain(case, dtype, device, args.channels_last))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([vars(r) for r in rows], f, indent=1)
    series = {layout: [r.speedup[layout] for r in rows] for layout in bench.LAYOUTS} \
        if args.layouts else {"speedup": [r.speedup for r in rows]}
    try:
        _chart([r.case for r in rows], series, args.png, f"gemmconv vs torch, {mode}")
        print(f"chart: {args.png}")
    except ImportError:
        print("matplotlib not installed: no chart (pip install gemmconv[bench])")
    return 0


if __name__ == "__main__":
    sys.exit(main())
