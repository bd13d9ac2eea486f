"""Which of the zoo's transposed convolutions run as replays (ops._Replay, ops._BackwardReplay),
and so as CUDA graphs from their second step (gemmconv.graphs): every layer at full size,
planar and channels_last, float32 and bfloat16, forward and backward. The replays' plans are
host arithmetic, worked out here on the CPU (the models run on the meta device, to learn
each layer's input; gemm.py's timed layout choice is taken as "as laid out", which changes
no call's structure). CPU tensors take neither the fused route nor the depthwise kernel,
whose replays (_FusedReplay, _DepthwiseReplay: one launch a call) are CUDA's: where a layer
takes them there, its forward shows here as the column routes would run it.

    PYTHONPATH=. python benches/replay_coverage.py [--all]
"""
import sys

import torch

from gemmconv import channels_last as cl
from gemmconv import gemm, measure, ops, zoo
from gemmconv.shapes import conv_transpose_args

TYPES = (torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)


def kind(replay) -> str:
    return "-" if replay is None else type(replay).__name__


def main() -> int:
    gemm._layout_choice = lambda a, b, out: False
    everything = "--all" in sys.argv
    print(f"{'model':12s} {'layer':8s} {'input':22s} {'layout':13s} {'dtype':9s} forward / backward")
    for entry in zoo.ZOO:
        model = entry.build(False).to("meta")
        sample = torch.empty(entry.input_shape(False), device="meta")
        for name, module, spec in measure.layer_inputs(model, sample, TYPES):
            nd = len(module.kernel_size)
            for layout in ("planar", "channels_last")[:2 if nd > 1 else 1]:
                for dtype in (torch.float32, torch.bfloat16):
                    x = torch.empty(spec.shape, dtype=dtype)
                    w = torch.empty(module.weight.shape, dtype=dtype)
                    b = None if module.bias is None else torch.empty(module.bias.shape, dtype=dtype)
                    if layout == "channels_last":
                        x = x.contiguous(memory_format=cl.memory_format(x.dim()))
                        w = w.contiguous(memory_format=cl.memory_format(w.dim()))
                    op = module._output_padding(x, None, module.stride, module.padding,
                                                module.kernel_size, nd, module.dilation)
                    a = conv_transpose_args(f"conv_transpose{nd}d", nd, x, w, b, module.stride,
                                            module.padding, op, module.groups, module.dilation)
                    interleaved = layout == "channels_last"
                    forward = ops._work_out_replay(x, w, b, a, interleaved)[0]
                    g = cl.empty(x, a.output_shape, interleaved)
                    backward = ops._work_out_backward_replay(
                        g, x, w, a, [True, True, b is not None], interleaved)
                    if everything or forward is None or backward is None:
                        print(f"{entry.name:12s} {name:8s} {str(tuple(spec.shape)):22s} "
                              f"{layout:13s} {str(dtype)[6:]:9s} {kind(forward)} / {kind(backward)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
