#!/usr/bin/env bash
# The server's API contract (tests/server/api.mjs): bad input gets a 4xx naming the field and the
# server keeps serving; auth; a full queue answers 503 with Retry-After; a disconnect mid-stream
# frees the sequence; SIGTERM finishes the in-flight stream and the process exits 0.
# Usage: bash server_api.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
src="$(cd "$2" && pwd)"
tmp="$(mktemp -d)"
server_pid=""
trap '[[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$src/tests/server/server_lib.sh"

cache=$(bash "$src/tests/server/fetch_openai.sh" "$src")
key="test-key-$RANDOM"
start_server server --threads 1 --parallel 2 --max-queue 2 --prefill-chunk 16 --no-prefix-cache --api-key "$key"
# The flag given wins; the step budget the command line leaves out is the CPU's default.
grep -q "step tokens 512, prefill chunk 16," "$tmp/server.log" ||
  fail "the startup line does not show step tokens 512 and prefill chunk 16: $(grep serving "$tmp/server.log")"
node "$src/tests/server/api.mjs" "$cache" "$server_url" "$key" "$server_pid" || {
  tail -20 "$tmp/server.log" >&2
  fail "server API checks failed"
}
# api.mjs sent SIGTERM mid-stream; the server must finish and exit 0 on its own.
for _ in $(seq 1 300); do
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$server_pid" 2>/dev/null && fail "server still running 30 s after SIGTERM"
rc=0
wait "$server_pid" || rc=$?
server_pid=""
[[ $rc == 0 ]] || { tail -5 "$tmp/server.log" >&2; fail "server exited with $rc after SIGTERM"; }
grep -q "SIGTERM: finishing in-flight requests" "$tmp/server.log" || fail "no drain message in the log"
echo "server_api: ok"
