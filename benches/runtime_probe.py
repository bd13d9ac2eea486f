"""Does a converted zoo model's step make the host wait for the GPU? Session 48's B
(zoo_profile.py, H100) read DCGAN's float32 channels_last step at 3.72 ms back to back with
our layers against 3.01 with torch's, though ours took less GPU time (1.06 against 1.61
ms a step). Per variant: the CUDA runtime and driver calls a step (torch.profiler's CPU
events named cuda* / cu*), their count and host ms a step, and the GPU's idle time between
kernels within a step.

    PYTHONPATH=. python benches/runtime_probe.py [model:precision:layout:mode ...]
"""
import collections
import copy
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from gemmconv import measure
from gemmconv import nn as gnn

sys.path.insert(0, "benches")
from probe_lib import zoo_config  # noqa: E402

CONFIGS = ["dcgan:float32:channels_last:train", "dcgan:bf16-autocast:channels_last:train",
           "vae-decoder:float32:NCHW:train"]


def main() -> None:
    device = torch.device("cuda")
    print(torch.cuda.get_device_name(), flush=True)
    steps_n = 20
    for config in sys.argv[1:] or CONFIGS:
        base, step = zoo_config(config, device)
        steps = {"torch": step(base), "ours": step(gnn.convert(copy.deepcopy(base)))}
        for threads in (True, False):
            with torch.autograd.set_multithreading_enabled(threads):
                t = measure.timed(device, steps, 10, "torch")
            print(f"== {config} device threads {'on' if threads else 'off'}: torch "
                  f"{t.ms['torch']:.3f} ms, ours {t.ms['ours']:.3f} ({t.speedup['ours']:.2f}x)",
                  flush=True)
        for variant, run in steps.items():
            for _ in range(5):
                run()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(steps_n):
                    run()
                torch.cuda.synchronize()
            calls: dict = collections.defaultdict(lambda: [0, 0.0])
            kernels = []
            for e in prof.events():
                if e.device_type == torch.autograd.DeviceType.CUDA:
                    kernels.append((e.time_range.start, e.time_range.end))
                elif e.name.startswith(("cuda", "cu")) and not e.name.startswith("cudnn"):
                    calls[e.name][0] += 1
                    calls[e.name][1] += (e.time_range.end - e.time_range.start) / 1e3
            kernels.sort()
            busy, end, first = 0.0, None, kernels[0][0] if kernels else 0
            for s, t in kernels:
                if end is None or s >= end:
                    busy += t - s
                    end = t
                elif t > end:
                    busy += t - end
                    end = t
            span = ((end or 0) - first) / 1e3 / steps_n
            print(f"== {config} {variant}: GPU span {span:.3f} ms a step, busy "
                  f"{busy / 1e3 / steps_n:.3f}", flush=True)
            for n, (count, ms) in sorted(calls.items(), key=lambda kv: -kv[1][1])[:12]:
                print(f"   {count / steps_n:6.1f} calls {ms / steps_n:7.3f} ms  {n}")


if __name__ == "__main__":
    main()
