// The CUDA backend: kernels::Backend over kernels/cuda/cuda_ops.h. Weights are placed on the GPU
// as BF16 (F32/F16 checkpoints are rounded to BF16, quantized ones dequantized to BF16: the GPU
// kernels have one weight format so far); activations stay FP32 between ops. Scratch arrays come
// from a caching allocator, so a forward call does no cudaMalloc/cudaFree after the first ones
// (cudaFree would synchronize the device); all ops run in order on one stream, which makes
// reusing a released array safe without events.
//
// Decode steps are replayed from CUDA graphs (begin_step / end_step, backend.h): a step runs
// normally the first time its key is seen (which also grows the kernels' scratch buffers), is
// recorded the second time and replayed after that. Inside a step, arrays come from a bump arena
// and uploads are staged in pinned host memory at bump offsets, so a replay of the same key sees
// the same addresses; every op hashes its arguments, and a replay that does not call exactly the
// recorded ops is an internal error (the graph is dropped, never silently misused).
#ifdef LOCKSTEP_HAVE_CUDA

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
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
  Trace& operator<<(const Weight& w) { return *this << w.data << w.rows << w.cols; }
};

// The checkpoint's pages for [p, p + bytes), once the GPU holds its own copy: dropped, so host
// memory does not keep a second copy of the model (the mapping is read-only and file-backed; a
// page shared with a neighbouring tensor is simply read again if that tensor is used).
void drop_host_pages(const void* p, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
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
    // LOCKSTEP_CUDA_GRAPHS=0 runs every step eagerly (to measure what graphs save).
    const char* g = std::getenv("LOCKSTEP_CUDA_GRAPHS");
    graphs_enabled_ = !(g && std::string(g) == "0");
  }
  ~CudaBackend() override {
    cuda::synchronize();
    drop_graphs();
    if (arena_) cuda::free_device(arena_);
    if (staging_) cuda::free_pinned(staging_);
    for (auto& [size, list] : free_)
      for (void* p : list) cuda::free_device(p);
    for (void* p : weights_) cuda::free_device(p);
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
    if (in_arena(p)) return;  // a step's arrays die with the step
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sizes_.find(p);
    LOCKSTEP_CHECK(it != sizes_.end(), "release of memory this backend did not allocate");
    free_[it->second].push_back(p);
    sizes_.erase(it);
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    if (mode_ == Mode::Eager) return cuda::upload(dst, src, bytes);
    // Staged: the recorded copy reads the pinned bytes when the graph runs.
    char* staged = staging_take(bytes);
    std::memcpy(staged, src, bytes);
    if (skip(Trace() << 1 << dst << staged << static_cast<int64_t>(bytes))) return;
    cuda::upload(dst, staged, bytes);
  }
  void download(void* dst, const void* src, size_t bytes) override {
    if (mode_ != Mode::Eager) run_recording();
    cuda::download(dst, src, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (skip(Trace() << 2 << dst << src << static_cast<int64_t>(bytes))) return;
    cuda::copy(dst, src, bytes);
  }

  void begin_step(const std::string& key) override {
    LOCKSTEP_CHECK(mode_ == Mode::Eager, "nested begin_step");
    if (key.empty() || !graphs_enabled_) return;
    if (graph_generation_ != cuda::scratch_generation()) drop_graphs();  // stale addresses
    // A server's batches come in many shapes; bound what the recordings hold.
    if (graphs_.size() >= kMaxGraphs && !graphs_.count(key)) drop_graphs();
    Graph& g = graphs_[key];
    arena_used_ = staging_used_ = 0;
    pos_ = 0;
    launched_ = false;
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
    mode_ = Mode::Eager;
    current_ = nullptr;
  }

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
    // Float weights are views of the mapped checkpoint; quantized ones may be heap copies made by
    // --quantize, whose pages must not be dropped (anonymous memory would read back as zeros).
    if (host.quant == QuantFormat::None) drop_host_pages(host.data, host.bytes());
    w.data = dev;
    placed_[host.data] = w;
    return w;
  }

  void linear(const float* x, int64_t M, const Weight& w, const float* bias, float* y) override {
    // fast: cuBLAS (its kernel, and so its reduction order, depends on M: for measuring what
    // exactness costs, not for keeping the promise).
    const bool fast = numerics() == Numerics::Fast;
    if (M <= 0 || skip(Trace() << (fast ? 24 : 10) << x << M << w << bias << y)) return;
    if (fast) {
      if (!fast_checked_) {
        std::string why;
        if (!cuda::linear_fast_available(&why)) fail("--numerics fast on cuda: ", why);
        fast_checked_ = true;
      }
      cuda::linear_fast(x, M, w, bias, y);
      return;
    }
    cuda::linear(x, M, w, bias, y);
  }
  // One linear() per weight: each records (or is checked against) its own trace entry.
  void linear_multi(const float* x, int64_t M, std::span<const LinearOut> outs) override {
    for (const LinearOut& o : outs) linear(x, M, *o.w, o.bias, o.y);
  }
  void embedding(const Weight& table, const int32_t* ids, int64_t n, float* out) override {
    if (skip(Trace() << 11 << table << ids << n << out)) return;
    cuda::embedding(table, ids, n, out);
  }
  void rms_norm(const float* x, int64_t M, int64_t D, const float* w, float eps,
                bool zero_centered, float* y) override {
    if (skip(Trace() << 12 << x << M << D << w << eps << static_cast<int64_t>(zero_centered) << y))
      return;
    cuda::rms_norm(x, M, D, w, eps, zero_centered, y);
  }
  void rope(float* x, int64_t M, int64_t heads, int64_t head_dim, int64_t rotary_dim,
            const float* cos_sin) override {
    if (skip(Trace() << 13 << x << M << heads << head_dim << rotary_dim << cos_sin)) return;
    cuda::rope(x, M, heads, head_dim, rotary_dim, cos_sin);
  }
  void silu_mul(const float* gate, const float* up, float* out, int64_t n) override {
    if (skip(Trace() << 14 << gate << up << out << n)) return;
    cuda::silu_mul(gate, up, out, n);
  }
  void add(float* x, const float* delta, int64_t n) override {
    if (skip(Trace() << 15 << x << delta << n)) return;
    cuda::add(x, delta, n);
  }
  void sigmoid_mul(float* x, const float* gate, int64_t n) override {
    if (skip(Trace() << 17 << x << gate << n)) return;
    cuda::sigmoid_mul(x, gate, n);
  }
  void kv_write(const KvLayerView& kv, const float* k, const float* v, int64_t T,
                const int32_t* slots) override {
    if (skip(Trace() << 18 << kv.k << kv.v << k << v << T << slots)) return;
    cuda::kv_write(k, v, T, kv.n_kv_heads * kv.head_dim, slots, const_cast<float*>(kv.k),
                   const_cast<float*>(kv.v));
  }
  void attention(const float* q, int64_t T, const AttentionBatch& rows, int64_t n_heads,
                 const KvLayerView& kv, float scale, float* out) override {
    if (skip(Trace() << 19 << q << T << rows.block_tables << rows.table_stride << rows.n_keys
                     << rows.max_keys << n_heads << kv.k << kv.v << kv.block_tokens << scale
                     << out))
      return;
    cuda::attention(q, T, rows.block_tables, rows.table_stride, rows.n_keys, rows.max_keys,
                    n_heads, kv, scale, out);
  }
  void gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t D,
                   float* out) override {
    if (skip(Trace() << 20 << x << rows << n << D << out)) return;
    cuda::gather_rows(x, rows, n, D, out);
  }
  void copy_2d(float* dst, int64_t dst_stride, const float* src, int64_t src_stride,
               int64_t rows, int64_t cols) override {
    if (skip(Trace() << 21 << dst << dst_stride << src << src_stride << rows << cols)) return;
    cuda::copy_2d(dst, dst_stride, src, src_stride, rows, cols);
  }
  void deltanet_step(const DeltaNetShape& d, const float* conv_w, const float* A_log,
                     const float* dt_bias, const float* inputs, int64_t T,
                     const DeltaNetSpan* spans, int64_t n_spans, int64_t max_span_tokens,
                     float* core) override {
    if (skip(Trace() << 22 << conv_w << A_log << dt_bias << inputs << T << spans << n_spans
                     << max_span_tokens << core << d.nk << d.nv << d.dk << d.dv << d.K))
      return;
    cuda::deltanet_step(d, conv_w, A_log, dt_bias, inputs, T, spans, n_spans, max_span_tokens,
                        core);
  }
  void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t D, const float* w,
                      float eps, float* y) override {
    if (skip(Trace() << 23 << x << z << rows << D << w << eps << y)) return;
    cuda::gated_rms_norm(x, z, rows, D, w, eps, y);
  }

 private:
  enum class Mode { Eager, Capture, Replay };
  struct Graph {
    int seen = 0;           // eager runs so far
    void* exec = nullptr;   // the recording, once made
    std::vector<uint64_t> trace;
  };

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
      cuda::launch_graph(current_->exec);
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
    arena_used_ = at + bytes;
    return arena_ + at;
  }
  char* staging_take(size_t bytes) {
    const size_t at = (staging_used_ + 63) / 64 * 64;
    if (at + bytes > kStagingBytes)
      fail("a recorded CUDA step uploads more than ", kStagingBytes >> 20, " MiB");
    staging_used_ = at + bytes;
    return staging_ + at;
  }

  bool fast_checked_ = false;
  bool graphs_enabled_ = true;
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
