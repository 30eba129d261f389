// Backend::choose_tokens on the GPU: one token per logits row, only the ids cross to the host.
//
// Each row's score for id i is the shared math of kernels/token_choice.h (choice::penalized,
// choice::gumbel_score), compiled here for the device with explicit round-to-nearest intrinsics,
// so it is bitwise the host's. The argmax (higher score, then lower id; NaN scores skipped, the
// first candidate id 0 winning when its own score is NaN, as the host's sequential loop does) is a
// strict total order, so the winner does not depend on how the row is cut into blocks or how the
// blocks' partial winners are merged: the ids are the host's whatever the launch shape, and a
// row's id never depends on the other rows of the call.
//
// A rule's allowed-token mask (TokenRule::allowed) is staged with the rules in the same upload,
// ceil(V / 32) 32-bit words per masked row (about 19 KB for a 150k vocabulary), and read by the
// scan: a forbidden id is scored from the value -inf, exactly what the host's masked copy of the
// row holds for it (token_choice.h), so masked rows are chosen here like any other.
//
// Two launches: choose_partial, grid (chunks of kChunk ids, rows), each block the winner of one
// chunk of one row; choose_final, one warp per row, merging that row's chunk winners.
//
// Rows whose rule needs the sorted filters (top-k / top-p / min-p) are not done here: those rows
// alone are downloaded and chosen on the host by kernels::choose_token (a sort over V has no
// cheap deterministic GPU form yet, and filtered sampling is the rare case).
//
// Graphs: this op runs after a recorded step's graph, never inside it (CudaBackend::choose_tokens
// ends the recording first, as a download does), so its rules and penalty lists may differ from
// step to step. Its device buffer is its own (not detail::scratch, whose growth would invalidate
// every recorded graph).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/token_choice.h"

