// Tensor parallelism emulated on one GPU (cuda_ops.h: linear_piece, linear_row_parallel,
// linear_column_parallel; the rules in k_pieces.h): a row-parallel split (each rank's K pieces as
// separate partials, merged in piece order) and a column-parallel one (each rank its output rows,
// walking K in the whole weight's pieces) give bitwise linear() of the whole weight, at every rank
// count, M, kernel and forced tile; a row shard that walked K in its own shape's pieces would not;
// and the backend under LOCKSTEP_CUDA_TP_EMULATE runs its weights (BF16, F32, 4-bit) that way with
// the same bits.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "cuda_test_util.h"
#include "kernels/backend.h"
#include "kernels/quant_format.h"
#include "quant_test_util.h"

namespace lockstep::kernels::cuda::test {
namespace {

// Piece p's columns of a host [N][K] BF16 matrix, on the device.
struct Shards {
  std::vector<DeviceBuffer<uint16_t>> buf;
  std::vector<Weight> w;
};
Shards cut(const std::vector<uint16_t>& host, int64_t N, int64_t K) {
  Shards s;
  for (const lin::KPiece& p : lin::row_parallel_pieces(N, K, 1)) {
    const int64_t len = p.k1 - p.k0;
    std::vector<uint16_t> part(static_cast<size_t>(N * len));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < len; ++k) part[n * len + k] = host[n * K + p.k0 + k];
    s.buf.emplace_back(part);
    s.w.push_back(bf16_weight(s.buf.back().get(), N, len));
  }
  return s;
}

struct Reset {
  ~Reset() {
    testing::set_linear_tile_override(0);
    testing::set_linear_skinny_override(0);
  }
};

// Row-parallel shapes of published models: Qwen3-0.6B o_proj, Qwen3-8B o_proj and down, the
// Qwen3.5-35B-A3B out_proj / o_proj (hidden 2048), Qwen3-32B down (hidden 5120), a 70B-class
// o_proj (hidden 8192: 2 pieces), a K whose last piece is shorter (4112), and a one-piece weight.
struct Shape {
  int64_t N, K;
};
constexpr Shape kShapes[] = {{1024, 2048}, {4096, 4096}, {4096, 12288}, {2048, 4096},
                             {5120, 25600}, {8192, 8192}, {2048, 4112}, {16384, 1024}};

TEST_F(CudaTest, RowParallelRanksGiveTheLinearBitwise) {
  Reset reset;
  for (const Shape& sh : kShapes) {
    const int64_t N = sh.N, K = sh.K;
    const auto host = random_bf16(static_cast<size_t>(N * K), 31 + static_cast<uint32_t>(N + K));
    DeviceBuffer<uint16_t> dw(host);
    const Weight whole = bf16_weight(dw.get(), N, K);
    const Shards shards = cut(host, N, K);
    DeviceBuffer<float> bias(random_floats(static_cast<size_t>(N), 7));
    // (M, forced tile for M > 16, forced M <= 16 config; 0: the kernels' own picks)
    struct Run {
      int64_t M;
      int tile, config;
    };
    std::vector<Run> runs;
    for (int64_t M : {1, 3, 8, 16, 17, 40, 64, 65, 300}) runs.push_back({M, 0, 0});
    for (int c = 1; c <= testing::set_linear_skinny_override(0); ++c) runs.push_back({4, 0, c});
    for (int tile : wgmma_tiles_here()) runs.push_back({130, tile, 0});
    runs.push_back({130, -1, 0});  // the mma.sync tiles
    for (const Run& run : runs) {
      const int64_t M = run.M;
      testing::set_linear_tile_override(run.tile);
      testing::set_linear_skinny_override(run.config);
      DeviceBuffer<float> x(random_floats(static_cast<size_t>(M * K), 40 + static_cast<uint32_t>(M),
                                          -2.0f, 2.0f));
      DeviceBuffer<float> ref(static_cast<size_t>(M * N)), got(static_cast<size_t>(M * N));
      for (const float* b :
           {static_cast<const float*>(nullptr), static_cast<const float*>(bias.get())}) {
        linear(x.get(), M, whole, b, ref.get());
        const auto want = ref.to_host();
        for (int R : {1, 2, 3, 4, 8}) {
          RowParallelShards rp;
          rp.ranks = R;
          rp.rows = N;
          rp.cols = K;
          rp.pieces = lin::row_parallel_pieces(N, K, R);
          rp.shards = shards.w;
          fill_zero(got.get(), static_cast<size_t>(M * N) * sizeof(float));
          linear_row_parallel(x.get(), M, rp, b, got.get());
          const auto have = got.to_host();
          ASSERT_TRUE(same_bits(have.data(), want.data(), have.size()))
              << N << "x" << K << " M=" << M << " R=" << R << " tile " << run.tile << " config "
              << run.config << (b ? " bias" : "") << ": "
              << diff_summary(have.data(), want.data(), have.size());
        }
      }
    }
  }
}

// Column-parallel: each rank's rows, as a view with the whole weight's piece count, are the whole
// weight's rows (every kernel family's M); the same view walking its own shape's pieces is not,
// where N / R crosses the rule's thresholds (12288 rows walk K in 2 pieces, 6144 in 4; 16400 in 1,
// 8192 in 2), which is why a shard carries Weight::k_pieces.
TEST_F(CudaTest, ColumnParallelRanksGiveTheLinearBitwise) {
  Reset reset;
  int own_walks = 0;  // shards whose own shape walks K otherwise (the control below ran)
  for (const Shape& sh :
       {Shape{12288, 4096}, Shape{16400, 1024}, Shape{4096, 4096}, Shape{1040, 2048}}) {
    const int64_t N = sh.N, K = sh.K;
    DeviceBuffer<uint16_t> dw(
        random_bf16(static_cast<size_t>(N * K), 61 + static_cast<uint32_t>(N)));
    const Weight whole = bf16_weight(dw.get(), N, K);
    DeviceBuffer<float> bias(random_floats(static_cast<size_t>(N), 8));
    for (int64_t M : {1, 5, 16, 17, 64, 65, 300}) {
      DeviceBuffer<float> x(random_floats(static_cast<size_t>(M * K), 70 + static_cast<uint32_t>(M),
                                          -2.0f, 2.0f));
      DeviceBuffer<float> ref(static_cast<size_t>(M * N)), got(static_cast<size_t>(M * N));
      linear(x.get(), M, whole, bias.get(), ref.get());
      const auto want = ref.to_host();
      for (int R : {1, 2, 4, 8}) {
        ColumnParallelShards cp;
        cp.rows = N;
        cp.cols = K;
        cp.row0 = lin::column_parallel_rows(N, R);
        for (int r = 0; r < R; ++r) {
          Weight v = bf16_weight(dw.get() + cp.row0[r] * K, cp.row0[r + 1] - cp.row0[r], K);
          if (lin::split_count(v.rows, K) != lin::split_count(N, K) && M == 1) {
            // The shard walking its own shape's pieces: other bits.
            ++own_walks;
            DeviceBuffer<float> own(static_cast<size_t>(v.rows));
            linear(x.get(), 1, v, bias.get() + cp.row0[r], own.get());
            const auto o = own.to_host();
            EXPECT_FALSE(same_bits(o.data(), want.data() + cp.row0[r], o.size()))
                << N << "x" << K << " R=" << R << " rank " << r << ": its own walk, the same bits?";
          }
          v.k_pieces = lin::split_count(N, K);
          cp.shards.push_back(v);
        }
        fill_zero(got.get(), static_cast<size_t>(M * N) * sizeof(float));
        linear_column_parallel(x.get(), M, cp, bias.get(), got.get());
        const auto have = got.to_host();
        ASSERT_TRUE(same_bits(have.data(), want.data(), have.size()))
            << N << "x" << K << " M=" << M << " R=" << R << ": "
            << diff_summary(have.data(), want.data(), have.size());
      }
    }
  }
  EXPECT_GE(own_walks, 4);
}

std::unique_ptr<Backend> make_cuda_backend_with_tp(int R) {
  setenv("LOCKSTEP_CUDA_TP_EMULATE", std::to_string(R).c_str(), 1);
  auto be = make_cuda_backend();
  unsetenv("LOCKSTEP_CUDA_TP_EMULATE");
  return be;
}

// The backend: LOCKSTEP_CUDA_TP_EMULATE=R cuts place_row_parallel's weights into R ranks' K-piece
// shards and place_column_parallel's into R ranks' rows (views, quantized ones included), and its
// linear() runs them (the emulation's call count says so); the results are the whole weight's
// linear (run directly here) for a BF16, an F32 (rounded to BF16 when placed) and a 4-bit weight,
// at every kernel family's M.
TEST_F(CudaTest, TensorParallelEmulationInTheBackendKeepsTheBits) {
  ThreadPool pool(2);
  // 12288 rows walk K in 2 pieces (a 6144-row shard's own shape would give 4).
  const int64_t N = 12288, K = 2048;
  const auto src = random_bf16(static_cast<size_t>(N * K), 91, 0.05f);
  const Weight bf = bf16_weight(src.data(), N, K);
  std::vector<float> f32(src.size());
  for (size_t i = 0; i < src.size(); ++i) f32[i] = bf16_to_f32(src[i]) * 1.0009765625f;
  Weight wf = bf;
  wf.dtype = DType::F32;
  wf.data = f32.data();
  const QuantizedMatrix q4 = quantize_affine(bf, 4, 64, DType::BF16, pool);
  for (int R : {2, 4, 8})
    for (const Weight& host : {bf, wf, q4.view()})
      for (bool by_k : {true, false}) {
        // A backend per case: its placed-weight cache is keyed by host address.
        auto be = make_cuda_backend_with_tp(R);
        auto place = [&] {
          return by_k ? be->place_row_parallel(host) : be->place_column_parallel(host);
        };
        const Weight placed = place();
        EXPECT_EQ(place().data, placed.data);  // placed once
        const std::string what = std::to_string(R) + " ranks, " +
                                 (by_k ? "row" : "column") + "-parallel " +
                                 (host.quant != QuantFormat::None ? quant_name(host)
                                                                  : std::string(dtype_name(host.dtype)));
        for (int64_t M : {1, 7, 17, 64, 65, 300}) {
          const int64_t calls = tensor_parallel_calls();
          Floats x = be->upload(random_floats(static_cast<size_t>(M * K),
                                              50 + static_cast<uint32_t>(M), -2.0f, 2.0f));
          Floats ya = be->array<float>(M * N), yb = be->array<float>(M * N);
          be->linear(x.data(), M, placed, nullptr, ya.data());  // the ranks' shards
          EXPECT_EQ(tensor_parallel_calls(), calls + 1) << what << ": no emulation";
          linear(x.data(), M, placed, nullptr, yb.data());  // the whole weight
          const auto a = be->download(ya.data(), M * N), b = be->download(yb.data(), M * N);
          ASSERT_TRUE(same_bits(a.data(), b.data(), a.size()))
              << what << " M=" << M << ": " << diff_summary(a.data(), b.data(), a.size());
        }
      }
  setenv("LOCKSTEP_CUDA_TP_EMULATE", "0", 1);
  try {
    auto be = make_cuda_backend();
    ADD_FAILURE() << "LOCKSTEP_CUDA_TP_EMULATE=0 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LOCKSTEP_CUDA_TP_EMULATE=0"), std::string::npos)
        << e.what();
  }
  unsetenv("LOCKSTEP_CUDA_TP_EMULATE");
}

}  // namespace
}  // namespace lockstep::kernels::cuda::test
