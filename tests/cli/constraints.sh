#!/usr/bin/env bash
# Constrained decoding from the command line, on the shipped model (a real tokenizer):
# --json-schema (inline and from a file), --regex, --grammar (GBNF) and --json-object outputs are
# checked by Python's own json/re modules; the same ids come out with every --spec mode at
# temperature 0 and seeded 0.8; `verify` under a constraint reports 0 diverged and 0 invalid;
# bad specs fail with an error naming the flag.
# Usage: bash constraints.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
ids() { sed -n 's/.*"ids":\[\([0-9,]*\)\].*/\1/p' "$1"; }
m="$src/models/lockstep-code-16m"
gen() { "$bin" generate -m "$m" --threads 1 --json "$@" 2>"$tmp/err" || fail "generate $*: $(cat "$tmp/err")"; }
# check FILE PYTHON-EXPR: evaluates the expression with `t` = the output text, `j` = the JSON.
check() {
  python3 - "$1" "$2" <<'PY' || fail "$2 is false for $(cat "$1")"
import json, re, sys
out = json.loads(open(sys.argv[1]).read())
t = out["text"]
assert out["finish_reason"] == "stop", out["finish_reason"]
assert out["constraint"] == "complete", out["constraint"]
j = None
try:
    j = json.loads(t)
except ValueError:
    pass
assert eval(sys.argv[2]), t
PY
}

schema='{"type":"object","properties":{"lang":{"enum":["python","rust","cpp"]},"stars":{"type":"integer","minimum":0,"maximum":99}},"required":["lang","stars"],"additionalProperties":false}'
gen -p "A repository, as JSON:" -n 60 --json-schema "$schema" > "$tmp/s.json"
check "$tmp/s.json" 'isinstance(j, dict) and set(j) == {"lang", "stars"} and j["lang"] in ("python", "rust", "cpp") and type(j["stars"]) is int and 0 <= j["stars"] <= 99'
echo "$schema" > "$tmp/schema.json"
gen -p "A repository, as JSON:" -n 60 --json-schema "$tmp/schema.json" > "$tmp/s2.json"
[[ "$(ids "$tmp/s2.json")" == "$(ids "$tmp/s.json")" ]] || fail "schema from a file gave other ids"

gen -p "def area(w, h):" -n 40 --regex '[0-9]{2,4}-[a-z]{3,6}' > "$tmp/r.json"
check "$tmp/r.json" 're.fullmatch(r"[0-9]{2,4}-[a-z]{3,6}", t) is not None'

printf 'root ::= answer " because " reason\nanswer ::= "yes" | "no"\nreason ::= [a-z]{1,8} (" " [a-z]{1,8}){0,3}\n' > "$tmp/g.gbnf"
gen -p "Is this code correct?" -n 40 --grammar "$tmp/g.gbnf" > "$tmp/g.json"
check "$tmp/g.json" 're.fullmatch(r"(yes|no) because [a-z]{1,8}( [a-z]{1,8}){0,3}", t) is not None'

gen -p "data = json.loads(" -n 100 --json-object --temp 0.8 --seed 1 > "$tmp/o.json"
check "$tmp/o.json" 'isinstance(j, dict) and len(j) >= 1'

# Speculation never changes constrained output (greedy and seeded sampling).
for sampling in "--temp 0" "--temp 0.8 --seed 21"; do
  # shellcheck disable=SC2086
  gen -p "A repository, as JSON:" -n 60 --json-schema "$schema" $sampling > "$tmp/base.json"
  for spec in "lookup --draft-width 4" "draft --draft-width 3" "mtp --draft-width 2"; do
    # shellcheck disable=SC2086
    gen -p "A repository, as JSON:" -n 60 --json-schema "$schema" $sampling --spec $spec > "$tmp/spec.json"
    [[ "$(ids "$tmp/spec.json")" == "$(ids "$tmp/base.json")" ]] ||
      fail "--spec $spec ($sampling) changed constrained ids: $(ids "$tmp/spec.json") vs $(ids "$tmp/base.json")"
  done
done

# The gate under a constraint: every case identical, every baseline valid.
printf '"def parse_args("\n"class Stack:\\n    def __init__(self):\\n"\n' > "$tmp/prompts.jsonl"
"$bin" verify -m "$m" --prompts "$tmp/prompts.jsonl" -n 24 --threads 1 --json-schema "$tmp/schema.json" > "$tmp/v.txt" 2>&1 ||
  fail "verify under --json-schema: $(cat "$tmp/v.txt")"
grep -q "^PASS: 60 identical, 0 diverged" "$tmp/v.txt" || fail "verify: $(cat "$tmp/v.txt")"
grep -q "^constraint: baselines [0-9]* complete, [0-9]* cut by -n, 0 invalid" "$tmp/v.txt" ||
  fail "verify: no constraint line: $(cat "$tmp/v.txt")"

# Bad specs: non-zero exit and an error that names the flag.
expect_error() {  # expect_error PATTERN ARGS...
  local pat="$1"; shift
  if "$bin" "$@" > "$tmp/out" 2> "$tmp/err"; then fail "$* succeeded"; fi
  grep -q -- "$pat" "$tmp/err" || fail "$*: stderr lacks '$pat': $(cat "$tmp/err")"
}
expect_error "--json-schema: json schema: not valid JSON" generate -m "$m" -p x -n 2 --json-schema '{"type":'
expect_error "--json-schema: .*unsupported keyword 'not'" generate -m "$m" -p x -n 2 --json-schema '{"type":"object","not":{}}'
expect_error "--json-schema: \"$tmp/none.json\" is neither" generate -m "$m" -p x -n 2 --json-schema "$tmp/none.json"
expect_error "--grammar: cannot read" generate -m "$m" -p x -n 2 --grammar "$tmp/none.gbnf"
printf 'root ::= "a\n' > "$tmp/bad.gbnf"
expect_error "--grammar: grammar line" generate -m "$m" -p x -n 2 --grammar "$tmp/bad.gbnf"
expect_error "--regex: regex at offset" generate -m "$m" -p x -n 2 --regex '(ab'
expect_error "at most one of --json-schema" generate -m "$m" -p x -n 2 --regex a --json-object
"$bin" make-random --like tiny-qwen3 -o "$tmp/random" --seed 3 2>/dev/null
expect_error "--json-object needs the model's tokenizer" generate -m "$tmp/random" --prompt-ids 1,2 -n 2 --json-object
echo "constraints.sh: ok"
