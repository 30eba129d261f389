#!/usr/bin/env bash
# Mixture-of-experts models on the GPU machine, in one call: the GPU op tests, the generation
# gate on random MoE checkpoints (float and 4-bit kept quantized), CPU-vs-GPU greedy agreement on
# the MoE reference fixtures, and decode/prefill benchmarks of MoE shapes (exact and fast).
# Run from the repo root after tools/cuda/pack_engine.sh here, carrying .cuda-carry-engine-xz.
#   tools/cuda/moe_on_device.sh [gates|full]   (full adds the benchmarks)
#   BENCH_LAYERS (default 12): decoder layers of the benchmark shapes (make-random --layers)
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="${OUT:-$root/cuda-logs}"
mkdir -p "$out"
carry="$root/.cuda-carry-engine"
if [ ! -d "$carry/bin" ] && [ -f "$carry-xz/engine.tar.xz" ]; then
  mkdir -p "$carry" && tar -xJf "$carry-xz/engine.tar.xz" -C "$carry"
fi
bin="$carry/bin/run-lockstep"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  $(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null); do
  [ -e "$d/libcublas.so.13" ] && export LOCKSTEP_CUBLAS_DIR="$d" && break
done
mode="${1:-full}"
work=/tmp/lockstep-moe
mkdir -p "$work"
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi -L | tee -a "$summary"
lscpu | grep -m1 "Model name" | tee -a "$summary"

if [ -x "$carry/bin/run-cuda_tests" ]; then
  stamp "cuda_tests"
  timeout 300 "$carry/bin/run-cuda_tests" >"$out/cuda_tests.log" 2>&1
  note "cuda_tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/cuda_tests.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$out/cuda_tests.log" | head -20 | tee -a "$summary"
fi

# The gate (tests/cli/gate_moe.sh's models and prompts) on the GPU.
stamp "MoE gates on cuda"
"$bin" make-random --like tiny-qwen3.5-moe -o "$work/target" --dtype bf16 --seed 11 >/dev/null 2>&1
"$bin" make-random --like tiny-qwen3-moe -o "$work/draft" --dtype bf16 --seed 12 >/dev/null 2>&1
cat > "$work/prompts.jsonl" <<'JSON'
{"ids": [1, 17, 256, 42]}
{"ids": [5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7]}
{"ids": [300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319]}
{"ids": [9, 9, 9]}
JSON
for q in "" "--quantize 4 --quantize-group-size 32"; do
  name="gate_moe${q:+_q4}"
  timeout 300 "$bin" verify --device cuda -m "$work/target" --draft-model "$work/draft" \
    --prompts "$work/prompts.jsonl" -n 40 $q >"$out/$name.log" 2>&1
  note "$name: $(grep -E '^(PASS|FAIL)' "$out/$name.log" | tail -1)"
done
# A fixture target gated too (hybrid Qwen3-Next MoE, shared expert, 257-token vocabulary).
timeout 300 "$bin" verify --device cuda -m tests/fixtures/qwen3next-moe-f32 \
  --prompts "$work/prompts.jsonl" -n 24 >"$out/gate_qwen3next_moe.log" 2>&1
note "gate qwen3next-moe-f32 (cuda): $(grep -E '^(PASS|FAIL)' "$out/gate_qwen3next_moe.log" | tail -1)"

# CPU vs GPU greedy tokens on the fixtures (not promised bitwise; near ties may differ).
stamp "cpu vs gpu"
ids="1,17,256,42,42,7,128,3,17,99,200,42,5,0,255,17,64,64,64,31"
for f in qwen3moe-f32 qwen3moe-fused-f32 qwen3next-moe-f32 qwen35moe-f32 qwen35moe-wrapped-bf16; do
  a=$("$bin" generate -m "tests/fixtures/$f" --prompt-ids "$ids" -n 32 --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])')
  b=$("$bin" generate --device cuda -m "tests/fixtures/$f" --prompt-ids "$ids" -n 32 --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])')
  note "cpu vs cuda $f: $([ "$a" = "$b" ] && echo identical || echo "differ: cpu $a cuda $b")"
done

if [ "$mode" = full ]; then
  L="${BENCH_LAYERS:-12}"
  for like in qwen3-30b-a3b qwen3.5-35b-a3b; do
    stamp "bench $like ($L layers)"
    "$bin" make-random --like "$like" --layers "$L" -o "$work/$like" --dtype bf16 >/dev/null 2>&1
    "$bin" inspect -m "$work/$like" > "$out/inspect_$like.txt" 2>&1
    for num in exact fast; do
      timeout 400 "$bin" bench --device cuda -m "$work/$like" -p 2048 -n 64 --repetitions 3 \
        --numerics "$num" >"$out/bench_${like}_$num.log" 2>&1
      note "bench $like L=$L $num: $(grep -E '^(prefill|decode)' "$out/bench_${like}_$num.log" | tr -s ' ' | tr '\n' '|')"
    done
    LOCKSTEP_CUDA_PROFILE=1 timeout 300 "$bin" bench --device cuda -m "$work/$like" -p 512 -n 16 \
      --repetitions 1 >"$out/profile_$like.log" 2>&1
    rm -rf "${work:?}/$like"
  done
fi
stamp "done"
cat "$summary"
