// The rate of mma.sync alone on a Hopper SM, for the ceiling of col2im.cu's
// tf32_weight_gradient: each warp issues `steps` rounds of M x 8 independent products (M
// tiles of 16 rows by 8 of 8 columns, as the kernel's warps hold them: M = 4 by default, 2
// or 5 in its balanced forms) on operands held in registers, no loads: m16n8k8 TF32 (K =
// 8), and m16n8k16 bfloat16 (K = 16) for comparison. benches/mma_rate_probe.py times them
// by warps an SM.

template <int K, int M>
__device__ void products(float* out, int steps, unsigned seed) {
  // (bfloat16 operands masked to finite values; the TF32 ones may be anything)
  const unsigned mask = K == 8 ? 0xffffffffu : 0x3f803f80u;
  float d[M][8][4] = {};
  unsigned a[M][4], b[8][2];
  for (int m = 0; m < M; ++m)
    for (int e = 0; e < 4; ++e) a[m][e] = (seed * (m * 4 + e + threadIdx.x)) & mask;
  for (int n = 0; n < 8; ++n)
    for (int e = 0; e < 2; ++e) b[n][e] = (seed ^ (n * 2 + e + threadIdx.x)) & mask;
  for (int s = 0; s < steps; ++s) {
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        float* c = d[m][n];
        if constexpr (K == 8)
          asm volatile(
              "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
              "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
              : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
              : "r"(a[m][0]), "r"(a[m][1]), "r"(a[m][2]), "r"(a[m][3]), "r"(b[n][0]),
                "r"(b[n][1]));
        else
          asm volatile(
              "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
              "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
              : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
              : "r"(a[m][0]), "r"(a[m][1]), "r"(a[m][2]), "r"(a[m][3]), "r"(b[n][0]),
                "r"(b[n][1]));
      }
  }
  float sum = 0.f;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < 8; ++n)
      for (int e = 0; e < 4; ++e) sum += d[m][n][e];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;   // (so that no product is dropped)
}

// Warps a block at most as tf32_weight_gradient's forms of M tiles (col2im.cu's
// wgrad_max_warps): 12 of four, 16 of two, 8 of five.
#define RATE_KERNEL(NAME, K, M, WARPS)                                                  \
  extern "C" __global__ void __launch_bounds__(32 * WARPS, 1) NAME(float* out, int steps, \
                                                                 unsigned seed) {       \
    products<K, M>(out, steps, seed);                                                   \
  }
RATE_KERNEL(tf32_rate, 8, 4, 12)
RATE_KERNEL(bf16_rate, 16, 4, 12)
RATE_KERNEL(tf32_rate_m2, 8, 2, 16)
RATE_KERNEL(tf32_rate_m5, 8, 5, 8)
