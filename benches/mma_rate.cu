// The rate of mma.sync alone on a Hopper SM, for the ceiling of col2im.cu's
// tf32_weight_gradient: each warp issues `steps` rounds of 32 independent m16n8k8 TF32
// products (4 x 8 tiles of a 64 x 64 accumulator, as the kernel's warps do) on operands
// held in registers, no loads; and the same with m16n8k16 bfloat16 products, for
// comparison. benches/mma_rate_probe.py times them by warps an SM.
#include <cstdint>

extern "C" __global__ void __launch_bounds__(320, 1) tf32_rate(float* out, int steps, unsigned seed) {
  float d[4][8][4] = {};
  unsigned a[4][4], b[8][2];
  for (int m = 0; m < 4; ++m)
    for (int e = 0; e < 4; ++e) a[m][e] = seed * (m * 4 + e + threadIdx.x);
  for (int n = 0; n < 8; ++n)
    for (int e = 0; e < 2; ++e) b[n][e] = seed ^ (n * 2 + e + threadIdx.x);
  for (int s = 0; s < steps; ++s) {
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
      for (int n = 0; n < 8; ++n)
        asm volatile(
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(d[m][n][0]), "+f"(d[m][n][1]), "+f"(d[m][n][2]), "+f"(d[m][n][3])
            : "r"(a[m][0]), "r"(a[m][1]), "r"(a[m][2]), "r"(a[m][3]), "r"(b[n][0]), "r"(b[n][1]));
  }
  float sum = 0.f;
  for (int m = 0; m < 4; ++m)
    for (int n = 0; n < 8; ++n)
      for (int e = 0; e < 4; ++e) sum += d[m][n][e];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;   // (so that nothing is dropped)
}

extern "C" __global__ void __launch_bounds__(320, 1) bf16_rate(float* out, int steps, unsigned seed) {
  float d[4][8][4] = {};
  unsigned a[4][4], b[8][2];
  for (int m = 0; m < 4; ++m)
    for (int e = 0; e < 4; ++e) a[m][e] = (seed * (m * 4 + e + threadIdx.x)) & 0x3f803f80u;
  for (int n = 0; n < 8; ++n)
    for (int e = 0; e < 2; ++e) b[n][e] = (seed ^ (n * 2 + e + threadIdx.x)) & 0x3f803f80u;
  for (int s = 0; s < steps; ++s) {
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
      for (int n = 0; n < 8; ++n)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(d[m][n][0]), "+f"(d[m][n][1]), "+f"(d[m][n][2]), "+f"(d[m][n][3])
            : "r"(a[m][0]), "r"(a[m][1]), "r"(a[m][2]), "r"(a[m][3]), "r"(b[n][0]), "r"(b[n][1]));
  }
  float sum = 0.f;
  for (int m = 0; m < 4; ++m)
    for (int n = 0; n < 8; ++n)
      for (int e = 0; e < 4; ++e) sum += d[m][n][e];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
