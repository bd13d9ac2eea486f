"""Where a converted model's step spends host time, module by module (session 50: the VAE
decoder's float32 channels_last forward reads 0.92x converted, each layer alone faster,
with graphs on; paused, 0.50x).

Per configuration and per model (torch's, converted), steps in turns: the host's time to
issue a step (the clock read before the call and on its return, with the GPU synchronized
before; a step whose kernels take less than its issue leaves the launch queue short, so
this is the host's own time), the step's time to its end, and per module the host time of
its forward (forward pre- and post-hooks; hooks cost both models alike). Printed: the
medians, and the modules whose forward host time differs most between the two.

    PYTHONPATH=. python benches/issue_probe.py [REPEATS] [model:precision:layout:mode ...]

On a machine without a GPU it runs the zoo's reduced sizes (a check that it runs).
"""
import collections
import copy
import statistics
import sys
import time

import torch

from gemmconv import nn as gnn

sys.path.insert(0, "benches")
from probe_lib import zoo_setup  # noqa: E402

CONFIGS = ["vae:float32:channels_last:forward", "vae:float32:NCHW:forward",
           "vae:float32:channels_last:train", "dcgan:float32:channels_last:train",
           "dcgan:float32:NCHW:train"]


def hooked(model: torch.nn.Module, times: dict) -> None:
    """Per leaf module, its forward's host microseconds appended to ``times[name]``."""
    for name, module in model.named_modules():
        if next(module.children(), None) is not None:
            continue
        start = {}
        module.register_forward_pre_hook(lambda m, i, start=start: start.update(t=time.perf_counter()))
        module.register_forward_hook(lambda m, i, o, start=start, name=name: times[name].append(
            (time.perf_counter() - start["t"]) * 1e6))


def main(args: list[str]) -> None:
    repeats = int(args.pop(0)) if args and args[0].isdigit() else 30
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    print(torch.cuda.get_device_name() if device.type == "cuda" else "CPU, reduced sizes",
          flush=True)
    for config in args or CONFIGS:
        setup, step_of = zoo_setup(config, device)
        models = {"torch": setup.model, "ours": gnn.convert(copy.deepcopy(setup.model))}
        issue = {k: [] for k in models}
        whole = {k: [] for k in models}
        modules = {k: collections.defaultdict(list) for k in models}
        steps = {k: step_of(m) for k, m in models.items()}
        for k, m in models.items():
            for _ in range(3):
                steps[k]()       # warm: plans, graphs captured
            hooked(m, modules[k])
            modules[k].clear()
        for _ in range(repeats):
            for k, step in steps.items():
                sync()
                t0 = time.perf_counter()
                step()
                t1 = time.perf_counter()
                sync()
                t2 = time.perf_counter()
                issue[k].append((t1 - t0) * 1e6)
                whole[k].append((t2 - t0) * 1e6)
        print(f"== {config}", flush=True)
        for k in models:
            print(f"  {k:6s} issue {statistics.median(issue[k]):7.0f} us, to the end "
                  f"{statistics.median(whole[k]):7.0f} us, module forwards "
                  f"{sum(statistics.median(v) for v in modules[k].values()):7.0f} us", flush=True)
        diffs = sorted(((statistics.median(modules['ours'][n]) - statistics.median(v), n,
                        statistics.median(v)) for n, v in modules["torch"].items()),
                       reverse=True)
        for d, n, t in diffs[:6] + diffs[-2:]:
            print(f"    module {n:8s} torch {t:6.1f} us, ours {d:+6.1f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
