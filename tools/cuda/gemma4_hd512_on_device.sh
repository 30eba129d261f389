#!/usr/bin/env bash
# Head dim 512 (Gemma 4's full layers) on the GPU machine, in one call: the GPU attention tests
# (walk against split against every rows-per-block choice, bitwise, and the FP64 / CPU accuracy
# bounds, head dims 64 to 512, windows, GQA), the Gemma 4 op tests at 512 (attention_prep's op
# loop with whole-head RoPE, the head norms' rms_norm schedule), then the generation gate on the
# GPU for random small-gemma4-hd512 checkpoints (sliding layers 256, full layers 512 with values =
# keys, KV-sharing layers, window 300) with prompts that cross the 256-position chunks and the
# window, then CPU-versus-GPU greedy agreement on that checkpoint.
# Run from the repo root after tools/cuda/pack_engine.sh here, carrying .cuda-carry-engine-xz;
# `tests` or `gate` runs one half (each well inside one 10-minute device call), no argument both.
#   tools/cuda/gemma4_hd512_on_device.sh [tests|gate]
set -uo pipefail
stage="${1:-all}"
root="$(pwd)"
out="${OUT:-$root/cuda-logs}"
mkdir -p "$out"
. "$root/tools/cuda/engine_env.sh"  # $carry, $bin, LOCKSTEP_CUBLAS_DIR
work=/tmp/lockstep-hd512
mkdir -p "$work"
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
nvidia-smi -L | tee -a "$summary"

t0=$(date +%s)
if [ "$stage" != gate ]; then
timeout 540 "$carry/bin/run-cuda_tests" \
  --gtest_filter='*Attention*:*RmsNormKeepsItsSchedule*:*RopeMatchesCpu*' \
  >"$out/cuda_tests.log" 2>&1
note "cuda_tests (attention, prep, norms; $(($(date +%s) - t0)) s): $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/cuda_tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]|accuracy' "$out/cuda_tests.log" | head -30 | tee -a "$summary"
fi
[ "$stage" = tests ] && { cat "$summary"; exit 0; }

# Prompts of 9 to 700 ids plus a repeat (lookup finds matches): the short ones stay in one chunk,
# 300 and 700 cross chunk edges and the window.
for n in 9 40 300 700; do
  ids=""
  for ((i = 0; i < n; ++i)); do ids+="$(( (i * 37 + n * 11 + 5) % 509 )),"; done
  for ((i = 0; i < 6; ++i)); do ids+="$(( (i * 37 + n * 11 + 5) % 509 )),"; done
  echo "{\"ids\": [${ids%,}]}"
done >"$work/prompts.jsonl"
gate() {  # name, verify arguments...
  local name="$1"; shift
  timeout 240 "$bin" verify --device cuda --prompts "$work/prompts.jsonl" -n 40 "$@" >"$out/$name.log" 2>&1
  note "$name: $(grep -E '^(PASS|FAIL)|rror' "$out/$name.log" | tail -1)"
}
p=small-gemma4-hd512
"$bin" make-random --like "$p" -o "$work/$p" --dtype bf16 --seed 21 >/dev/null 2>&1
"$bin" make-random --like "$p" -o "$work/$p-draft" --dtype bf16 --seed 22 >/dev/null 2>&1
gate "gate_$p" -m "$work/$p" --draft-model "$work/$p-draft"

# CPU vs GPU greedy tokens (not promised bitwise; near ties may differ): a short prompt and one
# of 300 ids (past the window and the first chunk).
short="1,17,256,42,42,7,128,3,17,99,200,42,5,0,255,17,64,64,64,31,9,8,7,6,5"
long=$(python3 -c 'print(",".join(str((i * 53 + 7) % 509) for i in range(300)))')
for pr in short long; do
  ids="${!pr}"
  a=$("$bin" generate -m "$work/$p" --prompt-ids "$ids" -n 24 --json 2>"$out/cpu_$pr.err" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])')
  b=$("$bin" generate --device cuda -m "$work/$p" --prompt-ids "$ids" -n 24 --json 2>"$out/cuda_$pr.err" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])')
  note "cpu vs cuda $p ($pr prompt): $([ -n "$a" ] && [ "$a" = "$b" ] && echo "identical ($a)" || echo "differ: cpu $a cuda $b")"
done
# The greedy and seeded tokens, to compare across GPUs and builds (reference_tokens.txt).
for s in "--temperature 0" "--temperature 0.8 --seed 3"; do
  # shellcheck disable=SC2086
  ids=$("$bin" generate --device cuda -m "$work/$p" --prompt-ids "$short" -n 32 --json --ignore-eos $s 2>>"$out/tokens.err" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])' 2>>"$out/tokens.err")
  note "$p $s: ${ids:-ERROR}"
done
note "total $(($(date +%s) - t0)) s"
cat "$summary"
