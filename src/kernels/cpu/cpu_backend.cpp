// The CPU backend: host memory and the kernels of kernels/ops.h, unchanged. Its per-op glue does
// the same arithmetic the model files did inline before backends existed (x += delta, the gate's
// x * sigmoid(g)), so CPU results keep their bits.
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "core/error.h"
#include "core/file_mappings.h"
#include "core/profile.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_tuning.h"
#include "kernels/cpu/quant_panels.h"
#include "kernels/gated_delta.h"
#include "kernels/math.h"
#include "kernels/numerics.h"

namespace lockstep::kernels {

namespace {

// The per-token recurrent step, part 1: conv + SiLU, l2-normalise q and k, scale q, gates:
// `inputs` (token_inputs floats) -> `prepared` [conv_dim + 2 nv] = q (scaled) | k | v | g | beta;
// advances the conv state.
void deltanet_token_prepare(const DeltaNetShape& d, const float* conv_w, const float* A_log,
                            const float* dt_bias, float* conv_state, const float* inputs,
                            float* prepared) {
  const int64_t C = d.conv_dim(), KD = d.key_dim();
  causal_conv1d_step(inputs, C, d.K, conv_w, conv_state, prepared);
  l2_normalize(prepared, 2 * d.nk, d.dk, 1e-6f);  // q heads then k heads
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.dk));
  for (int64_t i = 0; i < KD; ++i) prepared[i] *= scale;
  delta_gates(inputs + C, inputs + C + d.nv, A_log, dt_bias, d.nv, prepared + C,
              prepared + C + d.nv);
}

