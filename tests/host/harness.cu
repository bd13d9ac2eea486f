// Host build of gemmconv/col2im.cu for CI, which has nvcc but no GPU.
//
// Built with `nvcc -arch=sm_90 -shared`, this file makes nvcc compile every kernel
// instantiation the library launches for the H200 (so a kernel that does not compile fails
// CI), and exports one C entry point that runs the kernels' own per-element functions over
// every element on the CPU. tests/test_host_kernels.py compares that with the PyTorch path.
#include <cstring>

#include "../../gemmconv/col2im.cu"

namespace gemmconv {

#define GC_INSTANTIATE(T, ND)                                                                  \
  template __global__ void col2im_kernel<T, ND>(const Geometry<ND>, const T*, const T*, T*); \
  template __global__ void im2col_kernel<T, ND>(const Geometry<ND>, const T*, T*);
#define GC_INSTANTIATE_DIMS(T) GC_INSTANTIATE(T, 1) GC_INSTANTIATE(T, 2) GC_INSTANTIATE(T, 3)
GC_INSTANTIATE_DIMS(float)
GC_INSTANTIATE_DIMS(double)
GC_INSTANTIATE_DIMS(half_t)
GC_INSTANTIATE_DIMS(bfloat16_t)

template <typename T, int ND>
static void run(int op, const index_t* fields, const void* src, const void* bias, void* dst) {
  Geometry<ND> g;
  std::memcpy(&g, fields, sizeof g);
  if (op == 0) {
    const index_t n = g.planes * product(g.image);
    for (index_t e = 0; e < n; ++e)
      col2im_element(g, static_cast<const T*>(src), static_cast<const T*>(bias),
                     static_cast<T*>(dst), e);
  } else {
    const index_t n = g.planes * product(g.kernel) * product(g.grid);
    for (index_t e = 0; e < n; ++e)
      im2col_element(g, static_cast<const T*>(src), static_cast<T*>(dst), e);
  }
}

template <typename T>
static int run_dims(int op, int nd, const index_t* fields, const void* src, const void* bias,
                    void* dst) {
  switch (nd) {
    case 1: run<T, 1>(op, fields, src, bias, dst); return 0;
    case 2: run<T, 2>(op, fields, src, bias, dst); return 0;
    case 3: run<T, 3>(op, fields, src, bias, dst); return 0;
  }
  return 1;
}

}  // namespace gemmconv

// op: 0 col2im (src = columns, dst = image), 1 im2col (src = image, dst = columns).
// dtype: 0 float32, 1 float64, 2 float16, 3 bfloat16. Returns nonzero on a bad op/dtype/nd.
extern "C" int gemmconv_host(int op, int dtype, int nd, const long long* fields,
                             const void* src, const void* bias, void* dst) {
  using namespace gemmconv;
  if (op != 0 && op != 1) return 1;
  switch (dtype) {
    case 0: return run_dims<float>(op, nd, fields, src, bias, dst);
    case 1: return run_dims<double>(op, nd, fields, src, bias, dst);
    case 2: return run_dims<half_t>(op, nd, fields, src, bias, dst);
    case 3: return run_dims<bfloat16_t>(op, nd, fields, src, bias, dst);
  }
  return 1;
}
