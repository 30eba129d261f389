#!/usr/bin/env bash
# The Gemma 4 assistant drafter on the GPU machine: the generation gate with small-gemma4 (head
# dims 64 / 128, window 16, KV-sharing layers, per-layer inputs) and small-gemma4-assistant on the
# GPU (assistant/w1..w4 beside classic, chunked, batched and lookup, temperature 0 and seeded 0.8),
# then greedy tokens of generate --spec assistant against classic decode on the GPU.
# Run from the repo root after tools/cuda/pack_engine.sh here, carrying .cuda-carry-engine-xz.
#   tools/cuda/assistant_on_device.sh
set -uo pipefail
. "$(dirname "$0")/device_script.sh"  # root, out, $bin, summary, note, stamp
work=/tmp/lockstep-assistant
mkdir -p "$work"
nvidia-smi -L | tee -a "$summary"
for n in 9 19 40 64; do
  ids=""
  for ((i = 0; i < n; ++i)); do ids+="$(( (i * 37 + n * 11 + 5) % 509 )),"; done
  for ((i = 0; i < 6; ++i)); do ids+="$(( (i * 37 + n * 11 + 5) % 509 )),"; done
  echo "{\"ids\": [${ids%,}]}"
done >"$work/prompts.jsonl"
"$bin" make-random --like small-gemma4 -o "$work/target" --dtype bf16 --seed 21 >/dev/null 2>&1
"$bin" make-random --like small-gemma4-assistant -o "$work/assistant" --dtype bf16 --seed 22 >/dev/null 2>&1
timeout 400 "$bin" verify --device cuda -m "$work/target" --draft-model "$work/assistant" \
  --prompts "$work/prompts.jsonl" -n 40 >"$out/gate_assistant.log" 2>&1
note "gate small-gemma4 + assistant (cuda): $(grep -E '^(PASS|DIVERGED)|rror' "$out/gate_assistant.log" | tail -1)"
grep -E '^assistant/' "$out/gate_assistant.log" | tee -a "$summary"
ids="1,17,256,42,42,7,128,3,17,99,200,42,5,0,255,17,64,64,64,31,9,8,7,6,5"
a=$("$bin" generate --device cuda -m "$work/target" --prompt-ids "$ids" -n 32 --json 2>"$out/classic.err" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])')
for w in 1 3; do
  b=$("$bin" generate --device cuda -m "$work/target" --prompt-ids "$ids" -n 32 --json --spec assistant \
      --draft-model "$work/assistant" --draft-width "$w" 2>"$out/assistant_w$w.err" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])')
  note "generate --spec assistant --draft-width $w vs classic (cuda): $([ "$a" = "$b" ] && echo identical || echo "differ: classic $a assistant $b")"
done
cat "$summary"
