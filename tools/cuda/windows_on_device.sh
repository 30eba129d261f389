#!/usr/bin/env bash
# Sliding-window families on the GPU machine, in one call: the GPU attention and elementwise op
# tests (windows of 77 to 513 keys, full attention unchanged), then the generation gate on the
# GPU for random Gemma 3, Gemma 4 (dense with KV sharing and per-layer inputs; MoE) and windowed
# Mistral checkpoints whose window (16) the prompts cross, and CPU-vs-GPU greedy agreement.
# Run from the repo root after tools/cuda/pack_engine.sh here, carrying .cuda-carry-engine-xz.
#   tools/cuda/windows_on_device.sh
set -uo pipefail
. "$(dirname "$0")/device_script.sh"  # root, out, $bin, summary, note, stamp
work=/tmp/lockstep-windows
mkdir -p "$work"
nvidia-smi -L | tee -a "$summary"

timeout 400 "$carry/bin/run-cuda_tests" --gtest_filter='*Attention*:*GemmaOps*:*Activations*' \
  >"$out/cuda_tests.log" 2>&1
note "cuda_tests (attention, elementwise): $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/cuda_tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]|accuracy' "$out/cuda_tests.log" | head -20 | tee -a "$summary"

# Prompts of 9 to 64 ids plus a repeat (lookup finds matches), all longer than the window.
for n in 9 19 40 64; do
  ids=""
  for ((i = 0; i < n; ++i)); do ids+="$(( (i * 37 + n * 11 + 5) % 509 )),"; done
  for ((i = 0; i < 6; ++i)); do ids+="$(( (i * 37 + n * 11 + 5) % 509 )),"; done
  echo "{\"ids\": [${ids%,}]}"
done >"$work/prompts.jsonl"
gate() {  # name, verify arguments...
  local name="$1"; shift
  timeout 300 "$bin" verify --device cuda --prompts "$work/prompts.jsonl" -n 40 "$@" >"$out/$name.log" 2>&1
  note "$name: $(grep -E '^(PASS|FAIL)|rror' "$out/$name.log" | tail -1)"
}
for p in small-gemma3 small-gemma4 small-gemma4-moe small-mistral; do
  "$bin" make-random --like "$p" -o "$work/$p" --dtype bf16 --seed 21 >/dev/null 2>&1
  "$bin" make-random --like "$p" -o "$work/$p-draft" --dtype bf16 --seed 22 >/dev/null 2>&1
  gate "gate_$p" -m "$work/$p" --draft-model "$work/$p-draft"
done
gate gate_small-gemma3_q4 -m "$work/small-gemma3" --draft-model "$work/small-gemma3-draft" --quantize 4

# CPU vs GPU greedy tokens (not promised bitwise; near ties may differ).
ids="1,17,256,42,42,7,128,3,17,99,200,42,5,0,255,17,64,64,64,31,9,8,7,6,5"
for p in small-gemma3 small-gemma4 small-gemma4-moe small-mistral; do
  a=$("$bin" generate -m "$work/$p" --prompt-ids "$ids" -n 24 --json 2>"$out/cpu_$p.err" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])')
  b=$("$bin" generate --device cuda -m "$work/$p" --prompt-ids "$ids" -n 24 --json 2>"$out/cuda_$p.err" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])')
  note "cpu vs cuda $p: $([ "$a" = "$b" ] && echo "identical ($a)" || echo "differ: cpu $a cuda $b")"
done
cat "$summary"
