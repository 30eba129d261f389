#!/usr/bin/env bash
# The README's main job: with no -m, generate uses the shipped model and writes Python; bench
# --spec draft finds the shipped draft too.
# Usage: bash shipped_generate.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
out="$("$bin" generate -p "def parse_args(" -n 48 --threads 1 2>/dev/null)"
echo "$out"
[[ "$out" == *"parser"* || "$out" == *"argparse"* || "$out" == *"args"* ]] ||
  { echo "FAIL: the shipped model did not continue def parse_args( with argument code" >&2; exit 1; }
json="$("$bin" generate -p "def parse_args(" -n 16 --spec mtp --json 2>/dev/null)"
[[ "$json" == *'"spec":{'*'"acceptance"'* ]] || { echo "FAIL: no spec stats in $json" >&2; exit 1; }
# bench --spec draft with the shipped target takes the shipped draft, as generate does.
bench="$("$bin" bench --spec draft -p 16 -n 8 -r 1 --threads 1 2>&1)" ||
  { echo "FAIL: bench --spec draft with the shipped target: $bench" >&2; exit 1; }
[[ "$bench" == *"spec draft"* && "$bench" == *decode* ]] ||
  { echo "FAIL: no draft-speculation bench in: $bench" >&2; exit 1; }
echo "shipped_generate.sh: ok"
