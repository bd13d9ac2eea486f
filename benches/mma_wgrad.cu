// The float32 weight gradient of a stride-1 2-D transposed convolution, channels_last, on
// TF32 mma.sync in CUDA C++: a probe, not yet a gemmconv route.
//
//   grad_w[ci, co, i, j] = sum_{n, y, x} x[n, y + p_h - i d_h, x + p_w - j d_w, ci]
//                                          grad[n, y, x, co]
//
// Why mma.sync: the reduction runs along positions, and wgmma takes 32-bit operands only
// K-major from shared memory, i.e. positions innermost. Channels_last rows lie channels
// innermost, so gemmconv's Triton kernel reads copies of one operand moved along W for
// every W tap (4.8 of 9.8 ms on 2d-1024, an H100: benches/NOTES.md, session 62), or turns
// its tiles in registers. mma.sync's operands are registers, each loaded from any shared
// address: the W taps read one box of input rows at shifted row offsets, and the copies go.
//
// A block owns 64 input by 64 output channels, TH row taps from blockIdx.y * TH and every
// W tap: a warp a tap, its 64 x 64 partial sum in registers. It walks stages (blockIdx.x,
// + gridDim.x, ...), each a strip of P positions of R output rows: a stage loads the
// strip's output gradient (R x P x 64) and one box of input positions a row (P + (k_w - 1)
// d_w positions x 64) for each of the R + (TH - 1) d_h input rows its row taps reach, by
// cp.async into a ring. So each W tap reads one box at a shifted row, and each input row
// serves the R output rows: with R = 1 and three row taps, the stage loads 4 rows for one
// output row, with R = 4, 6 for 4. Rows are padded to 72 floats, so that a warp's
// fragment loads, 8 channels by 4 positions, hit 32 banks. Each block stores its partial
// sums; a fixed-order sum over blocks follows (deterministic).
// TF32: the output gradient rounded to nearest (cvt.rna), the input truncated by the
// tensor cores, as gemmconv's weight_gradient does. Built by benches/mma_wgrad_probe.py;
// benches/mma_wgrad_emulate.py checks its index mapping on the CPU.
#include <cstdint>

constexpr int kP = 32;            // positions a stage
constexpr int kC = 64;            // channels of a tile, either operand
constexpr int kPitch = kC + 8;    // floats a row in shared memory

// Rows of a stage's input box: the strip and the reach of the W taps.
__host__ __device__ inline int wgrad_box_rows(int kernel_w, int dilation_w) {
    return kP + (kernel_w - 1) * dilation_w;
}

// Input rows a stage loads: its R output rows' reach over TH row taps.
__host__ __device__ inline int wgrad_boxes(int rows, int row_taps, int dilation_h) {
    return rows + (row_taps - 1) * dilation_h;
}

// The box of output row r (of the stage's R) for the block's row tap `tap`: box 0 is input
// row y + p_h - (i0 + TH - 1) d_h, where i0 is the block's first row tap.
__host__ __device__ inline int wgrad_box(int r, int tap, int row_taps, int dilation_h) {
    return r + (row_taps - 1 - tap) * dilation_h;
}

// The box row of strip position k for W tap j: the box starts at input position
// x0 + p_w - (k_w - 1) d_w.
__host__ __device__ inline int wgrad_box_row(int k, int j, int kernel_w, int dilation_w) {
    return k + (kernel_w - 1 - j) * dilation_w;
}

// Stage q's first output row and strip: q = (n * row_groups + y / R) * strips + strip.
struct Strip { int n, y, x0; };
__host__ __device__ inline Strip strip_of(int q, int strips, int row_groups, int rows) {
    return {q / (strips * row_groups), (q / strips) % row_groups * rows, (q % strips) * kP};
}

struct Shape {
    int batch, height, width, c_in;      // the input (N, H, W, C_in)
    int out_h, out_w, c_out;             // the output gradient (N, H_out, W_out, C_out)
    int kernel_h, kernel_w, pad_h, pad_w, dilation_h, dilation_w;
};

__device__ inline void copy16(uint32_t dst, const void* src, bool inside) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(inside ? 16 : 0) : "memory");
}
__device__ inline void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ inline void wait_copies() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

