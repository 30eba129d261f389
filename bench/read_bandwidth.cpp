// Measures sustained read bandwidth (GB/s) with T threads over a buffer much larger than the
// caches: the floor for batch-1 decode is (weight + KV bytes per token) / this number.
// Build: g++ -O3 -march=native -pthread bench/read_bandwidth.cpp -o build/read_bandwidth
// Usage: build/read_bandwidth [threads=2] [MiB=1024] [repeats=5]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const size_t mib = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 1024;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 5;
  const size_t n = mib * 1024 * 1024 / sizeof(float);
  float* buf = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  for (size_t i = 0; i < n; ++i) buf[i] = static_cast<float>(i & 1023);
  std::vector<double> rates;
  volatile float sink = 0;
  for (int r = 0; r < repeats; ++r) {
    std::vector<float> partial(threads);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const size_t b = n / threads * t, e = t + 1 == threads ? n : n / threads * (t + 1);
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (size_t i = b; i + 32 <= e; i += 32) {
          a0 = _mm256_add_ps(a0, _mm256_load_ps(buf + i));
          a1 = _mm256_add_ps(a1, _mm256_load_ps(buf + i + 8));
          a2 = _mm256_add_ps(a2, _mm256_load_ps(buf + i + 16));
          a3 = _mm256_add_ps(a3, _mm256_load_ps(buf + i + 24));
        }
        float out[8];
        _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        partial[t] = out[0];
      });
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (float p : partial) sink = sink + p;
    rates.push_back(n * sizeof(float) / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  std::printf("read bandwidth, %d threads, %zu MiB: median %.2f GB/s (min %.2f, max %.2f)\n",
              threads, mib, rates[rates.size() / 2], rates.front(), rates.back());
  std::free(buf);
  return 0;
}
