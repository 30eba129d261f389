// The kernel interface: every op a model forward uses. Models call these and never include SIMD
// or CUDA headers. All ops obey the invariance rule (schedule.h): a row's result never depends on
// how many rows the call has, where the row sits, or how many threads run.
//
// Shapes are row-major; "rows" are tokens of one forward call (possibly from several sequences).
#pragma once

#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace lockstep::kernels {

// How a weight matrix's elements are stored (kernels/quant_format.h describes the formats).
enum class QuantFormat : uint8_t {
  None,    // `data` holds rows x cols elements of `dtype`
  Affine,  // MLX group-wise affine: w = fma(q, scale, bias), q unsigned of `bits` bits
};

// A weight matrix W[rows = N outputs][cols = K inputs], in its checkpoint dtype (F32, BF16, F16),
// or quantized (quant != None): then `data` holds the packed codes (MLX layout: row-major uint32
// words, element k of a row in bits [(k % (32/bits)) * bits, ...) of word k / (32/bits)), and
// `scales` / `biases` hold one value of `scale_dtype` per group of `group_size` elements per row,
// [rows][cols / group_size]. `dtype` is then unused.
struct Weight {
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0;
  const void* data = nullptr;
  QuantFormat quant = QuantFormat::None;
  int bits = 0;
  int64_t group_size = 0;
  DType scale_dtype = DType::F32;
  const void* scales = nullptr;
  const void* biases = nullptr;
  // CPU only, optional: the same codes, scales and biases in the CPU's panel layout
  // (kernels/cpu/quant_panels.h), which its int8 quant dot reads when present. `data`, `scales`
  // and `biases` stay valid (other kernels, the reference and the embedding lookup read them).
  const void* panels = nullptr;
  // CUDA only: the number of pieces the K walk is cut into (kernels/cuda/k_pieces.h); 0: the
  // count the weight's own shape gives. A tensor-parallel shard of a larger weight carries the
  // whole weight's count, so its rows keep the whole weight's bits (the count depends on N).
  int k_pieces = 0;

  // Bytes the matrix occupies (what one pass over it reads).
  int64_t bytes() const;
};

// y[m][n] = sum_k x[m][k] W[n][k] (+ bias[n]), x: [M][K], y: [M][N]. bias may be null.
void linear(const float* x, int64_t M, const Weight& w, const float* bias, float* y,
            ThreadPool& pool);

// One weight of a linear_multi call: y = x W^T (+ bias), as linear() computes it.
struct LinearOut {
  const Weight* w;
  const float* bias;  // may be null
  float* y;           // [M][w->rows]
};
// Several weights against the same x ([M][K], every w->cols == K), in one pool call over the
// union of their output rows: each y gets exactly the bits of a separate linear() call (the same
// per-element schedule; quantized and float weights may be mixed). Saves a pool hand-off per
// weight in decode.
void linear_multi(const float* x, int64_t M, std::span<const LinearOut> outs, ThreadPool& pool);

// One product of a linear_grouped call: y = x W^T (+ bias), x [M][w->cols], y [M][w->rows].
struct LinearJob {
  const float* x;
  int64_t M;
  const Weight* w;
  const float* bias;  // may be null
  float* y;
};
// Several products with their own inputs (a mixture-of-experts layer's experts, each over the
// tokens routed to it) in one pool call over the union of their output rows: each y gets exactly
// the bits of a separate linear() call.
void linear_grouped(std::span<const LinearJob> jobs, ThreadPool& pool);

// Row m of `table` (an embedding matrix [V][D]) converted to float32, for each id.
void embedding(const Weight& table, std::span<const int32_t> ids, float* out);

// y = x / rms(x) * w per row of D (zero_centered: * (1 + w)). x may equal y.
void rms_norm(const float* x, int64_t M, int64_t D, const float* w, float eps, bool zero_centered,
              float* y);

// Rotary position embedding, NeoX "rotate half" layout, applied in place to the first rotary_dim
// dims of each of `heads` vectors of head_dim per row. cos_sin: [M][rotary_dim], per row
// rotary_dim/2 cosines then rotary_dim/2 sines (RopeTable::fill).
void rope(float* x, int64_t M, int64_t heads, int64_t head_dim, int64_t rotary_dim,
          const float* cos_sin);

// out[i] = silu(gate[i]) * up[i].
void silu_mul(const float* gate, const float* up, float* out, int64_t n);

// out[i] = gelu_tanh(gate[i]) * up[i]: PyTorch's tanh-approximated GELU (gelu_pytorch_tanh,
// Gemma's MLP), computed as gelu_tanh_f32 states it (kernels/math.h).
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n);

// Numerically safe softmax of one row in place (max-subtracted, exp_f32, scheduled sum).
void softmax(float* x, int64_t n);

// Index of the largest value; ties go to the lowest index. NaN is never chosen over a number.
int64_t argmax(const float* x, int64_t n);

// One layer of a paged KV cache: blocks of block_tokens positions, each [block_tokens][n_kv_heads]
// [head_dim] elements of `dtype` for keys (k) and values (v); a sequence's position p lives in
// block block_table[p / block_tokens] at slot p % block_tokens. The element type is the backend's
// choice (Backend::kv_dtype: F32 on the CPU, BF16 on CUDA, whose kernels round K and V to BF16
// anyway), so the pointers are untyped; each kernel checks the dtype it reads.
struct KvLayerView {
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t block_tokens = 0, n_kv_heads = 0, head_dim = 0;
  DType dtype = DType::F32;
};

// Causal attention of T query rows over a paged KV cache.
struct AttentionRow {
  const int32_t* block_table;  // the sequence's KV blocks
  int64_t n_keys;              // attend to key positions [first_key, n_keys): n_keys is the
  int64_t first_key = 0;       // query's position + 1; first_key > 0 for a sliding window
};
// q: [T][n_heads][head_dim], out: [T][n_heads][head_dim]; kv.dtype must be F32 (throws
// otherwise). GQA: head h reads kv head h / (n_heads / n_kv_heads). For each (row, head) the scores are reduced with the dot schedule,
// the softmax sum over positions with the 16-lane schedule in position order, and the values
// accumulated in position order: nothing depends on T, on the block size or on other rows.
// A sliding window only moves first_key, a function of the query's own position: the lanes of
// the softmax sum count from first_key (lane = (p - first_key) mod 16), so a windowed row reduces
// exactly as ref::attend_one over its n_keys - first_key keys.
void attention(const float* q, int64_t T, std::span<const AttentionRow> rows, int64_t n_heads,
               const KvLayerView& kv, float scale, float* out, ThreadPool& pool);

}  // namespace lockstep::kernels