__device__ inline uint32_t rounded_tf32(float v) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
    return r;
}

// d += a b, m16n8k8, TF32 operands, float32 accumulators.
__device__ inline void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// One stage's tiles by cp.async, zero-filled off the image and past the stages: the output
// gradient's R strips (kP rows each), then the boxes of input rows, kPitch floats a row.
template <int TH, int R>
__device__ inline void load_stage(uint32_t smem, int q, int stages, const float* x,
                                  const float* grad, const Shape& sh, int strips,
                                  int row_groups, int box_rows, int row_tap0, int ci0, int co0) {
    const Strip st = strip_of(q < stages ? q : 0, strips, row_groups, R);
    const bool live = q < stages;
    for (int c = threadIdx.x; c < R * kP * (kC / 4); c += blockDim.x) {
        int r = c / (kP * kC / 4), p = (c / (kC / 4)) % kP, k = c % (kC / 4);
        int y = st.y + r, xo = st.x0 + p;
        bool inside = live && y < sh.out_h && xo < sh.out_w;
        const float* src = inside
            ? grad + (((int64_t)st.n * sh.out_h + y) * sh.out_w + xo) * sh.c_out + co0 + k * 4
            : grad;
        copy16(smem + ((r * kP + p) * kPitch + k * 4) * 4, src, inside);
    }
    const uint32_t boxes = smem + R * kP * kPitch * 4;
    const int w0 = st.x0 + sh.pad_w - (sh.kernel_w - 1) * sh.dilation_w;
    const int h0 = st.y + sh.pad_h - (row_tap0 + TH - 1) * sh.dilation_h;
    const int count = wgrad_boxes(R, TH, sh.dilation_h);
    for (int c = threadIdx.x; c < count * box_rows * (kC / 4); c += blockDim.x) {
        int b = c / (box_rows * (kC / 4)), r = (c / (kC / 4)) % box_rows, k = c % (kC / 4);
        int h = h0 + b, w = w0 + r;
        bool inside = live && h >= 0 && h < sh.height && w >= 0 && w < sh.width;
        const float* src = inside
            ? x + (((int64_t)st.n * sh.height + h) * sh.width + w) * sh.c_in + ci0 + k * 4
            : x;
        copy16(boxes + ((b * box_rows + r) * kPitch + k * 4) * 4, src, inside);
    }
}

