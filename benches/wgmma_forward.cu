// A stride-1 2-D transposed convolution forward for channels_last bfloat16, in CUDA C++
// with wgmma, that loads one box of input positions for every W tap of a row of the kernel.
// Session 68's wgmma_shift_probe.py showed that a wgmma A descriptor may start any number of
// 128-byte rows into a 128-byte-swizzled tile (base offset 0), at 836-863 against 910
// TFLOP/s for aligned starts; Triton's kernels load a box a tap, and the copy into shared
// memory bounds them (benches/NOTES.md, sessions 39 and 67). This is the probe of that
// route, not yet a gemmconv route: C_in and C_out multiples of 64, stride 1, no groups.
//
//   out[n, y, x, co] = bias[co] + sum_{i, j, ci} x[n, y + p_h - i d_h, x + p_w - j d_w, ci]
//                                               w[ci, co, i, j]
//
// A block holds every tap's weights of 64 output channels in shared memory and loops over
// tiles of outputs along one row of the output (a persistent grid). Per row tap and chunk
// of 64 input channels a tile loads one box of its positions + (k_w - 1) d_w input
// positions, and tap j's product reads it from row (k_w - 1 - j) d_w. Loads are cp.async
// (zero-filled off the image) into a ring of STAGES boxes. Each warpgroup is a pipeline of
// its own (tiles of 64 M positions); PIPES of them share a block's weights. Built by
// benches/wgmma_forward_probe.py with nvcc for sm_90a; benches/wgmma_forward_emulate.py
// checks its index mapping on the CPU.
#include <cstdint>

#include "wgmma.cuh"

constexpr int kBK = 64, kBN = 64, kRowBytes = 128;
constexpr int kWeightTileBytes = kBN * kRowBytes;   // one tap's (64 co, 64 ci), 8 KB

// Rows of a box: a tile's `positions` and the reach of the W taps, in whole 8-row groups,
// so that every box starts on the swizzle's 1024-byte repeat.
__host__ __device__ inline int box_rows(int positions, int kernel_w, int dilation_w) {
    return (positions + (kernel_w - 1) * dilation_w + 7) / 8 * 8;
}

// The box row of output position m (within the tile) for W tap j: the box starts at input
// position x0 + p_w - (k_w - 1) d_w.
__host__ __device__ inline int box_row(int m, int j, int kernel_w, int dilation_w) {
    return m + (kernel_w - 1 - j) * dilation_w;
}

struct Shape {
    int batch, height, width, c_in;          // the input (N, H, W, C_in)
    int out_h, out_w, c_out;                 // the output (N, H_out, W_out, C_out)
    int kernel_h, kernel_w, pad_h, pad_w, dilation_h, dilation_w;
};

// A 16-byte cp.async, zero-filled where !inside, and issued only where `issue`: a predicate,
// not a branch, so that the loads between overlapped wgmmas stay out of divergent paths.
__device__ inline void copy16(uint32_t dst, const void* src, bool inside, bool issue = true) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %3, 0;\n"
                 "@p cp.async.cg.shared.global [%0], [%1], 16, %2;\n}\n"
                 :: "r"(dst), "l"(src), "r"(inside ? 16 : 0), "r"((int)issue) : "memory");
}
__device__ inline void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ inline void wait_copies() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

// d (+)= A B^T over one k-step of 16 (wgmma.cuh); d is overwritten where !accumulate.
__device__ inline void product(float (&d)[32], uint32_t a, uint32_t b, bool accumulate) {
    wgmma_m64n64k16(d, descriptor(a), descriptor(b), accumulate);
}

// Where a pipeline's s-th stage reads: its tile (-1 past the pipeline's last) and row tap,
// and the input channel chunk.
struct Stage { int tile, tap_h, chunk; };

__device__ inline Stage stage_of(int s, int first, int step, int tiles, int per_tile,
                                 int chunks) {
    int k = s / per_tile, rest = s % per_tile;
    int tile = first + k * step;
    return {tile < tiles ? tile : -1, rest / chunks, rest % chunks};
}

