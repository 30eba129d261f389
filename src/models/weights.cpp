#include "models/weights.h"

#include <map>
#include <mutex>

#include "core/error.h"
#include "kernels/ref/ref_ops.h"
#include "models/quantize.h"

namespace lockstep {

namespace {

// Checkpoints with a live QuantizeOnLoad. matrix() runs only while a model loads; the lock makes
// loading two models from two threads safe.
std::mutex g_mutex;
std::map<const Checkpoint*, QuantizeOnLoad*> g_quantizers;

QuantizeOnLoad* quantizer_for(const Checkpoint& ckpt) {
  std::lock_guard lock(g_mutex);
  auto it = g_quantizers.find(&ckpt);
  return it == g_quantizers.end() ? nullptr : it->second;
}

// The MLX layout of `stem` (.weight codes, .scales, .biases) as a Weight [rows][cols].
kernels::Weight quantized_view(const Checkpoint& ckpt, const std::string& name,
                               const std::string& stem, int64_t rows, int64_t cols) {
  const TensorInfo& codes = ckpt.require(name, {}, {DType::U32});
  const TensorInfo& scales =
      ckpt.require(stem + ".scales", {}, {DType::BF16, DType::F16, DType::F32});
  if (codes.shape.size() != 2 || codes.shape[0] != rows || codes.shape[1] <= 0 ||
      (32 * codes.shape[1]) % cols != 0)
    fail(codes.file, ": tensor ", name, ": expected packed codes [", rows,
         ", cols * bits / 32] for ", cols, " columns, found ", codes.shape_string());
  if (scales.shape.size() != 2 || scales.shape[0] != rows || scales.shape[1] <= 0 ||
      cols % scales.shape[1] != 0)
    fail(scales.file, ": tensor ", stem, ".scales: expected [", rows, ", ", cols,
         " / group_size], found ", scales.shape_string());
  const TensorInfo& biases = ckpt.require(stem + ".biases", scales.shape, {scales.dtype});
  kernels::Weight w;
  w.rows = rows;
  w.cols = cols;
  w.data = codes.data;
  w.quant = kernels::QuantFormat::Affine;
  w.bits = static_cast<int>(32 * codes.shape[1] / cols);
  w.group_size = cols / scales.shape[1];
  w.scale_dtype = scales.dtype;
  w.scales = scales.data;
  w.biases = biases.data;
  kernels::check_quant_layout(w, (ckpt.dir() + ": tensor " + name).c_str());
  return w;
}

}  // namespace

kernels::Weight stacked_matrix(const Checkpoint& ckpt, const std::string& name, int64_t count,
                               int64_t total_rows, int64_t cols, int64_t index, int64_t row_begin,
                               int64_t rows) {
  if (index < 0 || index >= count || row_begin < 0 || row_begin + rows > total_rows)
    fail("stacked_matrix: slice ", index, " rows [", row_begin, ", ", row_begin + rows,
         ") outside [", count, ", ", total_rows, "] of ", name);
  const std::string stem = tensor_stem(name);
  const int64_t first_row = index * total_rows + row_begin;  // of the [count * total_rows] rows
  if (ckpt.has(stem + ".scales")) {
    const TensorInfo& codes = ckpt.require(name, {}, {DType::U32});
    const TensorInfo& scales =
        ckpt.require(stem + ".scales", {}, {DType::BF16, DType::F16, DType::F32});
    if (codes.shape.size() != 3 || codes.shape[0] != count || codes.shape[1] != total_rows ||
        codes.shape[2] <= 0 || (32 * codes.shape[2]) % cols != 0)
      fail(codes.file, ": tensor ", name, ": expected packed codes [", count, ", ", total_rows,
           ", cols * bits / 32] for ", cols, " columns, found ", codes.shape_string());
    if (scales.shape.size() != 3 || scales.shape[0] != count || scales.shape[1] != total_rows ||
        scales.shape[2] <= 0 || cols % scales.shape[2] != 0)
      fail(scales.file, ": tensor ", stem, ".scales: expected [", count, ", ", total_rows, ", ",
           cols, " / group_size], found ", scales.shape_string());
    const TensorInfo& biases = ckpt.require(stem + ".biases", scales.shape, {scales.dtype});
    const int64_t words = codes.shape[2], groups = scales.shape[2];
    const size_t sbytes = dtype_size(scales.dtype);
    kernels::Weight w;
    w.rows = rows;
    w.cols = cols;
    w.data = codes.data + first_row * words * sizeof(uint32_t);
    w.quant = kernels::QuantFormat::Affine;
    w.bits = static_cast<int>(32 * words / cols);
    w.group_size = cols / groups;
    w.scale_dtype = scales.dtype;
    w.scales = scales.data + first_row * groups * sbytes;
    w.biases = biases.data + first_row * groups * sbytes;
    kernels::check_quant_layout(w, (ckpt.dir() + ": tensor " + name).c_str());
    return w;
  }
  const TensorInfo& t = ckpt.require(name, {count, total_rows, cols},
                                     {DType::F32, DType::BF16, DType::F16});
  kernels::Weight w;
  w.dtype = t.dtype;
  w.rows = rows;
  w.cols = cols;
  w.data = t.data + first_row * cols * static_cast<int64_t>(dtype_size(t.dtype));
  if (QuantizeOnLoad* q = quantizer_for(ckpt)) return q->convert(name, w);
  return w;
}

kernels::Weight matrix(const Checkpoint& ckpt, const std::string& name, int64_t rows,
                       int64_t cols) {
  const std::string stem = tensor_stem(name);
  if (ckpt.has(stem + ".scales")) return quantized_view(ckpt, name, stem, rows, cols);
  const TensorInfo& t = ckpt.require(name, {rows, cols});
  if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16)
    fail(t.file, ": tensor ", name, ": expected dtype F32, BF16 or F16, found ",
         dtype_name(t.dtype));
  kernels::Weight w;
  w.dtype = t.dtype;
  w.rows = rows;
  w.cols = cols;
  w.data = t.data;
  if (QuantizeOnLoad* q = quantizer_for(ckpt)) return q->convert(name, w);
  return w;
}

