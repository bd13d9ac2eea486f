// Column buffers <-> images, the data movement behind convolution-type operators.
//
//   image   [planes][image...]            plane = sample * channels + channel
//   columns [samples][channels][taps...][grid...]    grid = the positions a kernel is
//                                         applied at; any strides but the innermost grid
//                                         dim's, which is 1 (see column_plane)
//
// Along every spatial dim, tap k at grid position i touches the image at
//   i * stride - padding + k * dilation                (may fall outside the image)
//
// col2im: image[p][o]      = bias[p % channels] + sum over (k, i) touching o of columns[p][k][i]
// im2col: columns[p][k][i] = image[p][position(i, k)], or 0 where that is outside the image
//
// col2im is a gather: one thread owns one image element and reads every column entry that
// lands on it, so the sum is deterministic and needs neither atomics nor a zeroed output.
// (Where most rows receive no entries, a fill writes the bias first and col2im gathers over
// the other rows only; see col2im_element.)
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

typedef long long index_t;

// The kernel's shape. A layer's taps never change, so the fast kernels take them as
// template arguments (kernel sizes, strides, dilations, dim by dim): division and remainder
// by the stride then compile to multiplications, and the tap loops unroll. The generic
// kernels take them at run time.
template <int ND>
struct Taps {
  index_t kernel[ND];
  index_t stride[ND];
  index_t dilation[ND];
};

template <int ND, index_t... V>
GC_FN constexpr Taps<ND> make_taps() {
  static_assert(sizeof...(V) == 3 * ND, "kernel sizes, strides and dilations, one per dim");
  const index_t v[] = {V...};
  Taps<ND> t{};
  for (int d = 0; d < ND; ++d) {
    t.kernel[d] = v[d];
    t.stride[d] = v[ND + d];
    t.dilation[d] = v[2 * ND + d];
  }
  return t;
}

// Sizes of one launch. Padding lives here rather than in Taps because a launch may cover
// a band of an image, whose offset from the band's grid acts as a padding of its own; the
// image planes of a band are plane_stride elements apart. All fields are 64-bit so that the
// host can lay the struct out as a flat array (gemmconv/shapes.py).
template <int ND>
struct Extent {
  index_t planes;          // samples * channels
  index_t channels;        // the bias index is plane % channels
  index_t plane_stride;    // elements from one image plane to the next
  index_t column_sample;   // elements from one sample's columns to the next,
  index_t column_tap;      // one tap's to the next (a channel's taps lie back to back),
  index_t grid[ND];
  index_t image[ND];
  index_t padding[ND];
  index_t column_grid[ND];  // and along each grid dim (the innermost is 1 and not read)
};