// Each warpgroup of a block is a pipeline of its own: tiles of 64 M positions, its own ring
// of boxes and its own named barrier, so that one warpgroup's products run while another
// waits, loads or stores. (Session 68's first form, both warpgroups of a block on tiles of
// 128 under __syncthreads, ran up to 24% slower: results/s68/F.)
struct Pipeline {
    int id, thread;   // the warpgroup within its block, the thread within the warpgroup
    __device__ Pipeline() : id(threadIdx.x / 128), thread(threadIdx.x % 128) {}
    __device__ void sync() const { asm volatile("bar.sync %0, 128;\n" :: "r"(1 + id) : "memory"); }
};

struct Tile { int n, y, x0; };
__device__ inline Tile tile_at(int tile, int x_tiles, int out_h, int positions) {
    return {tile / (x_tiles * out_h), (tile / x_tiles) % out_h, (tile % x_tiles) * positions};
}

// One stage's box by cp.async: rows off the image (or past the tiles) are zero-filled.
__device__ inline void load_box(uint32_t box, Stage st, const uint16_t* x, const Shape& sh,
                                int x_tiles, int rows, int positions, const Pipeline& pipe) {
    const Tile t = tile_at(st.tile >= 0 ? st.tile : 0, x_tiles, sh.out_h, positions);
    const int h = t.y + sh.pad_h - st.tap_h * sh.dilation_h;
    const int w0 = t.x0 + sh.pad_w - (sh.kernel_w - 1) * sh.dilation_w;
    const bool row_inside = st.tile >= 0 && h >= 0 && h < sh.height;
    // The same count of copies a thread, each one issued only within the box.
    for (int k = 0; k < (rows * 8 + 127) / 128; ++k) {
        int i = k * 128 + pipe.thread, r = i / 8, chunk = i % 8, w = w0 + r;
        bool inside = row_inside && w >= 0 && w < sh.width && r < rows;
        const uint16_t* src = inside
            ? x + (((int64_t)t.n * sh.height + h) * sh.width + w) * sh.c_in + st.chunk * kBK + chunk * 8
            : x;
        copy16(box + swizzled(r < rows ? r : 0, chunk), src, inside, r < rows);
    }
}

