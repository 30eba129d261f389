#!/usr/bin/env bash
# make-random + inspect, driven as a user would: tiny presets into a temp dir, then inspect's table
# and JSON must describe them (layer pattern, MTP head, KV and state bytes), with no tokenizer.json.
# Usage: bash inspect.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
# json_get FILE KEY: a top-level one-line value of inspect's pretty JSON (two-space indent), so the
# test needs neither jq nor python.
json_get() { sed -n "s/^  \"$2\": \(.*\)\$/\1/p" "$1" | sed 's/,$//'; }
expect() {  # expect FILE KEY VALUE
  local got; got="$(json_get "$1" "$2")"
  [[ "$got" == "$3" ]] || fail "$1: $2 = $got, expected $3"
}

for p in tiny-llama tiny-qwen3 tiny-qwen3.5; do
  "$bin" make-random --like "$p" -o "$tmp/$p" --seed 7 2>/dev/null
  [[ -f "$tmp/$p/config.json" && -f "$tmp/$p/model.safetensors" ]] || fail "$p: files not written"
  [[ ! -e "$tmp/$p/tokenizer.json" ]] || fail "$p: unexpected tokenizer.json"
  "$bin" inspect -m "$tmp/$p" --json > "$tmp/$p.json"
  "$bin" inspect -m "$tmp/$p" > "$tmp/$p.txt"
  expect "$tmp/$p.json" missing_tensors "[]"
  expect "$tmp/$p.json" mismatched_tensors "[]"
done

# tiny-llama: 2 layers, 2 kv heads x 16 dims, untied, llama3 rope.
j="$tmp/tiny-llama.json"
expect "$j" model_type '"llama"'
expect "$j" layers 2
expect "$j" layer_pattern '"all full attention"'
expect "$j" kv_bytes_per_token $((2 * 2 * 2 * 16 * 4))
expect "$j" rope_type '"llama3"'
expect "$j" mtp_head false
expect "$j" tied_embeddings false

# tiny-qwen3: explicit head_dim 32, tied.
j="$tmp/tiny-qwen3.json"
expect "$j" head_dim 32
expect "$j" kv_bytes_per_token $((2 * 2 * 2 * 32 * 4))
expect "$j" tied_embeddings true

# tiny-qwen3.5: 3 linear + 1 full layer, MTP head; linear 2 key / 4 value heads of 16 dims, kernel 4.
j="$tmp/tiny-qwen3.5.json"
expect "$j" model_type '"qwen3_5_text"'
expect "$j" layer_pattern '"3 linear : 1 full"'
expect "$j" full_attention_layers 1
expect "$j" mtp_head true
expect "$j" rotary_dim 8
expect "$j" kv_bytes_per_token $((2 * 1 * 2 * 32 * 4))
state=$(( 3 * ( (2*32 + 64) * 3 + 4 * 16 * 16 ) * 4 ))
expect "$j" recurrent_state_bytes_per_sequence "$state"
expect "$j" snapshot_bytes "$state"
grep -q "3 linear : 1 full" "$tmp/tiny-qwen3.5.txt" || fail "table lacks the layer pattern"
grep -q "mtp head *yes" "$tmp/tiny-qwen3.5.txt" || fail "table lacks the MTP head"

# tiny-gemma3: sliding, sliding, global, sliding (window 8), every tensor where the layout says.
"$bin" make-random --like tiny-gemma3 -o "$tmp/tiny-gemma3" --seed 7 2>/dev/null
"$bin" inspect -m "$tmp/tiny-gemma3" --json > "$tmp/tiny-gemma3.json"
j="$tmp/tiny-gemma3.json"
expect "$j" model_type '"gemma3_text"'
expect "$j" layer_pattern '"3 sliding (window 8) : 1 global"'
expect "$j" missing_tensors "[]"
expect "$j" mismatched_tensors "[]"

# Bytes by dtype follow --dtype; the same seed gives the same bytes.
"$bin" make-random --like tiny-qwen3 -o "$tmp/f32" --dtype f32 --seed 7 2>/dev/null
"$bin" inspect -m "$tmp/f32" --json > "$tmp/f32.json"
f32_bytes="$(json_get "$tmp/f32.json" bytes)"
bf16_bytes="$(json_get "$tmp/tiny-qwen3.json" bytes)"
[[ "$f32_bytes" == $((2 * bf16_bytes)) ]] || fail "f32 bytes $f32_bytes vs bf16 $bf16_bytes"
grep -q "^    \"F32\": $f32_bytes\$" "$tmp/f32.json" || fail "bytes_by_dtype lacks F32"
expect "$tmp/f32.json" parameters "$(json_get "$tmp/tiny-qwen3.json" parameters)"
"$bin" make-random --like tiny-qwen3 -o "$tmp/again" --seed 7 2>/dev/null
cmp -s "$tmp/again/model.safetensors" "$tmp/tiny-qwen3/model.safetensors" || fail "seed not reproducible"

# Errors are clear messages and a non-zero status, not crashes.
if "$bin" inspect -m "$tmp/nowhere" 2> "$tmp/err.txt"; then fail "inspect of a missing dir succeeded"; fi
grep -q "config.json" "$tmp/err.txt" || fail "missing-dir error does not name config.json"
if "$bin" make-random --like gpt-5 -o "$tmp/x" 2> "$tmp/err.txt"; then fail "unknown preset accepted"; fi
grep -q "tiny-qwen3" "$tmp/err.txt" || fail "unknown-preset error does not list presets"
head -c 100 "$tmp/tiny-qwen3/model.safetensors" > "$tmp/trunc.safetensors"
cp "$tmp/tiny-qwen3/config.json" "$tmp/f32/config.json"
mv "$tmp/trunc.safetensors" "$tmp/f32/model.safetensors"
if "$bin" inspect -m "$tmp/f32" 2> "$tmp/err.txt"; then fail "truncated checkpoint accepted"; fi
grep -q "model.safetensors" "$tmp/err.txt" || fail "truncation error does not name the file"
echo "inspect.sh: ok"
