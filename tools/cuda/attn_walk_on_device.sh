#!/usr/bin/env bash
# One device call for the prefill walk variants (LOCKSTEP_CUDA_ATTN_WALK = old | new | new12 |
# new8plain | oldsel | new12sel): the attention GPU tests (they loop over every variant and
# compare each with one T = 1 reference), `cuda_bench attention-prefill` (every variant in one
# run), ncu on one launch of each variant (oldsel and new12sel first), then the tests again with
# the old walk as the default (with what time is left). Logs: $OUT.
#   here:    tools/cuda/pack.sh build-a (CARRY=.cuda-carry-attn), copy this script into that
#            folder, and `run` with carry [".cuda-carry-attn"]:
#   there:   bash .cuda-carry-attn/attn_walk_on_device.sh
# The folder holds bin/ (cuda_tests, cuda_bench) and lib/, or bin.tar.xz with both.
set -uo pipefail
carry="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-$PWD/cuda-logs}"
mkdir -p "$out"
if [ ! -x "$carry/bin/cuda_tests" ] && [ -f "$carry/bin.tar.xz" ]; then
  mkdir -p /tmp/attn-carry && tar -C /tmp/attn-carry -xJf "$carry/bin.tar.xz" && carry=/tmp/attn-carry
fi
export LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  nvidia-smi -L
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total,driver_version --format=csv
} >"$out/info.txt" 2>&1
t0=$(date +%s)
echo "== attention tests (LOCKSTEP_CUDA_ATTN_WALK=${LOCKSTEP_CUDA_ATTN_WALK:-unset})"
timeout 150 "$carry/bin/cuda_tests" --gtest_filter='*Attention*' >"$out/tests-attention.log" 2>&1
echo "attention tests rc=$? ($(($(date +%s) - t0)) s)"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|OK \]|accuracy|differs" "$out/tests-attention.log" | head -30

echo "== cuda_bench attention-prefill"
t1=$(date +%s)
timeout 70 "$carry/bin/cuda_bench" attention-prefill 2>&1 | tee "$out/bench.log"
echo "bench rc=$? ($(($(date +%s) - t1)) s)"

ncu_bin="$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
echo "ncu: ${ncu_bin:-none}"
for v in 1 5 6 3 2 4; do
  [ -n "$ncu_bin" ] || break
  t1=$(date +%s)
  [ $((t1 - t0)) -gt 250 ] && { echo "ncu variant $v skipped (time)"; continue; }
  BENCH_WALK_VARIANT=$v timeout 40 "$ncu_bin" --clock-control none -k regex:attn_walk --launch-skip 3 \
    --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section SchedulerStats --section WarpStateStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section InstructionStats \
    "$carry/bin/cuda_bench" attention-prefill >>"$out/ncu.txt" 2>&1
  echo "ncu variant $v rc=$? ($(($(date +%s) - t1)) s)"
done

left=$((305 - ($(date +%s) - t0)))
if [ "$left" -gt 30 ]; then
  # The same tests with the one-pass walk as the default (it then computes the T = 1 reference).
  echo "== attention tests, LOCKSTEP_CUDA_ATTN_WALK=old (${left} s)"
  LOCKSTEP_CUDA_ATTN_WALK=old timeout "$left" "$carry/bin/cuda_tests" --gtest_filter='*Attention*' \
    >"$out/tests-attention-old.log" 2>&1
  echo "attention tests (old default) rc=$?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]|differs" "$out/tests-attention-old.log" | head -12
fi
echo "== summary"
grep -E "T=2048|T=4096|T=512 " "$out/bench.log"
grep -E "attn_walk|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible|Local" "$out/ncu.txt" | head -60