std::vector<float> tensor_f32(const Checkpoint& ckpt, const std::string& name,
                              const std::vector<int64_t>& shape) {
  const TensorInfo& t = ckpt.require(name, shape);
  const int64_t n = t.numel();
  std::vector<float> out(n);
  if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16)
    fail(t.file, ": tensor ", name, ": expected dtype F32, BF16 or F16, found ",
         dtype_name(t.dtype));
  for (int64_t i = 0; i < n; ++i) out[i] = kernels::ref::weight_at(t.dtype, t.data, n, 0, i);
  return out;
}

std::vector<float> vector_f32(const Checkpoint& ckpt, const std::string& name, int64_t n) {
  return tensor_f32(ckpt, name, {n});
}

QuantizeOnLoad::QuantizeOnLoad(const Checkpoint& ckpt, const ModelOptions& o)
    : ckpt_(&ckpt),
      bits_(o.quantize_bits),
      group_size_(o.quantize_group_size),
      keep_embeddings_(o.quantize_keep_embeddings),
      pool_(o.pool ? o.pool : &ThreadPool::global()) {
  if (bits_ != 4 && bits_ != 8) fail("--quantize: expected 4 or 8 bits, found ", bits_);
  if (group_size_ <= 0 || group_size_ % kernels::kLanes != 0)
    fail("--group-size: expected a positive multiple of ", kernels::kLanes, ", found ",
         group_size_);
  std::lock_guard lock(g_mutex);
  g_quantizers[ckpt_] = this;
}

QuantizeOnLoad::~QuantizeOnLoad() {
  std::lock_guard lock(g_mutex);
  g_quantizers.erase(ckpt_);
}

kernels::Weight QuantizeOnLoad::convert(const std::string& name, const kernels::Weight& w) {
  if (quantize_keeps_float(name, keep_embeddings_)) return w;
  if (w.cols % group_size_ != 0) return w;
  owned_.push_back(kernels::quantize_affine(w, bits_, group_size_,
                                            kernels::default_scale_dtype(w.dtype), *pool_));
  return owned_.back().view();
}

std::unique_ptr<QuantizeOnLoad> quantize_on_load(const Checkpoint& ckpt,
                                                 const ModelOptions& options) {
  if (options.quantize_bits == 0) return nullptr;
  return std::make_unique<QuantizeOnLoad>(ckpt, options);
}

}  // namespace lockstep
