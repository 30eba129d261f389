#!/usr/bin/env bash
# Tensor parallelism emulated on one GPU, in one call: whether a split of the row-parallel linears
# over R ranks (LOCKSTEP_CUDA_TP_EMULATE=R: each rank's K pieces as separate partials, merged in
# piece order; kernels/cuda/row_parallel.cu) keeps every bit.
#   1. the GPU op tests (TESTS, default the row-parallel and linear tests);
#   2. on random checkpoints of Qwen3-8B, Qwen3-32B, Llama-3.1-70B (hidden 8192: two pieces, so
#      four and eight ranks leave ranks without pieces), Qwen3.5-35B-A3B (Gated DeltaNet out_proj,
#      MoE, MTP) and small Gemma 4 shapes, few layers each: score logit hashes of a 300-id prompt
#      and 40 greedy tokens with the emulation off and at R = 1, 2, 4, 8 (RANKS), all identical
#      (and at 4 bits for the Qwen3-8B shape);
#   3. the generation gate (`lockstep verify`: classic against chunked, batched, lookup, draft or
#      MTP) under the emulation at 4 ranks.
# Run from the repo root after tools/cuda/pack_engine.sh here, carrying .cuda-carry-engine-xz.
set -uo pipefail
. "$(dirname "$0")/device_script.sh"  # root, out, $bin, summary, note, stamp, op_tests
work=/tmp/lockstep-tp
mkdir -p "$work"
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$summary"; }
nvidia-smi -L | tee -a "$summary"
op_tests cuda_tests.log "${TESTS:-*RowParallel*:*LinearTest*}" 300

ids300=$(for i in $(seq 0 299); do echo $(( (i * 37 + 5) % 499 )); done | paste -sd,)
# tp_bits NAME QUANT_FLAGS: one md5 per rank count of (score hashes, greedy ids); all must agree.
tp_bits() {
  local m="$work/$1" q="$2" r
  for r in off ${RANKS:-1 2 4 8}; do
    local vars=""
    [ "$r" = off ] || vars="LOCKSTEP_CUDA_TP_EMULATE=$r"
    {
      env $vars "$bin" score --device cuda -m "$m" $q --ids "$ids300" --logits-hash --json 2>/dev/null |
        python3 -c 'import json,sys; print(" ".join(p["logits_fnv1a"] for p in json.load(sys.stdin)["positions"]))'
      env $vars "$bin" generate --device cuda -m "$m" $q --prompt-ids "3,10,17,24,31" -n 40 --json 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])'
    } | md5sum | sed "s/ .*/ R=$r/"
  done >"$out/tp_$1${q:+_q}.txt"
  local kinds
  kinds=$(cut -d' ' -f1 "$out/tp_$1${q:+_q}.txt" | sort -u | wc -l)
  if grep -q d41d8cd98f00b204e9800998ecf8427e "$out/tp_$1${q:+_q}.txt"; then kinds=0; fi
  note "$1${q:+ ($q)}: TP off/${RANKS:-1 2 4 8} $([ "$kinds" = 1 ] && echo identical || echo "DIFFER or empty") ($(tr '\n' ' ' <"$out/tp_$1${q:+_q}.txt" | cut -c1-200))"
}
gate() {  # name, verify arguments... (under the emulation at 4 ranks)
  local name="$1"; shift
  stamp "gate $name (TP 4 emulated)"
  LOCKSTEP_CUDA_TP_EMULATE=4 timeout 240 "$bin" verify --device cuda --prompts "$work/prompts.jsonl" -n 24 "$@" \
    >"$out/$name.log" 2>&1
  note "$name: $(grep -E '^(PASS|FAIL|DIVERGED)|rror' "$out/$name.log" | tail -1)"
}
{
  echo '{"ids": [1, 17, 256, 42]}'
  echo '{"ids": [5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7]}'
  ids=""; for ((i = 0; i < 160; ++i)); do ids+="$(( (i * 37 + 1765) % 509 )),"; done
  echo "{\"ids\": [${ids%,}]}"
} >"$work/prompts.jsonl"

for spec in ${SHAPES:-qwen3-8b:2 qwen3.5-35b-a3b:4 small-gemma4:0 qwen3-32b:1 llama-3.1-70b:1}; do
  s="${spec%%:*}" layers="${spec##*:}"
  stamp "$s ($layers layers)"
  "$bin" make-random --like "$s" $([ "$layers" = 0 ] || echo --layers "$layers") -o "$work/$s" \
    --dtype bf16 --seed 9 >/dev/null 2>&1 || { note "$s: make-random failed"; continue; }
  tp_bits "$s" ""
  case "$s" in
    qwen3-8b) tp_bits "$s" "--quantize 4"; gate gate_qwen3-8b -m "$work/$s" ;;
    qwen3.5-35b-a3b) gate gate_qwen35moe_mtp -m "$work/$s" ;;
  esac
  rm -rf "${work:?}/$s"
done
stamp done
