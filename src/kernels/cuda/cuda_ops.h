// The CUDA kernels behind kernels::Backend (kernels/backend.h), as plain C++ declarations: no CUDA
// header leaks to callers. Every pointer argument is device memory unless it says otherwise; every
// op is enqueued on the library's one stream (ops run in call order, the host does not wait),
// except download() and synchronize(), which wait.
//
// Numerics (the invariance rule of ../shared/DESIGN.md, GPU form):
// - linear: BF16 tensor cores (mma.sync m16n8k16, FP32 accumulate). x is rounded to BF16
//   (nearest-even) as it is loaded; the K dimension is cut into S(N, K) fixed pieces (1, 2 or 4,
//   chosen from the weight's shape alone, so small-N layers stream fast at decode), each walked
//   in 16-wide steps in increasing k into its own FP32 accumulator, the pieces then added in
//   piece order (linear.cu), so a row's outputs never depend on M, on the row's position in the
//   call, or on the other rows. Small M uses the same
//   K walk with weights as the MMA's A operand (swapped operands), not a different kernel order.
// - rms_norm / softmax-like row reductions: one block per row, fixed per-thread strides and a
//   fixed tree; nothing depends on the number of rows.
// - attention: BF16 tensor cores (q rounded to BF16 as staged; keys and values stored BF16 in the
//   cache, rounded when written; the softmax weights rounded to BF16 for P.V, FP32 accumulate). Per (row, head) the keys are taken in fixed chunks
//   aligned to absolute positions (kAttentionChunk), each chunk reduced in a fixed order
//   (attention.cu), the chunks merged in position order with the online-softmax update; the
//   number of rows, the KV block size, max_keys, the launch shape and the other rows do not
//   change a row's bits.
// CPU and GPU are not promised to agree bit for bit (tensor cores accumulate their own way).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/k_pieces.h"
#include "kernels/ops.h"

