"""A converted depthwise layer of the zoo's decoder under bfloat16 autocast, from a float32
input, NCHW and channels_last: module calls against torch's (medians back to back), and the
kernels a call of ours runs (torch.profiler), to see where its time goes.

    PYTHONPATH=. python benches/autocast_probe.py
"""
import copy

import torch
from torch.profiler import ProfilerActivity, profile

import gemmconv
from gemmconv import measure


def main() -> None:
    device = torch.device("cuda")
    for shape in [(16, 256, 16, 16), (16, 128, 32, 32)]:
        c = shape[1]
        for layout in (torch.contiguous_format, torch.channels_last):
            theirs = torch.nn.ConvTranspose2d(c, c, 4, 2, 1, groups=c, bias=False).to(device)
            theirs = theirs.to(memory_format=layout)
            ours = gemmconv.convert(copy.deepcopy(theirs))
            x = torch.randn(shape, device=device).contiguous(memory_format=layout)
            with torch.autocast("cuda", dtype=torch.bfloat16), torch.no_grad():
                ms = measure.timers(device, {"torch": lambda: theirs(x), "ours": lambda: ours(x)},
                                    20, back_to_back=True)
                print(shape, layout, {k: round(v, 4) for k, v in ms.items()}, flush=True)
                for _ in range(3):
                    ours(x)
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    for _ in range(10):
                        ours(x)
                    torch.cuda.synchronize()
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8), flush=True)


if __name__ == "__main__":
    main()
