#!/usr/bin/env bash
# Server load run (not a CI test): starts `lockstep serve` on loopback, measures aggregate tokens/s
# and time to first token at 1, 4, 16 and 64 concurrent streaming clients, then 64 clients for two
# minutes checking that no response fails or is truncated and that RSS stays flat.
#   usage: tools/load/run.sh [lockstep-binary] [extra serve flags...]
#   env:   LEVELS=1,4,16,64 LEVEL_SECONDS=20 SOAK_CLIENTS=64 SOAK_SECONDS=120 MAX_TOKENS=128
#          THREADS=(all cores) PARALLEL=64
# Prints the JSON summary on stdout (OUT=file also keeps a copy).
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${1:-$src/build/lockstep}"
shift || true
tmp="$(mktemp -d)"
server_pid=""
trap '[[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
source "$src/tests/server/server_lib.sh"

threads="${THREADS:-$(nproc)}"
parallel="${PARALLEL:-64}"
start_server server --threads "$threads" --parallel "$parallel" --max-queue 256 "$@"
echo "load: $(head -1 "$tmp/server.log")" >&2
echo "load: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
rc=0
node "$src/tools/load/load.mjs" "$server_url" "$server_pid" "$src" "${LEVELS:-1,4,16,64}" \
  "${LEVEL_SECONDS:-20}" "${SOAK_CLIENTS:-64}" "${SOAK_SECONDS:-120}" "${MAX_TOKENS:-128}" \
  >"$tmp/summary.json" || rc=$?
cp "$tmp/summary.json" "${OUT:-$tmp/keep.json}" 2>/dev/null || true
cat "$tmp/summary.json"
curl -s "$server_url/metrics" | grep -E '^lockstep_(forward_calls|batch_rows|requests_(total|finished|cancelled|rejected)|generated)' >&2
stop_server "$server_pid" || { echo "load: server exit status $?" >&2; rc=1; }
server_pid=""
[[ $rc == 0 ]] && echo "load: PASS (no failed or truncated responses, RSS flat)" >&2 || echo "load: FAIL" >&2
exit $rc
