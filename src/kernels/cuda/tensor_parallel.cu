// Linears as tensor-parallel ranks compute them (cuda_ops.h: linear_row_parallel,
// linear_column_parallel), run one rank after another on one GPU: the emulation that tests the
// split's bits wherever a single GPU is all there is.
//
// Column-parallel (q/k/v, gate/up, the lm_head): each rank holds whole output rows and walks the
// full K for them, so its rows are the one-GPU rows, provided the walk is the same: the piece
// count S comes from the weight's shape, N included (k_pieces.h), so a shard of N / R rows carries
// the whole weight's count (Weight::k_pieces) instead of its own (Qwen3-8B's gate/up, 12288 rows,
// walk K in 2 pieces; a 6144-row shard would otherwise walk it in 4).
//
// Row-parallel (o_proj, down_proj, the Gated DeltaNet's out_proj):
// a linear's output is ((a0 + a1) + a2) + a3 (+ bias), a_p the FP32 chain over piece p's k-steps
// (linear.cu). A rank holding a piece's weight columns walks exactly those k-steps when it runs
// that shard as one piece (linear_piece: the same k-steps from 0, in order; which kernel and
// tile run them never moves a bit), so it produces a_p itself. What a rank must not do is add
// its pieces together ((a0 + a1) is fine only as the first step of the fixed order, and
// (a2 + a3) never is), so every piece's partial stays separate until the merge, which adds all
// of them in piece order: the one-GPU arithmetic. Across GPUs the partials would travel by a
// fixed-order all-to-all (each rank receiving every piece's partial of its 1 / R of the output
// rows) and the merged slices by an all-gather; here the partials sit in one buffer and each
// rank's merge covers its own slice of the rows.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/linear_internal.cuh"

namespace lockstep::kernels::cuda {
namespace {

using namespace detail;

constexpr int kPieceXSlot = 7;    // detail::scratch slot of x's columns of one piece
constexpr int kPartialSlot = 8;   // detail::scratch slot of the pieces' partial sums
constexpr int kRankRowsSlot = 9;  // detail::scratch slot of one rank's output rows

int64_t emulated_calls = 0;  // tensor_parallel_calls

// y[m][n] for n in [n0, n1): the S partials ([S][M][N]) summed in piece order (sum_pieces), then
// + bias[n].
__global__ void merge_rank_rows(const float* __restrict__ part, int S, int64_t M, int64_t N,
                                int64_t n0, int64_t n1, const float* __restrict__ bias,
                                float* __restrict__ y) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t cols = n1 - n0;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= M * cols) return;
  const int64_t at = (i / cols) * N + n0 + i % cols;
  float v = lin::sum_pieces(part, M * N, at, S);
  if (bias) v = __fadd_rn(v, bias[n0 + i % cols]);
  y[at] = v;
}

}  // namespace

void linear_row_parallel(const float* x, int64_t M, const RowParallelShards& w, const float* bias,
                         float* y) {
  const int S = static_cast<int>(w.pieces.size());
  if (S == 0 || static_cast<int>(w.shards.size()) != S || w.ranks < 1)
    fail("CUDA linear_row_parallel: the weight has no shards");
  if (M <= 0) return;
  ++emulated_calls;
  const int64_t N = w.rows, K = w.cols;
  auto* part = static_cast<float*>(
      scratch(kPartialSlot, static_cast<size_t>(S) * M * N * sizeof(float)));
  int64_t widest = 0;
  for (const lin::KPiece& p : w.pieces) widest = std::max(widest, p.k1 - p.k0);
  auto* xp =
      static_cast<float*>(scratch(kPieceXSlot, static_cast<size_t>(M * widest) * sizeof(float)));
  // Each rank in turn: its pieces' partials, from its own shards and its columns of x.
  for (int r = 0; r < w.ranks; ++r)
    for (int p = 0; p < S; ++p) {
      if (w.pieces[p].rank != r) continue;
      const int64_t len = w.pieces[p].k1 - w.pieces[p].k0;
      copy_2d(xp, len, x + w.pieces[p].k0, K, M, len);
      linear_piece(xp, M, w.shards[p], part + p * M * N);
    }
  // Each rank merges every piece's partial of its 1 / R of the output rows.
  for (int r = 0; r < w.ranks; ++r) {
    const int64_t n0 = N * r / w.ranks, n1 = N * (r + 1) / w.ranks;
    if (n1 == n0) continue;
    launch("linear_row_parallel (merge)", merge_rank_rows, blocks_for(M * (n1 - n0), 256), 256, 0,
           part, S, M, N, n0, n1, bias, y);
  }
}

void linear_column_parallel(const float* x, int64_t M, const ColumnParallelShards& w,
                            const float* bias, float* y) {
  const int R = static_cast<int>(w.shards.size());
  if (R == 0 || static_cast<int>(w.row0.size()) != R + 1)
    fail("CUDA linear_column_parallel: the weight has no shards");
  if (M <= 0) return;
  ++emulated_calls;
  int64_t widest = 0;
  for (int r = 0; r < R; ++r) widest = std::max(widest, w.row0[r + 1] - w.row0[r]);
  auto* rank_y =
      static_cast<float*>(scratch(kRankRowsSlot, static_cast<size_t>(M * widest) * sizeof(float)));
  // Each rank its rows; the all-gather: each rank's rows copied to their place in y.
  for (int r = 0; r < R; ++r) {
    const int64_t n0 = w.row0[r], rows = w.row0[r + 1] - n0;
    if (rows == 0) continue;
    linear(x, M, w.shards[r], bias ? bias + n0 : nullptr, rank_y);
    copy_2d(y + n0, w.rows, rank_y, rows, M, rows);
  }
}

int64_t tensor_parallel_calls() { return emulated_calls; }

}  // namespace lockstep::kernels::cuda
