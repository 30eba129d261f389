#!/usr/bin/env bash
# CPU speed of the two quantized dot products (--quant-dot float | int8) against BF16, on one
# random Qwen3-0.6B-shaped checkpoint quantized to 4 and 8 bits (group 64). Engines run
# interleaved, round by round (bf16, q4 float, q4 int8, q8 float, q8 int8, then again), so the
# noise of a shared machine spreads over all of them alike; each run's load average is logged.
#
# Usage: tools/bench/quant_dot.sh [workdir=/tmp/quant-dot] [rounds=3] [threads=all cores]
#                                 [prompt=64] [tokens=64] [reps=3]
#        LOCKSTEP_BIN=path overrides build/lockstep; ENGINES="q4:int8 q4:float ..." the engines.
# Made in WORKDIR (kept; an existing checkpoint is reused):
#   bf16/      lockstep make-random --like qwen3-0.6b --dtype bf16
#   q4/, q8/   lockstep quantize --bits 4|8 --group-size 64 (BF16 scales and biases)
# Per run: lockstep bench -m DIR --threads T -p P -n N -r REPS --json [--quant-dot MODE]; the
# median prefill and decode tok/s are kept (WORKDIR/runs.jsonl, rewritten each call). Summary:
# the median over rounds, then the ratios int8 / float and each against BF16 (ratio of medians,
# and per round). Results: docs/benchmarks.md, "Integer-dot quantized linears".
set -euo pipefail
cd "$(dirname "$0")/../.."
work="${1:-/tmp/quant-dot}"; rounds="${2:-3}"; threads="${3:-$(nproc)}"
p="${4:-64}"; n="${5:-64}"; reps="${6:-3}"
bin="${LOCKSTEP_BIN:-build/lockstep}"
mkdir -p "$work"
[ -f "$work/bf16/model.safetensors" ] ||
  "$bin" make-random --like qwen3-0.6b -o "$work/bf16" --dtype bf16
for b in 4 8; do
  [ -f "$work/q$b/model.safetensors" ] ||
    "$bin" quantize -m "$work/bf16" -o "$work/q$b" --bits "$b" --group-size 64
done

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs, $threads threads"
read -r -a runs <<< "${ENGINES:-bf16:- q4:float q4:int8 q8:float q8:int8}"
log="$work/runs.jsonl"; : > "$log"
for r in $(seq 1 "$rounds"); do
  for e in "${runs[@]}"; do
    model=${e%%:*}; mode=${e##*:}
    flags=(); [ "$mode" = - ] || flags=(--quant-dot "$mode")
    load=$(cut -d' ' -f1 /proc/loadavg)
    out=$("$bin" bench -m "$work/$model" --threads "$threads" -p "$p" -n "$n" -r "$reps" --json \
          "${flags[@]}" 2>/dev/null)
    python3 - "$out" "$r" "$e" "$load" <<'EOF' | tee -a "$log"
import json, sys
j = json.loads(sys.argv[1])
print(json.dumps({"round": int(sys.argv[2]), "engine": sys.argv[3], "load": float(sys.argv[4]),
                  "prefill": j["prefill"]["tok_s"]["median"],
                  "decode": j["decode"]["tok_s"]["median"],
                  "decode_floor_fraction": j["decode"]["fraction_of_bandwidth_floor"]}))
EOF
  done
done

python3 - "$log" <<'EOF'
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows: by.setdefault(r["engine"], {})[r["round"]] = r
loads = [r["load"] for r in rows]
print("\nload average during the runs: %.2f to %.2f" % (min(loads), max(loads)))
for phase in ("decode", "prefill"):
    med = {e: st.median(v[k][phase] for k in v) for e, v in by.items()}
    print("\n%s tok/s, median over rounds (per round):" % phase)
    for e, m in med.items():
        print("  %-10s %8.2f   %s" % (e, m, " ".join("%.2f" % by[e][k][phase] for k in sorted(by[e]))))
    print("%s ratios (ratio of medians; per round):" % phase)
    for a, b in [("q4:int8", "q4:float"), ("q8:int8", "q8:float"), ("q4:int8", "bf16:-"),
                 ("q4:float", "bf16:-"), ("q8:int8", "bf16:-"), ("q8:float", "bf16:-")]:
        if a not in by or b not in by: continue
        per = [by[a][k][phase] / by[b][k][phase] for k in sorted(by[a]) if k in by[b]]
        print("  %-9s / %-9s %5.2f   %s" % (a, b, med[a] / med[b], " ".join("%.2f" % x for x in per)))
EOF
