// The CUDA linears' K pieces and the tensor-parallel rule that hands them to ranks
// (kernels/cuda/k_pieces.h: plain C++, tested here on the CPU).
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/k_pieces.h"

namespace lockstep::kernels::cuda::lin {
namespace {

std::vector<int> ranks_of(int64_t N, int64_t K, int R) {
  std::vector<int> r;
  for (const KPiece& p : row_parallel_pieces(N, K, R)) r.push_back(p.rank);
  return r;
}

TEST(KPieces, PiecesOfPublishedRowParallelShapes) {
  // Qwen3-8B o_proj / down (hidden 4096): 4 pieces; two ranks hold two each, four one each.
  EXPECT_EQ(ranks_of(4096, 4096, 1), (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(ranks_of(4096, 12288, 2), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(ranks_of(4096, 12288, 4), (std::vector<int>{0, 1, 2, 3}));
  // Eight ranks: pieces on every other rank (the walk is never re-cut to fit the ranks).
  EXPECT_EQ(ranks_of(4096, 12288, 8), (std::vector<int>{0, 2, 4, 6}));
  // A 70B-class hidden size of 8192: 2 pieces.
  EXPECT_EQ(ranks_of(8192, 28672, 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(ranks_of(8192, 8192, 4), (std::vector<int>{0, 2}));
  // Three ranks over four pieces: 2, 1, 1 consecutive pieces.
  EXPECT_EQ(ranks_of(4096, 4096, 3), (std::vector<int>{0, 0, 1, 2}));
  // lm_head-sized N: one piece, on rank 0.
  EXPECT_EQ(ranks_of(151936, 4096, 4), (std::vector<int>{0}));
}

TEST(KPieces, PiecesTileKInOrderAndEachRankHoldsAConsecutiveRun) {
  for (int64_t N : {16, 1024, 2048, 4096, 5120, 8192, 16384, 20000})
    for (int64_t K : {16, 256, 512, 1008, 1024, 4112, 12288, 25600, 28672})
      for (int R : {1, 2, 3, 4, 5, 8, 16}) {
        const std::vector<KPiece> ps = row_parallel_pieces(N, K, R);
        const int S = split_count(N, K);
        ASSERT_EQ(static_cast<int>(ps.size()), S) << N << "x" << K;
        int64_t at = 0;
        std::vector<int> held(R, 0);
        for (size_t p = 0; p < ps.size(); ++p) {
          EXPECT_EQ(ps[p].k0, at) << N << "x" << K << " R=" << R << " piece " << p;
          EXPECT_GT(ps[p].k1, ps[p].k0);
          EXPECT_EQ(ps[p].k0 % 16, 0);
          EXPECT_EQ((ps[p].k1 - ps[p].k0) % 16, 0);  // K is a multiple of 16 in every case here
          EXPECT_EQ(ps[p].k1 - ps[p].k0 <= split_len(K, S), true);
          ASSERT_GE(ps[p].rank, 0);
          ASSERT_LT(ps[p].rank, R);
          if (p > 0) {
            EXPECT_GE(ps[p].rank, ps[p - 1].rank);  // consecutive runs, in rank order
          }
          ++held[ps[p].rank];
          at = ps[p].k1;
        }
        EXPECT_EQ(at, K);
        for (int r = 0; r < R; ++r) {
          const int want_lo = S % R == 0 ? S / R : (R > S ? 0 : S / R);
          const int want_hi = S % R == 0 ? S / R : (R > S ? 1 : S / R + 1);
          EXPECT_GE(held[r], want_lo) << N << "x" << K << " R=" << R << " rank " << r;
          EXPECT_LE(held[r], want_hi) << N << "x" << K << " R=" << R << " rank " << r;
        }
      }
}

TEST(KPieces, ColumnParallelRowsCoverNInRankOrderOnTileBoundaries) {
  EXPECT_EQ(column_parallel_rows(12288, 2), (std::vector<int64_t>{0, 6144, 12288}));
  EXPECT_EQ(column_parallel_rows(151936, 8).back(), 151936);
  for (int64_t N : {1, 16, 100, 1040, 4096, 12288, 151936})
    for (int R : {1, 2, 3, 4, 8}) {
      const std::vector<int64_t> row0 = column_parallel_rows(N, R);
      ASSERT_EQ(static_cast<int>(row0.size()), R + 1);
      EXPECT_EQ(row0[0], 0);
      EXPECT_EQ(row0[R], N);
      for (int r = 0; r < R; ++r) {
        EXPECT_LE(row0[r], row0[r + 1]) << N << " R=" << R;
        EXPECT_EQ(row0[r] % 16, 0) << N << " R=" << R;
      }
    }
}

TEST(KPieces, AShardCarriesTheWholeWeightsPieceCount) {
  Weight w;
  w.rows = 12288;
  w.cols = 4096;
  EXPECT_EQ(pieces_of(w), 2);
  w.rows = 6144;  // half of its rows: its own shape says 4
  EXPECT_EQ(pieces_of(w), 4);
  w.k_pieces = 2;
  EXPECT_EQ(pieces_of(w), 2);
}

}  // namespace
}  // namespace lockstep::kernels::cuda::lin
