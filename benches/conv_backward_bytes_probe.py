"""What a small convolution's whole backward (ops._ConvBackwardReplay, launched one by one)
takes of the caching allocator, against the bound its graph is kept by (graph_bytes,
which graphs.launch compares with the graphs' memory limit): the VAE decoder's 3x3 layers
(benches/vae_convolutions.py, batch 16). Session 76 wrote the bound from the pieces'
worst cases: 250-1174 MiB on these layers, so the 64x64 float32 and the 128x128 ones
exceed the 512 MiB limit and would launch eagerly.
``PYTHONPATH=. python3 benches/conv_backward_bytes_probe.py`` prints, per layer, dtype
and layout: the most the backward held at once on its third call (requested bytes, as
the GPU test measures them), the bound, and their ratio."""
import torch

from gemmconv import graphs, ops
from gemmconv.shapes import conv_args
from vae_convolutions import LAYERS, gradient, tensors

ops.GRAPHED_CONV_BACKWARD = True
print("MiB held by a backward launched one by one, against its graph's bound")
for cin, cout, side in LAYERS:
    for dtype in (torch.float32, torch.bfloat16):
        for layout in ("planar", "channels_last"):
            x, w, b = tensors(cin, cout, side, dtype, layout)
            leaves = [t.requires_grad_() for t in (x, w, b)]
            grad = gradient(cout, side, dtype, layout)
            a = conv_args("conv2d", 2, x, w, b, 1, 1, 1, 1)
            ops._conv_backward_replays.clear()
            held = []

            def measured(owner, addresses, run, nbytes, device, stream):
                if not isinstance(owner, ops._ConvBackwardReplay):
                    return False
                torch.cuda.synchronize()
                before = torch.cuda.memory_stats()["requested_bytes.all.current"]
                torch.cuda.reset_peak_memory_stats()
                run()
                torch.cuda.synchronize()
                held.append(torch.cuda.memory_stats()["requested_bytes.all.peak"] - before)
                return True
            launch, graphs.launch = graphs.launch, measured
            try:
                for _ in range(3):
                    torch.autograd.grad(ops.conv2d(x, w, b, padding=1), leaves, grad)
            finally:
                graphs.launch = launch
            [replay] = ops._conv_backward_replays.values()   # (this call's alone)
            bound = replay.graph_bytes(grad, x, w, a)
            print(f"conv {cin:3d}->{cout:3d} {side:3d}x{side:<3d} {str(dtype)[6:]:8s} "
                  f"{layout:13s} held {held[-1] / 2**20:7.1f}  bound {bound / 2**20:7.1f}  "
                  f"({held[-1] / bound:.2f} of it)")
