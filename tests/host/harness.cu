// Host build of gemmconv/col2im.cu for CI, which has nvcc but no GPU.
//
// Built with `nvcc -arch=sm_90 -std=c++17 -shared`, this file makes nvcc compile kernel
// instantiations of every kind the library launches for the H200 (so a kernel that does not
// compile fails CI), and exports one C entry point that runs the kernels' own per-element
// functions over every element on the CPU. tests/test_host_kernels.py compares that with
// the PyTorch path.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

// The kernels' source as the imported gemmconv ships it: the build passes its folder
// with -I (tests/test_host_kernels.py), so that a test of an installed wheel checks the
// wheel's copy.
#include "col2im.cu"

namespace gemmconv {

#define GC_INSTANTIATE(T, I, ND)                                                              \
  template __global__ void col2im_kernel<T, I, ND>(const Taps<ND>, const Extent<ND>, const T*, \
                                                   const T*, T*);                             \
  template __global__ void im2col_kernel<T, I, ND>(const Taps<ND>, const Extent<ND>, const T*, \
                                                   T*);                                       \
  template __global__ void col2im_kernel<T, I, ND, 7>(const Taps<ND>, const Extent<ND>,        \
                                                      const T*, const T*, T*);                \
  template __global__ void fill_kernel<T, I, ND>(const Extent<ND>, const T*, T*);             \
  template __global__ void col2im_interleaved_kernel<T, I, ND, 1, 1>(                          \
      const Taps<ND>, const Interleaved<ND>, const T*, const T*, T*);                         \
  template __global__ void col2im_interleaved_kernel<T, I, ND, 1, 7>(                          \
      const Taps<ND>, const Interleaved<ND>, const T*, const T*, T*);                         \
  template __global__ void col2im_interleaved_kernel<T, I, ND, 16 / sizeof(T), 4>(             \
      const Taps<ND>, const Interleaved<ND>, const T*, const T*, T*);                         \
  template __global__ void im2col_interleaved_kernel<T, I, ND, 1, 2>(                          \
      const Taps<ND>, const Interleaved<ND>, const T*, T*);                                   \
  template __global__ void im2col_interleaved_kernel<T, I, ND, 16 / sizeof(T), 4>(             \
      const Taps<ND>, const Interleaved<ND>, const T*, T*);
#define GC_INSTANTIATE_DIMS(T, I) GC_INSTANTIATE(T, I, 1) GC_INSTANTIATE(T, I, 2) GC_INSTANTIATE(T, I, 3)
#define GC_INSTANTIATE_ALL(T) GC_INSTANTIATE_DIMS(T, int) GC_INSTANTIATE_DIMS(T, long long)
GC_INSTANTIATE_ALL(float)
GC_INSTANTIATE_ALL(double)
GC_INSTANTIATE_ALL(half_t)
GC_INSTANTIATE_ALL(bfloat16_t)

// The float32 channels_last weight gradient's forms (_cuda.rows_weight_gradient_form),
// in balanced warps (_cuda.WGRAD_BALANCED) or not, and (last two lines) the stages of more
// rows that benches/rows_wgrad_ncu.py times (two of them picked since session 74).
#define GC_WGRAD(...) \
  template __global__ void tf32_weight_gradient<__VA_ARGS__>(const RowsWgrad, const float*, \
                                                             const float*, float*);
GC_WGRAD(3, 4, 2, 1, 1, 4) GC_WGRAD(2, 2, 3, 1, 1, 4) GC_WGRAD(1, 2, 3, 1, 1, 4)
GC_WGRAD(1, 2, 3, 2, 1, 4) GC_WGRAD(3, 4, 2, 1, 3, 1) GC_WGRAD(2, 2, 3, 1, 3, 1)
GC_WGRAD(1, 2, 3, 2, 5, 1) GC_WGRAD(1, 2, 3, 1, 1, 2) GC_WGRAD(3, 4, 2, 1, 1, 2)
GC_WGRAD(1, 4, 2, 1, 1, 2) GC_WGRAD(1, 3, 3, 1, 1, 2) GC_WGRAD(1, 3, 2, 1, 1, 2)
GC_WGRAD(1, 3, 2, 2, 5, 1) GC_WGRAD(3, 5, 2, 1, 3, 1) GC_WGRAD(3, 3, 3, 1, 3, 1)

// Compile-time taps, as gemmconv/_cuda.py names them for NVRTC.
template __global__ void col2im_fixed<float, int, 2, 4, 1, false, 1, false, 3, 3, 1, 1, 1, 1>(
    const Extent<2>, const float*, const float*, float*);
template __global__ void col2im_fixed<float, int, 2, 5, 4, false, 1, false, 3, 3, 5, 5, 2, 2>(
    const Extent<2>, const float*, const float*, float*);
template __global__ void col2im_fixed<float, int, 3, 4, 1, true, 4, false, 3, 3, 3, 2, 2, 2, 2, 2, 2>(
    const Extent<3>, const float*, const float*, float*);
template __global__ void col2im_fixed<bfloat16_t, long long, 3, 6, 1, true, 2, false, 3, 3, 5, 2, 2, 3, 1, 2, 1>(
    const Extent<3>, const bfloat16_t*, const bfloat16_t*, bfloat16_t*);
template __global__ void col2im_fixed<float, int, 3, 4, 1, false, 4, true, 3, 3, 3, 2, 2, 2, 2, 2, 2>(
    const Extent<3>, const float*, const float*, float*);
template __global__ void col2im_fixed<double, long long, 2, 5, 2, true, 1, true, 1, 5, 2, 3, 1, 1>(
    const Extent<2>, const double*, const double*, double*);
template __global__ void im2col_fixed<half_t, long long, 3, 4, 1, false, false, false, 3, 5, 7, 2, 2, 2, 1, 2, 1>(
    const Extent<3>, const half_t*, half_t*);
template __global__ void im2col_fixed<float, int, 2, 1, 4, true, true, false, 3, 1, 1, 1, 1, 1>(
    const Extent<2>, const float*, float*);
template __global__ void im2col_fixed<float, long long, 2, 1, 4, true, false, false, 3, 5, 1, 1, 1, 2>(
    const Extent<2>, const float*, float*);
template __global__ void im2col_fixed<half_t, int, 1, 1, 8, true, false, false, 5, 1, 3>(
    const Extent<1>, const half_t*, half_t*);
template __global__ void im2col_fixed<float, int, 3, 1, 4, false, false, false, 3, 5, 7, 2, 2, 2, 1, 2, 1>(
    const Extent<3>, const float*, float*);
template __global__ void im2col_fixed<float, int, 3, 1, 4, true, false, false, 3, 5, 7, 2, 2, 2, 1, 1, 1>(
    const Extent<3>, const float*, float*);
template __global__ void im2col_fixed<float, int, 3, 1, 4, true, false, true, 3, 5, 7, 2, 2, 2, 1, 1, 1>(
    const Extent<3>, const float*, float*);
template __global__ void im2col_fixed<float, long long, 2, 1, 1, false, false, true, 3, 3, 2, 2, 1, 1>(
    const Extent<2>, const float*, float*);

template __global__ void col2im_interleaved_fixed<float, int, 2, 4, 4, 4, 4, 2, 2, 1, 1>(
    const Interleaved<2>, const float*, const float*, float*);
template __global__ void im2col_interleaved_fixed<bfloat16_t, int, 3, 8, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1>(
    const Interleaved<3>, const bfloat16_t*, bfloat16_t*);

template <int V, int J, bool PlanesInner, typename T, typename I, int ND, int R = 1,
          bool EmptyRowsApart = false>
static void col2im_all(const Taps<ND>& t, const Extent<ND>& x, const void* src,
                       const void* bias, void* dst) {
  const I n = col2im_elements<V, J, R, EmptyRowsApart, I>(t, x);
  for (I e = 0; e < n; ++e)
    col2im_element<V, J, PlanesInner, R, EmptyRowsApart>(
        t, x, static_cast<const T*>(src), static_cast<const T*>(bias), static_cast<T*>(dst), e);
}

// The fill, then col2im over the rows that can receive entries.
template <int V, int J, bool PlanesInner, typename T, typename I, int ND, int R>
static void col2im_apart(const Taps<ND>& t, const Extent<ND>& x, const void* src,
                         const void* bias, void* dst) {
  const I n = fill_elements<I>(x);
  for (I e = 0; e < n; ++e)
    fill_element(x, static_cast<const T*>(bias), static_cast<T*>(dst), e);
  col2im_all<V, J, PlanesInner, T, I, ND, R, true>(t, x, src, bias, dst);
}

template <int W, int P, bool Windowed, bool SamplesInner, typename T, typename I, int ND,
          bool SplitTaps = false>
static void im2col_all(const Taps<ND>& t, const Extent<ND>& x, const void* src, void* dst) {
  const I n = im2col_elements<W, P, SplitTaps, I>(t, x);
  for (I e = 0; e < n; ++e)
    im2col_element<W, P, Windowed, SamplesInner, SplitTaps>(t, x, static_cast<const T*>(src),
                                                             static_cast<T*>(dst), e);
}

template <int W, int P, bool Windowed, typename T, typename I, int ND>
static void im2col_ordered(bool samples_inner, const Taps<ND>& t, const Extent<ND>& x,
                           const void* src, void* dst) {
  if (samples_inner)
    im2col_all<W, P, Windowed, true, T, I>(t, x, src, dst);
  else
    im2col_all<W, P, Windowed, false, T, I>(t, x, src, dst);
}

// op 0 col2im with one output per element, 2 with spans of three, 3 with spans of six (spans
// that are, or are not, multiples of the stride, and rows that end part-way through one),
// 4 spans of three with rows numbered planes innermost, 6 two spans of three per thread and
// 7 four spans of six per thread, 32 spans apart (rows that end part-way through a run),
// 14 as 4 in two planes per thread and 15 as 6 in four planes per thread, 19, 20 and 21 as
// 2, 7 (two spans, rows planes innermost) and 14 (plane by plane) after a fill, over the
// rows that can receive entries only, 22 as 0 in three planes per thread;
// 1 im2col with one grid position per element, 5 with three positions per thread, 32 apart
// (rows that end part-way through), 8 with runs of 16 bytes per thread (the caller meets
// spread_runs's conditions), 12 the same loading the image element by element (the caller
// meets spread_elements's); 9, 10, 11 and 13 as 1, 5, 8 and 12 with samples inner; 16, 17
// and 18 as 1, 8 and 12 with a thread per outer tap.
template <typename T, typename I, int ND>
static void run(int op, const index_t* taps, const index_t* extent, const void* src,
                const void* bias, void* dst) {
  Taps<ND> t;
  Extent<ND> x;
  std::memcpy(&t, taps, sizeof t);
  std::memcpy(&x, extent, sizeof x);
  if (op == 0) {
    col2im_all<1, 1, false, T, I>(t, x, src, bias, dst);
  } else if (op == 2) {
    col2im_all<3, 1, false, T, I>(t, x, src, bias, dst);
  } else if (op == 3) {
    col2im_all<6, 1, false, T, I>(t, x, src, bias, dst);
  } else if (op == 4) {
    col2im_all<3, 1, true, T, I>(t, x, src, bias, dst);
  } else if (op == 6) {
    col2im_all<3, 2, false, T, I>(t, x, src, bias, dst);
  } else if (op == 7) {
    col2im_all<6, 4, false, T, I>(t, x, src, bias, dst);
  } else if (op == 14) {
    col2im_all<3, 1, true, T, I, ND, 2>(t, x, src, bias, dst);
  } else if (op == 15) {
    col2im_all<3, 2, false, T, I, ND, 4>(t, x, src, bias, dst);
  } else if (op == 19) {
    col2im_apart<3, 1, false, T, I, ND, 1>(t, x, src, bias, dst);
  } else if (op == 20) {
    col2im_apart<6, 2, true, T, I, ND, 1>(t, x, src, bias, dst);
  } else if (op == 21) {
    col2im_apart<3, 1, false, T, I, ND, 2>(t, x, src, bias, dst);
  } else if (op == 22) {
    col2im_all<1, 1, false, T, I, ND, 3>(t, x, src, bias, dst);
  } else if (op == 1 || op == 9) {
    im2col_ordered<1, 1, false, T, I>(op == 9, t, x, src, dst);
  } else if (op == 8 || op == 11) {
    im2col_ordered<1, 16 / sizeof(T), true, T, I>(op == 11, t, x, src, dst);
  } else if (op == 12 || op == 13) {
    im2col_ordered<1, 16 / sizeof(T), false, T, I>(op == 13, t, x, src, dst);
  } else if (op == 16) {
    im2col_all<1, 1, false, false, T, I, ND, true>(t, x, src, dst);
  } else if (op == 17) {
    im2col_all<1, 16 / sizeof(T), true, false, T, I, ND, true>(t, x, src, dst);
  } else if (op == 18) {
    im2col_all<1, 16 / sizeof(T), false, false, T, I, ND, true>(t, x, src, dst);
  } else {
    im2col_ordered<3, 1, false, T, I>(op == 10, t, x, src, dst);
  }
}

// The channels-innermost kernels: op 0 col2im and 1 im2col with one channel a thread, 2 and
// 3 the same with runs of 16 bytes, 4 and 5 with two runs of 16 bytes a thread, 6 and 7 with
// three channels a thread (the caller meets their conditions).
template <int P, int R, typename T, typename I, int ND>
static void interleaved_all(bool col2im, const Taps<ND>& t, const Interleaved<ND>& x,
                            const void* src, const void* bias, void* dst) {
  const T* in = static_cast<const T*>(src);
  T* out = static_cast<T*>(dst);
  if (col2im) {
    for (I e = 0; e < col2im_interleaved_elements<P, R, I>(x); ++e)
      col2im_interleaved_element<P, R>(t, x, in, static_cast<const T*>(bias), out, e);
  } else {
    for (I e = 0; e < im2col_interleaved_elements<P, R, I>(t, x); ++e)
      im2col_interleaved_element<P, R>(t, x, in, out, e);
  }
}

template <typename T, typename I, int ND>
static void run_interleaved(int op, const index_t* taps, const index_t* extent,
                            const void* src, const void* bias, void* dst) {
  Taps<ND> t;
  Interleaved<ND> x;
  std::memcpy(&t, taps, sizeof t);
  std::memcpy(&x, extent, sizeof x);
  constexpr int P = 16 / sizeof(T);
  const bool col2im = op % 2 == 0;
  if (op < 2)
    interleaved_all<1, 1, T, I>(col2im, t, x, src, bias, dst);
  else if (op < 4)
    interleaved_all<P, 1, T, I>(col2im, t, x, src, bias, dst);
  else if (op < 6)
    interleaved_all<P, 2, T, I>(col2im, t, x, src, bias, dst);
  else
    interleaved_all<1, 3, T, I>(col2im, t, x, src, bias, dst);
}

template <typename T, typename I>
static int run_dims(int op, int nd, const index_t* taps, const index_t* extent, const void* src,
                    const void* bias, void* dst) {
  switch (nd) {
    case 1: run<T, I, 1>(op, taps, extent, src, bias, dst); return 0;
    case 2: run<T, I, 2>(op, taps, extent, src, bias, dst); return 0;
    case 3: run<T, I, 3>(op, taps, extent, src, bias, dst); return 0;
  }
  return 1;
}

template <typename T, typename I>
static int run_interleaved_dims(int op, int nd, const index_t* taps, const index_t* extent,
                                const void* src, const void* bias, void* dst) {
  switch (nd) {
    case 1: run_interleaved<T, I, 1>(op, taps, extent, src, bias, dst); return 0;
    case 2: run_interleaved<T, I, 2>(op, taps, extent, src, bias, dst); return 0;
    case 3: run_interleaved<T, I, 3>(op, taps, extent, src, bias, dst); return 0;
  }
  return 1;
}

template <typename I>
static int run_interleaved_types(int op, int dtype, int nd, const index_t* taps,
                                 const index_t* extent, const void* src, const void* bias,
                                 void* dst) {
  switch (dtype) {
    case 0: return run_interleaved_dims<float, I>(op, nd, taps, extent, src, bias, dst);
    case 1: return run_interleaved_dims<double, I>(op, nd, taps, extent, src, bias, dst);
    case 2: return run_interleaved_dims<half_t, I>(op, nd, taps, extent, src, bias, dst);
    case 3: return run_interleaved_dims<bfloat16_t, I>(op, nd, taps, extent, src, bias, dst);
  }
  return 1;
}

template <typename I>
static int run_types(int op, int dtype, int nd, const index_t* taps, const index_t* extent,
                     const void* src, const void* bias, void* dst) {
  switch (dtype) {
    case 0: return run_dims<float, I>(op, nd, taps, extent, src, bias, dst);
    case 1: return run_dims<double, I>(op, nd, taps, extent, src, bias, dst);
    case 2: return run_dims<half_t, I>(op, nd, taps, extent, src, bias, dst);
    case 3: return run_dims<bfloat16_t, I>(op, nd, taps, extent, src, bias, dst);
  }
  return 1;
}

}  // namespace gemmconv

