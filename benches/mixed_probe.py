"""Why a converted model times slower in the zoo than its parts say.

Session 36 (H100, B): DCGAN's float32 NCHW forward with 3 of 5 layers swapped by
convert(sample=) timed 1.037 ms in the zoo's turns, against 0.786 for torch's model and
0.776 with all five swapped; the VAE decoder's float32 step, as converted, 5.94 ms alone
against torch's 5.24, where its host time a step (GPU kept busy) matched torch's and its
GPU kernels summed less. Per configuration, for each of the zoo's variants (torch, every,
chosen, chosen_all): the conversion reports; the time a call in the zoo's turns and alone,
back to back; and from torch.profiler over 10 calls, the GPU's kernel time a call against
the wall time a call.

    PYTHONPATH=. python benches/mixed_probe.py dcgan:forward:float32:NCHW ...
"""
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from gemmconv import bench, gemm, zoo
from gemmconv.measure import timers


def kernel_ms(fn, calls: int = 10) -> tuple:
    """(GPU kernel ms a call, wall ms a call) over ``calls`` calls back to back."""
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    gpu = sum(e.device_time_total for e in prof.key_averages() if e.device_time_total > 0
              and not e.key.startswith("cudaGraphLaunch"))
    return gpu / 1e3 / calls, wall * 1e3 / calls


def main(configs):
    device = torch.device("cuda")
    for config in configs:
        name, mode, precision, layout = config.split(":")
        entry = zoo.by_name([name])[0]
        work = bench.ModelWorkload(entry, False, device, precision, layout, mode, repeats=20)
        for variant, report in work.reports.items():
            print(f"--- {config}: convert report, {variant}\n{report}", flush=True)
        turns = timers(device, work.runners, 20, back_to_back=True)
        alone = {k: timers(device, {k: fn}, 20, back_to_back=True)[k]
                 for k, fn in work.runners.items()}
        for k, fn in work.runners.items():
            gpu, wall = kernel_ms(fn)
            print(f"{config} {k:<10}: turns {turns[k]:.3f} ms, alone {alone[k]:.3f} ms, "
                  f"profiled: kernels {gpu:.3f} ms a call, wall {wall:.3f} ms", flush=True)
        copied = sorted(str(key[1:]) for key, c in gemm._kept_layouts.items() if c)
        print(f"{config}: layout trials {len(gemm._kept_layouts)}, copied operands "
              f"{len(copied)}: {copied}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["dcgan:forward:float32:NCHW"])
