#!/usr/bin/env bash
# The generation gate in CI: on the shipped target (with its MTP head) and the shipped draft
# model, every committed prompt (tests/gate/prompts.jsonl, 48 tokens each; `verify` with a larger -n for longer runs) must give classic
# decode's exact tokens under chunked prefill, batching, and lookup / draft / MTP speculation at
# every width, at temperature 0 and seeded 0.8. verify exits 1 on any difference.
# Usage: bash gate.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
src="$2"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
"$bin" verify -m "$src/models/lockstep-code-16m" --draft-model "$src/models/lockstep-draft-3m" \
  --prompts "$src/tests/gate/prompts.jsonl" -n 48 --threads 1 | tee "$out"
grep -q "^PASS: 780 identical, 0 diverged" "$out" || { echo "FAIL: gate did not run every case" >&2; exit 1; }
for mode in batched classic-chunked draft/w4 lookup/w8 mtp/w4; do
  grep -q "^$mode " "$out" || { echo "FAIL: mode $mode missing from the gate" >&2; exit 1; }
done
echo "gate.sh: ok"