namespace lockstep::kernels::cuda {

namespace {

using detail::check;

constexpr int kChunk = 4096;   // ids per choose_partial block
constexpr int kThreads = 256;  // threads per choose_partial block

// A rule as the device reads it.
struct DevRule {
  int64_t row;  // logits row
  int64_t position;
  uint64_t seed;
  float temperature;  // <= 0: greedy
  float repetition, presence, frequency;
  int32_t adj_begin, adj_end;  // this row's penalty list in the adjust array
  int64_t mask_begin;          // this row's mask words in the mask array; -1: every id allowed
};

// The device's copy of a rule's scoring parameters (the penalty list goes to its own array).
DevRule dev_rule(const TokenRule& t, int64_t row, int32_t adj_begin, int32_t adj_end) {
  DevRule d{};
  d.row = row;
  d.position = t.position;
  d.seed = t.seed;
  d.temperature = t.temperature;
  d.repetition = t.repetition_penalty;
  d.presence = t.presence_penalty;
  d.frequency = t.frequency_penalty;
  d.adj_begin = adj_begin;
  d.adj_end = adj_end;
  d.mask_begin = -1;
  return d;
}

struct Best {
  float score;
  int32_t id;  // -1: no candidate yet
};

__device__ __forceinline__ float token_score(const DevRule& r, float value, int32_t id) {
  if (r.temperature <= 0.0f) return value;  // greedy compares the (penalised) values
  return choice::gumbel_score(value, r.temperature, r.seed, r.position, id);
}
__device__ __forceinline__ float adjusted(const DevRule& r, const TokenAdjust& a, float logit) {
  return choice::penalized(logit, a.output_count, a.seen, r.repetition, r.presence, r.frequency);
}
// The value id competes with before penalties: its logit, or -inf where the mask forbids it.
__device__ __forceinline__ float masked_logit(const DevRule& r, const uint32_t* __restrict__ masks,
                                              const float* row, int64_t id) {
  if (r.mask_begin >= 0 && !((masks[r.mask_begin + (id >> 5)] >> (id & 31)) & 1u))
    return -INFINITY;
  return row[id];
}
__device__ __forceinline__ void offer(Best& b, float score, int32_t id) {
  if (isnan(score)) return;  // see the header comment: NaN never wins by comparison
  if (b.id < 0 || choice::better(score, id, b.score, b.id)) b = {score, id};
}
__device__ __forceinline__ Best merge(Best a, Best b) {
  if (b.id < 0) return a;
  if (a.id < 0) return b;
  return choice::better(b.score, b.id, a.score, a.id) ? b : a;
}
__device__ __forceinline__ Best warp_merge(Best b) {
  for (int off = 16; off > 0; off >>= 1) {
    Best o;
    o.score = __shfl_down_sync(0xffffffffu, b.score, off);
    o.id = __shfl_down_sync(0xffffffffu, b.id, off);
    b = merge(b, o);
  }
  return b;
}
// First index in adjust[begin, end) whose id is >= id.
__device__ __forceinline__ int32_t lower_bound(const TokenAdjust* adjust, int32_t begin,
                                               int32_t end, int64_t id) {
  while (begin < end) {
    const int32_t mid = begin + (end - begin) / 2;
    if (adjust[mid].id < id)
      begin = mid + 1;
    else
      end = mid;
  }
  return begin;
}

// Block (chunk c, rule y): the winner among ids [c * kChunk, (c + 1) * kChunk) of rule y's row.
// Penalised ids of the chunk are marked in a shared bitmap and scored from their adjusted value;
// the plain scan skips them.
__global__ void __launch_bounds__(kThreads)
    choose_partial(const float* __restrict__ logits, int64_t V, const DevRule* __restrict__ rules,
                   const TokenAdjust* __restrict__ adjust, const uint32_t* __restrict__ masks,
                   Best* __restrict__ partials, int chunks) {
  detail::pdl_wait();
  __shared__ uint32_t marked[kChunk / 32];
  __shared__ int32_t range[2];
  __shared__ Best warp_best[kThreads / 32];
  const DevRule r = rules[blockIdx.y];
  const float* row = logits + r.row * V;
  const int64_t lo = static_cast<int64_t>(blockIdx.x) * kChunk;
  const int64_t hi = lo + kChunk < V ? lo + kChunk : V;
  const int tid = static_cast<int>(threadIdx.x);
  for (int i = tid; i < kChunk / 32; i += kThreads) marked[i] = 0;
  if (tid == 0) {
    range[0] = lower_bound(adjust, r.adj_begin, r.adj_end, lo);
    range[1] = lower_bound(adjust, range[0], r.adj_end, hi);
  }
  __syncthreads();
  Best b{0.0f, -1};
  for (int32_t a = range[0] + tid; a < range[1]; a += kThreads) {
    const TokenAdjust t = adjust[a];
    const int64_t k = t.id - lo;
    atomicOr(&marked[k >> 5], 1u << (k & 31));
    offer(b, token_score(r, adjusted(r, t, masked_logit(r, masks, row, t.id)), t.id), t.id);
  }
  __syncthreads();
  for (int64_t id = lo + tid; id < hi; id += kThreads) {
    const int64_t k = id - lo;
    if (marked[k >> 5] & (1u << (k & 31))) continue;
    offer(b, token_score(r, masked_logit(r, masks, row, id), static_cast<int32_t>(id)),
          static_cast<int32_t>(id));
  }
  b = warp_merge(b);
  if ((tid & 31) == 0) warp_best[tid >> 5] = b;
  __syncthreads();
  if (tid < 32) {
    b = tid < kThreads / 32 ? warp_best[tid] : Best{0.0f, -1};
    b = warp_merge(b);
    if (tid == 0) partials[static_cast<int64_t>(blockIdx.y) * chunks + blockIdx.x] = b;
  }
}

// One warp per rule: merges the row's chunk winners; id 0 wins when its own score is NaN or no
// id had a non-NaN score (the host loop starts from id 0 and nothing compares greater than NaN).
__global__ void choose_final(const float* __restrict__ logits, int64_t V,
                             const DevRule* __restrict__ rules,
                             const TokenAdjust* __restrict__ adjust,
                             const uint32_t* __restrict__ masks,
                             const Best* __restrict__ partials, int chunks, int32_t* ids) {
  detail::pdl_wait();
  const DevRule r = rules[blockIdx.x];
  const int lane = static_cast<int>(threadIdx.x);
  Best b{0.0f, -1};
  for (int c = lane; c < chunks; c += 32)
    b = merge(b, partials[static_cast<int64_t>(blockIdx.x) * chunks + c]);
  b = warp_merge(b);
  if (lane == 0) {
    const float* row = logits + r.row * V;
    float v0 = masked_logit(r, masks, row, 0);
    if (r.adj_begin < r.adj_end && adjust[r.adj_begin].id == 0)
      v0 = adjusted(r, adjust[r.adj_begin], v0);
    const float s0 = token_score(r, v0, 0);
    ids[blockIdx.x] = (isnan(s0) || b.id < 0) ? 0 : b.id;
  }
}

// The op's own grow-only device buffer.
void* buffer(size_t bytes) {
  static void* p = nullptr;
  static size_t have = 0;
  if (have < bytes) {
    check(cudaStreamSynchronize(detail::stream()), "synchronize (choose_tokens buffer)");
    if (p) check(cudaFree(p), "free (choose_tokens buffer)");
    p = nullptr;
    have = 0;
    const size_t want = std::max<size_t>(bytes + bytes / 2, size_t{64} << 10);
    check(cudaMalloc(&p, want), "malloc (choose_tokens buffer)");
    have = want;
  }
  return p;
}

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

// Appends a rule's mask as `words` 32-bit words covering ids [0, 32 * words): the bits of its
// 64-bit words (id % 64 of word id / 64 is id % 32 of 32-bit word id / 32), ids past
// allowed_size cleared.
void append_mask(const TokenRule& t, size_t words, std::vector<uint32_t>& out) {
  const size_t at = out.size();
  out.resize(at + words, 0u);
  uint32_t* w = out.data() + at;
  const int64_t size = std::min<int64_t>(t.allowed_size, static_cast<int64_t>(words) * 32);
  const int64_t full = std::max<int64_t>(size, 0) / 32;  // words wholly below allowed_size
  for (int64_t k = 0; k < full; ++k)
    w[k] = static_cast<uint32_t>(t.allowed[k >> 1] >> ((k & 1) * 32));
  for (int64_t id = full * 32; id < size; ++id)
    if ((t.allowed[id >> 6] >> (id & 63)) & 1) w[id >> 5] |= 1u << (id & 31);
}

}  // namespace

void choose_tokens(const float* logits, int64_t V, std::span<const TokenRule> rules,
                   int32_t* host_ids) {
  if (rules.empty()) return;
  if (V <= 0 || V > INT32_MAX) fail("choose_tokens: vocabulary of ", V, " ids");
  std::vector<DevRule> dev;
  std::vector<TokenAdjust> adjust;
  std::vector<uint32_t> masks;  // the masked rows' words, mask_words each
  const size_t mask_words = static_cast<size_t>((V + 31) / 32);
  std::vector<size_t> dev_rows, host_rows;  // rule indices done here / on the host
  for (size_t i = 0; i < rules.size(); ++i) {
    const TokenRule& t = rules[i];
    host_ids[i] = -1;
    if (t.skip) continue;
    if (t.needs_sorted()) {
      host_rows.push_back(i);
      continue;
    }
    const auto adj_begin = static_cast<int32_t>(adjust.size());
    for (const TokenAdjust& a : t.adjust)
      if (a.id >= 0 && a.id < V) adjust.push_back(a);
    dev.push_back(dev_rule(t, static_cast<int64_t>(i), adj_begin,
                           static_cast<int32_t>(adjust.size())));
    if (t.masked()) {
      dev.back().mask_begin = static_cast<int64_t>(masks.size());
      append_mask(t, mask_words, masks);
    }
    dev_rows.push_back(i);
  }
  if (!dev.empty()) {
    const int n = static_cast<int>(dev.size());
    const int chunks = static_cast<int>((V + kChunk - 1) / kChunk);
    const size_t rules_bytes = align256(dev.size() * sizeof(DevRule));
    const size_t adjust_bytes = align256(std::max<size_t>(adjust.size(), 1) * sizeof(TokenAdjust));
    const size_t mask_bytes = align256(std::max<size_t>(masks.size(), 1) * sizeof(uint32_t));
    const size_t partial_bytes = align256(static_cast<size_t>(n) * chunks * sizeof(Best));
    const size_t ids_bytes = align256(static_cast<size_t>(n) * sizeof(int32_t));
    char* base = static_cast<char*>(
        buffer(rules_bytes + adjust_bytes + mask_bytes + partial_bytes + ids_bytes));
    auto* d_rules = reinterpret_cast<DevRule*>(base);
    auto* d_adjust = reinterpret_cast<TokenAdjust*>(base + rules_bytes);
    auto* d_masks = reinterpret_cast<uint32_t*>(base + rules_bytes + adjust_bytes);
    auto* d_partials = reinterpret_cast<Best*>(base + rules_bytes + adjust_bytes + mask_bytes);
    auto* d_ids = reinterpret_cast<int32_t*>(base + rules_bytes + adjust_bytes + mask_bytes +
                                             partial_bytes);
    // One staged copy of rules, penalty lists and masks (pageable: the call returns once it is
    // staged), so a batch's masked rows cost one upload together.
    std::vector<char> staged(rules_bytes + adjust_bytes + masks.size() * sizeof(uint32_t));
    std::memcpy(staged.data(), dev.data(), dev.size() * sizeof(DevRule));
    if (!adjust.empty())
      std::memcpy(staged.data() + rules_bytes, adjust.data(), adjust.size() * sizeof(TokenAdjust));
    if (!masks.empty())
      std::memcpy(staged.data() + rules_bytes + adjust_bytes, masks.data(),
                  masks.size() * sizeof(uint32_t));
    upload(base, staged.data(), staged.size());
    detail::launch("choose_partial", choose_partial, dim3(chunks, n), dim3(kThreads), 0, logits, V,
                   static_cast<const DevRule*>(d_rules), static_cast<const TokenAdjust*>(d_adjust),
                   static_cast<const uint32_t*>(d_masks), d_partials, chunks);
    detail::launch("choose_final", choose_final, dim3(n), dim3(32), 0, logits, V,
                   static_cast<const DevRule*>(d_rules), static_cast<const TokenAdjust*>(d_adjust),
                   static_cast<const uint32_t*>(d_masks), static_cast<const Best*>(d_partials),
                   chunks, d_ids);
    std::vector<int32_t> ids(n);
    download(ids.data(), d_ids, static_cast<size_t>(n) * sizeof(int32_t));
    for (int i = 0; i < n; ++i) host_ids[dev_rows[i]] = ids[i];
  }
  if (!host_rows.empty()) {  // the filtered rows: just those rows cross, chosen on the host
    std::vector<float> row(static_cast<size_t>(V));
    ChoiceScratch scratch;
    for (size_t i : host_rows) {
      download(row.data(), logits + static_cast<int64_t>(i) * V, row.size() * sizeof(float));
      host_ids[i] = choose_token(row, rules[i], scratch);
    }
  }
}

// --- tests ---------------------------------------------------------------------------------------
namespace {

__global__ void gumbel_table_kernel(float* out) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= (int64_t{1} << 24)) return;
  const float u = choice::mul(choice::add(static_cast<float>(k), 0.5f), 1.0f / 16777216.0f);
  out[k] = choice::gumbel(u);
}

