#!/usr/bin/env bash
# MoE prefill on the GPU in one short call: the MoE op tests, old against new bits on prefills past
# kMoeDeviceMaxTokens (old_new_bits on a 300-id prompt; "old" is this engine under OLD_ENV, default
# LOCKSTEP_CUDA_MOE_DEVICE=0: host routing, one launch per expert projection), a generation gate with
# a 160-id prompt, and prefill speed of a 12-layer qwen3-30b-a3b shape, old and new alternated
# (`bench -p 2048`). Run from the repo root after tools/cuda/pack_engine.sh here, carrying
# .cuda-carry-engine-xz.
set -uo pipefail
export OLD_ENV="${OLD_ENV:-LOCKSTEP_CUDA_MOE_DEVICE=0}"
. "$(dirname "$0")/device_script.sh"  # root, out, $bin, note, op_tests, old_engine, old_new_bits
work=/tmp/lockstep-moe-prefill
mkdir -p "$work"
old_engine
op_tests cuda_tests.log '*HostRouted*:*GroupedExpert*:*DeviceRouting*:*MoeLayerDevice*' 120
"$bin" make-random --like qwen3-30b-a3b --layers 3 -o "$work/q3" --dtype bf16 --seed 12 >/dev/null 2>&1
"$bin" make-random --like qwen3.5-35b-a3b --layers 4 -o "$work/q35" --dtype bf16 --seed 11 >/dev/null 2>&1
"$bin" make-random --like small-gemma4-moe -o "$work/g4moe" --dtype bf16 --seed 21 >/dev/null 2>&1
ids300=$(for i in $(seq 0 299); do echo $(( (i * 37 + 5) % 499 )); done | paste -sd,)
for m in q3 q35 g4moe; do
  for q in "" "--quantize 4"; do old_new_bits "$work/$m" "$q" "$ids300"; done
done
ids160=$(for i in $(seq 0 159); do echo $(( (i * 53 + 7) % 499 )); done | paste -sd,)
{ echo "{\"ids\": [$ids160]}"; echo '{"ids": [5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7]}'; } >"$work/prompts.jsonl"
timeout 120 "$bin" verify --device cuda -m "$work/q3" --prompts "$work/prompts.jsonl" -n 16 >"$out/gate_q3.log" 2>&1
note "gate q3, 160-id prompt: $(grep -E '^(PASS|FAIL|DIVERGED)|rror' "$out/gate_q3.log" | tail -1)"
"$bin" make-random --like qwen3-30b-a3b --layers 12 -o "$work/q3-12" --dtype bf16 --seed 5 >/dev/null 2>&1
for r in 1 2; do
  for b in old new; do
    e=$([ $b = old ] && echo "$old" || echo "$bin")
    note "round $r $b: $("$e" bench -m "$work/q3-12" --device cuda -p 2048 -n 2 -r 3 2>&1 | grep '^prefill')"
  done
done
