"""Where a converted model's step loses time that neither its host work nor its kernels
explain: torch.profiler traces (CPU with Python frames, CUDA) of a few steps back to back.

Session 36 (H100): the VAE decoder's float32 NCHW step, as convert(model) makes it, issued
its work in 5.3 ms of host time (GPU kept busy, as torch's 5.2) and ran 3.96 ms of kernels
(torch's 4.33), yet took 6.9-7.8 ms a step back to back (torch 5.8-6.5). The traces show
the GPU's idle gaps and what the host was doing meanwhile. Written to $OUT (or /tmp) as
``trace-<variant>.json``; benches/trace_gaps.py reads them.

    PYTHONPATH=. python benches/trace_probe.py [model:mode:precision:layout] [--no-stack]

``--no-stack`` leaves out the Python frames, which under the profiler double the host's
time a step: the gaps are then nearer the unprofiled step's, and named by op.
"""
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from gemmconv import bench, zoo


def main(config="vae-decoder:train:float32:NCHW", stack=True, steps=5):
    name, mode, precision, layout = config.split(":")
    entry = zoo.by_name([name])[0]
    work = bench.ModelWorkload(entry, False, torch.device("cuda"), precision, layout, mode,
                               repeats=5)
    out = os.environ.get("OUT", "/tmp")
    for variant in ("torch", "every"):
        fn = work.runners[variant]
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     with_stack=stack) as prof:
            for _ in range(steps):
                fn()
            torch.cuda.synchronize()
        path = os.path.join(out, f"trace-{variant}.json")
        prof.export_chrome_trace(path)
        print(f"{config} {variant}: {path} ({os.path.getsize(path) >> 10} KiB)", flush=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--no-stack"]
    main(*args, stack="--no-stack" not in sys.argv)
