// Choosing one token from one row of logits: the rule a backend applies (Backend::choose_tokens)
// and the pure scoring math that every implementation of it shares (../shared/DESIGN.md,
// "Sampling"). The host Sampler (sampling/sampler.h), the CPU backend's op and the CUDA kernel
// (kernels/cuda/choose.cu) all score a token with the functions below, so they agree by
// construction; the CUDA tests check the device side bit for bit.
//
// The choice is a pure function of (logits row, rule): greedy takes the lowest id among the
// maxima of the penalised logits; random sampling is Gumbel-max, argmax over ids of
// work/T + G(seed, position, id) with counter-based noise. The rule carries the penalties as a
// sparse list computed on the host from the token history, so this layer knows nothing about
// histories or the sampling layer.
//
// A rule may also carry an allowed-token bit mask (a constraint's mask at the row's position):
// a token outside it competes exactly as if its logit were -inf, in every implementation, so the
// backend's id under a mask is the host Sampler's id on the masked logits (constraints/
// apply_mask, then choose()). Its -inf passes the penalties (-inf / r, -inf * r, -inf - c are
// all -inf) and the Gumbel score (-inf / T + finite noise) unchanged: a forbidden id scores -inf.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/math.h"
#if defined(__CUDACC__)
#include "kernels/cuda/common.cuh"  // the device port of log_f32
#endif

#if defined(__CUDACC__)
#define LOCKSTEP_HD __host__ __device__ __forceinline__
#else
#define LOCKSTEP_HD inline
#endif

namespace lockstep::kernels {

// One token the penalties touch: it occurs in the history (repetition penalty) and/or
// `output_count` times in the output part of it (presence / frequency penalties).
struct TokenAdjust {
  int32_t id = 0;
  int32_t output_count = 0;
  int32_t seen = 0;  // 1: anywhere in the history (prompt or output)
};

// What choosing one row's token needs. SamplingParams (sampling/sampler.h) plus the position and
// the history's adjustments; built by Sampler::rule.
struct TokenRule {
  float temperature = 0.0f;  // <= 0: greedy
  uint64_t seed = 0;
  int64_t position = 0;      // absolute position of the token being chosen
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f, presence_penalty = 0.0f, frequency_penalty = 0.0f;
  // Ids ascending, unique, each in [0, V); empty when no penalty is on.
  std::span<const TokenAdjust> adjust;
  bool skip = false;  // no token wanted from this row: choose_tokens gives -1 and does no work
  // Allowed ids: bit (id % 64) of allowed[id / 64] for id < allowed_size; ids past allowed_size
  // are forbidden. Null: every id is allowed. The words of a constraints::TokenMask; they must
  // stay unchanged until choose_tokens returns.
  const uint64_t* allowed = nullptr;
  int32_t allowed_size = 0;

  bool greedy() const { return temperature <= 0.0f; }
  // top-k / top-p / min-p order the candidates by value: a sort, done on the host.
  bool needs_sorted() const { return !greedy() && (top_k > 0 || top_p < 1.0f || min_p > 0.0f); }
  bool masked() const { return allowed != nullptr; }
  bool allows(int64_t id) const {
    return !allowed || (id >= 0 && id < allowed_size && (allowed[id >> 6] >> (id & 63)) & 1);
  }
};

// Reusable host buffers for choose_token.
struct ChoiceScratch {
  std::vector<float> work, e;
  std::vector<int32_t> ids;
};

// The token for one row (the reference algorithm, every rule): logits [V] in host memory.
int32_t choose_token(std::span<const float> logits, const TokenRule& rule, ChoiceScratch& scratch);

// --- the shared scoring math -----------------------------------------------------------------
// Host and device compile these same lines. Every float operation is a separately rounded
// IEEE operation: the host build forbids contraction, and on the device each one is the explicit
// round-to-nearest intrinsic (nvcc would otherwise fuse a*b+c into one FMA).
namespace choice {

LOCKSTEP_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
LOCKSTEP_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
LOCKSTEP_HD float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
LOCKSTEP_HD float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

LOCKSTEP_HD uint64_t mix64(uint64_t z) {  // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform (0, 1) from a counter-based hash of (seed, position, id): no sequential state. 24
// random bits centred in their interval, so never 0 or 1 (every step below is exact).
LOCKSTEP_HD float position_uniform(uint64_t seed, int64_t position, int32_t id) {
  uint64_t h = mix64(seed ^ 0x9e3779b97f4a7c15ull);
  h = mix64(h ^ static_cast<uint64_t>(position) * 0xd1b54a32d192ed03ull);
  h = mix64(h ^ static_cast<uint64_t>(static_cast<uint32_t>(id)));
  return mul(add(static_cast<float>(h >> 40), 0.5f), 1.0f / 16777216.0f);
}

// The value a penalised token competes with: repetition penalty (Hugging Face semantics: divide
// positive logits, multiply negative ones) for a token seen in the history, then presence and
// frequency penalties (OpenAI semantics) for a token in the output.
LOCKSTEP_HD float penalized(float v, int32_t output_count, int32_t seen, float repetition,
                            float presence, float frequency) {
  if (seen && repetition != 1.0f) v = v > 0 ? div(v, repetition) : mul(v, repetition);
  if (output_count > 0)
    v = sub(v, add(presence, mul(frequency, static_cast<float>(output_count))));
  return v;
}

// Natural log: kernels::log_f32 (math.h) on the host, its device port (cuda/common.cuh: the same
// algorithm and operation order with explicit intrinsics) on the GPU.
LOCKSTEP_HD float log(float x) {
#if defined(__CUDA_ARCH__)
  return cuda::detail::log_f32(x);
#else
  return log_f32(x);
#endif
}

// Gumbel noise -log(-log(u)) for u in (0, 1).
LOCKSTEP_HD float gumbel(float u) { return -log(-log(u)); }

// A token's Gumbel-max score: its (penalised) value over the temperature plus its noise.
LOCKSTEP_HD float gumbel_score(float work, float temperature, uint64_t seed, int64_t position,
                               int32_t id) {
  return add(div(work, temperature), gumbel(position_uniform(seed, position, id)));
}

// The order every argmax uses: higher score first, the lower id on ties. Over non-NaN scores this
// is a strict total order, so any reduction tree finds the same winner. The sequential loops of
// choose_token keep the first candidate when its score is NaN (nothing compares greater than
// NaN) and never move to a NaN; a parallel reduction gets the same answer by skipping NaN scores
// and taking the first candidate when its own score is NaN or nothing else is left.
LOCKSTEP_HD bool better(float a, int32_t a_id, float b, int32_t b_id) {
  return a > b || (a == b && a_id < b_id);
}

}  // namespace choice
}  // namespace lockstep::kernels
