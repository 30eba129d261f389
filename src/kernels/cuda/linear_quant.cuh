// The one definition of a quantized weight's element on the GPU, shared by every kernel that
// reads 4/8-bit affine weights (the skinny linear's cooperative dequant, the M > 64 / fallback
// dequant into a BF16 copy, the embedding gather).
//
// The element is DEFINED as the BF16 value CudaBackend::place() used to upload: the float32
// fma(float(q), s, b) of quant_format.h (one rounding), then rounded to BF16 nearest-even
// (f32_to_bf16 on the host; cvt.rn.bf16x2 here; only a NaN's payload may differ, and a NaN
// poisons the MMA output either way). So a quantized linear that feeds these values to the BF16
// MMA path is bit for bit the BF16 linear of the dequantized matrix.
//
// GPU layout (what place() uploads; tests/cuda/quant_test_util.h builds the same):
// - codes: the checkpoint's words as stored, [N][K * bits / 32] uint32, element k of a row in
//   bits [(k % per_word) * bits, +bits) of word k / per_word (little end first);
// - pairs: one entry per (row, group), [N][K / G]: for BF16 or F16 scales a uint32 holding the
//   source's 16-bit scale in the low half and its 16-bit bias in the high half (4 bytes per row
//   group, bit-exact copies); for F32 scales a float2 {s, b} (only the fallback reads those).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/mma.cuh"

namespace lockstep::kernels::cuda::lin {

enum : int { kPairBF16 = 0, kPairF16 = 1, kPairF32 = 2 };

// The 16-bit scale or bias h as float32 (exact for both formats).
__device__ __forceinline__ float half_bits_to_f32(uint32_t h, bool f16) {
  return f16 ? __half2float(__ushort_as_half(static_cast<unsigned short>(h)))
             : __uint_as_float(h << 16);
}

// The scale and bias of pair entry i of an array in format `fmt` (kPair*).
__device__ __forceinline__ float2 load_pair(const void* pairs, int64_t i, int fmt) {
  if (fmt == kPairF32) return static_cast<const float2*>(pairs)[i];
  const uint32_t p = static_cast<const uint32_t*>(pairs)[i];
  return make_float2(half_bits_to_f32(p & 0xffffu, fmt == kPairF16),
                     half_bits_to_f32(p >> 16, fmt == kPairF16));
}

// float(q) for a code q < 2^23 without an int-to-float instruction: q ORed into the mantissa of
// 2^23 is the float 2^23 + q, and subtracting 2^23 is exact. __fsub_rn keeps the compiler from
// contracting it into the fma below.
__device__ __forceinline__ float code_to_f32(uint32_t q) {
  return __fsub_rn(__uint_as_float(0x4B000000u | q), 8388608.0f);
}

// The defined element as float32 (before the BF16 rounding).
__device__ __forceinline__ float dequant_f32(uint32_t q, float s, float b) {
  return __fmaf_rn(code_to_f32(q), s, b);
}

// Elements e(0..7) rounded to BF16 and packed (4 words, lower k in the low half): the tail of
// both dequant8 forms.
template <typename E>
__device__ __forceinline__ uint4 pack_bf16x8(E&& e) {
  uint4 r;
  r.x = detail::pack_bf16x2(e(0), e(1));
  r.y = detail::pack_bf16x2(e(2), e(3));
  r.z = detail::pack_bf16x2(e(4), e(5));
  r.w = detail::pack_bf16x2(e(6), e(7));
  return r;
}

// Eight consecutive elements of one group as 8 BF16 values (4 words, lower k in the low half):
// the codes are lo (elements 0-3) and hi (4-7) for 8 bits, lo alone (elements 0-7) for 4 bits.
template <int QB>
__device__ __forceinline__ uint4 dequant8(uint32_t lo, uint32_t hi, float s, float b) {
  // m[j]: the float bits 0x4B000000 | q_j (2^23 + q_j); one byte permute per 8-bit code.
  uint32_t m[8];
  if constexpr (QB == 8) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      // Bytes of the result: code byte j, 0, 0, 0x4B (selector nibbles j, 4, 5, 7).
      m[j] = __byte_perm(lo, 0x4B000000u, 0x7540u + j);
      m[4 + j] = __byte_perm(hi, 0x4B000000u, 0x7540u + j);
    }
  } else {
    // The even codes in the low nibbles of e's bytes, the odd ones in o's; then one byte permute
    // per code, as for 8 bits (the same bits as ((lo >> 4 j) & 0xf) | 0x4B000000).
    const uint32_t e = lo & 0x0F0F0F0Fu, o = (lo >> 4) & 0x0F0F0F0Fu;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      m[2 * j] = __byte_perm(e, 0x4B000000u, 0x7540u + j);
      m[2 * j + 1] = __byte_perm(o, 0x4B000000u, 0x7540u + j);
    }
  }
  return pack_bf16x8([&](int j) { return __fmaf_rn(__fsub_rn(__uint_as_float(m[j]), 8388608.0f), s, b); });
}

// The same eight elements with one instruction fewer each, where shift_bias allowed it: the codes
// become the floats 2^E + q (E = 15 for 8 bits, 7 for 4 bits: q ORed into the mantissa of 2^E by
// the byte permute alone) and c = b - 2^E s, so fma(2^E + q, s, c) = round(q s + b), the very
// rounding of fma(q, s, b), provided c is exact.
template <int QB>
__device__ __forceinline__ uint4 dequant8_shifted(uint32_t lo, uint32_t hi, float s, float c) {
  uint32_t m[8];
  if constexpr (QB == 8) {
    // Bytes of the result: 0, code byte j, 0, 0x47 (2^15 + q).
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      m[j] = __byte_perm(lo, 0x47000000u, 0x7504u + (j << 4));
      m[4 + j] = __byte_perm(hi, 0x47000000u, 0x7504u + (j << 4));
    }
  } else {
    // Bytes of the result: 0, 0, code nibble, 0x43 (2^7 + q).
    const uint32_t e = lo & 0x0F0F0F0Fu, o = (lo >> 4) & 0x0F0F0F0Fu;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      m[2 * j] = __byte_perm(e, 0x43000000u, 0x7054u + (j << 8));
      m[2 * j + 1] = __byte_perm(o, 0x43000000u, 0x7054u + (j << 8));
    }
  }
  return pack_bf16x8([&](int j) { return __fmaf_rn(__uint_as_float(m[j]), s, c); });
}

// c = b - 2^E s (E as above) for dequant8_shifted, and whether it may be used: c exact (TwoSum's
// error is zero; infinities and NaNs fail) and b not -0 (fma(0, s, -0) is -0 for s < 0, where the
// shifted form gives +0). bias_bits: b's 16 source bits.
template <int QB>
__device__ __forceinline__ bool shift_bias(float s, float b, uint32_t bias_bits, float& c) {
  const float d = __fmul_rn(s, QB == 8 ? 32768.0f : 128.0f);  // exact (a power of two)
  c = __fsub_rn(b, d);
  const float bb = __fsub_rn(c, b);
  const float err = __fadd_rn(__fsub_rn(b, __fsub_rn(c, bb)), __fsub_rn(-d, bb));
  return err == 0.0f && bias_bits != 0x8000u;
}

}  // namespace lockstep::kernels::cuda::lin
