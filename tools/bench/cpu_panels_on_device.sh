#!/usr/bin/env bash
# The CPU's 4/8-bit panel layout (kernels/cpu/quant_panels.h) against the checkpoint layout and
# llama.cpp, on the GPU machine's host CPU (16 cores; Intel there) in one call: the MoE decode of
# tools/bench/moe_cpu_vs_llamacpp.sh (a qwen3-30b-a3b shape with LAYERS layers, 4-bit against
# Q4_0 --pure) and the dense decode of tools/bench/quant_vs_llamacpp.sh (a qwen3-1.7b shape, 4- and
# 8-bit against Q4_0 --pure and Q8_0), each with the same engine under LOCKSTEP_CPU_PANELS=0 as
# the third engine of every round. llama.cpp (CPU only, GGML_NATIVE) is built from the carried
# source tarball. Run from the repo root with carry [".cuda-carry-engine-xz", ".cuda-carry-llama"]
# (tools/cuda/pack_engine.sh, tools/bench/pack_llama_cuda.sh):
#   tools/bench/cpu_panels_on_device.sh build   only build llama.cpp (e.g. in the background while
#                                               the same call runs GPU checks)
#   tools/bench/cpu_panels_on_device.sh         the benchmarks (building llama.cpp first if needed)
# env: LAYERS (8), ROUNDS (2; 0: no MoE runs), THREADS ("2 16"), DENSE (1: also the dense runs,
# DENSE_ROUNDS 1), B_ENV (engine B's environment, default LOCKSTEP_CPU_PANELS=0).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root" || exit 1
out="${OUT:-$root/cuda-logs}"
mkdir -p "$out"
llama=/tmp/moe-vs-llamacpp-work/llama/build  # where moe_cpu_vs_llamacpp.sh builds it
build_llama() {
  OUT="$out" BUILD_ONLY=1 bash tools/bench/moe_cpu_vs_llamacpp.sh .cuda-carry-llama/llama-src.tar.xz
}
if [ "${1:-}" = build ]; then build_llama; exit $?; fi
. tools/cuda/engine_env.sh  # $bin: the packed engine
lscpu | grep -m1 "Model name" | tee "$out/cpu.txt"
uptime | tee -a "$out/cpu.txt"
build_llama || { echo "llama.cpp build failed"; tail -n 20 "$out"/llama_*.log; exit 1; }
# Engine B: this engine under B_ENV (default the checkpoint layout; e.g.
# B_ENV=LOCKSTEP_CPU_PANEL_PREFETCH_BYTES=6144 for panels with the GEMV's software prefetch,
# which Intel CPUs dropped on 2026-12-05 on the evidence of one 2-core VM: the host is the
# second Intel CPU to check).
engine_b=/tmp/lockstep-engine-b
printf '#!/bin/sh\nexec env %s "%s" "$@"\n' "${B_ENV:-LOCKSTEP_CPU_PANELS=0}" "$bin" >"$engine_b"
chmod +x "$engine_b"
echo "engine B: ${B_ENV:-LOCKSTEP_CPU_PANELS=0}" | tee -a "$out/cpu.txt"
threads="${THREADS:-2 16}"
[ "${ROUNDS:-2}" = 0 ] ||
  OUT="$out/moe" LLAMA_BIN_DIR="$llama/bin" LOCKSTEP_BIN="$bin" LOCKSTEP_BIN_B="$engine_b" \
    bash tools/bench/moe_cpu_vs_llamacpp.sh none "${LAYERS:-8}" "${ROUNDS:-2}" "$threads" 2>&1 |
    tail -n 12 | tee "$out/moe_summary.txt"
[ "${DENSE:-1}" = 1 ] || exit 0
for t in $threads; do
  LOCKSTEP_BIN="$bin" LOCKSTEP_BIN_B="$engine_b" \
    ENGINES="ls:q4 lb:q4 ll:Q4_0-pure ls:q8 lb:q8 ll:Q8_0" \
    bash tools/bench/quant_vs_llamacpp.sh "$llama" /tmp/qvl "${DENSE_ROUNDS:-1}" "$t" 2>&1 |
    tail -n 14 | tee "$out/dense_t$t.txt"
done
