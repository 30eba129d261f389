#!/usr/bin/env bash
# Decode work on the GPU machine in one call: the op tests (a gtest filter), an optional
# cuda_bench section, the named-barrier racecheck probe, then the Qwen3-8B engine decode under
# two environments alternated in the same run (A/B, so the machine's drift hits both alike).
# Run from the repo root after tools/cuda/pack_engine.sh here (it packs lockstep, cuda_tests,
# cuda_bench and the probe), with carry [".cuda-carry-engine-xz"]:
#   TESTS='*Attention*' BENCH=attention-decode A='LOCKSTEP_CUDA_ATTN_MERGE=kernel' B='' \
#     bash tools/cuda/decode_ab_on_device.sh
#   C: a third environment in each round; TEST_ENV: the op tests' environment.
#   ROUNDS (default 2) A/B rounds; LIKE (default qwen3-8b); PROMPT (2048) and GEN (128) tokens.
#   GATES=gates|check: then engine_on_device.sh's generation gates (check: and CPU vs GPU).
# Logs and a summary go to $OUT.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root" || exit 1
out="${OUT:-$root/cuda-logs}"
mkdir -p "$out"
carry="$root/.cuda-carry-engine"
if [ ! -d "$carry/bin" ] && [ -f "$carry-xz/engine.tar.xz" ]; then
  mkdir -p "$carry" && tar -xJf "$carry-xz/engine.tar.xz" -C "$carry"
fi
export LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin="$carry/bin"
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$summary"

if [ -n "${TESTS:-}" ]; then
  stamp "cuda_tests $TESTS"
  env ${TEST_ENV:-} timeout 200 "$bin/cuda_tests" --gtest_filter="$TESTS" >"$out/tests.log" 2>&1
  note "cuda_tests $TESTS: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/tests.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$out/tests.log" | head -20 | tee -a "$summary"
fi
if [ -n "${BENCH:-}" ] && [ -x "$bin/cuda_bench" ]; then
  stamp "cuda_bench $BENCH"
  timeout 150 "$bin/cuda_bench" $BENCH >"$out/bench_kernels.log" 2>&1
  note "cuda_bench $BENCH: rc $? (bench_kernels.log)"
fi
if [ "${PROBE:-1}" = 1 ] && [ -x "$bin/barrier_probe" ] && command -v compute-sanitizer >/dev/null; then
  for sync in 0 1; do
    PROBE_SYNC=$sync "$bin/barrier_probe" >"$out/probe_plain_$sync.log" 2>&1
    PROBE_SYNC=$sync timeout 90 compute-sanitizer --tool racecheck "$bin/barrier_probe" >"$out/probe_racecheck_$sync.log" 2>&1
    note "probe ($([ $sync = 1 ] && echo __syncthreads || echo bar.arrive/bar.sync)): $(tail -1 "$out/probe_plain_$sync.log"); under racecheck: $(grep -E '^probe' "$out/probe_racecheck_$sync.log" | head -1) | $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$out/probe_racecheck_$sync.log" | tail -1)"
  done
fi

like="${LIKE:-qwen3-8b}"
ckpt=/tmp/lockstep-ab/$like
if [ "${ROUNDS:-2}" -gt 0 ]; then
  stamp "make-random $like"
  mkdir -p /tmp/lockstep-ab
  [ -d "$ckpt" ] || "$bin/lockstep" make-random --like "$like" -o "$ckpt" --seed 3 >/dev/null
  for r in $(seq "${ROUNDS:-2}"); do
    for side in A B ${C+C}; do
      envs="${!side:-}"
      stamp "bench $side ($envs) round $r"
      env $envs timeout 120 "$bin/lockstep" bench --device cuda -m "$ckpt" -p "${PROMPT:-2048}" \
        -n "${GEN:-128}" -r 3 >"$out/bench_${side}_$r.log" 2>&1
      note "round $r $side [$envs]: $(grep -E '^(prefill|decode) |rror' "$out/bench_${side}_$r.log" | tr -s ' ' | tr '\n' '|')"
    done
  done
fi
if [ -n "${PROFILE_ENV+x}" ]; then  # one eager per-op profile under the given environment
  env $PROFILE_ENV LOCKSTEP_CUDA_PROFILE=1 timeout 90 "$bin/lockstep" bench --device cuda -m "$ckpt" \
    -p "${PROMPT:-2048}" -n 32 -r 1 >"$out/profile.txt" 2>&1
fi
if [ -n "${GATES:-}" ]; then  # engine_on_device.sh's gates (GATES=check: and CPU vs GPU agreement)
  stamp "gates ($GATES)"
  SKIP_OP_TESTS=1 OUT="$out/gates" bash tools/cuda/engine_on_device.sh "$GATES" >"$out/gates.console" 2>&1
  cat "$out/gates/summary.txt" >>"$summary"
  tail -12 "$out/gates/summary.txt"
fi
stamp done
echo "=== summary ==="
cat "$summary"
