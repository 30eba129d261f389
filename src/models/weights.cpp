#include "models/weights.h"

#include "core/error.h"
#include "kernels/ref/ref_ops.h"

namespace lockstep {

kernels::Weight matrix(const Checkpoint& ckpt, const std::string& name, int64_t rows,
                       int64_t cols) {
  const TensorInfo& t = ckpt.require(name, {rows, cols});
  if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16)
    fail(t.file, ": tensor ", name, ": expected dtype F32, BF16 or F16, found ",
         dtype_name(t.dtype));
  return {t.dtype, rows, cols, t.data};
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

}  // namespace lockstep