namespace lockstep::kernels::cuda {

// Positions per attention chunk (aligned to absolute positions 0, C, 2C, ...).
inline constexpr int64_t kAttentionChunk = 256;

// --- device and memory -------------------------------------------------------------------------
// True when a CUDA device can be used; otherwise false and *why_not says why (driver missing,
// no device, ...). Never throws.
bool available(std::string* why_not);
// "NVIDIA H200, 132 SMs, 139.8 GiB, cc 9.0" (throws lockstep::Error when unavailable).
std::string describe_device();

void* malloc_device(size_t bytes);  // throws lockstep::Error naming the size and CUDA's message
void free_device(void* p);
void upload(void* dst, const void* host_src, size_t bytes);      // ordered on the stream
void download(void* host_dst, const void* src, size_t bytes);    // waits for the stream
void copy(void* dst, const void* src, size_t bytes);             // device to device, on the stream
void fill_zero(void* dst, size_t bytes);
void synchronize();

// --- ops -----------------------------------------------------------------------------------------
// y[m][n] = sum_k x[m][k] W[n][k] (+ bias[n]). w is BF16 (the backend converts F32/F16 weights to
// BF16 when it places them) or quantized (w.quant == Affine, 4 or 8 bits, group size a multiple
// of 16 dividing K) in the GPU layout of linear_quant.cuh: w.data the codes as stored, w.scales
// one scale/bias pair per (row, group) (4 bytes for BF16/F16 scales, a float2 for F32), w.biases
// unused. A quantized element is the BF16 value f32_to_bf16(fma(q, s, b)), so a quantized linear
// is bitwise the linear of that BF16 matrix, for every M (linear_quant.cu). w.data, w.scales and
// bias are device pointers.
void linear(const float* x, int64_t M, const Weight& w, const float* bias, float* y);
// Grows the BF16 buffer that quantized linears dequantize into (M > 64, and shapes the fused
// kernel cannot take) to `elements` (a weight's rows x cols), now rather than inside a step: the
// backend calls it when placing each quantized weight.
void reserve_dequant_scratch(int64_t elements);
// True when a quantized weight of this shape and format (host or device pointers: only its
// metadata is read) runs the fused quantized kernel for M <= 64: BF16 or F16 scales, and for 4
// bits 16-byte aligned code rows and split pieces. Others still give the same bits, through the
// scratch copy on every call.
bool linear_quant_fused(const Weight& w);
// Several weights against the same x (every w->cols equal): each y bitwise equal to a separate
// linear() of its weight. Weights of the same split count S (split_count of each weight's own N and
// K, unchanged) share one launch, up to 4 a launch (q/k/v, gate/up: one launch each); for M > 16
// x is converted to bf16 once for all of them.
void linear_multi(const float* x, int64_t M, const LinearOut* outs, int64_t n);

// One piece of a K walk (k_pieces.h), alone: y = x W^T with all of W's K (a BF16 weight) walked as
// a single piece, from 0, in 16-wide steps, no bias. For a weight made of piece p's columns of a
// larger weight (and x of those columns) that is bitwise the partial a_p the larger linear adds
// into its output, whatever M and whichever kernel runs it.
void linear_piece(const float* x, int64_t M, const Weight& w, float* y);

// --- tensor parallelism, emulated on one GPU (tensor_parallel.cu) -------------------------------
// A row-parallel weight (o_proj, down_proj, the Gated DeltaNet's out_proj: those whose K a
// tensor-parallel split cuts) as `ranks` ranks would hold it: rows x cols, cut along its K walk's
// pieces (lin::row_parallel_pieces), shards[p] a BF16 [rows][k1 - k0] of piece p's columns.
struct RowParallelShards {
  int ranks = 1;
  int64_t rows = 0, cols = 0;
  std::vector<lin::KPiece> pieces;
  std::vector<Weight> shards;
};
// y = x W^T (+ bias) as the ranks compute it, one rank after another: each runs linear_piece on
// each of its pieces (x's columns of the piece against the shard) into a partial of its own, and
// each merges every piece's partial of its 1 / R of the output rows in piece order, then the
// bias. Bitwise linear() of the whole weight, at every rank count (tensor_parallel.cu says why).
void linear_row_parallel(const float* x, int64_t M, const RowParallelShards& w, const float* bias,
                         float* y);
// A column-parallel weight (q/k/v, gate/up, the lm_head) as `ranks` ranks would hold it: rank r the
// output rows [row0[r], row0[r + 1]) (lin::column_parallel_rows), shards[r] those rows with the
// whole weight's piece count (Weight::k_pieces), e.g. a view into the placed weight.
struct ColumnParallelShards {
  int64_t rows = 0, cols = 0;
  std::vector<int64_t> row0;
  std::vector<Weight> shards;
};
// y = x W^T (+ bias) as the ranks compute it: each its rows, copied into place (the all-gather).
// Bitwise linear() of the whole weight.
void linear_column_parallel(const float* x, int64_t M, const ColumnParallelShards& w,
                            const float* bias, float* y);
// How many linear_row_parallel / linear_column_parallel calls have run in this process (the
// backend reports it at exit; tests check the emulation ran).
int64_t tensor_parallel_calls();

// numerics fast: the same y = x W^T (+ bias) through cuBLAS (cublasGemmEx: x rounded to BF16,
// BF16 weights, FP32 accumulate and output, bias added after by a separate kernel). cuBLAS is
// loaded at the first call with dlopen("libcublas.so.13"), so nothing needs it to start; throws
// lockstep::Error naming dlopen's message when it cannot be loaded. Its reduction order is
// cuBLAS's own choice (it may depend on M): NOT covered by the invariance rule.
void linear_fast(const float* x, int64_t M, const Weight& w, const float* bias, float* y);
// True when linear_fast can run (cuBLAS loads and initialises); otherwise false and *why_not.
bool linear_fast_available(std::string* why_not);

// Tests only: 0 = the tiled linear kernel picks (default: wgmma on compute capability 9.0);
// 1, 2, 3 force the mma.sync 128x256, 128x128 or 64x64 tile for M > 64; -1 the mma.sync tiles'
// own pick; 4, 5 force the wgmma kernel's 128x128 or 128x192 tile, 6, 7 the same tiles on a
// persistent grid (throws where it cannot run).
// Any choice gives the same bits (that is what tests check).
namespace testing {
void set_linear_tile_override(int tile);
// Tests only: quantized linear paths. 0 = by rule (default); 1 = the 128-k skinny config first
// (M <= 16), 2 = the 64-k one, 3 = always dequantize into the scratch copy and run the BF16 linear.
// Returns 3. linear_quant_path_used: what the last quantized linear ran (1 / 2: those skinny
// configs, 3: the skinny kernel on bf16 x (M 17..64), 4: the scratch copy). Same bits.
int set_linear_quant_path(int path);
int linear_quant_path_used();
// Tests and the linear sweep only: 0 = linear picks its M <= 16 kernel configuration by rule
// (default); c in 1..n forces configuration c where its shared memory fits (else the first).
// Returns n. Any choice gives the same bits (that is what tests check).
int set_linear_skinny_override(int config);
// Tests and sweeps only: the BF16 grouped expert linear's config for decode-sized calls (at most
// 8 tokens): c in 0..n-1 forces c, -1 returns to LOCKSTEP_CUDA_EXPERT_CFG (default 1). Returns n.
// Any choice gives the same bits (linear_experts.cuh).
int set_expert_decode_config(int config);
// Tests and sweeps only: the grouped expert linear's token tile for calls of 9 to 64 tokens:
// 8 or 16 rows forces it, anything else returns to LOCKSTEP_CUDA_EXPERT_BATCH_TILE (default 8).
// Returns the rows now in force. Either gives the same bits (linear_experts.cuh).
int set_expert_batch_tile_rows(int rows);
// The configuration (1..n) that the last M <= 16 linear launch ran, and a configuration's name.
int linear_skinny_config_used();
// Whether forcing `config` runs it for an N x K weight at M <= 16 rows on this device (its shared
// memory fits; a small-memory config is not in sm_90 code), rather than a fallback config.
bool linear_skinny_config_runs(int config, int64_t N, int64_t K, int64_t M);
std::string linear_skinny_config_name(int config);
// Tests only: 0 = attention picks its query rows per block (default); r > 0 takes
// min(r, as many as fit) (1 = one row per block). Any choice gives the same bits.
void set_attention_rows_override(int rows);
// Tests only: 0 = attention picks its launch from T (default); 1 forces the split launch (chunk
// partials + merge, decode's), 2 the walk (one block walks its chunks, prefill's), 3 the split
// launch's one-warp-per-tile kernel, 4 / 5 the decode kernel (head_dim <= 128) with the value
// columns split over two blocks / in one block. Same bits.
void set_attention_path_override(int path);
// Tests only: how many of the 2^32 float inputs the walk's branch-free exp (exp_f32_select; its
// x <= 0 form on the inputs not > 0) gives other bits than exp_f32 for (0 expected); the
// smallest such input's bits in *first_bad.
uint64_t attention_exp_mismatches(uint32_t* first_bad);
// Tests only: programmatic dependent launch (common.cuh) 0 = as LOCKSTEP_CUDA_PDL says (default
// on), 1 = on, 2 = off. Scheduling only: the same bits either way.
void set_pdl(int mode);
// Programmatic (PDL) edges in the last graph end_capture() built (-1: could not be read).
int last_graph_programmatic_edges();
}

// out[i][:] = float(table row ids[i]); table BF16 [V][D] on the device; ids checked by the caller.
void embedding(const Weight& table, const int32_t* ids, int64_t n, float* out);
// The same gather from a quantized table in linear()'s GPU layout: each element the widened BF16
// value linear() multiplies, i.e. what embedding() of the dequantized BF16 table gives.
void embedding_quant(const Weight& table, const int32_t* ids, int64_t n, float* out);

// As kernels::rms_norm / rope / silu_mul (ops.h), on device arrays.
void rms_norm(const float* x, int64_t M, int64_t D, const float* w, float eps, bool zero_centered,
              float* y);
void rope(float* x, int64_t M, int64_t heads, int64_t head_dim, int64_t rotary_dim,
          const float* cos_sin);
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// As Backend::gelu_tanh_mul / scale / softcap: the CPU's formulas and operation order (math.h).
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n);
void scale(float* x, int64_t n, float s);
void softcap(float* x, int64_t n, float cap);
// x[i] += delta[i].
void add(float* x, const float* delta, int64_t n);
// x += delta ([M][D]), then y = rms_norm(x): one launch, bitwise add() then rms_norm(). y may
// equal x.
void add_rms_norm(float* x, const float* delta, int64_t M, int64_t D, const float* w, float eps,
                  bool zero_centered, float* y);
