// Pinned host memory and stream capture into CUDA graphs (cuda_ops.h, "CUDA graphs").
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace lockstep::kernels::cuda {

void* malloc_pinned(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMallocHost(&p, bytes == 0 ? 1 : bytes);
  if (e != cudaSuccess)
    fail("CUDA pinned host allocation of ", bytes, " bytes failed: ", cudaGetErrorString(e));
  return p;
}

void free_pinned(void* p) {
  if (p) detail::check(cudaFreeHost(p), "free pinned");
}

void begin_capture() {
  detail::check(cudaStreamBeginCapture(detail::stream(), cudaStreamCaptureModeThreadLocal),
                "begin graph capture");
}

void* end_capture() {
  cudaGraph_t graph = nullptr;
  detail::check(cudaStreamEndCapture(detail::stream(), &graph), "end graph capture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  detail::check(e, "instantiate graph");
  return exec;
}

void abort_capture() {
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(detail::stream(), &graph);  // errors here are the failure being handled
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();
}

void launch_graph(void* graph) {
  detail::check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), detail::stream()),
                "launch graph");
}

void destroy_graph(void* graph) {
  if (graph) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

}  // namespace lockstep::kernels::cuda
