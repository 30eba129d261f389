#!/usr/bin/env bash
# lockstep chat: a piped conversation of two turns and /exit; the first reply must be exactly the
# server's /v1/chat/completions answer to the same message (same template, same engine).
# Usage: bash server_chat.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
src="$(cd "$2" && pwd)"
tmp="$(mktemp -d)"
server_pid=""
trap '[[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$src/tests/server/server_lib.sh"

printf 'Write a function that adds two numbers.\n' | "$bin" chat --threads 1 -n 24 >"$tmp/one.txt" 2>"$tmp/one.err" ||
  fail "chat exited non-zero: $(cat "$tmp/one.err")"
printf 'hello\nand now a class\n/exit\nnot read\n' | "$bin" chat --threads 1 -n 12 --system "You write Python." \
  >"$tmp/two.txt" 2>"$tmp/two.err" || fail "chat (two turns) exited non-zero: $(cat "$tmp/two.err")"
[[ $(grep -c '\[max tokens\]' "$tmp/two.txt") == 2 ]] || fail "expected two replies of 12 tokens: $(cat "$tmp/two.txt")"

start_server server --threads 1 --parallel 2
curl -sf "$server_url/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model": "default", "max_tokens": 24, "messages": [{"role": "user", "content": "Write a function that adds two numbers."}]}' \
  >"$tmp/server.json" || fail "server chat request failed"
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const c = r.choices[0];
  process.stdout.write(c.message.content + (c.finish_reason === "length" ? " [max tokens]" : "") + "\n");
' "$tmp/server.json" >"$tmp/expected.txt"
cmp -s "$tmp/one.txt" "$tmp/expected.txt" || fail "chat reply differs from the server's:
chat:   $(cat "$tmp/one.txt")
server: $(cat "$tmp/expected.txt")"
stop_server "$server_pid" || fail "server exit status $?"
server_pid=""
echo "server_chat: ok"
