#!/usr/bin/env bash
# Quantized weights kept quantized on the GPU (issue 10), in one device call: the GPU linear and
# quantized-weight tests, generation gates with 4-bit and 8-bit quantized targets on the shipped
# draft model, and Qwen3-8B-shaped decode at BF16, --quantize 8 and --quantize 4 (random
# checkpoint, decode only, few rounds). Logs and summary.txt go to $OUT.
#   Here (the device tool sends the session's checkout, /work/main, so the pack travels from
#   there): PACK_OUT=/work/main/.cuda-carry-quant2 tools/cuda/pack_engine.sh build-q;
#   cp tools/cuda/quant_on_device.sh /work/main/.cuda-carry-quant2-xz/; then `run` with carry
#   [".cuda-carry-quant2-xz"]: bash .cuda-carry-quant2-xz/quant_on_device.sh
#   LIMIT_S (default 400): the call's limit; later steps are skipped when too little is left.
set -uo pipefail
export LOCKSTEP_CUDA_QUANT=1  # quantized weights stay quantized on the GPU (the default; cuda_backend.cpp)
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/quant2-logs}"
mkdir -p "$out" /tmp/q
tar -xJf "$here/engine.tar.xz" -C /tmp/q
bin=/tmp/q/bin/run-lockstep
work=/tmp/lockstep-quant2
mkdir -p "$work"
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a "$summary"; }
left() { echo $((${LIMIT_S:-400} - ($(date +%s) - t0))); }
nvidia-smi -L | tee -a "$summary"

# The 8B checkpoint is written while the tests and gates run (CPU and disk; they use the GPU).
stamp "make-random qwen3-8b (background)"
("$bin" make-random --like qwen3-8b -o "$work/q8b" --seed 3 >"$work/make_random.log" 2>&1) &
mk=$!

stamp "cuda_tests *Quant*:*Linear*"
timeout 200 /tmp/q/bin/run-cuda_tests --gtest_filter='*Quant*:*Linear*' >"$out/cuda_tests.log" 2>&1
note "cuda_tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/cuda_tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$out/cuda_tests.log" | head -30 | tee -a "$summary"
grep -E 'runs differ|differs from' "$out/cuda_tests.log" | head -12 | cut -c1-400 | tee -a "$summary"

stamp "gates"
"$bin" quantize -m models/lockstep-draft-3m -o "$work/draft-q4" --bits 4 >/dev/null 2>&1
"$bin" quantize -m models/lockstep-draft-3m -o "$work/draft-q8" --bits 8 >/dev/null 2>&1
gate() {  # name, seconds, then verify's arguments
  local name=$1 secs=$2
  shift 2
  timeout "$secs" "$bin" verify --device cuda "$@" --prompts tests/gate/prompts.jsonl -n 64 \
    >"$work/gate_$name.log" 2>&1
  { echo "=== gate $name: verify $*"; cat "$work/gate_$name.log"; } >>"$out/gates.log"
  note "gate $name (cuda): $(grep -E '^(PASS|FAIL|DIVERGED)|rror|terminate' "$work/gate_$name.log" | head -1)"
}
gate q4target 80 -m "$work/draft-q4" --draft-model "$work/draft-q8"
# The same quantized target with the quantized weights dequantized to BF16 at load (the old
# placement): its greedy tokens must be the same ones (compared below through generate).
for q in 1 0; do
  LOCKSTEP_CUDA_QUANT=$q timeout 30 "$bin" generate --device cuda -m "$work/draft-q4" \
    -p "The quick brown fox" -n 48 --temperature 0 >"$work/gen_quant$q.txt" 2>"$work/gen_quant$q.err"
done
if cmp -s "$work/gen_quant1.txt" "$work/gen_quant0.txt" && [ -s "$work/gen_quant1.txt" ]; then
  note "generate q4 target: quantized-on-GPU text == BF16-placed text"
else
  note "generate q4 target: DIFFERENT or empty (see gates.log)"
  { echo "=== generate quant=1"; cat "$work/gen_quant1.txt" "$work/gen_quant1.err";
    echo "=== generate quant=0"; cat "$work/gen_quant0.txt" "$work/gen_quant0.err"; } >>"$out/gates.log"
fi

stamp "waiting for the checkpoint"
wait $mk
stamp "checkpoint ready"
{ echo "=== make-random"; cat "$work/make_random.log"; } >>"$out/bench.log"
for q in 0 8 4; do
  [ "$(left)" -gt 45 ] || { note "bench quantize=$q skipped (time)"; continue; }
  args=()
  [ "$q" != 0 ] && args=(--quantize "$q")
  stamp "bench quantize=$q"
  t=$(($(left) - 10)); [ "$t" -gt 100 ] && t=100
  timeout "$t" "$bin" bench --device cuda -m "$work/q8b" -p 16 -n 96 -r 2 "${args[@]}" \
    >"$work/bench_q$q.log" 2>&1
  { echo "=== bench --quantize $q"; cat "$work/bench_q$q.log"; } >>"$out/bench.log"
  note "bench qwen3-8b quantize=$q: $(grep -E '^(machine|prefill|decode) |rror' "$work/bench_q$q.log" | tr -s ' ' | tr '\n' '|')"
done
# Per-op GPU time of the 8-bit decode (eager, CUDA events around each op), while time lasts.
if [ "$(left)" -gt 70 ]; then
  stamp "profile quantize=8"
  LOCKSTEP_CUDA_PROFILE=1 timeout 45 "$bin" bench --device cuda -m "$work/q8b" -p 16 -n 32 -r 1 \
    --quantize 8 >"$out/profile.log" 2>&1
  grep -E -A9 'steps, ' "$out/profile.log" | head -24 | tee -a "$summary"
fi
if [ "$(left)" -gt 40 ]; then
  gate q8target $(($(left) - 10)) -m "$work/draft-q8" --draft-model "$work/draft-q4"
fi
stamp "done"
