#!/usr/bin/env bash
# Decode speed of lockstep's quantized weights against llama.cpp's closest formats, on the same
# random Qwen3-1.7B-shaped BF16 checkpoint (issue 9). Runs are interleaved engine by engine, round
# by round, so the noise of a shared machine spreads over all of them alike.
#
# Usage: tools/bench/quant_vs_llamacpp.sh LLAMA_BUILD_DIR [workdir=/tmp/quant-vs-llamacpp]
#                                          [rounds=3] [threads=2] [tokens=64] [reps=3]
#        ENGINES="ls:q8 ll:Q8_0 ..." overrides the engines run each round (default: all six below).
# LLAMA_BUILD_DIR must hold bin/llama-bench and bin/llama-quantize (llama.cpp is not part of this
# repository: build those two targets from its source). Python: standard library only.
#
# Made in WORKDIR (kept; an existing file is reused):
#   bf16/            lockstep make-random --like qwen3-1.7b --dtype bf16
#   q8/, q4/         lockstep quantize --bits 8|4 --group-size 64 (bf16 scales and biases)
#   bf16.gguf        the same tensors written as GGUF by tools/bench/safetensors_to_gguf.py (2-D
#                    tensors copied as BF16, norms widened to F32; tokenizer "no_vocab")
#   Q8_0, Q4_0-pure (llama-quantize --pure: every matrix Q4_0, the same bytes as lockstep 4-bit),
#   Q4_0, Q4_K_M     (llama-quantize defaults: the tied embedding / output becomes Q6_K)
#                    (each GGUF only where ENGINES runs it)
# Each round runs, in this order: lockstep q8, llama Q8_0, lockstep q4, llama Q4_0-pure,
# llama Q4_0, llama Q4_K_M. lockstep: bench -p 1 -n N -r REPS (-p 0 is refused: one prompt
# token), llama.cpp: llama-bench -p 0 -n N -r REPS; both run one untimed warm-up first. Each
# run's median decode tok/s is kept (WORKDIR/runs.jsonl, rewritten each call); the summary gives
# the median over rounds and the per-round ratios. Results: docs/benchmarks.md, "Against
# llama.cpp (quantized)".
# LOCKSTEP_BIN_B=another lockstep binary: engines "lb:q8" / "lb:q4" run it (an A/B of a change,
# in the same rounds). PROMPT=P measures prefill of P tokens instead (lockstep bench -p P -n 1, llama-bench -p P -n 0;
# the summary then reads "prefill").
set -euo pipefail
cd "$(dirname "$0")/../.."
llama="${1:?usage: $0 LLAMA_BUILD_DIR [workdir] [rounds] [threads] [tokens]}"
work="${2:-/tmp/quant-vs-llamacpp}"; rounds="${3:-3}"; threads="${4:-2}"; n="${5:-64}"; reps="${6:-3}"
bin="${LOCKSTEP_BIN:-build/lockstep}"  # LOCKSTEP_BIN: another build's binary
mkdir -p "$work"
[ -f "$work/bf16/model.safetensors" ] || "$bin" make-random --like qwen3-1.7b -o "$work/bf16" --dtype bf16
for b in 8 4; do
  [ -f "$work/q$b/model.safetensors" ] ||
    "$bin" quantize -m "$work/bf16" -o "$work/q$b" --bits "$b" --group-size 64
done

[ -f "$work/bf16.gguf" ] || python3 tools/bench/safetensors_to_gguf.py "$work/bf16" "$work/bf16.gguf"

read -r -a runs <<< "${ENGINES:-ls:q8 ll:Q8_0 ls:q4 ll:Q4_0-pure ll:Q4_0 ll:Q4_K_M}"
# Only the GGUFs the engines run (llama-quantize of a 1.7B model takes a minute a format).
q="$llama/bin/llama-quantize"
gguf() {  # name, llama-quantize arguments...
  local name="$1"; shift
  case " ${runs[*]} " in *" ll:$name "*) ;; *) return 0 ;; esac
  [ -f "$work/$name.gguf" ] || "$q" "$@"
}
gguf Q8_0 "$work/bf16.gguf" "$work/Q8_0.gguf" Q8_0 "$threads"
gguf Q4_0-pure --pure "$work/bf16.gguf" "$work/Q4_0-pure.gguf" Q4_0 "$threads"
gguf Q4_0 "$work/bf16.gguf" "$work/Q4_0.gguf" Q4_0 "$threads"
gguf Q4_K_M "$work/bf16.gguf" "$work/Q4_K_M.gguf" Q4_K_M "$threads"

prompt="${PROMPT:-0}"  # 0: decode
if [ "$prompt" -gt 0 ]; then phase=prefill; ls_args=(-p "$prompt" -n 1); ll_args=(-p "$prompt" -n 0)
else phase=decode; ls_args=(-p 1 -n "$n"); ll_args=(-p 0 -n "$n"); fi
log="$work/runs.jsonl"; : > "$log"
for r in $(seq 1 "$rounds"); do
  for e in "${runs[@]}"; do
    kind=${e%%:*}; name=${e##*:}
    load=$(cut -d' ' -f1 /proc/loadavg)
    if [ "$kind" = ls ] || [ "$kind" = lb ]; then
      b="$bin"; [ "$kind" = lb ] && b="${LOCKSTEP_BIN_B:?engine $e needs LOCKSTEP_BIN_B}"
      out=$("$b" bench -m "$work/$name" --threads "$threads" "${ls_args[@]}" -r "$reps" --json 2>/dev/null)
      tps=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]]["tok_s"]["median"])' "$out" "$phase")
    else
      out=$("$llama/bin/llama-bench" -m "$work/$name.gguf" -t "$threads" "${ll_args[@]}" -r "$reps" -o json 2>/dev/null)
      tps=$(python3 -c 'import json,sys,statistics; print(statistics.median(json.loads(sys.argv[1])[0]["samples_ts"]))' "$out")
    fi
    echo "{\"round\": $r, \"engine\": \"$e\", \"tok_s\": $tps, \"load\": $load}" | tee -a "$log"
  done
done

python3 - "$log" "$phase" <<'EOF'
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows: by.setdefault(r["engine"], {})[r["round"]] = r["tok_s"]
med = {e: st.median(v.values()) for e, v in by.items()}
print("\nmedian %s tok/s over rounds:" % sys.argv[2])
for e, m in med.items():
    print("  %-14s %7.2f   rounds: %s" % (e, m, " ".join("%.2f" % by[e][k] for k in sorted(by[e]))))
print("\nlockstep / llama.cpp (ratio of medians; per-round ratios):")
for a, b in [("ls:q8", "ll:Q8_0"), ("ls:q4", "ll:Q4_0-pure"), ("ls:q4", "ll:Q4_0"), ("ls:q4", "ll:Q4_K_M"),
             ("ls:q8", "lb:q8"), ("ls:q4", "lb:q4")]:
    if a not in by or b not in by: continue
    per = [by[a][k] / by[b][k] for k in sorted(by[a]) if k in by[b]]
    print("  %-6s vs %-12s %5.2f   rounds: %s" % (a, b, med[a] / med[b], " ".join("%.2f" % x for x in per)))
EOF