// op: 0 col2im (src = columns, dst = image), 2 and 3 the same in spans of three and six,
// 4 in spans of three with planes innermost, 6 and 7 two spans of three and four of six per
// thread, 14 as 4 in two planes per thread, 15 as 6 in four (the channels a multiple),
// 19-21 with the receiving rows apart (as 2; six in two spans, rows planes innermost; three
// in two planes), 1 im2col (src = image, dst = columns), 5 the same with three positions per thread,
// 8 with 16-byte runs from windows of the row, 12 with 16-byte runs loaded element by
// element; 9, 10, 11 and 13 as 1, 5, 8 and 12 with samples inner; 16, 17 and 18 as 1, 8
// and 12 with a thread per outer tap.
// dtype: 0 float32, 1 float64, 2 float16, 3 bfloat16. wide: 64-bit indices if nonzero.
// taps, extent: the Taps<nd> and Extent<nd> structs as flat int64 arrays.
// Returns nonzero for a bad op, dtype or nd.
extern "C" int gemmconv_host(int op, int dtype, int nd, int wide, const long long* taps,
                             const long long* extent, const void* src, const void* bias,
                             void* dst) {
  using namespace gemmconv;
  if (op < 0 || op > 22) return 1;
  return wide ? run_types<long long>(op, dtype, nd, taps, extent, src, bias, dst)
              : run_types<int>(op, dtype, nd, taps, extent, src, bias, dst);
}

