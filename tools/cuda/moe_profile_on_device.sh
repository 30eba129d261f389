#!/usr/bin/env bash
# MoE decode on the GPU, where its time goes and whether a change kept the bits, in one call each:
#   tools/cuda/moe_profile_on_device.sh profile   random qwen3-30b-a3b and qwen3.5-35b-a3b shapes
#       (LAYERS layers, default 12, BF16): `bench --device cuda -p 128 -n 64 -r 3`, the per-op table
#       of LOCKSTEP_CUDA_PROFILE=1, and ncu (--clock-control none, caches flushed between kernels)
#       of every kernel of a short eager run, as CSV (ncu_<shape>.csv: duration and DRAM bytes per
#       launch; fold it with tools/cuda/ncu_summary.py). With an old engine (below), the bench
#       runs both binaries, alternated, over 2 rounds, at -p 128 and -p 2048.
#   tools/cuda/moe_profile_on_device.sh check     the GPU op tests of attention and MoE, the
#       generation gate on small MoE shapes and a dense Qwen3-0.6B shape, and, with an old engine,
#       greedy tokens and score logit hashes of old and new binaries compared (a speed change
#       must not move a bit).
# Run from the repo root after tools/cuda/pack_engine.sh here, carrying .cuda-carry-engine-xz; an
# old engine to compare with travels as .cuda-carry-old/engine.tar.xz (bin/lockstep,
# bin/run-lockstep, lib/ of an earlier pack).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="${OUT:-$root/cuda-logs}"
mkdir -p "$out"
. "$root/tools/cuda/engine_env.sh"  # $carry, $bin, LOCKSTEP_CUBLAS_DIR
mode="${1:-profile}"
layers="${LAYERS:-12}"
work=/tmp/lockstep-moe-profile
mkdir -p "$work"
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$summary"; }
nvidia-smi -L | tee -a "$summary"
old=""
if [ -f "$root/.cuda-carry-old/engine.tar.xz" ]; then
  mkdir -p /tmp/lockstep-old && tar -xJf "$root/.cuda-carry-old/engine.tar.xz" -C /tmp/lockstep-old
  old=/tmp/lockstep-old/bin/run-lockstep
  note "old engine: $old"
fi

if [ "$mode" = check ]; then
  if [ -x "$carry/bin/run-cuda_tests" ]; then
    stamp "cuda_tests (attention, MoE, elementwise)"
    timeout 400 "$carry/bin/run-cuda_tests" \
      --gtest_filter='*Attention*:*DeviceRouting*:*DeviceGrouping*:*GroupedExpert*:*MoeLayerDevice*:*MoeCombine*:*Elementwise*' \
      >"$out/cuda_tests.log" 2>&1
    note "cuda_tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/cuda_tests.log" | tr '\n' ' ')"
    grep -E '^\[  FAILED  \]' "$out/cuda_tests.log" | head -20 | tee -a "$summary"
  fi
  "$bin" make-random --like qwen3.5-35b-a3b --layers 4 -o "$work/q35" --dtype bf16 --seed 11 >/dev/null 2>&1
  "$bin" make-random --like qwen3-30b-a3b --layers 3 -o "$work/q3" --dtype bf16 --seed 12 >/dev/null 2>&1
  "$bin" make-random --like qwen3-30b-a3b --layers 1 -o "$work/q3-draft" --dtype bf16 --seed 13 >/dev/null 2>&1
  "$bin" make-random --like qwen3-0.6b -o "$work/d06" --dtype bf16 --seed 14 >/dev/null 2>&1
  cat > "$work/prompts.jsonl" <<'JSON'
{"ids": [1, 17, 256, 42]}
{"ids": [5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7]}
{"ids": [300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319]}
{"ids": [9, 9, 9]}
JSON
  gate() {  # name, verify arguments...
    local name="$1"; shift
    stamp "gate $name"
    timeout 300 "$bin" verify --device cuda --prompts "$work/prompts.jsonl" -n 32 "$@" >"$out/$name.log" 2>&1
    note "$name: $(grep -E '^(PASS|FAIL)|error' "$out/$name.log" | tail -1)"
  }
  gate gate_qwen35moe_mtp -m "$work/q35"
  gate gate_qwen3moe_draft -m "$work/q3" --draft-model "$work/q3-draft"
  gate gate_qwen3moe_q4 -m "$work/q3" --quantize 4
  gate gate_dense06 -m "$work/d06"
  if [ -n "$old" ]; then
    stamp "old against new binary: score logit hashes and greedy tokens"
    ids40=$(seq -s, 3 7 283); ids300=$(seq -s, 5 3 904)
    for m in q35 q3 d06; do
      for q in "" "--quantize 4"; do
        for b in "$old" "$bin"; do
          for ids in "$ids40" "$ids300"; do
            "$b" score --device cuda -m "$work/$m" $q --ids "$ids" --logits-hash --json 2>/dev/null |
              python3 -c 'import json,sys; print(" ".join(p["logits_fnv1a"] for p in json.load(sys.stdin)["positions"]))'
          done | md5sum
          "$b" generate --device cuda -m "$work/$m" $q --prompt-ids "$ids40" -n 40 --json 2>/dev/null |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])'
        done >"$out/oldnew_$m${q:+-q4}.txt"
        lines=$(sort -u "$out/oldnew_$m${q:+-q4}.txt" | wc -l)
        note "old vs new $m${q:+ q4}: $([ "$lines" = 2 ] && echo identical || echo DIFFER) ($(tail -1 "$out/oldnew_$m${q:+-q4}.txt" | cut -c1-60)...)"
      done
    done
  fi
  stamp done
  exit 0
fi

ncu="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)"
[ -x "$ncu" ] || ncu="$(ls /usr/local/cuda/bin/ncu 2>/dev/null || true)"
note "ncu: ${ncu:-none}"
for s in ${SHAPES:-qwen3-30b-a3b qwen3.5-35b-a3b}; do
  m="$work/$s"
  "$bin" make-random --like "$s" --layers "$layers" -o "$m" --dtype bf16 --seed 5 >/dev/null 2>&1 ||
    { note "$s: make-random failed"; continue; }
  if [ -n "$old" ]; then
    for r in 1 2; do
      for p in 128 2048; do
        for which in old new; do
          b=$([ $which = old ] && echo "$old" || echo "$bin")
          d=$("$b" bench -m "$m" --device cuda -p "$p" -n 64 -r 3 2>&1 | tee -a "$out/bench_$s.txt" |
              awk '/^decode/ {print $3, $7, $8}')
          note "$s round $r -p $p $which: decode $d"
        done
      done
    done
  else
    stamp "$s: bench"
    "$bin" bench -m "$m" --device cuda -p 128 -n 64 -r 3 2>&1 | tee "$out/bench_$s.txt" |
      grep -E "^(prefill|decode)" | sed "s/^/$s /" | tee -a "$summary"
  fi
  stamp "$s: op profile"
  LOCKSTEP_CUDA_PROFILE=1 "$bin" bench -m "$m" --device cuda -p 16 -n 32 -r 1 \
    >"$out/profile_$s.txt" 2>&1
  if [ -n "$ncu" ] && [ "${NCU:-1}" = 1 ]; then
    stamp "$s: ncu"
    LOCKSTEP_CUDA_GRAPHS=0 timeout 300 "$ncu" --clock-control none --csv --print-units base \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum \
      "$bin" bench -m "$m" --device cuda -p 4 -n 3 -r 1 >"$out/ncu_$s.csv" 2>"$out/ncu_$s.err"
    note "$s: ncu rc $?, $(wc -l <"$out/ncu_$s.csv") lines"
  fi
done
stamp done
