"""wgmma_forward.cu's index mapping on the CPU, in float64: each pipeline's tiles and stages
in its order, each stage's box (zero off the image), each W tap's product read from row
(k_w - 1 - j) d_w of it, and the epilogue's stores. Against torch's conv_transpose2d on
smaller twins of wgmma_forward_probe.py's edge shapes, with 2-4 warpgroups (pipelines) a
block of one or two m64 fragments each, grids that leave blocks idle included. Exits 1 on
a mismatch or an output element left unwritten.
No GPU; about 15 s: ``PYTHONPATH=. python benches/wgmma_forward_emulate.py``."""
import sys

import torch
import torch.nn.functional as F

from gemmconv.shapes import Geometry

BK, BN = 64, 64   # as in the .cu


def emulate(x, w, b, padding, dilation, grid, pipelines, fragments) -> torch.Tensor:
    """The kernel's output for ``x (N, C_in, H, W)`` and ``w (C_in, C_out, k_h, k_w)``
    (float64), NaN where it writes nothing."""
    positions = 64 * fragments
    batch, c_in, height, width = x.shape
    _, c_out, kh, kw = w.shape
    out_h, out_w = Geometry((kh, kw), (1, 1), padding, dilation).image_size((height, width),
                                                                            (0, 0))
    out = torch.full((batch, c_out, out_h, out_w), float("nan"), dtype=torch.float64)
    rows_last = x.permute(0, 2, 3, 1)
    chunks, co_tiles = c_in // BK, c_out // BN
    rows = (positions + (kw - 1) * dilation[1] + 7) // 8 * 8
    x_tiles = -(-out_w // positions)
    tiles, per_tile = batch * out_h * x_tiles, kh * chunks
    for block in range(grid):
        for pipe in range(pipelines):
            co_tile = block % co_tiles
            cos = slice(co_tile * BN, (co_tile + 1) * BN)
            first = block // co_tiles * pipelines + pipe
            step = grid // co_tiles * pipelines
            mine = (tiles - first + step - 1) // step if first < tiles else 0
            for s in range(mine * per_tile):
                k, rest = divmod(s, per_tile)
                tile = first + k * step
                tap_h, chunk = divmod(rest, chunks)
                cis = slice(chunk * BK, (chunk + 1) * BK)
                x0, y, n = (tile % x_tiles) * positions, (tile // x_tiles) % out_h, tile // (x_tiles * out_h)
                h = y + padding[0] - tap_h * dilation[0]
                w0 = x0 + padding[1] - (kw - 1) * dilation[1]
                box = torch.zeros(rows, BK, dtype=torch.float64)
                for r in range(rows):
                    if 0 <= h < height and 0 <= w0 + r < width:
                        box[r] = rows_last[n, h, w0 + r, cis]
                if rest == 0:
                    acc = torch.zeros(positions, BN, dtype=torch.float64)
                for j in range(kw):
                    start = (kw - 1 - j) * dilation[1]
                    acc += box[start:start + positions] @ w[cis, cos, tap_h, j]
                if rest == per_tile - 1:
                    for m in range(min(positions, out_w - x0)):
                        out[n, cos, y, x0 + m] = acc[m] + (0 if b is None else b[cos])
    return out


# (batch, C_in, C_out, kernel, size, padding, dilation, bias, grid)
CASES = [
    (2, 64, 64, (3, 3), (5, 150), (0, 0), (1, 1), True, 6),
    (1, 128, 128, (2, 3), (4, 140), (1, 2), (2, 2), True, 4),
    (1, 64, 64, (2, 7), (3, 129), (0, 3), (1, 2), False, 3),
    (2, 64, 192, (2, 1), (3, 130), (0, 0), (1, 1), True, 9),
    (3, 64, 64, (3, 5), (4, 10), (2, 4), (1, 1), True, 5),
]


def main() -> int:
    gen = torch.Generator().manual_seed(0)
    failed = 0
    for n, ci, co, kernel, size, padding, dilation, bias, grid in CASES:
        x = torch.randn(n, ci, *size, dtype=torch.float64, generator=gen)
        w = torch.randn(ci, co, *kernel, dtype=torch.float64, generator=gen)
        b = torch.randn(co, dtype=torch.float64, generator=gen) if bias else None
        want = F.conv_transpose2d(x, w, b, padding=padding, dilation=dilation)
        for pipelines, fragments in ((2, 1), (3, 1), (4, 1), (2, 2), (3, 2)):
            got = emulate(x, w, b, padding, dilation, grid, pipelines, fragments)
            unwritten = int(got.isnan().sum())
            error = float((got - want).abs().max())
            failed += unwritten > 0 or not error < 1e-10
            print(f"{kernel} pipelines {pipelines} fragments {fragments}: unwritten "
                  f"{unwritten}, error {error:.1e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