// The channels-innermost kernels (col2im.cu's Interleaved), as gemmconv_host: op 0 col2im,
// 1 im2col, 2 and 3 the same in runs of 16 bytes, 4 and 5 in two such runs a thread;
// extent is an Interleaved<nd>.
extern "C" int gemmconv_host_interleaved(int op, int dtype, int nd, int wide,
                                         const long long* taps, const long long* extent,
                                         const void* src, const void* bias, void* dst) {
  using namespace gemmconv;
  if (op < 0 || op > 7) return 1;
  return wide ? run_interleaved_types<long long>(op, dtype, nd, taps, extent, src, bias, dst)
              : run_interleaved_types<int>(op, dtype, nd, taps, extent, src, bias, dst);
}

// The taps of one dim that the generic col2im visits for padded coordinate r (gather's loop
// from first_reaching_tap): writes them to taps_out and returns how many.
extern "C" int gemmconv_reaching_taps(long long kernel, long long stride, long long dilation,
                                      long long r, long long* taps_out) {
  using namespace gemmconv;
  const Taps<1> t{{kernel}, {stride}, {dilation}};
  long long step = 1;
  int count = 0;
  for (long long k = first_reaching_tap(t, 0, r, step); k < kernel; k += step) taps_out[count++] = k;
  return count;
}

