// KvPool on the CUDA backend: the cache holds BF16 (Backend::kv_dtype, kKvDtype: half the CPU's
// bytes), kv_write through the backend stores exactly bf16_rne of each key and value,
// copy_prefix copies those bits, and attention over the copy gives the original's bits.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/backend.h"
#include "models/kv_pool.h"
#include "cuda_test_util.h"

namespace lockstep::kernels::cuda::test {
namespace {

TEST_F(CudaTest, KvPoolStoresBf16AndCopiesItsBits) {
  auto be = make_cuda_backend();
  const int64_t L = 2, H = 2, D = 128, bt = 16, kvd = H * D, n = 40, nh = 4;
  KvPool pool(L, H, D, bt, 256, be.get());
  ASSERT_EQ(pool.dtype(), DType::BF16);
  EXPECT_EQ(pool.bytes_per_token(), 2 * L * kvd * 2);

  std::vector<int32_t> a;
  pool.reserve(a, n);
  std::vector<int32_t> slots(n);
  for (int64_t p = 0; p < n; ++p) slots[p] = pool.slot(a, p);
  Ints dslots = be->upload(slots);
  const int64_t layer_elems = pool.total_blocks() * bt * kvd;
  std::vector<std::vector<float>> ks, vs;
  for (int64_t l = 0; l < L; ++l) {
    ks.push_back(random_floats(n * kvd, 300 + static_cast<uint32_t>(l), -2.0f, 2.0f));
    vs.push_back(random_floats(n * kvd, 400 + static_cast<uint32_t>(l)));
    Floats k = be->upload(ks[l]), v = be->upload(vs[l]);
    const KvLayerView view = pool.layer(l);
    EXPECT_EQ(view.dtype, DType::BF16);
    be->kv_write(view, k.data(), v.data(), n, dslots.data());
  }
  auto host_layer = [&](int64_t l, bool values) {
    std::vector<uint16_t> h(layer_elems);
    const KvLayerView view = pool.layer(l);
    be->download(h.data(), values ? view.v : view.k, h.size() * 2);
    return h;
  };
  for (int64_t l = 0; l < L; ++l) {
    const auto hk = host_layer(l, false), hv = host_layer(l, true);
    for (int64_t p = 0; p < n; ++p)
      for (int64_t j = 0; j < kvd; ++j) {
        ASSERT_EQ(hk[slots[p] * kvd + j], f32_to_bf16(ks[l][p * kvd + j])) << l << " " << p;
        ASSERT_EQ(hv[slots[p] * kvd + j], f32_to_bf16(vs[l][p * kvd + j])) << l << " " << p;
      }
  }

  std::vector<int32_t> b;
  const int64_t m = 33;
  pool.copy_prefix(a, b, m);
  for (int64_t l = 0; l < L; ++l) {
    const auto hk = host_layer(l, false), hv = host_layer(l, true);
    for (int64_t p = 0; p < m; ++p) {
      const int64_t from = pool.slot(a, p) * kvd, to = pool.slot(b, p) * kvd;
      ASSERT_TRUE(same_bits(hk.data() + from, hk.data() + to, kvd)) << l << " " << p;
      ASSERT_TRUE(same_bits(hv.data() + from, hv.data() + to, kvd)) << l << " " << p;
    }
  }

  // One query row over the first m positions, from the original blocks and from the copy.
  Floats q = be->upload(random_floats(nh * D, 500, -2.0f, 2.0f));
  Ints nk = be->upload(std::vector<int32_t>{static_cast<int32_t>(m)});
  auto attend = [&](const std::vector<int32_t>& table) {
    Ints dt = be->upload(table);
    Floats out = be->array<float>(nh * D);
    AttentionBatch rows;
    rows.block_tables = dt.data();
    rows.table_stride = static_cast<int64_t>(table.size());
    rows.n_keys = nk.data();
    rows.max_keys = m;
    be->attention(q.data(), 1, rows, nh, pool.layer(1), 0.0883883f, out.data());
    return be->download(out.data(), nh * D);
  };
  const auto from_a = attend(a), from_b = attend(b);
  EXPECT_TRUE(same_bits(from_a.data(), from_b.data(), from_a.size()));
}

}  // namespace
}  // namespace lockstep::kernels::cuda::test
