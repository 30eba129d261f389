// The CPU backend: host memory and the kernels of kernels/ops.h, unchanged. Its per-op glue does
// the same arithmetic the model files did inline before backends existed (x += delta, the gate's
// x * sigmoid(g)), so CPU results keep their bits.
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "core/error.h"
#include "kernels/backend.h"
#include "kernels/math.h"

namespace lockstep::kernels {

namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(ThreadPool* threads) : threads_(threads ? threads : &ThreadPool::global()) {}

  Device device() const override { return Device::Cpu; }
  std::string describe() const override {
    return "cpu, " + std::to_string(threads_->size()) + " threads";
  }
  ThreadPool& threads() override { return *threads_; }

  void* allocate(size_t bytes, bool lazy) override {
    bytes = std::max<size_t>(bytes, 1);
    if (lazy) {  // reserve address space; the OS commits pages as they are first written
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) fail("cannot reserve ", bytes, " bytes of memory");
      std::lock_guard<std::mutex> lock(mu_);
      mapped_[p] = bytes;
      return p;
    }
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) fail("out of memory allocating ", bytes, " bytes");
    return p;
  }
  void release(void* p) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = mapped_.find(p);
      if (it != mapped_.end()) {
        munmap(p, it->second);
        mapped_.erase(it);
        return;
      }
    }
    std::free(p);
  }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  Weight place(const Weight& host) override { return host; }

  void linear(const float* x, int64_t M, const Weight& w, const float* bias, float* y) override {
    kernels::linear(x, M, w, bias, y, *threads_);
  }
  void embedding(const Weight& table, const int32_t* ids, int64_t n, float* out) override {
    kernels::embedding(table, {ids, static_cast<size_t>(n)}, out);
  }
  void rms_norm(const float* x, int64_t M, int64_t D, const float* w, float eps,
                bool zero_centered, float* y) override {
    kernels::rms_norm(x, M, D, w, eps, zero_centered, y);
  }
  void rope(float* x, int64_t M, int64_t heads, int64_t head_dim, int64_t rotary_dim,
            const float* cos_sin) override {
    kernels::rope(x, M, heads, head_dim, rotary_dim, cos_sin);
  }
  void silu_mul(const float* gate, const float* up, float* out, int64_t n) override {
    kernels::silu_mul(gate, up, out, n);
  }
  void add(float* x, const float* delta, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) x[i] += delta[i];
  }
  void split_query_gate(const float* qg, int64_t rows_heads, int64_t hd, float* q,
                        float* gate) override {
    for (int64_t r = 0; r < rows_heads; ++r) {
      std::memcpy(q + r * hd, qg + r * 2 * hd, hd * sizeof(float));
      std::memcpy(gate + r * hd, qg + r * 2 * hd + hd, hd * sizeof(float));
    }
  }
  void sigmoid_mul(float* x, const float* gate, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) x[i] *= sigmoid_f32(gate[i]);
  }
  void kv_write(const KvLayerView& kv, const float* k, const float* v, int64_t T,
                const int32_t* slots) override {
    const int64_t kvd = kv.n_kv_heads * kv.head_dim;
    float* kc = const_cast<float*>(kv.k);  // the pool's own (mutable) storage
    float* vc = const_cast<float*>(kv.v);
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(kc + static_cast<int64_t>(slots[t]) * kvd, k + t * kvd, kvd * sizeof(float));
      std::memcpy(vc + static_cast<int64_t>(slots[t]) * kvd, v + t * kvd, kvd * sizeof(float));
    }
  }
  void attention(const float* q, int64_t T, const AttentionBatch& rows, int64_t n_heads,
                 const KvLayerView& kv, float scale, float* out) override {
    std::vector<AttentionRow> r(T);
    for (int64_t t = 0; t < T; ++t) r[t] = {rows.block_tables + t * rows.table_stride, rows.n_keys[t]};
    kernels::attention(q, T, r, n_heads, kv, scale, out, *threads_);
  }
  void gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t D,
                   float* out) override {
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(out + i * D, x + static_cast<int64_t>(rows[i]) * D, D * sizeof(float));
  }

 private:
  ThreadPool* threads_;
  std::mutex mu_;
  std::unordered_map<void*, size_t> mapped_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(ThreadPool* threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace lockstep::kernels