template <typename I, int ND>
GC_FN I product(const index_t (&v)[ND]) {
  I n = 1;
  for (int d = 0; d < ND; ++d) n *= static_cast<I>(v[d]);
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

// P elements moved as one access (16 bytes where P * sizeof(T) is): a thread copying
// single 4-byte elements reached about 55% of the copy bandwidth on a pure reorder, one
// moving 16 bytes at a time about 90% (NOTES change 39).
template <typename T, int P>
struct alignas(sizeof(T) * P) Packed {
  T v[P];
};

// ---------------------------------------------------------------------------------------
// Index mappings, one function each. I is the index type: int where every index of the
// launch fits in 31 bits (cheaper division), long long otherwise.

// Offset of plane p's columns. Besides (planes, taps, grid) back to back, columns may lie
// in any order where each channel's taps are back to back: the forward of a convolution
// leaves room after each sample's and group's columns for rows of ones that add the bias
// in its GEMM, and the row-products route (ops.py) keeps the grid's outermost dim
// outermost, so that consecutive rows' columns overlap as GEMM operands. Written as the
// contiguous offset plus a gap per sample (negative in the row-products layout), the test
// spares the contiguous layouts a division; and the channel stride as taps times the tap
// stride lets the compiler derive each tap's address from the plane's (with a separate
// channel stride it kept every tap's offset in registers: 40 -> 160 on a 105-tap im2col).
template <typename I, int ND>
GC_FN I column_plane(const Taps<ND>& t, const Extent<ND>& x, I p) {
  const I channels = static_cast<I>(x.channels);
  const I channel = product<I>(t.kernel) * static_cast<I>(x.column_tap);
  const I gap = static_cast<I>(x.column_sample) - channels * channel;
  return p * channel + (gap ? p / channels * gap : I(0));
}

// Image position touched by tap k at grid position i along dim d (outside the image: the
// caller tests it). X is either layout's sizes (Extent, Interleaved), read for the padding.
template <typename I, int ND, typename X>
GC_FN I image_position(const Taps<ND>& t, const X& x, int d, I i, I k) {
  return i * static_cast<I>(t.stride[d]) - static_cast<I>(x.padding[d]) +
         k * static_cast<I>(t.dilation[d]);
}

// Floor of a / b for b > 0 (C++ division truncates towards zero).
template <typename I>
GC_FN I floor_div(I a, I b) {
  return (a >= 0 ? a : a - b + 1) / b;
}

// Inverse of image_position for a fixed tap: the grid position at which tap k touches, along
// dim d, the image position whose padded coordinate (position + padding) is
// q * stride + r, or -1 when no grid position does. r need not be reduced: a caller that
// knows r at compile time (a thread whose outputs start on a multiple of the stride) gets
// the stride test folded away, leaving two bounds checks.
template <typename I, int ND>
GC_FN I grid_position(const Taps<ND>& t, const Extent<ND>& x, int d, I q, I r, I k) {
  const I stride = static_cast<I>(t.stride[d]);
  const I s = r - k * static_cast<I>(t.dilation[d]);
  const I i = q + s / stride;
  return s % stride == 0 && i >= 0 && i < static_cast<I>(x.grid[d]) ? i : -1;
}

// The taps of dim d that can reach the padded coordinate q * stride + r are those with
// k * dilation = r (mod stride): every step-th tap from the first, step = stride /
// gcd(stride, dilation), ceil(kernel / step) of them. Returns the first (kernel where none
// can, r not being a multiple of the gcd) and sets step. A loop over taps known only at run
// time starts and steps by these, so that a kernel much larger than its stride (64 taps at
// stride 32) costs its few reaching taps per output, not all of them.
template <typename I, int ND>
GC_FN I first_reaching_tap(const Taps<ND>& t, int d, I r, I& step) {
  const I stride = static_cast<I>(t.stride[d]);
  // Extended Euclid on (dilation mod stride, stride): g = gcd, and u with u * dilation = g
  // (mod stride). A dilation that is a multiple of the stride gives g = stride, u = 0.
  I g = static_cast<I>(t.dilation[d]) % stride, b = stride, u = 1, v = 0;
  while (b != 0) {
    const I quotient = g / b, rest = g - quotient * b, w = u - quotient * v;
    g = b;
    b = rest;
    u = v;
    v = w;
  }
  step = stride / g;
  const I phase = (r % stride + stride) % stride;
  if (phase % g != 0) return static_cast<I>(t.kernel[d]);
  // k = (phase / g) * u solves k * (dilation / g) = phase / g (mod step).
  return ((phase / g) % step * (u % step) % step + step) % step;
}

// Splits a row-major flat index over `shape` into coordinates; returns the quotient left
// over (the plane, for image and grid shapes).
template <typename I, int ND>
GC_FN I unflatten(I flat, const index_t (&shape)[ND], I (&coord)[ND]) {
  for (int d = ND - 1; d >= 0; --d) {
    coord[d] = flat % static_cast<I>(shape[d]);
    flat /= static_cast<I>(shape[d]);
  }
  return flat;
}

// A warp's lanes; im2col and col2im threads that own several runs of positions take them
// 32 apart, so that each load or store instruction still covers consecutive positions.
constexpr int kWarp = 32;

// Adds, for J spans of V image positions along the innermost dim of R planes, every column
// entry that lands on each; the planes' columns lie plane_step elements apart. Positions
// are given per dim as padded coordinates q * stride + r (see
// grid_position), the innermost one being the first of the first span; the V positions of a
// span follow it at r + 1, r + 2, ..., and span j starts kWarp * V * j after span 0.
// Recurses over dims so that 1-D, 2-D and 3-D share the code; tap is the row-major index
// built so far over the taps, and cell the offset in `columns` of the plane and the grid
// position so far. Offsets stay integers of type I until the load: added to a pointer one
// term at a time, they made the compiler widen every tap's address to 64 bits (about 10%
// of col2im's rate, NOTES change 38). No early exits: with the taps known at compile time
// the loops unroll into predicated loads that can all be in flight at once, and the outer
// dims' tap tests serve all J V positions. (The generic kernel, with one output a thread
// and its taps at run time, gathers by gather_reaching instead.)
template <int D, int V, int J, int R, typename T, typename I, int ND, typename Acc>
GC_FN void gather(const Taps<ND>& t, const Extent<ND>& x, const I (&q)[ND], const I (&r)[ND],
                  const T* columns, I plane_step, I tap, I cell, Acc (&acc)[R][J][V]) {
#pragma unroll
  for (I k = 0; k < static_cast<I>(t.kernel[D]); ++k) {
    const I next_tap = tap * static_cast<I>(t.kernel[D]) + k;
    if constexpr (D < ND - 1) {
      const I i = grid_position(t, x, D, q[D], r[D], k);
      if (i >= 0)
        gather<D + 1, V, J, R>(t, x, q, r, columns, plane_step, next_tap,
                               cell + i * static_cast<I>(x.column_grid[D]), acc);
    } else {
      const I row = next_tap * static_cast<I>(x.column_tap) + cell;
      // In 1-D, loads from a pointer to the tap's row: 89 -> 99% of copy on 1d-strided's
      // col2im. With outer dims that pointer cost 2-9% (more taps, each its own 64-bit
      // address), so there the offset stays an integer up to the load (NOTES changes 38, 47).
      const T* tap_row = columns + (ND == 1 ? row : I(0));
      const I at = ND == 1 ? I(0) : row;
      const I stride = static_cast<I>(t.stride[D]);
#pragma unroll
      for (int j = 0; j < J; ++j) {
        // Compile-time where r is (spans on multiples of the stride, see first_span).
        const I c = r[D] + static_cast<I>(j) * (kWarp * V);
        const I qj = j == 0 ? q[D] : q[D] + c / stride, rj = j == 0 ? r[D] : c % stride;
#pragma unroll
        for (int v = 0; v < V; ++v) {
          const I i = grid_position(t, x, D, qj, rj + v, k);
#pragma unroll
          for (int n = 0; n < R; ++n)
            if (i >= 0) acc[n][j][v] += Scalar<T>::load(tap_row[at + n * plane_step + i]);
        }
      }
    }
  }
}

// Where the taps come at run time (the generic kernel, one output a thread), each dim's taps
// that reach the output (first_reaching_tap), worked out once a thread: the first, the step
// to the next, and the grid position of the first, each next one landing `nearer` grid
// positions back (dilation * step / stride).
template <typename I>
struct Reach {
  I first, step, nearer, position;
};

template <typename I, int ND>
GC_FN Reach<I> reaching(const Taps<ND>& t, int d, I q, I r) {
  const I stride = static_cast<I>(t.stride[d]), dilation = static_cast<I>(t.dilation[d]);
  Reach<I> a;
  a.first = first_reaching_tap(t, d, r, a.step);
  a.nearer = dilation * a.step / stride;
  a.position = q + (r - a.first * dilation) / stride;   // exact where the first tap reaches
  return a;
}

// The generic kernel's gather: along each dim the reaching taps only, so that its loops
// divide by nothing (with gather's tap tests, a division and a remainder by the run-time
// stride per tap, and the reaching taps worked out per outer tap, FCN-32s's k64 s32
// col2im was bound by integer instructions: ncu, 83% of the SMs' issue rate).
template <int D, int R, typename T, typename I, int ND, typename Acc>
GC_FN void gather_reaching(const Taps<ND>& t, const Extent<ND>& x, const Reach<I> (&reach)[ND],
                           const T* columns, I plane_step, I tap, I cell, Acc (&acc)[R][1][1]) {
  const I kernel = static_cast<I>(t.kernel[D]), size = static_cast<I>(x.grid[D]);
  const Reach<I>& a = reach[D];
  I i = a.position;
  for (I k = a.first; k < kernel && i >= 0; k += a.step, i -= a.nearer) {
    if (i >= size) continue;
    const I next_tap = tap * kernel + k;
    if constexpr (D < ND - 1) {
      gather_reaching<D + 1, R>(t, x, reach, columns, plane_step, next_tap,
                                cell + i * static_cast<I>(x.column_grid[D]), acc);
    } else {
      const I at = next_tap * static_cast<I>(x.column_tap) + cell + i;
      for (int n = 0; n < R; ++n) acc[n][0][0] += Scalar<T>::load(columns[at + n * plane_step]);
    }
  }
}

// A thread of col2im owns a span of V consecutive image positions along the innermost dim.
// Where V is a multiple of the stride, spans start on padded coordinates that are multiples
// of the stride, so each of the V outputs has a stride phase known at compile time and only
// the taps that can reach it generate loads. This is the padded coordinate of a row's first
// span (at most stride - 1 before the row's first element).
template <int V, typename I, int ND>
GC_FN I first_span(const Taps<ND>& t, const Extent<ND>& x) {
  const I stride = static_cast<I>(t.stride[ND - 1]), padding = static_cast<I>(x.padding[ND - 1]);
  return V % stride == 0 ? floor_div(padding, stride) * stride : padding;
}

// Spans per image row.
template <int V, typename I, int ND>
GC_FN I spans(const Taps<ND>& t, const Extent<ND>& x) {
  return (static_cast<I>(x.padding[ND - 1]) + static_cast<I>(x.image[ND - 1]) -
          first_span<V, I>(t, x) + V - 1) / V;
}

// Along a strided outer dim whose taps all land on one stride phase (one tap, or a dilation
// that is a multiple of the stride), only every stride-th row receives column entries: those
// whose padded coordinate is a multiple of the stride. The rest get the bias alone.
template <int ND>
GC_FN bool one_phase(const Taps<ND>& t, int d) {
  return t.stride[d] > 1 && (t.kernel[d] == 1 || t.dilation[d] % t.stride[d] == 0);
}

// The first such row along dim d (an image position), and how many there are.
template <typename I, int ND>
GC_FN I first_receiving(const Taps<ND>& t, const Extent<ND>& x, int d) {
  const I stride = static_cast<I>(t.stride[d]);
  return (stride - static_cast<I>(x.padding[d]) % stride) % stride;
}

template <typename I, int ND>
GC_FN I receiving(const Taps<ND>& t, const Extent<ND>& x, int d) {
  const I stride = static_cast<I>(t.stride[d]), first = first_receiving<I>(t, x, d);
  const I size = static_cast<I>(x.image[d]);
  return first < size ? (size - first + stride - 1) / stride : I(0);
}

// Rows of R planes whose outer coordinates all receive entries along the one-phase dims.
template <int R, typename I, int ND>
GC_FN I receiving_rows(const Taps<ND>& t, const Extent<ND>& x) {
  I rows = static_cast<I>(x.planes) / R;
  for (int d = 0; d < ND - 1; ++d)
    rows *= one_phase(t, d) ? receiving<I>(t, x, d) : static_cast<I>(x.image[d]);
  return rows;
}

// Threads a row of `count` outputs takes where they are numbered phase by phase (one output
// a thread): as many for each phase of the innermost stride, count rounded up to a multiple
// of the stride. With a kernel much larger than its stride (64 at stride 32), neighbouring
// outputs are reached by different taps, whose columns lie a whole grid apart: numbered in
// order, each lane of a warp loaded from a sector of its own.
template <typename I, int ND>
GC_FN I phase_slots(const Taps<ND>& t, I count) {
  const I stride = static_cast<I>(t.stride[ND - 1]);
  return (count + stride - 1) / stride * stride;
}

// Number of threads col2im_element needs for a launch: one per span of R planes (with one
// output a thread, phase_slots of them a row), or with J > 1 whole warps per run of
// kWarp * J spans of a row; with EmptyRowsApart, of the rows that can receive entries only
// (see col2im_element).
template <int V, int J, int R, bool EmptyRowsApart, typename I, int ND>
GC_FN I col2im_elements(const Taps<ND>& t, const Extent<ND>& x) {
  const I rows = EmptyRowsApart ? receiving_rows<R, I>(t, x)
      : static_cast<I>(x.planes) / R * (product<I>(x.image) / static_cast<I>(x.image[ND - 1]));
  const I count = spans<V, I>(t, x);
  if constexpr (V == 1 && J == 1) return rows * phase_slots<I>(t, count);
  return J == 1 ? rows * count : rows * ((count + kWarp * J - 1) / (kWarp * J)) * kWarp;
}

// The first plane of col2im's row number `row`, and the row's coordinates o[0..ND-2] in the
// outer dims. A row stands for the same row of R consecutive planes. Rows are numbered plane
// by plane, or with PlanesInner the plane varying fastest: where an outer dim is strided,
// neighbouring rows of one plane have different stride phases, so a warp that straddles two
// of them splits over different taps, whereas the same row of neighbouring planes has the
// same phase. With `receiving_only` the rows are those of receiving_rows.
template <bool PlanesInner, int R, typename I, int ND>
GC_FN I row_position(const Taps<ND>& t, const Extent<ND>& x, I row, I (&o)[ND],
                     bool receiving_only) {
  I plane = 0;
  if constexpr (PlanesInner) {
    plane = row % (static_cast<I>(x.planes) / R);
    row /= static_cast<I>(x.planes) / R;
  }
  for (int d = ND - 2; d >= 0; --d) {
    if (receiving_only && one_phase(t, d)) {
      const I n = receiving<I>(t, x, d);
      o[d] = first_receiving<I>(t, x, d) + row % n * static_cast<I>(t.stride[d]);
      row /= n;
    } else {
      o[d] = row % static_cast<I>(x.image[d]);
      row /= static_cast<I>(x.image[d]);
    }
  }
  return (PlanesInner ? plane : row) * R;
}

// Writes the image elements of col2im thread e's spans, in R planes at once: the planes
// share the decoding of the thread's index and the tests of the outer dims' taps, which on
// strided kernels take more instructions than the loads they guard. R divides the channels,
// so the R planes lie in one sample. With J == 1, e is the flat index over
// [planes / R][image[0..ND-2]...][spans], or with PlanesInner over
// [image[0..ND-2]...][planes / R][spans]. With J > 1, the spans of each row come in runs of
// kWarp * J, a warp each, lane l taking spans l, l + kWarp, ...: the warp then decodes its
// row, and tests its outer dims' taps, once for J spans. Spans past the row's end write
// nothing. With EmptyRowsApart the threads cover only the rows that can receive entries
// (receiving_rows), the image having been filled with the bias first (fill_element): where
// most rows get no entries (a dilation that is a multiple of the stride), the gathering warps
// then hold no idle lanes, and the rest of the image is written by coalesced stores rather
// than by threads that decode their index and test every tap to write a span of bias.
template <int V, int J, bool PlanesInner, int R, bool EmptyRowsApart, typename T, typename I,
          int ND>
GC_FN void col2im_element(const Taps<ND>& t, const Extent<ND>& x, const T* columns,
                          const T* bias, T* image, I e) {
  typedef typename Scalar<T>::Acc Acc;
  const I width = static_cast<I>(x.image[ND - 1]);
  const I stride = static_cast<I>(t.stride[ND - 1]);
  const I count = spans<V, I>(t, x);
  I span, row_number;
  if constexpr (V == 1 && J == 1) {
    // One output a thread (the generic kernel): a row's outputs are numbered phase by phase
    // of the innermost stride, so that a warp's outputs share their reaching taps and read
    // neighbouring grid positions of each, rather than a tap each (see phase_slots).
    const I slots = phase_slots<I>(t, count), per_phase = slots / stride;
    row_number = e / slots;
    span = e % slots % per_phase * stride + e % slots / per_phase;
    if (span >= count) return;
  } else if constexpr (J == 1) {
    span = e % count;
    row_number = e / count;
  } else {
    const I runs = (count + kWarp * J - 1) / (kWarp * J);
    span = e / kWarp % runs * (kWarp * J) + e % kWarp;
    row_number = e / kWarp / runs;
  }
  const I start = first_span<V, I>(t, x) + span * V;
  const I first = start - static_cast<I>(x.padding[ND - 1]);   // image position; may be < 0
  I o[ND], q[ND], r[ND], offset = 0;
  const I p = row_position<PlanesInner, R>(t, x, row_number, o, EmptyRowsApart);
  for (int d = 0; d < ND - 1; ++d) {
    offset = offset * static_cast<I>(x.image[d]) + o[d];   // the row's, within its plane
    q[d] = 0;
    r[d] = o[d] + static_cast<I>(x.padding[d]);
  }
  q[ND - 1] = floor_div(start, stride);
  r[ND - 1] = V % stride == 0 ? I(0) : start - q[ND - 1] * stride;
  Acc acc[R][J][V];
  for (int n = 0; n < R; ++n) {
    const I channel = p % static_cast<I>(x.channels) + n;
    const Acc init = bias ? Scalar<T>::load(bias[channel]) : Acc(0);
    for (int j = 0; j < J; ++j)
      for (int v = 0; v < V; ++v) acc[n][j][v] = init;
  }
  const I plane_step = product<I>(t.kernel) * static_cast<I>(x.column_tap);
  if constexpr (V == 1 && J == 1) {
    Reach<I> reach[ND];
    for (int d = 0; d < ND; ++d) reach[d] = reaching<I>(t, d, q[d], r[d]);
    gather_reaching<0, R>(t, x, reach, columns, plane_step, I(0), column_plane(t, x, p), acc);
  } else {
    gather<0, V, J, R>(t, x, q, r, columns, plane_step, I(0), column_plane(t, x, p), acc);
  }
  for (int n = 0; n < R; ++n) {
    T* row = image + (p + n) * static_cast<I>(x.plane_stride) + offset * width;
    for (int j = 0; j < J; ++j)
      for (int v = 0; v < V; ++v) {
        const I position = first + j * (kWarp * V) + v;
        if (position >= 0 && position < width) row[position] = Scalar<T>::store(acc[n][j][v]);
      }
  }
}

// The bias alone (0 without one) in every element of every plane, before a col2im with
// EmptyRowsApart writes the rows that can receive column entries. A warp fills kWarp *
// kFillRun consecutive elements of one plane, lane l taking l, l + kWarp, ...: each store
// instruction writes consecutive elements, however the planes are aligned, and the plane
// is decoded once for kFillRun elements.
constexpr int kFillRun = 8;

template <typename I, int ND>
GC_FN I fill_elements(const Extent<ND>& x) {
  const I run = kWarp * kFillRun;
  return static_cast<I>(x.planes) * ((product<I>(x.image) + run - 1) / run) * kWarp;
}

template <typename T, typename I, int ND>
GC_FN void fill_element(const Extent<ND>& x, const T* bias, T* image, I e) {
  const I size = product<I>(x.image), run = kWarp * kFillRun;
  const I runs = (size + run - 1) / run, p = e / kWarp / runs;
  const I start = e / kWarp % runs * run + e % kWarp;
  const T value = bias ? bias[p % static_cast<I>(x.channels)] : Scalar<T>::store(0);
  T* plane = image + p * static_cast<I>(x.plane_stride);
  for (int v = 0; v < kFillRun; ++v) {
    const I position = start + v * kWarp;
    if (position < size) plane[position] = value;
  }
}

// One PACK_BYTES store, written as the vector store instruction itself on the device: built
// from registers of a window with 64-bit indices, the compiler split it into four 4-byte
// stores (CUDA 13), which halved im2col's rate. (The columns are global memory, whose
// generic addresses are its global ones.)
template <typename T, int P>
GC_FN void store_run(T* at, const Packed<T, P>& value) {
  static_assert(sizeof(Packed<T, P>) == 16, "runs of 16 bytes");
#ifdef __CUDA_ARCH__
  union {
    Packed<T, P> run;
    unsigned word[4];
  } bits{value};
  asm("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(at), "r"(bits.word[0]),
      "r"(bits.word[1]), "r"(bits.word[2]), "r"(bits.word[3]) : "memory");
#else
  *reinterpret_cast<Packed<T, P>*>(at) = value;
#endif
}

// The innermost dim's taps for a run of P grid positions from i (a multiple of P) on, each
// tap's P entries stored as one access. Every tap reads its P image elements from one
// window of whole aligned runs of the row, loaded once for all taps: position v of tap k is
// Shift + v * stride + k * dilation elements into the window, Shift being (i * stride -
// padding) mod P, known at compile time so that the window stays in registers. The caller
// guarantees that every size and address involved is a multiple of P and that the window
// is at most kMaxWindowRuns runs, so each run lies all inside the row or all outside it.
constexpr int kMaxWindowRuns = 8;

template <int P, int Shift, typename T, typename I, int ND>
GC_FN void spread_runs(const Taps<ND>& t, const Extent<ND>& x, I i, const T* row, T* out,
                       I tap, bool inside) {
  constexpr int D = ND - 1;
  const I width = static_cast<I>(x.image[D]), kernel = static_cast<I>(t.kernel[D]);
  const I stride = static_cast<I>(t.stride[D]), dilation = static_cast<I>(t.dilation[D]);
  const I start = i * stride - static_cast<I>(x.padding[D]) - Shift;   // a multiple of P
  const I runs = (Shift + (P - 1) * stride + (kernel - 1) * dilation + P) / P;
  Packed<T, P> window[kMaxWindowRuns];
#pragma unroll
  for (int j = 0; j < kMaxWindowRuns; ++j) {
    const I o = start + j * P;
    window[j] = Packed<T, P>{};
    if (j < runs && inside && o >= 0 && o < width)
      window[j] = *reinterpret_cast<const Packed<T, P>*>(row + o);
  }
  // A loop bounded by a constant: bounded by the kernel size, it was left rolled (and the
  // window in local memory) on some instantiations.
#pragma unroll
  for (int k = 0; k < (kMaxWindowRuns - 1) * P + 1; ++k) {
    if (k >= kernel) break;
    Packed<T, P> value;
#pragma unroll
    for (int v = 0; v < P; ++v) {
      const int at = Shift + v * static_cast<int>(stride) + k * static_cast<int>(dilation);
      value.v[v] = window[at / P].v[at % P];
    }
    store_run(out + (tap * kernel + k) * static_cast<I>(x.column_tap), value);
  }
}

// The innermost dim's taps for a run of P grid positions from i (a multiple of P) on, at
// any stride, where the image row does not allow whole runs: each tap's P entries are
// loaded one by one (mostly from L1, the taps' reads overlapping) and stored as one access.
// The caller guarantees the columns' sizes and addresses are multiples of P.
template <int P, typename T, typename I, int ND>
GC_FN void spread_elements(const Taps<ND>& t, const Extent<ND>& x, I i, const T* row, T* out,
                           I tap, bool inside) {
  constexpr int D = ND - 1;
  const I width = static_cast<I>(x.image[D]), kernel = static_cast<I>(t.kernel[D]);
#pragma unroll
  for (I k = 0; k < kernel; ++k) {
    Packed<T, P> value;
#pragma unroll
    for (int v = 0; v < P; ++v) {
      const I o = image_position(t, x, D, i + v, k);
      value.v[v] = inside && o >= 0 && o < width ? row[o] : Scalar<T>::store(0);
    }
    store_run(out + (tap * kernel + k) * static_cast<I>(x.column_tap), value);
  }
}

// Shift of a run whose image elements are loaded one by one (spread_elements).
constexpr int kElementwise = -1;

// Copies every tap of up to W grid positions, Step apart along the innermost dim, into the
// columns, recursing over dims; `room` is how many positions the row has from the first
// one on, and `inside` says whether the image position built so far lies in the image.
// With P > 1 (and W = 1) the position is the first of a run of P, copied from a window of
// the row (spread_runs) or, with Shift = kElementwise, element by element (spread_elements).
template <int D, int W, int Step, int P, int Shift, typename T, typename I, int ND>
GC_FN void spread(const Taps<ND>& t, const Extent<ND>& x, const I (&i)[ND], I room,
                  const T* plane, T* out, I tap, I offset, bool inside) {
  if constexpr (D == ND - 1 && P > 1) {
    static_assert(W == 1, "packed positions are one run per thread");
    const T* row = plane + offset * static_cast<I>(x.image[D]);
    if constexpr (Shift == kElementwise)
      spread_elements<P>(t, x, i[D], row, out, tap, inside);
    else
      spread_runs<P, Shift>(t, x, i[D], row, out, tap, inside);
  } else {
#pragma unroll
    for (I k = 0; k < static_cast<I>(t.kernel[D]); ++k) {
      const I o = image_position(t, x, D, i[D], k);
      const I next_tap = tap * static_cast<I>(t.kernel[D]) + k;
      if constexpr (D < ND - 1) {
        spread<D + 1, W, Step, P, Shift>(t, x, i, room, plane, out, next_tap,
                                         offset * static_cast<I>(x.image[D]) + o,
                                         inside && o >= 0 && o < static_cast<I>(x.image[D]));
      } else {
        const T* row = plane + offset * static_cast<I>(x.image[D]);
        T* column = out + next_tap * static_cast<I>(x.column_tap);
#pragma unroll
        for (int v = 0; v < W; ++v) {
          const I ov = o + v * Step * static_cast<I>(t.stride[D]);
          if (v * Step < room)
            column[v * Step] = inside && ov >= 0 && ov < static_cast<I>(x.image[D])
                                   ? row[ov] : Scalar<T>::store(0);
        }
      }
    }
  }
}

// Calls f(Constant<S>{}) for the S in [0, P) that equals s: a run-time value made a
// compile-time one, at one uniform branch per thread.
template <int S>
struct Constant {
  static constexpr int value = S;
};

template <int P, int S = 0, typename F>
GC_FN void with_constant(int s, const F& f) {
  if constexpr (S + 1 < P) {
    if (s != S) return with_constant<P, S + 1>(s, f);
  }
  f(Constant<S>{});
}

// im2col's threads. With W = 1, one per grid position, or per run of P (see spread), and
// with SplitTaps one per tap of the outer dims too (see im2col_element). Otherwise each
// warp owns 32 W consecutive positions of a row and lane l takes positions l, l + 32, ...:
// every store instruction then writes 32 consecutive elements (a thread writing W
// neighbours would make each instruction touch W times as many sectors, which measured
// slower than one position per thread), while the index is decoded once for W positions.

// The number of taps of the outer dims (all but the innermost).
template <typename I, int ND>
GC_FN I outer_taps(const Taps<ND>& t) {
  I n = 1;
  for (int d = 0; d < ND - 1; ++d) n *= static_cast<I>(t.kernel[d]);
  return n;
}

template <int W, int P, bool SplitTaps, typename I, int ND>
GC_FN I im2col_elements(const Taps<ND>& t, const Extent<ND>& x) {
  const I width = static_cast<I>(x.grid[ND - 1]);
  if constexpr (W == 1) {
    return static_cast<I>(x.planes) * (SplitTaps ? outer_taps<I>(t) : I(1)) *
           product<I>(x.grid) / P;
  } else {
    return static_cast<I>(x.planes) * (product<I>(x.grid) / width) *
           ((width + kWarp * W - 1) / (kWarp * W)) * kWarp;
  }
}

// Writes every tap's column entries for the grid positions of im2col thread e (see
// im2col_elements): e is its flat index over [planes][grid...] (grid's innermost in runs of
// P), or with W > 1 over [planes][grid[0..ND-2]...][spans of 32 W][32 lanes]. With
// SamplesInner the planes are split, [channels][grid[0]][samples][grid[1..]...]: in the row
// products' layout, where the samples lie between the outer grid dim and the inner ones,
// a warp's writes then run on from one sample's columns to the next instead of jumping to
// another outer grid row's. With SplitTaps (and W = 1, planes outermost) a thread copies
// one tap of the outer dims, [planes][outer taps][grid...]: a strided many-tap kernel
// otherwise keeps each thread waiting on one window load after another.
template <int W, int P, bool Windowed, bool SamplesInner, bool SplitTaps, typename T,
          typename I, int ND>
GC_FN void im2col_element(const Taps<ND>& t, const Extent<ND>& x, const T* image, T* columns,
                          I e) {
  static_assert(!SplitTaps || (W == 1 && !SamplesInner), "split taps: one run, planes outermost");
  const I width = static_cast<I>(x.grid[ND - 1]);
  I i[ND], row;
  if constexpr (W == 1) {
    row = e / (width / P);
    i[ND - 1] = e % (width / P) * P;
  } else {
    const I count = (width + kWarp * W - 1) / (kWarp * W), lane = e % kWarp;
    row = e / kWarp / count;
    i[ND - 1] = e / kWarp % count * (kWarp * W) + lane;
    if (i[ND - 1] >= width) return;
  }
  const I channels = static_cast<I>(x.channels);
  I sample = 0;
  for (int d = ND - 2; d >= 0; --d) {
    if (SamplesInner && d == 0) {
      const I samples = static_cast<I>(x.planes) / channels;
      sample = row % samples;
      row /= samples;
    }
    i[d] = row % static_cast<I>(x.grid[d]);
    row /= static_cast<I>(x.grid[d]);
  }
  I tap = 0;   // with SplitTaps, the thread's outer tap, row-major over the outer dims
  if constexpr (SplitTaps) {
    tap = row % outer_taps<I>(t);
    row /= outer_taps<I>(t);
  }
  const I p = SamplesInner ? sample * channels + row : row;
  I cell = i[ND - 1];
  for (int d = 0; d < ND - 1; ++d) cell += i[d] * static_cast<I>(x.column_grid[d]);
  const T* plane = image + p * static_cast<I>(x.plane_stride);
  T* out = columns + column_plane(t, x, p) + cell;
  const I room = width - i[ND - 1];
  constexpr int Step = W == 1 ? 1 : kWarp;
  // Where the thread owns one outer tap, the outer dims are resolved here and spread
  // starts at the innermost dim.
  constexpr int First = SplitTaps ? ND - 1 : 0;
  I offset = 0;   // the image row, within its plane, of the outer tap
  bool inside = true;
  if constexpr (SplitTaps) {
    I k[ND], rest = tap;
    for (int d = ND - 2; d >= 0; --d) {
      k[d] = rest % static_cast<I>(t.kernel[d]);
      rest /= static_cast<I>(t.kernel[d]);
    }
    for (int d = 0; d < ND - 1; ++d) {
      const I o = image_position(t, x, d, i[d], k[d]);
      offset = offset * static_cast<I>(x.image[d]) + o;
      inside = inside && o >= 0 && o < static_cast<I>(x.image[d]);
    }
  }
  if constexpr (P > 1 && Windowed) {
    const I padding = static_cast<I>(x.padding[ND - 1]);
    with_constant<P>(static_cast<int>(((-padding) % P + P) % P), [&](auto shift) {
      spread<First, W, Step, P, decltype(shift)::value>(t, x, i, room, plane, out, tap,
                                                         offset, inside);
    });
  } else if constexpr (P > 1) {
    spread<First, W, Step, P, kElementwise>(t, x, i, room, plane, out, tap, offset, inside);
  } else {
    spread<First, W, Step, 1, 0>(t, x, i, room, plane, out, tap, offset, inside);
  }
}

// ---------------------------------------------------------------------------------------
// Channels innermost: channels_last images, and the columns a GEMM makes from them.
//
//   image   [samples][image...][channels]
//   columns [samples][grid...][groups][taps...][channels / groups]
//
// A channels_last input is a (positions x C_in) matrix, so the GEMM's columns come out with
// a row per grid position: each position's columns hold every group's taps, each tap's
// channels back to back. A thread owns runs of P consecutive channels of one image
// position (col2im) or of one grid position and tap (im2col), so a warp's loads and stores
// cover whole runs of channels, and the index decoding is shared by its runs.

template <int ND>
struct Interleaved {
  index_t samples;
  index_t channels;
  index_t group_channels;   // channels / groups
  index_t image_sample;     // elements from one sample's image to the next
  index_t column_sample;    // and from one sample's columns to the next
  index_t grid[ND];
  index_t image[ND];
  index_t padding[ND];
};

// Offset, within a grid position's columns, of channel c's entry for tap k: its group's
// block of taps, then the tap's run of the group's channels.
template <typename I, int ND>
GC_FN I interleaved_entry(const Taps<ND>& t, const Interleaved<ND>& x, I c, I k) {
  const I group_channels = static_cast<I>(x.group_channels);
  return (c / group_channels * product<I>(t.kernel) + k) * group_channels + c % group_channels;
}

template <int P, typename T>
GC_FN Packed<T, P> load_run(const T* at) {
  return *reinterpret_cast<const Packed<T, P>*>(at);
}

template <int P, typename T>
GC_FN void store_packed(T* at, const Packed<T, P>& value) {
  if constexpr (sizeof(Packed<T, P>) == 16)
    store_run(at, value);
  else
    *reinterpret_cast<Packed<T, P>*>(at) = value;
}

// A thread takes R runs of P channels of one position, lanes = C / (P R) runs apart, so
// that each load or store instruction of a warp still covers consecutive runs while the
// position's decoding (and col2im's reaching taps) serve R runs: one run a thread spent
// most of its instructions on them (ncu: 80% of the SMs' issue rate, 13-32% of DRAM's).
template <int P, int R, typename I, int ND>
GC_FN I interleaved_lanes(const Interleaved<ND>& x) {
  return static_cast<I>(x.channels) / (P * R);
}

// The offsets, within a position's columns for tap 0, of a thread's R runs.
template <int P, int R, typename I, int ND>
GC_FN void run_offsets(const Taps<ND>& t, const Interleaved<ND>& x, I lane, I (&offset)[R]) {
  const I lanes = interleaved_lanes<P, R, I>(x);
#pragma unroll
  for (int j = 0; j < R; ++j) offset[j] = interleaved_entry(t, x, (lane + j * lanes) * P, I(0));
}

// Adds the columns of every reaching tap (reaching, as the generic col2im) to R runs of P
// channels, recursing over dims; cell is the grid position built so far, row-major.
template <int D, int P, int R, typename T, typename I, int ND, typename Acc>
GC_FN void gather_interleaved(const Taps<ND>& t, const Interleaved<ND>& x,
                              const Reach<I> (&reach)[ND], const T* columns,
                              const I (&offset)[R], I tap, I cell, Acc (&acc)[R][P]) {
  const I kernel = static_cast<I>(t.kernel[D]), size = static_cast<I>(x.grid[D]);
  const Reach<I>& a = reach[D];
  I i = a.position;
  for (I k = a.first; k < kernel && i >= 0; k += a.step, i -= a.nearer) {
    if (i >= size) continue;
    const I next_tap = tap * kernel + k, next_cell = cell * size + i;
    if constexpr (D < ND - 1) {
      gather_interleaved<D + 1, P>(t, x, reach, columns, offset, next_tap, next_cell, acc);
    } else {
      const I position = static_cast<I>(x.channels) * product<I>(t.kernel);
      const T* at = columns + next_cell * position + next_tap * static_cast<I>(x.group_channels);
#pragma unroll
      for (int j = 0; j < R; ++j) {
        const Packed<T, P> run = load_run<P>(at + offset[j]);
#pragma unroll
        for (int v = 0; v < P; ++v) acc[j][v] += Scalar<T>::load(run.v[v]);
      }
    }
  }
}

template <int P, int R, typename I, int ND>
GC_FN I col2im_interleaved_elements(const Interleaved<ND>& x) {
  return static_cast<I>(x.samples) * product<I>(x.image) * interleaved_lanes<P, R, I>(x);
}

// Element e of col2im: lane e % lanes of the image position and sample that e / lanes
// numbers row-major (see interleaved_lanes).
template <int P, int R, typename T, typename I, int ND>
GC_FN void col2im_interleaved_element(const Taps<ND>& t, const Interleaved<ND>& x,
                                      const T* columns, const T* bias, T* image, I e) {
  typedef typename Scalar<T>::Acc Acc;
  const I lanes = interleaved_lanes<P, R, I>(x), lane = e % lanes;
  I o[ND];
  const I sample = unflatten(e / lanes, x.image, o);
  Reach<I> reach[ND];
  I position = 0;
#pragma unroll
  for (int d = 0; d < ND; ++d) {
    const I stride = static_cast<I>(t.stride[d]);
    const I padded = o[d] + static_cast<I>(x.padding[d]);
    const I q = floor_div(padded, stride);
    reach[d] = reaching(t, d, q, padded - q * stride);
    position = position * static_cast<I>(x.image[d]) + o[d];
  }
  I offset[R];
  run_offsets<P>(t, x, lane, offset);
  Acc acc[R][P];
#pragma unroll
  for (int j = 0; j < R; ++j)
#pragma unroll
    for (int v = 0; v < P; ++v)
      acc[j][v] = bias ? Scalar<T>::load(bias[(lane + j * lanes) * P + v]) : Acc(0);
  gather_interleaved<0, P>(t, x, reach, columns + sample * static_cast<I>(x.column_sample),
                           offset, I(0), I(0), acc);
  T* out = image + sample * static_cast<I>(x.image_sample) + position * static_cast<I>(x.channels);
#pragma unroll
  for (int j = 0; j < R; ++j) {
    Packed<T, P> run;
#pragma unroll
    for (int v = 0; v < P; ++v) run.v[v] = Scalar<T>::store(acc[j][v]);
    store_packed(out + (lane + j * lanes) * P, run);
  }
}

template <int P, int R, typename I, int ND>
GC_FN I im2col_interleaved_elements(const Taps<ND>& t, const Interleaved<ND>& x) {
  return static_cast<I>(x.samples) * product<I>(x.grid) * product<I>(t.kernel) *
         interleaved_lanes<P, R, I>(x);
}

// Element e of im2col: lane e % lanes of the tap, grid position and sample that e / lanes
// numbers row-major; zeros where the tap falls outside the image.
template <int P, int R, typename T, typename I, int ND>
GC_FN void im2col_interleaved_element(const Taps<ND>& t, const Interleaved<ND>& x,
                                      const T* image, T* columns, I e) {
  const I lanes = interleaved_lanes<P, R, I>(x), lane = e % lanes;
  I k[ND], i[ND];
  const I rest = unflatten(e / lanes, t.kernel, k);
  const I sample = unflatten(rest, x.grid, i);
  I position = 0, cell = 0, tap = 0;
  bool inside = true;
#pragma unroll
  for (int d = 0; d < ND; ++d) {
    const I at = image_position(t, x, d, i[d], k[d]);
    inside = inside && at >= 0 && at < static_cast<I>(x.image[d]);
    position = position * static_cast<I>(x.image[d]) + at;
    cell = cell * static_cast<I>(x.grid[d]) + i[d];
    tap = tap * static_cast<I>(t.kernel[d]) + k[d];
  }
  const T* in = image + sample * static_cast<I>(x.image_sample) + position * static_cast<I>(x.channels);
  T* out = columns + sample * static_cast<I>(x.column_sample) +
           cell * static_cast<I>(x.channels) * product<I>(t.kernel) +
           tap * static_cast<I>(x.group_channels);
  I offset[R];
  run_offsets<P>(t, x, lane, offset);
#pragma unroll
  for (int j = 0; j < R; ++j) {
    Packed<T, P> value;
    if (inside) {
      value = load_run<P>(in + (lane + j * lanes) * P);
    } else {
#pragma unroll
      for (int v = 0; v < P; ++v) value.v[v] = Scalar<T>::store(0);
    }
    store_packed(out + offset[j], value);
  }
}

// ---------------------------------------------------------------------------------------
// The float32 weight gradient of a stride-1 2-D transposed convolution on channels_last
// tensors (fused.float32_weight_form's "mma" form), no columns and no copies:
//
//   grad_w[ci][co][i][j] = sum over n, y, x of  x[n][y + p_h - i d_h][x + p_w - j d_w][ci]
//                                               * grad[n][y][x][co]
//
// The reduction runs along positions, and Hopper's wgmma takes 32-bit operands from shared
// memory only along the reduction (positions innermost): channels_last rows would need
// copies moved along W for every W tap (the Triton kernel's planar form, 4.8 of its 9.8 ms
// on 2d-1024). mma.sync takes its operands from registers, each loaded from any shared
// address, so every W tap reads one box of input positions at a shifted row.
//
// A block owns 64 input by 64 OutTiles output channels, RowTaps rows of the kernel from
// blockIdx.y * RowTaps on, and every W tap, its partial sums in registers as tiles of 16
// input by 64 output channels: a warp holds the four of one tap, two of one tap, or one of
// each of three or five W taps (wgrad_warp_tile; two output tiles a block: each box loaded
// once for both). It walks stages blockIdx.x, + gridDim.x, ...; a stage is a strip of
// kWgradStrip positions of `rows` output rows. Per stage it loads the strips' output
// gradient and, for each input row its row taps reach, one box of the strip's positions
// widened by (k_w - 1) d_w, by cp.async into a ring of `stages`; each input row serves all
// the stage's output rows.
// Shared rows are padded to kWgradPitch floats, so that a warp's fragment loads (B's 8
// channels by 4 positions, A's pairs of channels by 4 positions a half-warp) hit 32 banks.
// Each block stores its partial sums; a fixed-order sum over the blocks follows
// (deterministic). TF32: the output gradient rounded to nearest once a stage in shared
// memory (as the fused kernels round it), the input truncated by the tensor cores.

constexpr int kWgradStrip = 32;              // positions a strip
constexpr int kWgradTile = 64;               // channels a tile, either operand
constexpr int kWgradPitch = kWgradTile + 8;  // floats a row in shared memory

// The call's shape: input (N, H, W, C_in), output gradient (N, H_out, W_out, C_out). Plain
// ints (each size, and the stages, below 2^31: _cuda.rows_weight_gradient checks), 64-bit
// offsets only into the tensors: the kernel's registers are capped (wgrad_max_warps: 128
// to 255 a thread, by form), and 64-bit index math spilled at 168.
struct RowsWgrad {
  int batch, height, width, c_in, out_h, out_w, c_out;
  int kernel_h, kernel_w, pad_h, pad_w, dilation_h, dilation_w;
};

struct WgradStage {
  int n, y, x0;  // the sample, the first output row, the strip's first position
  bool live;     // false past the last stage: its tiles are zeros
};

GC_FN int wgrad_stages(const RowsWgrad& s, int rows) {
  return s.batch * ((s.out_h + rows - 1) / rows) * ((s.out_w + kWgradStrip - 1) / kWgradStrip);
}

// Stage q: q = (n * row_groups + y / rows) * strips + strip.
GC_FN WgradStage wgrad_stage(const RowsWgrad& s, int rows, int q) {
  const int strips = (s.out_w + kWgradStrip - 1) / kWgradStrip;
  const int groups = (s.out_h + rows - 1) / rows;
  const bool live = q < wgrad_stages(s, rows);
  if (!live) q = 0;
  return {q / (strips * groups), q / strips % groups * rows, q % strips * kWgradStrip, live};
}

GC_FN int wgrad_box_rows(const RowsWgrad& s) {
  return kWgradStrip + (s.kernel_w - 1) * s.dilation_w;
}

// Input rows a stage loads: box b is input row y + p_h - (i0 + row_taps - 1) d_h + b.
GC_FN int wgrad_boxes(const RowsWgrad& s, int rows, int row_taps) {
  return rows + (row_taps - 1) * s.dilation_h;
}

// Floats of one stage in shared memory: the strips of each output tile, then the boxes
// from shared row `grad_rows` = out_tiles * rows * kWgradStrip on.
GC_FN int wgrad_stage_floats(const RowsWgrad& s, int rows, int row_taps, int out_tiles) {
  return (out_tiles * rows * kWgradStrip + wgrad_boxes(s, rows, row_taps) * wgrad_box_rows(s)) *
         kWgradPitch;
}

// Where 16-byte chunk c of a stage's strips (c < out_tiles * rows * kWgradStrip * 16), or
// chunk k of row r of its box b (b < wgrad_boxes, r < wgrad_box_rows, k < 16), lands
// (floats into the stage), and what it copies:
// an element offset into the output gradient or the input, or -1 for zeros (off the image,
// past the last stage).
struct WgradChunk {
  int shared;
  index_t source;
};

GC_FN int wgrad_strip_float(int c) {
  constexpr int kChunks = kWgradTile / 4;  // a row's
  return (c / kChunks) * kWgradPitch + c % kChunks * 4;
}

GC_FN WgradChunk wgrad_strip_chunk(const RowsWgrad& s, const WgradStage& st, int rows, int co0,
                                   int c) {
  constexpr int kChunks = kWgradTile / 4;
  const int o = c / (rows * kWgradStrip * kChunks), r = c / (kWgradStrip * kChunks) % rows;
  const int p = c / kChunks % kWgradStrip, k = c % kChunks;
  const int y = st.y + r, x = st.x0 + p;
  const bool inside = st.live && y < s.out_h && x < s.out_w;
  return {wgrad_strip_float(c),
          inside ? static_cast<index_t>((st.n * s.out_h + y) * s.out_w + x) * s.c_out + co0 +
                       o * kWgradTile + k * 4
                 : -1};
}

GC_FN WgradChunk wgrad_box_chunk(const RowsWgrad& s, const WgradStage& st, int grad_rows,
                                 int row_tap0, int row_taps, int ci0, int b, int r, int k) {
  const int box_rows = wgrad_box_rows(s);
  const int h = st.y + s.pad_h - (row_tap0 + row_taps - 1) * s.dilation_h + b;
  const int w = st.x0 + s.pad_w - (s.kernel_w - 1) * s.dilation_w + r;
  const bool inside = st.live && h >= 0 && h < s.height && w >= 0 && w < s.width;
  return {(grad_rows + b * box_rows + r) * kWgradPitch + k * 4,
          inside ? static_cast<index_t>((st.n * s.height + h) * s.width + w) * s.c_in + ci0 + k * 4
                 : -1};
}

// The next box row a thread copies, `step` rows on (its threads / 16: each copies chunk
// threadIdx.x % 16 of rows threadIdx.x / 16, + step, ...), walked without dividing by the
// run-time box_rows: the division per chunk took most of the loads' instructions.
GC_FN void wgrad_next_box_row(int& b, int& r, int step, int box_rows) {
  for (r += step; r >= box_rows; r -= box_rows) ++b;
}

// Which input channel of the block's 64 a row of A stands for. PTX's m16n8k8 layout gives a
// lane rows g and g + 8 of A (g = lane / 4); laid side by side (rows r and r + 8 as channels
// 2 (r % 8) + r / 8 of the tile of 16), a lane's two lie in one 8-byte word, which one
// float2 load puts in the register pair mma.sync takes: half the loads of A, and a
// half-warp's 16 words (one 8-byte access phase) on distinct banks at kWgradPitch 72. (B's
// register pair holds two positions, which lie rows apart: its loads stay one float each.)
GC_FN int wgrad_in_channel(int m, int row) { return m * 16 + 2 * (row % 8) + row / 8; }

// The shared float (into the stage) of an mma.sync m16n8k8 operand's element e (0-3 of A,
// 0-1 of B) held by `lane`, at the stage's positions kk.. (a multiple of 8) for warp
// (row tap `tap` of the block's, W tap j, output tile o). A is the input transposed
// (channels x positions), m its tile of 16 channels; B the output gradient (positions x
// channels), n its tile of 8. (PTX's fragment layouts: A's (row, column) = (g + 8 (e % 2),
// t + 4 (e / 2)), B's (t + 4 e, g), g = lane / 4, t = lane % 4.) Plain ints, as the kernel
// holds them.
GC_FN int wgrad_a_float(int grad_rows, int box_rows, int dilation_h, int row_taps, int tap,
                        int shift, int kk, int m, int e, int lane) {
  const int r = kk / kWgradStrip, p = kk % kWgradStrip + lane % 4 + 4 * (e / 2);
  const int box = r + (row_taps - 1 - tap) * dilation_h;
  return (grad_rows + box * box_rows + p + shift) * kWgradPitch +
         wgrad_in_channel(m, lane / 4 + 8 * (e % 2));
}

// The row of a W tap's box that its first position reads: (k_w - 1 - j) d_w.
GC_FN int wgrad_shift(const RowsWgrad& s, int j) { return (s.kernel_w - 1 - j) * s.dilation_w; }

GC_FN int wgrad_b_float(int rows, int o, int kk, int n, int e, int lane) {
  return (o * rows * kWgradStrip + kk + lane % 4 + 4 * e) * kWgradPitch + n * 8 + lane / 4;
}

// The (input channel, output channel) within the block's tiles of accumulator element e
// (0-3) of tile (m, n) held by `lane`: PTX's (row g + 8 (e / 2), column 2 t + e % 2).
GC_FN int wgrad_d_row(int m, int e, int lane) {
  return wgrad_in_channel(m, lane / 4 + 8 * (e / 2));
}
GC_FN int wgrad_d_column(int n, int e, int lane) { return n * 8 + 2 * (lane % 4) + e % 2; }

// A warp's tiles of A (16 input channels of one W tap each), j_taps W taps side by side
// times m_tiles tiles of channels, so that an SM's four schedulers share the warps evenly:
// (1, 4), the four of one W tap; (3, 1), one of each of three (3 x 3 taps in 12 warps,
// where 9 leave one scheduler three and mma.sync ran at 3/4 of its rate); (5, 1), one of
// each of five (1 x 5 taps of two output tiles in 8 warps, where 10 ran at 0.84); (1, 2),
// two of one tap (1 x 7 taps in 14 warps, where 7 leave a scheduler under two to hide
// latency). Either way a warp's tiles share the output tile and row tap, hence B. Its
// first tile's (o, row tap, W tap j, tile m); the others are j + v, m + u. Warps in the
// order (o, tap, m, j).
struct WgradWarpTile {
  int o, tap, j, m;
};

GC_FN WgradWarpTile wgrad_warp_tile(int kernel_w, int row_taps, int j_taps, int m_tiles,
                                    int warp) {
  const int js = kernel_w / j_taps, ms = 4 / m_tiles;  // groups a tap
  return {warp / (js * ms * row_taps), warp / (js * ms) % row_taps, warp % js * j_taps,
          warp / js % ms * m_tiles};
}

// Warps a block at most, by a warp's tiles of A: the register cap __launch_bounds__ then
// sets (65,536 / 32 warps) holds a warp's accumulators, 32 floats a tile, and its operands.
GC_FN constexpr int wgrad_max_warps(int warp_tiles) {
  return warp_tiles >= 5 ? 8 : warp_tiles >= 3 ? 12 : 16;
}

// The block's partial sums: (blocks, k_h, k_w, C_in, C_out), float32.
GC_FN index_t wgrad_partial(const RowsWgrad& s, int block, int i, int j, int ci, int co) {
  return ((static_cast<index_t>(block) * s.kernel_h + i) * s.kernel_w + j) * s.c_in * s.c_out +
         static_cast<index_t>(ci) * s.c_out + co;
}

// ---------------------------------------------------------------------------------------
// Kernels: a grid-stride loop over the elements each one owns. The *_fixed kernels take
// the taps as a compile-time constant; the others at run time.

#ifdef __CUDACC__
template <typename I>
__device__ inline I first_element() { return blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; }
template <typename I>
__device__ inline I element_step() { return static_cast<I>(gridDim.x) * blockDim.x; }

template <int V, int J, bool PlanesInner, int R, bool EmptyRowsApart, typename T, typename I,
          int ND>
__device__ inline void col2im_all(const Taps<ND>& t, const Extent<ND>& x, const T* columns,
                                  const T* bias, T* image) {
  const I n = col2im_elements<V, J, R, EmptyRowsApart, I>(t, x);
  for (I e = first_element<I>(); e < n; e += element_step<I>())
    col2im_element<V, J, PlanesInner, R, EmptyRowsApart>(t, x, columns, bias, image, e);
}

template <int W, int P, bool Windowed, bool SamplesInner, bool SplitTaps, typename T,
          typename I, int ND>
__device__ inline void im2col_all(const Taps<ND>& t, const Extent<ND>& x, const T* image,
                                  T* columns) {
  const I n = im2col_elements<W, P, SplitTaps, I>(t, x);
  for (I e = first_element<I>(); e < n; e += element_step<I>())
    im2col_element<W, P, Windowed, SamplesInner, SplitTaps>(t, x, image, columns, e);
}

template <typename T, typename I, int ND>
__global__ void fill_kernel(const Extent<ND> x, const T* __restrict__ bias, T* __restrict__ image) {
  const I n = fill_elements<I>(x);
  for (I e = first_element<I>(); e < n; e += element_step<I>()) fill_element(x, bias, image, e);
}

// The generic kernels serve small launches and kernels too large to specialise: one
// element per thread, col2im's in R planes (a kernel much larger than its stride spends most
// of a thread's instructions finding the few taps that reach its output, which the R planes
// share: _cuda.generic_col2im_planes).
template <typename T, typename I, int ND, int R = 1>
__global__ void col2im_kernel(const Taps<ND> t, const Extent<ND> x, const T* __restrict__ columns,
                              const T* __restrict__ bias, T* __restrict__ image) {
  col2im_all<1, 1, false, R, false, T, I>(t, x, columns, bias, image);
}

template <typename T, typename I, int ND>
__global__ void im2col_kernel(const Taps<ND> t, const Extent<ND> x, const T* __restrict__ image,
                              T* __restrict__ columns) {
  im2col_all<1, 1, false, false, false, T, I>(t, x, image, columns);
}

// Spans of W outputs along the innermost dim, J spans per thread, in R planes: index
// decoding and the outer dims' tap tests are shared by all R J W outputs, and with W a
// multiple of the stride the innermost tap tests fold to constants (see first_span).
// PlanesInner: see row_position; EmptyRowsApart: see col2im_element.
template <typename T, typename I, int ND, int W, int J, bool PlanesInner, int R,
          bool EmptyRowsApart, index_t... V>
__global__ void col2im_fixed(const Extent<ND> x, const T* __restrict__ columns,
                             const T* __restrict__ bias, T* __restrict__ image) {
  constexpr Taps<ND> taps = make_taps<ND, V...>();
  col2im_all<W, J, PlanesInner, R, EmptyRowsApart, T, I>(taps, x, columns, bias, image);
}

// W grid positions per thread along the innermost dim, 32 apart, or runs of P positions
// stored as one access, read from a window of the row where Windowed, else element by
// element (see im2col_elements and spread); SamplesInner and SplitTaps: see im2col_element.
template <typename T, typename I, int ND, int W, int P, bool Windowed, bool SamplesInner,
          bool SplitTaps, index_t... V>
__global__ void im2col_fixed(const Extent<ND> x, const T* __restrict__ image,
                             T* __restrict__ columns) {
  constexpr Taps<ND> taps = make_taps<ND, V...>();
  im2col_all<W, P, Windowed, SamplesInner, SplitTaps, T, I>(taps, x, image, columns);
}
// Channels innermost (see Interleaved), R runs of P channels a thread; taps at run time, or
// (the *_fixed kernels) as a compile-time constant.
template <int P, int R, typename T, typename I, int ND>
__device__ inline void col2im_interleaved_all(const Taps<ND>& t, const Interleaved<ND>& x,
                                              const T* columns, const T* bias, T* image) {
  const I n = col2im_interleaved_elements<P, R, I>(x);
  for (I e = first_element<I>(); e < n; e += element_step<I>())
    col2im_interleaved_element<P, R>(t, x, columns, bias, image, e);
}

template <int P, int R, typename T, typename I, int ND>
__device__ inline void im2col_interleaved_all(const Taps<ND>& t, const Interleaved<ND>& x,
                                              const T* image, T* columns) {
  const I n = im2col_interleaved_elements<P, R, I>(t, x);
  for (I e = first_element<I>(); e < n; e += element_step<I>())
    im2col_interleaved_element<P, R>(t, x, image, columns, e);
}

template <typename T, typename I, int ND, int P, int R>
__global__ void col2im_interleaved_kernel(const Taps<ND> t, const Interleaved<ND> x,
                                          const T* __restrict__ columns,
                                          const T* __restrict__ bias, T* __restrict__ image) {
  col2im_interleaved_all<P, R, T, I>(t, x, columns, bias, image);
}

template <typename T, typename I, int ND, int P, int R>
__global__ void im2col_interleaved_kernel(const Taps<ND> t, const Interleaved<ND> x,
                                          const T* __restrict__ image, T* __restrict__ columns) {
  im2col_interleaved_all<P, R, T, I>(t, x, image, columns);
}

template <typename T, typename I, int ND, int P, int R, index_t... V>
__global__ void col2im_interleaved_fixed(const Interleaved<ND> x, const T* __restrict__ columns,
                                         const T* __restrict__ bias, T* __restrict__ image) {
  constexpr Taps<ND> taps = make_taps<ND, V...>();
  col2im_interleaved_all<P, R, T, I>(taps, x, columns, bias, image);
}

template <typename T, typename I, int ND, int P, int R, index_t... V>
__global__ void im2col_interleaved_fixed(const Interleaved<ND> x, const T* __restrict__ image,
                                         T* __restrict__ columns) {
  constexpr Taps<ND> taps = make_taps<ND, V...>();
  im2col_interleaved_all<P, R, T, I>(taps, x, image, columns);
}

__device__ inline float round_tf32(float v) {  // to nearest, ties away (cvt.rna)
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
  return __uint_as_float(r);
}

// The weight gradient described above wgrad_stage: RowTaps rows of the kernel and OutTiles
// tiles of output channels a block, Rows output rows a stage, a ring of Stages, JTaps W taps
// by MTiles tiles of channels a warp (wgrad_warp_tile). Launch: blockDim.x = 32 (k_w /
// JTaps) (4 / MTiles) RowTaps OutTiles (at most wgrad_max_warps(JTaps MTiles) warps),
// gridDim = (blocks, ceil(k_h / RowTaps), C_in / 64 * C_out / (64 OutTiles)),
// wgrad_stage_floats * Stages * 4 bytes of dynamic shared memory.
template <int RowTaps, int Rows, int Stages, int OutTiles, int JTaps, int MTiles>
__global__ void __launch_bounds__(32 * wgrad_max_warps(JTaps * MTiles), 1)
    tf32_weight_gradient(const RowsWgrad s, const float* __restrict__ x,
                         const float* __restrict__ grad, float* __restrict__ partial) {
  static_assert(Stages >= 2, "a ring of one stage cannot load ahead");
  static_assert((JTaps == 1 && (MTiles == 4 || MTiles == 2)) ||
                    ((JTaps == 3 || JTaps == 5) && MTiles == 1),
                "a warp's tiles: four or two of a W tap, or one of each of three or five");
  extern __shared__ float4 wgrad_shared[];  // (16-byte aligned, as cp.async needs)
  float* tiles = reinterpret_cast<float*>(wgrad_shared);
  unsigned base;  // the ring's shared-memory address, as cp.async takes it
  asm("{\n.reg .u64 p;\ncvta.to.shared.u64 p, %1;\ncvt.u32.u64 %0, p;\n}\n"
      : "=r"(base) : "l"(wgrad_shared));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const WgradWarpTile w = wgrad_warp_tile(s.kernel_w, RowTaps, JTaps, MTiles, warp);
  const int o = w.o, tap = w.tap, row_tap0 = blockIdx.y * RowTaps, i = row_tap0 + tap;
  const int co_blocks = s.c_out / (kWgradTile * OutTiles);
  const int ci0 = blockIdx.z / co_blocks * kWgradTile;
  const int co0 = blockIdx.z % co_blocks * kWgradTile * OutTiles;  // the block's first
  const int stages = wgrad_stages(s, Rows), first = blockIdx.x, step = gridDim.x;
  const int mine = first < stages ? (stages - first + step - 1) / step : 0;
  constexpr int kGradRows = OutTiles * Rows * kWgradStrip;
  constexpr int kGradChunks = kGradRows * (kWgradTile / 4);
  const int stage_floats = wgrad_stage_floats(s, Rows, RowTaps, OutTiles);
  const int boxes = wgrad_boxes(s, Rows, RowTaps), box_rows = wgrad_box_rows(s);
  const int row_step = blockDim.x / 16, chunk = threadIdx.x % 16;
  const int first_b = threadIdx.x / 16 / box_rows, first_r = threadIdx.x / 16 % box_rows;

  auto copy = [](unsigned to, const float* from, index_t source) {  // zeros where source < 0
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to),
                 "l"(from + (source < 0 ? 0 : source)), "r"(source < 0 ? 0 : 16) : "memory");
  };
  auto load = [=](int k) {  // the block's k-th stage into its slot of the ring
    // (k past the last: a stage of zeros, no branch around the barrier's loads)
    const WgradStage st = wgrad_stage(s, Rows, first + k * step);
    const unsigned slot = base + static_cast<unsigned>(k % Stages) * stage_floats * 4;
    for (int c = threadIdx.x; c < kGradChunks; c += blockDim.x) {
      const WgradChunk ch = wgrad_strip_chunk(s, st, Rows, co0, c);
      copy(slot + ch.shared * 4, grad, ch.source);
    }
    for (int b = first_b, r = first_r; b < boxes; wgrad_next_box_row(b, r, row_step, box_rows)) {
      const WgradChunk ch = wgrad_box_chunk(s, st, kGradRows, row_tap0, RowTaps, ci0, b, r, chunk);
      copy(slot + ch.shared * 4, x, ch.source);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };

  float d[JTaps * MTiles][8][4];  // tiles of 16 input by 8 output channels, (v, u)
#pragma unroll
  for (int m = 0; m < JTaps * MTiles; ++m)
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) d[m][n][e] = 0.f;

  for (int k = 0; k < Stages - 1; ++k) load(k);
  for (int k = 0; k < mine; ++k) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Stages - 2) : "memory");
    float* stage = tiles + (k % Stages) * stage_floats;
    // The output gradient rounded to TF32 once, each chunk by the thread that copied it
    // (its own copies are complete for it now), not by each of the warps that read it:
    // in the products' loop the rounding took as many instructions as the mma.syncs.
    for (int c = threadIdx.x; c < kGradChunks; c += blockDim.x) {
      float4* chunk = reinterpret_cast<float4*>(stage + wgrad_strip_float(c));
      const float4 v = *chunk;
      *chunk = make_float4(round_tf32(v.x), round_tf32(v.y), round_tf32(v.z), round_tf32(v.w));
    }
    __syncthreads();  // stage k landed and rounded for all, and all are past stage k - 1's reads
    load(k + Stages - 1);
    if (i >= s.kernel_h) continue;  // (a warp past the kernel's rows: loads only)
