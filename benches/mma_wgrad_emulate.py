"""mma_wgrad.cu's index mapping on the CPU, in float64: each block's stages in its order,
each stage's tiles as load_stage fills them (rows padded to 72, zero off the image and
past the stages), each warp's fragments read from them by the kernel's formulas (lane
g = lane / 4, t = lane % 4), and the partial sums' stores. Against torch's weight gradient
of conv_transpose2d, on shapes that reach the edges: strips off 32, padding, dilation in
both dims, blocks of one and of several row taps, row taps past the kernel, two tiles of
either channel, grids with idle blocks. Exits 1 on a mismatch or an element of the partial
sums that no warp writes, in blocks of 1-3 row taps and stages of 1-4 output rows. No GPU; about a minute:
``PYTHONPATH=. python benches/mma_wgrad_emulate.py``."""
import sys

import torch
import torch.nn.functional as F

from gemmconv.shapes import Geometry

P, C, PITCH = 32, 64, 72   # as in the .cu

G = torch.arange(32) // 4   # each lane's g and t
T = torch.arange(32) % 4


def load_stage(q, stages, x_rows, g_rows, shape, th, rows, row_tap0, ci0, co0, box_rows):
    """The stage's shared tiles, (rows * P + boxes * box_rows, PITCH), as load_stage writes
    them (NaN in the rows' padding)."""
    batch, height, width, out_h, out_w, kh, kw, pad, dil = shape
    strips, groups = -(-out_w // P), -(-out_h // rows)
    live = q < stages
    qq = q if live else 0
    n, y, x0 = qq // (strips * groups), (qq // strips) % groups * rows, (qq % strips) * P
    boxes = rows + (th - 1) * dil[0]
    tile = torch.full((rows * P + boxes * box_rows, PITCH), float("nan"), dtype=torch.float64)
    tile[:, :C] = 0
    for r in range(rows):
        for p in range(P):
            if live and y + r < out_h and x0 + p < out_w:
                tile[r * P + p, :C] = g_rows[n, y + r, x0 + p, co0:co0 + C]
    w0 = x0 + pad[1] - (kw - 1) * dil[1]
    h0 = y + pad[0] - (row_tap0 + th - 1) * dil[0]
    for b in range(boxes):
        for r in range(box_rows):
            h, w = h0 + b, w0 + r
            if live and 0 <= h < height and 0 <= w < width:
                tile[rows * P + b * box_rows + r, :C] = x_rows[n, h, w, ci0:ci0 + C]
    return tile


def warp_products(tile, tap, j, kw, th, rows, dil, box_rows):
    """One warp's stage: its 64 x 64 sum of fragment products, gathered by the kernel's
    addresses (a NaN read from a row's padding would spread)."""
    flat = tile.reshape(-1)
    shift = (kw - 1 - j) * dil[1]
    d = torch.zeros(C, C, dtype=torch.float64)
    for kk in range(0, rows * P, 8):
        r = kk // P
        box = (rows * P + (r + (th - 1 - tap) * dil[0]) * box_rows + shift - r * P) * PITCH
        a = torch.zeros(4, 16, 8, dtype=torch.float64)   # (m tile, row, k)
        for m in range(4):
            p = box + (kk + T) * PITCH + m * 16 + G
            a[m, G, T] = flat[p]
            a[m, G + 8, T] = flat[p + 8]
            a[m, G, T + 4] = flat[p + 4 * PITCH]
            a[m, G + 8, T + 4] = flat[p + 4 * PITCH + 8]
        b = torch.zeros(8, 8, 8, dtype=torch.float64)    # (n tile, k, column)
        for n in range(8):
            p = (kk + T) * PITCH + n * 8 + G
            b[n, T, G] = flat[p]
            b[n, T + 4, G] = flat[p + 4 * PITCH]
        for m in range(4):
            for n in range(8):
                d[m * 16:(m + 1) * 16, n * 8:(n + 1) * 8] += a[m] @ b[n]
    return d


def emulate(x, grad, kernel, padding, dilation, grid, th, rows):
    """The partial sums ``(grid, k_h, k_w, C_in, C_out)`` (NaN where no warp stores) for
    ``x (N, C_in, H, W)`` and ``grad (N, C_out, H_out, W_out)``, float64, with ``th`` row
    taps a block and ``rows`` output rows a stage. (The ring's depth changes when a stage's
    tiles land, not what they hold.)"""
    batch, c_in, height, width = x.shape
    _, c_out, out_h, out_w = grad.shape
    kh, kw = kernel
    shape = (batch, height, width, out_h, out_w, kh, kw, padding, dilation)
    x_rows, g_rows = x.permute(0, 2, 3, 1), grad.permute(0, 2, 3, 1)
    box_rows = P + (kw - 1) * dilation[1]
    stages = batch * -(-out_h // rows) * -(-out_w // P)
    partial = torch.full((grid, kh, kw, c_in, c_out), float("nan"), dtype=torch.float64)
    for bz in range(c_in // C * (c_out // C)):
        ci0, co0 = bz // (c_out // C) * C, bz % (c_out // C) * C
        for by in range(-(-kh // th)):
            for bx in range(grid):
                mine = (stages - bx + grid - 1) // grid if bx < stages else 0
                sums = {}
                for s in range(mine):
                    tile = load_stage(bx + s * grid, stages, x_rows, g_rows, shape, th, rows,
                                      by * th, ci0, co0, box_rows)
                    for warp in range(th * kw):
                        tap, j = divmod(warp, kw)
                        if by * th + tap < kh:
                            sums[warp] = sums.get(warp, 0) + warp_products(
                                tile, tap, j, kw, th, rows, dilation, box_rows)
                for warp in range(th * kw):
                    tap, j = divmod(warp, kw)
                    if by * th + tap < kh:
                        partial[bx, by * th + tap, j, ci0:ci0 + C, co0:co0 + C] = sums.get(
                            warp, torch.zeros(C, C, dtype=torch.float64))
    return partial


def reference(x, grad, kernel, padding, dilation):
    w = torch.zeros(x.shape[1], grad.shape[1], *kernel, dtype=torch.float64,
                    device=x.device, requires_grad=True)
    out = F.conv_transpose2d(x, w, padding=padding, dilation=dilation)
    (gw,) = torch.autograd.grad(out, w, grad)
    return gw


# (batch, C_in, C_out, kernel, size, padding, dilation, grid); the forms (row taps a block,
# output rows a stage) each is emulated in.
SHAPES = [
    (2, 64, 64, (3, 3), (5, 40), (0, 0), (1, 1), 7),
    (1, 128, 64, (3, 3), (4, 33), (1, 1), (1, 1), 5),
    (2, 64, 128, (2, 5), (3, 20), (1, 2), (2, 1), 4),
    (1, 64, 64, (3, 7), (4, 30), (0, 3), (1, 2), 40),
    (1, 64, 64, (3, 2), (3, 35), (1, 0), (2, 1), 3),
]
EMULATED = [(3, 1), (1, 1), (3, 4), (1, 2), (2, 2)]


def main() -> int:
    gen = torch.Generator().manual_seed(0)
    bad = 0
    for n, c_in, c_out, kernel, size, padding, dilation, grid in SHAPES:
        x = torch.randn(n, c_in, *size, generator=gen, dtype=torch.float64)
        image = Geometry(kernel, (1, 1), padding, dilation).image_size(size, (0, 0))
        grad = torch.randn(n, c_out, *image, generator=gen, dtype=torch.float64)
        want = reference(x, grad, kernel, padding, dilation)
        for th, rows in EMULATED:
            partial = emulate(x, grad, kernel, padding, dilation, grid, th, rows)
            unwritten = int(partial.isnan().sum())
            got = partial.sum(0).permute(2, 3, 0, 1)
            err = float((got - want).abs().max() / want.abs().max())
            ok = err < 1e-12 and unwritten == 0
            bad += not ok
            print(f"{(n, c_in, c_out, kernel, size, padding, dilation)} grid {grid}, row taps "
                  f"a block {th}, output rows a stage {rows}: error {err:.1e}, unwritten "
                  f"{unwritten}{'' if ok else '  MISMATCH'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
