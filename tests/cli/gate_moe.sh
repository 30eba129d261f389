#!/usr/bin/env bash
# The generation gate on mixture-of-experts models: random tiny Qwen3.5-MoE (routed MLPs in every
# layer and in its MTP head, a shared expert) and Qwen3-MoE (a draft with the same vocabulary)
# checkpoints, whose near-uniform random routing puts experts near ties all the time. Classic
# decode's tokens must survive chunked prefill, batching (other prompts route to the same and
# other experts), lookup / draft / MTP speculation at every width, greedy and seeded 0.8, on the
# float and the 4-bit models, the latter in both quant dots (int8, the CPU default, and float)
# (tests/decode/gate_test.cpp shows the gate does catch a flip).
# Usage: bash gate_moe.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$bin" make-random --like tiny-qwen3.5-moe -o "$tmp/target" --dtype bf16 --seed 11 --threads 2
"$bin" make-random --like tiny-qwen3-moe -o "$tmp/draft" --dtype bf16 --seed 12 --threads 2
# Repeated spans so prompt lookup proposes drafts; lengths 3 .. 40.
cat > "$tmp/prompts.jsonl" <<'JSON'
{"ids": [1, 17, 256, 42]}
{"ids": [5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7]}
{"ids": [300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319]}
{"ids": [9, 9, 9]}
JSON
gate() {
  "$bin" verify -m "$tmp/target" --draft-model "$tmp/draft" --prompts "$tmp/prompts.jsonl" \
    -n 40 --threads 2 "$@" | tee "$tmp/out"
  grep -q "^PASS: .* 0 diverged" "$tmp/out" || { echo "FAIL: MoE gate $*" >&2; exit 1; }
  for mode in batched classic-chunked draft/w4 lookup/w8 mtp/w4; do
    grep -q "^$mode " "$tmp/out" || { echo "FAIL: mode $mode missing from the MoE gate" >&2; exit 1; }
  done
}
gate
gate --quantize 4 --quantize-group-size 32
gate --quantize 4 --quantize-group-size 32 --quant-dot float
echo "gate_moe.sh: ok"
