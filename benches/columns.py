"""col2im and im2col on their own, per benchmark case, against the measured copy bandwidth.

    PYTHONPATH=. python benches/columns.py [--case NAME ...] [--width W ...] [--source FILE]
                                           [--planes-inner S ...] [--spans J ...]
                                           [--planes R ...] [--split-taps S ...]
                                           [--empty-rows-apart S ...] [--json FILE]

Per case: col2im of the forward's columns ``(N C_out, K, L)`` into its output, with bias,
and im2col of an output-sized image (the backward's grad_output) into columns of the same
shape, each one launch. Bytes moved: the columns once and the image once. Samples are cut
so the columns stay under --max-gb (the rate, not the size, is what this measures).
--width runs col2im at other COL2IM_WIDTHs, --planes-inner at other
PLANES_INNER_MAX_SPANSs (0 turns that row order off), --spans with J spans per col2im
thread wherever rows are not numbered planes innermost (0: _cuda.col2im_spans's rule, the
default), --planes with R planes per col2im thread (0: the rule), --split-taps with an
im2col thread per run and outer tap everywhere (1), nowhere (-1) or by the rule (0, the
default), --empty-rows-apart with col2im's receiving rows apart nowhere (-1) or by the rule
(0); --source times another
col2im.cu (say, an older commit's with the same kernel signatures) in the same run, for a
side-by-side comparison.
"""
import argparse
import itertools
import json
import math
from pathlib import Path

import torch

from gemmconv import _cuda, bench
from gemmconv.columns import col2im, im2col
from gemmconv.shapes import Geometry


def measure(case, device, max_bytes: int) -> dict:
    g = Geometry(case.kernel_size, case.stride, case.padding, case.dilation)
    per_sample = case.out_channels * g.taps * math.prod(case.size) * 4
    n = max(1, min(case.batch, max_bytes // per_sample))
    planes = n * case.out_channels
    columns = torch.rand(planes, g.taps, math.prod(case.size), device=device)
    bias = torch.rand(case.out_channels, device=device)
    image = torch.empty(planes, *case.output_size, device=device)
    moved = columns.numel() * 4 + image.numel() * 4
    back = torch.empty_like(columns)
    ms = {
        "col2im": bench.timer(device, lambda: col2im(columns, bias, g, case.size,
                                                      case.output_size, out=image), 10),
        "im2col": bench.timer(device, lambda: im2col(image, g, case.size, out=back), 10),
    }
    return dict(case=case.name, samples=n, gb=moved / 1e9, **{f"{k}_ms": v for k, v in ms.items()},
                **{f"{k}_tbs": moved / v / 1e9 for k, v in ms.items()})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", action="append")
    parser.add_argument("--width", type=int, action="append")
    parser.add_argument("--source", action="append", default=[], help="another col2im.cu")
    parser.add_argument("--planes-inner", type=int, action="append")
    parser.add_argument("--spans", type=int, action="append")
    parser.add_argument("--planes", type=int, action="append")
    parser.add_argument("--split-taps", type=int, action="append")
    parser.add_argument("--empty-rows-apart", type=int, action="append")
    parser.add_argument("--max-gb", type=float, default=8.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    device = torch.device("cuda")
    copy = bench.ceilings(device, torch.float32).bandwidth / 1e12
    print(f"copy bandwidth {copy:.2f} TB/s")
    rows = []
    names = ("SOURCE", "COL2IM_WIDTH", "PLANES_INNER_MAX_SPANS", "col2im_spans", "col2im_planes",
             "im2col_split_taps", "empty_rows_apart")
    defaults = [getattr(_cuda, name) for name in names]
    for source, width, planes_inner, spans, planes, split, apart in itertools.product(
            [defaults[0], *map(Path, args.source)], args.width or [defaults[1]],
            args.planes_inner or [defaults[2]], args.spans or [0], args.planes or [0],
            args.split_taps or [0], args.empty_rows_apart or [0]):
        rule = defaults[3] if spans == 0 else (
            lambda g, w, fixed, j=spans: j if fixed and not _cuda.planes_inner(g, w, fixed) else 1)
        planes_rule = defaults[4] if planes == 0 else (
            lambda g, w, fixed, r=planes: r if fixed else 1)
        split_rule = defaults[5] if split == 0 else (
            lambda g, pack, on=split > 0: on and g.nd > 1 and math.prod(g.kernel_size[:-1]) > 1)
        apart_rule = defaults[6] if apart == 0 else (lambda g, fixed: False)
        for name, value in zip(names, (source, width, planes_inner, rule, planes_rule, split_rule,
                                       apart_rule)):
            setattr(_cuda, name, value)
        _cuda._kernels.cache_clear()
        _cuda._launches.clear()   # worked out under the previous rules
        print(f"--- {source.name} ({source}), COL2IM_WIDTH {width}, "
              f"PLANES_INNER_MAX_SPANS {planes_inner}, spans per col2im thread "
              f"{spans or 'by rule'}, planes per col2im thread {planes or 'by rule'}, "
              f"im2col thread per outer tap {({0: 'by rule', 1: 'yes', -1: 'no'})[split]}, "
              f"col2im empty rows apart {'by rule' if apart == 0 else 'no'}")
        print(f"{'case':<20} {'GB':>6} {'col2im ms':>10} {'TB/s':>6} {'%copy':>6} "
              f"{'im2col ms':>10} {'TB/s':>6} {'%copy':>6}")
        for case in bench.select(args.case, True, device):
            r = measure(case, device, int(args.max_gb * 1e9))
            rows.append(dict(source=str(source), width=width, planes_inner=planes_inner,
                             spans=spans, planes=planes, split_taps=split,
                             empty_rows_apart=apart, **r))
            print(f"{r['case']:<20} {r['gb']:6.2f} {r['col2im_ms']:10.3f} {r['col2im_tbs']:6.2f} "
                  f"{100 * r['col2im_tbs'] / copy:5.0f}% {r['im2col_ms']:10.3f} "
                  f"{r['im2col_tbs']:6.2f} {100 * r['im2col_tbs'] / copy:5.0f}%", flush=True)
    for name, value in zip(names, defaults):
        setattr(_cuda, name, value)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(copy_tbs=copy, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
