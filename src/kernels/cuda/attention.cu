// attention (cuda_ops.h): causal attention of T query rows over one layer's paged KV cache, on
// BF16 tensor cores (mma.sync m16n8k16, FP32 accumulate).
//
// The schedule of one (row t, query head h), whatever T, the other rows, max_keys, the KV block
// size or the launch shape are:
// - q, keys and values enter the tensor cores rounded to BF16 (nearest-even): q as it is staged
//   in shared memory, keys and values when kv_write / attention_prep store them in the cache
//   (BF16 on the GPU, kKvDtype; the same rounding the kernels once applied while staging an
//   FP32 cache, so the bits did not change when the cache became BF16).
// - positions are taken in chunks of kAttentionChunk (256) aligned to absolute position 0; chunk
//   c holds positions [256c, min(256c + 256, n_keys)).
// - score(p) = S(p) * scale (one FP32 multiply), S(p) one tensor-core accumulator starting at 0
//   that receives the head_dim / 16 k-steps of q . k_p in increasing d.
// - m_c = the max of the chunk's scores (exact in any order); e(p) = exp_f32(score(p) - m_c)
//   (the CPU's polynomial, common.cuh), 0 at positions past the row's n_keys.
// - l_c = the FP32 sum of e(p): quad lane j (0..3) adds the chunk's positions p with
//   p mod 8 in {2j, 2j + 1} in increasing p, then l_c = (l_0 + l_1) + (l_2 + l_3).
// - a_c[d] = sum_p bf16(e(p)) v_p[d]: e(p) rounded to BF16 for the tensor core (as FlashAttention
//   does; l_c sums the unrounded e), one accumulator per (row, d) starting at 0 that receives
//   the chunk's 16-position k-steps in increasing position. A k-step wholly past the row's keys
//   (run when another row of the same 16-row tile has keys there) adds only zero products, which
//   leave an FP32 accumulator unchanged.
// - merge, chunks in increasing c from (M, L, A) = (-inf, 0, 0):
//   M' = max(M, m_c), alpha = exp_f32(M - M'), beta = exp_f32(m_c - M'),
//   L = L*alpha + l_c*beta, A = A*alpha + a_c*beta; out = A / L (0 when n_keys = 0).
//
// Work layout (free: none of it changes a row's bits; tensor-core rows are independent). A
// "virtual row" is one (query row, query head) of a KV head; a warp owns a tile of 16 virtual
// rows (r * G + g: query head g of the block's row r) and computes the chunk math above for all
// of them at once: scores for the 256 positions in registers, P in registers as the A operand of
// P.V (the walk, and the split launch for head_dim 256 and 512). The block's warps share each
// staged key / value sub-tile: 4096 BF16 elements (64, 32 or 16 positions; head_dim 512 splits
// a key row over two sub-tiles and stages each value pass's 128 columns alone, Geo) copied by
// cp.async straight into a ring of swizzled slots (4 for the walk, 16 for the split launch;
// Layout), read with ldmatrix; one barrier per sub-tile both publishes it and frees the slot
// the next copy fills.
// Two launches:
// - split (T <= 64, decode and verify, more than one chunk): a block per (chunk c, rows, kv head)
//   writes chunk c's (m_c, l_c, a_c) per (row, head); a second kernel merges the chunks in order
//   (flash-decoding). head_dim <= 128 (attn_decode): one 16-row tile per block, the chunk spread
//   over 8 warps (32 positions' scores each, then head_dim columns each for P.V, every column
//   still walking the 16 k-steps in order), keys and values of the whole chunk loaded at once,
//   the value columns split over two blocks only when a test forces it (one block was faster at
//   every length measured). head_dim 256 and 512 (attn_split):
//   8 warps (4 for 512) of 16-row tiles over the staged sub-tiles, a 16-slot ring.
// - walk (prefill): block (rows, kv head) of 8 warps (4 for head_dim 256, 2 for 512) walks its
//   chunks in order and merges each into (M, L) in registers and A in shared memory.
// The softmax step tests positions only in a chunk where some row of the warp ends (elsewhere
// every position is every row's), skips 64-position groups past the warp's keys there, and takes
// its exps without branches (exp_f32_select, attention_internal.cuh).
// A block takes rows together only when their block-table entries for their keys equal those of
// its row with the most keys (rows of one sequence); otherwise it takes them one at a time.
#include <climits>

#include "kernels/cuda/attention_internal.cuh"

