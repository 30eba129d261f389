// The CUDA backend: kernels::Backend over kernels/cuda/cuda_ops.h. Weights are placed on the GPU
// as BF16 (F32/F16 rounded), except 4/8-bit affine ones, which stay quantized (codes plus 4-byte
// scale/bias pairs, kernels/quant_gpu_layout.h; each element means the BF16 value of its
// dequantization: the bits of a BF16 placement at 1/2 or 1/4 of the memory; H200 Qwen3-8B decode
// 198 tok/s at 4 bits, 177 at 8, 209 at BF16; LOCKSTEP_CUDA_QUANT=0 dequantizes them instead).
// Activations stay FP32 between ops. Scratch arrays come from a caching allocator (no cudaMalloc
// or cudaFree, which synchronizes, after the first calls); all ops run in order on one stream, so
// reusing a released array needs no events.
//
// Decode steps are replayed from CUDA graphs (begin_step / end_step, backend.h): a step runs
// normally the first time its key is seen (which also grows the kernels' scratch buffers), is
// recorded the second time and replayed after that. Inside a step, arrays come from a bump arena
// and uploads are staged in pinned host memory at bump offsets, so a replay of the same key sees
// the same addresses; every op hashes its arguments, and a replay that does not call exactly the
// recorded ops is an internal error (the graph is dropped, never silently misused).
//
// LOCKSTEP_CUDA_PROFILE=1 times every op on the GPU (OpProfile, cuda_op_profile.h; graphs off) and prints a
// table per kind of step to stderr when the backend is destroyed. Kernels use programmatic
// dependent launch (kernels/cuda/common.cuh: a kernel's launch and weight prefetch overlap the
// previous one's tail; scheduling only, the same bits); LOCKSTEP_CUDA_PDL=0 turns it off, and
// profiled ops run without it. LOCKSTEP_CUDA_GRAPH_STATS=1 prints each recorded graph's nodes,
// edges and PDL edges, and at exit how many steps of each key ran eagerly, recorded, replayed,
// and where a replayed step's time went (host walk, GPU, period: cuda_step_timing.h).
#ifdef LOCKSTEP_HAVE_CUDA

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/file_mappings.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda_host_rows.h"
#include "kernels/cuda_op_profile.h"
#include "kernels/cuda_step_timing.h"
#include "kernels/cuda_tp_emulation.h"
#include "kernels/numerics.h"
#include "kernels/quant_format.h"
#include "kernels/quant_gpu_layout.h"

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

// Arguments of an op folded into one number (pointers by address), to check a replay against its
// recording.
struct Trace {
  uint64_t h = 1469598103934665603ull;
  Trace& operator<<(uint64_t v) {
    h = (h ^ v) * 1099511628211ull;
    h ^= h >> 29;
    return *this;
  }
  Trace& operator<<(const void* p) { return *this << reinterpret_cast<uint64_t>(p); }
  Trace& operator<<(int64_t v) { return *this << static_cast<uint64_t>(v); }
  Trace& operator<<(int v) { return *this << static_cast<uint64_t>(v); }
  Trace& operator<<(float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    return *this << static_cast<uint64_t>(b);
  }
  Trace& operator<<(const Weight& w) { return *this << w.data << w.rows << w.cols << w.k_pieces; }
};

