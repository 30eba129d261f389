#!/usr/bin/env bash
# MoE decode on the GPU in one call: the BF16 expert decode configs (LOCKSTEP_CUDA_EXPERT_CFG,
# linear_experts.cuh) checked and timed, and lockstep against llama.cpp on the same weights.
#   1. tools/bench/cuda_vs_llamacpp.sh qwen3-30b-a3b (LAYERS layers, BF16, exact only) starts in the
#      background: it builds llama-bench (niced), writes the checkpoint and its GGUF, then waits
#      for this script's go before its timed rounds.
#   2. Meanwhile: the MoE op tests (every decode config against the default, bitwise), the
#      generation gate under each config on a 3-layer qwen3-30b-a3b shape, and score logit hashes
#      and greedy tokens of config 0 against the default (old_new_bits).
#   3. Once the checkpoint is written: decode of each config, alternated, ROUNDS rounds
#      (`bench -p 128 -n 64 -r 3`; the GGUF conversion may still be running beside it).
#   4. The go: the side-by-side rounds run alone.
# Run from the repo root after tools/cuda/pack_engine.sh here, carrying .cuda-carry-engine-xz and
# .cuda-carry-llama (tools/bench/pack_llama_cuda.sh ... source). Env: LAYERS (12), ROUNDS (2);
# quick also LIKE (make-random's MoE shape, qwen3-30b-a3b) and GATE_LAYERS (3; a qwen3.5-35b-a3b
# gate wants 4, so one layer is full attention).
#   tools/cuda/moe_decode_on_device.sh quick   (about two minutes, no llama.cpp): the op tests,
#       the gate and old/new bits (BF16 and 4-bit) on GATE_LAYERS (3) layers, then on a shape of
#       LAYERS (6) layers decode under OLD_ENV (or the carried old engine) and the default,
#       alternated (ROUNDS), PROFILE=1: the per-op table and ncu's per-kernel summary of the
#       default's decode, and `bench --batch 64` (64 sequences decoding together after 512-token
#       prompts) in exact and fast numerics.
set -uo pipefail
# "old": this engine under OLD_ENV, by default the larger calls' 4-stage ring (another switch,
# e.g. OLD_ENV=LOCKSTEP_CUDA_PDL=0, puts that change through the same checks and rounds; an old
# engine carried as .cuda-carry-old is used instead of either).
export OLD_ENV="${OLD_ENV:-LOCKSTEP_CUDA_EXPERT_CFG=0}"
. "$(dirname "$0")/device_script.sh"  # root, out, $bin, note, stamp, op_tests, old_engine, old_new_bits
work=/tmp/lockstep-moe-decode
mkdir -p "$work"
old_engine
moe_tests='*DeviceRouting*:*DeviceGrouping*:*GroupedExpert*:*MoeLayerDevice*:*HostRouted*:*MoeCombine*:*SharedExpert*'
like="${LIKE:-qwen3-30b-a3b}"
# decode_rounds MODEL LABEL: decode of config 0 ($old) and the default ($bin), alternated.
decode_rounds() {
  local r b d
  for r in $(seq "${ROUNDS:-2}"); do
    for b in old new; do
      d=$("$([ $b = old ] && echo "$old" || echo "$bin")" bench -m "$1" --device cuda -p 128 -n 64 -r 3 2>&1 |
          awk '/^decode/ {print $3, "tok/s,", $7, "of the floor"}')
      note "$2 round $r, $([ $b = old ] && echo "$old_label" || echo default): decode $d"
    done
  done
}

# gate_and_bits: on a GATE_LAYERS-layer $like shape, the generation gate under $old and $bin, and
# their score logit hashes and greedy tokens (old_new_bits), BF16 and kept at 4 bits.
gate_and_bits() {
  "$bin" make-random --like "$like" --layers "${GATE_LAYERS:-3}" -o "$work/q3" --dtype bf16 --seed 12 --threads 4 >/dev/null 2>&1
  {
    echo '{"ids": [1, 17, 256, 42]}'
    echo '{"ids": [5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7]}'
  } >"$work/prompts.jsonl"
  local b
  for b in "$old" "$bin"; do
    timeout 120 "$b" verify --device cuda -m "$work/q3" --prompts "$work/prompts.jsonl" -n 24 >"$work/gate.log" 2>&1
    note "gate, $([ "$b" = "$old" ] && echo "$old_label" || echo default): $(grep -E '^(PASS|FAIL|DIVERGED)|rror' "$work/gate.log" | tail -1)"
  done
  old_new_bits "$work/q3" "" "$(seq -s, 3 7 283)"
  old_new_bits "$work/q3" "--quantize 4" "$(seq -s, 3 7 283)"
}

