"""Why one converted model runs twice as slow in some processes as in others.

DCGAN's float32 NCHW forward, converted, read 0.47 ms a call in some fresh processes and
0.92-1.04 in others, torch's 0.76-0.82 in both (benches/NOTES.md, sessions 36 and 37),
with graphs launched on 97% of calls either way. Per process, for torch's model and the
converted one: ms a call back to back, the host's time a call with the GPU kept busy, GPU
kernel ms a call and ours by kernel (torch.profiler), the share of our calls a graph ran,
and the layout trials' choices. Run it in several fresh processes and compare.

    PYTHONPATH=. python benches/process_probe.py [model:mode:precision:layout]
"""
import collections
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, "benches")
from lt_probe import model_step, zoo_config  # noqa: E402
from sync_probe import host_time, sleep_cycles  # noqa: E402

from gemmconv import gemm, graphs  # noqa: E402
from gemmconv.measure import timers  # noqa: E402


def kernels(fn, calls: int = 20) -> dict:
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    totals = collections.defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            totals[e.name[:70]] += e.device_time / 1e3 / calls
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def main(config: str) -> None:
    base, ours, x, cast, mode = zoo_config(config)
    fns = {"torch": model_step(base, x, cast, mode), "ours": model_step(ours, x, cast, mode)}
    ms = timers(torch.device("cuda"), fns, 20, warmup=4, back_to_back=True)
    answers, launch = [], graphs.launch
    graphs.launch = lambda *args: answers.append(launch(*args)) or answers[-1]
    for _ in range(10):
        fns["ours"]()
    graphs.launch = launch
    cycles = sleep_cycles() // 4
    host = {k: min(host_time(fn, 5, cycles) for _ in range(5)) * 1e3 for k, fn in fns.items()}
    gpu = {k: kernels(fn) for k, fn in fns.items()}
    print(f"{config}: back to back torch {ms['torch']:.3f} ours {ms['ours']:.3f} ms "
          f"({ms['torch'] / ms['ours']:.2f}x) | host, GPU busy: torch {host['torch']:.3f} "
          f"ours {host['ours']:.3f} | kernels: torch {sum(gpu['torch'].values()):.3f} ours "
          f"{sum(gpu['ours'].values()):.3f} | graphs ran {sum(answers)} of {len(answers)} | "
          f"layouts copied {sum(gemm._kept_layouts.values())} of {len(gemm._kept_layouts)}")
    for k, v in list(gpu["ours"].items())[:10]:
        print(f"    {v:.4f}  {k}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "dcgan:forward:float32:NCHW")
