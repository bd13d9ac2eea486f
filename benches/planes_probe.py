"""The strided backward over phase planes (fused.strided_backward), piece by piece, against
the column routes' backward and cuDNN's, on the zoo's strided layers.

Session 43 (A2) found it slower than the column routes on DCGAN's and the VAE decoder's
layers: its weight gradient split into partials summed after, its input gradient in too few
programs on small grids, and torch's copy into the planes. GPU kernel ms of one backward
(input and weight gradients) of each layer, dtype and layout: cuDNN's
(aten.convolution_backward), the column routes' (ops._conv_transpose_backward, replayed and
graphed), and strided_backward as it is, with one split, and with one split and tiles of 64
channels for the input gradient; each variant's three largest kernels.

    PYTHONPATH=. python benches/planes_probe.py
"""
import sys

import torch

sys.path.insert(0, "benches")
from process_probe import kernels  # noqa: E402

from gemmconv import fused, ops  # noqa: E402

DEVICE = torch.device("cuda")
# (batch, C_in, H, W) -> C_out, kernel, stride, padding, output padding: DCGAN's k4 s2 layers
# and the VAE decoder's k3 s2 ones (gemmconv.zoo).
LAYERS = [((128, 512, 4, 4), 256, 4, 2, 1, 0), ((128, 256, 8, 8), 128, 4, 2, 1, 0),
          ((128, 128, 16, 16), 64, 4, 2, 1, 0), ((16, 512, 4, 4), 512, 3, 2, 1, 1),
          ((16, 512, 8, 8), 256, 3, 2, 1, 1), ((16, 256, 16, 16), 128, 3, 2, 1, 1),
          ((16, 128, 32, 32), 64, 3, 2, 1, 1), ((16, 64, 64, 64), 32, 3, 2, 1, 1)]


def one_split(boxes, tiles, box, partial):
    return max(boxes, 1), 1 if boxes else 0


def narrow(*args):
    cfg = launch_config(*args)
    return cfg._replace(bn=min(cfg.bn, 64))


launch_config, split_boxes = fused.launch_config, fused.split_boxes


def variant(name: str) -> None:
    fused.split_boxes = one_split if name != "planes" else split_boxes
    fused.launch_config = narrow if name == "narrow" else launch_config
    fused.forget_plans()


def main() -> None:
    for dtype in (torch.float32, torch.bfloat16):
        for last in (False, True):
            print(f"{str(dtype)[6:]} {'channels_last' if last else 'NCHW'}: GPU ms a backward", flush=True)
            for shape, c_out, k, s, p, op in LAYERS:
                x = torch.randn(shape, device=DEVICE, dtype=dtype)
                w = torch.randn(shape[1], c_out, k, k, device=DEVICE, dtype=dtype) / (shape[1] * k) ** 0.5
                fmt = torch.channels_last if last else torch.contiguous_format
                x = x.contiguous(memory_format=fmt)
                a = ops._args_from_lists(x, w, None, (s, s), (p, p), (op, op), (1, 1), 1)
                grad = torch.randn(a.output_shape, device=DEVICE, dtype=dtype).contiguous(memory_format=fmt)
                fns = {
                    "cudnn": lambda: torch.ops.aten.convolution_backward(
                        grad, x, w, None, [s, s], [p, p], [1, 1], True, [op, op], 1,
                        [True, True, False]),
                    "columns": lambda: ops._conv_transpose_backward(grad, x, w, a, [True, True, False]),
                }
                for name in ("planes", "one split", "narrow"):
                    fns[name] = lambda: fused.strided_backward(grad, x, w, a, (True, True))
                cells, tops = [], []
                with torch.no_grad():
                    for name, fn in fns.items():
                        variant(name if name in ("planes", "one split", "narrow") else "planes")
                        ops._backward_replays.clear()
                        pieces = kernels(fn)
                        cells.append(f"{name} {sum(pieces.values()):.4f}")
                        if name in ("planes", "one split", "narrow"):
                            tops.append(f"{name}: " + ", ".join(f"{n[:28]} {v:.4f}"
                                                                for n, v in list(pieces.items())[:3]))
                variant("planes")
                print(f"  {shape} -> {c_out} k{k} s{s}: " + " | ".join(cells), flush=True)
                print("    " + " || ".join(tops), flush=True)


if __name__ == "__main__":
    main()
