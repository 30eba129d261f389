#pragma once
// Tuning choices of the CPU kernels that change which loads and prefetches run, never the
// arithmetic: every value here gives the same bits. Read once from the environment so a
// machine's best value can be measured without a rebuild (tools/bench/cpu_decode_study.sh).

#include <cstdint>

namespace lockstep::kernels {

// Bytes of weights a one-row linear asks for ahead of the ones it reads, summed over the rows of
// a tile (LOCKSTEP_CPU_PREFETCH_BYTES; 0 turns software prefetch off; by default 0 on Zen 3/4,
// whose one-row tiles are one stream the hardware follows, 6 KB elsewhere).
int64_t gemv_prefetch_bytes();
// Locality of those prefetches, as __builtin_prefetch takes it (LOCKSTEP_CPU_PREFETCH_HINT: nta =
// 0, t2 = 1, t1 = 2, t0 = 3; by default t2 on Intel CPUs and nta on others, cpu_tuning.cpp says
// why). Where a line lands decides which miss queue tracks it.
int gemv_prefetch_locality();
// Bytes a one-row call on panels (quant_panels.h) asks for ahead of its single stream
// (LOCKSTEP_CPU_PANEL_PREFETCH_BYTES; 0 turns it off). By default 0 on Intel CPUs, whose
// hardware prefetchers follow one stream per thread better without it (cpu_tuning.cpp has the
// figures), elsewhere gemv_prefetch_bytes(). The locality is gemv_prefetch_locality()'s.
int64_t panel_prefetch_bytes();
void set_panel_prefetch_bytes(int64_t bytes);  // tests
// Weight rows a one-row linear reads side by side in one tile (LOCKSTEP_CPU_GEMV_ROWS: 1, 2, 4
// or 8): more rows share each activation load, fewer rows make fewer concurrent DRAM streams
// (cpu_tuning.cpp says which CPUs want which).
int gemv_tile_rows();
// gemv_tile_rows(), at most `widest`: what a kernel whose widest one-row tile is `widest` uses.
int gemv_tile_rows_up_to(int widest);
void set_gemv_tile_rows(int rows);  // tests: every choice must give the oracle's bits
// Overrides both (tests: every choice must give the oracle's bits). locality 0..3.
void set_gemv_prefetch(int64_t bytes, int locality);
// Calls of at least this many rows take the int8 quant dot's group-interleaved 4-bit tiles
// (linear_quant_int8.cpp), which transpose each block of weight rows once per call
// (LOCKSTEP_CPU_INTERLEAVED_MIN_ROWS; 0 never; default 4).
int64_t interleaved_min_rows();
void set_interleaved_min_rows(int64_t rows);  // tests
// Whether CpuBackend::place() lays 4/8-bit weights out in panels for the int8 quant dot
// (kernels/cpu/quant_panels.h; LOCKSTEP_CPU_PANELS=0 keeps the checkpoint's layout; default on).
bool cpu_panels();

}  // namespace lockstep::kernels
