// Tensor parallelism emulated on one GPU (cuda_tp_emulation.h): the ranks' shards of row- and
// column-parallel weights, and the dispatch of their linears to kernels/cuda/tensor_parallel.cu.
#ifdef LOCKSTEP_HAVE_CUDA

#include "kernels/cuda_tp_emulation.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "kernels/cuda_host_rows.h"
#include "kernels/quant_gpu_layout.h"

namespace lockstep::kernels {

namespace {

// Rows [n0, n1) of a placed weight, walking K in the whole weight's pieces.
Weight rows_view(const Weight& w, int64_t n0, int64_t n1) {
  Weight v = w;
  v.rows = n1 - n0;
  v.k_pieces = cuda::lin::pieces_of(w);
  if (w.quant == QuantFormat::None) {
    v.data = static_cast<const uint16_t*>(w.data) + n0 * w.cols;
  } else {  // codes and scale/bias pairs are row-major (quant_gpu_layout.h)
    v.data = static_cast<const uint8_t*>(w.data) + n0 * (w.cols * w.bits / 8);
    v.scales = static_cast<const uint8_t*>(w.scales) +
               n0 * (w.cols / w.group_size) * gpu_pair_entry_bytes(w);
  }
  return v;
}

}  // namespace

std::unique_ptr<TensorParallelEmulation> TensorParallelEmulation::from_env() {
  const char* tp = std::getenv("LOCKSTEP_CUDA_TP_EMULATE");
  if (!tp || !*tp) return nullptr;
  char* end = nullptr;
  const long r = std::strtol(tp, &end, 10);
  if (*end != '\0' || r < 1 || r > 64)
    fail("LOCKSTEP_CUDA_TP_EMULATE=", tp, ": expected a rank count from 1 to 64");
  std::fprintf(stderr,
               "cuda: emulating tensor parallelism over %ld ranks on one GPU (column-parallel "
               "linears by rows; row-parallel ones as per-rank K-piece partials, merged in piece "
               "order)\n",
               r);
  return std::make_unique<TensorParallelEmulation>(static_cast<int>(r));
}

TensorParallelEmulation::~TensorParallelEmulation() {
  std::fprintf(stderr,
               "cuda: tensor-parallel emulation over %d ranks: %zu row-parallel and %zu "
               "column-parallel weights here, %lld emulated linear calls in this process (a "
               "recorded step's once)\n",
               ranks_, row_.size(), column_.size(),
               static_cast<long long>(cuda::tensor_parallel_calls()));
  for (void* p : memory_) cuda::free_device(p);
}

Weight TensorParallelEmulation::place_row_parallel(
    const Weight& host, ThreadPool& threads, const std::function<Weight(const Weight&)>& place) {
  cuda::RowParallelShards sh;
  sh.ranks = ranks_;
  sh.rows = host.rows;
  sh.cols = host.cols;
  sh.pieces = cuda::lin::row_parallel_pieces(host.rows, host.cols, ranks_);
  for (const cuda::lin::KPiece& p : sh.pieces) {
    Weight shard;
    shard.dtype = DType::BF16;
    shard.rows = host.rows;
    shard.cols = p.k1 - p.k0;
    void* mem = cuda::malloc_device(static_cast<size_t>(shard.rows * shard.cols) * 2);
    memory_.push_back(mem);
    shard.data = mem;
    sh.shards.push_back(shard);
  }
  std::vector<uint16_t> piece_rows;
  for_bf16_row_blocks(host, threads, [&](int64_t r0, int64_t n, const uint16_t* rows) {
    for (size_t i = 0; i < sh.pieces.size(); ++i) {
      const int64_t k0 = sh.pieces[i].k0, len = sh.pieces[i].k1 - k0;
      piece_rows.resize(static_cast<size_t>(n * len));
      for (int64_t r = 0; r < n; ++r)
        std::copy_n(rows + r * host.cols + k0, len, piece_rows.data() + r * len);
      cuda::upload(static_cast<uint16_t*>(const_cast<void*>(sh.shards[i].data)) + r0 * len,
                   piece_rows.data(), piece_rows.size() * 2);
      cuda::synchronize();  // piece_rows is reused
    }
  });
  const Weight w = place(host);
  row_[w.data] = std::move(sh);
  return w;
}

void TensorParallelEmulation::add_column_parallel(const Weight& placed) {
  if (column_.count(placed.data)) return;
  cuda::ColumnParallelShards sh;
  sh.rows = placed.rows;
  sh.cols = placed.cols;
  sh.row0 = cuda::lin::column_parallel_rows(placed.rows, ranks_);
  for (int r = 0; r < ranks_; ++r)
    sh.shards.push_back(rows_view(placed, sh.row0[r], sh.row0[r + 1]));
  column_[placed.data] = std::move(sh);
}

bool TensorParallelEmulation::linear(const float* x, int64_t M, const Weight& w, const float* bias,
                                     float* y) const {
  if (auto it = row_.find(w.data); it != row_.end()) {
    cuda::linear_row_parallel(x, M, it->second, bias, y);
    return true;
  }
  if (auto it = column_.find(w.data); it != column_.end()) {
    cuda::linear_column_parallel(x, M, it->second, bias, y);
    return true;
  }
  return false;
}

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_HAVE_CUDA
