// CpuBackend::place() on a checkpoint's mapped weight (kernels/cpu/quant_panels.h): the mapped
// code pages are handed back once the panels hold them (core/file_mappings.h tells file pages
// from anonymous memory), the weight's checkpoint bytes still read the same afterwards, and the
// placed weight computes the oracle's bits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/file_mappings.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "kernels/numerics.h"
#include "kernels/ops.h"
#include "kernels/quant_format.h"
#include "kernels/ref/quant_int8_ref.h"

namespace lockstep {
namespace {
namespace fs = std::filesystem;

std::vector<uint8_t> bytes_of(const std::vector<uint8_t>& v) { return v; }

// Resident bytes of the mapping holding p (/proc/self/smaps), -1 if none does.
int64_t resident_bytes_of_mapping(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2 && line.find(':') > line.find(' '))
      inside = at >= lo && at < hi;
    else if (inside && line.rfind("Rss:", 0) == 0)
      return std::stoll(line.substr(4)) * 1024;
  }
  return -1;
}

TEST(CpuPanels, MappedCheckpointPagesAreHandedBackAndStillRead) {
  const int64_t N = 64, K = 2048;  // 64 KB of 4-bit codes: whole pages to hand back
  std::vector<uint8_t> raw(N * K * 2);
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  for (size_t i = 1; i < raw.size(); i += 2) raw[i] = 0x3c + (raw[i] & 1);  // BF16 near +-1
  kernels::Weight f;
  f.dtype = DType::BF16;
  f.rows = N;
  f.cols = K;
  f.data = raw.data();
  ThreadPool pool(2);
  const kernels::QuantizedMatrix q = kernels::quantize_affine(f, 4, 64, DType::BF16, pool);

  const fs::path path = fs::temp_directory_path() /
                        ("lockstep-panels-" + std::to_string(getpid()) + ".safetensors");
  std::vector<uint8_t> words(q.words.size() * 4);
  std::memcpy(words.data(), q.words.data(), words.size());
  write_safetensors(path.string(),
                    {{"w.weight", DType::U32, {N, K / 8}, words},
                     {"w.scales", DType::BF16, {N, K / 64}, bytes_of(q.scales)},
                     {"w.biases", DType::BF16, {N, K / 64}, bytes_of(q.biases)}});
  {
    const auto file = SafetensorsFile::open(path.string());
    const TensorInfo& t = file->tensors().at("w.weight");
    EXPECT_TRUE(in_file_mapping(t.data, t.nbytes));
    EXPECT_FALSE(in_file_mapping(words.data(), words.size()));
    kernels::Weight w = q.view();
    w.data = t.data;
    w.scales = file->tensors().at("w.scales").data;
    w.biases = file->tensors().at("w.biases").data;

    const kernels::QuantDot before = kernels::quant_dot();
    kernels::set_quant_dot(kernels::QuantDot::Int8);
    const auto be = kernels::make_backend(kernels::Device::Cpu, &pool);
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < t.nbytes; i += 64) sink = sink + t.data[i];  // all resident
    const int64_t resident = resident_bytes_of_mapping(t.data);
    ASSERT_GE(resident, static_cast<int64_t>(t.nbytes));
    const kernels::Weight placed = be->place(w);
    ASSERT_NE(placed.panels, nullptr);
    // Handed back: the codes' pages leave the process's resident set (all but the partial pages
    // at their ends, and what the kernel's fault-around maps beside the scales and biases).
    const int64_t page = sysconf(_SC_PAGESIZE);
    EXPECT_LE(resident_bytes_of_mapping(t.data), resident - static_cast<int64_t>(t.nbytes) + 4 * page);
    // The checkpoint's bytes read the same (mapped again from the page cache).
    EXPECT_EQ(0, std::memcmp(t.data, words.data(), words.size()));

    std::vector<float> x(3 * K);
    for (int64_t i = 0; i < 3 * K; ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
    for (int64_t M : {1, 3}) {
      std::vector<float> y(M * N), want(M * N);
      be->linear(x.data(), M, placed, nullptr, y.data());
      kernels::ref::quant_int8_linear_cols(x.data(), M, q.view(), 0, N, want.data());
      EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * 4)) << "M=" << M;
    }
    kernels::set_quant_dot(before);
  }
  fs::remove(path);
}

}  // namespace
}  // namespace lockstep
