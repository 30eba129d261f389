#include "kernels/quant_format.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kernels/ref/ref_ops.h"

namespace lockstep::kernels {

int64_t Weight::bytes() const {
  if (quant == QuantFormat::None) return rows * cols * static_cast<int64_t>(dtype_size(dtype));
  const int64_t groups = rows * (cols / group_size);
  return rows * cols * bits / 8 + 2 * groups * static_cast<int64_t>(dtype_size(scale_dtype));
}

void check_quant_layout(const Weight& w, const char* what) {
  if (w.quant != QuantFormat::Affine) fail(what, ": unknown quantization format");
  if (w.bits != 4 && w.bits != 8)
    fail(what, ": ", w.bits, "-bit codes are not supported (expected 4 or 8)");
  if (w.group_size <= 0 || w.group_size % kLanes != 0 || w.cols % w.group_size != 0)
    fail(what, ": group size ", w.group_size, " must be a multiple of ", kLanes,
         " dividing the row length ", w.cols);
  if (w.scale_dtype != DType::F32 && w.scale_dtype != DType::BF16 && w.scale_dtype != DType::F16)
    fail(what, ": scales of dtype ", dtype_name(w.scale_dtype),
         " are not supported (expected F32, BF16 or F16)");
}

Weight QuantizedMatrix::view() const {
  Weight w;
  w.rows = rows;
  w.cols = cols;
  w.data = words.data();
  w.quant = QuantFormat::Affine;
  w.bits = bits;
  w.group_size = group_size;
  w.scale_dtype = scale_dtype;
  w.scales = scales.data();
  w.biases = biases.data();
  return w;
}

namespace {

// A value of the 16-bit storage formats, moved one representable step down or up. BF16 and F16
// both order magnitudes like unsigned integers below a sign bit.
uint16_t step_down16(uint16_t h) {
  if (h == 0x0000) return 0x8001;
  return (h & 0x8000) ? h + 1 : h - 1;
}
uint16_t step_up16(uint16_t h) {
  if (h == 0x8000 || h == 0x0000) return 0x0001;
  return (h & 0x8000) ? h - 1 : h + 1;
}

// v rounded to `dtype`, toward -inf (down) or +inf (up); written at `out`, returned as float.
float store_directed(DType dtype, float v, bool down, uint8_t* out) {
  if (dtype == DType::F32) {
    std::memcpy(out, &v, 4);
    return v;
  }
  const bool bf = dtype == DType::BF16;
  uint16_t h = bf ? f32_to_bf16(v) : f32_to_f16(v);
  auto value = [&](uint16_t x) { return bf ? bf16_to_f32(x) : f16_to_f32(x); };
  while (down ? value(h) > v : value(h) < v) h = down ? step_down16(h) : step_up16(h);
  std::memcpy(out, &h, 2);
  return value(h);
}

void quantize_row(const Weight& w, int64_t n, QuantizedMatrix& q) {
  const int64_t K = w.cols, G = q.group_size, groups = K / G;
  const size_t ss = dtype_size(q.scale_dtype);
  const uint32_t top = (1u << q.bits) - 1u;
  const int per_word = 32 / q.bits;
  uint32_t* words = q.words.data() + n * (K / per_word);
  std::vector<float> v(G);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t i = 0; i < G; ++i) v[i] = ref::weight_at(w.dtype, w.data, K, n, g * G + i);
    const auto [mn, mx] = std::minmax_element(v.begin(), v.end());
    const int64_t at = n * groups + g;
    const float bias = store_directed(q.scale_dtype, *mn, true, &q.biases[at * ss]);
    const double want = (static_cast<double>(*mx) - bias) / top;
    const float scale =
        store_directed(q.scale_dtype, static_cast<float>(want), false, &q.scales[at * ss]);
    for (int64_t i = 0; i < G; ++i) {
      double c = scale > 0 ? std::nearbyint((static_cast<double>(v[i]) - bias) / scale) : 0.0;
      c = std::clamp(c, 0.0, static_cast<double>(top));
      const int64_t k = g * G + i;
      words[k / per_word] |= static_cast<uint32_t>(c) << ((k % per_word) * q.bits);
    }
  }
}

}  // namespace

QuantizedMatrix quantize_affine(const Weight& w, int bits, int64_t group_size, DType scale_dtype,
                                ThreadPool& pool) {
  if (w.quant != QuantFormat::None) fail("quantize: the matrix is already quantized");
  QuantizedMatrix q;
  q.rows = w.rows;
  q.cols = w.cols;
  q.bits = bits;
  q.group_size = group_size;
  q.scale_dtype = scale_dtype;
  check_quant_layout(q.view(), "quantize");
  q.words.assign(static_cast<size_t>(w.rows * w.cols * bits / 32), 0u);
  const size_t scale_bytes = static_cast<size_t>(w.rows * (w.cols / group_size)) *
                             dtype_size(scale_dtype);
  q.scales.assign(scale_bytes, 0);
  q.biases.assign(scale_bytes, 0);
  pool.parallel_for(w.rows, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) quantize_row(w, n, q);
  });
  return q;
}

}  // namespace lockstep::kernels
