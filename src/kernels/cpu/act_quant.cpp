// quantize_acts() (cpu/act_quant.h) for every Highway target. Every step is one the definition
// in quant_int8.h names: an exact maximum, the scalar division for d and inv, one float32
// product and a round-to-nearest-even conversion per element (NearestInt), an exact int32 sum.
// The 4-bit order is a byte shuffle of the finished codes.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/act_quant.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/fma_targets.h"
#include "kernels/cpu/vec_math-inl.h"
#include "kernels/quant_int8.h"
#include "kernels/ref/quant_int8_ref.h"
#include "kernels/schedule.h"

HWY_BEFORE_NAMESPACE();
namespace lockstep::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void QuantizeActs(const float* x, int64_t M, int64_t K, int64_t block, Int8Acts& a) {
#if LOCKSTEP_HWY_NO_FMA
  ref::quantize_acts(x, M, K, block, a);
#else
  // kN lanes at compile time and at run time (on scalable SVE too: see vec_math-inl.h).
  using DF = vm::ScheduleTag;
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<int8_t, DF> d8;
  constexpr int64_t kN = hn::MaxLanes(DF());
  a.M = M;
  a.K = K;
  a.block = block;
  a.blocks = K / block;
  a.blocks_padded = (a.blocks + kLanes - 1) / kLanes * kLanes;
  a.q.resize(static_cast<size_t>(M * K));
  a.d.assign(static_cast<size_t>(M * a.blocks_padded), 0.0f);
  a.e.assign(a.d.size(), 0.0f);
  a.sum.assign(a.d.size(), 0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < a.blocks; ++b) {
      const float* xb = x + m * K + b * block;
      int8_t* qb = a.q.data() + m * K + b * block;
      auto mx = hn::Zero(df);
      for (int64_t i = 0; i < block; i += kN) mx = hn::Max(mx, hn::Abs(hn::LoadU(df, xb + i)));
      const float amax = hn::GetLane(hn::MaxOfLanes(df, mx));
      const float d = amax / 127.0f;
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      const auto vinv = hn::Set(df, inv);
      auto sum = hn::Zero(di);
      for (int64_t i = 0; i < block; i += kN) {
        const auto qi = hn::NearestInt(hn::Mul(hn::LoadU(df, xb + i), vinv));
        sum = hn::Add(sum, qi);
        hn::StoreU(hn::DemoteTo(d8, qi), d8, qb + i);
      }
      const int64_t at = m * a.blocks_padded + b;
      a.d[at] = d;
      a.sum[at] = hn::GetLane(hn::SumOfLanes(di, sum));
      a.e[at] = d * static_cast<float>(a.sum[at]);
    }
  a.qnib.clear();
  if (K % kNibbleBlock != 0) return;
  a.qnib.resize(a.q.size());
  const hn::Repartition<int8_t, DF> db;  // full vectors of bytes
  constexpr int64_t kB = hn::MaxLanes(db), kHalf = kNibbleBlock / 2;
  for (int64_t s = 0; s < M * K; s += kNibbleBlock)
    for (int64_t i = 0; i < kHalf; i += kB) {
      const auto lo = hn::LoadU(db, a.q.data() + s + 2 * i);
      const auto hi = hn::LoadU(db, a.q.data() + s + 2 * i + kB);
      hn::StoreU(hn::ConcatEven(db, hi, lo), db, a.qnib.data() + s + i);
      hn::StoreU(hn::ConcatOdd(db, hi, lo), db, a.qnib.data() + s + kHalf + i);
    }
#endif
}

}  // namespace lockstep::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/error.h"
#include "kernels/cpu/act_quant.h"

namespace lockstep::kernels {
HWY_EXPORT(QuantizeActs);

void quantize_acts(const float* x, int64_t M, int64_t K, int64_t block, Int8Acts& a) {
  HWY_DYNAMIC_DISPATCH(QuantizeActs)(x, M, K, block, a);
}

void interleave_groups(Int8Acts& a, int bits) {
  const int64_t B = a.block, per_word = 32 / bits, words = B / per_word, row = a.blocks_padded * B;
  const int64_t word_bytes = bits == 4 ? 128 : 64;  // qgrp bytes per word of a chunk
  LOCKSTEP_CHECK(interleaved_groups(bits, B) && a.blocks_padded % kLanes == 0);
  a.grp_bits = bits;
  a.qgrp.assign(static_cast<size_t>(a.M * row), 0);
  for (int64_t m = 0; m < a.M; ++m) {
    const int8_t* q = a.row(m);
    int8_t* out = a.qgrp.data() + m * row;
    for (int64_t g = 0; g < a.blocks; ++g) {
      const int64_t chunk = g / kLanes, lane = g % kLanes;
      for (int64_t k = 0; k < words; ++k) {
        int8_t* o = out + (chunk * words + k) * word_bytes + 4 * lane;
        const int8_t* src = q + g * B + k * per_word;
        for (int t = 0; t < 4; ++t) {
          if (bits == 4) {
            o[t] = src[2 * t];           // the low nibble of the word's byte t
            o[64 + t] = src[2 * t + 1];  // the high nibble
          } else {
            o[t] = src[t];
          }
        }
      }
    }
  }
}

}  // namespace lockstep::kernels
#endif
