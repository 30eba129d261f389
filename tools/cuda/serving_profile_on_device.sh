#!/usr/bin/env bash
# Where a batched decode step's time goes on the GPU machine (issue #22): LOCKSTEP_CUDA_PROFILE=1
# (every op timed with events, graphs off) on `bench --batch N` (decode steps of N sequences) and on
# `serve` under bench-serve with 1024-token prompts (prefill chunks mixed with decode). Run from the
# repo root after tools/cuda/pack_engine.sh here, carrying .cuda-carry-engine-xz and
# .cuda-carry-qwen3tok. The profile tables go to $OUT/prof_*.txt.
#   env: BATCHES="64 256", CONCURRENCY=64
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="${OUT:-$root/cuda-logs}"
mkdir -p "$out"
. "$root/tools/cuda/engine_env.sh"
ckpt=/tmp/lockstep-serve/qwen3-8b
if [ ! -f "$ckpt/config.json" ]; then
  "$bin" make-random --like qwen3-8b -o "$ckpt" --dtype bf16 --seed 3 >/dev/null 2>&1 || { echo "make-random failed"; exit 1; }
fi
if [ -f .cuda-carry-qwen3tok/tokenizer.json.xz ]; then
  xz -dc .cuda-carry-qwen3tok/tokenizer.json.xz >"$ckpt/tokenizer.json"
  cp .cuda-carry-qwen3tok/tokenizer_config.json "$ckpt/"
fi
for n in ${BATCHES:-64 256}; do
  LOCKSTEP_CUDA_PROFILE=1 timeout 150 "$bin" bench -m "$ckpt" --device cuda --batch "$n" -p 512 -n 8 -r 1 \
    --ctx-size $(( n * 600 )) >"$out/prof_batch_$n.txt" 2>&1
done
port=8094
LOCKSTEP_CUDA_PROFILE=1 "$bin" serve -m "$ckpt" --device cuda --port $port --parallel "${CONCURRENCY:-64}" \
  --max-queue 1024 --ctx-size 150000 >"$out/prof_serve.txt" 2>&1 &
pid=$!
for _ in $(seq 1 240); do curl -sf "localhost:$port/health" >/dev/null 2>&1 && break; sleep 0.5; done
timeout 150 "$bin" bench-serve --url "http://127.0.0.1:$port" --concurrency "${CONCURRENCY:-64}" --input-len 1024 \
  --output-len 32 --requests $(( ${CONCURRENCY:-64} * 3 / 2 )) --check-identity 0 >"$out/prof_bs.txt" 2>&1
kill -TERM "$pid"
wait "$pid"
for f in "$out"/prof_*.txt; do echo "=== $(basename "$f")"; tail -60 "$f" | cut -c1-160; done
