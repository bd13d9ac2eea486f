"""Shared test helpers: the float64 reference and the error measure."""
import zlib

import torch
import torch.nn.functional as F

import gemmconv

TORCH = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
OURS = {1: gemmconv.conv_transpose1d, 2: gemmconv.conv_transpose2d, 3: gemmconv.conv_transpose3d}


def generator(*keys) -> torch.Generator:
    """A generator seeded from the test's own keys: fresh inputs per check, reproducible."""
    return torch.Generator().manual_seed(zlib.crc32(repr(keys).encode()))


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; inf for NaN or a shape mismatch."""
    if out.shape != ref.shape:
        return float("inf")
    out, ref = out.detach().double(), ref.detach().double().to(out.device)
    if not torch.isfinite(out).all():
        return float("inf")
    denom = ref.norm()
    return float((out - ref).norm() / (denom if denom > 0 else 1))


def reference(case, x, w, b):
    """torch's transposed convolution in float64 on the inputs' device."""
    up = lambda t: None if t is None else t.double()        # differentiable back to t
    return TORCH[case.nd](up(x), up(w), up(b), **case.kwargs)
