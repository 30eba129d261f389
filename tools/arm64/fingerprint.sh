#!/usr/bin/env bash
# Prints a fingerprint of lockstep's numerics: for a fixed set of generations (the shipped models
# in BF16, 4- and 8-bit with both quant dots, seeded sampling, random Gemma 3 and Qwen3-MoE
# checkpoints), the generated token ids, then one hash per position of the whole logit row of
# prompt + output (`score --logits-hash`: FNV-1a of the float bits). Two machines agree bit for
# bit exactly when their fingerprints are the same file. scripts/test-arm64.sh compares an x86
# run with qemu-aarch64 runs on NEON and SVE.
# Usage: fingerprint.sh <models-dir> <source-dir> <lockstep command...>
#   models-dir: holds tiny-gemma3/ and tiny-qwen3-moe/ (make-random, written once by the caller so
#   every machine reads the same weights); the command may start with an emulator.
set -euo pipefail
models="$1"
src="$2"
shift 2
ls=("$@")  # e.g. build-x86/lockstep, or qemu-aarch64 -L /usr/aarch64-linux-gnu build-arm64/lockstep
code="$src/models/lockstep-code-16m"
draft="$src/models/lockstep-draft-3m"
common=(--threads 2 --ctx-size 256)
ids_of() { sed -n 's/.*"ids":\[\([0-9,]*\)\].*/\1/p'; }

# case_ NAME MODEL N PROMPT-FLAG PROMPT [MODEL-FLAGS [SAMPLING-FLAGS]]: the flags are word lists;
# model flags (quantization, quant dot) apply to generate and score, sampling flags to generate.
case_() {
  local name="$1" model="$2" n="$3" pflag="$4" prompt="$5" mflags=() sflags=()
  read -r -a mflags <<<"${6:-}"
  read -r -a sflags <<<"${7:-}"
  local prompt_ids gen
  if [[ "$pflag" == "-p" ]]; then
    prompt_ids=$("${ls[@]}" tokenize -m "$model" -p "$prompt" --add-special --json | ids_of)
  else
    prompt_ids="$prompt"
  fi
  gen=$("${ls[@]}" generate -m "$model" --prompt-ids "$prompt_ids" -n "$n" --ignore-eos --json \
    "${common[@]}" "${mflags[@]}" "${sflags[@]}" 2>/dev/null | ids_of)
  [[ -n "$gen" ]] || { echo "fingerprint: $name generated nothing" >&2; exit 1; }
  echo "$name prompt $prompt_ids"
  echo "$name ids $gen"
  "${ls[@]}" score -m "$model" --ids "$prompt_ids,$gen" --top 1 --logits-hash --json \
    "${common[@]}" "${mflags[@]}" 2>/dev/null | grep -o '"logits_fnv1a":"[0-9a-f]*"' |
    cut -d'"' -f4 | awk -v n="$name" '{ print n " logits " NR - 1 " " $0 }'
}

p1='def parse_args('
p2=$'class Stack:\n    def __init__(self):\n'
p3=$'import os\n\ndef '
case_ code16m-bf16-p1 "$code" 32 -p "$p1"
case_ code16m-bf16-p2 "$code" 32 -p "$p2"
case_ code16m-bf16-p3 "$code" 32 -p "$p3"
case_ code16m-seeded "$code" 32 -p "$p1" "" "--temp 0.8 --seed 7 --top-p 0.95"
case_ code16m-q4-float "$code" 24 -p "$p2" "--quantize 4 --quant-dot float"
case_ code16m-q4-int8 "$code" 24 -p "$p2" "--quantize 4 --quant-dot int8"
case_ code16m-q8-float "$code" 24 -p "$p3" "--quantize 8 --quant-dot float"
case_ code16m-q8-int8 "$code" 24 -p "$p3" "--quantize 8 --quant-dot int8"
case_ draft3m-bf16 "$draft" 32 -p "$p1"
case_ tiny-gemma3 "$models/tiny-gemma3" 24 --prompt-ids "$(seq -s, 3 60)"
case_ tiny-qwen3-moe "$models/tiny-qwen3-moe" 24 --prompt-ids "$(seq -s, 7 40)"
