#!/usr/bin/env bash
# The README's main job: with no -m, generate uses the shipped model and writes Python.
# Usage: bash shipped_generate.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
out="$("$bin" generate -p "def parse_args(" -n 48 --threads 1 2>/dev/null)"
echo "$out"
[[ "$out" == *"parser"* || "$out" == *"argparse"* || "$out" == *"args"* ]] ||
  { echo "FAIL: the shipped model did not continue def parse_args( with argument code" >&2; exit 1; }
json="$("$bin" generate -p "def parse_args(" -n 16 --spec mtp --json 2>/dev/null)"
[[ "$json" == *'"spec":{'*'"acceptance"'* ]] || { echo "FAIL: no spec stats in $json" >&2; exit 1; }
echo "shipped_generate.sh: ok"
