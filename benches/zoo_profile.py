"""Where a converted zoo model loses its time: torch's model against ``convert(model)``
(every transposed convolution swapped), per configuration:

- ms a step back to back, each variant against torch's in turns (measure.timed, paired);
- the host's ms a step with the GPU kept busy (a sleep kernel queued first), so that only
  the host's time counts;
- the GPU's kernels' ms a step (torch.profiler), and the kernels whose time differs most
  between the two, by name.

Session 48's A (sample_trace_probe.py, H100) read the VAE decoder's float32 channels_last
forward at 0.71x and DCGAN's float32 channels_last step at 0.75x, swapped blindly.

    PYTHONPATH=. python benches/zoo_profile.py [model:precision:layout:mode ...]
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
from sync_probe import host_time, sleep_cycles  # noqa: E402

CONFIGS = ["vae-decoder:float32:channels_last:forward", "vae-decoder:float32:NCHW:train",
           "dcgan:float32:channels_last:train", "dcgan:bf16-autocast:channels_last:train"]


def kernels(step, repeats: int = 10) -> dict:
    """GPU ms a step of each kernel ``step`` launches, by name."""
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            step()
        torch.cuda.synchronize()
    totals: dict = collections.defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            totals[event.name[:80]] += event.device_time / 1e3 / repeats
    return totals


def main() -> None:
    device = torch.device("cuda")
    busy = sleep_cycles()
    print(torch.cuda.get_device_name(), flush=True)
    for config in sys.argv[1:] or CONFIGS:
        base, step = zoo_config(config, device)
        steps = {"torch": step(base), "ours": step(gnn.convert(copy.deepcopy(base)))}
        t = measure.timed(device, steps, 20, "torch")
        host = {k: 1e3 * host_time(s, 20, busy) for k, s in steps.items()}
        gpu = {k: kernels(s) for k, s in steps.items()}
        print(f"\n== {config}: ms a step torch {t.ms['torch']:.3f}, ours {t.ms['ours']:.3f} "
              f"({t.speedup['ours']:.2f}x); host ms (GPU busy) torch {host['torch']:.3f}, ours "
              f"{host['ours']:.3f}; kernels ms torch {sum(gpu['torch'].values()):.3f}, ours "
              f"{sum(gpu['ours'].values()):.3f}", flush=True)
        names = set(gpu["torch"]) | set(gpu["ours"])
        diff = sorted(names, key=lambda n: -abs(gpu["ours"].get(n, 0) - gpu["torch"].get(n, 0)))
        for n in diff[:14]:
            print(f"  {gpu['torch'].get(n, 0):7.3f} {gpu['ours'].get(n, 0):7.3f}  {n}")


if __name__ == "__main__":
    main()
