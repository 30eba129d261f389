// The integer-dot schedule of a quantized linear (`--quant-dot int8`): activations quantized to
// int8 per block, exact integer dot products per weight group, a fixed float accumulation over
// groups. ref/quant_int8_ref.cpp states it in scalar code; cpu/linear_quant_int8.cpp must give
// its bits on every Highway target.
//
// Activations. Row m of x is cut into blocks of B = the weight's group size (the blocks line up
// with the weight groups). Each block is quantized from its own B values alone, so a row's codes
// never depend on other rows, on M, on threads or on the target:
//   amax = max |x_k|               (exact)
//   d    = amax / 127              (float32 division)
//   inv  = amax > 0 ? 127 / amax : 0
//   q_k  = nearbyint(x_k * inv)    (float32 product, rounded to nearest even; |q_k| <= 127)
//   e    = d * float(sum_k q_k)    (the block's sum term; the sum is exact in int32)
// Activations are assumed finite (a NaN or infinity in a block gives unspecified codes).
//
// Dot product. For output (m, n), with weight group g of row n (codes w_k, scale s_g, bias b_g;
// element = w_k * s_g + b_g) and activation block g of row m:
//   isum_g = sum_k w_k * q_k                    (int32, exact: any order gives the same value)
//   p_g    = d_g * float(isum_g)
//   lane[g mod 16] = fma(s_g, p_g, lane[g mod 16]);  lane[g mod 16] = fma(b_g, e_g, lane[...])
// for g = 0, 1, ... in increasing order, the 16 lanes starting at +0; then the fixed folding
// tree of schedule.h (fold_lanes). So the groups follow the float dot schedule with the group
// as its element: 16 logical lanes, lane = g mod 16, FMAs in increasing g, one tree.
// The bias term uses the quantized block sum, so the dot is exactly sum_k (w_k s + b)(q_k d)
// before rounding: the error is that of the dequantized activation, not a mix of two.
#pragma once

#include <cstdint>
#include <vector>

namespace lockstep::kernels {

// The activation codes of x for one group size, as the integer-dot kernels read them.
struct Int8Acts {
  int64_t M = 0, K = 0;
  int64_t block = 0;          // B: the weight group size
  int64_t blocks = 0;         // K / B
  int64_t blocks_padded = 0;  // blocks rounded up to 16 (the schedule's lane cycle)
  std::vector<int8_t> q;      // [M][K] codes in element order
  // [M][K] the same codes in the order 4-bit weights unpack to (only when K % 128 == 0): in every
  // 128 elements, the 64 even elements, then the 64 odd ones.
  std::vector<int8_t> qnib;
  std::vector<float> d, e;    // [M][blocks_padded]: scale and sum term, zero past `blocks`
  std::vector<int32_t> sum;   // [M][blocks_padded]: sum_k q_k, zero past `blocks`
  // [M][blocks_padded * B] the codes in the group-interleaved order of multi-row tiles for
  // weights of `grp_bits` (interleave_groups below; empty unless made). Per chunk of 16 blocks,
  // per code word k of a weight group (8 elements at 4 bits, 4 at 8), 4-byte lane j holds block
  // 16c + j's elements of that word: at 8 bits elements 4k .. 4k + 3 (64 bytes a word); at 4 bits
  // 64 bytes "lo" with elements 8k, 8k + 2, 8k + 4, 8k + 6 (the low nibbles), then 64 bytes "hi"
  // with 8k + 1, 8k + 3, 8k + 5, 8k + 7. Zero past `blocks`.
  std::vector<int8_t> qgrp;
  int grp_bits = 0;

  const int8_t* row(int64_t m) const { return q.data() + m * K; }
  const int8_t* row_nib(int64_t m) const { return qnib.data() + m * K; }
  const int8_t* row_grp(int64_t m) const { return qgrp.data() + m * blocks_padded * block; }
};

// Elements per superblock of the 4-bit order above.
inline constexpr int64_t kNibbleBlock = 128;

// Weights the group-interleaved tiles of cpu/linear_quant_int8.cpp take (in calls of
// cpu_tuning.h's interleaved_min_rows() rows or more): groups of 4, 8 or 16 code words (4-bit
// groups of 32, 64, 128; 8-bit of 16, 32, 64). Which kernel runs never changes a bit (the integer
// sums are exact).
inline bool interleaved_groups(int bits, int64_t group) {
  const int64_t words = group * bits / 32;
  return (bits == 4 || bits == 8) && group * bits % 32 == 0 &&
         (words == 4 || words == 8 || words == 16);
}

// Fills a.qgrp from a.q for weights of `bits` (interleaved_groups(bits, a.block) holds).
void interleave_groups(Int8Acts& a, int bits);

}  // namespace lockstep::kernels
