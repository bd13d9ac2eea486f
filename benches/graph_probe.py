"""Small layers per call with their replays launched as CUDA graphs (gemmconv.graphs) and
without, torch beside them: forward (no_grad) and training step
(forward + autograd.grad), back to back, in turns, channels_last and planar, float32 and
bfloat16. Each row also checks that the graphs' outputs are the launches' bit for bit.

    PYTHONPATH=. python benches/graph_probe.py [NAMES]
"""
import statistics
import sys

import torch
import torch.nn.functional as F

from gemmconv import conv_transpose2d, graphs

sys.path.insert(0, "benches")
from overhead import per_call_us  # noqa: E402

LAYERS = [("dcgan-1", 128, 512, 256, 4, 4, 2, 1), ("dcgan-2", 128, 256, 128, 4, 8, 2, 1),
          ("dcgan-3", 128, 128, 64, 4, 16, 2, 1), ("vae-3", 16, 256, 128, 3, 16, 2, 1),
          ("unet-0", 8, 1024, 512, 2, 16, 2, 0), ("unet-1", 8, 512, 256, 2, 32, 2, 0),
          ("unet-2", 8, 256, 128, 2, 64, 2, 0), ("unet-3", 8, 128, 64, 2, 128, 2, 0)]


def without_graphs(fn):
    """``fn`` with every replay launching its kernels one by one (graphs.launch declines),
    the kept graphs left as they are."""
    def call():
        launch = graphs.launch
        graphs.launch = lambda *args: False
        try:
            return fn()
        finally:
            graphs.launch = launch
    return call


def main():
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else None
    print(torch.cuda.get_device_name(), flush=True)
    for name, n, cin, cout, k, size, s, p in LAYERS:
        if names and name not in names:
            continue
        for layout in ("channels_last", "planar"):
            for dtype in (torch.float32, torch.bfloat16):
                fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
                x = torch.randn(n, cin, size, size, device="cuda", dtype=dtype).contiguous(
                    memory_format=fmt)
                w = torch.randn(cin, cout, k, k, device="cuda", dtype=dtype) / (cin * k) ** .5
                b = torch.randn(cout, device="cuda", dtype=dtype)
                op = 1 if k == 3 else 0
                xg, wg, bg = (t.clone().requires_grad_() for t in (x, w, b))
                grad = torch.randn(n, cout, (size - 1) * s - 2 * p + k + op, (size - 1) * s - 2 * p + k + op,
                                   device="cuda", dtype=dtype).contiguous(memory_format=fmt)

                def fwd(impl):
                    def call():
                        with torch.no_grad():
                            return impl(x, w, b, s, p, op)
                    return call

                def step(impl):
                    return lambda: torch.autograd.grad(impl(xg, wg, bg, s, p, op), (xg, wg, bg), grad)

                graphs.forget()
                ours = conv_transpose2d
                fns = {"fwd torch": fwd(F.conv_transpose2d), "fwd graphs": fwd(ours),
                       "fwd launches": without_graphs(fwd(ours)),
                       "step torch": step(F.conv_transpose2d), "step graphs": step(ours),
                       "step launches": without_graphs(step(ours))}
                # Bit for bit: graphs (after two calls, the third launches one) against launches.
                for kind in ("fwd", "step"):
                    for _ in range(3):
                        on = fns[f"{kind} graphs"]()
                    off = fns[f"{kind} launches"]()
                    pairs = [(on, off)] if kind == "fwd" else list(zip(on, off))
                    same = all(torch.equal(u, v) for u, v in pairs)
                    if not same:
                        print(f"  MISMATCH {name} {layout} {dtype} {kind}", flush=True)
                times = {key: [] for key in fns}
                for _ in range(3):
                    for key, fn in fns.items():
                        times[key].append(per_call_us(fn, 200))
                t = {key: statistics.median(v) for key, v in times.items()}
                print(f"{name:8s} {layout:13s} {str(dtype)[6:]:9s} us/call | fwd torch "
                      f"{t['fwd torch']:6.1f} graphs {t['fwd graphs']:6.1f} launches "
                      f"{t['fwd launches']:6.1f} | step torch {t['step torch']:6.1f} graphs "
                      f"{t['step graphs']:6.1f} launches {t['step launches']:6.1f} | kept "
                      f"{graphs.kept()}", flush=True)


if __name__ == "__main__":
    main()