// Part 2: value head h's delta-rule step; out (dv floats) may be null.
void deltanet_token_head(const DeltaNetShape& d, float* delta_state, const float* prepared,
                         int64_t h, float* out) {
  const int64_t C = d.conv_dim(), KD = d.key_dim();
  const int64_t kh = h / (d.nv / d.nk);  // key head kh serves value heads kh*r .. kh*r+r-1
  gated_delta_step(delta_state + h * d.dk * d.dv, d.dk, d.dv, prepared + kh * d.dk,
                   prepared + KD + kh * d.dk, prepared + 2 * KD + h * d.dv, prepared[C + h],
                   prepared[C + d.nv + h], out);
}

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
  void copy_spans(const CopySpan* spans, int64_t n, int64_t /*max_bytes*/) override {
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(spans[i].dst, spans[i].src, static_cast<size_t>(spans[i].bytes));
  }
  // The logits are host memory already: the reference choice in place, row by row (rows are few,
  // each one a pass over V).
  void choose_tokens(const float* logits, int64_t V, std::span<const TokenRule> rules,
                     int32_t* host_ids) override {
    ChoiceScratch scratch;
    for (size_t r = 0; r < rules.size(); ++r)
      host_ids[r] = rules[r].skip ? -1
                                  : choose_token({logits + static_cast<int64_t>(r) * V,
                                                  static_cast<size_t>(V)},
                                                 rules[r], scratch);
  }
  DType kv_dtype() const override { return DType::F32; }
  // 4/8-bit weights the int8 quant dot covers get their panels (quant_panels.h), packed once
  // over the pool; everything else is used in place (the checkpoint's mapped bytes).
  Weight place(const Weight& host) override {
    if (quant_dot() != QuantDot::Int8 || !cpu_panels() || !panels_cover(host)) return host;
    const PanelShape s = panel_shape(host);
    uint8_t* out = panels_.allocate(static_cast<size_t>(s.bytes()));
    threads_->parallel_for(
        s.panels, [&](int64_t p0, int64_t p1) { pack_panels(host, p0, p1, out); }, 16);
    // The checkpoint's pages of this weight, now copied: unmapped so memory holds one copy (the
    // page cache keeps them; a later read, e.g. a tied embedding's lookup, maps them again).
    const int64_t values = host.rows * (host.cols / host.group_size) * s.value_bytes;
    release_file_pages(host.data, static_cast<size_t>(host.rows * host.cols * host.bits / 8));
    release_file_pages(host.scales, static_cast<size_t>(values));
    release_file_pages(host.biases, static_cast<size_t>(values));
    Weight w = host;
    w.panels = out;
    return w;
  }
  Weight place_table(const Weight& host) override { return host; }

  void linear(const float* x, int64_t M, const Weight& w, const float* bias, float* y) override {
    kernels::linear(x, M, w, bias, y, *threads_);
  }
  void linear_multi(const float* x, int64_t M, std::span<const LinearOut> outs) override {
    kernels::linear_multi(x, M, outs, *threads_);
  }
  void linear_grouped(std::span<const LinearJob> jobs) override {
    kernels::linear_grouped(jobs, *threads_);
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
  void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) override {
    kernels::gelu_tanh_mul(gate, up, out, n);
  }
  void scale(float* x, int64_t n, float s) override {
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
  }
  void softcap(float* x, int64_t n, float cap) override {
    for (int64_t i = 0; i < n; ++i) x[i] = softcap_f32(x[i], cap);
  }
  void add(float* x, const float* delta, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) x[i] += delta[i];
  }
  void sigmoid_mul(float* x, const float* gate, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) x[i] *= sigmoid_f32(gate[i]);
  }
  // Exactly the separate ops (the CPU gains nothing from fusing them, and keeps its bits).
  void add_rms_norm(float* x, const float* delta, int64_t M, int64_t D, const float* w, float eps,
                    bool zero_centered, float* y) override {
    add(x, delta, M * D);
    rms_norm(x, M, D, w, eps, zero_centered, y);
  }
  void attention_prep(const AttentionPrep& p, const KvLayerView& kv) override {
    const int64_t hd = kv.head_dim, nkv = kv.n_kv_heads;
    if (p.q_in != p.q) copy_2d(p.q, hd, p.q_in, p.q_in_stride, p.T * p.n_heads, hd);
    if (p.q_norm) rms_norm(p.q, p.T * p.n_heads, hd, p.q_norm, p.eps, p.zero_centered, p.q);
    if (p.k_norm) rms_norm(p.k, p.T * nkv, hd, p.k_norm, p.eps, p.zero_centered, p.k);
    rope(p.q, p.T, p.n_heads, hd, p.rotary_dim, p.cos_sin);
    rope(p.k, p.T, nkv, hd, p.rotary_dim, p.cos_sin);
    kv_write(kv, p.k, p.v, p.T, p.slots);
  }
  void kv_write(const KvLayerView& kv, const float* k, const float* v, int64_t T,
                const int32_t* slots) override {
    if (kv.dtype != DType::F32) fail("CPU kv_write: the KV cache must be F32");
    const int64_t kvd = kv.n_kv_heads * kv.head_dim;
    float* kc = static_cast<float*>(const_cast<void*>(kv.k));  // the pool's own (mutable) storage
    float* vc = static_cast<float*>(const_cast<void*>(kv.v));
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(kc + static_cast<int64_t>(slots[t]) * kvd, k + t * kvd, kvd * sizeof(float));
      std::memcpy(vc + static_cast<int64_t>(slots[t]) * kvd, v + t * kvd, kvd * sizeof(float));
    }
  }
  void attention(const float* q, int64_t T, const AttentionBatch& rows, int64_t n_heads,
                 const KvLayerView& kv, float scale, float* out) override {
    std::vector<AttentionRow> r(T);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t n = rows.n_keys[t];
      r[t] = {rows.block_tables + t * rows.table_stride, n,
              rows.window > 0 ? std::max<int64_t>(0, n - rows.window) : 0};
    }
    kernels::attention(q, T, r, n_heads, kv, scale, out, *threads_);
  }
  void moe_combine(const float* expert_out, const int32_t* rows, const float* weights, int64_t T,
                   int64_t k, int64_t D, const float* shared, const float* shared_gate,
                   float* out) override {
    auto row = [&](int64_t i) {
      return expert_out + (rows ? static_cast<int64_t>(rows[i]) : i) * D;
    };
    for (int64_t t = 0; t < T; ++t) {
      const float* w = weights + t * k;
      float* o = out + t * D;
      const float* y0 = row(t * k);
      for (int64_t d = 0; d < D; ++d) o[d] = w[0] * y0[d];
      for (int64_t j = 1; j < k; ++j) {
        const float* y = row(t * k + j);
        for (int64_t d = 0; d < D; ++d) o[d] += w[j] * y[d];
      }
      if (!shared) continue;
      const float s = sigmoid_f32(shared_gate[t]);
      for (int64_t d = 0; d < D; ++d) o[d] += s * shared[t * D + d];
    }
  }
  void gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t D,
                   float* out) override {
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(out + i * D, x + static_cast<int64_t>(rows[i]) * D, D * sizeof(float));
  }
  void copy_2d(float* dst, int64_t dst_stride, const float* src, int64_t src_stride,
               int64_t rows, int64_t cols) override {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + r * dst_stride, src + r * src_stride, cols * sizeof(float));
  }

  // Conv and gates run per span in token order (the conv state is sequential); the delta rule of
  // each (span, head) pair runs all of that span's tokens in order on one thread.
  void deltanet_step(const DeltaNetShape& d, const float* conv_w, const float* A_log,
                     const float* dt_bias, const float* inputs, int64_t T,
                     const DeltaNetSpan* span_array, int64_t n_spans, int64_t /*max_span_tokens*/,
                     float* core) override {
    const std::span<const DeltaNetSpan> spans(span_array, static_cast<size_t>(n_spans));
    const int64_t TI = d.token_inputs(), P = d.conv_dim() + 2 * d.nv, VD = d.value_dim();
    std::vector<float> prepared(T * P);
    for (const DeltaNetSpan& s : spans)
      for (int64_t t = s.first; t < s.first + s.n; ++t)
        deltanet_token_prepare(d, conv_w, A_log, dt_bias, s.conv_state, inputs + t * TI,
                               &prepared[t * P]);
    const int64_t jobs = static_cast<int64_t>(spans.size()) * d.nv;
    profile::Scope prof(profile::Op::DeltaNetStep);
    threads_->parallel_for(jobs, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        const DeltaNetSpan& s = spans[j / d.nv];
        const int64_t h = j % d.nv;
        for (int64_t t = s.first; t < s.first + s.n; ++t)
          deltanet_token_head(d, s.delta_state, &prepared[t * P], h,
                              core ? core + t * VD + h * d.dv : nullptr);
      }
    });
  }
  void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t D, const float* w,
                      float eps, float* y) override {
    kernels::gated_rms_norm(x, z, rows, D, w, eps, y);
  }

 private:
  ThreadPool* threads_;
  std::mutex mu_;
  std::unordered_map<void*, size_t> mapped_;
  PanelArena panels_;  // place()'s panel copies
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(ThreadPool* threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace lockstep::kernels