namespace lockstep::kernels::cuda {

namespace attn {
int rows_override = 0;
int path_override = 0;

// No variant of a launch fits this device's shared memory (every head_dim fits every supported
// device today, 99 KiB and up: this is for a device below that, or LOCKSTEP_CUDA_AS_CC's).
[[noreturn]] void refuse_smem(const char* launch_name, int hd, int bytes) {
  const DeviceCaps& d = device_caps();
  fail("CUDA attention: head_dim ", hd, " (", launch_name, ") needs ", bytes,
       " bytes of shared memory per block; ", d.name, " (launches chosen for compute capability ",
       d.cc / 10, ".", d.cc % 10, ") allows ", d.smem_optin);
}
}  // namespace attn

namespace {

using namespace attn;

// testing::attention_exp_mismatches: exp_f32_select against exp_f32 on inputs [begin, end),
// exp_f32_select<true> on those not > 0.
__global__ void exp_mismatch_kernel(uint64_t begin, uint64_t end, unsigned long long* count,
                                    unsigned* first) {
  for (uint64_t i = begin + blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < end;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const float x = __uint_as_float(static_cast<unsigned>(i));
    const unsigned want = __float_as_uint(exp_f32(x));
    if (__float_as_uint(exp_f32_select(x)) != want ||
        (!(x > 0.0f) && __float_as_uint(exp_f32_select<true>(x)) != want)) {
      atomicAdd(count, 1ull);
      atomicMin(first, static_cast<unsigned>(i));
    }
  }
}

}  // namespace

void attention(const float* q, int64_t T, const int32_t* block_tables, int64_t table_stride,
               const int32_t* n_keys, int64_t max_keys, int64_t n_heads, const KvLayerView& kv,
               float scale, float* out, int64_t window, int64_t rows_per_item) {
  if (T <= 0) return;
  if (window < 0 || window > (int64_t{1} << 30)) fail("CUDA attention: window ", window, " out of range");
  const int64_t hd = kv.head_dim;
  if (kv.n_kv_heads <= 0 || n_heads % kv.n_kv_heads != 0)
    fail("CUDA attention: ", n_heads, " query heads do not group over ", kv.n_kv_heads, " KV heads");
  const int64_t group = n_heads / kv.n_kv_heads;
  if (group > kMaxGroup)
    fail("CUDA attention: ", group, " query heads per KV head (at most ", kMaxGroup, " supported)");
  if (kv.block_tokens <= 0) fail("CUDA attention: block_tokens must be positive");
  if (kv.dtype != kKvDtype) fail("CUDA attention: the KV cache must be BF16");
  if (T > (int64_t{1} << 30) || max_keys > (int64_t{1} << 30))
    fail("CUDA attention: T = ", T, " or max_keys = ", max_keys, " too large");
  if (reinterpret_cast<uintptr_t>(q) % 16 != 0 || reinterpret_cast<uintptr_t>(kv.k) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(kv.v) % 16 != 0)
    fail("CUDA attention: q and the KV cache must be 16-byte aligned device pointers");
  AttnArgs a{};
  a.q = q;
  a.block_tables = block_tables;
  a.table_stride = table_stride;
  a.n_keys = n_keys;
  a.T = static_cast<int>(T);
  a.n_heads = static_cast<int>(n_heads);
  a.n_kv_heads = static_cast<int>(kv.n_kv_heads);
  a.group = static_cast<int>(group);
  a.block_tokens = static_cast<int>(kv.block_tokens);
  a.n_chunks = static_cast<int>(std::max<int64_t>(1, (max_keys + kChunk - 1) / kChunk));
  a.k = static_cast<const uint16_t*>(kv.k);
  a.v = static_cast<const uint16_t*>(kv.v);
  a.scale = scale;
  a.out = out;
  a.window = static_cast<int>(window);
  a.rows_hint = rows_per_item > 0 && rows_per_item <= 16 ? static_cast<int>(rows_per_item) : 0;
  switch (hd) {
    case 64: attn::run_attention<64>(a, T); break;
    case 128: attn::run_attention<128>(a, T); break;
    case 256: attn::run_attention<256>(a, T); break;
    case 512: attn::run_attention<512>(a, T); break;
    default: fail("CUDA attention: head_dim ", hd, " is not supported (64, 128, 256 or 512)");
  }
}

namespace testing {
void set_attention_rows_override(int rows) { attn::rows_override = rows; }
void set_attention_path_override(int path) { attn::path_override = path; }
uint64_t attention_exp_mismatches(uint32_t* first_bad) {
  unsigned long long* buf = nullptr;
  check(cudaMalloc(&buf, 16), "exp test: allocate");
  const unsigned init[4] = {0, 0, 0xffffffffu, 0};
  check(cudaMemcpyAsync(buf, init, 16, cudaMemcpyHostToDevice, stream()), "exp test: upload");
  note_stream_op();
  launch("exp_mismatch_kernel", exp_mismatch_kernel, 132 * 8, 256, 0, uint64_t{0},
         uint64_t{1} << 32, buf, reinterpret_cast<unsigned*>(buf + 1));
  unsigned out[4];
  check(cudaMemcpyAsync(out, buf, 16, cudaMemcpyDeviceToHost, stream()), "exp test: download");
  check(cudaStreamSynchronize(stream()), "exp test: sync");
  note_stream_op();
  check(cudaFree(buf), "exp test: free");
  if (first_bad) *first_bad = out[2];
  return static_cast<uint64_t>(out[0]) | (static_cast<uint64_t>(out[1]) << 32);
}
}  // namespace testing

}  // namespace lockstep::kernels::cuda
