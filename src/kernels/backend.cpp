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

void Backend::deltanet_step_norm(const DeltaNetShape& s, const float* conv_w, const float* A_log,
                                 const float* dt_bias, const float* inputs, int64_t T,
                                 const DeltaNetSpan* spans, int64_t n_spans,
                                 int64_t max_span_tokens, const float* z, const float* norm_w,
                                 float eps, float* core) {
  deltanet_step(s, conv_w, A_log, dt_bias, inputs, T, spans, n_spans, max_span_tokens, core);
  gated_rms_norm(core, z, T * s.nv, s.dv, norm_w, eps, core);
}

void Backend::deltanet_regroup(const DeltaNetShape& d, const float* qkvz, const float* ba,
                               int64_t T, float* inputs, float* z) {
  const int64_t r = d.nv / d.nk, KD = d.key_dim(), C = d.conv_dim(), TI = d.token_inputs();
  const int64_t VD = d.value_dim(), grp = 2 * d.dk + 2 * r * d.dv, QZ = d.nk * grp;
  for (int64_t g = 0; g < d.nk; ++g) {
    const float* src = qkvz + g * grp;
    copy_2d(inputs + g * d.dk, TI, src, QZ, T, d.dk);                            // q
    copy_2d(inputs + KD + g * d.dk, TI, src + d.dk, QZ, T, d.dk);                // k
    copy_2d(inputs + 2 * KD + g * r * d.dv, TI, src + 2 * d.dk, QZ, T, r * d.dv);  // v
    copy_2d(z + g * r * d.dv, VD, src + 2 * d.dk + r * d.dv, QZ, T, r * d.dv);     // z
    const float* sba = ba + g * 2 * r;
    copy_2d(inputs + C + g * r, TI, sba + r, 2 * d.nv, T, r);         // a
    copy_2d(inputs + C + d.nv + g * r, TI, sba, 2 * d.nv, T, r);      // b
  }
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
