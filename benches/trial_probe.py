"""What does timing cuBLASLt's candidates (gemm.ALGORITHM_TRIALS) buy? Per benchmark case
and configuration: each product's trial (its first candidate's time against the fastest's),
then the call with trials against the call with cuBLASLt's first choice (ALGORITHM_TRIALS =
1), plans and graphs made afresh for each, torch alongside (bench.Workload; median of 10
calls each, in one process).

    PYTHONPATH=. python benches/trial_probe.py [fwd|cl|train|train-bf16 ...] [-- CASE ...]
"""
import sys

import torch

from gemmconv import bench, cases, gemm
from gemmconv.measure import timers

sys.path.insert(0, "benches")
from overhead import patched  # noqa: E402

CONFIGS = {"fwd": (torch.float32, False, False), "cl": (torch.float32, False, True),
           "train": (torch.float32, True, False), "train-bf16": (torch.bfloat16, True, False)}


def main() -> int:
    args = sys.argv[1:]
    names = args[args.index("--") + 1:] if "--" in args else []
    configs = [a for a in (args[:args.index("--")] if "--" in args else args)] or list(CONFIGS)
    device = torch.device("cuda")
    print(torch.cuda.get_device_name(), flush=True)
    trials = []
    timed = gemm._timed

    def recorded(run, count, device):
        times = timed(run, count, device)
        trials.append(times)
        return times
    gemm._timed = recorded
    for config in configs:
        dtype, backward, interleaved = CONFIGS[config]
        for case in cases.BENCH:
            if names and case.name not in names or interleaved and case.nd == 1:
                continue
            work = bench.Workload(case, dtype, device, backward, interleaved=interleaved)
            ours = work.runner("gemmconv")
            with patched(gemm, "ALGORITHM_TRIALS", gemm.ALGORITHM_TRIALS):   # plans afresh
                gemm._products.clear()
                trials.clear()
                ours()
                with_trials = timers(device, {"t": ours, "torch": work.runner("torch")}, 10)
                found = [f"{t[0]:.3f}->{min(t):.3f} (#{t.index(min(t))} of {len(t)})"
                         for t in trials]
            with patched(gemm, "ALGORITHM_TRIALS", 1):
                gemm._products.clear()
                ours()
                first = timers(device, {"f": ours}, 10)["f"]
            gemm._products.clear()
            print(f"{case.name} {config} | torch {with_trials['torch']:.3f} | trials "
                  f"{with_trials['t']:.3f} ({with_trials['torch'] / with_trials['t']:.2f}x) | "
                  f"first choice {first:.3f} ({with_trials['torch'] / first:.2f}x) | "
                  f"products: {', '.join(found) or 'none timed'}", flush=True)
            del work, ours
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
