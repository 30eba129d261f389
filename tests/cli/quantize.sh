#!/usr/bin/env bash
# lockstep quantize on the shipped models: the MLX-layout output loads, gives the same
# perplexity as --quantize at load time, stays within the quality targets (8-bit +1%, 4-bit g64
# +8% over BF16 on the held-out sample; the default int8 quant dot within 0.5% of the float one),
# and passes a short generation gate (classic vs batched, chunked, lookup, draft and MTP
# speculation) with quantized target and draft, in the default (int8) quant dot, and for 4-bit
# in the float one too.
# Usage: bash quantize.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
target="$src/models/lockstep-code-16m"
draft="$src/models/lockstep-draft-3m"
text="$(cat "$target/eval/heldout_sample.txt")"
ppl() { "$bin" score "$@" -p "$text" --top 1 --threads 2 | awk '/^perplexity/ {print $2}'; }
base="$(ppl -m "$target")"
for bits in 8 4; do
  "$bin" quantize -m "$target" -o "$tmp/t$bits" --bits "$bits" --threads 2
  "$bin" quantize -m "$draft" -o "$tmp/d$bits" --bits "$bits" --threads 2
  grep -q '"quantization"' "$tmp/t$bits/config.json"
  test -f "$tmp/t$bits/tokenizer.json"
  q="$(ppl -m "$tmp/t$bits")"
  at_load="$(ppl -m "$target" --quantize "$bits")"
  [ "$q" = "$at_load" ] || { echo "FAIL: $bits-bit file $q != load-time $at_load" >&2; exit 1; }
  limit=$([ "$bits" = 8 ] && echo 1.01 || echo 1.08)
  awk -v q="$q" -v b="$base" -v l="$limit" 'BEGIN { exit !(q <= b * l) }' ||
    { echo "FAIL: $bits-bit perplexity $q vs BF16 $base (limit x$limit)" >&2; exit 1; }
  qf="$(ppl -m "$tmp/t$bits" --quant-dot float)"
  awk -v q="$q" -v f="$qf" 'BEGIN { exit !(q <= f * 1.005) }' ||
    { echo "FAIL: $bits-bit int8 quant dot perplexity $q vs float $qf (limit x1.005)" >&2; exit 1; }
  echo "$bits-bit: perplexity $q, float quant dot $qf (BF16 $base)"
  "$bin" verify -m "$tmp/t$bits" --draft-model "$tmp/d$bits" -n 24 --threads 2 | tee "$tmp/gate"
  grep -q "^PASS: .* 0 diverged" "$tmp/gate" || { echo "FAIL: $bits-bit gate" >&2; exit 1; }
done
"$bin" verify -m "$tmp/t4" --draft-model "$tmp/d4" -n 16 --threads 2 --quant-dot float | tee "$tmp/gate"
grep -q "^PASS: .* 0 diverged" "$tmp/gate" || { echo "FAIL: 4-bit gate, float quant dot" >&2; exit 1; }
if "$bin" quantize -m "$target" -o "$tmp/bad" --bits 3 2>/dev/null; then
  echo "FAIL: --bits 3 accepted" >&2; exit 1
fi
echo "quantize.sh: ok"
