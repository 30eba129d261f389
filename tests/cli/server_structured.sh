#!/usr/bin/env bash
# Structured output and reasoning over HTTP (tests/server/structured.mjs): response_format
# answers satisfy their schema and are identical under speculation, streaming and batching; bad
# schemas are 400s naming the field. A second server runs the shipped model with a template that
# opens <think>, for reasoning_content and the reasoning budget (tests/server/reasoning_budget.mjs;
# a third one with --reasoning-budget 3 for the server default).
# Usage: bash server_structured.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
src="$(cd "$2" && pwd)"
tmp="$(mktemp -d)"
server_pid=""
think_pid=""
thinkb_pid=""
trap 'for p in "$server_pid" "$think_pid" "$thinkb_pid"; do [[ -n "$p" ]] && kill "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$src/tests/server/server_lib.sh"

model="$src/models/lockstep-code-16m"
mkdir "$tmp/thinking"
for f in "$model"/*; do ln -s "$f" "$tmp/thinking/"; done
rm "$tmp/thinking/tokenizer_config.json"
python3 - "$model/tokenizer_config.json" "$tmp/thinking/tokenizer_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["chat_template"] = c["chat_template"].replace("'<|im_start|>assistant\\n'", "'<|im_start|>assistant\\n<think>\\n'")
assert "<think>" in c["chat_template"], "the template's generation prompt was not found"
json.dump(c, open(sys.argv[2], "w"))
PY

cache=$(bash "$src/tests/server/fetch_openai.sh" "$src")
start_server server --threads 1 --parallel 8 --prefill-chunk 16
start_server think -m "$tmp/thinking" --threads 1 --parallel 2 --draft-model "$src/models/lockstep-draft-3m"
start_server thinkb -m "$tmp/thinking" --threads 1 --parallel 1 --reasoning-budget 3
node "$src/tests/server/structured.mjs" "$cache" "$server_url" "$think_url" "$bin" || {
  tail -n 20 "$tmp/server.log" "$tmp/think.log" >&2
  fail "structured output checks failed"
}
node "$src/tests/server/reasoning_budget.mjs" "$cache" "$think_url" "$thinkb_url" || {
  tail -n 20 "$tmp/think.log" "$tmp/thinkb.log" >&2
  fail "reasoning budget checks failed"
}
for pid in "$server_pid" "$think_pid" "$thinkb_pid"; do
  rc=0
  stop_server "$pid" || rc=$?
  [[ $rc == 0 ]] || fail "server exited with $rc after SIGTERM"
done
server_pid=""
think_pid=""
thinkb_pid=""
echo "server_structured: ok"
