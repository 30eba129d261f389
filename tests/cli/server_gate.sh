#!/usr/bin/env bash
# The server's generation gate (tests/server/gate.mjs): 32 concurrent requests through the npm
# `openai` client against `lockstep serve` with a small prefill chunk and 8 parallel sequences;
# every response's text must equal `lockstep generate`'s for the same request alone.
# Usage: bash server_gate.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
src="$(cd "$2" && pwd)"
tmp="$(mktemp -d)"
server_pid=""
trap '[[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$src/tests/server/server_lib.sh"

cache=$(bash "$src/tests/server/fetch_openai.sh" "$src")
start_server server --threads 1 --parallel 8 --prefill-chunk 16 --prefix-cache-entries 128
node "$src/tests/server/gate.mjs" "$cache" "$server_url" "$bin" "$src" || {
  tail -20 "$tmp/server.log" >&2
  fail "server output differs from lockstep generate"
}
rc=0
stop_server "$server_pid" || rc=$?
server_pid=""
[[ $rc == 0 ]] || fail "server exited with $rc after SIGTERM"
echo "server_gate: ok"
