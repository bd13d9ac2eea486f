// Column buffers <-> images, the data movement behind convolution-type operators.
//
//   image   [planes][image...]            plane = sample * channels + channel
//   columns [planes][taps...][grid...]    grid = the positions a kernel is applied at
//
// Along every spatial dim, tap k at grid position i touches the image at
//   i * stride - padding + k * dilation                (may fall outside the image)
//
// col2im: image[p][o]      = bias[p % channels] + sum over (k, i) touching o of columns[p][k][i]
// im2col: columns[p][k][i] = image[p][position(i, k)], or 0 where that is outside the image
//
// col2im is a gather: one thread owns one image element and reads every column entry that
// lands on it, so the sum is deterministic and needs neither atomics nor a zeroed output.
//
// The file builds three ways: by NVRTC at run time (gemmconv/_cuda.py), by nvcc for sm_90
// in CI, and as host code, where tests/host/harness.cu calls the same per-element functions
// the kernels call and compares them with the PyTorch path.

#ifndef __CUDACC_RTC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#ifdef __CUDACC__
#define GC_FN __host__ __device__ inline
#else
#define GC_FN inline
#endif

namespace gemmconv {

typedef long long index_t;  // 64 bits: a tensor may hold more than 2^31 elements

// Everything a launch needs besides the pointers, passed by value. Only 64-bit fields, so
// the host side can lay it out as a flat array (gemmconv/shapes.py, geometry_fields).
template <int ND>
struct Geometry {
  index_t planes;    // samples * channels
  index_t channels;  // channels per sample: the bias index is plane % channels
  index_t grid[ND];
  index_t image[ND];
  index_t kernel[ND];
  index_t stride[ND];
  index_t padding[ND];
  index_t dilation[ND];
};

template <int ND>
GC_FN index_t product(const index_t (&v)[ND]) {
  index_t n = 1;
  for (int d = 0; d < ND; ++d) n *= v[d];
  return n;
}

// ---------------------------------------------------------------------------------------
// Storage types. Half types are stored as raw bits so that NVRTC needs no CUDA headers;
// all arithmetic is in Acc (float for the half types).

struct half_t { unsigned short bits; };
struct bfloat16_t { unsigned short bits; };

template <typename T>
struct Scalar {
  typedef T Acc;
  static GC_FN Acc load(T v) { return v; }
  static GC_FN T store(Acc v) { return v; }
};

template <>
struct Scalar<half_t> {
  typedef float Acc;
  static GC_FN float load(half_t v) {
#ifdef __CUDA_ARCH__
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
    return f;
#else
    __half_raw r;
    r.x = v.bits;
    return __half2float(__half(r));
#endif
  }
  static GC_FN half_t store(float f) {
    half_t v;
#ifdef __CUDA_ARCH__
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(v.bits) : "f"(f));
#else
    v.bits = __half_raw(__float2half_rn(f)).x;
#endif
    return v;
  }
};

template <>
struct Scalar<bfloat16_t> {
  typedef float Acc;
  static GC_FN float load(bfloat16_t v) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(static_cast<unsigned>(v.bits) << 16);
#else
    __nv_bfloat16_raw r;
    r.x = v.bits;
    return __bfloat162float(__nv_bfloat16(r));
#endif
  }
  static GC_FN bfloat16_t store(float f) {
    bfloat16_t v;
#ifdef __CUDA_ARCH__
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(v.bits) : "f"(f));
#else
    v.bits = __nv_bfloat16_raw(__float2bfloat16_rn(f)).x;
#endif
    return v;
  }
};

// ---------------------------------------------------------------------------------------
// Index mappings, one function each.

// Image position touched by tap k at grid position i along dim d (outside the image: the
// caller tests it).
template <int ND>
GC_FN index_t image_position(const Geometry<ND>& g, int d, index_t i, index_t k) {
  return i * g.stride[d] - g.padding[d] + k * g.dilation[d];
}