// weights: (co_tiles, k_h, k_w, chunks, 64 co, 64 ci), bfloat16; bias: float32 or null.
// KW: the kernel's width, a constant so that the taps' wgmmas unroll (with a loop of
// run-time length ptxas waits for each wgmma before the next: warpgroup.wait injected).
// PIPES: warpgroups a block. OVERLAP: a stage's wgmmas are left running while the next
// stage's barrier and loads are issued (wgmma.wait_group 1), so the ring's loads run
// STAGES - 2 stages ahead, not STAGES - 1. M: m64 fragments a warpgroup (tiles of 64 M
// positions), whose chains of wgmmas are independent: the tensor cores may overlap them
// where one chain's wgmmas wait on each other. ABLATE, for timing only (its outputs are
// wrong): 1 leaves out the loads after the prologue (the products read stale boxes), 2 the
// products (the tiles store whatever their accumulators hold). What each half costs alone
// says which one bounds a form, where ncu's stall reasons can only suggest it.
template <int KW, int STAGES, int PIPES, bool OVERLAP, int M, int ABLATE = 0>
__device__ inline void forward(const uint16_t* x, const uint16_t* weights, const float* bias,
                               uint16_t* out, Shape sh) {
    static_assert(!OVERLAP || STAGES >= 3, "an overlapped ring needs a box in flight");
    constexpr int kAhead = OVERLAP ? STAGES - 2 : STAGES - 1, kPositions = 64 * M;
    extern __shared__ char raw[];
    const Pipeline pipe;
    const uint32_t base = ((uint32_t)__cvta_generic_to_shared(raw) + 1023) & ~1023u;
    const int chunks = sh.c_in / kBK, taps = sh.kernel_h * sh.kernel_w;
    const int rows = box_rows(kPositions, sh.kernel_w, sh.dilation_w);
    const uint32_t w_smem = base;
    const uint32_t boxes = base + taps * chunks * kWeightTileBytes + pipe.id * STAGES * rows * kRowBytes;
    const int co_tiles = sh.c_out / kBN, co_tile = blockIdx.x % co_tiles;
    const int first = blockIdx.x / co_tiles * PIPES + pipe.id;
    const int step = gridDim.x / co_tiles * PIPES;
    const int x_tiles = (sh.out_w + kPositions - 1) / kPositions;
    const int tiles = sh.batch * sh.out_h * x_tiles;
    const int per_tile = sh.kernel_h * chunks;
    const int mine = first < tiles ? (tiles - first + step - 1) / step : 0;
    const int total = mine * per_tile;

    // This block's weights, once, for every pipeline: landed before any starts.
    const uint16_t* wsrc = weights + (int64_t)co_tile * taps * chunks * kBN * kBK;
    for (int i = threadIdx.x; i < taps * chunks * kBN * 8; i += 128 * PIPES) {
        int t = i / (kBN * 8), r = (i / 8) % kBN, chunk = i % 8;
        copy16(w_smem + t * kWeightTileBytes + swizzled(r, chunk), wsrc + (int64_t)i * 8, true);
    }
    commit();
    wait_copies<0>();
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    for (int s = 0; s < kAhead; ++s) {   // (stages past the last load zeros, as below)
        load_box(boxes + s * rows * kRowBytes, stage_of(s, first, step, tiles, per_tile, chunks),
                 x, sh, x_tiles, rows, kPositions, pipe);
        commit();
    }

    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    // This thread's 16 output channels' biases, once: the accumulator's fragment gives a
    // thread the columns 8 c + 2 (lane % 4) (+ 1), c < 8, in every tile.
    float bias_of[16];
#pragma unroll
    for (int c = 0; c < 16; ++c)
        bias_of[c] = bias ? bias[co_tile * kBN + (c / 2) * 8 + (lane % 4) * 2 + c % 2] : 0.f;
    // Not zeroed: each tile's first wgmma overwrites its accumulators (scale-d 0). (Zeroed,
    // NVVM carried them across the loop as integers, and the moves between the wgmmas and
    // their wait made ptxas wait for every chain at once: C7517.)
    float d[M][32];
    // Tiles, then their stages: the wgmma waits stay out of branches. (One loop over stages
    // with the tile's epilogue behind `if (last)`, and `wait_group 1` on the other path,
    // made ptxas serialise every wgmma: C7518, "WG.DP in divergent path".)
    for (int s = 0, k = 0; k < mine; ++k) {
        for (int r = 0; r < per_tile; ++r, ++s) {
            wait_copies<kAhead - 1>();
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            // Every thread's copies of stage s landed, and every thread is past the wgmma
            // wait that freed the box the next load overwrites (stage s - 1's, or with
            // OVERLAP s - 2's).
            pipe.sync();
            // (Past the pipeline's last stage, its tile is -1: a box of zeros, no branch.)
            const int ahead = s + kAhead;
            if (ABLATE != 1) load_box(boxes + (ahead % STAGES) * rows * kRowBytes,
                     stage_of(ahead, first, step, tiles, per_tile, chunks), x, sh, x_tiles, rows,
                     kPositions, pipe);
            commit();

            const Stage st = stage_of(s, first, step, tiles, per_tile, chunks);
            const uint32_t box = boxes + (s % STAGES) * rows * kRowBytes;
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int j = 0; j < (ABLATE == 2 ? 0 : KW); ++j) {
                uint32_t b = w_smem + ((st.tap_h * sh.kernel_w + j) * chunks + st.chunk) * kWeightTileBytes;
#pragma unroll
                for (int ks = 0; ks < kBK / 16; ++ks)   // k-steps of 16 channels, 32 bytes
#pragma unroll
                    for (int f = 0; f < M; ++f) {
                        uint32_t a = box + box_row(64 * f, j, sh.kernel_w, sh.dilation_w) * kRowBytes;
                        product(d[f], a + ks * 32, b + ks * 32, r > 0 || j > 0 || ks > 0);
                    }
            }
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            if (OVERLAP) asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            else asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");

        // The tile's epilogue: bias, bfloat16, store.
        const Tile t = tile_at(first + k * step, x_tiles, sh.out_h, kPositions);
#pragma unroll
        for (int e = 0; e < 32 * M; e += 2) {
            const int f = e / 32, i = e % 32;
            // The accumulator's fragment: warp w of a warpgroup holds rows 16 w + lane / 4
            // (+ 8), each 8 columns a pair of registers per row.
            int m = 64 * f + warp * 16 + lane / 4 + 8 * ((i / 2) % 2);
            int co = co_tile * kBN + (i / 4) * 8 + (lane % 4) * 2;
            if (t.x0 + m >= sh.out_w) continue;
            float v0 = d[f][i] + bias_of[(i / 4) * 2], v1 = d[f][i + 1] + bias_of[(i / 4) * 2 + 1];
            uint32_t lo = __float_as_uint(v0), hi = __float_as_uint(v1);
            // Round to nearest even, as torch's conversion does (no NaNs here).
            lo = (lo + 0x7FFF + ((lo >> 16) & 1)) >> 16;
            hi = (hi + 0x7FFF + ((hi >> 16) & 1)) >> 16;
            *reinterpret_cast<uint32_t*>(
                out + (((int64_t)t.n * sh.out_h + t.y) * sh.out_w + t.x0 + m) * sh.c_out + co) =
                lo | (hi << 16);
        }
    }
    wait_copies<0>();
}

