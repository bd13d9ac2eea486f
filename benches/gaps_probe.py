"""Why the VAE decoder's float32 channels_last forward, swapped blindly, runs slower whole
(0.89x, session 49's J) than its layers alone (1.04-1.62x each). Per variant (torch's model,
converted), one process:

- the step back to back, paired (measure.timed);
- forward only, the host's time a step with the GPU kept busy (a sleep kernel first; a
  training step synchronises about once in ten steps, live_probe.py found);
- from a profiler trace of 20 steps: the kernels' time a step, and the GPU's idle time
  between kernels within a step, split into the gaps before our graphs' first kernels and
  the rest (a kernel of ours is one whose name starts with ``gemmconv``, ``implicit_gemm``
  or ``sm90_xmma_gemm``: the CUDA graphs' kernels).

    PYTHONPATH=. python benches/gaps_probe.py [model:precision:layout:mode ...]
"""
import copy
import sys

import torch

from gemmconv import measure
from gemmconv import nn as gnn

sys.path.insert(0, "benches")
from layer import cuda_events  # noqa: E402
from probe_lib import busy_us, zoo_setup  # noqa: E402
from sync_probe import sleep_cycles  # noqa: E402

OURS = ("gemmconv", "implicit_gemm", "sm90_xmma_gemm", "cutlass")


def trace(step, steps: int = 20) -> tuple[float, float, float]:
    """(kernel us, gap us, gap us before one of OURS) a step, from a profiler trace."""
    kernels = sorted((e.time_range.start, e.time_range.end, e.name)
                     for e in cuda_events(step, steps))
    busy = sum(end - start for start, end, _ in kernels)
    gaps = ours = 0.0
    for (_, end, _), (start, _, name) in zip(kernels, kernels[1:]):
        gap = max(start - end, 0)
        gaps += gap
        if name.startswith(OURS):
            ours += gap
    return busy / steps, gaps / steps, ours / steps


def main(configs) -> None:
    device = torch.device("cuda")
    print(torch.cuda.get_device_name(), flush=True)
    cycles = sleep_cycles()
    for config in configs or ["vae:float32:channels_last:forward",
                              "vae:float32:channels_last:train"]:
        mode = config.split(":")[3]
        setup, step_of = zoo_setup(config, device)
        models = {"torch": setup.model, "ours": gnn.convert(copy.deepcopy(setup.model))}
        steps = {k: step_of(m) for k, m in models.items()}
        timed = measure.timed(device, steps, 20, "torch")
        for k, step in steps.items():
            kernels, gaps, ours = trace(step)
            host = f"{busy_us(lambda _: step(), cycles):.0f}" if mode == "forward" else "-"
            print(f"== {config} {k}: {timed.ms[k] * 1e3:.0f} us a step back to back "
                  f"({timed.speedup[k]:.3f}x); host {host} us with the GPU busy; kernels "
                  f"{kernels:.0f} us, gaps between them {gaps:.0f} (before graphed kernels "
                  f"{ours:.0f})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