__global__ void uniform_kernel(uint64_t seed, int64_t position, int64_t n, float* out) {
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id < n) out[id] = choice::position_uniform(seed, position, static_cast<int32_t>(id));
}

__global__ void scores_kernel(const float* logits, int64_t V, DevRule r, const TokenAdjust* adjust,
                              float* out) {
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= V) return;
  const int32_t at = lower_bound(adjust, r.adj_begin, r.adj_end, id);
  float v = logits[id];
  if (at < r.adj_end && adjust[at].id == id) v = adjusted(r, adjust[at], v);
  out[id] = token_score(r, v, static_cast<int32_t>(id));
}

}  // namespace

namespace testing {

void gumbel_table(float* out) {
  gumbel_table_kernel<<<(1 << 24) / 256, 256, 0, detail::stream()>>>(out);
  detail::check_launch("gumbel_table");
}

void position_uniforms(uint64_t seed, int64_t position, int64_t n, float* out) {
  uniform_kernel<<<detail::blocks_for(n, 256), 256, 0, detail::stream()>>>(seed, position, n, out);
  detail::check_launch("position_uniforms");
}

void choice_scores(const float* logits, int64_t V, const TokenRule& rule, float* out) {
  if (rule.masked()) fail("choice_scores: a masked rule (the scores are the unmasked ones)");
  const DevRule d = dev_rule(rule, 0, 0, static_cast<int32_t>(rule.adjust.size()));
  auto* adjust = static_cast<TokenAdjust*>(
      buffer(std::max<size_t>(rule.adjust.size(), 1) * sizeof(TokenAdjust)));
  upload(adjust, rule.adjust.data(), rule.adjust.size() * sizeof(TokenAdjust));
  scores_kernel<<<detail::blocks_for(V, 256), 256, 0, detail::stream()>>>(logits, V, d, adjust,
                                                                          out);
  detail::check_launch("choice_scores");
  synchronize();  // the buffer is the op's own: done before the next use
}

}  // namespace testing

}  // namespace lockstep::kernels::cuda