// tf32_weight_gradient's decomposition on the host, in double, through the kernel's own
// functions: for every block (blocks x ceil(k_h / row_taps) x channel tiles of 64 input by
// 64 out_tiles output channels) its stages in its order, each stage's shared tiles as its
// threads' 16-byte chunks fill them (zeros for source -1), each warp's tiles of j_taps W
// taps by m_tiles tiles of channels (wgrad_warp_tile) and their mma.sync fragments read by
// lane and element as wgrad_a_float and wgrad_b_float say, and its sums stored where
// wgrad_d_row, wgrad_d_column and wgrad_partial say. `partial`: (blocks, k_h, k_w, C_in,
// C_out); shape: RowsWgrad's 13 fields. Returns 0, or 1 where k_w is no multiple of j_taps.
extern "C" int gemmconv_rows_weight_gradient(const int* shape, int row_taps, int rows,
                                             int out_tiles, int j_taps, int m_tiles,
                                             int blocks, const float* x, const float* grad,
                                             double* partial) {
  using namespace gemmconv;
  RowsWgrad s;
  std::memcpy(&s, shape, sizeof s);
  const int floats = wgrad_stage_floats(s, rows, row_taps, out_tiles);
  const int grad_rows = out_tiles * rows * kWgradStrip;
  if (s.kernel_w % j_taps) return 1;
  const int warps = out_tiles * row_taps * (s.kernel_w / j_taps) * (4 / m_tiles);
  const int boxes = wgrad_boxes(s, rows, row_taps), box_rows = wgrad_box_rows(s);
  std::vector<double> tile(floats);
  const int stages = wgrad_stages(s, rows);
  const int co_blocks = s.c_out / (kWgradTile * out_tiles);
  // The sums of each (output tile, row tap, W tap): 64 x 64, as the warps' tiles fill them.
  auto sums_of = [&](const WgradWarpTile& w) {
    return ((w.o * row_taps + w.tap) * s.kernel_w + w.j) * kWgradTile * kWgradTile;
  };
  for (int z = 0; z < s.c_in / kWgradTile * co_blocks; ++z)
    for (int y = 0; y * row_taps < s.kernel_h; ++y)
      for (int block = 0; block < blocks; ++block) {
        const int ci0 = z / co_blocks * kWgradTile;
        const int co0 = z % co_blocks * kWgradTile * out_tiles;
        std::vector<double> sums(out_tiles * row_taps * s.kernel_w * kWgradTile * kWgradTile,
                                 0.0);
        for (int q = block; q < stages; q += blocks) {
          const WgradStage st = wgrad_stage(s, rows, q);
          std::fill(tile.begin(), tile.end(), std::nan(""));   // (the rows' padding stays NaN)
          auto fill = [&](WgradChunk ch, const float* from) {
            for (int v = 0; v < 4; ++v) tile[ch.shared + v] = ch.source < 0 ? 0.0 : from[ch.source + v];
          };
          for (int c = 0; c < grad_rows * (kWgradTile / 4); ++c)
            fill(wgrad_strip_chunk(s, st, rows, co0, c), grad);
          for (int t = 0; t < 32 * warps; ++t)   // each thread's box rows, as it walks them
            for (int b = t / 16 / box_rows, r = t / 16 % box_rows; b < boxes;
                 wgrad_next_box_row(b, r, 2 * warps, box_rows))
              fill(wgrad_box_chunk(s, st, grad_rows, y * row_taps, row_taps, ci0, b, r, t % 16),
                   x);
          for (int warp = 0; warp < warps; ++warp) {
            const WgradWarpTile w0 =
                wgrad_warp_tile(s.kernel_w, row_taps, j_taps, m_tiles, warp);
            for (int u = 0; u < j_taps * m_tiles; ++u) {   // its tiles, (W tap, channels)
              const WgradWarpTile w{w0.o, w0.tap, w0.j + u / m_tiles, w0.m + u % m_tiles};
              const int o = w.o, tap = w.tap, j = w.j, m = w.m;
              if (y * row_taps + tap >= s.kernel_h) continue;
              double* d = &sums[sums_of(w)];
              for (int kk = 0; kk < rows * kWgradStrip; kk += 8)
                for (int lane = 0; lane < 32; ++lane)
                  for (int n = 0; n < 8; ++n)
                    for (int e = 0; e < 4; ++e) {
                      // D's element e, PTX's (row, column) = (g + 8 (e / 2), 2 t + e % 2),
                      // = sum over k of A(row, k) B(k, column): A's row r is held by lanes
                      // (r % 8) 4 + t in elements r / 8 + 2 h, for k = t + 4 h; B's column c
                      // by lanes 4 c + t in element h, for the same k. Stored at the
                      // channels wgrad_d_row and wgrad_d_column give.
                      const int row = lane / 4 + 8 * (e / 2), column = 2 * (lane % 4) + e % 2;
                      double& sum = d[wgrad_d_row(m, e, lane) * kWgradTile +
                                      wgrad_d_column(n, e, lane)];
                      for (int h = 0; h < 2; ++h)
                        for (int t = 0; t < 4; ++t) {
                          const int a_lane = (row % 8) * 4 + t, b_lane = column * 4 + t;
                          const double av = tile[wgrad_a_float(grad_rows, wgrad_box_rows(s),
                                                               s.dilation_h, row_taps, tap,
                                                               wgrad_shift(s, j), kk, m,
                                                               row / 8 + 2 * h, a_lane)];
                          const double bv = tile[wgrad_b_float(rows, o, kk, n, h, b_lane)];
                          sum += av * bv;
                        }
                    }
            }
          }
        }
        for (int warp = 0; warp < warps; ++warp) {
          const WgradWarpTile w0 =
              wgrad_warp_tile(s.kernel_w, row_taps, j_taps, m_tiles, warp);
          for (int u = 0; u < j_taps * m_tiles; ++u) {
            const WgradWarpTile w{w0.o, w0.tap, w0.j + u / m_tiles, w0.m + u % m_tiles};
            const int i = y * row_taps + w.tap;
            if (i >= s.kernel_h) continue;
            for (int lane = 0; lane < 32; ++lane)
              for (int n = 0; n < 8; ++n)
                for (int e = 0; e < 4; ++e) {
                  const int row = wgrad_d_row(w.m, e, lane), column = wgrad_d_column(n, e, lane);
                  partial[wgrad_partial(s, block, i, w.j, ci0 + row,
                                        co0 + w.o * kWgradTile + column)] =
                      sums[sums_of(w) + row * kWgradTile + column];
                }
          }
        }
      }
  return 0;
}