// Backend::attention_prep (backend.h): q from q_in's stride, q/k head norms, RoPE and the KV cache
// write (skipped when kv.k is null) in one launch, bitwise the separate ops.
void attention_prep(const AttentionPrep& p, const KvLayerView& kv);
// x[i] *= sigmoid(gate[i]).
void sigmoid_mul(float* x, const float* gate, int64_t n);

// The KV cache's element type on the GPU (Backend::kv_dtype): BF16. Every attention kernel
// rounds keys and values to BF16 (nearest-even) before its tensor-core MMAs, so storing them
// rounded at write time gives the attention output's bits unchanged, with half the bytes and
// no conversion in the attention kernels.
inline constexpr DType kKvDtype = DType::BF16;

// Writes row t's key and value (kv_dim = n_kv_heads * head_dim floats each), rounded to BF16
// (nearest-even, as __floats2bfloat162_rn), to cache slot slots[t] of a layer: BF16 elements
// k_cache + slots[t] * kv_dim (v likewise). slot = block * block_tokens + position % block_tokens.
void kv_write(const float* k, const float* v, int64_t T, int64_t kv_dim, const int32_t* slots,
              void* k_cache, void* v_cache);

// Causal attention of T query rows over the paged cache of one layer. Row t attends to positions
// [first, n_keys[t]): first = 0, or with window > 0 max(0, n_keys[t] - window) (a sliding window:
// a function of the row's position, so the rows' bits still depend on nothing else); position p of row t is in block block_tables[t * table_stride + p / block_tokens]
// at slot p % block_tokens; block b's keys start at element b * block_tokens * n_kv_heads *
// head_dim of kv.k (values at kv.v likewise); kv.dtype must be BF16 (kKvDtype).
// q, out: [T][n_heads][head_dim]; GQA: head h reads kv head
// h / (n_heads / n_kv_heads). max_keys >= every n_keys[t] (a launch bound only: it must not change
// any row's bits). head_dim 64, 128, 256 or 512, at most 16 query heads per KV head; q, kv.k, kv.v
// 16-byte aligned. BF16 inputs: expect ~3e-3 absolute from the FP32 CPU kernel on values in
// [-1, 1] (attention_test), not 1e-5. rows_per_item > 0 (a launch-shape hint, never a bit):
// the rows come in items (sequences) of at most that many rows, e.g. 1 for a batch of decode rows,
// so blocks take one item's rows each and many items take the split launch.
void attention(const float* q, int64_t T, const int32_t* block_tables, int64_t table_stride,
               const int32_t* n_keys, int64_t max_keys, int64_t n_heads, const KvLayerView& kv,
               float scale, float* out, int64_t window = 0, int64_t rows_per_item = 0);

