#!/usr/bin/env bash
# Decode speed-up of each speculative mode over classic decode, measured in one run on the shipped
# target at temperature 0 over the committed prompt set (tests/gate/prompts.jsonl). Modes are
# interleaved prompt by prompt so machine noise spreads over all of them alike.
# Usage: tools/bench/spec_speedup.sh [threads=2] [tokens=128]
set -euo pipefail
cd "$(dirname "$0")/../.."
threads="${1:-2}"; n="${2:-128}"
bin=build/lockstep
modes=("none:0" "mtp:1" "mtp:2" "mtp:3" "draft:1" "draft:2" "draft:3" "lookup:2" "lookup:4" "lookup:8")
declare -A tokens secs drafted accepted
while IFS= read -r line; do
  prompt=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]))' "$line")
  for m in "${modes[@]}"; do
    mode=${m%%:*}; w=${m##*:}
    args=(--spec "$mode"); [ "$w" != 0 ] && args+=(--draft-width "$w")
    out=$("$bin" generate -p "$prompt" -n "$n" --threads "$threads" --ignore-eos --json "${args[@]}" 2>/dev/null)
    read -r t s d a < <(python3 -c '
import json,sys; j=json.loads(sys.argv[1]); sp=j.get("spec",{})
print(len(j["ids"])-1, j["timings"]["decode_seconds"], sp.get("drafted",0), sp.get("accepted",0))' "$out")
    tokens[$m]=$(( ${tokens[$m]:-0} + t )); secs[$m]=$(python3 -c "print(${secs[$m]:-0} + $s)")
    drafted[$m]=$(( ${drafted[$m]:-0} + d )); accepted[$m]=$(( ${accepted[$m]:-0} + a ))
  done
done < tests/gate/prompts.jsonl
base=$(python3 -c "print(${tokens[none:0]} / ${secs[none:0]})")
printf "%-10s %9s %9s %11s\n" mode tok/s speedup acceptance
for m in "${modes[@]}"; do
  python3 -c "
t=${tokens[$m]}; s=${secs[$m]}; d=${drafted[$m]}; a=${accepted[$m]}
print('%-10s %9.1f %8.2fx %11s' % ('$m', t/s, t/s/$base, ('%.3f' % (a/d)) if d else '-'))"
done
