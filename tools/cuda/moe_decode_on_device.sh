#!/usr/bin/env bash
# MoE decode on the GPU in one call: the BF16 expert decode configs (LOCKSTEP_CUDA_EXPERT_CFG,
# linear_experts.cuh) checked and timed, and lockstep against llama.cpp on the same weights.
#   1. tools/bench/cuda_vs_llamacpp.sh qwen3-30b-a3b (LAYERS layers, BF16, exact only) starts in the
#      background: it builds llama-bench (niced), writes the checkpoint and its GGUF, then waits
#      for this script's go before its timed rounds.
#   2. Meanwhile: the MoE op tests (every decode config against the default, bitwise), a
#      generation gate per config on a 3-layer qwen3-30b-a3b shape, and greedy tokens of each
#      config against config 0.
#   3. Once the checkpoint is written: decode of each config, alternated, ROUNDS rounds
#      (`bench -p 128 -n 64 -r 3`; the GGUF conversion may still be running beside it).
#   4. The go: the side-by-side rounds run alone.
# Run from the repo root after tools/cuda/pack_engine.sh here, carrying .cuda-carry-engine-xz and
# .cuda-carry-llama (tools/bench/pack_llama_cuda.sh ... source). Env: LAYERS (12), CONFIGS
# ("0 1"), ROUNDS (2).
#   tools/cuda/moe_decode_on_device.sh quick   (about two minutes, no llama.cpp): the op tests,
#       then on a qwen3-30b-a3b shape of LAYERS (6) layers decode under config 0 and the default,
#       alternated (ROUNDS), and `bench --batch 64` (64 sequences decoding together after
#       512-token prompts) in exact and fast numerics.
set -uo pipefail
. "$(dirname "$0")/device_script.sh"  # root, out, $bin, note, stamp, op_tests
work=/tmp/lockstep-moe-decode
mkdir -p "$work"
if [ "${1:-}" = quick ]; then
  layers="${LAYERS:-6}"
  op_tests cuda_tests.log '*DeviceRouting*:*DeviceGrouping*:*GroupedExpert*:*MoeLayerDevice*:*HostRouted*:*MoeCombine*' 200
  m="$work/q3-$layers"
  "$bin" make-random --like qwen3-30b-a3b --layers "$layers" -o "$m" --dtype bf16 --seed 5 >/dev/null 2>&1
  for r in $(seq "${ROUNDS:-2}"); do
    for c in 0 default; do
      d=$(env $([ $c = default ] || echo LOCKSTEP_CUDA_EXPERT_CFG=$c) "$bin" bench -m "$m" --device cuda -p 128 -n 64 -r 3 2>&1 |
          awk '/^decode/ {print $3, "tok/s,", $7, "of the floor"}')
      note "qwen3-30b-a3b ($layers layers) round $r, config $c: decode $d"
    done
  done
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

op_tests cuda_tests.log '*DeviceRouting*:*DeviceGrouping*:*GroupedExpert*:*MoeLayerDevice*:*HostRouted*:*MoeCombine*' 200
"$bin" make-random --like qwen3-30b-a3b --layers 3 -o "$work/q3" --dtype bf16 --seed 12 --threads 4 >/dev/null 2>&1
{
  echo '{"ids": [1, 17, 256, 42]}'
  echo '{"ids": [5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7]}'
} >"$work/prompts.jsonl"
ids40=$(seq -s, 3 7 283)
for c in ${CONFIGS:-0 1}; do
  LOCKSTEP_CUDA_EXPERT_CFG=$c timeout 120 "$bin" verify --device cuda -m "$work/q3" \
    --prompts "$work/prompts.jsonl" -n 24 >"$work/gate_$c.log" 2>&1
  note "gate, config $c: $(grep -E '^(PASS|FAIL|DIVERGED)|rror' "$work/gate_$c.log" | tail -1)"
  LOCKSTEP_CUDA_EXPERT_CFG=$c "$bin" generate --device cuda -m "$work/q3" --prompt-ids "$ids40" \
    -n 40 --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])' \
    >"$work/ids_$c.txt"
  same=$( [ -s "$work/ids_$c.txt" ] && cmp -s "$work/ids_0.txt" "$work/ids_$c.txt" && echo "same as config 0" || echo "DIFFERENT from config 0 or empty")
  note "greedy ids, config $c: $same ($(head -c 60 "$work/ids_$c.txt"))"
done

stamp "waiting for the checkpoint"
while ! grep -q "checkpoint ready" "$cvl_log" 2>/dev/null && kill -0 "$cvl" 2>/dev/null; do sleep 2; done
ckpt=$(ls -d /tmp/lockstep-cuda/qwen3-30b-a3b-"$layers"l /tmp/cvl-tmpfs/qwen3-30b-a3b-"$layers"l 2>/dev/null | head -1)
if [ -n "$ckpt" ]; then
  for r in $(seq "${ROUNDS:-2}"); do
    for c in ${CONFIGS:-0 1}; do
      d=$(LOCKSTEP_CUDA_EXPERT_CFG=$c "$bin" bench -m "$ckpt" --device cuda -p 128 -n 64 -r 3 2>&1 |
          awk '/^decode/ {print $3, "tok/s,", $7, "of the floor"}')
      note "qwen3-30b-a3b ($layers layers) round $r, config $c: decode $d"
    done
  done
else
  note "no checkpoint from cuda_vs_llamacpp.sh: $(tail -3 "$cvl_log")"
fi
touch "$go"
stamp "side by side"
wait "$cvl"
cat "$out/cuda_vs_llamacpp_qwen3-30b-a3b-${layers}l.txt" 2>/dev/null | tee -a "$summary"
stamp done
