"""Where a converted model's step spends host time, module by module (session 50: the VAE
decoder's float32 channels_last forward reads 0.92x converted, each layer alone faster,
with graphs on; paused, 0.50x).

Per configuration and per model (torch's, converted, and converted with gemmconv's CUDA
graphs paused: does a graph's launch make the torch ops after it dearer?), steps in turns: the host's time to
issue a step (the clock read before the call and on its return, with the GPU synchronized
before; a step whose kernels take less than its issue leaves the launch queue short, so
this is the host's own time), the step's time to its end, and per module the host time of
its forward (forward pre- and post-hooks; hooks cost both models alike). Then the same
with ROW steps in a row between synchronizations (the first left out): a module that waits
for the GPU there shows; and in a row with autograd's device threads off
(torch.autograd.set_multithreading_enabled(False) around the steps). In each mode, the garbage collector's runs and time a step
(gc.callbacks; our autograd Function's objects live until the backward, where torch's
nodes are C++), and the caching allocator's cudaMalloc and cudaFree calls a step. Printed: the medians, and each module's forward host time.

    PYTHONPATH=. python benches/issue_probe.py [REPEATS] [model:precision:layout:mode ...]

On a machine without a GPU it runs the zoo's reduced sizes (a check that it runs).
"""
import collections
import copy
import gc
import statistics
import sys
import time

import torch

from gemmconv import nn as gnn

sys.path.insert(0, "benches")
from probe_lib import graphs_paused, zoo_setup  # noqa: E402

ROW = 8   # steps in a row between synchronizations
# In the last, autograd runs every node on the calling thread: how much of a converted
# step's loss is its Python node on autograd's device thread (what a C++ node would save)?
MODES = ("alone", "in a row", "in a row, device threads off")
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


watch = {"into": None, "start": 0.0}   # (where the collector's runs are counted, see gc_timed)


def gc_timed(phase: str, info: dict) -> None:
    """A gc.callbacks entry: each run of the collector, its generation and microseconds,
    counted into ``watch["into"]`` while that is set."""
    into = watch["into"]
    if into is None:
        return
    if phase == "start":
        watch["start"] = time.perf_counter()
    else:
        into[info["generation"]] += 1
        into["us"] += (time.perf_counter() - watch["start"]) * 1e6


def main(args: list[str]) -> None:
    gc.callbacks.append(gc_timed)
    repeats = int(args.pop(0)) if args and args[0].isdigit() else 30
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    print(torch.cuda.get_device_name() if device.type == "cuda" else "CPU, reduced sizes",
          flush=True)
    for config in args or CONFIGS:
        setup, step_of = zoo_setup(config, device)
        models = {"torch": setup.model, "ours": gnn.convert(copy.deepcopy(setup.model)),
                  "no graphs": gnn.convert(copy.deepcopy(setup.model))}
        kinds = {n: type(m).__name__ for n, m in models["ours"].named_modules()}
        steps = {}
        for k, m in models.items():
            step = graphs_paused(step_of(m)) if k == "no graphs" else step_of(m)
            for _ in range(3):
                step()   # warm: plans, graphs
            times = collections.defaultdict(list)
            hooked(m, times)
            steps[k] = (step, times)
        for mode in MODES:
            issue = {k: [] for k in models}
            whole = {k: [] for k in models}
            for times in [t for _, t in steps.values()]:
                times.clear()
            collected = {k: collections.Counter() for k in models}
            mallocs = {k: collections.Counter() for k in models}
            for _ in range(repeats):
                for k, (step, times) in steps.items():
                    sync()
                    calls = 1 if mode == "alone" else ROW
                    before = allocator()
                    watch.update(into=collected[k])
                    with torch.autograd.set_multithreading_enabled(
                            mode != "in a row, device threads off"):
                        t0 = time.perf_counter()
                        for i in range(calls):
                            if i == 1:   # in a row: the first step's times left out
                                t0 = time.perf_counter()
                                for v in times.values():
                                    v.pop()
                            step()
                        t1 = time.perf_counter()
                    watch.update(into=None)
                    sync()
                    t2 = time.perf_counter()
                    mallocs[k].update({key: v - before[key] for key, v in allocator().items()})
                    n = 1 if mode == "alone" else ROW - 1
                    issue[k].append((t1 - t0) * 1e6 / n)
                    whole[k].append((t2 - t0) * 1e6 / n)
            print(f"== {config}, steps {mode}", flush=True)
            for k, (_, times) in steps.items():
                print(f"  {k:9s} issue {statistics.median(issue[k]):7.0f} us a step, to the end "
                      f"{statistics.median(whole[k]):7.0f} us, module forwards "
                      f"{sum(statistics.median(v) for v in times.values()):7.0f} us; the garbage "
                      f"collector {collected[k]['us'] / repeats / n:5.0f} us a step over "
                      f"{collected[k][0] / repeats / n:.2f}, {collected[k][1] / repeats / n:.2f}, "
                      f"{collected[k][2] / repeats / n:.3f} runs of generations 0, 1, 2; the "
                      "allocator a step: " + ", ".join(f"{key} {v / repeats / n:.2f}" for key, v
                                                        in mallocs[k].items()), flush=True)
            theirs, ours, plain = (steps[k][1] for k in ("torch", "ours", "no graphs"))
            for n, v in theirs.items():
                t = statistics.median(v)
                print(f"    {n:6s} {kinds[n]:16s} torch {t:6.1f} us, ours "
                      f"{statistics.median(ours[n]) - t:+6.1f}, no graphs "
                      f"{statistics.median(plain[n]) - t:+6.1f}", flush=True)


ALLOCATOR = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_sync_all_streams")


def allocator() -> dict:
    """The caching allocator's counts of cudaMalloc and cudaFree calls, of retries after a
    failed allocation and of synchronizations of every stream (none on a CPU)."""
    if not torch.cuda.is_available():
        return {}
    stats = torch.cuda.memory_stats()
    return {key: stats.get(key, 0) for key in ALLOCATOR}


if __name__ == "__main__":
    main(sys.argv[1:])
