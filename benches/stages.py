"""Where the time goes, per benchmark case: cuBLAS, col2im and everything else.

    PYTHONPATH=. python benches/stages.py [--backward] [--limit BYTES ...] [--case NAME ...]
                                          [--gathered 0/1 PER DIM [--rows]]

Runs each case under torch.profiler (CUPTI sees CuPy's kernels too), sums CUDA kernel time
by stage, and reports col2im/im2col bandwidth (column bytes read + image bytes written, or
the reverse) against the copy bandwidth, and the GEMMs against one bare cuBLAS call of the
whole problem (all samples, no chunks). Prints a table; --json writes the rows.
"""
import argparse
import json
import math

import torch
from torch.profiler import ProfilerActivity, profile

import gemmconv
from gemmconv import bench, cases, gemm, ops
from gemmconv.shapes import conv_transpose_args, gatherable


def stage(name: str) -> str:
    if "col2im" in name or "im2col" in name:
        return "columns"
    if "gemm" in name.lower() or "sm90" in name or "cutlass" in name.lower() or "xmma" in name:
        return "gemm"
    return "other"


def profile_case(work: bench.Workload, repeats: int = 3) -> dict:
    run = work.runner("gemmconv")
    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            run()
        torch.cuda.synchronize()
    totals = {"gemm": 0.0, "columns": 0.0, "other": 0.0}
    kernels: dict = {}
    launches = 0
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            ms = event.device_time / 1e3 / repeats
            totals[stage(event.name)] += ms
            kernels[event.name[:70]] = kernels.get(event.name[:70], 0.0) + ms
            launches += 1
    totals["launches"] = launches / repeats
    totals["top"] = sorted(kernels.items(), key=lambda kv: -kv[1])[:4]
    return totals


def column_bytes(case: cases.Case, a) -> tuple[int, int]:
    """Bytes of the forward's column buffers (each written once and read once) and of the
    images its column kernels read or write: im2col's input where the route gathers taps,
    col2im's output unless the GEMM writes the output itself."""
    gathered, rows = a.route()
    split = a.split(gathered)
    direct = split.direct and not rows
    images = (case.batch * case.in_channels * math.prod(case.size) if split.gather else 0) + \
        (0 if direct else case.batch * case.out_channels * math.prod(case.output_size))
    elements = split.overlap_row_elements[0] * math.prod(split.grid) * case.batch if rows \
        else case.batch * split.column_elements(a.groups)
    return 2 * elements * 4, images * 4


def bare_gemm_ms(case: cases.Case, a) -> float:
    """One cuBLAS call of the forward's GEMM over all samples at once (no chunks), with the
    shape of the route the case takes (row products on overlapping operands, as the route
    runs them), with the faster layout of the weight; NaN where its operands would take
    over 30 GB."""
    (gathered, rows), g = a.route(), case.groups
    split = a.split(gathered)
    cells = math.prod(split.grid)
    k = split.gather_rows
    m = case.out_channels if split.direct and not rows else split.scatter_rows
    if rows:
        k0, r = split.gather.kernel_size[0], split.grid[0]
        width = case.batch * cells // r
        if 4 * (k // k0 * (r + k0 - 1) + m * r) * width > 30e9:
            return float("nan")
        x = torch.randn(r + k0 - 1, k // k0, width, device="cuda")
        operands = x.as_strided((1, r, k, width), (0, k // k0 * width, width, 1))
        out = x.new_empty(1, r, m, width)
        w = torch.randn(k, m, device="cuda").t().expand(1, r, m, k)
        return _either_layout(w, operands, out)
    if 4 * case.batch * g * (k + m) * cells > 30e9:
        return float("nan")
    x = torch.randn(case.batch, g, k, cells, device="cuda")
    out = x.new_empty(case.batch, g, m, cells)
    w = torch.randn(1, g, k, m, device="cuda").transpose(-1, -2).expand(case.batch, -1, -1, -1)
    return _either_layout(w, x, out)


def _either_layout(w: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> float:
    """The faster of the bare cuBLAS calls ``w @ b`` with the weight as given and copied into
    the other layout (the two gemm.matmul chooses between)."""
    other = gemm._other_layout(w, gemm._distinct(w))
    return min(bench.timer(out.device, lambda a=a: gemm._cublas_matmul(a, b, out), 5)
               for a in (w, other))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", action="append")
    parser.add_argument("--limit", type=int, action="append")
    parser.add_argument("--backward", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--top", action="store_true", help="the four costliest kernels per case")
    parser.add_argument("--gathered", help="force the forward's route: the dims whose taps "
                        "im2col gathers, as 0/1 per dim (e.g. 01), by split kernels, on cases "
                        "where it applies")
    parser.add_argument("--rows", action="store_true", help="with --gathered, as row products "
                        "(where that split allows them)")
    args = parser.parse_args()
    if args.gathered:
        mask = tuple(c == "1" for c in args.gathered)
        chosen = ops.ConvTransposeArgs.route

        def forced(a):
            g = a.geometry
            if len(mask) != g.nd or not all(gatherable(g, d) for d in range(g.nd) if mask[d]):
                return chosen(a)
            if args.rows and not (a.groups == 1 and a.split(mask).overlaps):
                return chosen(a)
            return mask, args.rows
        ops.ConvTransposeArgs.route = forced
    device = torch.device("cuda")
    ceiling = bench.ceilings(device, torch.float32)
    rows = []
    print(f"{'case':<20} {'limit MB':>8} {'total':>8} {'gemm':>8} {'bare':>8} {'columns':>8} "
          f"{'other':>7} {'TB/s':>6} {'launch':>6} {'torch':>8}")
    for case in bench.select(args.case, True, device):
        work = bench.Workload(case, torch.float32, device, args.backward)
        torch_ms = bench.timer(device, work.runner("torch"), 10)
        a = conv_transpose_args("", case.nd, work.x, work.w, None, case.stride, case.padding,
                                case.output_padding, case.groups, case.dilation)
        col_bytes, image_bytes = column_bytes(case, a)
        bare = bare_gemm_ms(case, a)
        for limit in args.limit or [gemmconv.get_workspace_limit()]:
            before = gemmconv.get_workspace_limit()
            gemmconv.set_workspace_limit(limit)
            try:
                total = bench.timer(device, work.runner("gemmconv"), 10)
                t = profile_case(work)
            finally:
                gemmconv.set_workspace_limit(before)
            bandwidth = (col_bytes / 2 + image_bytes) / (t["columns"] / 1e3) / 1e12 \
                if not args.backward else float("nan")
            row = dict(case=case.name, limit_mb=limit >> 20, total_ms=total, gemm_ms=t["gemm"], top=t["top"],
                       bare_gemm_ms=bare, columns_ms=t["columns"], other_ms=t["other"],
                       columns_tbs=bandwidth, launches=t["launches"], torch_ms=torch_ms)
            rows.append(row)
            if args.top:
                for name, ms in t["top"]:
                    print(f"    {ms:8.3f} ms  {name}")
            print(f"{case.name:<20} {limit >> 20:8d} {total:8.3f} {t['gemm']:8.3f} {bare:8.3f} "
                  f"{t['columns']:8.3f} {t['other']:7.3f} {bandwidth:6.2f} {t['launches']:6.0f} "
                  f"{torch_ms:8.3f}", flush=True)
    print(f"copy bandwidth {ceiling.bandwidth / 1e12:.2f} TB/s, matmul {ceiling.flops / 1e12:.0f} TFLOP/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
