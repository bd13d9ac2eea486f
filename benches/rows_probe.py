"""Does the channels_last forward by padded rows (channels_last.forward_by_rows) beat the
routes it competes with? Per case, channels_last, float32 (TF32) and bfloat16: torch, the
route the cost model picks now, the split route it picked before (padded rows off), and the
fused route (forced on for 3-D, where the rules keep it off; as it is for 2-D, with padded
rows forced against it), in one process (bench.measure: median of 10 calls, errors against
float64); then the kernels of the padded-rows call (layer.kernel_times).

    PYTHONPATH=. python benches/rows_probe.py [CASE ...]
"""
import sys

import torch

from gemmconv import bench, cases, fused, ops

sys.path.insert(0, "benches")
from layer import kernel_times  # noqa: E402
from overhead import patched  # noqa: E402

DEFAULT = ["3d-96cube", "3d-3x5x7", "3d-64cube", "3d-32to64", "2d-3x7-512", "2d-64to128",
           "2d-1024", "2d-3x7-padded", "2d-512x1024"]


def main() -> int:
    device = torch.device("cuda")
    names = sys.argv[1:] or DEFAULT
    print(torch.cuda.get_device_name(), flush=True)
    chosen = [c for c in cases.BENCH if c.name in names]
    for dtype in (torch.float32, torch.bfloat16):
        ceiling = bench.ceilings(device, dtype)
        print(f"{dtype}: matmul {ceiling.flops / 1e12:.0f} TFLOP/s, copy {ceiling.bandwidth / 1e12:.2f} TB/s",
              flush=True)
        for case in chosen:
            measure = lambda: bench.measure(case, dtype, device, False, ceiling, 10, interleaved=True)
            row = measure()
            cells = [f"torch {row.torch_ms:.3f}", f"now {row.ours_ms:.3f} ({row.speedup:.2f}x, "
                     f"err {row.ours_error:.1e})"]
            with patched(ops.ConvTransposeArgs, "padded_rows", lambda a: None):
                split = measure()
            cells.append(f"split {split.ours_ms:.3f} ({split.speedup:.2f}x)")
            if case.nd == 3:
                with patched(fused, "forward_preferred", lambda a, i, e: True):
                    other = measure()
                cells.append(f"fused {other.ours_ms:.3f} ({other.speedup:.2f}x)")
            else:
                with patched(fused, "forward_preferred", lambda a, i, e: False):
                    other = measure()
                cells.append(f"rows (fused off) {other.ours_ms:.3f} ({other.speedup:.2f}x, "
                             f"err {other.ours_error:.1e})")
            print(f"{case.name} {str(dtype)[6:]} CL fwd | " + " | ".join(cells)
                  + f" | floor {row.floor_ms:.3f}", flush=True)
            work = bench.Workload(case, dtype, device, False, interleaved=True)
            run = work.runner("gemmconv")
            with patched(fused, "forward_preferred", lambda a, i, e: False):   # padded rows
                for name, ms in kernel_times(run)[:4]:
                    print(f"    {ms:8.3f}  {name}", flush=True)
            if case.nd == 3:
                print("  split:", flush=True)
                with patched(ops.ConvTransposeArgs, "padded_rows", lambda a: None):
                    for name, ms in kernel_times(run)[:4]:
                        print(f"    {ms:8.3f}  {name}", flush=True)
            del work, run
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
