#!/usr/bin/env bash
# The server's abuse suite (tests/server/abuse.mjs): every hole of issue 20 that is closed, as a
# bounded check against a real `lockstep serve` on loopback, plus the cases that always passed.
# Both servers must survive it and exit 0 on SIGTERM.
# Usage: bash server_abuse.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
src="$(cd "$2" && pwd)"
tmp="$(mktemp -d)"
a_pid="" b_pid=""
trap 'for p in $a_pid $b_pid; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$src/tests/server/server_lib.sh"
command -v node >/dev/null || fail "node not found; run scripts/setup.sh"

key="abuse-key-$RANDOM"
start_server a --threads 1 --parallel 4 --max-queue 4 --api-key "$key"
start_server b --threads 1 --parallel 4 --max-queue 0 --ctx-size 256 --no-prefix-cache
node "$src/tests/server/abuse.mjs" "$a_url" "$key" "$b_url" || {
  tail -n 20 "$tmp/a.log" "$tmp/b.log" >&2
  fail "abuse checks failed"
}
for name in a b; do
  pid_var="${name}_pid"
  pid=${!pid_var}
  kill -0 "$pid" 2>/dev/null || fail "server $name died during the suite"
  start=$(date +%s%N)
  rc=0
  stop_server "$pid" || rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  printf -v "$pid_var" '%s' ""
  [[ $rc == 0 ]] || { tail -5 "$tmp/$name.log" >&2; fail "server $name exited with $rc after SIGTERM"; }
  (( ms < 5000 )) || fail "server $name took $ms ms to exit after SIGTERM with no request in flight"
done
echo "server_abuse: ok"
