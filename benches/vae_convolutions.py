"""The VAE decoder's 3x3 stride-1 convolutions (gemmconv/zoo.py's vae_decoder, batch 16),
for the probes that time them: ``LAYERS``, :func:`tensors` and :func:`gradient` (which
build any padded stride-1 layer of this form: the U-Net probe's too)."""
import torch

LAYERS = [(512, 512, 8), (256, 256, 16), (128, 128, 32), (64, 64, 64), (32, 32, 128),
          (32, 3, 128)]   # (in channels, out channels, image side)


def tensors(cin: int, cout: int, side: int, dtype: torch.dtype, layout: str,
            batch: int = 16, kernel: int = 3) -> tuple:
    """Fresh ``(x, w, b)`` of one layer on the GPU (``x (batch, cin, side, side)``, ``w
    (cout, cin, kernel, kernel)``), seeded by its sizes, weights scaled to keep the outputs
    near unit size; x channels_last where ``layout`` says."""
    device = torch.device("cuda")
    gen = torch.Generator(device).manual_seed(cin + side)
    x = torch.randn(batch, cin, side, side, device=device, generator=gen).to(dtype)
    w = torch.randn(cout, cin, kernel, kernel, device=device, generator=gen) / \
        (kernel * cin ** 0.5)
    b = torch.randn(cout, device=device, generator=gen).to(dtype)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    return x, w.to(dtype), b


def gradient(cout: int, side: int, dtype: torch.dtype, layout: str,
             batch: int = 16) -> torch.Tensor:
    """A fresh output gradient ``(batch, cout, side, side)`` of one layer on the GPU, seeded
    by its side, channels_last where ``layout`` says."""
    device = torch.device("cuda")
    grad = torch.randn(batch, cout, side, side, device=device,
                       generator=torch.Generator(device).manual_seed(side)).to(dtype)
    if layout == "channels_last":
        grad = grad.contiguous(memory_format=torch.channels_last)
    return grad