// The kernels take the shape as plain integers (CuPy passes no structs); has_bias picks
// whether `bias` is read.
#define GC_FORWARD_A(KW, STAGES, PIPES, OVERLAP, M, ABLATE, SUFFIX)                        \
    extern "C" __global__ void __launch_bounds__(128 * PIPES, 1)                            \
    forward_k##KW##_s##STAGES##_p##PIPES##_o##OVERLAP##_m##M##SUFFIX(                      \
            const uint16_t* x, const uint16_t* w, const float* bias, uint16_t* out,         \
            int has_bias, int batch, int height, int width, int c_in, int out_h, int out_w, \
            int c_out, int kernel_h, int pad_h, int pad_w, int dilation_h, int dilation_w) { \
        forward<KW, STAGES, PIPES, OVERLAP, M, ABLATE>(x, w, has_bias ? bias : nullptr, out, \
                                               Shape{batch, height, width, c_in, out_h,     \
                                                     out_w, c_out, kernel_h, KW, pad_h,     \
                                                     pad_w, dilation_h, dilation_w});       \
    }
#define GC_FORWARD(KW, STAGES, PIPES, OVERLAP, M) GC_FORWARD_A(KW, STAGES, PIPES, OVERLAP, M, 0, )
// The forms wgmma_forward_probe.py's FORMS names, each width.
#define GC_FORWARDS(KW) GC_FORWARD(KW, 4, 2, 0, 1) GC_FORWARD(KW, 4, 2, 1, 1)               \
    GC_FORWARD(KW, 3, 2, 1, 1) GC_FORWARD(KW, 6, 2, 1, 1) GC_FORWARD(KW, 3, 3, 1, 1)        \
    GC_FORWARD(KW, 3, 4, 0, 1) GC_FORWARD(KW, 3, 4, 1, 1) GC_FORWARD(KW, 4, 4, 1, 1)        \
    GC_FORWARD(KW, 4, 2, 1, 2) GC_FORWARD(KW, 3, 3, 1, 2) GC_FORWARD(KW, 2, 3, 0, 2)
GC_FORWARDS(1)
GC_FORWARDS(3)
GC_FORWARDS(5)
GC_FORWARDS(7)
// Ablations of two forms, 3x3 (wgmma_forward_probe.py's ABLATIONS).
GC_FORWARD_A(3, 4, 2, 0, 1, 1, _a1) GC_FORWARD_A(3, 4, 2, 0, 1, 2, _a2)
GC_FORWARD_A(3, 4, 2, 1, 1, 1, _a1) GC_FORWARD_A(3, 4, 2, 1, 1, 2, _a2)
GC_FORWARD_A(3, 3, 4, 1, 1, 1, _a1) GC_FORWARD_A(3, 3, 4, 1, 1, 2, _a2)
