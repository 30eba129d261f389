#!/usr/bin/env bash
# One device call for the prefill walk: the attention GPU tests (walk against split against
# decode, every rows-per-block choice, and the exhaustive exp test), then `cuda_bench
# attention-prefill` of this build and, where the carry folder holds bin/cuda_bench_base (a build
# of the code before a change), of that one too, alternated (base, new, base, new) so both are
# timed in the same run. Logs: $OUT.
#   here:    CARRY=.cuda-carry-attn2 tools/cuda/pack.sh build-a2, optionally copy a baseline
#            cuda_bench into that folder's bin/cuda_bench_base, copy this script in, tar -cJf
#            bin.tar.xz bin lib there (and drop bin/ lib/), and `run` with carry
#            [".cuda-carry-attn2"]:
#   there:   bash .cuda-carry-attn2/attn_on_device.sh
# A baseline built before the walk variants were removed runs only its default walk (oldsel)
# under BENCH_WALK_VARIANT=5; a later baseline ignores that variable.
# The folder holds bin/ (cuda_tests, cuda_bench, maybe cuda_bench_base) and lib/, or
# bin.tar.xz with both.
set -uo pipefail
carry="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-$PWD/cuda-logs}"
mkdir -p "$out"
if [ ! -x "$carry/bin/cuda_tests" ] && [ -f "$carry/bin.tar.xz" ]; then
  mkdir -p /tmp/attn-carry && tar -C /tmp/attn-carry -xJf "$carry/bin.tar.xz" && carry=/tmp/attn-carry
fi
export LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv >"$out/info.txt" 2>&1
t0=$(date +%s)
echo "== attention tests"
timeout 60 "$carry/bin/cuda_tests" --gtest_filter='*Attention*:*Exp*' >"$out/tests-attention.log" 2>&1
echo "attention tests rc=$? ($(($(date +%s) - t0)) s)"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|OK \]|accuracy|differs" "$out/tests-attention.log" | head -30
for round in 1 2; do
  [ "$round" = 2 ] && [ $(($(date +%s) - t0)) -gt 80 ] && { echo "round 2 skipped (time)"; break; }
  if [ -x "$carry/bin/cuda_bench_base" ]; then
    echo "== base cuda_bench attention-prefill (round $round)"
    BENCH_WALK_VARIANT=5 timeout 30 "$carry/bin/cuda_bench_base" attention-prefill 2>&1 | tee -a "$out/bench-base.log" | grep -E "^attention|=="
  fi
  echo "== new cuda_bench attention-prefill (round $round)"
  timeout 30 "$carry/bin/cuda_bench" attention-prefill 2>&1 | tee -a "$out/bench.log" | grep -E "^attention|=="
done
echo "total $(($(date +%s) - t0)) s"