// out[i][:] = x[rows[i]][:] for i < n, rows of D floats.
void gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t D, float* out);
// Backend::moe_combine: one thread per output element, ranks in order, each op rounded alone;
// expert_out's row of assignment i is rows[i] (null: i).
void moe_combine(const float* expert_out, const int32_t* rows, const float* weights, int64_t T,
                 int64_t k, int64_t D, const float* shared, const float* shared_gate, float* out);

// --- mixture of experts on the device (moe_route.cu, linear_experts.cu) ------------------------
// Limits of the device routing and grouping (shared memory of one block).
inline constexpr int64_t kMoeMaxExperts = 2048, kMoeMaxRows = 4096;
// Backend::moe_route: experts / weights [T][k] from router logits [T][E], bitwise
// route_tokens (models/moe_routing.h); expert_scale [E] (null: none) multiplies each weight
// after the renormalisation (Gemma 4's per_expert_scale). k <= 32.
void moe_route(const float* logits, int64_t T, int64_t E, int64_t k, bool normalize,
               const float* expert_scale, int32_t* experts, float* weights);
// Backend::moe_group: from experts [T * k], source [T * k] (grouped row -> token), slot [T * k]
// (assignment t * k + j -> grouped row) exactly as the host's group_by_expert, and groups
// [kernels::moe_groups_size]: [0] = active experts, then (expert, first row, rows) per active expert in
// expert order. T * k <= kMoeMaxRows, E <= kMoeMaxExperts. shared: one more group last, (E, T k,
// T), whose grouped rows T k + t are token t (source [T k + T]): the shared expert.
void moe_group(const int32_t* experts, int64_t T, int64_t k, int64_t E, int32_t* source,
               int32_t* slot, int32_t* groups, bool shared = false);
