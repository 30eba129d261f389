// KvPool on the CPU backend: float32 elements (Backend::kv_dtype), sizes by that element, layer
// views that carry the dtype, and copy_prefix copying a prefix's bits into new blocks.
#include "models/kv_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace lockstep {
namespace {

TEST(KvPool, CpuCacheIsF32AndCopyPrefixCopiesBits) {
  auto be = kernels::make_cpu_backend();
  const int64_t L = 3, H = 2, D = 8, bt = 4, kvd = H * D;
  KvPool pool(L, H, D, bt, 64, be.get());
  EXPECT_EQ(pool.dtype(), DType::F32);
  EXPECT_EQ(pool.bytes_per_token(), 2 * L * kvd * 4);

  std::vector<int32_t> a;
  pool.reserve(a, 10);
  EXPECT_EQ(pool.bytes_in_use(), 3 * bt * pool.bytes_per_token());
  std::vector<int32_t> slots(10);
  for (int64_t p = 0; p < 10; ++p) slots[p] = pool.slot(a, p);
  for (int64_t l = 0; l < L; ++l) {
    const kernels::KvLayerView view = pool.layer(l);
    EXPECT_EQ(view.dtype, DType::F32);
    std::vector<float> k(10 * kvd), v(10 * kvd);
    for (size_t i = 0; i < k.size(); ++i) {
      k[i] = static_cast<float>(l * 1000 + i) * 0.37f;
      v[i] = -static_cast<float>(l * 1000 + i) * 1.13f;
    }
    be->kv_write(view, k.data(), v.data(), 10, slots.data());
  }

  std::vector<int32_t> b;
  pool.copy_prefix(a, b, 7);
  EXPECT_EQ(b.size(), 2u);
  for (int64_t l = 0; l < L; ++l) {
    const kernels::KvLayerView view = pool.layer(l);
    const auto* k = static_cast<const float*>(view.k);
    const auto* v = static_cast<const float*>(view.v);
    for (int64_t p = 0; p < 7; ++p) {
      const int64_t from = pool.slot(a, p) * kvd, to = pool.slot(b, p) * kvd;
      EXPECT_EQ(std::memcmp(k + from, k + to, kvd * sizeof(float)), 0) << "layer " << l << " pos " << p;
      EXPECT_EQ(std::memcmp(v + from, v + to, kvd * sizeof(float)), 0) << "layer " << l << " pos " << p;
      EXPECT_EQ(k[from], static_cast<float>(l * 1000 + p * kvd) * 0.37f);
    }
  }
}

}  // namespace
}  // namespace lockstep
