// linear_fast (cuda_ops.h): numerics fast's linear through cuBLAS, loaded at run time.
//
// y[M][N] = x[M][K] W[N][K]^T (+ bias): x is rounded to bf16 (the same nearest-even rounding as
// the exact kernels), then one cublasGemmEx with BF16 A/B, FP32 C and FP32 compute; in cuBLAS's
// column-major terms y^T (N x M, ld N) = W^T (W stored K x N, ld K, transposed) * x^T (K x M, ld
// K). The bias is added afterwards by a small kernel (one FP32 add per element). cuBLAS picks its
// own algorithm and split per shape, so rows may change bits with M: this is not the exact path.
//
// libcublas.so.13 is opened with dlopen at the first call, so no lockstep binary needs cuBLAS to
// start; only the header's types and constants are used at build time (nothing is linked).
#include <cublas_v2.h>
#include <dlfcn.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/mma.cuh"

namespace lockstep::kernels::cuda {
namespace {

using namespace detail;

using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
using SetStreamFn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
using SetWorkspaceFn = cublasStatus_t (*)(cublasHandle_t, void*, size_t);
using SetMathModeFn = cublasStatus_t (*)(cublasHandle_t, cublasMath_t);
using StatusStringFn = const char* (*)(cublasStatus_t);
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                    int, const void*, const void*, cudaDataType, int, const void*,
                                    cudaDataType, int, const void*, void*, cudaDataType, int,
                                    cublasComputeType_t, cublasGemmAlgo_t);

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // user workspace: safe under graph capture
constexpr int kScratchSlot = 4;                      // x as bf16

struct Cublas {
  void* lib = nullptr;
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
  GemmExFn gemm = nullptr;
  StatusStringFn status_string = nullptr;
  std::string error;  // non-empty when loading failed
};

Cublas& cublas() {
  static Cublas c;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* name = "libcublas.so.13";
    c.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!c.lib) {
      const char* e = dlerror();
      c.error = std::string("cannot load ") + name + " (numerics fast on CUDA needs cuBLAS 13): " +
                (e ? e : "unknown dlopen error");
      return;
    }
    auto sym = [&](const char* s) {
      void* p = dlsym(c.lib, s);
      if (!p && c.error.empty()) c.error = std::string(name) + " lacks " + s;
      return p;
    };
    auto create = reinterpret_cast<CreateFn>(sym("cublasCreate_v2"));
    auto set_stream = reinterpret_cast<SetStreamFn>(sym("cublasSetStream_v2"));
    auto set_ws = reinterpret_cast<SetWorkspaceFn>(sym("cublasSetWorkspace_v2"));
    auto set_math = reinterpret_cast<SetMathModeFn>(sym("cublasSetMathMode"));
    c.status_string = reinterpret_cast<StatusStringFn>(sym("cublasGetStatusString"));
    c.gemm = reinterpret_cast<GemmExFn>(sym("cublasGemmEx"));
    if (!c.error.empty()) return;
    auto why = [&](cublasStatus_t st) {
      return std::string(c.status_string ? c.status_string(st) : "error ") +
             (c.status_string ? "" : std::to_string(static_cast<int>(st)));
    };
    cublasStatus_t st = create(&c.handle);
    if (st != CUBLAS_STATUS_SUCCESS) {
      c.error = "cublasCreate failed: " + why(st);
      return;
    }
    if (cudaMalloc(&c.workspace, kWorkspaceBytes) != cudaSuccess) {
      c.error = "cannot allocate the cuBLAS workspace";
      return;
    }
    if ((st = set_stream(c.handle, stream())) != CUBLAS_STATUS_SUCCESS ||
        (st = set_ws(c.handle, c.workspace, kWorkspaceBytes)) != CUBLAS_STATUS_SUCCESS ||
        (st = set_math(c.handle, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS) {
      c.error = "cuBLAS setup failed: " + why(st);
      return;
    }
  });
  return c;
}

__global__ void to_bf16_fast(const float* __restrict__ x, uint32_t* __restrict__ out, int64_t n2) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n2) {
    const float2 v = reinterpret_cast<const float2*>(x)[i];
    out[i] = pack_bf16x2(v.x, v.y);
  }
}

__global__ void add_bias(float* __restrict__ y, const float* __restrict__ bias, int64_t total,
                         int N) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) y[i] = __fadd_rn(y[i], bias[i % N]);
}

}  // namespace

bool linear_fast_available(std::string* why_not) {
  std::string why;
  if (!available(&why)) {
    if (why_not) *why_not = why;
    return false;
  }
  const Cublas& c = cublas();
  if (!c.error.empty()) {
    if (why_not) *why_not = c.error;
    return false;
  }
  return true;
}

void linear_fast(const float* x, int64_t M, const Weight& w, const float* bias, float* y) {
  if (w.quant != QuantFormat::None || w.dtype != DType::BF16)
    fail("CUDA linear_fast: only BF16 weights are supported (got ", dtype_name(w.dtype), ")");
  const int64_t N = w.rows, K = w.cols;
  if (N <= 0 || K <= 0 || M < 0 || K % 2 != 0)
    fail("CUDA linear_fast: bad shape M=", M, " N=", N, " K=", K);
  if (M > (int64_t{1} << 30) || N > (int64_t{1} << 30) || K > (int64_t{1} << 30))
    fail("CUDA linear_fast: shape too large M=", M, " N=", N, " K=", K);
  if (M == 0) return;
  Cublas& c = cublas();
  if (!c.error.empty()) fail("CUDA linear_fast: ", c.error);
  auto* xb = static_cast<uint16_t*>(scratch(kScratchSlot, static_cast<size_t>(M * K) * 2));
  const int64_t n2 = M * K / 2;
  to_bf16_fast<<<blocks_for(n2, 256), 256, 0, stream()>>>(x, reinterpret_cast<uint32_t*>(xb), n2);
  check_launch("linear_fast (bf16 conversion)");
  const float one = 1.0f, zero = 0.0f;
  const cublasStatus_t st =
      c.gemm(c.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
             static_cast<int>(K), &one, w.data, CUDA_R_16BF, static_cast<int>(K), xb, CUDA_R_16BF,
             static_cast<int>(K), &zero, y, CUDA_R_32F, static_cast<int>(N), CUBLAS_COMPUTE_32F,
             CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS)
    fail("CUDA linear_fast: cublasGemmEx failed (M=", M, " N=", N, " K=", K,
         "): ", c.status_string ? c.status_string(st) : "error");
  if (bias) {
    const int64_t total = M * N;
    add_bias<<<blocks_for(total, 256), 256, 0, stream()>>>(y, bias, total, static_cast<int>(N));
    check_launch("linear_fast (bias)");
  }
}

}  // namespace lockstep::kernels::cuda
