// Can a wgmma A operand start a row (or a few) into a 128-byte-swizzled tile in shared
// memory? The W taps of a stride-1 2-D call read one box one position further on each;
// with positions as the rows of A (the forward), a tap s rows on would be the same box
// read from row s, one load for every W tap (benches/NOTES.md, sessions 39 and 48:
// Triton and Gluon refuse a slice that starts off a multiple of its length).
//
// One warpgroup: A, 128 rows x 64 bfloat16 (one 128-byte row each), and B, 64 (N) x 64
// (K), both K-major, are copied into shared memory with the 128-byte swizzle; then, for
// each shift s < `shifts`, D_s = A[s : s + 64] B^T by four m64n64k16 wgmmas whose A
// descriptor starts s rows into the tile. The descriptor's base offset field is set to
// (start >> 7) & 7 where `with_base_offset`, else 0, so the probe shows which the
// hardware needs; `shifted_rate` times shifted starts against unshifted ones. Built by
// benches/wgmma_shift_probe.py with nvcc for sm_90a.
#include <cstdint>

#include "wgmma.cuh"

constexpr int kRows = 128, kK = 64, kN = 64, kRowBytes = 128;

// Where A and B lie in shared memory (shared-window addresses, for descriptors).
struct Bases { uint32_t a, b; };

// A and B into shared memory under the 128-byte swizzle, as 16-byte chunks, each tile on a
// 1024-byte boundary (the swizzle's repeat).
__device__ inline Bases load_tiles(const uint16_t* a, const uint16_t* b) {
    __shared__ __align__(1024) uint16_t sa[kRows * kK];
    __shared__ __align__(1024) uint16_t sb[kN * kK];
    char* sa_bytes = reinterpret_cast<char*>(sa);
    char* sb_bytes = reinterpret_cast<char*>(sb);
    for (int i = threadIdx.x; i < (kRows + kN) * kK / 8; i += 128) {
        bool in_a = i < kRows * kK / 8;
        int j = in_a ? i : i - kRows * kK / 8;
        int row = j / (kK / 8), k = (j % (kK / 8)) * 8;
        *reinterpret_cast<uint4*>((in_a ? sa_bytes : sb_bytes) + swizzled(row, k / 8)) =
            *reinterpret_cast<const uint4*>((in_a ? a : b) + row * kK + k);
    }
    // The tensor cores read shared memory through the async proxy.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    return {(uint32_t)__cvta_generic_to_shared(sa), (uint32_t)__cvta_generic_to_shared(sb)};
}

// d (+)= A[s : s + 64] B^T over K = 64: four m64n64k16 wgmmas, A's descriptor s rows on;
// d is overwritten where `accumulate` is false. Issued, not waited for.
__device__ inline void product(float (&d)[32], uint32_t a_base, uint32_t b_base, int s,
                               bool accumulate, int with_base_offset) {
    for (int step = 0; step < kK / 16; ++step) {
        uint32_t a_start = a_base + s * kRowBytes + step * 32;
        uint64_t da = descriptor(a_start, with_base_offset ? (a_start >> 7) & 7 : 0);
        uint64_t db = descriptor(b_base + step * 32, 0);
        int scale_d = accumulate || step > 0;
        wgmma_m64n64k16(d, da, db, scale_d);
    }
}

extern "C" __global__ void __launch_bounds__(128)
shifted_products(const uint16_t* a, const uint16_t* b, float* out, int shifts,
                 int with_base_offset) {
    const Bases base = load_tiles(a, b);
    if ((base.a | base.b) & 1023) return;   // (tiles off the repeat: the outputs stay NaN)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int s = 0; s < shifts; ++s) {
        float d[32];
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        product(d, base.a, base.b, s, false, with_base_offset);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        // The accumulator's fragment: warp w holds rows 16 w + lane / 4 (+ 8), each 8
        // columns a pair of registers per row.
        for (int i = 0; i < 32; ++i) {
            int row = warp * 16 + lane / 4 + 8 * ((i / 2) % 2);
            int col = (i / 4) * 8 + (lane % 4) * 2 + (i % 2);
            out[(s * 64 + row) * kN + col] = d[i];
        }
    }
}

// The rate of three taps' products a step, taps `shift` rows apart (0: all three from row
// 0), `steps` times over: whether a start off the swizzle's 1024-byte repeat costs the
// tensor cores time. Each block writes one sum, so that nothing is left out.
extern "C" __global__ void __launch_bounds__(128)
shifted_rate(const uint16_t* a, const uint16_t* b, float* out, int steps, int shift,
             int with_base_offset) {
    const Bases base = load_tiles(a, b);
    float d[32];
    for (int i = 0; i < steps; ++i) {
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        for (int tap = 0; tap < 3; ++tap)
            product(d, base.a, base.b, tap * shift, i > 0 || tap > 0, with_base_offset);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
    float sum = 0.f;
    for (int i = 0; i < 32; ++i) sum += d[i];
    if (threadIdx.x == 0) out[blockIdx.x] = sum;
}