// The shared floats tf32_weight_gradient's lanes read (wgrad_a_float, wgrad_b_float) for one
// warp (row tap, shift, output tile o) and one step kk of a stage: a[m][e][lane] (4 x 4 x
// 32) and b[n][e][lane] (8 x 2 x 32), for the bank test in tests/test_host_kernels.py.
extern "C" void gemmconv_wgrad_fragment_floats(int rows, int out_tiles, int box_rows,
                                               int dilation_h, int row_taps, int tap, int shift,
                                               int o, int kk, int* a, int* b) {
  using namespace gemmconv;
  for (int lane = 0; lane < 32; ++lane) {
    for (int m = 0; m < 4; ++m)
      for (int e = 0; e < 4; ++e)
        a[(m * 4 + e) * 32 + lane] =
            wgrad_a_float(out_tiles * rows * kWgradStrip, box_rows, dilation_h, row_taps, tap,
                          shift, kk, m, e, lane);
    for (int n = 0; n < 8; ++n)
      for (int e = 0; e < 2; ++e)
        b[(n * 2 + e) * 32 + lane] = wgrad_b_float(rows, o, kk, n, e, lane);
  }
}

// The warps a block of tf32_weight_gradient may have (its __launch_bounds__) for a warp's
// tiles of A, and a warp's first tile (o, row tap, j, m), as the kernel deals them.
extern "C" int gemmconv_wgrad_max_warps(int warp_tiles) {
  return gemmconv::wgrad_max_warps(warp_tiles);
}

extern "C" void gemmconv_wgrad_warp_tile(int kernel_w, int row_taps, int j_taps, int m_tiles,
                                         int warp, int* tile) {
  const gemmconv::WgradWarpTile w =
      gemmconv::wgrad_warp_tile(kernel_w, row_taps, j_taps, m_tiles, warp);
  tile[0] = w.o, tile[1] = w.tap, tile[2] = w.j, tile[3] = w.m;
}
