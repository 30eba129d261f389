// The CUDA backend: kernels::Backend over kernels/cuda/cuda_ops.h. Weights are placed on the GPU
// as BF16 (F32/F16 checkpoints are rounded to BF16, quantized ones dequantized to BF16: the GPU
// kernels have one weight format so far); activations stay FP32 between ops. Scratch arrays come
// from a caching allocator, so a forward call does no cudaMalloc/cudaFree after the first ones
// (cudaFree would synchronize the device); all ops run in order on one stream, which makes
// reusing a released array safe without events.
#ifdef LOCKSTEP_HAVE_CUDA

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/numerics.h"
#include "kernels/ref/quant_ref.h"
#include "kernels/ref/ref_ops.h"

namespace lockstep::kernels {

namespace {

// Size classes: powers of two up to 1 MiB, then whole MiB.
size_t size_class(size_t bytes) {
  constexpr size_t kMiB = size_t{1} << 20;
  if (bytes >= kMiB) return (bytes + kMiB - 1) / kMiB * kMiB;
  size_t c = 256;
  while (c < bytes) c *= 2;
  return c;
}

// Row r of a host weight as float32 (any dtype or the affine format).
void host_row(const Weight& w, int64_t r, float* out) {
  if (w.quant != QuantFormat::None) {
    ref::dequantize_row(w, r, out);
    return;
  }
  for (int64_t k = 0; k < w.cols; ++k) out[k] = ref::weight_at(w.dtype, w.data, w.cols, r, k);
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(ThreadPool* threads)
      : threads_(threads ? threads : &ThreadPool::global()) {
    std::string why;
    if (!cuda::available(&why)) fail("--device cuda: ", why);
    name_ = cuda::describe_device();
  }
  ~CudaBackend() override {
    cuda::synchronize();
    for (auto& [size, list] : free_)
      for (void* p : list) cuda::free_device(p);
    for (void* p : weights_) cuda::free_device(p);
  }

  Device device() const override { return Device::Cuda; }
  std::string describe() const override { return "cuda: " + name_; }
  ThreadPool& threads() override { return *threads_; }

  void* allocate(size_t bytes, bool /*lazy*/) override {
    const size_t c = size_class(std::max<size_t>(bytes, 1));
    std::lock_guard<std::mutex> lock(mu_);
    auto& list = free_[c];
    void* p;
    if (!list.empty()) {
      p = list.back();
      list.pop_back();
    } else {
      p = cuda::malloc_device(c);
    }
    sizes_[p] = c;
    return p;
  }
  void release(void* p) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sizes_.find(p);
    LOCKSTEP_CHECK(it != sizes_.end(), "release of memory this backend did not allocate");
    free_[it->second].push_back(p);
    sizes_.erase(it);
  }
  void upload(void* dst, const void* src, size_t bytes) override { cuda::upload(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override {
    cuda::download(dst, src, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override { cuda::copy(dst, src, bytes); }

  Weight place(const Weight& host) override {
    if (!host.data) return host;
    auto found = placed_.find(host.data);  // tied embeddings / lm_head share one copy
    if (found != placed_.end()) return found->second;
    Weight w;
    w.dtype = DType::BF16;
    w.rows = host.rows;
    w.cols = host.cols;
    const size_t bytes = static_cast<size_t>(host.rows * host.cols) * 2;
    void* dev = cuda::malloc_device(bytes);
    weights_.push_back(dev);
    if (host.quant == QuantFormat::None && host.dtype == DType::BF16) {
      cuda::upload(dev, host.data, bytes);
    } else {  // convert row blocks on the host, then upload
      const int64_t rows_per = std::max<int64_t>(1, (int64_t{16} << 20) / (host.cols * 2));
      std::vector<uint16_t> buf;
      for (int64_t r0 = 0; r0 < host.rows; r0 += rows_per) {
        const int64_t n = std::min(rows_per, host.rows - r0);
        buf.resize(n * host.cols);
        threads_->parallel_for(n, [&](int64_t a, int64_t b) {
          std::vector<float> row(host.cols);
          for (int64_t r = a; r < b; ++r) {
            host_row(host, r0 + r, row.data());
            for (int64_t k = 0; k < host.cols; ++k) buf[r * host.cols + k] = f32_to_bf16(row[k]);
          }
        });
        cuda::upload(static_cast<uint16_t*>(dev) + r0 * host.cols, buf.data(), buf.size() * 2);
        cuda::synchronize();  // buf is reused
      }
    }
    w.data = dev;
    placed_[host.data] = w;
    return w;
  }

  void linear(const float* x, int64_t M, const Weight& w, const float* bias, float* y) override {
    if (numerics() == Numerics::Fast)
      fail("--numerics fast: the CUDA backend has only its exact kernels so far");
    if (M > 0) cuda::linear(x, M, w, bias, y);
  }
  void embedding(const Weight& table, const int32_t* ids, int64_t n, float* out) override {
    cuda::embedding(table, ids, n, out);
  }
  void rms_norm(const float* x, int64_t M, int64_t D, const float* w, float eps,
                bool zero_centered, float* y) override {
    cuda::rms_norm(x, M, D, w, eps, zero_centered, y);
  }
  void rope(float* x, int64_t M, int64_t heads, int64_t head_dim, int64_t rotary_dim,
            const float* cos_sin) override {
    cuda::rope(x, M, heads, head_dim, rotary_dim, cos_sin);
  }
  void silu_mul(const float* gate, const float* up, float* out, int64_t n) override {
    cuda::silu_mul(gate, up, out, n);
  }
  void add(float* x, const float* delta, int64_t n) override { cuda::add(x, delta, n); }
  void split_query_gate(const float* qg, int64_t rows_heads, int64_t head_dim, float* q,
                        float* gate) override {
    cuda::split_query_gate(qg, rows_heads, head_dim, q, gate);
  }
  void sigmoid_mul(float* x, const float* gate, int64_t n) override {
    cuda::sigmoid_mul(x, gate, n);
  }
  void kv_write(const KvLayerView& kv, const float* k, const float* v, int64_t T,
                const int32_t* slots) override {
    cuda::kv_write(k, v, T, kv.n_kv_heads * kv.head_dim, slots, const_cast<float*>(kv.k),
                   const_cast<float*>(kv.v));
  }
  void attention(const float* q, int64_t T, const AttentionBatch& rows, int64_t n_heads,
                 const KvLayerView& kv, float scale, float* out) override {
    cuda::attention(q, T, rows.block_tables, rows.table_stride, rows.n_keys, rows.max_keys,
                    n_heads, kv, scale, out);
  }
  void gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t D,
                   float* out) override {
    cuda::gather_rows(x, rows, n, D, out);
  }
  void copy_2d(float* dst, int64_t dst_stride, const float* src, int64_t src_stride,
               int64_t rows, int64_t cols) override {
    cuda::copy_2d(dst, dst_stride, src, src_stride, rows, cols);
  }
  void deltanet_step(const DeltaNetShape& d, const float* conv_w, const float* A_log,
                     const float* dt_bias, const float* inputs, int64_t T,
                     const DeltaNetSpan* spans, int64_t n_spans, int64_t max_span_tokens,
                     float* core) override {
    static_assert(sizeof(DeltaNetSpan) == sizeof(cuda::DeltaNetSpan));
    const cuda::DeltaNetShape shape{d.nk, d.nv, d.dk, d.dv, d.K};
    cuda::deltanet_step(shape, conv_w, A_log, dt_bias, inputs, T,
                        reinterpret_cast<const cuda::DeltaNetSpan*>(spans), n_spans,
                        max_span_tokens, core);
  }
  void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t D, const float* w,
                      float eps, float* y) override {
    cuda::gated_rms_norm(x, z, rows, D, w, eps, y);
  }

 private:
  ThreadPool* threads_;
  std::string name_;
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  std::unordered_map<void*, size_t> sizes_;
  std::vector<void*> weights_;
  std::unordered_map<const void*, Weight> placed_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(ThreadPool* threads) {
  return std::make_unique<CudaBackend>(threads);
}

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_HAVE_CUDA
