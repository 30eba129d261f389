#!/usr/bin/env bash
# Constrained vs unconstrained decode speed (docs/constraints.md, "Speed"): `lockstep bench` runs
# alternately without and with a constraint, `pairs` times; the ratio reported is the median over
# pairs of (constrained / unconstrained decode tok/s), each side a median of 3 repetitions after a
# warm-up. Pairing keeps a shared machine's drift out of the ratio.
#   usage: tools/bench/constrained_decode.sh [lockstep-binary] [pairs] [-- extra bench flags]
#   default constraint: --json-schema tools/bench/constrained_schema.json (an array of >= 12 file
#   records, so the output runs to -n); pass e.g. "-- --json-object" or "-- --regex ..." instead.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${1:-$here/build/lockstep}"
pairs="${2:-6}"
shift $(( $# >= 2 ? 2 : $# ))
[[ "${1:-}" == "--" ]] && shift
constraint=("$@")
[[ ${#constraint[@]} -gt 0 ]] || constraint=(--json-schema "$here/tools/bench/constrained_schema.json")
flags=(-p 64 -n 256 -r 3 --threads 1 --json ${LOCKSTEP_BENCH_FLAGS:-})
tok_s() { python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["decode"]["tok_s"]["median"], j["decode"]["decoded_tokens_median"])'; }
plain=(); constrained=()
for ((i = 0; i < pairs; i++)); do
  # Which side runs first alternates too.
  if ((i % 2 == 0)); then
    read -r a _ < <("$bin" bench "${flags[@]}" 2>/dev/null | tok_s)
    read -r b n < <("$bin" bench "${flags[@]}" "${constraint[@]}" 2>/dev/null | tok_s)
  else
    read -r b n < <("$bin" bench "${flags[@]}" "${constraint[@]}" 2>/dev/null | tok_s)
    read -r a _ < <("$bin" bench "${flags[@]}" 2>/dev/null | tok_s)
  fi
  plain+=("$a"); constrained+=("$b")
  printf 'pair %d: unconstrained %.1f tok/s, constrained %.1f tok/s (%s tokens)\n' "$i" "$a" "$b" "$n"
done
python3 - "${plain[*]}" "${constrained[*]}" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
ma, mb = statistics.median(a), statistics.median(b)
r = statistics.median(y / x for x, y in zip(a, b))
print(f"median decode: unconstrained {ma:.1f} tok/s, constrained {mb:.1f} tok/s; "
      f"median pair ratio {r:.3f} (range {min(y / x for x, y in zip(a, b)):.3f}-"
      f"{max(y / x for x, y in zip(a, b)):.3f})")
PY
