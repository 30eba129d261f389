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
trap 'for p in $a_pid $b_pid; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
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
# Row 5: SIGTERM with an idle keep-alive connection and a client trickling its head: both are
# closed at once, the process exits within 2 s.
port_a=${a_url##*:}
exec 3<>"/dev/tcp/127.0.0.1/$port_a"
exec 4<>"/dev/tcp/127.0.0.1/$port_a"
printf 'GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n' "$key" >&3
read -r -t 5 status_line <&3 || fail "no answer on the keep-alive connection"
[[ $status_line == *" 200 "* ]] || fail "keep-alive connection: $status_line"
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\n' >&4
( for c in X - S l o w : ' ' 1; do sleep 0.5; printf '%s' "$c" >&4 2>/dev/null || exit 0; done ) &
trickle=$!
start=$(date +%s%N)
stop_server "$a_pid" || fail "server a exited non-zero after SIGTERM with idle connections"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
a_pid=""
kill "$trickle" 2>/dev/null || true
exec 3<&- 4<&-
(( ms < 2000 )) || fail "SIGTERM with an idle and a trickling connection: exit after $ms ms"
echo "server_abuse: SIGTERM with an idle and a trickling connection exited in $ms ms"

for name in b; do
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