#pragma unroll
    for (int kk = 0; kk < Rows * kWgradStrip; kk += 8) {
      unsigned a[JTaps * MTiles][4], b[8][2];
      auto pair = [&](int f, unsigned& first, unsigned& second) {  // (f even: 8-byte aligned)
        const float2 v = *reinterpret_cast<const float2*>(stage + f);
        first = __float_as_uint(v.x), second = __float_as_uint(v.y);
      };
#pragma unroll
      for (int v = 0; v < JTaps; ++v)
#pragma unroll
        for (int u = 0; u < MTiles; ++u)
#pragma unroll
          for (int e = 0; e < 4; e += 2)
            pair(wgrad_a_float(kGradRows, box_rows, s.dilation_h, RowTaps, tap,
                               wgrad_shift(s, w.j + v), kk, w.m + u, e, lane),
                 a[v * MTiles + u][e], a[v * MTiles + u][e + 1]);
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          b[n][e] = __float_as_uint(stage[wgrad_b_float(Rows, o, kk, n, e, lane)]);
#pragma unroll
      for (int m = 0; m < JTaps * MTiles; ++m)
#pragma unroll
        for (int n = 0; n < 8; ++n)
          asm volatile(
              "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
              "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
              : "+f"(d[m][n][0]), "+f"(d[m][n][1]), "+f"(d[m][n][2]), "+f"(d[m][n][3])
              : "r"(a[m][0]), "r"(a[m][1]), "r"(a[m][2]), "r"(a[m][3]), "r"(b[n][0]),
                "r"(b[n][1]));
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  if (i >= s.kernel_h) return;
#pragma unroll
  for (int v = 0; v < JTaps; ++v) {
    float* out = partial + wgrad_partial(s, blockIdx.x, i, w.j + v, ci0, co0 + o * kWgradTile);
#pragma unroll
    for (int u = 0; u < MTiles; ++u)
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; e += 2)
          *reinterpret_cast<float2*>(out + wgrad_d_row(w.m + u, e, lane) * s.c_out +
                                     wgrad_d_column(n, e, lane)) =
              make_float2(d[v * MTiles + u][n][e], d[v * MTiles + u][n][e + 1]);
  }
}
#endif

}  // namespace gemmconv
