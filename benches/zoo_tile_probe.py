"""The fused forward kernel's tile on the zoo's small strided layers, where session 74 left
DCGAN's float32 channels_last layers 6 and 9 under 0.8x swapped, and session 67's kernel
by kernel run put the fused forward at 0.049 and 0.061 ms against cuDNN's 0.027 and 0.039
(benches/NOTES.md, "O"). fused.config was tuned on the 17 cases' large images (one phase,
millions of positions); these layers have four phases of 8x8 or 16x16 positions, batch 128.

For each transposed convolution of the named zoo models that the fused route can take,
in float32 and bfloat16, channels_last and planar: cuDNN's forward, then the kernel alone
(the input's copy and the weights' reorder made beforehand) on the default tile and on
each tile of TILES, back to back (do_bench), with each output's largest difference from
the default tile's.

    PYTHONPATH=. python benches/zoo_tile_probe.py [MODEL ...] [--layers I,J] [--dtype D]
"""
import sys

import torch
import torch.nn.functional as F

from gemmconv import fused, ops, zoo

sys.path.insert(0, "benches")
from cl_tile_probe import bench, labelled_tiles, time_tiles  # noqa: E402
from small_fused_probe import layer_inputs  # noqa: E402

# (positions, output channels, warps, stages); bk stays the default's (128 bytes)
TILES = [(32, 128, 4, 4), (64, 128, 4, 3), (64, 128, 4, 5), (64, 128, 8, 4), (128, 128, 8, 3),
         (128, 128, 4, 4), (32, 64, 4, 4), (64, 64, 4, 4), (64, 64, 4, 6), (128, 64, 4, 4),
         (128, 64, 8, 3), (64, 32, 4, 4), (128, 32, 4, 4)]


def sweep(module, x: torch.Tensor, planar: bool) -> str:
    w, b = module.weight, module.bias
    a = ops._args_from_lists(x, w, b, module.stride, module.padding, module.output_padding,
                             module.dilation, module.groups)
    why = fused._unable(a, x, w)
    if why is not None:
        return f"fused route unable: {why}"
    kwargs = dict(stride=module.stride, padding=module.padding,
                  output_padding=module.output_padding, groups=module.groups,
                  dilation=module.dilation)
    ref = F.conv_transpose2d(x, w, b, **kwargs)
    t_cudnn = bench(lambda: F.conv_transpose2d(x, w, b, **kwargs))
    taps = fused.transposed_taps(a.geometry)
    rows, rounded = fused._input_rows(x)
    weights = fused.tap_weights(w)
    out = torch.empty_like(ref)
    size = x.element_size()
    extent = tuple(fused._extent(fused._padded(ref.shape[2:], 1), taps))
    default = fused.launch_config(x.shape[0], extent, a.in_channels, a.out_channels, taps, size,
                                  size == 4 and not rounded, planar)
    run_w = 128 // size if planar else 1
    tiles = labelled_tiles(default, TILES, x.shape[0], extent, a.out_channels, run_w)
    run = lambda cfg: fused.implicit_gemm(rows, weights, b, taps, out.movedim(1, -1), cfg=cfg,
                                          round_input=not rounded)
    line = [f"cudnn {t_cudnn:.4f}"]
    for label, times, diff in time_tiles(run, out, tiles, {"": bench}):
        if times is None:
            line.append(f"{label} failed {diff}")
        else:
            ratio = t_cudnn / times[""]
            line.append(f"{label} {times['']:.4f} ({ratio:.2f}x)"
                        f"{'' if diff < 1e-6 else f' DIFF {diff:.1e}'}")
    return f"default {default.box} bn {default.bn} w{default.warps} s{default.stages} | " + \
        " | ".join(line)


def main():
    args = sys.argv[1:]
    picked = None
    if "--layers" in args:
        i = args.index("--layers")
        picked = [int(v) for v in args[i + 1].split(",")]
        del args[i:i + 2]
    dtypes = [torch.float32, torch.bfloat16]
    if "--dtype" in args:
        i = args.index("--dtype")
        dtypes = [getattr(torch, args[i + 1])]
        del args[i:i + 2]
    print(torch.cuda.get_device_name(), flush=True)
    for spec in zoo.by_name(args or ["dcgan"]):
        model = spec.build(False).cuda().eval()
        x = spec.input(False, "cuda")
        layers = layer_inputs(model, x)
        for dtype in dtypes:
            for planar in (False, True):
                for i, (module, inp) in enumerate(layers):
                    if picked is not None and i not in picked:
                        continue
                    fmt = torch.contiguous_format if planar else torch.channels_last
                    m = module.to(dtype=dtype, memory_format=fmt)
                    xi = torch.randn_like(inp, dtype=dtype).contiguous(memory_format=fmt)
                    with torch.no_grad():
                        row = sweep(m, xi, planar)
                    print(f"{spec.name} layer {i} {tuple(inp.shape)} -> {module.out_channels} "
                          f"{str(dtype)[6:]} {'planar' if planar else 'channels_last'}: {row}",
                          flush=True)


if __name__ == "__main__":
    sys.exit(main())
