// What the benches' CUDA C++ probes (wgmma_shift.cu, wgmma_forward.cu) share: the 128-byte
// swizzle, the shared-memory descriptor of an operand, and the one wgmma they issue.
#pragma once
#include <cstdint>

// Byte offset of the 16-byte chunk `chunk` of row `row` of a tile of 128-byte rows under the
// 128-byte swizzle: the chunk's index XORed with the row's within its group of eight rows
// (the tile on a 1024-byte boundary).
__host__ __device__ inline int swizzled(int row, int chunk) {
    return row * 128 + ((chunk ^ (row & 7)) << 4);
}

// A wgmma shared-memory descriptor of a K-major operand under the 128-byte swizzle: the
// start address and the stride between 8-row groups (1024 bytes), both in 16 bytes; the
// base offset (session 68: 0 is right for a start at any row of a tile on the swizzle's
// 1024-byte repeat); the layout (1 << 62: 128-byte swizzle). The leading byte offset is
// unused when swizzled.
__host__ __device__ inline uint64_t descriptor(uint32_t address, uint32_t base_offset = 0) {
    uint64_t d = 0;
    d |= (uint64_t)((address & 0x3FFFF) >> 4);
    d |= (uint64_t)1 << 16;
    d |= (uint64_t)(1024 >> 4) << 32;
    d |= (uint64_t)(base_offset & 7) << 49;
    d |= (uint64_t)1 << 62;
    return d;
}

// d (+)= A B^T, m64n64k16, bfloat16 operands from shared memory by descriptor (both
// K-major), float32 accumulators; d is overwritten where scale_d is 0. Issued, not waited for.
__device__ inline void wgmma_m64n64k16(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
          "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
          "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
          "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
          "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "r"(scale_d));
}
