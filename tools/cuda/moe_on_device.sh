#!/usr/bin/env bash
# Mixture-of-experts models on the GPU machine, in one call: the GPU op tests, the generation
# gate on random MoE checkpoints (float and 4-bit kept quantized), CPU-vs-GPU greedy agreement on
# the MoE reference fixtures, and decode/prefill benchmarks of MoE shapes (exact and fast).
# Run from the repo root after tools/cuda/pack_engine.sh here, carrying .cuda-carry-engine-xz.
#   tools/cuda/moe_on_device.sh [gates|full|cpu|device]   (full adds the GPU benchmarks; cpu runs
#   only the host-CPU benchmark: a 4-bit qwen3-30b-a3b shape with CPU_LAYERS layers, 2 and all
#   threads; device: the device-routing checks and an A/B of the two GPU MoE paths, below)
#   device: the MoE op tests (device routing == route_tokens, device grouping == group_by_expert,
#   grouped expert linear == per-expert linear, MoE layer device path == host path, eager and
#   replayed), then LOCKSTEP_CUDA_MOE_DEVICE=0 (host routing, one launch per expert projection, no
#   graphs) against the default (routing on the device, grouped launches, graphs): score's logit
#   hashes and greedy tokens (BF16 and --quantize 4) must be identical, then
#   `bench --device cuda -p 2048 -n 64 -r 3` of both paths on each shape (BENCH_LAYERS layers,
#   default 12) with the graph step counts (LOCKSTEP_CUDA_GRAPH_STATS=1). The gates (which now
#   run the device path) are `gates`; run it after `device` (one command each: 10 minutes).
#   BENCH_LAYERS (default 12): decoder layers of the benchmark shapes (make-random --layers)
#   SKIP_OP_TESTS=1: leave out the GPU op tests
set -uo pipefail
. "$(dirname "$0")/device_script.sh"  # root, out, $bin, summary, note, stamp
mode="${1:-full}"
work=/tmp/lockstep-moe
mkdir -p "$work"
nvidia-smi -L | tee -a "$summary"
lscpu | grep -m1 "Model name" | tee -a "$summary"

if [ "$mode" = device ]; then
  op_tests cuda_tests_moe.log '*DeviceRouting*:*DeviceGrouping*:*GroupedExpert*:*MoeLayerDevice*:*MoeCombine*' 300
  SKIP_OP_TESTS=1
fi

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
if [ "$mode" = device ]; then
  # The two GPU paths, bit for bit: a 40-token score (one forward of <= 64 tokens: the device
  # path), a 90-token one (host routing in both: > 64 tokens), and 24 greedy tokens (decode steps:
  # recorded graphs on the device path, eager host routing on the other).
  stamp "A/B: LOCKSTEP_CUDA_MOE_DEVICE=0 against the device path"
  ids40=$(seq -s, 3 7 283); ids90=$(seq -s, 5 11 984)
  for m in q35 q3; do
    for q in "" "--quantize 4"; do
      tag="$m${q:+-q4}"
      for dev in 0 1; do
        for ids in "$ids40" "$ids90"; do
          LOCKSTEP_CUDA_MOE_DEVICE=$dev "$bin" score --device cuda -m "$work/$m" $q --ids "$ids" \
            --logits-hash --json 2>>"$out/ab_$tag.err" |
            python3 -c 'import json,sys; print(" ".join(p["logits_fnv1a"] for p in json.load(sys.stdin)["positions"]))'
        done >"$out/ab_score_${tag}_$dev.txt"
        LOCKSTEP_CUDA_MOE_DEVICE=$dev LOCKSTEP_CUDA_GRAPH_STATS=1 "$bin" generate --device cuda \
          -m "$work/$m" $q --prompt-ids "$ids40" -n 24 --json 2>"$out/ab_gen_${tag}_$dev.err" |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])' >"$out/ab_gen_${tag}_$dev.txt"
      done
      s0=$(md5sum <"$out/ab_score_${tag}_0.txt"); s1=$(md5sum <"$out/ab_score_${tag}_1.txt")
      g0=$(cat "$out/ab_gen_${tag}_0.txt"); g1=$(cat "$out/ab_gen_${tag}_1.txt")
      rows=$(wc -w <"$out/ab_score_${tag}_1.txt")
      note "A/B $tag: score logit hashes ($rows rows) $([ "$s0" = "$s1" ] && [ "$rows" -gt 0 ] && echo identical || echo DIFFER); greedy tokens $([ "$g0" = "$g1" ] && [ -n "$g1" ] && echo "identical ($g1)" || echo "DIFFER: host $g0 device $g1")"
      note "  graph steps, device path: $(grep -E 'lockstep cuda steps' "$out/ab_gen_${tag}_1.err" | tr '\n' ' ')"
    done
  done
fi

gate() {  # name, verify arguments...
  local name="$1"; shift
  timeout 400 "$bin" verify --device cuda --prompts "$work/prompts.jsonl" -n 32 "$@" >"$out/$name.log" 2>&1
  note "$name: $(grep -E '^(PASS|FAIL)|error' "$out/$name.log" | tail -1)"
}
if [ "$mode" != device ]; then
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
fi  # not device
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

if [ "$mode" = device ]; then
  L="${BENCH_LAYERS:-12}"
  for like in qwen3-30b-a3b qwen3.5-35b-a3b; do
    stamp "bench A/B $like ($L layers)"
    "$bin" make-random --like "$like" --layers "$L" -o "$work/$like" --dtype bf16 >/dev/null 2>&1
    "$bin" inspect -m "$work/$like" > "$out/inspect_$like.txt" 2>&1
    for dev in 0 1; do
      LOCKSTEP_CUDA_MOE_DEVICE=$dev LOCKSTEP_CUDA_GRAPH_STATS=1 timeout 280 "$bin" bench \
        --device cuda -m "$work/$like" -p 2048 -n 64 --repetitions 3 \
        >"$out/bench_${like}_moe_device_$dev.log" 2>&1
      note "bench $like L=$L LOCKSTEP_CUDA_MOE_DEVICE=$dev: $(grep -E '^(prefill|decode)' "$out/bench_${like}_moe_device_$dev.log" | tr -s ' ' | tr '\n' '|')"
    done
    rm -rf "${work:?}/$like"
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
