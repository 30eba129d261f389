#!/usr/bin/env bash
# Everything a session's final H200 call checks, in one call of at most ~9 minutes: the op tests
# and every generation gate on the GPU (tools/cuda/engine_on_device.sh check), run while llama.cpp
# builds on the machine's cores, then lockstep against llama.cpp on Qwen3-8B
# (tools/bench/cuda_vs_llamacpp.sh: exact, fast and llama.cpp, interleaved). The gates finish
# before the benchmarks start (they wait for them: QUIET_AFTER), so nothing timed shares the GPU.
# Run from the repo root with carry [".cuda-carry-engine-xz", ".cuda-carry-llama"] (made by
# tools/cuda/pack_engine.sh and tools/bench/pack_llama_cuda.sh here), timeout_s 600.
#   tools/cuda/device_check.sh            SANITIZE=0 leaves out compute-sanitizer (engine_on_device.sh)
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
# compute-sanitizer fits in the llama.cpp build's shadow: memcheck and racecheck on a subset that
# reaches the attention walk, the BF16 and both quantized skinny linears (the warp-specialized one
# hands tiles over by named barriers), the quantized gather and the fused row ops.
export SANITIZE="${SANITIZE:-1}" SANITIZE_TIMEOUT="${SANITIZE_TIMEOUT:-100}"
export SANITIZE_FILTER="${SANITIZE_FILTER:-Shapes/AttentionTest.*/1:Shapes/LinearTest.*/0:Formats/QuantLinearTest.*/b4_g64_BF16_320x1152_bias:Formats/QuantLinearTest.*/b8_g64_BF16_333x1152_bias:CudaTest.QuantEmbedding*:CudaTest.AttentionPrep*}"
OUT="$logs/engine" bash tools/cuda/engine_on_device.sh check >"$logs/engine.console" 2>&1
echo "[engine checks done at $SECONDS s]" >>"$logs/engine/summary.txt"
touch /tmp/device-check-quiet  # the llama.cpp comparison may time now
wait "$llama"
# Where a Qwen3-8B step's GPU time goes, op by op (LOCKSTEP_CUDA_PROFILE: eager, events around
# every op): the prefill of 2048 ("unrecorded step") and the decode steps after it ("dense|1l").
ckpt=/tmp/lockstep-cuda/${LIKE:-qwen3-8b}
if [ -d "$ckpt" ]; then
  LOCKSTEP_CUDA_PROFILE=1 timeout 90 "$carry/bin/run-lockstep" bench --device cuda -m "$ckpt" \
    -p 2048 -n 32 -r 1 >"$logs/profile.log" 2>&1
  cp "$logs/profile.log" "$out/profile.txt"
fi
tar -czf "$out/logs.tgz" -C "$logs" .
cp "$logs/engine/summary.txt" "$out/engine_summary.txt"
cp "$logs/llama/"cuda_vs_llamacpp_*.txt "$out/" 2>/dev/null
echo "=== engine ==="; cat "$logs/engine/summary.txt"
echo "=== llama.cpp ==="; cat "$logs/llama/"cuda_vs_llamacpp_*.txt 2>/dev/null || tail -20 "$logs/llama.console"