std::string shape_name(const char* op, const Weight& w) {
  return std::string(op) + " " + std::to_string(w.rows) + "x" + std::to_string(w.cols);
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(ThreadPool* threads)
      : threads_(threads ? threads : &ThreadPool::global()) {
    std::string why;
    if (!cuda::available(&why)) fail("--device cuda: ", why);
    name_ = cuda::describe_device();
    // LOCKSTEP_CUDA_GRAPHS=0 runs every step eagerly (to measure what graphs save).
    const char* g = std::getenv("LOCKSTEP_CUDA_GRAPHS");
    graphs_enabled_ = !(g && std::string(g) == "0");
    // 4/8-bit weights stay quantized on the GPU (place_quantized: the same results, 1/2 or 1/4
    // of the memory, a little slower decode); LOCKSTEP_CUDA_QUANT=0 dequantizes them to BF16 when
    // placed (what a user with the memory to spare may want for speed).
    const char* q = std::getenv("LOCKSTEP_CUDA_QUANT");
    quant_on_gpu_ = !(q && std::string(q) == "0");
    // LOCKSTEP_CUDA_MOE_DEVICE=0: MoE layers route on the host (moe_on_device false).
    const char* moe = std::getenv("LOCKSTEP_CUDA_MOE_DEVICE");
    moe_device_enabled_ = !(moe && std::string(moe) == "0");
    // LOCKSTEP_CUDA_TP_EMULATE=R: row- and column-parallel weights run as R tensor-parallel ranks
    // would run them, one rank after another on this GPU (cuda_tp_emulation.h).
    tp_ = TensorParallelEmulation::from_env();
    const char* stats = std::getenv("LOCKSTEP_CUDA_GRAPH_STATS");
    tally_wanted_ = stats && *stats && std::string(stats) != "0";
    if (tally_wanted_) timing_ = std::make_unique<StepTiming>();
    if (OpProfile::wanted()) {  // times ops one by one: eager only
      prof_ = std::make_unique<OpProfile>();
      graphs_enabled_ = false;
    }
  }
  ~CudaBackend() override {
    prof_.reset();  // prints its table
    timing_.reset();  // prints its figures
    for (const auto& [key, t] : tally_)
      std::fprintf(stderr, "lockstep cuda steps %s: %lld eager, %lld recorded, %lld replayed\n",
                   key.empty() ? "(no key)" : key.c_str(), static_cast<long long>(t.eager),
                   static_cast<long long>(t.recorded), static_cast<long long>(t.replayed));
    cuda::synchronize();
    drop_graphs();
    if (arena_) cuda::free_device(arena_);
    if (staging_) cuda::free_pinned(staging_);
    for (auto& [size, list] : free_)
      for (void* p : list) cuda::free_device(p);
    for (void* p : weights_) cuda::free_device(p);
    for (auto& [data, table] : expert_tables_) cuda::free_expert_table(table);
  }

  Device device() const override { return Device::Cuda; }
  std::string describe() const override { return "cuda: " + name_; }
  ThreadPool& threads() override { return *threads_; }

  void* allocate(size_t bytes, bool /*lazy*/) override {
    if (mode_ != Mode::Eager) return arena_take(bytes);
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
    if (in_arena(p)) {  // a step's arrays die with the step, or earlier when released in order
      if (mode_ != Mode::Eager) arena_release(p);
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sizes_.find(p);
    LOCKSTEP_CHECK(it != sizes_.end(), "release of memory this backend did not allocate");
    free_[it->second].push_back(p);
    sizes_.erase(it);
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    if (prof_) prof_->release();  // a pageable copy may wait for the stream
    if (mode_ == Mode::Eager) return cuda::upload(dst, src, bytes);
    // Staged: the recorded copy reads the pinned bytes when the graph runs.
    char* staged = staging_take(bytes);
    std::memcpy(staged, src, bytes);
    if (skip(Trace() << 1 << dst << staged << static_cast<int64_t>(bytes))) return;
    cuda::upload(dst, staged, bytes);
  }
  void download(void* dst, const void* src, size_t bytes) override {
    if (mode_ != Mode::Eager) run_recording();
    if (prof_) prof_->release();
    cuda::download(dst, src, bytes);
    if (prof_) prof_->flush();
  }
  void launch_queued() override {
    if (mode_ != Mode::Eager) run_recording();  // eager ops are already on the stream
  }
  // After the recorded ops, outside the graph (its rules change every step): the recording
  // is run first, as download() does.
  void choose_tokens(const float* logits, int64_t V, std::span<const TokenRule> rules,
                     int32_t* host_ids) override {
    if (mode_ != Mode::Eager) run_recording();
    if (prof_) prof_->release();
    cuda::choose_tokens(logits, V, rules, host_ids);
    if (prof_) prof_->flush();
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (skip(Trace() << 2 << dst << src << static_cast<int64_t>(bytes))) return;
    OpScope t(prof_.get(), "copy");
    cuda::copy(dst, src, bytes);
  }
  // The addresses are in `spans` (device memory, uploaded by the step): only the table's own
  // address is an argument, so a replay serves whichever sequences the batch holds.
  void copy_spans(const CopySpan* spans, int64_t n, int64_t max_bytes) override {
    if (n <= 0 || skip(Trace() << 28 << spans << n << max_bytes)) return;
    OpScope t(prof_.get(), "copy_spans");
    cuda::copy_spans(spans, n, max_bytes);
  }

  void begin_step(const std::string& key) override {
    LOCKSTEP_CHECK(mode_ == Mode::Eager, "nested begin_step");
    if (prof_) prof_->begin_step(key);
    StepTally* tally = tally_wanted_ ? &tally_[key] : nullptr;
    if (key.empty() || !graphs_enabled_) {
      if (timing_) timing_->other_step();
      if (tally) ++tally->eager;
      return;
    }
    if (graph_generation_ != cuda::scratch_generation()) drop_graphs();  // stale addresses
    // A server's batches come in many shapes; bound what the recordings hold.
    if (graphs_.size() >= kMaxGraphs && !graphs_.count(key)) drop_graphs();
    Graph& g = graphs_[key];
    arena_used_ = staging_used_ = 0;
    arena_stack_.clear();
    pos_ = 0;
    launched_ = false;
    if (tally) ++(g.exec ? tally->replayed : g.seen == 0 ? tally->eager : tally->recorded);
    if (timing_) g.exec ? timing_->begin(key) : timing_->other_step();
    if (g.exec) {
      mode_ = Mode::Replay;
    } else if (g.seen++ == 0) {
      return;  // first time: run eagerly (and let scratch buffers grow to this step's sizes)
    } else {
      ensure_arena();
      g.trace.clear();
      mode_ = Mode::Capture;
      cuda::begin_capture();
    }
    current_ = &g;
    key_ = key;
  }
  void end_step(bool completed) override {
    if (prof_) {
      prof_->release();
      prof_->end_step();
    }
    // A step with no download (a prefill chunk that wants no logits) has recorded or skipped
    // all its ops by now: run them, and wait, because the next step rewrites the pinned staging
    // area that this graph's uploads read when they execute.
    if (completed && mode_ != Mode::Eager && !launched_) {
      run_recording();
      cuda::synchronize();
    }
    if (mode_ == Mode::Capture) {  // the step failed part-way through its recording
      cuda::abort_capture();
      graphs_.erase(key_);
    } else if (mode_ == Mode::Replay && !launched_) {
      graphs_.erase(key_);  // failed part-way: forget this recording
    }
    if (timing_) timing_->end();
    mode_ = Mode::Eager;
    current_ = nullptr;
  }

  // BF16: the attention kernels round keys and values to BF16 anyway (cuda_ops.h).
  DType kv_dtype() const override { return cuda::kKvDtype; }

  Weight place(const Weight& host) override {
    if (!host.data) return host;
    if (prof_) prof_->release();
    auto found = placed_.find(host.data);  // tied embeddings / lm_head share one copy
    if (found != placed_.end()) return found->second;
    // Weights the fused quantized kernel cannot take (F32 scales; 4-bit rows or pieces that are
    // not 16-byte aligned) would be dequantized on every call: BF16 serves them better.
    if (host.quant != QuantFormat::None && quant_on_gpu_ && cuda::linear_quant_fused(host))
      return placed_[host.data] = place_quantized(host);
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
      for_bf16_row_blocks(host, *threads_, [&](int64_t r0, int64_t n, const uint16_t* rows) {
        cuda::upload(static_cast<uint16_t*>(dev) + r0 * host.cols, rows,
                     static_cast<size_t>(n * host.cols) * 2);
        cuda::synchronize();  // the rows' buffer is reused
      });
    }
    // Float weights are views of the mapped checkpoint; quantized ones may be heap copies made by
    // --quantize, whose pages must not be dropped (anonymous memory would read back as zeros).
    // The checkpoint's pages, now on the GPU: unmapped so host memory holds no second copy of
    // the model (core/file_mappings.h: file pages only; a later read maps them again).
    if (host.quant == QuantFormat::None)
      release_file_pages(host.data, static_cast<size_t>(host.bytes()));
    w.data = dev;
    placed_[host.data] = w;
    return w;
  }

  // Placed as place() does; under the tensor-parallel emulation also cut into the ranks' shards,
  // which linear() then runs instead (a weight placed before keeps its first placement).
  Weight place_row_parallel(const Weight& host) override {
    if (!tp_ || !host.data) return place(host);
    if (auto found = placed_.find(host.data); found != placed_.end()) return found->second;
    return tp_->place_row_parallel(host, *threads_, [this](const Weight& h) { return place(h); });
  }
  Weight place_column_parallel(const Weight& host) override {
    const Weight w = place(host);
    if (tp_ && host.data) tp_->add_column_parallel(w);
    return w;
  }

  // A 4/8-bit weight stays quantized: its codes uploaded as stored, its scales and biases as one
  // pair per row group (quant_gpu_layout.h), packed on the host threads in row blocks. The kernels
  // rebuild each element as f32_to_bf16(fma(q, s, b)), the value the BF16 placement above
  // uploads, so every result is unchanged; decode reads about 1/2 (8-bit) or 1/4 (4-bit) of the
  // bytes. The host pages are kept: --quantize makes heap copies (anonymous memory would read
  // back as zeros if dropped).
  Weight place_quantized(const Weight& host) {
    check_quant_layout(host, "CUDA backend");
    Weight w = host;  // shape, bits, group size, scale dtype
    const int64_t code_bytes = gpu_code_bytes(host), pair_bytes = gpu_pair_bytes(host);
    void* codes = cuda::malloc_device(static_cast<size_t>(code_bytes));
    weights_.push_back(codes);
    auto* pairs = static_cast<uint8_t*>(cuda::malloc_device(static_cast<size_t>(pair_bytes)));
    weights_.push_back(pairs);
    cuda::upload(codes, host.data, static_cast<size_t>(code_bytes));
    const int64_t row_pair = pair_bytes / host.rows;
    const int64_t rows_per = std::max<int64_t>(1, (int64_t{16} << 20) / row_pair);
    std::vector<uint8_t> buf;
    for (int64_t r0 = 0; r0 < host.rows; r0 += rows_per) {
      const int64_t n = std::min(rows_per, host.rows - r0);
      buf.resize(static_cast<size_t>(n * row_pair));
      threads_->parallel_for(n, [&](int64_t a, int64_t b) {
        pack_gpu_pairs(host, r0 + a, r0 + b, buf.data() + a * row_pair);
      });
      cuda::upload(pairs + r0 * row_pair, buf.data(), buf.size());
      cuda::synchronize();  // buf is reused
    }
    w.data = codes;
    w.scales = pairs;
    w.biases = nullptr;  // in the pairs
    // M > 64 dequantizes into a BF16 copy: its buffer is sized here, never inside a step.
    cuda::reserve_dequant_scratch(host.rows * host.cols);
    if (!quant_noted_) {
      quant_noted_ = true;
      std::fprintf(stderr,
                   "cuda: 4/8-bit weights stay quantized on the GPU (codes + scale/bias pairs, "
                   "results bitwise the BF16 dequantization; LOCKSTEP_CUDA_QUANT=0 places them as "
                   "BF16)\n");
    }
    return w;
  }

  void linear(const float* x, int64_t M, const Weight& w, const float* bias, float* y) override {
    // fast: cuBLAS (its kernel, and so its reduction order, depends on M: for measuring what
    // exactness costs, not for keeping the promise).
    const bool fast = numerics() == Numerics::Fast;
    if (M <= 0 || skip(Trace() << (fast ? 24 : 10) << x << M << w << bias << y)) return;
    OpScope t(prof_.get(), prof_ ? shape_name(fast ? "linear (cuBLAS)" : "linear", w) : "");
    if (fast && w.quant == QuantFormat::None) {  // cuBLAS takes BF16 weights only
      if (!fast_checked_) {
        std::string why;
        if (!cuda::linear_fast_available(&why)) fail("--numerics fast on cuda: ", why);
        fast_checked_ = true;
      }
      cuda::linear_fast(x, M, w, bias, y);
      return;
    }
    if (tp_ && tp_->linear(x, M, w, bias, y)) return;
    cuda::linear(x, M, w, bias, y);
  }
  // Weights of the same split count in one launch (cuda::linear_multi); fast: one cuBLAS call each.
  void linear_multi(const float* x, int64_t M, std::span<const LinearOut> outs) override {
    // fast, and tensor-parallel emulation (each weight by its ranks): one linear() each, whose
    // bits linear_multi keeps.
    if (numerics() == Numerics::Fast || tp_) {
      for (const LinearOut& o : outs) linear(x, M, *o.w, o.bias, o.y);
      return;
    }
    if (M <= 0 || outs.empty()) return;
    Trace tr;
    tr << 25 << x << M;
    for (const LinearOut& o : outs) tr << *o.w << o.bias << o.y;
    if (skip(tr)) return;
    std::string name;
    if (prof_) {
      name = "linear_multi ";
      for (const LinearOut& o : outs) {
        if (&o != outs.data()) name += '+';
        name += std::to_string(o.w->rows);
      }
      name += 'x';
      name += std::to_string(outs[0].w->cols);
    }
    OpScope t(prof_.get(), name);
    cuda::linear_multi(x, M, outs.data(), static_cast<int64_t>(outs.size()));
  }
  void embedding(const Weight& table, const int32_t* ids, int64_t n, float* out) override {
    if (skip(Trace() << 11 << table << ids << n << out)) return;
    OpScope t(prof_.get(), "embedding");
    if (table.quant != QuantFormat::None) return cuda::embedding_quant(table, ids, n, out);
    cuda::embedding(table, ids, n, out);
  }
  void rms_norm(const float* x, int64_t M, int64_t D, const float* w, float eps,
                bool zero_centered, float* y) override {
    if (skip(Trace() << 12 << x << M << D << w << eps << static_cast<int64_t>(zero_centered) << y))
      return;
    OpScope t(prof_.get(), "rms_norm");
    cuda::rms_norm(x, M, D, w, eps, zero_centered, y);
  }
  void rope(float* x, int64_t M, int64_t heads, int64_t head_dim, int64_t rotary_dim,
            const float* cos_sin) override {
    if (skip(Trace() << 13 << x << M << heads << head_dim << rotary_dim << cos_sin)) return;
    OpScope t(prof_.get(), "rope");
    cuda::rope(x, M, heads, head_dim, rotary_dim, cos_sin);
  }
  void silu_mul(const float* gate, const float* up, float* out, int64_t n) override {
    if (skip(Trace() << 14 << gate << up << out << n)) return;
    OpScope t(prof_.get(), "silu_mul");
    cuda::silu_mul(gate, up, out, n);
  }
  void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) override {
    if (skip(Trace() << 30 << gate << up << out << n)) return;
    OpScope t(prof_.get(), "gelu_tanh_mul");
    cuda::gelu_tanh_mul(gate, up, out, n);
  }
  void scale(float* x, int64_t n, float s) override {
    if (skip(Trace() << 31 << x << n << s)) return;
    OpScope t(prof_.get(), "scale");
    cuda::scale(x, n, s);
  }
  void softcap(float* x, int64_t n, float cap) override {
    if (skip(Trace() << 32 << x << n << cap)) return;
    OpScope t(prof_.get(), "softcap");
    cuda::softcap(x, n, cap);
  }
  void add(float* x, const float* delta, int64_t n) override {
    if (skip(Trace() << 15 << x << delta << n)) return;
    OpScope t(prof_.get(), "add");
    cuda::add(x, delta, n);
  }
  void add_rms_norm(float* x, const float* delta, int64_t M, int64_t D, const float* w, float eps,
                    bool zero_centered, float* y) override {
    if (skip(Trace() << 26 << x << delta << M << D << w << eps
                     << static_cast<int64_t>(zero_centered) << y))
      return;
    OpScope t(prof_.get(), "add_rms_norm");
    cuda::add_rms_norm(x, delta, M, D, w, eps, zero_centered, y);
  }
  void attention_prep(const AttentionPrep& p, const KvLayerView& kv) override {
    if (skip(Trace() << 27 << p.q_in << p.q_in_stride << p.q << p.k << p.v << p.T << p.n_heads
                     << p.q_norm << p.k_norm << p.eps << static_cast<int64_t>(p.zero_centered)
                     << p.rotary_dim << p.cos_sin << p.slots << kv.k << kv.v << kv.n_kv_heads
                     << kv.head_dim))
      return;
    OpScope t(prof_.get(), "attention_prep");
    cuda::attention_prep(p, kv);
  }
  void sigmoid_mul(float* x, const float* gate, int64_t n) override {
    if (skip(Trace() << 17 << x << gate << n)) return;
    OpScope t(prof_.get(), "sigmoid_mul");
    cuda::sigmoid_mul(x, gate, n);
  }
  void kv_write(const KvLayerView& kv, const float* k, const float* v, int64_t T,
                const int32_t* slots) override {
    if (kv.dtype != cuda::kKvDtype) fail("CUDA kv_write: the KV cache must be BF16");
    if (skip(Trace() << 18 << kv.k << kv.v << k << v << T << slots)) return;
    OpScope t(prof_.get(), "kv_write");
    cuda::kv_write(k, v, T, kv.n_kv_heads * kv.head_dim, slots, const_cast<void*>(kv.k),
                   const_cast<void*>(kv.v));
  }
  void attention(const float* q, int64_t T, const AttentionBatch& rows, int64_t n_heads,
                 const KvLayerView& kv, float scale, float* out) override {
    if (skip(Trace() << 19 << q << T << rows.block_tables << rows.table_stride << rows.n_keys
                     << rows.max_keys << n_heads << kv.k << kv.v << kv.block_tokens << scale
                     << out << rows.window << rows.short_rows << rows.short_rows_per_item
                     << rows.long_items))
      return;
    OpScope t(prof_.get(), "attention");
    // Decode rows (and verify blocks) first, in a launch shaped for one item per block; then each
    // prefill chunk in a walk of its own (a walk block straddling two sequences would take its
    // rows one at a time). Rows are independent: the parts change no bits.
    const int64_t row = n_heads * kv.head_dim;
    auto run = [&](int64_t first, int64_t n, int64_t per_item) {
      if (n <= 0) return;
      cuda::attention(q + first * row, n, rows.block_tables + first * rows.table_stride,
                      rows.table_stride, rows.n_keys + first, rows.max_keys, n_heads, kv, scale,
                      out + first * row, rows.window, per_item);
    };
    int64_t at = std::min(rows.short_rows, T);
    run(0, at, rows.short_rows_per_item);
    for (int i = 0; i < rows.long_items && at < T; ++i) {
      const int64_t n = std::min<int64_t>(rows.long_item_rows[i], T - at);
      run(at, n, 0);
      at += n;
    }
    run(at, T - at, 0);
  }
  void linear_grouped(std::span<const LinearJob> jobs) override {
    for (const LinearJob& j : jobs) linear(j.x, j.M, *j.w, j.bias, j.y);
  }
  void moe_combine(const float* expert_out, const int32_t* rows, const float* weights, int64_t T,
                   int64_t k, int64_t D, const float* shared, const float* shared_gate,
                   float* out) override {
    if (skip(Trace() << 29 << expert_out << rows << weights << T << k << D << shared
                     << shared_gate << out))
      return;
    OpScope t(prof_.get(), "moe_combine");
    cuda::moe_combine(expert_out, rows, weights, T, k, D, shared, shared_gate, out);
  }
  // MoE on the device (backend.h). LOCKSTEP_CUDA_MOE_DEVICE=0 keeps host routing and one launch
  // per expert projection (the same bits; for an A/B of the two paths).
  bool moe_on_device(std::span<const Weight* const> w) const override {
    if (!moe_device_enabled_ || w.empty()) return false;
    for (const Weight* x : w)
      if (!cuda::linear_experts_supported(*x) || !cuda::same_expert_format(*x, *w[0])) return false;
    return true;
  }
  void moe_route(const float* logits, int64_t T, int64_t E, int64_t k, bool normalize,
                 const float* expert_scale, int32_t* experts, float* weights) override {
    if (skip(Trace() << 40 << logits << T << E << k << static_cast<int64_t>(normalize)
                     << expert_scale << experts << weights))
      return;
    OpScope t(prof_.get(), "moe_route");
    cuda::moe_route(logits, T, E, k, normalize, expert_scale, experts, weights);
  }
  void moe_group(const int32_t* experts, int64_t T, int64_t k, int64_t E, bool shared,
                 int32_t* source, int32_t* slot, int32_t* groups) override {
    if (skip(Trace() << 41 << experts << T << k << E << static_cast<int64_t>(shared) << source
                     << slot << groups))
      return;
    OpScope t(prof_.get(), "moe_group");
    cuda::moe_group(experts, T, k, E, source, slot, groups, shared);
  }
  void moe_route_group(const float* logits, int64_t T, int64_t E, int64_t k, bool normalize,
                       const float* expert_scale, bool shared, int32_t* experts, float* weights,
                       int32_t* source, int32_t* slot, int32_t* groups) override {
    if (skip(Trace() << 43 << logits << T << E << k << static_cast<int64_t>(normalize)
                     << expert_scale << static_cast<int64_t>(shared) << experts << weights
                     << source << slot << groups))
      return;
    OpScope t(prof_.get(), "moe_route_group");
    cuda::moe_route_group(logits, T, E, k, normalize, expert_scale, experts, weights, source,
                          slot, groups, shared);
  }
  void linear_experts(std::span<const Weight* const> w, int64_t P, const float* x,
                      const int32_t* x_rows, std::span<float* const> y, const int32_t* groups,
                      int64_t T, int64_t n) override {
    if (static_cast<int64_t>(y.size()) != P)
      fail("CUDA linear_experts: ", y.size(), " outputs for ", P, " projections");
    const cuda::ExpertTable& table = expert_table(w, P);
    Trace tr;
    tr << 42 << static_cast<const void*>(table.w) << P << x << x_rows << groups << T << n;
    for (float* yp : y) tr << static_cast<const void*>(yp);
    if (skip(tr)) return;
    OpScope t(prof_.get(), prof_ ? shape_name("linear_experts", table.shape) : "");
    cuda::linear_experts(table, x, x_rows, y.data(), groups, T, n);
  }
  void gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t D,
                   float* out) override {
    if (skip(Trace() << 20 << x << rows << n << D << out)) return;
    OpScope t(prof_.get(), "gather_rows");
    cuda::gather_rows(x, rows, n, D, out);
  }
  void copy_2d(float* dst, int64_t dst_stride, const float* src, int64_t src_stride,
               int64_t rows, int64_t cols) override {
    if (skip(Trace() << 21 << dst << dst_stride << src << src_stride << rows << cols)) return;
    OpScope t(prof_.get(), "copy_2d");
    cuda::copy_2d(dst, dst_stride, src, src_stride, rows, cols);
  }
  void deltanet_regroup(const DeltaNetShape& d, const float* qkvz, const float* ba, int64_t T,
                        float* inputs, float* z) override {
    if (skip(Trace() << 44 << qkvz << ba << T << inputs << z << d.nk << d.nv << d.dk << d.dv))
      return;
    OpScope t(prof_.get(), "deltanet_regroup");
    cuda::deltanet_regroup(d, qkvz, ba, T, inputs, z);
  }
  void deltanet_step(const DeltaNetShape& d, const float* conv_w, const float* A_log,
                     const float* dt_bias, const float* inputs, int64_t T,
                     const DeltaNetSpan* spans, int64_t n_spans, int64_t max_span_tokens,
                     float* core) override {
    if (skip(Trace() << 22 << conv_w << A_log << dt_bias << inputs << T << spans << n_spans
                     << max_span_tokens << core << d.nk << d.nv << d.dk << d.dv << d.K))
      return;
    OpScope t(prof_.get(), "deltanet_step");
    cuda::deltanet_step(d, conv_w, A_log, dt_bias, inputs, T, spans, n_spans, max_span_tokens,
                        core);
  }
  void deltanet_step_norm(const DeltaNetShape& d, const float* conv_w, const float* A_log,
                          const float* dt_bias, const float* inputs, int64_t T,
                          const DeltaNetSpan* spans, int64_t n_spans, int64_t max_span_tokens,
                          const float* z, const float* norm_w, float eps, float* core) override {
    if (skip(Trace() << 45 << conv_w << A_log << dt_bias << inputs << T << spans << n_spans
                     << max_span_tokens << z << norm_w << eps << core << d.nk << d.nv << d.dk
                     << d.dv << d.K))
      return;
    OpScope t(prof_.get(), "deltanet_step_norm");
    const cuda::DeltaNetNorm norm{z, norm_w, eps};
    cuda::deltanet_step(d, conv_w, A_log, dt_bias, inputs, T, spans, n_spans, max_span_tokens,
                        core, &norm);
  }
  void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t D, const float* w,
                      float eps, float* y) override {
    if (skip(Trace() << 23 << x << z << rows << D << w << eps << y)) return;
    OpScope t(prof_.get(), "gated_rms_norm");
    cuda::gated_rms_norm(x, z, rows, D, w, eps, y);
  }

 private:
  enum class Mode { Eager, Capture, Replay };
  struct Graph {
    int seen = 0;           // eager runs so far
    void* exec = nullptr;   // the recording, once made
    std::vector<uint64_t> trace;
  };

  // The device table of an expert set (linear_experts), made at its first use: the first step of
  // any key runs eagerly, so a recording never has to make one (an upload that waits).
  const cuda::ExpertTable& expert_table(std::span<const Weight* const> w, int64_t P) {
    if (w.empty()) fail("CUDA linear_experts: no weights");
    auto it = expert_tables_.find(w[0]->data);
    if (it != expert_tables_.end() && it->second.P == P &&
        it->second.E * P == static_cast<int64_t>(w.size()))
      return it->second;
    if (mode_ != Mode::Eager)
      fail("internal error: linear_experts' weight table was first needed inside a recorded step");
    if (it != expert_tables_.end()) {
      cuda::free_expert_table(it->second);
      expert_tables_.erase(it);
    }
    if (prof_) prof_->release();
    return expert_tables_[w[0]->data] = cuda::make_expert_table(w, P);
  }

  // Capture: note the op (false: run it). Replay: check it against the recording (true: skip).
  bool skip(const Trace& t) {
    if (mode_ == Mode::Eager) return false;
    if (mode_ == Mode::Capture) {
      current_->trace.push_back(t.h);
      return false;
    }
    if (pos_ >= current_->trace.size() || current_->trace[pos_] != t.h) {
      graphs_.erase(key_);
      mode_ = Mode::Eager;
      current_ = nullptr;
      fail("internal error: a replayed CUDA graph step diverged from its recording at op ", pos_);
    }
    ++pos_;
    return true;
  }
  // Ends a capture, then launches the step's graph once (later calls in the step do nothing).
  void run_recording() {
    if (mode_ == Mode::Capture) finish_capture();
    if (mode_ == Mode::Replay && !launched_) {
      if (pos_ != current_->trace.size()) {
        graphs_.erase(key_);
        mode_ = Mode::Eager;
        current_ = nullptr;
        fail("internal error: a replayed CUDA graph step made fewer ops than its recording");
      }
      if (timing_) timing_->before_launch();
      cuda::launch_graph(current_->exec);
      if (timing_) timing_->after_launch();
      launched_ = true;
    }
  }
  void finish_capture() {
    current_->exec = cuda::end_capture();
    graph_generation_ = cuda::scratch_generation();
    mode_ = Mode::Replay;  // recorded, not yet run: the download below launches it
    pos_ = current_->trace.size();
  }
  void drop_graphs() {
    for (auto& [k, g] : graphs_) cuda::destroy_graph(g.exec);
    graphs_.clear();
    graph_generation_ = cuda::scratch_generation();
  }

  // The step arena (device) and staging area (pinned host): bump allocation, reset per step.
  static constexpr size_t kMaxGraphs = 256;
  static constexpr size_t kArenaBytes = size_t{512} << 20, kStagingBytes = size_t{32} << 20;
  void ensure_arena() {
    if (!arena_) arena_ = static_cast<char*>(cuda::malloc_device(kArenaBytes));
    if (!staging_) staging_ = static_cast<char*>(cuda::malloc_pinned(kStagingBytes));
  }
  bool in_arena(const void* p) const {
    return arena_ && p >= arena_ && p < arena_ + kArenaBytes;
  }
  void* arena_take(size_t bytes) {
    const size_t at = (arena_used_ + 255) / 256 * 256;
    if (at + bytes > kArenaBytes)
      fail("a recorded CUDA step needs more than ", kArenaBytes >> 20, " MiB of activations");
    arena_stack_.push_back({at, arena_used_, false});
    arena_used_ = at + bytes;
    return arena_ + at;
  }
  // A step's arrays are released in reverse order of allocation (scoped arrays), so the arena is a
  // stack: the last array's bytes are taken again by the next allocation (a MoE layer's scratch
  // serves every layer instead of growing the step by T * k rows per layer). The step's sequence
  // of allocations and releases is a function of its key, so a replay sees the same addresses;
  // reusing released memory is safe for the reason the eager allocator's reuse is (one stream,
  // ops in order). An array released out of order is marked and popped once it is on top.
  void arena_release(void* p) {
    const size_t at = static_cast<size_t>(static_cast<char*>(p) - arena_);
    for (size_t i = arena_stack_.size(); i-- > 0;)
      if (arena_stack_[i].at == at && !arena_stack_[i].freed) {
        arena_stack_[i].freed = true;
        break;
      }
    while (!arena_stack_.empty() && arena_stack_.back().freed) {
      arena_used_ = arena_stack_.back().before;
      arena_stack_.pop_back();
    }
  }
  char* staging_take(size_t bytes) {
    const size_t at = (staging_used_ + 63) / 64 * 64;
    if (at + bytes > kStagingBytes)
      fail("a recorded CUDA step uploads more than ", kStagingBytes >> 20, " MiB");
    staging_used_ = at + bytes;
    return staging_ + at;
  }

  std::unique_ptr<OpProfile> prof_;  // LOCKSTEP_CUDA_PROFILE
  bool fast_checked_ = false;
  bool quant_on_gpu_ = true;  // LOCKSTEP_CUDA_QUANT=0 turns it off
  bool quant_noted_ = false;   // the stderr note about quantized placement was printed
  bool graphs_enabled_ = true;
  // LOCKSTEP_CUDA_GRAPH_STATS: per key, how its steps ran (printed when the backend goes).
  struct StepTally {
    int64_t eager = 0, recorded = 0, replayed = 0;
  };
  bool tally_wanted_ = false;
  std::map<std::string, StepTally> tally_;
  std::unique_ptr<StepTiming> timing_;  // with the tally: host against GPU time of replays
  Mode mode_ = Mode::Eager;
  std::unordered_map<std::string, Graph> graphs_;
  Graph* current_ = nullptr;
  std::string key_;
  size_t pos_ = 0;
  bool launched_ = false;
  uint64_t graph_generation_ = 0;
  char* arena_ = nullptr;
  char* staging_ = nullptr;
  size_t arena_used_ = 0, staging_used_ = 0;
  struct ArenaEntry {
    size_t at, before;  // the array's offset; arena_used_ before it was taken
    bool freed;
  };
  std::vector<ArenaEntry> arena_stack_;  // the step's live arrays, in allocation order

  ThreadPool* threads_;
  std::string name_;
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  std::unordered_map<void*, size_t> sizes_;
  std::vector<void*> weights_;
  std::unordered_map<const void*, Weight> placed_;
  std::unordered_map<const void*, cuda::ExpertTable> expert_tables_;  // by the first weight's data
  bool moe_device_enabled_ = true;  // LOCKSTEP_CUDA_MOE_DEVICE=0 turns it off
  // LOCKSTEP_CUDA_TP_EMULATE (null: off). Last member: its shards are freed after the destructor
  // body has waited for the GPU.
  std::unique_ptr<TensorParallelEmulation> tp_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(ThreadPool* threads) {
  return std::make_unique<CudaBackend>(threads);
}

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_HAVE_CUDA
