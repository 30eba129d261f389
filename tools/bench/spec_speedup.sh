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
declare -A tokens secs drafted accepted same
# Every mode's generated ids are compared with classic decode's for the same prompt (none:0 runs
# first): a speed-up only counts with the same tokens, and the table says how many prompts had them.
base_mode=none:0
[[ " ${modes[*]} " == *" $base_mode "* ]] || { echo "spec_speedup.sh: MODES must include none:0" >&2; exit 2; }
modes=("$base_mode" $(printf '%s\n' "${modes[@]}" | grep -vx "$base_mode" || true))
nprompt=0
while IFS= read -r line; do
  nprompt=$((nprompt + 1))
  prompt=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]))' "$line")
  for m in "${modes[@]}"; do
    mode=${m%%:*}; w=${m##*:}
    args=(--spec "$mode"); [ "$w" != 0 ] && args+=(--draft-width "$w")
    if [ -n "${DRAFT:-}" ] && { [ "$mode" = draft ] || [ "$mode" = assistant ]; }; then
      args+=(--draft-model "$DRAFT")
    fi
    out=$("$bin" generate -p "$prompt" -n "$n" "${common[@]}" --ignore-eos --json "${args[@]}" 2>/dev/null)
    read -r t s d a h < <(python3 -c '
import hashlib,json,sys; j=json.loads(sys.argv[1]); sp=j.get("spec",{})
print(len(j["ids"])-1, j["timings"]["decode_seconds"], sp.get("drafted",0), sp.get("accepted",0),
      hashlib.sha256(json.dumps(j["ids"]).encode()).hexdigest()[:16])' "$out")
    [ "$m" = "$base_mode" ] && base_ids=$h
    [ "$h" = "$base_ids" ] && same[$m]=$(( ${same[$m]:-0} + 1 ))
    tokens[$m]=$(( ${tokens[$m]:-0} + t )); secs[$m]=$(python3 -c "print(${secs[$m]:-0} + $s)")
    drafted[$m]=$(( ${drafted[$m]:-0} + d )); accepted[$m]=$(( ${accepted[$m]:-0} + a ))
  done
done < <(head -n "${NPROMPTS:-100000}" "$prompts")
base=$(python3 -c "print(${tokens[none:0]} / ${secs[none:0]})")
printf "%-10s %9s %9s %11s %14s\n" mode tok/s speedup acceptance "ids = classic"
for m in "${modes[@]}"; do
  python3 -c "
t=${tokens[$m]}; s=${secs[$m]}; d=${drafted[$m]}; a=${accepted[$m]}
print('%-10s %9.1f %8.2fx %11s %14s' % ('$m', t/s, t/s/$base, ('%.3f' % (a/d)) if d else '-', '${same[$m]:-0}/$nprompt'))"
done
