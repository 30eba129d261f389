// The fixed pieces of K that every CUDA linear walks (linear.cu states the whole schedule), and
// how a tensor-parallel split hands them to ranks. Plain C++ (no CUDA header), so the host code
// and the CPU tests read the same rule the kernels follow.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace lockstep::kernels::cuda::lin {

// S(N, K) pieces of Ks = ceil(K / 16 / S) * 16 k each (piece s: [s Ks, min(K, (s+1) Ks))), each
// with its own accumulator, summed in piece order at the end: ((a0 + a1) + a2) + a3. Chosen only
// from the weight's shape, so small-N layers get enough independent MMA chains to stream their
// weights at decode; every kernel uses the same pieces for a given (N, K).
inline int split_count(int64_t N, int64_t K) {
  const int64_t tiles = (N + 15) / 16;
  int S = tiles >= 1024 ? 1 : (tiles >= 512 ? 2 : 4);
  while (S > 1 && K < 256 * S) S /= 2;
  return S;
}
inline int split_len(int64_t K, int S) { return static_cast<int>((K / 16 + S - 1) / S * 16); }
// The pieces a placed weight's linears walk: its k_pieces when set (a shard's, from the whole
// weight), else split_count of its own shape.
inline int pieces_of(const Weight& w) {
  return w.k_pieces > 0 ? w.k_pieces : split_count(w.rows, w.cols);
}

// One piece of a row-parallel weight's K walk and the rank that holds it.
struct KPiece {
  int64_t k0 = 0, k1 = 0;  // the piece's columns [k0, k1)
  int rank = 0;
};
// The pieces of an N x K weight split over `ranks` ranks (row-parallel: each rank holds the weight
// columns, and computes the partial sums, of its pieces). Piece p goes to rank floor(p R / S):
// with R dividing S each rank holds S / R consecutive pieces; with R > S the pieces sit on ranks
// 0, R / S, 2 R / S, ... and the other ranks hold none of this weight (the walk is the model's and
// is never re-cut to fit R, so the bits are the one-GPU bits at every R); other R give each rank
// floor or ceil of S / R consecutive pieces. Every rank's pieces are consecutive and in order.
inline std::vector<KPiece> row_parallel_pieces(int64_t N, int64_t K, int ranks) {
  const int S = split_count(N, K);
  const int64_t Ks = split_len(K, S);
  std::vector<KPiece> pieces;
  for (int p = 0; p < S; ++p) {
    const int64_t k0 = p * Ks, k1 = k0 + Ks < K ? k0 + Ks : K;
    pieces.push_back({k0, k1, static_cast<int>(static_cast<int64_t>(p) * ranks / S)});
  }
  return pieces;
}

// The output rows of each of `ranks` ranks of a column-parallel N-row weight: rank r holds
// [row0[r], row0[r + 1]), row0[r] = floor(N r / R) rounded down to a multiple of 16 (the
// kernels' row tile), row0[R] = N. Which rows a rank holds never moves a bit (every row walks the
// whole K, with the whole weight's pieces); the real split follows heads and value groups.
inline std::vector<int64_t> column_parallel_rows(int64_t N, int ranks) {
  std::vector<int64_t> row0;
  for (int r = 0; r < ranks; ++r) row0.push_back(N * r / ranks / 16 * 16);
  row0.push_back(N);
  return row0;
}

}  // namespace lockstep::kernels::cuda::lin