if [ "${1:-}" = quick ]; then
  layers="${LAYERS:-6}"
  op_tests cuda_tests.log "$moe_tests" 200
  gate_and_bits
  m="$work/q3-$layers"
  "$bin" make-random --like "$like" --layers "$layers" -o "$m" --dtype bf16 --seed 5 >/dev/null 2>&1
  decode_rounds "$m" "$like ($layers layers)"
  if [ "${PROFILE:-0}" = 1 ]; then
    # Where this engine's decode step goes: the per-op table (eager, events around each op) and
    # ncu per kernel of a short eager run (caches flushed; fold with tools/cuda/ncu_summary.py).
    LOCKSTEP_CUDA_PROFILE=1 "$bin" bench -m "$m" --device cuda -p 16 -n 32 -r 1 >"$out/profile_$like.txt" 2>&1
    find_ncu
    if [ -n "$ncu" ]; then
      LOCKSTEP_CUDA_GRAPHS=0 timeout 240 "$ncu" --clock-control none --csv --print-units base \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum \
        "$bin" bench -m "$m" --device cuda -p 4 -n 3 -r 1 >"$work/ncu.csv" 2>"$out/ncu.err"
      python3 tools/cuda/ncu_summary.py "$work/ncu.csv" 400 >"$out/ncu_$like.txt" 2>&1
      note "ncu: $(wc -l <"$work/ncu.csv") lines, summary in ncu_$like.txt"
    fi
  fi
  for numerics in exact fast; do
    "$bin" bench -m "$m" --device cuda --numerics "$numerics" --batch 64 -p 512 -n 32 -r 1 \
      --ctx-size 40000 --json >"$work/batch_$numerics.json" 2>"$work/batch_$numerics.log"
    note "bench --batch 64 ($numerics): $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); d=j["decode"]; print("step %.2f ms, %.0f tok/s, %.2f of the floor" % (j["decode_step_ms"]["median"], d["aggregate_tok_s"], d["fraction_of_bandwidth_floor"]))' "$work/batch_$numerics.json" 2>&1 | tail -1)"
  done
  stamp done
  exit 0
fi
layers="${LAYERS:-12}"
go="$work/go"
rm -f "$go"
cvl_log="$out/cuda_vs_llamacpp_qwen3-30b-a3b-${layers}l.log"
(QUIET_AFTER="$go" BUILD_NICE=19 LAYERS="$layers" QUANT="" FAST=0 DEADLINE_S="${DEADLINE_S:-540}" \
  bash tools/bench/cuda_vs_llamacpp.sh qwen3-30b-a3b >"$out/cvl_stdout.txt" 2>&1) &
cvl=$!

op_tests cuda_tests.log "$moe_tests" 200
gate_and_bits

stamp "waiting for the checkpoint"
while ! grep -q "checkpoint ready" "$cvl_log" 2>/dev/null && kill -0 "$cvl" 2>/dev/null; do sleep 2; done
ckpt=$(ls -d /tmp/lockstep-cuda/qwen3-30b-a3b-"$layers"l /tmp/cvl-tmpfs/qwen3-30b-a3b-"$layers"l 2>/dev/null | head -1)
if [ -n "$ckpt" ]; then
  decode_rounds "$ckpt" "qwen3-30b-a3b ($layers layers)"
else
  note "no checkpoint from cuda_vs_llamacpp.sh: $(tail -3 "$cvl_log")"
fi
touch "$go"
stamp "side by side"
wait "$cvl"
cat "$out/cuda_vs_llamacpp_qwen3-30b-a3b-${layers}l.txt" 2>/dev/null | tee -a "$summary"
stamp done
