#!/usr/bin/env bash
# Mixture-of-experts models on the GPU machine, in one call: the GPU op tests, the generation
# gate on random MoE checkpoints (float and 4-bit kept quantized), CPU-vs-GPU greedy agreement on
# the MoE reference fixtures, and decode/prefill benchmarks of MoE shapes (exact and fast).
# Run from the repo root after tools/cuda/pack_engine.sh here, carrying .cuda-carry-engine-xz.
#   tools/cuda/moe_on_device.sh [gates|full|cpu]   (full adds the GPU benchmarks; cpu runs only
#   the host-CPU benchmark: a 4-bit qwen3-30b-a3b shape with CPU_LAYERS layers, 2 and all threads)
#   BENCH_LAYERS (default 12): decoder layers of the benchmark shapes (make-random --layers)
#   SKIP_OP_TESTS=1: leave out the GPU op tests
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="${OUT:-$root/cuda-logs}"
mkdir -p "$out"
. "$root/tools/cuda/engine_env.sh"  # $carry, $bin, LOCKSTEP_CUBLAS_DIR
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

if [ -x "$carry/bin/run-cuda_tests" ] && [ "${SKIP_OP_TESTS:-0}" != 1 ] && [ "$mode" != cpu ]; then
  stamp "cuda_tests"
  timeout 300 "$carry/bin/run-cuda_tests" >"$out/cuda_tests.log" 2>&1
  note "cuda_tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/cuda_tests.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$out/cuda_tests.log" | head -20 | tee -a "$summary"
fi

# The gate on the GPU. The CUDA kernels need head_dim 64/128/256 and K a multiple of 16, so the
# tiny CI presets and the fixtures do not run there: the released shapes with fewer layers do
# (random weights; ids prompts, so no tokenizer is needed).
if [ "$mode" != cpu ]; then
stamp "MoE gates on cuda"
"$bin" make-random --like qwen3.5-35b-a3b --layers 4 -o "$work/q35" --dtype bf16 --seed 11 >/dev/null 2>&1
"$bin" make-random --like qwen3-30b-a3b --layers 3 -o "$work/q3" --dtype bf16 --seed 12 >/dev/null 2>&1
"$bin" make-random --like qwen3-30b-a3b --layers 1 -o "$work/q3-draft" --dtype bf16 --seed 13 >/dev/null 2>&1
cat > "$work/prompts.jsonl" <<'JSON'
{"ids": [1, 17, 256, 42]}
{"ids": [5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7]}
{"ids": [300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319]}
{"ids": [9, 9, 9]}
JSON
gate() {  # name, verify arguments...
  local name="$1"; shift
  timeout 400 "$bin" verify --device cuda --prompts "$work/prompts.jsonl" -n 32 "$@" >"$out/$name.log" 2>&1
  note "$name: $(grep -E '^(PASS|FAIL)|error' "$out/$name.log" | tail -1)"
}
gate gate_qwen35moe_mtp -m "$work/q35"
gate gate_qwen3moe_draft -m "$work/q3" --draft-model "$work/q3-draft"
gate gate_qwen3moe_q4 -m "$work/q3" --draft-model "$work/q3-draft" --quantize 4

# CPU vs GPU greedy tokens (not promised bitwise; near ties may differ).
stamp "cpu vs gpu"
ids="1,17,256,42,42,7,128,3,17,99,200,42,5,0,255,17,64,64,64,31"
for m in q35 q3; do
  a=$("$bin" generate -m "$work/$m" --prompt-ids "$ids" -n 32 --json 2>"$out/cpu_$m.err" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])')
  b=$("$bin" generate --device cuda -m "$work/$m" --prompt-ids "$ids" -n 32 --json 2>"$out/cuda_$m.err" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])')
  note "cpu vs cuda $m: $([ "$a" = "$b" ] && echo "identical ($a)" || echo "differ: cpu $a cuda $b")"
done
fi

if [ "$mode" = cpu ]; then
  L="${CPU_LAYERS:-8}"
  stamp "cpu bench qwen3-30b-a3b ($L layers, 4-bit)"
  "$bin" make-random --like qwen3-30b-a3b --layers "$L" -o "$work/cpu-bf16" --dtype bf16 >/dev/null 2>&1
  "$bin" quantize -m "$work/cpu-bf16" -o "$work/cpu-q4" --bits 4 --group-size 64 >/dev/null 2>&1
  rm -rf "${work:?}/cpu-bf16"
  "$bin" inspect -m "$work/cpu-q4" | grep -E "experts|active|decode weight" | tee -a "$summary"
  note "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  for round in 1 2; do
    for t in 2 $(nproc); do
      "$bin" bench -m "$work/cpu-q4" -p 16 -n 32 -r 3 --threads "$t" >"$out/cpu_bench_${t}_$round.log" 2>&1
      note "cpu bench q4 L=$L threads $t round $round: $(grep -E '^decode' "$out/cpu_bench_${t}_$round.log" | tr -s ' ')"
    done
  done
fi

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
