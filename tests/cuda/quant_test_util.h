// Helpers for the quantized GPU tests: random MLX affine matrices on the host, their GPU layout on
// the device (kernels/quant_gpu_layout.h, what CudaBackend::place uploads), and the BF16 matrix
// place() used to upload instead (f32_to_bf16 of the defined element fma(q, s, b)): the reference
// every quantized kernel must match bit for bit.
#pragma once

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "cuda_test_util.h"
#include "kernels/quant_format.h"
#include "kernels/quant_gpu_layout.h"

namespace lockstep::kernels::cuda::test {

// An affine matrix in the MLX layout with random codes, scales and biases.
struct HostQuant {
  std::vector<uint32_t> words;
  std::vector<uint8_t> scales, biases;
  Weight w;  // a view of the vectors above
};

inline void store_scalar(DType d, float v, uint8_t* out) {
  if (d == DType::F32) {
    std::memcpy(out, &v, 4);
  } else {
    const uint16_t h = d == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
    std::memcpy(out, &h, 2);
  }
}

// Scales in [0.002, 0.03] (8-bit) or [0.02, 0.3] (4-bit), biases in [-0.5, 0.1]: the ranges of
// real weights, with arbitrary mantissas so that fma(q, s, b) lands anywhere between BF16 values.
inline HostQuant random_quant(int64_t N, int64_t K, int bits, int64_t G, DType sdt, uint32_t seed) {
  HostQuant h;
  std::mt19937 rng(seed);
  h.words.resize(static_cast<size_t>(N * K * bits / 32));
  for (auto& v : h.words) v = static_cast<uint32_t>(rng());
  const size_t ss = dtype_size(sdt), groups = static_cast<size_t>(N * (K / G));
  h.scales.resize(groups * ss);
  h.biases.resize(groups * ss);
  const float smax = bits == 8 ? 0.03f : 0.3f;
  std::uniform_real_distribution<float> sd(smax / 15, smax), bd(-0.5f, 0.1f);
  for (size_t i = 0; i < groups; ++i) {
    store_scalar(sdt, sd(rng), &h.scales[i * ss]);
    store_scalar(sdt, bd(rng), &h.biases[i * ss]);
  }
  h.w.rows = N;
  h.w.cols = K;
  h.w.data = h.words.data();
  h.w.quant = QuantFormat::Affine;
  h.w.bits = bits;
  h.w.group_size = G;
  h.w.scale_dtype = sdt;
  h.w.scales = h.scales.data();
  h.w.biases = h.biases.data();
  return h;
}

// The BF16 matrix of the defined elements: f32_to_bf16(fma(q, s, b)), what place() uploaded.
inline std::vector<uint16_t> dequantized_bf16(const Weight& w) {
  std::vector<uint16_t> out(static_cast<size_t>(w.rows * w.cols));
  ThreadPool::global().parallel_for(w.rows, [&](int64_t a, int64_t b) {
    for (int64_t n = a; n < b; ++n)
      for (int64_t k = 0; k < w.cols; ++k)
        out[n * w.cols + k] = f32_to_bf16(quant_element(w, n, k));
  });
  return out;
}

// A quantized matrix on the device in the GPU layout, and the Weight the kernels take.
struct DeviceQuant {
  DeviceBuffer<uint8_t> codes, pairs;
  Weight w;
};
inline DeviceQuant to_device(const Weight& host) {
  const auto* c = static_cast<const uint8_t*>(host.data);
  std::vector<uint8_t> codes(c, c + gpu_code_bytes(host)), pairs(static_cast<size_t>(gpu_pair_bytes(host)));
  pack_gpu_pairs(host, 0, host.rows, pairs.data());
  DeviceQuant d{DeviceBuffer<uint8_t>(codes), DeviceBuffer<uint8_t>(pairs), host};
  d.w.data = d.codes.get();
  d.w.scales = d.pairs.get();
  d.w.biases = nullptr;
  return d;
}

// A BF16 matrix on the device and its Weight.
struct DeviceBf16 {
  DeviceBuffer<uint16_t> data;
  Weight w;
};
inline DeviceBf16 bf16_on_device(const std::vector<uint16_t>& host, int64_t N, int64_t K) {
  DeviceBf16 d{DeviceBuffer<uint16_t>(host), Weight{}};
  d.w.dtype = DType::BF16;
  d.w.rows = N;
  d.w.cols = K;
  d.w.data = d.data.get();
  return d;
}

// Where two rows of outputs differ: how many elements, the first one and the largest difference
// (so a failure says whether a few last bits or whole tiles are off).
inline std::string diff_summary(const float* a, const float* b, size_t n) {
  size_t count = 0, first = n;
  double worst = 0;
  for (size_t i = 0; i < n; ++i)
    if (std::memcmp(a + i, b + i, 4) != 0) {
      if (first == n) first = i;
      ++count;
      const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
      worst = d > worst || d != d ? d : worst;
    }
  if (count == 0) return "equal";
  return std::to_string(count) + " of " + std::to_string(n) + " differ, first at " +
         std::to_string(first) + " (" + std::to_string(a[first]) + " vs " +
         std::to_string(b[first]) + "), largest difference " + std::to_string(worst);
}

inline std::string quant_name(const Weight& w) {
  return std::to_string(w.bits) + "-bit g" + std::to_string(w.group_size) + " " +
         std::string(dtype_name(w.scale_dtype)) + " " + std::to_string(w.rows) + "x" + std::to_string(w.cols);
}

}  // namespace lockstep::kernels::cuda::test