// moe_route then moe_group, in one launch where one block holds them (up to 64 tokens, E up to
// ~350; a single token with E <= 512 takes one warp), else the two launches: the same outputs.
void moe_route_group(const float* logits, int64_t T, int64_t E, int64_t k, bool normalize,
                     const float* expert_scale, int32_t* experts, float* weights, int32_t* source,
                     int32_t* slot, int32_t* groups, bool shared = false);
// The weights of E experts' P projections (expert e's projection p at e * P + p) as device
// tables of their data (and quantized pairs) pointers, all of one shape and format.
struct ExpertTable {
  const void* const* w = nullptr;   // [E * P] device
  const void* const* sb = nullptr;  // [E * P] device (quantized only)
  int64_t E = 0, P = 0;
  Weight shape;  // the weights' shape and format (no data)
};
// True when linear_experts takes w: BF16 (16-byte aligned, K a multiple of 16) or a quantized
// weight the fused skinny kernel reads (linear_quant_fused).
bool linear_experts_supported(const Weight& w);
// True when b may share an expert table (one launch's weights) with a: the same shape and format.
bool same_expert_format(const Weight& a, const Weight& b);
ExpertTable make_expert_table(std::span<const Weight* const> w, int64_t P);  // waits
void free_expert_table(ExpertTable& t);
// For every active expert e of groups (moe_group) and projection p < t.P, rows
// [first, first + rows) of y[p] ([n][N]) = those rows of x ([n][K]) times expert e's weight p:
// bitwise linear(x + first * K, rows, W, nullptr, y[p] + first * N), in one launch whatever the
// routing. With x_rows ([n], moe_group's source), grouped row i is x's row x_rows[i] instead
// (x [T][K]: the tokens, not gathered). T: at least the most rows one expert has (the launch's
// token tiles; the call's tokens always suffice); n: the grouped rows.
void linear_experts(const ExpertTable& t, const float* x, const int32_t* x_rows, float* const* y,
                    const int32_t* groups, int64_t T, int64_t n);

// Backend::choose_tokens (kernels/token_choice.h) on device logits [rules.size()][V]: greedy and
// unfiltered Gumbel-max rows, penalties included, chosen on the GPU bitwise as
// kernels::choose_token (choose.cu); rows whose rule needs the sorted filters (top-k / top-p /
// min-p) are downloaded alone and chosen on the host. Waits for the stream; ids to host_ids.
void choose_tokens(const float* logits, int64_t V, std::span<const TokenRule> rules,
                   int32_t* host_ids);
namespace testing {
// Device out[k] = choice::gumbel((k + 0.5) / 2^24) for every k < 2^24: every noise value
// position_uniform can lead to.
void gumbel_table(float* out);
// Device out[id] = choice::position_uniform(seed, position, id) for id < n.
void position_uniforms(uint64_t seed, int64_t position, int64_t n, float* out);
// Device out[id] = the score choose_tokens compares for id under `rule` (its penalty list is
// uploaded here): the penalised logit (greedy) or its Gumbel-max score. Waits for the stream.
void choice_scores(const float* logits, int64_t V, const TokenRule& rule, float* out);
}  // namespace testing

}  // namespace lockstep::kernels::cuda

