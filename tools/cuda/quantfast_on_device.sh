#!/usr/bin/env bash
# The quantized decode linear's configs on the GPU, in one device call: the quantized linear tests
# (every M <= 16 config forced, bitwise against the BF16 linear of the dequantized matrix), then
# `cuda_bench linear-quant` (Qwen3-8B decode shapes, BF16 / 8-bit / 4-bit, every config). Logs go
# to $OUT: tests.log, bench.log, summary.txt.
#   Here (the device tool sends the session's checkout, /work/main, so the pack travels from
#   there): tools/cuda/pack.sh build-q2 with CARRY=.cuda-carry-quantfast, then
#   tar -C /work/main/.cuda-carry-quantfast -cJf /work/main/.cuda-carry-quantfast-xz/bin.tar.xz .
#   and cp this script into /work/main/.cuda-carry-quantfast-xz/; `run` with carry
#   [".cuda-carry-quantfast-xz"]: bash .cuda-carry-quantfast-xz/quantfast_on_device.sh
#   TESTS_S / BENCH_S: time limits of the two steps (default 110 s and 80 s).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/quantfast-logs}"
mkdir -p "$out" /tmp/qf
tar -xJf "$here/bin.tar.xz" -C /tmp/qf
export LD_LIBRARY_PATH="/tmp/qf/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
summary="$out/summary.txt"
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a "$summary"; }
nvidia-smi -L | tee -a "$summary"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >>"$summary" 2>&1
# A short first run: a kernel that never finishes (a barrier mismatch) shows here, and the bench
# then times only the configs before the warp-specialized ones.
max_cfg=0
stamp "smoke: one quantized linear test"
timeout 30 /tmp/qf/bin/cuda_tests --gtest_filter='*b8_g128_F16_8200x512*:*b4_g128_F16_8200x512*' \
  >"$out/smoke.log" 2>&1
rc=$?
echo "smoke exit code: $rc" | tee -a "$summary"
grep -E '^\[  (PASSED|FAILED)  \]|runs differ' "$out/smoke.log" | cut -c1-400 | tee -a "$summary"
if [ "$rc" = 124 ]; then
  echo "smoke test hung: bench limited to configs 1-4, full tests skipped" | tee -a "$summary"
  max_cfg=4
else
  stamp "cuda_tests *Quant*"
  timeout "${TESTS_S:-110}" /tmp/qf/bin/cuda_tests --gtest_filter='*Quant*' >"$out/tests.log" 2>&1
  echo "tests exit code: $?" | tee -a "$summary"
fi
grep -E '^\[  (PASSED|FAILED)  \]|did not fit|never ran' "$out/tests.log" 2>/dev/null | head -40 | tee -a "$summary"
grep -E 'runs differ|differs from' "$out/tests.log" 2>/dev/null | head -12 | cut -c1-600 | tee -a "$summary"
stamp "cuda_bench linear-quant"
timeout "${BENCH_S:-80}" /tmp/qf/bin/cuda_bench linear-quant $max_cfg >"$out/bench.log" 2>&1
echo "bench exit code: $?" | tee -a "$summary"
stamp "done"
cat "$out/bench.log"
