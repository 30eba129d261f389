#include "kernels/backend.h"

#include "core/error.h"

namespace lockstep::kernels {

std::string_view device_name(Device d) { return d == Device::Cuda ? "cuda" : "cpu"; }

Device parse_device(std::string_view name) {
  if (name == "cpu") return Device::Cpu;
  if (name == "cuda") return Device::Cuda;
  fail("unknown device '", name, "' (expected cpu or cuda)");
}

void Backend::gelu_tanh_mul(const float*, const float*, float*, int64_t) {
  fail(describe(), ": gelu_tanh_mul is not implemented on this backend");
}
void Backend::scale(float*, int64_t, float) {
  fail(describe(), ": scale is not implemented on this backend");
}
void Backend::softcap(float*, int64_t, float) {
  fail(describe(), ": softcap is not implemented on this backend");
}

void Backend::moe_route(const float*, int64_t, int64_t, int64_t, bool, const float*, int32_t*,
                        float*) {
  fail(describe(), ": moe_route is not implemented on this backend (it routes on the host)");
}
void Backend::moe_group(const int32_t*, int64_t, int64_t, int64_t, bool, int32_t*, int32_t*,
                        int32_t*) {
  fail(describe(), ": moe_group is not implemented on this backend (it groups on the host)");
}
void Backend::moe_route_group(const float* logits, int64_t T, int64_t E, int64_t k,
                              bool normalize, const float* expert_scale, bool shared,
                              int32_t* experts, float* weights, int32_t* source, int32_t* slot,
                              int32_t* groups) {
  moe_route(logits, T, E, k, normalize, expert_scale, experts, weights);
  moe_group(experts, T, k, E, shared, source, slot, groups);
}
void Backend::linear_experts(std::span<const Weight* const>, int64_t, const float*,
                             const int32_t*, std::span<float* const>, const int32_t*, int64_t,
                             int64_t) {
  fail(describe(), ": linear_experts is not implemented on this backend (linear_grouped is)");
}

std::unique_ptr<Backend> make_backend(Device d, ThreadPool* threads) {
  return d == Device::Cuda ? make_cuda_backend(threads) : make_cpu_backend(threads);
}

#ifndef LOCKSTEP_HAVE_CUDA
std::unique_ptr<Backend> make_cuda_backend(ThreadPool*) {
  fail("--device cuda: this lockstep was built without the CUDA backend (configure with nvcc "
       "installed, or -DLOCKSTEP_CUDA=ON)");
}
#endif

}  // namespace lockstep::kernels