// --- Gated DeltaNet (Qwen3.5 linear-attention layers; kernels/gated_delta.h has the math) -------
namespace lockstep::kernels::cuda {

// The layer shape and per-sequence spans are kernels/backend.h's (one definition for both
// backends; spans here are a device array).
using kernels::DeltaNetShape;
using kernels::DeltaNetSpan;

// For every span, its tokens in order through its state, exactly the CPU's per-token step:
// conv1d over [state | input] per channel (taps in j order with FMAs) then SiLU; l2-normalise q
// and k heads (eps 1e-6); q *= dk^-1/2; g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b);
// then per value head h (key head h / (nv / nk)) the delta rule of gated_delta_step. The conv
// state ends holding the span's last K-1 inputs; core[t][h * dv + v] gets the head outputs when
// core is not null (rollback replay passes null). inputs: [T][token_inputs]; spans: device array.
// A state's bits after a token never depend on how its tokens were split into calls or spans,
// nor on the other spans.
// norm (null: none): then core = gated_rms_norm(core, norm->z, T * nv, dv, norm->w, norm->eps)
// in place; calls of at most 8 tokens a span do it in the recurrence launch (the last of a head's
// column tiles to finish normalises that head's rows, with gated_rms_norm's device function),
// others (or LOCKSTEP_CUDA_DELTANET_NORM=0) launch gated_rms_norm after it.
struct DeltaNetNorm {
  const float* z;
  const float* w;
  float eps;
};
void deltanet_step(const DeltaNetShape& s, const float* conv_w, const float* A_log,
                   const float* dt_bias, const float* inputs, int64_t T, const DeltaNetSpan* spans,
                   int64_t n_spans, int64_t max_span_tokens, float* core,
                   const DeltaNetNorm* norm = nullptr);

// Backend::deltanet_regroup in one launch: Qwen3-Next's qkvz [T][nk][q | k | v | z] and ba
// [T][nk][b | a] rows into inputs [T][q | k | v | a | b] and z [T][value_dim] (plain copies).
void deltanet_regroup(const DeltaNetShape& s, const float* qkvz, const float* ba, int64_t T,
                      float* inputs, float* z);

// y = x / rms(x) * w * silu(z) per row of D (kernels::gated_rms_norm). y may equal x.
void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t D, const float* w,
                    float eps, float* y);

// dst[r][0..cols) = src[r][0..cols) for r < rows, row strides in floats (a kernel, so a recorded
// step keeps its programmatic launches; copy_2d.cu).
void copy_2d(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows,
             int64_t cols);

// Backend::copy_spans: span y's bytes from src to dst, for y < n (spans: a device array, read
// by the kernel, so a graph that records this copies to whatever addresses it holds when run).
// 16-byte words where a span's ends and length allow, else 4-byte words, else bytes;
// max_bytes >= every span's bytes sizes the launch.
using kernels::CopySpan;
void copy_spans(const CopySpan* spans, int64_t n, int64_t max_bytes);

}  // namespace lockstep::kernels::cuda

// --- CUDA graphs (kernels/cuda_backend.cpp replays decode steps) ---------------------------------
namespace lockstep::kernels::cuda {

// Page-locked host memory: an upload from it can be recorded in a graph (its contents are read
// when the graph runs).
void* malloc_pinned(size_t bytes);
void free_pinned(void* p);
// Records the ops enqueued on the stream from begin_capture() to end_capture() into an
// executable graph (returned as an opaque handle). Nothing recorded runs until launch_graph().
void begin_capture();
void* end_capture();
void abort_capture();  // ends a capture that failed part-way and drops it
void launch_graph(void* graph);
void destroy_graph(void* graph);
// Per-op timing (LOCKSTEP_CUDA_PROFILE, cuda_backend.cpp): CUDA events on the stream, and a hold
// that keeps the stream from starting the ops queued behind it until the host releases it (so
// the events time the kernels back to back, as a graph runs them, not the host's launch gaps).
void* event_create();
void event_destroy(void* e);
void event_record(void* e);
float event_elapsed_ms(void* start, void* end);  // both recorded and complete
// A flag in mapped pinned memory: *host_flag written by the host, read by the device.
uint32_t* hold_flag_create(const uint32_t** device_flag);
void hold_flag_destroy(uint32_t* host_flag);
// Enqueues a kernel that waits until the flag reaches `ticket` (modular compare) or timeout_ms
// passes (so a host that blocks on a full launch queue never deadlocks).
void hold_stream(const uint32_t* device_flag, uint32_t ticket, double timeout_ms);

// Counts how often the library's internal scratch buffers were reallocated: a graph recorded
// before a reallocation points at freed memory and must not be launched again.
uint64_t scratch_generation();

}  // namespace lockstep::kernels::cuda