// partial: (gridDim.x, k_h, k_w, C_in, C_out) float32, this block's sums.
template <int KW, int TH, int STAGES, int R>
__device__ inline void weight_gradient(const float* x, const float* grad, float* partial,
                                       Shape sh) {
    extern __shared__ float4 raw[];   // (16-byte aligned, as cp.async needs)
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(raw);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int tap = warp / KW, j = warp % KW, i = blockIdx.y * TH + tap;
    const int co_tiles = sh.c_out / kC;
    const int ci0 = blockIdx.z / co_tiles * kC, co0 = blockIdx.z % co_tiles * kC;
    const int strips = (sh.out_w + kP - 1) / kP, row_groups = (sh.out_h + R - 1) / R;
    const int stages = sh.batch * row_groups * strips;
    const int box_rows = wgrad_box_rows(sh.kernel_w, sh.dilation_w);
    const int stage_floats = (R * kP + wgrad_boxes(R, TH, sh.dilation_h) * box_rows) * kPitch;
    const int mine = (int)blockIdx.x < stages ? (stages - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
    const float* tiles = reinterpret_cast<const float*>(raw);

    float d[4][8][4];   // (16 input channels) x (8 output channels) fragments
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) d[m][n][e] = 0.f;

    for (int s = 0; s < STAGES - 1; ++s) {
        load_stage<TH, R>(base + s * stage_floats * 4, blockIdx.x + s * gridDim.x, stages, x,
                          grad, sh, strips, row_groups, box_rows, blockIdx.y * TH, ci0, co0);
        commit();
    }
    const int shift = (KW - 1 - j) * sh.dilation_w;   // wgrad_box_row(k, j) - k
    for (int s = 0; s < mine; ++s) {
        wait_copies<STAGES - 2>();
        __syncthreads();   // stage s landed for all; all are past stage s - 1's reads
        const int ahead = s + STAGES - 1;
        load_stage<TH, R>(base + (ahead % STAGES) * stage_floats * 4,
                          blockIdx.x + ahead * gridDim.x, stages, x, grad, sh, strips,
                          row_groups, box_rows, blockIdx.y * TH, ci0, co0);
        commit();
        if (i >= sh.kernel_h) continue;   // (a warp past the kernel's rows: no products)
        const float* stage = tiles + (s % STAGES) * stage_floats;
#pragma unroll
        for (int kk = 0; kk < R * kP; kk += 8) {   // (R strips of kP positions)
            const float* gy = stage;
            const float* box = stage + R * kP * kPitch +
                               (wgrad_box(kk / kP, tap, TH, sh.dilation_h) * box_rows + shift -
                                kk / kP * kP) * kPitch;
            uint32_t a[4][4], b[8][2];
            // A = the input transposed (channels x positions), B = the output gradient
            // (positions x channels): fragment (row g, column t) and the like.
#pragma unroll
            for (int m = 0; m < 4; ++m) {
                const float* p = box + (kk + t) * kPitch + m * 16 + g;
                a[m][0] = __float_as_uint(p[0]);
                a[m][1] = __float_as_uint(p[8]);
                a[m][2] = __float_as_uint(p[4 * kPitch]);
                a[m][3] = __float_as_uint(p[4 * kPitch + 8]);
            }
#pragma unroll
            for (int n = 0; n < 8; ++n) {
                const float* p = gy + (kk + t) * kPitch + n * 8 + g;
                b[n][0] = rounded_tf32(p[0]);
                b[n][1] = rounded_tf32(p[4 * kPitch]);
            }
#pragma unroll
            for (int m = 0; m < 4; ++m)
#pragma unroll
                for (int n = 0; n < 8; ++n) mma_tf32(d[m][n], a[m], b[n]);
        }
    }
    wait_copies<0>();
    if (i >= sh.kernel_h) return;
    // The accumulator's fragment: rows (input channels) g and g + 8, columns (output
    // channels) 2 t and 2 t + 1.
    float* out = partial + ((((int64_t)blockIdx.x * sh.kernel_h + i) * KW + j) * sh.c_in + ci0) *
                               sh.c_out + co0;
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                *reinterpret_cast<float2*>(out + (m * 16 + g + 8 * h) * sh.c_out + n * 8 + 2 * t) =
                    make_float2(d[m][n][2 * h], d[m][n][2 * h + 1]);
}

#define GC_WGRAD(KW, TH, STAGES, R)                                                         \
    extern "C" __global__ void __launch_bounds__(32 * KW * TH, 1)                           \
    wgrad_k##KW##_t##TH##_s##STAGES##_r##R(                                                 \
            const float* x, const float* grad, float* partial, int batch, int height,       \
            int width, int c_in, int out_h, int out_w, int c_out, int kernel_h, int pad_h,  \
            int pad_w, int dilation_h, int dilation_w) {                                    \
        weight_gradient<KW, TH, STAGES, R>(x, grad, partial,                                \
                                        Shape{batch, height, width, c_in, out_h, out_w,     \
                                              c_out, kernel_h, KW, pad_h, pad_w,            \
                                              dilation_h, dilation_w});                     \
    }
// The forms benches/mma_wgrad_probe.py's FORMS names: (k_w, row taps a block, ring depth,
// output rows a stage).
GC_WGRAD(3, 3, 3, 1) GC_WGRAD(3, 3, 4, 1) GC_WGRAD(3, 1, 4, 1) GC_WGRAD(3, 3, 3, 2)
GC_WGRAD(3, 3, 2, 4) GC_WGRAD(5, 1, 4, 1) GC_WGRAD(5, 1, 3, 2) GC_WGRAD(5, 1, 4, 2)
GC_WGRAD(7, 1, 3, 1) GC_WGRAD(7, 1, 3, 2) GC_WGRAD(1, 2, 4, 2) GC_WGRAD(2, 2, 4, 1)
