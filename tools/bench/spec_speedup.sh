#!/usr/bin/env bash
# Decode speed-up of each speculative mode over classic decode, measured in one run at temperature
# 0 over a prompt set (default: the committed tests/gate/prompts.jsonl, for the shipped target).
# Modes are interleaved prompt by prompt so machine noise spreads over all of them alike.
# Usage: tools/bench/spec_speedup.sh [threads=2] [tokens=128]
# Environment (defaults: the shipped target on the CPU with every mode):
#   LOCKSTEP_BIN  the lockstep binary (build/lockstep)       MODEL   -m DIR (the shipped target)
#   DEVICE        cpu or cuda                                 DRAFT   --draft-model DIR for draft /
#   MODES         "mode:width ..." (none:0 is the baseline)           assistant modes
#   PROMPTS       a JSONL file of prompt strings              NPROMPTS  the first N of them only
set -euo pipefail
cd "$(dirname "$0")/../.."
threads="${1:-2}"; n="${2:-128}"
bin="${LOCKSTEP_BIN:-build/lockstep}"
prompts="${PROMPTS:-tests/gate/prompts.jsonl}"
read -r -a modes <<<"${MODES:-none:0 mtp:1 mtp:2 mtp:3 draft:1 draft:2 draft:3 lookup:2 lookup:4 lookup:8}"
common=(--threads "$threads" --device "${DEVICE:-cpu}")
[ -n "${MODEL:-}" ] && common+=(-m "$MODEL")
declare -A tokens secs drafted accepted
while IFS= read -r line; do
  prompt=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]))' "$line")
  for m in "${modes[@]}"; do
    mode=${m%%:*}; w=${m##*:}
    args=(--spec "$mode"); [ "$w" != 0 ] && args+=(--draft-width "$w")
    if [ -n "${DRAFT:-}" ] && { [ "$mode" = draft ] || [ "$mode" = assistant ]; }; then
      args+=(--draft-model "$DRAFT")
    fi
    out=$("$bin" generate -p "$prompt" -n "$n" "${common[@]}" --ignore-eos --json "${args[@]}" 2>/dev/null)
    read -r t s d a < <(python3 -c '
import json,sys; j=json.loads(sys.argv[1]); sp=j.get("spec",{})
print(len(j["ids"])-1, j["timings"]["decode_seconds"], sp.get("drafted",0), sp.get("accepted",0))' "$out")
    tokens[$m]=$(( ${tokens[$m]:-0} + t )); secs[$m]=$(python3 -c "print(${secs[$m]:-0} + $s)")
    drafted[$m]=$(( ${drafted[$m]:-0} + d )); accepted[$m]=$(( ${accepted[$m]:-0} + a ))
  done
done < <(head -n "${NPROMPTS:-100000}" "$prompts")
base=$(python3 -c "print(${tokens[none:0]} / ${secs[none:0]})")
printf "%-10s %9s %9s %11s\n" mode tok/s speedup acceptance
for m in "${modes[@]}"; do
  python3 -c "
t=${tokens[$m]}; s=${secs[$m]}; d=${drafted[$m]}; a=${accepted[$m]}
print('%-10s %9.1f %8.2fx %11s' % ('$m', t/s, t/s/$base, ('%.3f' % (a/d)) if d else '-'))"
done
