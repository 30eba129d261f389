// Helpers for the GPU tests: device buffers, random data, and the fixture that fails (never
// skips) when no CUDA device is present: these tests run only on the GPU machine.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_caps.h"

namespace lockstep::kernels::cuda::test {

// The tiled linear's forced tiles this device runs: 0 (the pick) and, where the wgmma kernel runs
// (compute capability 9.0, not LOCKSTEP_CUDA_AS_CC), its tiles 4-7 (cuda_ops.h).
inline std::vector<int> wgmma_tiles_here() {
  if (device_caps().wgmma) return {0, 4, 5, 6, 7, 8, 9};
  return {0};
}

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n), p_(static_cast<T*>(malloc_device(n * sizeof(T)))) {}
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    upload(p_, host.data(), n_ * sizeof(T));
  }
  ~DeviceBuffer() {
    if (p_) free_device(p_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : n_(o.n_), p_(o.p_) { o.p_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(n_, o.n_);
    std::swap(p_, o.p_);
    return *this;
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }
  std::vector<T> to_host() const {
    std::vector<T> h(n_);
    download(h.data(), p_, n_ * sizeof(T));
    return h;
  }

 private:
  size_t n_ = 0;
  T* p_ = nullptr;
};

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// A BF16 weight view of N x K elements at `data` (host or device, as the call needs).
inline Weight bf16_weight(const void* data, int64_t N, int64_t K) {
  Weight w;
  w.dtype = DType::BF16;
  w.rows = N;
  w.cols = K;
  w.data = data;
  return w;
}

inline std::vector<uint16_t> random_bf16(size_t n, uint32_t seed, float scale = 0.05f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = f32_to_bf16(dist(rng));
  return v;
}

// Host floats as the GPU KV cache holds them (kKvDtype: BF16, nearest-even, kv_write's rounding).
static_assert(kKvDtype == DType::BF16, "the tests build BF16 device KV caches");
inline std::vector<uint16_t> kv_elements(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = f32_to_bf16(x[i]);
  return out;
}

inline bool same_bits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}
inline bool same_bits(const uint16_t* a, const uint16_t* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(uint16_t)) == 0;
}

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    ASSERT_TRUE(available(&why)) << "no usable CUDA device (these tests run only on a GPU "
                                    "machine): "
                                 << why;
  }
};

}  // namespace lockstep::kernels::cuda::test
