#!/usr/bin/env bash
# The generation gate with a Gemma 4 assistant drafter: a random tiny-gemma4 target (window 8,
# KV-sharing layers, full layers with their own head dim and values = keys, per-layer inputs) and
# a random tiny-gemma4-assistant reading its sliding and full caches. Prompts of 9 to 64 ids plus
# a repeat, all longer than the window, 48 new tokens each, must give classic decode's exact tokens
# under assistant speculation at widths 1 to 4 (and chunked prefill, batching, lookup), at
# temperature 0 and seeded 0.8. Then the refusals: a target that is not Gemma 4, and an assistant
# whose geometry does not match its target, each an error naming the field.
# Usage: bash assistant_gate.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for n in 9 12 19 27 40 64; do
  ids=""
  for ((i = 0; i < n; ++i)); do ids+="$(( (i * 37 + n * 11 + 5) % 509 )),"; done
  for ((i = 0; i < 6; ++i)); do ids+="$(( (i * 37 + n * 11 + 5) % 509 )),"; done
  echo "{\"ids\": [${ids%,}]}"
done > "$tmp/prompts.jsonl"
"$bin" make-random --like tiny-gemma4 -o "$tmp/target" --seed 3 2>/dev/null
"$bin" make-random --like tiny-gemma4-assistant -o "$tmp/assistant" --seed 4 2>/dev/null
"$bin" verify -m "$tmp/target" --draft-model "$tmp/assistant" --prompts "$tmp/prompts.jsonl" -n 48 \
  --threads 2 | tee "$tmp/out"
# 6 prompts x 2 temperatures x (batched, classic-chunked, lookup x5, assistant x4).
grep -q "^PASS: 132 identical, 0 diverged" "$tmp/out" ||
  { echo "FAIL: gate diverged or did not run every case" >&2; exit 1; }
for mode in assistant/w1 assistant/w2 assistant/w3 assistant/w4; do
  grep -q "^$mode " "$tmp/out" || { echo "FAIL: mode $mode missing from the gate" >&2; exit 1; }
done
# generate --spec assistant gives classic decode's tokens (seeded sampling too).
for t in 0 0.8; do
  a=$("$bin" generate -m "$tmp/target" --prompt-ids 5,9,17,33,65,129,257,3,5,9,17,33 -n 24 \
        --temperature "$t" --seed 7 --json 2>/dev/null)
  b=$("$bin" generate -m "$tmp/target" --prompt-ids 5,9,17,33,65,129,257,3,5,9,17,33 -n 24 \
        --temperature "$t" --seed 7 --json --spec assistant --draft-model "$tmp/assistant" \
        --draft-width 3 2>/dev/null)
  [ "$(echo "$a" | grep -o '"ids":\[[^]]*\]')" = "$(echo "$b" | grep -o '"ids":\[[^]]*\]')" ] ||
    { echo "FAIL: generate --spec assistant differs from classic at temperature $t" >&2; exit 1; }
done
expect_error() {  # message fragment, command...
  local want="$1"; shift
  if "$@" >"$tmp/err.out" 2>&1; then echo "FAIL: expected an error: $*" >&2; exit 1; fi
  grep -q -- "$want" "$tmp/err.out" ||
    { echo "FAIL: error lacks \"$want\":" >&2; cat "$tmp/err.out" >&2; exit 1; }
}
"$bin" make-random --like tiny-qwen3 -o "$tmp/qwen3" --seed 3 2>/dev/null
expect_error "but the target's model_type is qwen3" \
  "$bin" generate -m "$tmp/qwen3" --prompt-ids 1,2,3 -n 4 --spec assistant --draft-model "$tmp/assistant"
"$bin" make-random --like small-gemma4-assistant -o "$tmp/small-assistant" --seed 4 2>/dev/null
expect_error '"backbone_hidden_size" is 256' \
  "$bin" generate -m "$tmp/target" --prompt-ids 1,2,3 -n 4 --spec assistant --draft-model "$tmp/small-assistant"
expect_error "needs --draft-model" \
  "$bin" generate -m "$tmp/target" --prompt-ids 1,2,3 -n 4 --spec assistant
expect_error "not a model of its own" \
  "$bin" generate -m "$tmp/assistant" --prompt-ids 1,2,3 -n 4
echo "assistant_gate.sh: ok"
