// Does compute-sanitizer's racecheck model a producer/consumer hand-off over named barriers
// (bar.arrive by the writers, bar.sync by the readers)? linear_quant_ws.cuh hands its BF16 tiles
// over exactly so, and racecheck reported hazards there (fifth session) while every bitwise test
// passed. This probe runs the same protocol with nothing else in it: 2 producer warps fill tile
// j % 2 with j + lane-dependent values, 2 consumer warps check them, FULL(t) = barrier 1 + t,
// EMPTY(t) = barrier 3 + t, 64 stages. It checks its own results (a real race would show up as
// wrong values over many blocks) and prints them; then run it under racecheck:
//   nvcc -O3 -arch=sm_90 tools/cuda/barrier_race_probe.cu -o /tmp/probe
//   /tmp/probe && compute-sanitizer --tool racecheck /tmp/probe
// If racecheck reports hazards here too, its reports on the warp-specialized kernel are about
// the protocol, not the kernel. PROBE_SYNC=1 uses __syncthreads around each stage instead (the
// control: racecheck must stay silent).
#include <cstdio>
#include <cstdlib>

constexpr int kStages = 64, kTileWords = 1024, kThreads = 128;

template <bool SYNC>
__global__ void probe(unsigned* bad) {
  __shared__ unsigned tile[2][kTileWords];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const bool producer = warp < 2;
  unsigned wrong = 0;
  for (int j = 0; j < kStages; ++j) {
    const int t = j & 1;
    if constexpr (SYNC) {
      if (producer)
        for (int i = threadIdx.x; i < kTileWords; i += 64) tile[t][i] = j * 7919u + i;
      __syncthreads();
      if (!producer)
        for (int i = threadIdx.x - 64; i < kTileWords; i += 64) wrong += tile[t][i] != j * 7919u + i;
      __syncthreads();
    } else if (producer) {
      if (j >= 2) {  // EMPTY(t): the consumers are done with stage j - 2
        if (t == 0) asm volatile("bar.sync 3, %0;" ::"n"(kThreads) : "memory");
        else asm volatile("bar.sync 4, %0;" ::"n"(kThreads) : "memory");
      }
      for (int i = threadIdx.x; i < kTileWords; i += 64) tile[t][i] = j * 7919u + i;
      if (t == 0) asm volatile("bar.arrive 1, %0;" ::"n"(kThreads) : "memory");
      else asm volatile("bar.arrive 2, %0;" ::"n"(kThreads) : "memory");
    } else {
      if (t == 0) asm volatile("bar.sync 1, %0;" ::"n"(kThreads) : "memory");
      else asm volatile("bar.sync 2, %0;" ::"n"(kThreads) : "memory");
      for (int i = threadIdx.x - 64; i < kTileWords; i += 64) wrong += tile[t][i] != j * 7919u + i;
      if (j + 2 < kStages) {  // EMPTY(t), skipped for the last two stages (no producer waits)
        if (t == 0) asm volatile("bar.arrive 3, %0;" ::"n"(kThreads) : "memory");
        else asm volatile("bar.arrive 4, %0;" ::"n"(kThreads) : "memory");
      }
    }
  }
  (void)lane;
  if (wrong) atomicAdd(bad, wrong);
}

int main() {
  const bool sync = std::getenv("PROBE_SYNC") && std::getenv("PROBE_SYNC")[0] == '1';
  unsigned* bad = nullptr;
  cudaMalloc(&bad, sizeof(unsigned));
  cudaMemset(bad, 0, sizeof(unsigned));
  if (sync) probe<true><<<264, kThreads>>>(bad);
  else probe<false><<<264, kThreads>>>(bad);
  unsigned h = 0;
  const cudaError_t e = cudaMemcpy(&h, bad, sizeof(unsigned), cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    std::printf("probe: %s\n", cudaGetErrorString(e));
    return 2;
  }
  std::printf("probe (%s): %u wrong values over 264 blocks x %d stages\n",
              sync ? "__syncthreads" : "bar.arrive / bar.sync", h, kStages);
  return h == 0 ? 0 : 1;
}
