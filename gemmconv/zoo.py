"""The model zoo: real architectures built on transposed convolutions, in plain torch.nn,
with the layer shapes of their papers. ``python -m gemmconv bench --models`` and
``benches/test_models.py`` time torch against :func:`gemmconv.convert` on them.

Each :class:`ZooModel` builds its network at full size (the papers' widths, and a batch and
input size a GPU trains them at) or ``small`` (widths divided by eight, small inputs, a
batch of two: what a CPU runs in seconds), and draws a fresh input for it.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import torch
from torch import nn


@dataclasses.dataclass(frozen=True)
class ZooModel:
    """A network of the zoo: ``build(small)`` makes it, ``input_shape(small)`` its input."""
    name: str
    summary: str
    build: Callable[[bool], nn.Module]
    input_shape: Callable[[bool], tuple[int, ...]]

    @property
    def spatial_dims(self) -> int:
        return len(self.input_shape(True)) - 2

    def input(self, small: bool, device="cpu", dtype=torch.float32,
              generator: torch.Generator | None = None) -> torch.Tensor:
        """A fresh standard-normal input on ``device``."""
        return torch.randn(self.input_shape(small), generator=generator).to(device, dtype)


def _width(channels: int, small: bool) -> int:
    return max(1, channels // 8) if small else channels


def dcgan_generator(small: bool = False, nz: int = 100, ngf: int = 64) -> nn.Module:
    """Radford et al. 2016: z (N, nz, 1, 1) -> image (N, 3, 64, 64) through five k4
    transposed convolutions (stride 1, then 2), BatchNorm and ReLU, tanh last."""
    ngf = _width(ngf, small)
    widths = [nz, ngf * 8, ngf * 4, ngf * 2, ngf]
    layers: list[nn.Module] = []
    for i, (cin, cout) in enumerate(zip(widths, widths[1:])):
        layers += [nn.ConvTranspose2d(cin, cout, 4, 1 if i == 0 else 2, 0 if i == 0 else 1,
                                      bias=False), nn.BatchNorm2d(cout), nn.ReLU(True)]
    layers += [nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh()]
    return nn.Sequential(*layers)


class UNet(nn.Module):
    """U-Net in 2-D (Ronneberger et al. 2015: widths 64-1024, up-convolutions k2 s2 halving
    the channels) or 3-D (Cicek et al. 2016: widths 64-512, each level's first convolution
    at half its width, up-convolutions keeping the channels). Padded 3x3 convolutions, so
    the output has the input's size (a multiple of 2^levels)."""

    def __init__(self, nd: int, in_channels: int, classes: int, widths: list[int],
                 keep_channels: bool):
        super().__init__()
        conv, norm = (nn.Conv2d, nn.BatchNorm2d) if nd == 2 else (nn.Conv3d, nn.BatchNorm3d)
        self.up_conv = nn.ConvTranspose2d if nd == 2 else nn.ConvTranspose3d
        self.pool = (nn.MaxPool2d if nd == 2 else nn.MaxPool3d)(2)

        def block(cin: int, mid: int, cout: int) -> nn.Module:
            return nn.Sequential(conv(cin, mid, 3, padding=1, bias=False), norm(mid), nn.ReLU(True),
                                 conv(mid, cout, 3, padding=1, bias=False), norm(cout), nn.ReLU(True))

        self.down = nn.ModuleList()
        channels = in_channels
        for w in widths:
            self.down.append(block(channels, w // 2 if keep_channels else w, w))
            channels = w
        self.ups, self.decode = nn.ModuleList(), nn.ModuleList()
        for w in reversed(widths[:-1]):
            up = channels if keep_channels else channels // 2
            self.ups.append(self.up_conv(channels, up, 2, stride=2))
            self.decode.append(block(up + w, w, w))
            channels = w
        self.head = conv(channels, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for i, level in enumerate(self.down):
            x = level(x if i == 0 else self.pool(x))
            skips.append(x)
        for up, decode, skip in zip(self.ups, self.decode, reversed(skips[:-1])):
            x = decode(torch.cat([skip, up(x)], 1))
        return self.head(x)


def unet2d(small: bool = False) -> nn.Module:
    return UNet(2, 3, 2, [_width(w, small) for w in (64, 128, 256, 512, 1024)], False)


def unet3d(small: bool = False) -> nn.Module:
    return UNet(3, 1, 3, [_width(w, small) for w in (64, 128, 256, 512)], True)


class HiFiGANResBlock(nn.Module):
    """HiFi-GAN's ResBlock1: three pairs of a dilated and an undilated convolution, each pair
    with a residual connection, leaky ReLU (0.1) before each convolution."""

    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...]):
        super().__init__()
        self.dilated = nn.ModuleList(nn.Conv1d(channels, channels, kernel, dilation=d,
                                               padding=d * (kernel - 1) // 2) for d in dilations)
        self.plain = nn.ModuleList(nn.Conv1d(channels, channels, kernel, padding=(kernel - 1) // 2)
                                   for _ in dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for dilated, plain in zip(self.dilated, self.plain):
            y = plain(nn.functional.leaky_relu(dilated(nn.functional.leaky_relu(x, 0.1)), 0.1))
            x = x + y
        return x


class HiFiGANGenerator(nn.Module):
    """HiFi-GAN V1 (Kong et al. 2020): mel (N, 80, T) -> waveform (N, 1, 256 T). Up-sampling
    rates 8, 8, 2, 2 by transposed convolutions of kernels 16, 16, 4, 4, from 512 channels
    halving each time; after each, the multi-receptive-field fusion of three ResBlock1s
    (kernels 3, 7, 11, dilations 1, 3, 5). Weight normalisation, a reparametrisation for
    training, is left out."""

    def __init__(self, small: bool = False, mels: int = 80):
        super().__init__()
        channels = _width(512, small)
        self.pre = nn.Conv1d(mels, channels, 7, padding=3)
        self.ups, self.fusions = nn.ModuleList(), nn.ModuleList()
        for rate, kernel in zip((8, 8, 2, 2), (16, 16, 4, 4)):
            self.ups.append(nn.ConvTranspose1d(channels, channels // 2, kernel, rate,
                                               padding=(kernel - rate) // 2))
            channels //= 2
            self.fusions.append(nn.ModuleList(HiFiGANResBlock(channels, k, (1, 3, 5))
                                              for k in (3, 7, 11)))
        self.post = nn.Conv1d(channels, 1, 7, padding=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre(x)
        for up, fusion in zip(self.ups, self.fusions):
            x = up(nn.functional.leaky_relu(x, 0.1))
            x = sum(block(x) for block in fusion) / len(fusion)
        return torch.tanh(self.post(nn.functional.leaky_relu(x)))


def fcn32s_head(small: bool = False, classes: int = 21) -> nn.Module:
    """FCN-32s (Long et al. 2015) after VGG16's pool5: fc6 and fc7 as convolutions (7x7 and
    1x1, 4096 channels), the class scores, and the 32x up-sampling by a transposed
    convolution of kernel 64, stride 32 (padding 16 in place of the paper's crop)."""
    fc = _width(4096, small)
    return nn.Sequential(nn.Conv2d(_width(512, small), fc, 7, padding=3), nn.ReLU(True),
                         nn.Conv2d(fc, fc, 1), nn.ReLU(True), nn.Conv2d(fc, classes, 1),
                         nn.ConvTranspose2d(classes, classes, 64, stride=32, padding=16,
                                            bias=False))


def vae_decoder(small: bool = False) -> nn.Module:
    """A convolutional VAE decoder (the up-sampling stack of DC-VAE and StyleGAN-like
    generators): latent (N, 512, 4, 4) -> image (N, 3, 128, 128) by five transposed
    convolutions of kernel 3, stride 2, output_padding 1, each followed by a 3x3 convolution,
    BatchNorm and leaky ReLU."""
    widths = [_width(w, small) for w in (512, 512, 256, 128, 64, 32)]
    layers: list[nn.Module] = []
    for cin, cout in zip(widths, widths[1:]):
        layers += [nn.ConvTranspose2d(cin, cout, 3, 2, 1, output_padding=1),
                   nn.BatchNorm2d(cout), nn.LeakyReLU(0.2, True),
                   nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout),
                   nn.LeakyReLU(0.2, True)]
    layers += [nn.Conv2d(widths[-1], 3, 3, padding=1), nn.Sigmoid()]
    return nn.Sequential(*layers)


def depthwise_decoder(small: bool = False) -> nn.Module:
    """A MobileNet-style decoder: each stage up-samples by a depthwise transposed convolution
    (kernel 4, stride 2, groups = channels) and mixes channels by a pointwise convolution,
    halving them: (N, 256, 16, 16) -> (N, 3, 256, 256)."""
    widths = [_width(w, small) for w in (256, 128, 64, 32, 16)]
    layers: list[nn.Module] = []
    for cin, cout in zip(widths, widths[1:]):
        layers += [nn.ConvTranspose2d(cin, cin, 4, 2, 1, groups=cin, bias=False),
                   nn.BatchNorm2d(cin), nn.ReLU6(True), nn.Conv2d(cin, cout, 1, bias=False),
                   nn.BatchNorm2d(cout), nn.ReLU6(True)]
    layers.append(nn.Conv2d(widths[-1], 3, 1))
    return nn.Sequential(*layers)


def _shape(full: tuple[int, ...], small: tuple[int, ...]) -> Callable[[bool], tuple[int, ...]]:
    return lambda is_small: small if is_small else full


ZOO = [
    ZooModel("dcgan", "DCGAN generator, 64x64, k4 s2", dcgan_generator,
             _shape((128, 100, 1, 1), (2, 100, 1, 1))),
    ZooModel("unet2d", "U-Net 2-D 256x256, up-conv k2 s2", unet2d,
             _shape((8, 3, 256, 256), (2, 3, 32, 32))),
    # Reduced: 24^3, a 3^3 bottleneck. At 16^3 (2^3 there) torch's own CPU bfloat16 conv3d
    # weight gradient read uninitialized memory (torch 2.13: errors of 1e35 that came and
    # went with what the allocator held; benches/NOTES.md, session 25).
    ZooModel("unet3d", "3-D U-Net 64^3, up-conv k2 s2", unet3d,
             _shape((2, 1, 64, 64, 64), (2, 1, 24, 24, 24))),
    ZooModel("hifigan", "HiFi-GAN V1 generator, 8192 samples, k16 s8 / k4 s2",
             HiFiGANGenerator, _shape((16, 80, 32), (2, 80, 8))),
    ZooModel("fcn32s", "FCN-32s head, 512x512, k64 s32", fcn32s_head,
             _shape((8, 512, 16, 16), (2, 64, 4, 4))),
    ZooModel("vae-decoder", "VAE decoder 128x128, k3 s2 op1", vae_decoder,
             _shape((16, 512, 4, 4), (2, 64, 4, 4))),
    ZooModel("depthwise", "depthwise decoder 256x256, k4 s2 groups=C", depthwise_decoder,
             _shape((16, 256, 16, 16), (2, 32, 8, 8))),
]


def by_name(names: list[str] | None) -> list[ZooModel]:
    """The zoo's models whose name contains any of ``names``; all of them for None."""
    return [m for m in ZOO if not names or any(n in m.name for n in names)]
