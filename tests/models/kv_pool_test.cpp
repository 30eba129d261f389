// KvPool on the CPU backend: float32 elements (Backend::kv_dtype), sizes by that element, layer
// views that carry the dtype, copy_prefix copying a prefix's bits into new blocks, and reference
// counted blocks: sharing takes no memory, a block returns with its last holder, and a holder
// about to write into a block another holder reads gets its own copy first.
#include "models/kv_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/error.h"

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

namespace lockstep {
namespace {

// Fills every position of `blocks` (all layers, keys and values) with values that name the
// position and `tag`, so a test can see whose bits a block holds.
void fill(kernels::Backend& be, KvPool& pool, const std::vector<int32_t>& blocks, int64_t from,
          int64_t to, float tag) {
  for (int64_t l = 0; l < 2; ++l) {
    const kernels::KvLayerView view = pool.layer(l);
    const int64_t kvd = view.n_kv_heads * view.head_dim, n = to - from;
    std::vector<float> k(n * kvd), v(n * kvd);
    std::vector<int32_t> slots(n);
    for (int64_t p = 0; p < n; ++p) {
      slots[p] = pool.slot(blocks, from + p);
      for (int64_t j = 0; j < kvd; ++j) {
        k[p * kvd + j] = tag + static_cast<float>((from + p) * 100 + j + l * 10000);
        v[p * kvd + j] = -k[p * kvd + j];
      }
    }
    be.kv_write(view, k.data(), v.data(), n, slots.data());
  }
}

float key_at(const KvPool& pool, const std::vector<int32_t>& blocks, int64_t p) {
  const kernels::KvLayerView view = pool.layer(0);
  return static_cast<const float*>(view.k)[pool.slot(blocks, p) * view.n_kv_heads * view.head_dim];
}

TEST(KvPool, SharedBlocksCountOnceAndReturnWithTheirLastHolder) {
  auto be = kernels::make_cpu_backend();
  KvPool pool(2, 1, 4, 4, 64, be.get());  // 16 blocks of 4 tokens
  std::vector<int32_t> a, b, c;
  pool.reserve(a, 10);  // 3 blocks
  EXPECT_EQ(pool.free_blocks(), 13);
  pool.share_prefix(a, b, 8);  // the 2 full blocks
  pool.share_prefix(a, c, 10);
  EXPECT_EQ(pool.free_blocks(), 13) << "sharing must not take blocks";
  EXPECT_EQ(b, std::vector<int32_t>(a.begin(), a.begin() + 2));
  EXPECT_EQ(pool.holders(a[0]), 3);
  EXPECT_EQ(pool.holders(a[2]), 2);
  pool.shrink(a, 0);
  EXPECT_EQ(pool.free_blocks(), 13) << "blocks still held by b and c went back";
  pool.shrink(c, 0);
  EXPECT_EQ(pool.free_blocks(), 14);  // the third block had only a and c
  EXPECT_EQ(pool.holders(b[0]), 1);
  pool.shrink(b, 0);
  EXPECT_EQ(pool.free_blocks(), 16);
  EXPECT_THROW(pool.release(0), Error);  // a free block has no holder to let go
}

TEST(KvPool, WritingIntoASharedBlockCopiesItFirst) {
  auto be = kernels::make_cpu_backend();
  KvPool pool(2, 1, 4, 4, 64, be.get());
  std::vector<int32_t> a, b;
  pool.reserve(a, 10);
  fill(*be, pool, a, 0, 10, 0.5f);
  pool.share_prefix(a, b, 10);  // b holds a's 10 tokens; its next write would go into a[2]
  EXPECT_FALSE(pool.writable(b, 10));
  EXPECT_TRUE(pool.writable(b, 12)) << "past the shared blocks (none held there)";
  const int64_t free = pool.free_blocks();
  pool.make_writable(b, 10);
  EXPECT_EQ(pool.free_blocks(), free - 1) << "only the partly filled block is copied";
  EXPECT_EQ(b[0], a[0]);
  EXPECT_EQ(b[1], a[1]);
  EXPECT_NE(b[2], a[2]);
  EXPECT_TRUE(pool.writable(b, 10));
  EXPECT_TRUE(pool.writable(a, 10)) << "a's last block is its own again";
  for (int64_t p = 8; p < 10; ++p) EXPECT_EQ(key_at(pool, b, p), key_at(pool, a, p)) << p;
  // b writes its next positions; a's bits stay.
  fill(*be, pool, b, 10, 12, 7.25f);
  for (int64_t p = 0; p < 10; ++p) EXPECT_EQ(key_at(pool, a, p), 0.5f + p * 100) << p;

  // Going back into a shared full block (a truncate) un-shares it the same way.
  pool.shrink(b, 6);
  EXPECT_FALSE(pool.writable(b, 6));
  pool.make_writable(b, 6);
  EXPECT_NE(b[1], a[1]);
  EXPECT_EQ(b[0], a[0]) << "blocks wholly below the length stay shared";
  fill(*be, pool, b, 6, 8, 9.0f);
  EXPECT_EQ(key_at(pool, a, 6), 0.5f + 600);
  EXPECT_EQ(key_at(pool, b, 5), key_at(pool, a, 5));
}

}  // namespace
}  // namespace lockstep
