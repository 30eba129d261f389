// Pinned host memory and stream capture into CUDA graphs (cuda_ops.h, "CUDA graphs").
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

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

namespace {
std::atomic<int> last_programmatic_edges{0};

// Counts the graph's programmatic edges (kernel -> kernel PDL dependencies kept by the capture);
// LOCKSTEP_CUDA_GRAPH_STATS=1 prints nodes / edges / programmatic edges of each capture.
void note_edges(cudaGraph_t graph) {
  static const bool print = [] {
    const char* v = std::getenv("LOCKSTEP_CUDA_GRAPH_STATS");
    return v && std::strcmp(v, "0") != 0;
  }();
  size_t n = 0;
  if (cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n) != cudaSuccess) {
    cudaGetLastError();
    last_programmatic_edges.store(-1);
    return;
  }
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> data(n);
  int programmatic = 0;
  if (n > 0 && cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &n) == cudaSuccess) {
    for (size_t i = 0; i < n; ++i)
      if (data[i].type == cudaGraphDependencyTypeProgrammatic) ++programmatic;
  } else {
    cudaGetLastError();
  }
  last_programmatic_edges.store(programmatic);
  if (print) {
    size_t nodes = 0;
    cudaGraphGetNodes(graph, nullptr, &nodes);
    std::fprintf(stderr, "lockstep cuda graph: %zu nodes, %zu edges, %d programmatic (PDL %s)\n",
                 nodes, n, programmatic, detail::pdl_enabled() ? "on" : "off");
  }
}
}  // namespace

namespace testing {
int last_graph_programmatic_edges() { return last_programmatic_edges.load(); }
}  // namespace testing

void begin_capture() {
  detail::note_stream_op();  // the first captured kernel has no kernel before it in the graph
  detail::check(cudaStreamBeginCapture(detail::stream(), cudaStreamCaptureModeThreadLocal),
                "begin graph capture");
}

void* end_capture() {
  cudaGraph_t graph = nullptr;
  detail::check(cudaStreamEndCapture(detail::stream(), &graph), "end graph capture");
  detail::note_stream_op();
  note_edges(graph);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  detail::check(e, "instantiate graph");
  return exec;
}

void abort_capture() {
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(detail::stream(), &graph);  // errors here are the failure being handled
  detail::note_stream_op();
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();
}

void launch_graph(void* graph) {
  detail::note_stream_op();
  detail::check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), detail::stream()),
                "launch graph");
}

void destroy_graph(void* graph) {
  if (graph) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

}  // namespace lockstep::kernels::cuda
