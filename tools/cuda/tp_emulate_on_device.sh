#!/usr/bin/env bash
# Tensor parallelism emulated on one GPU, in one call: whether splitting the linears over R ranks
# (LOCKSTEP_CUDA_TP_EMULATE=R: column-parallel weights by output rows, each shard walking K in the
# whole weight's pieces; row-parallel ones by K pieces, each piece's partial kept apart and merged
# in piece order; kernels/cuda/tensor_parallel.cu) keeps every bit.
#   1. the GPU op tests (TESTS, default the tensor-parallel, linear and quantized linear tests);
#   2. on random checkpoints of Qwen3-8B, Qwen3.5-35B-A3B (Gated DeltaNet, MoE, MTP), small Gemma 4,
#      Qwen3-32B and Llama-3.1-70B (hidden 8192: two pieces, so four and eight ranks leave ranks
#      without pieces of a row-parallel weight) shapes, few layers each: score logit hashes of a
#      300-id prompt and 40 greedy tokens with the emulation off and at R = 1, 2, 4, 8 (RANKS), all
#      identical (and at 4 bits for the Qwen3-8B shape), with the old engine's where one is carried
#      (tools/cuda/pack_pair.sh); each emulated run's count of emulated weights and calls noted;
#   3. the generation gate (`lockstep verify`: classic against chunked, batched, lookup, draft or
#      MTP) under the emulation at 4 ranks.
# Run from the repo root after tools/cuda/pack_engine.sh here, carrying .cuda-carry-engine-xz (or
# the pair, unpacked first).
set -uo pipefail
. "$(dirname "$0")/device_script.sh"  # root, out, $bin, summary, note, stamp, op_tests, old_engine
work=/tmp/lockstep-tp
mkdir -p "$work"
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$summary"; }
nvidia-smi -L | tee -a "$summary"
old_engine
op_tests cuda_tests.log "${TESTS:-*TensorParallel*:*RowParallel*:*ColumnParallel*:*LinearTest*:*Quant*}" 360

ids300=$(for i in $(seq 0 299); do echo $(( (i * 37 + 5) % 499 )); done | paste -sd,)
# tp_bits NAME QUANT_FLAGS: one md5 per rank count of (score hashes, greedy ids); all must agree.
tp_bits() {
  local m="$work/$1" q="$2" r tag="$1${2:+_q}"
  for r in $([ -n "$old" ] && echo old) off ${RANKS:-1 2 4 8}; do
    local vars="" b="$bin"
    case "$r" in old) b="$old" ;; off) ;; *) vars="LOCKSTEP_CUDA_TP_EMULATE=$r" ;; esac
    {
      env $vars "$b" score --device cuda -m "$m" $q --ids "$ids300" --logits-hash --json 2>/dev/null |
        python3 -c 'import json,sys; print(" ".join(p["logits_fnv1a"] for p in json.load(sys.stdin)["positions"]))'
      env $vars "$b" generate --device cuda -m "$m" $q --prompt-ids "3,10,17,24,31" -n 40 --json \
        2>"$work/tp_${tag}_$r.err" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])'
    } | md5sum | sed "s/ .*/ R=$r/"
  done >"$out/tp_$tag.txt"
  local kinds
  kinds=$(cut -d' ' -f1 "$out/tp_$tag.txt" | sort -u | wc -l)
  if grep -q d41d8cd98f00b204e9800998ecf8427e "$out/tp_$tag.txt"; then kinds=0; fi
  note "$1${q:+ ($q)}: $(awk '{print $2}' "$out/tp_$tag.txt" | tr '\n' ' ')$([ "$kinds" = 1 ] && echo identical || echo "DIFFER or empty") ($(cut -c1-12 "$out/tp_$tag.txt" | tr '\n' ' '))"
  # The emulation ran: its weights and calls, as the backend counts them at exit.
  note "  $(grep -h 'tensor-parallel emulation over' "$work"/tp_"${tag}"_[0-9]*.err | sed 's/^cuda: //' | tr '\n' ';' | cut -c1-400)"
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
