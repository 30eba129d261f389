# Sourced (not run) first by the GPU-machine scripts: `. "$(dirname "$0")/device_script.sh"`.
# Sets root (the repo root, also the working directory), out ($OUT or cuda-logs/, created), the
# packed engine ($carry, $bin, LOCKSTEP_CUBLAS_DIR: engine_env.sh), summary ($out/$summary_name,
# default summary.txt, emptied), note (prints a line and appends it to the summary), stamp
# (prints a line with the seconds since the script began), op_tests, old_engine, old_new_bits,
# wait_health and find_ncu (below).
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
out="${OUT:-$root/cuda-logs}"
mkdir -p "$out"
. "$root/tools/cuda/engine_env.sh"
summary="$out/${summary_name:-summary.txt}"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
# op_tests LOG FILTER [SECONDS]: the packed GPU op tests matching FILTER into $out/LOG, their
# verdict noted, failures listed (nothing when the pack has no cuda_tests).
op_tests() {
  [ -x "$carry/bin/run-cuda_tests" ] || return 0
  stamp "cuda_tests ($2)"
  timeout "${3:-400}" "$carry/bin/run-cuda_tests" --gtest_filter="$2" >"$out/$1" 2>&1
  note "cuda_tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$1" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$out/$1" | head -20 | tee -a "$summary"
}
# old_engine: sets $old to an engine to compare this one with, or "" when there is none, and
# $old_label to what it is ("the old engine" or $OLD_ENV) for notes: an engine unpacked in
# .cuda-carry-old/ (tools/cuda/pack_pair.sh; run under OLD_ENV when that is set), an earlier
# pack carried as .cuda-carry-old/engine.tar.xz (bin/run-lockstep, lib/), or this engine under the
# environment OLD_ENV (e.g. LOCKSTEP_CUDA_MOE_DEVICE=0: host routing, one launch per expert
# projection, the path every MoE call past 64 tokens took before the grouped launches).
# env_wrapper PATH ENGINE: writes PATH, a script that runs ENGINE under $OLD_ENV.
env_wrapper() {
  mkdir -p "$(dirname "$1")"
  printf '#!/usr/bin/env bash\nexec env %s "%s" "$@"\n' "$OLD_ENV" "$2" >"$1"
  chmod +x "$1"
}
old_engine() {
  old="" old_label=""
  if [ -x "$root/.cuda-carry-old/bin/run-lockstep" ]; then  # unpacked already (pack_pair.sh)
    old="$root/.cuda-carry-old/bin/run-lockstep"
    old_label="the old engine"
    if [ -n "${OLD_ENV:-}" ]; then  # the carried engine under OLD_ENV
      env_wrapper /tmp/lockstep-old-env "$old"
      old=/tmp/lockstep-old-env old_label="the old engine under $OLD_ENV"
    fi
    note "old engine: $old ($old_label)"
  elif [ -f "$root/.cuda-carry-old/engine.tar.xz" ]; then
    mkdir -p /tmp/lockstep-old && tar -xJf "$root/.cuda-carry-old/engine.tar.xz" -C /tmp/lockstep-old
    old=/tmp/lockstep-old/bin/run-lockstep
    old_label="the old engine"
    note "old engine: $old"
  elif [ -n "${OLD_ENV:-}" ]; then
    old=/tmp/lockstep-old/bin/run-lockstep
    env_wrapper "$old" "$bin"
    old_label="$OLD_ENV"
    note "old engine: this one under $OLD_ENV"
  fi
}
# old_new_bits MODEL QUANT_FLAGS IDS...: score logit hashes of every id prompt and 40 greedy tokens
# after the first, by $old and by $bin (DEVICE, default cuda); notes "identical" or "DIFFER or
# empty" (a run that printed nothing is no evidence).
old_new_bits() {
  local m="$1" q="$2" b ids; shift 2
  for b in "$old" "$bin"; do
    for ids in "$@"; do
      "$b" score --device "${DEVICE:-cuda}" -m "$m" $q --ids "$ids" --logits-hash --json 2>/dev/null |
        python3 -c 'import json,sys; print(" ".join(p["logits_fnv1a"] for p in json.load(sys.stdin)["positions"]))'
    done | md5sum
    "$b" generate --device "${DEVICE:-cuda}" -m "$m" $q --prompt-ids "$1" -n 40 --json 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])'
  done >"$out/oldnew.txt"
  local lines
  lines=$(sort -u "$out/oldnew.txt" | wc -l)
  # md5 of nothing: score printed no hashes
  if grep -q d41d8cd98f00b204e9800998ecf8427e "$out/oldnew.txt"; then lines=0; fi
  note "old vs new $(basename "$m")${q:+ ($q)}: $([ "$lines" = 2 ] && echo identical || echo "DIFFER or empty") ($(tail -1 "$out/oldnew.txt" | cut -c1-60)...)"
}
# wait_health URL PID: until URL/health answers 200 (true), the server process PID exits or
# 180 s pass (false); for the serving scripts' lockstep serve and llama-server.
wait_health() {
  for _ in $(seq 1 360); do
    curl -sf "$1/health" >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}
# find_ncu: sets $ncu to Nsight Compute's CLI where the machine has one, else "".
find_ncu() {
  ncu="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)"
  [ -x "$ncu" ] || ncu="$(ls /usr/local/cuda/bin/ncu 2>/dev/null || true)"
}
