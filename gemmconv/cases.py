"""The one table of transposed-convolution cases: tests, GPU tests and benchmarks read it.

* :data:`BENCH` — the large cases the benchmark suite and ``python -m gemmconv bench`` time.
* :data:`EDGE` — small hand-picked cases: odd sizes, every parameter, empty batch, unbatched.
* :func:`random_cases` — seeded random small cases covering every parameter combination.
* :meth:`Case.scaled` — a bench case shrunk to a size the CPU or a quick test can run.
"""
from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass
from typing import Optional

import torch

from .shapes import Geometry


@dataclass(frozen=True)
class Case:
    """One ``conv_transpose{nd}d`` call: input ``(batch, in_channels, *size)``."""

    name: str
    batch: int
    in_channels: int
    out_channels: int
    kernel_size: tuple[int, ...]
    size: tuple[int, ...]
    stride: tuple[int, ...] = (1,)
    padding: tuple[int, ...] = (0,)
    output_padding: tuple[int, ...] = (0,)
    dilation: tuple[int, ...] = (1,)
    groups: int = 1
    bias: bool = True
    unbatched: bool = False

    def __post_init__(self):
        nd = len(self.kernel_size)
        for field in ("size", "stride", "padding", "output_padding", "dilation"):
            value = getattr(self, field)
            if len(value) == 1 and nd > 1:
                object.__setattr__(self, field, value * nd)

    @property
    def nd(self) -> int:
        return len(self.kernel_size)

    @property
    def kwargs(self) -> dict:
        return dict(stride=self.stride, padding=self.padding, output_padding=self.output_padding,
                    groups=self.groups, dilation=self.dilation)

    @property
    def output_size(self) -> tuple[int, ...]:
        g = Geometry(self.kernel_size, self.stride, self.padding, self.dilation)
        return g.image_size(self.size, self.output_padding)

    @property
    def flops(self) -> int:
        """Multiply-adds times two of the GEMM: every input element meets every tap."""
        return (2 * self.batch * math.prod(self.size) * self.in_channels
                * self.out_channels // self.groups * math.prod(self.kernel_size))

    def tensors(self, dtype: torch.dtype = torch.float64, device="cpu",
                generator: Optional[torch.Generator] = None, distribution=torch.randn):
        """Fresh (input, weight, bias) for this case; bias is None when the case has none."""
        make = lambda *shape: distribution(*shape, generator=generator, dtype=torch.float64).to(
            device=device, dtype=dtype)
        shape = (self.in_channels, *self.size) if self.unbatched else (
            self.batch, self.in_channels, *self.size)
        weight = make(self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        return make(*shape), weight, make(self.out_channels) if self.bias else None

    def scaled(self, elements: int = 4096) -> "Case":
        """The same parameters on a spatial size of about ``elements`` and a batch of 2."""
        factor = (math.prod(self.size) / elements) ** (1 / self.nd)
        size = tuple(max(1, round(s / max(factor, 1))) for s in self.size)
        return dataclasses.replace(self, name=self.name + "-small", size=size,
                                   batch=min(self.batch, 2))


def _c(name, batch, cin, cout, kernel, size, **kw) -> Case:
    tup = lambda v: v if isinstance(v, tuple) else (v,)
    kw = {k: (v if k in ("groups", "bias", "unbatched") else tup(v)) for k, v in kw.items()}
    return Case(name, batch, cin, cout, tup(kernel), tup(size), **kw)


BENCH = [
    _c("2d-1024", 8, 64, 64, (3, 3), (1024, 1024)),
    _c("2d-3x7-512", 8, 64, 64, (3, 7), (512, 512)),
    _c("2d-64to128", 64, 64, 128, (3, 5), (128, 256)),
    _c("2d-512x1024", 8, 32, 32, (3, 3), (512, 1024)),
    _c("2d-strided-grouped", 16, 32, 64, (3, 5), (128, 256), stride=(2, 3), padding=(1, 2),
       dilation=(2, 1), groups=4),
    _c("2d-3x7-padded", 8, 32, 32, (3, 7), (512, 1024), padding=(1, 3)),
    _c("2d-stride5-dil2", 16, 32, 64, (3, 3), (64, 128), stride=5, padding=1, dilation=2),
    _c("1d-65536", 64, 128, 128, 3, 65536),
    _c("1d-dil3", 32, 32, 64, 5, 131072, dilation=3),
    _c("1d-strided", 16, 32, 64, 3, 131072, stride=2, padding=1, dilation=2),
    _c("3d-3x5x7", 16, 32, 16, (3, 5, 7), (16, 32, 64)),
    _c("3d-64cube", 8, 48, 48, (3, 3, 3), (64, 64, 64)),
    _c("3d-32to64", 16, 32, 64, (3, 5, 5), (64, 64, 64)),
    _c("3d-96cube", 8, 48, 24, (3, 3, 3), (96, 96, 96)),
    _c("3d-strided-grouped", 8, 32, 32, (3, 5, 7), (12, 24, 48), stride=2, padding=(1, 2, 3),
       output_padding=1, groups=4),
    _c("3d-stride2-grouped", 4, 32, 32, (3, 3, 3), (32, 64, 128), stride=2, padding=1, groups=4),
    _c("3d-stride2-dil2", 16, 32, 64, (3, 3, 3), (16, 32, 32), stride=2, padding=1, dilation=2),
]

# Convolutions (gemmconv.conv2d: in_channels -> out_channels over the input size) and
# fold/unfold (kernel over the image; in_channels images), for the suite.
CONV_BENCH = [
    _c("conv2d-512", 8, 64, 64, (3, 3), (512, 512), padding=1),
    _c("conv2d-strided", 16, 32, 64, (3, 3), (256, 256), stride=2, padding=1),
    _c("conv2d-grouped", 16, 64, 64, (3, 3), (256, 256), padding=1, groups=4),
]
# The zoo's kinds of convolution at test sizes (gemmconv.conv{nd}d, as CONV_BENCH): small
# layers, whose forwards ops._ConvReplay launches as CUDA graphs; the last of the most
# column elements (the tests lower ops.GRAPHED_CONV_MAX_COLUMNS below them).
CONV_LAYERS = [
    _c("vae-conv3x3", 4, 64, 64, (3, 3), (8, 8), padding=1),
    _c("unet-conv3x3-narrowing", 2, 32, 16, (3, 3), (16, 16), padding=1, bias=False),
    _c("hifigan-conv-k7-dil3", 2, 32, 32, 7, 64, padding=9, dilation=3),
    _c("unet3d-conv3x3x3", 2, 16, 8, (3, 3, 3), (8, 8, 8), padding=1),
    _c("conv-strided-grouped", 2, 32, 32, (3, 3), (16, 16), stride=2, padding=1, groups=4),
    _c("vae-conv3x3-to-rgb", 2, 32, 3, (3, 3), (16, 16), padding=1),
    # A 1x1 head (the U-Net's): its GEMMs read the input where it lies (ops._columns_in_place).
    _c("unet-head-1x1", 2, 64, 2, (1, 1), (40, 40)),
    _c("vae-conv3x3-wide", 2, 64, 32, (3, 3), (256, 128), padding=1),
]
FOLD_BENCH = [
    _c("unfold-512", 8, 64, 64, (3, 3), (512, 512), padding=1),
    _c("unfold-strided", 16, 32, 32, (4, 4), (256, 256), stride=2, padding=1),
]

EDGE = [
    _c("1x1-kernel", 2, 3, 5, 1, 7),
    _c("1d-odd", 3, 2, 3, 4, 9, stride=3, padding=2, output_padding=1, dilation=2),
    _c("kernel-larger-than-input", 2, 2, 2, 7, 2, padding=1),
    _c("padding-eats-output", 1, 2, 3, 3, 4, padding=2, stride=1),
    _c("output-padding-from-dilation", 2, 2, 2, 3, 5, output_padding=1, dilation=2),
    _c("2d-asymmetric", 2, 4, 6, (2, 5), (5, 3), stride=(3, 1), padding=(0, 2),
       output_padding=(2, 0), dilation=(1, 3), groups=2),
    _c("2d-depthwise", 2, 6, 6, (3, 3), (6, 5), stride=2, groups=6),
    _c("2d-stride-over-kernel", 2, 3, 2, (2, 2), (4, 4), stride=(4, 5), output_padding=(3, 1)),
    _c("3d-asymmetric", 2, 2, 4, (2, 3, 1), (3, 4, 5), stride=(1, 2, 3), padding=(1, 0, 0),
       output_padding=(0, 1, 2), dilation=(2, 1, 1), groups=2),
    _c("empty-batch", 0, 4, 6, (3, 3), (5, 5), stride=2, groups=2),
    _c("empty-batch-rows", 0, 4, 4, (3, 3), (40, 6)),   # a shape whose batches take row products
    _c("unbatched-2d", 1, 3, 4, (3, 2), (4, 5), stride=2, unbatched=True),
    _c("unbatched-1d", 1, 2, 3, 3, 6, padding=1, unbatched=True),
    _c("no-bias-3d", 2, 3, 3, (2, 2, 2), (3, 3, 3), stride=2, bias=False),
    _c("1d-wide-stride", 2, 3, 2, 3, 11, stride=9, padding=1, output_padding=5, dilation=4),
]

# Kernels much larger than their stride, as in FCN's up-sampling heads: more taps than the
# fixed kernels unroll (_cuda.MAX_FIXED_TAPS), so col2im takes the generic kernel.
LARGE_KERNELS = [
    _c("fcn-like-1d", 2, 2, 3, 64, 5, stride=32, padding=16),
    _c("fcn-like-2d", 1, 2, 2, (24, 40), (3, 2), stride=(8, 20), padding=(4, 10)),
    _c("large-kernel-dilated", 2, 2, 2, (9, 17), (4, 3), stride=(4, 6), padding=(3, 5),
       dilation=(2, 3), output_padding=(1, 2)),
    # More taps than the fixed kernels take, and channels the generic col2im's threads take
    # several of (_cuda.generic_col2im_planes: 6 here).
    _c("fcn-like-2d-channels", 2, 3, 6, (24, 40), (3, 2), stride=(8, 20), padding=(4, 10)),
]


# The zoo's kinds of transposed convolution at test sizes (gemmconv/zoo.py has them at full
# size): small layers of many channels, where host time per call is what the GPU waits for.
MODEL_LAYERS = [
    _c("dcgan-k4s2", 16, 64, 32, (4, 4), (8, 8), stride=2, padding=1, bias=False),
    _c("vae-k3s2op1", 4, 64, 32, (3, 3), (8, 8), stride=2, padding=1, output_padding=1),
    _c("unet-k2s2", 2, 64, 32, (2, 2), (16, 16), stride=2),
    _c("hifigan-k16s8", 4, 64, 32, 16, 32, stride=8, padding=4),
    _c("hifigan-k4s2", 4, 32, 16, 4, 256, stride=2, padding=1),
    _c("unet3d-k2s2", 2, 32, 16, (2, 2, 2), (8, 8, 8), stride=2),
]

# Model layers of more positions a sample than the planar backward takes side by side
# (ops.SAMPLES_INNER_MAX_POSITIONS, 1024): their planar backward runs with the samples outer,
# as the VAE decoder's last layer and HiFi-GAN's last two do.
WIDE_LAYERS = [
    _c("vae-k3s2op1-wide", 2, 16, 8, (3, 3), (40, 40), stride=2, padding=1, output_padding=1),
    _c("hifigan-k4s2-wide", 3, 16, 8, 4, 2048, stride=2, padding=1),
    # Two groups of more channels than run as one dense product (gemm.dense_groups), over
    # twice SPLIT_MIN_POSITIONS positions: the weight gradient's split-K pieces group by
    # group, a tail left over (ops._add_weight_grad).
    _c("grouped-k4s2-wide", 2, 80, 16, 4, 8200, stride=2, padding=1, groups=2),
]

# Zoo layers at full size whose backward graphs take the most memory (ops.py's graph_bytes):
# the 3-D U-Net's ups.1 and the 2-D U-Net's ups.3. Session 53 bounded their graphs over the
# default graph memory limit, so their backwards ran eagerly at 0.47x and 0.82x (H200).
LARGE_MODEL_LAYERS = [
    _c("unet3d-ups1", 2, 256, 256, (2, 2, 2), (16, 16, 16), stride=2),
    _c("unet-ups3", 8, 128, 64, (2, 2), (128, 128), stride=2),
]


# Channels_last float32 weight gradients on mma.sync (fused.float32_weight_form "mma",
# col2im.cu's tf32_weight_gradient): channels in tiles of 64 (two tiles of either), strips
# of 32 positions ending part-way, padding and dilation along either dim, blocks of 1-3 row
# taps (kernels of 1-3 rows, widths 2-9), more blocks than stages.
MMA_WEIGHT_GRADIENT = [
    _c("mma-3x3", 2, 64, 64, (3, 3), (5, 40)),
    _c("mma-3x3-padded-two-inputs", 1, 128, 64, (3, 3), (4, 33), padding=1),
    _c("mma-2x5-dilated-two-outputs", 2, 64, 128, (2, 5), (3, 20), padding=(1, 2),
       dilation=(2, 1)),
    _c("mma-3x7-dilated", 1, 64, 64, (3, 7), (4, 30), padding=(0, 3), dilation=(1, 2)),
    _c("mma-3x2-dilated", 1, 64, 64, (3, 2), (3, 35), padding=(1, 0), dilation=(2, 1)),
    _c("mma-1x9", 1, 64, 64, (1, 9), (2, 70), padding=(0, 4)),
    _c("mma-2x3", 2, 64, 64, (2, 3), (4, 37), padding=1),
]


def random_cases(count: int, seed: int = 0, max_elements: int = 200) -> list[Case]:
    """``count`` random valid cases of every dimensionality, reproducible from ``seed``."""
    rng = random.Random(seed)
    cases: list[Case] = []
    while len(cases) < count:
        nd = 1 + len(cases) % 3
        groups = rng.choice((1, 1, 2, 3))
        kernel = tuple(rng.randint(1, 4 if nd < 3 else 3) for _ in range(nd))
        stride = tuple(rng.randint(1, 3) for _ in range(nd))
        dilation = tuple(rng.randint(1, 3) for _ in range(nd))
        padding = tuple(rng.randint(0, d * (k - 1) + 1) for k, d in zip(kernel, dilation))
        output_padding = tuple(rng.randint(0, max(s, d) - 1) for s, d in zip(stride, dilation))
        size = tuple(rng.randint(1, (9, 7, 4)[nd - 1]) for _ in range(nd))
        case = Case(f"random-{seed}-{len(cases)}", rng.choice((0, 1, 2, 3)) if rng.random() < .1
                    else rng.randint(1, 3), groups * rng.randint(1, 3), groups * rng.randint(1, 3),
                    kernel, size, stride, padding, output_padding, dilation, groups,
                    bias=rng.random() < .7)
        image = case.output_size
        if min(image) > 0 and math.prod(image) * case.out_channels <= max_elements * 4:
            cases.append(case)
    return cases


def depthwise_of(case: Case, multiplier: int = 1, channels: int = 3) -> Case:
    """``case``'s geometry with one input channel a group (``channels`` groups, unless the
    case has more), ``multiplier`` output channels each: the depthwise kernel's calls."""
    channels = max(channels, case.in_channels)
    return dataclasses.replace(case, name=f"{case.name}-depthwise-x{multiplier}",
                               in_channels=channels, out_channels=channels * multiplier,
                               groups=channels)


def grouped_of(case: Case, inputs: int, multiplier: int, groups: int = 2) -> Case:
    """``case``'s geometry as ``groups`` groups of ``inputs`` input channels and
    ``multiplier`` output channels each: the grouped direct kernel's calls."""
    return dataclasses.replace(case, name=f"{case.name}-grouped-{inputs}x{multiplier}",
                               in_channels=groups * inputs, out_channels=groups * multiplier,
                               groups=groups)


# Calls of one input channel a group (gemmconv/depthwise.py): the geometries of the tables
# above made depthwise, with one and two outputs an input channel, and the zoo's depthwise
# decoder's layer (kernel 4, stride 2) at test size, planar 2-D of 2^20 outputs included.
DEPTHWISE = [depthwise_of(c, m) for c in EDGE + LARGE_KERNELS + random_cases(24, seed=21)
             for m in (1, 2) if c.batch > 0 or m == 1] + [
    _c("depthwise-k4s2", 2, 32, 32, (4, 4), (16, 16), stride=2, padding=1, groups=32, bias=False),
    _c("depthwise-k4s2-wide", 1, 64, 64, (4, 4), (64, 64), stride=2, padding=1, groups=64),
    _c("depthwise-1d-k16s8", 2, 8, 16, 16, 40, stride=8, padding=4, groups=8),
    _c("depthwise-3d-k3s2", 2, 4, 4, (3, 3, 3), (5, 6, 7), stride=2, padding=1,
       output_padding=1, groups=4),
    _c("one-input-channel", 2, 1, 5, (3, 3), (7, 6), stride=2),
    # Channels over one block (64; channels_last), the last block partly masked.
    _c("depthwise-100-channels", 2, 100, 100, (3, 3), (6, 5), stride=2, padding=1, groups=100),
    _c("depthwise-x3-3d", 1, 24, 72, (2, 3, 3), (3, 4, 5), stride=(1, 2, 2), groups=24),
]

# Calls of a few input channels a group (depthwise.GROUPED_MAX_INPUTS; the grouped direct
# kernel): the edge and large-kernel geometries and random ones, two to eight input
# channels a group; two of more output channels a group than a program takes (12: two
# blocks of 8, the weight's rows zero-padded to 16); and the table's grouped cases at test
# size.
GROUPED = [grouped_of(c, (2, 3, 8)[i % 3], (1, 3, 8)[i // 3 % 3], 2 + i % 2)
           for i, c in enumerate(EDGE + LARGE_KERNELS + random_cases(9, seed=22))] + [
    grouped_of(EDGE[5], 3, 12), grouped_of(EDGE[8], 2, 12, 3)] + [
    c.scaled(2048) for c in BENCH if c.groups > 1 and c.in_channels // c.groups > 1]
