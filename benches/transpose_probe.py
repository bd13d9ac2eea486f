"""H200 probe of fused.channels_innermost (a planar input's copy to the fused kernel's layout):
its rate against torch's permuted copy and the measured copy bandwidth, for a few tiles, on
the planar inputs of the cases the fused route takes.

    PYTHONPATH=. python benches/transpose_probe.py
"""
import sys

import torch
import triton.testing

from gemmconv import fused

sys.path.insert(0, "benches")
from overhead import patched  # noqa: E402

SHAPES = [("2d-1024", (8, 64, 1024, 1024)), ("2d-3x7-512", (8, 64, 512, 512)),
          ("2d-64to128", (64, 64, 128, 256)), ("2d-512x1024", (8, 32, 512, 1024)),
          ("1d-65536", (64, 128, 65536)), ("1d-dil3", (32, 32, 131072)), ("dcgan-4", (128, 128, 16, 16))]
TILES = [(64, 64), (32, 128), (64, 128), (128, 64), (32, 64), (16, 256)]


def bench(fn):
    return triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")


def main():
    print(torch.cuda.get_device_name(), flush=True)
    big = torch.empty(1 << 28, device="cuda")
    copy_bw = 2 * big.numel() * 4 / bench(lambda: big.clone()) / 1e9
    print(f"copy bandwidth (read + write): {copy_bw:.2f} TB/s", flush=True)
    default = fused._transpose_tile
    for name, shape in SHAPES:
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(shape, device="cuda", dtype=dtype)
            moved = 2 * x.numel() * x.element_size()
            t_torch = bench(lambda: x.movedim(1, -1).contiguous())
            line = [f"{name} {str(dtype)[6:]} torch {t_torch:.3f} ms ({moved / t_torch / 1e9:.2f} TB/s)",
                    f"default {default(shape[1], x.element_size())}"]
            for bc, bp in TILES:
                with patched(fused, "_transpose_tile", lambda c, e: (bc, bp * 4 // e)):
                    try:
                        ok = torch.equal(fused.channels_innermost(x, True),
                                         fused.round_tf32(x.movedim(1, -1)) if dtype == torch.float32 else x.movedim(1, -1))
                        t = bench(lambda: fused.channels_innermost(x, True))
                        line.append(f"({bc},{bp * 4 // x.element_size()}) {t:.3f} {moved / t / 1e9:.2f}TB/s{'' if ok else ' WRONG'}")
                    except Exception as e:
                        line.append(f"({bc},{bp}) failed {str(e)[:80]}")
            print(" | ".join(line), flush=True)


if __name__ == "__main__":
    sys.exit(main())
