// Where a model runs: the CPU (Highway kernels, kernels/ops.h) or a CUDA GPU (kernels/cuda/). A
// model forward is written once against this interface; its activations, weights and KV cache
// live in the backend's memory and every op takes pointers into it. The CPU backend's memory is
// plain host memory and its ops are exactly kernels/ops.h, so the CPU path keeps its bits.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/token_choice.h"

namespace lockstep::kernels {

enum class Device : uint8_t { Cpu, Cuda };
std::string_view device_name(Device d);  // "cpu", "cuda"
// Parses "cpu" / "cuda"; throws lockstep::Error naming the accepted values otherwise.
Device parse_device(std::string_view name);

class Backend;

// A move-only array of T in a backend's memory.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Backend* backend, int64_t n);
  DeviceArray(DeviceArray&& o) noexcept { swap(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    DeviceArray tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  ~DeviceArray();
  T* data() { return data_; }
  const T* data() const { return data_; }
  int64_t size() const { return n_; }
  bool empty() const { return n_ == 0; }

 private:
  void swap(DeviceArray& o) noexcept {
    std::swap(backend_, o.backend_);
    std::swap(data_, o.data_);
    std::swap(n_, o.n_);
  }
  Backend* backend_ = nullptr;
  T* data_ = nullptr;
  int64_t n_ = 0;
};
using Floats = DeviceArray<float>;
using Ints = DeviceArray<int32_t>;

// The rows of one forward call as attention needs them, in backend memory: block_tables
// [rows][table_stride] (each row's sequence block table, padded), n_keys [rows].
// window > 0: sliding-window attention, a row of position p = n_keys - 1 sees keys
// (p - window, p] only (transformers' sliding_window_overlay: kv > q - window), a function of
// the position alone; 0: every key [0, n_keys).
struct AttentionBatch {
  const int32_t* block_tables = nullptr;
  int64_t table_stride = 0;
  const int32_t* n_keys = nullptr;
  int64_t max_keys = 0;
  int64_t window = 0;
  // Hints for the launch shape (never for the bits: a row's result is the same whichever launch
  // runs it). The leading `short_rows` rows belong to items of at most kShortItemRows tokens
  // (decode rows, verify blocks), at most `short_rows_per_item` rows each; the rest are prefill
  // chunks, the first `long_items` of them `long_item_rows[i]` rows each (any rows after those
  // form one more part). 0: unknown. A launch block that holds rows of several sequences takes
  // them one after another, so a batch of decode rows takes a launch of one item per block, and
  // each prefill chunk a walk of its own.
  int64_t short_rows = 0, short_rows_per_item = 0;
  static constexpr int kMaxLongItems = 16;
  int32_t long_item_rows[kMaxLongItems] = {};
  int long_items = 0;
};
inline constexpr int64_t kShortItemRows = 16;

// Gated DeltaNet layer shape (models/gated_deltanet_layer.h explains the layout).
struct DeltaNetShape {
  int64_t nk = 0, nv = 0, dk = 0, dv = 0, K = 0;  // key heads, value heads, head dims, conv taps
  int64_t key_dim() const { return nk * dk; }
  int64_t value_dim() const { return nv * dv; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // q | k | v channels
  int64_t token_inputs() const { return conv_dim() + 2 * nv; }     // pre-conv q|k|v, a, b
  int64_t conv_state_floats() const { return conv_dim() * (K - 1); }
  int64_t delta_state_floats() const { return nv * dk * dv; }
};
// One sequence's rows [first, first + n) of a call and its recurrent state in one layer, in the
// backend's memory: conv [conv_dim][K-1] (oldest input first), delta [nv][dk][dv].
struct DeltaNetSpan {
  float* conv_state;
  float* delta_state;
  int32_t first, n;
};
// One contiguous copy of `bytes` bytes between two arrays in the backend's memory
// (Backend::copy_spans).
struct CopySpan {
  void* dst;
  const void* src;
  int64_t bytes;
};

// The attention block's per-head preparation of one call (Backend::attention_prep): q and k
// [T][heads][head_dim] (head_dim, n_kv_heads from the KV view), in the backend's memory.
struct AttentionPrep {
  const float* q_in = nullptr;  // head row i (of T * n_heads) at q_in + i * q_in_stride
  int64_t q_in_stride = 0;      // head_dim, or 2 * head_dim for gated attention's [query | gate]
  float* q = nullptr;           // [T][n_heads][head_dim] out (may equal q_in when the stride is head_dim)
  float* k = nullptr;           // [T][n_kv_heads][head_dim], in place
  const float* v = nullptr;     // [T][n_kv_heads][head_dim]
  int64_t T = 0, n_heads = 0;
  const float* q_norm = nullptr;  // [head_dim] per-head RMSNorm weights; null: no q norm
  const float* k_norm = nullptr;  // likewise for k
  float eps = 0;
  bool zero_centered = false;
  int64_t rotary_dim = 0;
  const float* cos_sin = nullptr;  // [T][rotary_dim]
  const int32_t* slots = nullptr;  // [T] KV cache slots (kv_write)
};

// The largest MoE call (tokens) a backend with Backend::moe_on_device routes on the device; a
// model with such layers records steps of at most this many tokens (models/moe_layer.h:
// feed_forward_record_limit), since a larger call routes on the host.
inline constexpr int64_t kMoeDeviceMaxTokens = 64;
// Ints in Backend::moe_group's groups table for T tokens of k experts among E (and the shared
// expert's group when `shared`).
inline int64_t moe_groups_size(int64_t T, int64_t k, int64_t E, bool shared = false) {
  return 1 + 3 * ((E < T * k ? E : T * k) + (shared ? 1 : 0));
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  // One line for logs and `inspect`: "cpu, 2 threads" / "cuda: NVIDIA H200, ...".
  virtual std::string describe() const = 0;
  // The CPU thread pool (host-side work such as quantizing at load uses it on every backend).
  virtual ThreadPool& threads() = 0;

  // Memory. allocate() may return uninitialised memory; lazy = large and mostly untouched at
  // first (the KV cache: the CPU backend maps it without committing pages).
  virtual void* allocate(size_t bytes, bool lazy = false) = 0;
  virtual void release(void* p) = 0;
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;  // waits for ops
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;

  // Recorded steps. A forward whose sequence of ops (and every op's arguments) is a function of
  // `key` may bracket itself with begin_step(key) / end_step(): the CUDA backend runs the first
  // such step normally, records the second into a CUDA graph and replays the graph from then on
  // (ops become no-ops on the host; uploads still copy their data), checking each op against the
  // recording. Memory allocated inside a step must not outlive it. The CPU backend ignores both.
  // end_step(completed): false when the forward is unwinding from an error (nothing recorded is
  // run then); a completed step that made no download yet runs (or records and runs) here.
  virtual void begin_step(const std::string& /*key*/) {}
  virtual void end_step(bool /*completed*/) {}
  // Starts the ops queued so far without waiting for them (the CUDA backend launches a recorded
  // step's graph here, which it would otherwise do at the step's first download or
  // choose_tokens), so that host work after this call overlaps them. Later ops of the step
  // still run after these. A no-op where ops run as they are called (the CPU).
  virtual void launch_queued() {}

  // One token per row of logits ([rules.size()][V] in this backend's memory), row r chosen by
  // rules[r] exactly as kernels::choose_token would (token_choice.h); only the ids come back, to
  // host_ids[rules.size()] (-1 for a row whose rule says skip). It waits for the ops before it
  // like download() and, like download(), ends a recorded step's recording: it runs after the
  // recorded ops, outside the graph, so the rules may change from step to step.
  virtual void choose_tokens(const float* logits, int64_t V, std::span<const TokenRule> rules,
                             int32_t* host_ids) = 0;

  // The element type of KV caches in this backend's memory (KvPool sizes its blocks by it,
  // KvLayerView carries it): F32 on the CPU; BF16 on CUDA, whose attention kernels round every
  // key and value to BF16 (nearest-even) before the tensor cores anyway, so a cache stored
  // already rounded gives the same bits with half the bytes.
  virtual DType kv_dtype() const = 0;

  // A weight as this backend computes with it: the CPU uses the checkpoint's (mapped) bytes in
  // place, plus its panel layout of 4/8-bit weights (kernels/cpu/quant_panels.h); CUDA keeps a
  // device copy (BF16) owned by the backend for its lifetime.
  virtual Weight place(const Weight& host) = 0;
  // A row-parallel weight (o_proj, down_proj, the Gated DeltaNet's out_proj: the linears whose K a
  // tensor-parallel split would cut), placed as place() does. The CUDA backend under
  // LOCKSTEP_CUDA_TP_EMULATE=R also cuts it into R ranks' shards and runs its linears as the ranks
  // would (cuda_ops.h: linear_row_parallel), bitwise the same.
  virtual Weight place_row_parallel(const Weight& host) { return place(host); }
  // A column-parallel weight (q/k/v, gate/up, the lm_head: split by output rows), likewise; under
  // the emulation each rank computes its rows (cuda_ops.h: linear_column_parallel).
  virtual Weight place_column_parallel(const Weight& host) { return place(host); }
  // A weight only ever read by row lookup (kernels::embedding: an untied embedding table): what
  // place() gives by default; the CPU keeps the checkpoint's layout (its panels serve linears).
  virtual Weight place_table(const Weight& host) { return place(host); }

  template <typename T>
  DeviceArray<T> array(int64_t n) { return DeviceArray<T>(this, n); }
  template <typename T>
  DeviceArray<T> upload(std::span<const T> host) {
    DeviceArray<T> a(this, static_cast<int64_t>(host.size()));
    if (!host.empty()) upload(a.data(), host.data(), host.size() * sizeof(T));
    return a;
  }
  template <typename T>
  DeviceArray<T> upload(const std::vector<T>& host) { return upload(std::span<const T>(host)); }
  template <typename T>
  std::vector<T> download(const T* src, int64_t n) {
    std::vector<T> out(n);
    if (n > 0) download(out.data(), src, n * sizeof(T));
    return out;
  }

  // Ops: as kernels/ops.h, every pointer in this backend's memory.
  virtual void linear(const float* x, int64_t M, const Weight& w, const float* bias, float* y) = 0;
  // Several weights against the same x (kernels::linear_multi): each y bitwise equal to a separate
  // linear() call on this backend; the CPU does them in one pool call over the union of rows,
  // CUDA in one launch per group of weights with the same split-K count (q/k/v: one launch).
  virtual void linear_multi(const float* x, int64_t M, std::span<const LinearOut> outs) = 0;
  // Products with their own inputs (kernels::linear_grouped: the experts of an MoE layer), each y
  // bitwise a separate linear() call; the CPU does them in one pool call, CUDA one launch each.
  virtual void linear_grouped(std::span<const LinearJob> jobs) = 0;
  // ids were range-checked by the caller.
  virtual void embedding(const Weight& table, const int32_t* ids, int64_t n, float* out) = 0;
  virtual void rms_norm(const float* x, int64_t M, int64_t D, const float* w, float eps,
                        bool zero_centered, float* y) = 0;
  virtual void rope(float* x, int64_t M, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                    const float* cos_sin) = 0;
  virtual void silu_mul(const float* gate, const float* up, float* out, int64_t n) = 0;
  // Ops only some families use (Gemma). A backend without them throws naming the op, so a
  // model that needs them fails at its first forward instead of computing something else.
  // out = gelu_tanh(gate) * up (kernels::gelu_tanh_mul).
  virtual void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n);
  // x *= s elementwise (Gemma's embedding scale).
  virtual void scale(float* x, int64_t n, float s);
  // x = cap * tanh(x / cap) elementwise (final-logit soft-capping; kernels::softcap_f32).
  virtual void softcap(float* x, int64_t n, float cap);
  virtual void add(float* x, const float* delta, int64_t n) = 0;  // x += delta
  // The residual add and the next norm in one op: x += delta ([M][D]), then
  // y = rms_norm(x, M, D, w, eps, zero_centered): bitwise add() then rms_norm().
  virtual void add_rms_norm(float* x, const float* delta, int64_t M, int64_t D, const float* w,
                            float eps, bool zero_centered, float* y) = 0;
  // Bitwise this sequence of ops (the CPU backend runs exactly it; CUDA does it in one launch):
  //   copy_2d(q, head_dim, q_in, q_in_stride, T * n_heads, head_dim)   when q_in != q
  //   rms_norm(q, T * n_heads, head_dim, q_norm, eps, zero_centered, q)  when q_norm
  //   rms_norm(k, T * n_kv_heads, head_dim, k_norm, ...)                  when k_norm
  //   rope(q, T, n_heads, ...); rope(k, T, n_kv_heads, ...); kv_write(kv, k, v, T, slots)
  virtual void attention_prep(const AttentionPrep& p, const KvLayerView& kv) = 0;
  virtual void sigmoid_mul(float* x, const float* gate, int64_t n) = 0;  // x *= sigmoid(gate)
  // Row t's key and value (kv_dim floats each) into slot slots[t] of the layer's cache, converted
  // to kv.dtype (kv_dtype(); BF16: round to nearest even).
  virtual void kv_write(const KvLayerView& kv, const float* k, const float* v, int64_t T,
                        const int32_t* slots) = 0;
  virtual void attention(const float* q, int64_t T, const AttentionBatch& rows, int64_t n_heads,
                         const KvLayerView& kv, float scale, float* out) = 0;
  // A mixture-of-experts token's output from its k expert outputs, in one fixed order: row t of
  // out (D floats) = sum over rank j = 0..k-1 of weights[t][j] * expert_out[r(t * k + j)] (each
  // product and each sum rounded separately, j ascending), then, when `shared` is not null,
  // + sigmoid(shared_gate[t]) * shared[t] (the shared expert; shared_gate [T]). r(i) = rows[i]
  // (the grouped row of assignment i: moe_group's slot), or i when rows is null.
  virtual void moe_combine(const float* expert_out, const int32_t* rows, const float* weights,
                           int64_t T, int64_t k, int64_t D, const float* shared,
                           const float* shared_gate, float* out) = 0;
  // out[i] = x[rows[i]] (rows of D floats).
  virtual void gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t D,
                           float* out) = 0;
  // dst[r][0..cols) = src[r][0..cols) for r < rows; strides in floats.
  virtual void copy_2d(float* dst, int64_t dst_stride, const float* src, int64_t src_stride,
                       int64_t rows, int64_t cols) = 0;
  // Every span's bytes from its src to its dst (plain copies; no two spans' dst may overlap).
  // `spans` [n] is in the backend's memory, so the addresses are data, not arguments: a recorded
  // step can copy into per-sequence buffers (rollback data) whichever sequences the batch holds,
  // as deltanet_step's spans name their states. max_bytes >= every span's bytes (a launch bound).
  virtual void copy_spans(const CopySpan* spans, int64_t n, int64_t max_bytes) = 0;

  // Mixture of experts on the device (models/moe_layer.cpp). A backend that routes, groups and
  // runs a layer's experts from device memory (CUDA) does a small MoE call (T <=
  // kMoeDeviceMaxTokens) with no host read and no routing-dependent launch, so the step can be
  // recorded; the others keep host routing (route_tokens) and linear_grouped. The bits are the
  // same either way: moe_route is route_tokens, moe_group is the host's grouping, and
  // linear_experts is, row for row, the per-expert linear().
  // True when this backend runs moe_route / moe_group / linear_experts on these expert weights
  // (all of one shape and format). The default: false, and the three ops below throw.
  virtual bool moe_on_device(std::span<const Weight* const> /*w*/) const { return false; }
  // experts / weights [T][k] from router logits [T][E] (backend memory), bitwise
  // route_tokens(logits, T, E, k, normalize) (models/moe_routing.h); expert_scale [E] (null:
  // none) then multiplies each weight by its expert's scale (Gemma 4's per_expert_scale).
  virtual void moe_route(const float* logits, int64_t T, int64_t E, int64_t k, bool normalize,
                         const float* expert_scale, int32_t* experts, float* weights);
  // The host's group_by_expert on the device: source [T * k] (grouped row -> token), slot
  // [T * k] (assignment t * k + j -> grouped row), groups [moe_groups_size(T, k, E, shared)]:
  // [0] = the active experts, then (expert, first grouped row, rows) for each, in expert order.
  // shared: the table ends with (E, T k, T), a shared expert over every token, its grouped row
  // T k + t being token t (source [T k + T]), so it runs in the routed experts' launches.
  virtual void moe_group(const int32_t* experts, int64_t T, int64_t k, int64_t E, bool shared,
                         int32_t* source, int32_t* slot, int32_t* groups);
  // moe_route then moe_group (the default: the two calls); a backend may do both in one launch.
  virtual void moe_route_group(const float* logits, int64_t T, int64_t E, int64_t k,
                               bool normalize, const float* expert_scale, bool shared,
                               int32_t* experts, float* weights, int32_t* source, int32_t* slot,
                               int32_t* groups);
  // For each active expert e of `groups` and p < P: rows [first, first + rows) of y[p] ([n][N])
  // = those rows of x ([n][K]) times w[e * P + p], bitwise linear() of those rows alone. With
  // x_rows ([n]: moe_group's source), grouped row i of x is x's row x_rows[i] (x then [T][K], the
  // tokens themselves: no gathered copy). T: at least the most rows any one expert has (the
  // call's tokens bound it; a host that grouped the rows passes the real maximum, so a prefill
  // chunk's launch is not sized for all its tokens on every expert); n: the grouped rows (tokens
  // times k).
  virtual void linear_experts(std::span<const Weight* const> w, int64_t P, const float* x,
                              const int32_t* x_rows, std::span<float* const> y,
                              const int32_t* groups, int64_t T, int64_t n);

  // Gated DeltaNet: every span's tokens, in order, through the per-token step of
  // kernels/gated_delta.h (conv + SiLU, l2-normalised q/k, gates, the delta rule per value head).
  // inputs: [T][token_inputs]; core [T][value_dim] gets the head outputs (null: state only, for
  // rollback replay). `spans` [n_spans] is in the backend's memory (a forward uploads every
  // layer's spans at once: an upload in the middle of a forward would stall the GPU queue);
  // max_span_tokens >= every span's n. A state's bits never depend on how its tokens were split
  // into calls or on the other spans.
  virtual void deltanet_step(const DeltaNetShape& s, const float* conv_w, const float* A_log,
                             const float* dt_bias, const float* inputs, int64_t T,
                             const DeltaNetSpan* spans, int64_t n_spans, int64_t max_span_tokens,
                             float* core) = 0;
  // deltanet_step (core not null), then gated_rms_norm(core, z, T * nv, dv, norm_w, eps, core):
  // the head outputs normalised and gated in place. The default: the two calls; a backend may do
  // both in one launch.
  virtual void deltanet_step_norm(const DeltaNetShape& s, const float* conv_w, const float* A_log,
                                  const float* dt_bias, const float* inputs, int64_t T,
                                  const DeltaNetSpan* spans, int64_t n_spans,
                                  int64_t max_span_tokens, const float* z, const float* norm_w,
                                  float eps, float* core);
  // Qwen3-Next's fused input projections regrouped into the layout deltanet_step reads: qkvz
  // [T][nk][q dk | k dk | v r dv | z r dv] and ba [T][nk][b r | a r] (r = nv / nk value heads per
  // key head) into inputs [T][q | k | v | a | b] (token_inputs() wide) and z [T][value_dim()].
  // Plain copies. The default is one copy_2d per group and block (6 nk of them); CUDA does it in
  // one launch.
  virtual void deltanet_regroup(const DeltaNetShape& s, const float* qkvz, const float* ba,
                                int64_t T, float* inputs, float* z);
  // y = x / rms(x) * w * silu(z) per row of D (kernels::gated_rms_norm).
  virtual void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t D,
                              const float* w, float eps, float* y) = 0;
};

// The CPU backend over `threads` (ThreadPool::global() when null).
std::unique_ptr<Backend> make_cpu_backend(ThreadPool* threads = nullptr);
// The CUDA backend on the first GPU; throws lockstep::Error saying why when there is none or the
// binary was built without CUDA.
std::unique_ptr<Backend> make_cuda_backend(ThreadPool* threads = nullptr);
std::unique_ptr<Backend> make_backend(Device d, ThreadPool* threads = nullptr);

template <typename T>
DeviceArray<T>::DeviceArray(Backend* backend, int64_t n) : backend_(backend), n_(n) {
  if (n > 0) data_ = static_cast<T*>(backend->allocate(static_cast<size_t>(n) * sizeof(T)));
}
template <typename T>
DeviceArray<T>::~DeviceArray() {
  if (data_) backend_->release(data_);
}

}  // namespace lockstep::kernels
