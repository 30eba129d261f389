// CUDA attention, full and with a sliding window: a row's output bits do not depend on T, on the
// row's position in the call, on the other rows (their number, lengths or sequences), on
// max_keys, on the KV block size, on the rows per block or on which launch ran (split chunks +
// merge, decode's, or the walk, prefill's);
// accuracy against an FP64 reference with tolerances for BF16 inputs. The device cache is BF16
// (kKvDtype), built here by rounding the host keys and values as kv_write does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "cuda_test_util.h"

namespace lockstep::kernels::cuda::test {
namespace {

constexpr int64_t kLen = 1300;  // positions of the one sequence

struct Shape {
  int64_t n_heads, n_kv_heads, head_dim;
  int64_t window = 0;  // > 0: sliding-window attention (a row sees its last `window` keys)
};

int64_t first_key(int64_t window, int64_t n) { return window > 0 && n > window ? n - window : 0; }

// One sequence's keys and values, [position][kv head][head_dim], laid out in a paged cache of
// `bt`-position blocks in a scrambled block order.
struct PagedCache {
  int64_t bt, n_blocks;
  std::vector<int32_t> table;   // logical block -> physical block
  std::vector<int32_t> table2;  // a second copy of the same positions in other blocks
  std::vector<float> k, v;     // host copies, [n_blocks * bt][kv_dim]
  DeviceBuffer<uint16_t> dk, dv;  // the device cache: k, v as kv_write stores them (BF16)
  DeviceBuffer<int32_t> dtable;

