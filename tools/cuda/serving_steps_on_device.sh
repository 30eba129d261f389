#!/usr/bin/env bash
# The serving step's token budget on the GPU, in one call (issue #22): tools/cuda/serving_on_device.sh
# once per variant of `serve --step-tokens S --prefill-chunk C` (VARIANTS: "S:C ..."; default
# "512:256 2048:512 2048:1024 4096:1024"), exact numerics, 1024-token prompts at LEVELS
# (64,256) and 128-token prompts at SHORT (256), no bench --batch. Each variant's table is
# printed; every log travels back as one archive (serving_steps.tgz) beside summary.txt.
# Run from the repo root after tools/cuda/pack_engine.sh here, carrying .cuda-carry-engine-xz
# and .cuda-carry-qwen3tok.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${OUT:-$root/cuda-logs}"
mkdir -p "$out"
logs=/tmp/lockstep-serving-steps
rm -rf "$logs"
mkdir -p "$logs"
for v in ${VARIANTS:-512:256 2048:512 2048:1024 4096:1024}; do
  s="${v%%:*}"; c="${v##*:}"
  echo "== --step-tokens $s --prefill-chunk $c ==" | tee -a "$out/summary.txt"
  OUT="$logs/steps_${s}_chunk_$c" BATCHES=" " NUMERICS=exact LEVELS_LONG="${LEVELS:-64,256}" \
    LEVELS_SHORT="${SHORT:-256}" SECONDS_PER_LEVEL="${SECONDS_PER_LEVEL:-12}" \
    SERVE_FLAGS="--step-tokens $s --prefill-chunk $c" bash "$root/tools/cuda/serving_on_device.sh" 2>&1 |
    sed -n '/== bench-serve/,$p' | tee -a "$out/summary.txt"
done
tar -czf "$out/serving_steps.tgz" -C "$logs" .
