"""wgmma_forward.cu's index mapping on the CPU, in float64: each block's tiles and stages
in its order, each stage's box (zero off the image), each W tap's product read from row
(k_w - 1 - j) d_w of it, and the epilogue's stores; against torch's conv_transpose2d on the
edge shapes of wgmma_forward_probe.py (smaller), with 2-4 warpgroups (pipelines) a block of one or two m64
fragments each, grids that leave blocks idle included.
No GPU; a few seconds: ``python benches/wgmma_forward_emulate.py``."""
import torch
import torch.nn.functional as F

BK, BN = 64, 64


def emulate(x, w, b, pad, dil, grid, pipelines, fragments):
    BM = 64 * fragments
    n_, c_in, H, W = x.shape; _, c_out, kh, kw = w.shape
    oh = H - 1 - 2*pad[0] + dil[0]*(kh-1) + 1; ow = W - 1 - 2*pad[1] + dil[1]*(kw-1) + 1
    out = torch.full((n_, c_out, oh, ow), float('nan'), dtype=torch.float64)
    xl = x.permute(0,2,3,1)
    chunks = c_in // BK; rows = (BM + (kw-1)*dil[1] + 7)//8*8
    co_tiles = c_out // BN; x_tiles = -(-ow // BM); tiles = n_*oh*x_tiles; per_tile = kh*chunks
    for blk, pipe in [(blk, pipe) for blk in range(grid) for pipe in range(pipelines)]:
        co_tile = blk % co_tiles; first = blk // co_tiles * pipelines + pipe
        step = grid // co_tiles * pipelines
        mine = (tiles - first + step - 1)//step if first < tiles else 0
        d = None
        for s in range(mine*per_tile):
            k, rest = divmod(s, per_tile); tile = first + k*step
            tap_h, chunk = divmod(rest, chunks)
            x0 = (tile % x_tiles)*BM; y = (tile // x_tiles) % oh; n = tile // (x_tiles*oh)
            h = y + pad[0] - tap_h*dil[0]; w0 = x0 + pad[1] - (kw-1)*dil[1]
            box = torch.zeros(rows, BK, dtype=torch.float64)
            for r in range(rows):
                ww = w0 + r
                if 0 <= h < H and 0 <= ww < W: box[r] = xl[n, h, ww, chunk*BK:(chunk+1)*BK]
            if s % per_tile == 0: d = torch.zeros(BM, BN, dtype=torch.float64)
            for j in range(kw):
                start = (kw-1-j)*dil[1]
                bt = w[chunk*BK:(chunk+1)*BK, co_tile*BN:(co_tile+1)*BN, tap_h, j]   # (ci, co)
                d += box[start:start+BM] @ bt
            if s % per_tile == per_tile - 1:
                for m in range(BM):
                    if x0 + m < ow:
                        out[n, co_tile*BN:(co_tile+1)*BN, y, x0+m] = d[m] + (b[co_tile*BN:(co_tile+1)*BN] if b is not None else 0)
    return out
g = torch.Generator().manual_seed(0)
for (n, ci, co, k, size, pad, dil, bias, grid) in [(2,64,64,(3,3),(5,150),(0,0),(1,1),True,6),
        (1,128,128,(2,3),(4,140),(1,2),(2,2),True,4),(1,64,64,(2,7),(3,129),(0,3),(1,2),False,3),
        (2,64,192,(2,1),(3,130),(0,0),(1,1),True,9),(3,64,64,(3,5),(4,10),(2,4),(1,1),True,5)]:
    x = torch.randn(n, ci, *size, dtype=torch.float64, generator=g); w = torch.randn(ci, co, *k, dtype=torch.float64, generator=g)
    b = torch.randn(co, dtype=torch.float64, generator=g) if bias else None
    want = F.conv_transpose2d(x, w, b, padding=pad, dilation=dil)
    for pipelines, fragments in ((2, 1), (3, 1), (4, 1), (2, 2), (3, 2)):
        got = emulate(x, w, b, pad, dil, grid, pipelines, fragments)
        print(k, pipelines, fragments, got.shape == want.shape, int(got.isnan().sum()),
              float((got-want).abs().max()))
