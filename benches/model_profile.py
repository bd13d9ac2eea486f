"""Where a converted small-layer model's time goes: DCGAN's generator and the VAE decoder,
float32 forward (eval, no_grad), NCHW and channels_last, torch's and convert(model)'s. Per
variant: the time a call back to back, the GPU kernels' sum (profiler), and the kernels and
host calls that take the most. In session 29 (H200) convert(model) ran DCGAN's
channels_last forward in 1.23 ms against 0.64 ms NCHW, torch 0.49 ms.

    PYTHONPATH=. python benches/model_profile.py
"""
import copy
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import gemmconv
from gemmconv import zoo

sys.path.insert(0, "benches")
from overhead import per_call_us  # noqa: E402


def main() -> int:
    print(torch.cuda.get_device_name(), flush=True)
    for entry in zoo.by_name(["dcgan", "vae"]):
        base = entry.build(False).cuda().eval()
        for layout in (torch.contiguous_format, torch.channels_last):
            for converted in (False, True):
                model = copy.deepcopy(base).to(memory_format=layout)
                if converted:
                    gemmconv.convert(model)
                x = entry.input(False, "cuda").contiguous(memory_format=layout)
                with torch.no_grad():
                    run = lambda: model(x)
                    ms = per_call_us(run, 50) / 1e3
                    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                        for _ in range(20):
                            run()
                        torch.cuda.synchronize()
                events = prof.key_averages()
                gpu = sum(e.self_device_time_total for e in events) / 20 / 1e3
                print(f"\n{entry.name} {'CL' if layout == torch.channels_last else 'NCHW'} "
                      f"{'convert' if converted else 'torch'}: {ms:.3f} ms a call, kernels {gpu:.3f} ms", flush=True)
                print(events.table(sort_by="self_device_time_total", row_limit=12, max_name_column_width=60))
                print(events.table(sort_by="cpu_time_total", row_limit=14, max_name_column_width=60))
    return 0


if __name__ == "__main__":
    sys.exit(main())
