#!/usr/bin/env bash
# Launch configs measured inside whole decode steps, in one call (the kernels' own sweeps time each
# launch alone; in a graph under PDL what matters is also how soon the next kernel's blocks fit):
# one random checkpoint (LIKE, default qwen3.5-35b-a3b, LAYERS layers, BF16), then
# - batch-1 decode (`bench -p 128 -n 64 -r 3`) under each environment of DECODE_ENVS (';'
#   separated; the first is the baseline and also prints LOCKSTEP_CUDA_GRAPH_STATS' step times:
#   host walk, GPU time and period of a replayed step), ROUNDS rounds alternated;
# - batched decode (`bench --batch BATCH -p 512 -n 32 -r 2`) under each of BATCH_ENVS, alternated,
#   BATCH_ROUNDS rounds (default ROUNDS);
# - first, the GPU op tests of TESTS (default: the grouped expert and skinny linear ones, which
#   force every config against the default bitwise; TESTS=none: no tests).
# Run from the repo root with carry [".cuda-carry-engine-xz"] (tools/cuda/pack_engine.sh).
set -uo pipefail
. "$(dirname "$0")/device_script.sh"
work=/tmp/lockstep-decode-configs
mkdir -p "$work"
nvidia-smi -L | tee -a "$summary"
[ "${TESTS:-}" = none ] || op_tests cuda_tests.log "${TESTS:-*GroupedExpert*:*Skinny*:*MoeLayerDevice*}"
like="${LIKE:-qwen3.5-35b-a3b}" layers="${LAYERS:-12}"
m="$work/$like"
stamp "make-random $like ($layers layers)"
"$bin" make-random --like "$like" --layers "$layers" -o "$m" --dtype bf16 --seed 5 >/dev/null 2>&1 ||
  { note "make-random failed"; exit 1; }
# run_env ENV LABEL ARGS...: bench under ENV (may be empty), its rate lines noted.
run_env() {
  local vars="$1" label="$2"; shift 2
  local d
  d=$(env $vars "$bin" bench -m "$m" --device cuda "$@" 2>&1 | tee -a "$out/bench_$label.txt" |
      awk '/^prefill/ {printf "prefill %s tok/s, ", $3} /^decode/ {print "decode", $3, $4, $5, $6, $7, $8}')
  note "$like ($layers) $label [${vars:-default}]: $d"
}
IFS=';' read -ra denvs <<<"${DECODE_ENVS:-LOCKSTEP_CUDA_GRAPH_STATS=1}"
IFS=';' read -ra benvs <<<"${BATCH_ENVS:-}"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for e in "${denvs[@]}"; do
    stamp "round $r decode: $e"
    run_env "$e" "decode_r$r" -p 128 -n 64 -r 3
  done
done
grep -h "step times" "$out"/bench_decode_r*.txt | sort -u | tee -a "$summary"
for r in $(seq 1 "${BATCH_ROUNDS:-${ROUNDS:-2}}"); do
  for e in "${benvs[@]}"; do
    stamp "round $r batch ${BATCH:-64}: $e"
    run_env "$e" "batch_r$r" --batch "${BATCH:-64}" -p 512 -n 32 -r 2
  done
done
stamp done
