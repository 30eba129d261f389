#!/usr/bin/env bash
# On the GPU machine, from the repository root, carrying .cuda-carry-engine-xz (a CUDA build packed by
# tools/cuda/pack_engine.sh): trains the small Gemma 4 target and its assistant (gemma4_pair.py), then
# runs lockstep on the pair in the same call, since the weights (~110 MB) stay on that machine:
#   the generation gate with the assistant at widths 1-4 beside every other mode (CUDA),
#   decode speed of --spec assistant at widths 1-4 against classic decode (CUDA; the host CPU too
#   when CPU_NPROMPTS > 0).
#   bash tools/train/gemma4_pair_on_device.sh [gemma4_pair.py options]
# $OUT gets train.log, results.json, gate.log, speedup_cuda.txt (speedup_cpu.txt) and summary.txt.
# NPROMPTS (12): prompts of tests/gate/prompts.jsonl timed; MODES: the spec_speedup.sh modes (default
# classic and the assistant at widths 1-4); GATE_TIMEOUT_S (100; 0 skips the gate, for a call that
# spends its time training). About 9.5 minutes with the defaults.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out="${OUT:-/tmp/lockstep-gemma4-out}"
work=/tmp/lockstep-gemma4
mkdir -p "$out" "$work"
summary="$out/summary.txt"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=true
python3 tools/train/gemma4_pair.py --work "$work" --out "$work/out" "$@" 2>&1 | tee "$out/train.log" | grep -E '==|eval:|check:|export:|ms/step|"step": [0-9]*00,'
cp "$work/out/results.json" "$out/" 2>/dev/null
target="$work/out/models/lockstep-gemma4-code" assistant="$work/out/models/lockstep-gemma4-code-assistant"
[ -f "$assistant/config.json" ] || { echo "no trained pair" | tee -a "$summary"; exit 1; }
. tools/cuda/engine_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$summary"
lscpu | grep 'Model name' | tee -a "$summary"
head -n 8 tests/gate/prompts.jsonl >"$work/gate_prompts.jsonl"
if [ "${GATE_TIMEOUT_S:-100}" = 0 ]; then
  echo "gate: skipped (GATE_TIMEOUT_S=0)" | tee -a "$summary"
else
  timeout "${GATE_TIMEOUT_S:-100}" "$bin" verify --device cuda -m "$target" --draft-model "$assistant" --prompts "$work/gate_prompts.jsonl" \
    -n 48 >"$out/gate.log" 2>&1
  echo "gate (cuda, 8 prompts, 48 tokens): $(grep -E '^(PASS|DIVERGED)|rror' "$out/gate.log" | tail -1)" | tee -a "$summary"
  grep -E '^assistant/' "$out/gate.log" | tee -a "$summary"
fi
modes="${MODES:-none:0 assistant:1 assistant:2 assistant:3 assistant:4}"
LOCKSTEP_BIN="$bin" MODEL="$target" DRAFT="$assistant" DEVICE=cuda MODES="$modes" NPROMPTS="${NPROMPTS:-12}" \
  timeout 150 bash tools/bench/spec_speedup.sh 16 256 >"$out/speedup_cuda.txt" 2>&1
{ echo "== cuda, 256 tokens, ${NPROMPTS:-12} prompts"; cat "$out/speedup_cuda.txt"; } | tee -a "$summary"
if [ "${CPU_NPROMPTS:-0}" -gt 0 ]; then
  LOCKSTEP_BIN="$bin" MODEL="$target" DRAFT="$assistant" DEVICE=cpu MODES="$modes" NPROMPTS="$CPU_NPROMPTS" \
    timeout 120 bash tools/bench/spec_speedup.sh 16 128 >"$out/speedup_cpu.txt" 2>&1
  { echo "== host cpu, 16 threads, 128 tokens, $CPU_NPROMPTS prompts"; cat "$out/speedup_cpu.txt"; } | tee -a "$summary"
fi