  PagedCache(const std::vector<float>& keys, const std::vector<float>& values, int64_t kv_dim,
             int64_t block_tokens)
      : bt(block_tokens) {
    const int64_t used = (kLen + bt - 1) / bt;
    n_blocks = 2 * used + 3;
    table.resize(used);
    table2.resize(used);
    std::vector<int32_t> phys(n_blocks);
    std::iota(phys.begin(), phys.end(), 0);
    std::mt19937 rng(static_cast<uint32_t>(block_tokens));
    std::shuffle(phys.begin(), phys.end(), rng);
    for (int64_t j = 0; j < used; ++j) table[j] = phys[j], table2[j] = phys[used + j];
    k = random_floats(n_blocks * bt * kv_dim, 999);  // garbage in unused slots
    v = random_floats(n_blocks * bt * kv_dim, 998);
    for (int64_t p = 0; p < kLen; ++p)
      for (const auto* tb : {&table, &table2}) {
        const int64_t slot = (*tb)[p / bt] * bt + p % bt;
        std::copy(keys.begin() + p * kv_dim, keys.begin() + (p + 1) * kv_dim,
                  k.begin() + slot * kv_dim);
        std::copy(values.begin() + p * kv_dim, values.begin() + (p + 1) * kv_dim,
                  v.begin() + slot * kv_dim);
      }
    dk = DeviceBuffer<uint16_t>(kv_elements(k));
    dv = DeviceBuffer<uint16_t>(kv_elements(v));
    dtable = DeviceBuffer<int32_t>(table);
  }
};

// Resets the testing overrides however a test ends.
struct Overrides {
  ~Overrides() {
    testing::set_attention_rows_override(0);
    testing::set_attention_path_override(0);
  }
  void set(int path, int rows) {
    testing::set_attention_path_override(path);
    testing::set_attention_rows_override(rows);
  }
};

float bf16_round(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// FP64 attention of one (query row, head) over positions [first, n) of [position][kv head][hd]
// keys and values; `round` rounds q, keys and values to BF16 first (what the kernel computes on:
// q rounded as staged, keys and values as the BF16 cache holds them).
void reference_row(const float* q, const std::vector<float>& keys, const std::vector<float>& values,
                   int64_t kv_dim, int64_t kh, int64_t hd, int64_t first, int64_t n, double scale,
                   bool round, double* out) {
  auto r = [&](float x) { return round ? static_cast<double>(bf16_round(x)) : static_cast<double>(x); };
  std::vector<double> s(n, 0.0);
  double mx = -INFINITY;
  for (int64_t p = first; p < n; ++p) {
    double dot = 0;
    for (int64_t d = 0; d < hd; ++d) dot += r(q[d]) * r(keys[p * kv_dim + kh * hd + d]);
    s[p] = dot * scale;
    mx = std::max(mx, s[p]);
  }
  double l = 0;
  for (int64_t p = first; p < n; ++p) l += (s[p] = std::exp(s[p] - mx));
  for (int64_t d = 0; d < hd; ++d) {
    double a = 0;
    for (int64_t p = first; p < n; ++p) a += s[p] * r(values[p * kv_dim + kh * hd + d]);
    out[d] = n > 0 ? a / l : 0.0;
  }
}

// Runs rows (query index into qs, n_keys) in one call; returns [rows][n_heads][hd].
std::vector<float> run(const Shape& s, const PagedCache& c, const std::vector<float>& qs,
                       const std::vector<int64_t>& qi, const std::vector<int32_t>& nk,
                       int64_t max_keys, bool mixed_tables = false, int64_t rows_per_item = 0) {
  const int64_t T = static_cast<int64_t>(qi.size()), row = s.n_heads * s.head_dim;
  std::vector<float> q(T * row);
  for (int64_t t = 0; t < T; ++t)
    std::copy(qs.begin() + qi[t] * row, qs.begin() + (qi[t] + 1) * row, q.begin() + t * row);
  const int64_t stride = static_cast<int64_t>(c.table.size());
  std::vector<int32_t> tables(T * stride);
  // mixed_tables: every third row reads the second copy (rows of other sequences), so rows
  // of one launch block do not share their keys' locations.
  for (int64_t t = 0; t < T; ++t) {
    const auto& tb = mixed_tables && t % 3 == 1 ? c.table2 : c.table;
    std::copy(tb.begin(), tb.end(), tables.begin() + t * stride);
  }
  DeviceBuffer<float> dq(q), dout(T * row);
  DeviceBuffer<int32_t> dtables(tables), dnk(nk);
  KvLayerView kv;
  kv.k = c.dk.get();
  kv.v = c.dv.get();
  kv.block_tokens = c.bt;
  kv.n_kv_heads = s.n_kv_heads;
  kv.head_dim = s.head_dim;
  kv.dtype = kKvDtype;
  attention(dq.get(), T, dtables.get(), stride, dnk.get(), max_keys, s.n_heads, kv,
            1.0f / std::sqrt(static_cast<float>(s.head_dim)), dout.get(), s.window, rows_per_item);
  return dout.to_host();
}

class AttentionTest : public CudaTest, public ::testing::WithParamInterface<Shape> {};

TEST_P(AttentionTest, RowsBitwiseInvariantAndAccurate) {
  const Shape s = GetParam();
  const int64_t kv_dim = s.n_kv_heads * s.head_dim, row = s.n_heads * s.head_dim;
  const int64_t group = s.n_heads / s.n_kv_heads;
  const auto keys = random_floats(kLen * kv_dim, 1, -2.0f, 2.0f);
  const auto values = random_floats(kLen * kv_dim, 2);
  // Queries 0..159: fixed edge lengths, then scattered ones; 160..255: the last 96 positions in
  // order (a causal prefill's rows).
  const int64_t NQ = 256, kScattered = 160;
  const auto qs = random_floats(NQ * row, 3, -2.0f, 2.0f);
  std::vector<int32_t> lens(NQ);
  const int32_t fixed[] = {1, 2, 16, 17, 255, 256, 257, 511, 512, 513, 700, 1024, 1299, 1300, 0, 15, 31, 33};
  constexpr int64_t kFixed = sizeof(fixed) / sizeof(fixed[0]);
  for (int64_t i = 0; i < NQ; ++i)
    lens[i] = i < kFixed ? fixed[i]
                         : (i < kScattered ? static_cast<int32_t>(1 + (i * 7919) % kLen)
                                           : static_cast<int32_t>(kLen - (NQ - 1 - i)));

  PagedCache c16(keys, values, kv_dim, 16), c32(keys, values, kv_dim, 32), c64(keys, values, kv_dim, 64);
  Overrides ov;

  // Reference: each query alone (T = 1), block size 16, max_keys = its own n_keys, default launch.
  std::vector<float> ref(NQ * row);
  for (int64_t i = 0; i < NQ; ++i) {
    const auto o = run(s, c16, qs, {i}, {lens[i]}, lens[i]);
    std::copy(o.begin(), o.end(), ref.begin() + i * row);
  }

  auto check = [&](const PagedCache& c, const std::vector<int64_t>& qi, int64_t max_keys,
                   const char* what, bool mixed = false, int64_t rows_per_item = 0) {
    std::vector<int32_t> nk;
    for (int64_t i : qi) nk.push_back(lens[i]);
    const auto out = run(s, c, qs, qi, nk, max_keys, mixed, rows_per_item);
    for (size_t t = 0; t < qi.size(); ++t)
      ASSERT_TRUE(same_bits(out.data() + t * row, ref.data() + qi[t] * row, row))
          << what << ": row " << t << " of " << qi.size() << " (query " << qi[t] << ", n_keys "
          << lens[qi[t]] << ", block " << c.bt << ") differs from its T=1 result";
  };
  std::vector<int64_t> all(kScattered), prefill(NQ - kScattered), everything(NQ);
  std::iota(all.begin(), all.end(), 0);
  std::iota(prefill.begin(), prefill.end(), kScattered);
  std::iota(everything.begin(), everything.end(), 0);
  std::vector<int64_t> reversed(all.rbegin(), all.rend());
  std::vector<int64_t> sorted(all);
  std::sort(sorted.begin(), sorted.end(), [&](int64_t a, int64_t b) { return lens[a] < lens[b]; });

  for (const PagedCache* c : {&c16, &c32, &c64}) {
    // Alone: a single chunk walks (T = 1 with max_keys = n_keys), more chunks split.
    for (int64_t i = 0; i < NQ; i += 7) check(*c, {i}, lens[i], "T=1");
    // Alone with a larger launch bound (more chunks: the split launch even for short rows).
    for (int64_t i : {0, 5, 9, 12, 13, 14}) check(*c, {i}, kLen + 500, "T=1, max_keys larger");
    // Small batches (split launch) in different orders.
    check(*c, {3, 9, 0, 13}, kLen, "T=4");
    check(*c, {13, 0, 9, 14, 3, 7, 1}, 2048, "T=7");
    // Many rows (walk launch): scattered, reversed, by length, a causal prefill, everything.
    check(*c, all, kLen, "T=160");
    check(*c, reversed, kLen + 256, "T=160 reversed");
    check(*c, sorted, kLen, "T=160 by length");
    check(*c, prefill, kLen, "T=96 prefill");
    check(*c, everything, kLen, "T=256");
    // The launch-shape hint of a batch of decode rows or verify blocks (rows_per_item): the split
    // launch at any T, each block one item's rows.
    for (int64_t hint : {1, 4, 16}) {
      const std::string h = ", rows per item " + std::to_string(hint);
      check(*c, all, kLen, ("T=160" + h).c_str(), false, hint);
      check(*c, everything, kLen + 256, ("T=256, mixed tables" + h).c_str(), true, hint);
      check(*c, prefill, kLen, ("T=96 prefill" + h).c_str(), false, hint);
      check(*c, {5, 1, 3, 4}, 256, ("T=4, one chunk" + h).c_str(), true, hint);
    }
    // Each launch forced, with every rows-per-block choice, shared and mixed block tables.
    // 1: split (decode kernel where head_dim <= 128), 2: walk, 3: the one-warp split kernel,
    // 4 / 5: the decode kernel with the value columns split over two blocks / in one.
    for (int path : {1, 2, 3, 4, 5}) {
      const char* names[] = {"", "split", "walk", "split (one warp)", "decode (2 parts)", "decode (1 part)"};
      const char* name = names[path];
      for (int rows_cap : {1, 2, 3, 5, 0, 1000}) {
        ov.set(path, rows_cap);
        const std::string what = std::string(name) + ", rows per block " + std::to_string(rows_cap);
        check(*c, all, kLen, (what + ", T=160").c_str());
        check(*c, all, kLen, (what + ", T=160, mixed tables").c_str(), true);
        check(*c, prefill, kLen + 100, (what + ", T=96 prefill").c_str());
        check(*c, {12}, kLen, (what + ", T=1").c_str());
        check(*c, {14, 1, 13}, kLen, (what + ", T=3").c_str());
        if (HasFatalFailure()) return;
      }
      ov.set(0, 0);
    }
    if (HasFatalFailure()) return;
  }

  // Accuracy against FP64 (every other query): against the BF16-rounded inputs the only errors
  // are the softmax weights rounded to BF16 for P.V (each weight off by at most 2^-9 of itself,
  // so at most 2^-9 max|v| in the output) and FP32 sums; against the FP32 inputs add the BF16
  // rounding of q and k (score errors ~2e-3 typical here) and of v.
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  double worst_rounded = 0, worst = 0, sq = 0;
  int64_t n_el = 0;
  std::vector<double> o_r(s.head_dim), o(s.head_dim);
  for (int64_t i = 0; i < NQ; i += 2)
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const float* qrow = qs.data() + i * row + h * s.head_dim;
      const int64_t fk = first_key(s.window, lens[i]);
      reference_row(qrow, keys, values, kv_dim, h / group, s.head_dim, fk, lens[i], scale, true,
                    o_r.data());
      reference_row(qrow, keys, values, kv_dim, h / group, s.head_dim, fk, lens[i], scale, false,
                    o.data());
      for (int64_t d = 0; d < s.head_dim; ++d) {
        const double g = ref[i * row + h * s.head_dim + d];
        worst_rounded = std::max(worst_rounded, std::fabs(g - o_r[d]));
        worst = std::max(worst, std::fabs(g - o[d]));
        sq += (g - o[d]) * (g - o[d]);
        ++n_el;
      }
    }
  const double rms = std::sqrt(sq / static_cast<double>(n_el));
  std::printf("[ accuracy ] hd %lld G %lld window %lld: max |GPU - FP64(bf16 inputs)| %.3g, max |GPU - FP64| %.3g, rms %.3g\n",
              static_cast<long long>(s.head_dim), static_cast<long long>(group),
              static_cast<long long>(s.window), worst_rounded, worst, rms);
  EXPECT_LT(worst_rounded, 2.5e-3) << "largest |GPU - FP64 on BF16-rounded inputs| (values in [-1, 1])";
  // Measured on an H200 (2026-11-29, every shape here): 1.0e-3, 3.0e-3 and rms 2.3e-4.
  EXPECT_LT(worst, 1e-2) << "largest |GPU - FP64| (values in [-1, 1])";
  EXPECT_LT(rms, 1e-3) << "rms |GPU - FP64|";

  // The CPU kernel (FP32 inputs, FP32 math) differs from the GPU by the same BF16 rounding.
  ThreadPool pool(2);
  std::vector<AttentionRow> rows;
  std::vector<int64_t> rows_q;
  for (int64_t i = 0; i < NQ; ++i)
    if (lens[i] > 0)
      rows.push_back(AttentionRow{c16.table.data(), lens[i], first_key(s.window, lens[i])}),
          rows_q.push_back(i);
  std::vector<float> q_cpu(rows.size() * row);
  for (size_t j = 0; j < rows.size(); ++j)
    std::copy(qs.begin() + rows_q[j] * row, qs.begin() + (rows_q[j] + 1) * row, q_cpu.begin() + j * row);
  KvLayerView hkv;
  hkv.k = c16.k.data();
  hkv.v = c16.v.data();
  hkv.block_tokens = 16;
  hkv.n_kv_heads = s.n_kv_heads;
  hkv.head_dim = s.head_dim;
  std::vector<float> cpu(rows.size() * row);
  kernels::attention(q_cpu.data(), static_cast<int64_t>(rows.size()), rows, s.n_heads, hkv,
                     1.0f / std::sqrt(static_cast<float>(s.head_dim)), cpu.data(), pool);
  double worst_cpu = 0;
  for (size_t j = 0; j < rows.size(); ++j)
    for (int64_t e = 0; e < row; ++e)
      worst_cpu = std::max(worst_cpu, std::fabs(double(cpu[j * row + e]) - ref[rows_q[j] * row + e]));
  EXPECT_LT(worst_cpu, 1e-2) << "largest |GPU - CPU| (values in [-1, 1]; BF16 inputs on the GPU)";
  // Rows without keys are zeros.
  for (int64_t i = 0; i < NQ; ++i) {
    if (lens[i] != 0) continue;
    for (int64_t e = 0; e < row; ++e) ASSERT_EQ(ref[i * row + e], 0.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(Shape{8, 2, 128}, Shape{4, 1, 256}, Shape{6, 6, 64},
                                           Shape{32, 2, 128}, Shape{12, 4, 64}, Shape{16, 1, 256},
                                           // Sliding windows: inside one chunk, across chunk
                                           // edges, wider than two chunks.
                                           Shape{8, 2, 128, 77}, Shape{4, 1, 256, 300},
                                           Shape{6, 6, 64, 513}, Shape{16, 1, 256, 256},
                                           // Head dim 512 (Gemma 4's full layers): GQA groups
                                           // of 4 and 16, windows inside and across chunks.
                                           Shape{4, 1, 512}, Shape{16, 1, 512}, Shape{8, 2, 512},
                                           Shape{4, 1, 512, 300}, Shape{16, 2, 512, 77}));

// Tensor parallelism splits attention by KV heads: a rank holds kv heads [r n_kv / R,
// (r + 1) n_kv / R) in its own cache and the q heads that read them; with more ranks than KV
// heads, each KV head is replicated on R / n_kv ranks, each holding its share of the head's q
// heads. Each rank's call (fewer heads, its own cache) gives bitwise those heads of the one-GPU
// call, for decode rows (split launch) and a prefill's rows (walk launch), windows included.
TEST_F(CudaTest, AttentionRanksHeadsAreTheFullCallsHeadsBitwise) {
  for (const Shape& s : {Shape{32, 8, 128}, Shape{16, 2, 256}, Shape{64, 8, 128},
                         Shape{8, 2, 128, 77}, Shape{8, 2, 512}}) {
    const int64_t kv_dim = s.n_kv_heads * s.head_dim, row = s.n_heads * s.head_dim;
    const auto keys = random_floats(kLen * kv_dim, 21, -2.0f, 2.0f);
    const auto values = random_floats(kLen * kv_dim, 22);
    const int64_t NQ = 48;
    const auto qs = random_floats(NQ * row, 23, -2.0f, 2.0f);
    std::vector<int32_t> lens(NQ);
    for (int64_t i = 0; i < NQ; ++i)
      lens[i] = static_cast<int32_t>(i < 16 ? 1 + (i * 7919) % kLen : kLen - (NQ - 1 - i));
    std::vector<int64_t> decode = {0, 5, 9}, prefill(NQ - 16);
    std::iota(prefill.begin(), prefill.end(), 16);
    PagedCache whole(keys, values, kv_dim, 16);
    auto lens_of = [&](const std::vector<int64_t>& qi) {
      std::vector<int32_t> nk;
      for (int64_t i : qi) nk.push_back(lens[i]);
      return nk;
    };
    for (const auto* qi : {&decode, &prefill}) {
      const auto full = run(s, whole, qs, *qi, lens_of(*qi), kLen);
      for (int R : {2, 4, 8}) {
        const bool split = s.n_kv_heads % R == 0, replicated = R % s.n_kv_heads == 0;
        ASSERT_TRUE((split || replicated) && s.n_heads % R == 0) << "a shape the test cannot split";
        const int64_t kvr = split ? s.n_kv_heads / R : 1, hr = s.n_heads / R, hd = s.head_dim;
        const Shape sr{hr, kvr, hd, s.window};
        for (int r = 0; r < R; ++r) {
          // The rank's keys, values and queries: its heads' columns (its KV heads from kv0).
          const int64_t kv0 = r * s.n_kv_heads / R;
          std::vector<float> rk(kLen * kvr * hd), rv(kLen * kvr * hd), rq(NQ * hr * hd);
          for (int64_t p = 0; p < kLen; ++p)
            for (int64_t e = 0; e < kvr * hd; ++e) {
              rk[p * kvr * hd + e] = keys[p * kv_dim + kv0 * hd + e];
              rv[p * kvr * hd + e] = values[p * kv_dim + kv0 * hd + e];
            }
          for (int64_t i = 0; i < NQ; ++i)
            std::copy_n(qs.begin() + i * row + r * hr * hd, hr * hd, rq.begin() + i * hr * hd);
          PagedCache mine(rk, rv, kvr * hd, 16);
          const auto part = run(sr, mine, rq, *qi, lens_of(*qi), kLen);
          for (size_t t = 0; t < qi->size(); ++t)
            ASSERT_TRUE(same_bits(part.data() + t * hr * hd, full.data() + t * row + r * hr * hd,
                                  hr * hd))
                << s.n_heads << "/" << s.n_kv_heads << "x" << hd << " window " << s.window
                << " R=" << R << " rank " << r << " row " << t << " of " << qi->size();
        }
      }
    }
  }
}

// The walks' exps (a cheaper rounding to an integer; and that without branches) give exp_f32's
// bits for every one of the 2^32 float inputs: NaNs, infinities, denormals, both range cut-offs
// and every tie.
TEST_F(CudaTest, AttentionWalkExpIsExpF32Everywhere) {
  uint32_t first = 0;
  const uint64_t bad = testing::attention_exp_mismatches(&first);
  EXPECT_EQ(bad, 0u) << "first differing input bits 0x" << std::hex << first;
}

TEST_F(CudaTest, AttentionZeroKeysGivesZeros) {
  const int64_t hd = 128;
  DeviceBuffer<float> dq(random_floats(hd, 5)), dout(hd);
  DeviceBuffer<uint16_t> dk(16 * hd), dv(16 * hd);
  DeviceBuffer<int32_t> dtable(std::vector<int32_t>{0}), dnk(std::vector<int32_t>{0});
  KvLayerView kv;
  kv.k = dk.get();
  kv.v = dv.get();
  kv.block_tokens = 16;
  kv.n_kv_heads = 1;
  kv.head_dim = hd;
  kv.dtype = kKvDtype;
  attention(dq.get(), 1, dtable.get(), 1, dnk.get(), 0, 1, kv, 0.1f, dout.get());
  for (float x : dout.to_host()) EXPECT_EQ(x, 0.0f);
}

}  // namespace
}  // namespace lockstep::kernels::cuda::test
