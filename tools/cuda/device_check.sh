#!/usr/bin/env bash
# Everything a session's final H200 call checks, in one call of at most ~9 minutes: the op tests
# and every generation gate on the GPU (tools/cuda/engine_on_device.sh check), run while llama.cpp
# builds on the machine's cores, then lockstep against llama.cpp on Qwen3-8B
# (tools/bench/cuda_vs_llamacpp.sh: exact, fast and llama.cpp, interleaved). The gates finish
# before the benchmarks start (they wait for them: QUIET_AFTER), so nothing timed shares the GPU.
# Run from the repo root with carry [".cuda-carry-engine-xz", ".cuda-carry-llama"] (made by
# tools/cuda/pack_engine.sh and tools/bench/pack_llama_cuda.sh here), timeout_s 600.
#   tools/cuda/device_check.sh            SANITIZE=1 adds compute-sanitizer (engine_on_device.sh)
# $OUT gets the two summaries and every log as logs.tgz (the tool returns at most 8 files).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root" || exit 1
out="${OUT:-$root/cuda-logs}"
logs=/tmp/device-check
rm -rf "$logs" && mkdir -p "$logs/engine" "$logs/llama" "$out"
carry="$root/.cuda-carry-engine"
if [ ! -d "$carry/bin" ] && [ -f "$carry-xz/engine.tar.xz" ]; then
  mkdir -p "$carry" && tar -xJf "$carry-xz/engine.tar.xz" -C "$carry"
fi
rm -f /tmp/device-check-quiet
BUILD_NICE=19 QUIET_AFTER=/tmp/device-check-quiet ROUNDS="${ROUNDS:-1}" DEADLINE_S="${DEADLINE_S:-540}" OUT="$logs/llama" \
  bash tools/bench/cuda_vs_llamacpp.sh "${LIKE:-qwen3-8b}" >"$logs/llama.console" 2>&1 &
llama=$!
OUT="$logs/engine" bash tools/cuda/engine_on_device.sh check >"$logs/engine.console" 2>&1
echo "[engine checks done at $SECONDS s]" >>"$logs/engine/summary.txt"
touch /tmp/device-check-quiet  # the llama.cpp comparison may time now
wait "$llama"
tar -czf "$out/logs.tgz" -C "$logs" .
cp "$logs/engine/summary.txt" "$out/engine_summary.txt"
cp "$logs/llama/"cuda_vs_llamacpp_*.txt "$out/" 2>/dev/null
echo "=== engine ==="; cat "$logs/engine/summary.txt"
echo "=== llama.cpp ==="; cat "$logs/llama/"cuda_vs_llamacpp_*.txt 2>/dev/null || tail -20 "$logs/llama.console"
