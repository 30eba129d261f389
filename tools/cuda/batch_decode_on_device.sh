#!/usr/bin/env bash
# Batched decode on the GPU machine (issue #22), in one call: the GPU op tests, the decode-step
# linears at batched M under every kernel choice (cuda_bench linear-batch), and the shipped-model
# gates. Run from the repo root after `PACK_BENCH=1 tools/cuda/pack_engine.sh BUILD` here and a
# `run` that carries .cuda-carry-engine-xz. Logs go to $OUT (or ./cuda-logs).
#   tools/cuda/batch_decode_on_device.sh [kernels|all]
#     kernels: op tests and the linear-batch benchmark; all (default): also the shipped-model gates
#   TEST_FILTER: a gtest filter for the op tests (default: all of them)
set -uo pipefail
summary_name=batch_summary.txt
. "$(dirname "$0")/device_script.sh"  # root, out, $bin, summary, note, stamp
mode="${1:-all}"

nvidia-smi -L | tee -a "$summary"
stamp "cuda_tests ${TEST_FILTER:-(all)}"
timeout 300 "$carry/bin/run-cuda_tests" --gtest_filter="${TEST_FILTER:-*}" >"$out/cuda_tests.log" 2>&1
note "cuda_tests (rc $?): $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/cuda_tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$out/cuda_tests.log" | head -20 | tee -a "$summary"

stamp "cuda_bench linear-batch"
LD_LIBRARY_PATH="$carry/lib" timeout 240 "$carry/bin/cuda_bench" linear-batch >"$out/linear_batch.log" 2>&1
note "cuda_bench linear-batch (rc $?)"
sed -n '/== linear-batch/,$p' "$out/linear_batch.log" | tee -a "$summary"

if [ "$mode" = all ]; then
  stamp "engine gates (quick)"
  SKIP_OP_TESTS=1 timeout 300 "$root/tools/cuda/engine_on_device.sh" quick >"$out/engine_quick.log" 2>&1
  note "engine_on_device.sh quick (rc $?)"
  cat "$out/summary.txt" 2>/dev/null | tee -a "$summary"
fi
stamp "done"