// Inverse of image_position for a fixed tap: the grid position at which tap k touches image
// position o along dim d, or -1 when no grid position does. Returns -2 once k is so large
// that this and every later tap would need a negative grid position, which ends the tap loop.
template <int ND>
GC_FN index_t grid_position(const Geometry<ND>& g, int d, index_t o, index_t k) {
  const index_t t = o + g.padding[d] - k * g.dilation[d];
  if (t < 0) return -2;
  if (t % g.stride[d] != 0) return -1;
  const index_t i = t / g.stride[d];
  return i < g.grid[d] ? i : -1;
}

// Splits a row-major flat index over `shape` into coordinates; returns the quotient left
// over (the plane, for image and grid shapes).
template <int ND>
GC_FN index_t unflatten(index_t flat, const index_t (&shape)[ND], index_t (&coord)[ND]) {
  for (int d = ND - 1; d >= 0; --d) {
    coord[d] = flat % shape[d];
    flat /= shape[d];
  }
  return flat;
}

// Sum, over every tap that touches image position o, of that tap's column entry. Recurses
// over dims so that 1-D, 2-D and 3-D share the code; tap and cell are the row-major
// indices built so far over the taps and the grid.
template <int D, int ND>
struct Gather {
  template <typename T, typename Acc>
  static GC_FN void add(const Geometry<ND>& g, const index_t (&o)[ND], const T* plane_columns,
                        index_t tap, index_t cell, index_t cells, Acc& acc) {
    for (index_t k = 0; k < g.kernel[D]; ++k) {
      const index_t i = grid_position(g, D, o[D], k);
      if (i == -2) break;
      if (i < 0) continue;
      Gather<D + 1, ND>::add(g, o, plane_columns, tap * g.kernel[D] + k, cell * g.grid[D] + i,
                             cells, acc);
    }
  }
};

template <int ND>
struct Gather<ND, ND> {
  template <typename T, typename Acc>
  static GC_FN void add(const Geometry<ND>&, const index_t (&)[ND], const T* plane_columns,
                        index_t tap, index_t cell, index_t cells, Acc& acc) {
    acc += Scalar<T>::load(plane_columns[tap * cells + cell]);
  }
};

// One image element of col2im: e is its flat index in [planes][image...].
template <typename T, int ND>
GC_FN void col2im_element(const Geometry<ND>& g, const T* columns, const T* bias, T* image,
                          index_t e) {
  typedef typename Scalar<T>::Acc Acc;
  index_t o[ND];
  const index_t p = unflatten(e, g.image, o);
  const index_t cells = product(g.grid);
  Acc acc = bias ? Scalar<T>::load(bias[p % g.channels]) : Acc(0);
  Gather<0, ND>::add(g, o, columns + p * product(g.kernel) * cells, 0, 0, cells, acc);
  image[e] = Scalar<T>::store(acc);
}

// One column entry of im2col: e is its flat index in [planes][taps...][grid...].
template <typename T, int ND>
GC_FN void im2col_element(const Geometry<ND>& g, const T* image, T* columns, index_t e) {
  index_t i[ND], k[ND];
  const index_t p = unflatten(unflatten(e, g.grid, i), g.kernel, k);
  index_t offset = 0;
  for (int d = 0; d < ND; ++d) {
    const index_t o = image_position(g, d, i[d], k[d]);
    if (o < 0 || o >= g.image[d]) {
      columns[e] = Scalar<T>::store(0);
      return;
    }
    offset = offset * g.image[d] + o;
  }
  columns[e] = image[p * product(g.image) + offset];
}

// ---------------------------------------------------------------------------------------
// Kernels: a grid-stride loop over the elements each one owns.

#ifdef __CUDACC__
template <typename T, int ND>
__global__ void col2im_kernel(const Geometry<ND> g, const T* __restrict__ columns,
                              const T* __restrict__ bias, T* __restrict__ image) {
  const index_t n = g.planes * product(g.image);
  for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<index_t>(gridDim.x) * blockDim.x)
    col2im_element(g, columns, bias, image, e);
}

template <typename T, int ND>
__global__ void im2col_kernel(const Geometry<ND> g, const T* __restrict__ image,
                              T* __restrict__ columns) {
  const index_t n = g.planes * product(g.kernel) * product(g.grid);
  for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<index_t>(gridDim.x) * blockDim.x)
    im2col_element(g, image, columns, e);
}
#endif

}  // namespace gemmconv
