# Shell helpers for the server tests (sourced): start `lockstep serve` on a free port, wait for
# /health, stop it. The caller sets $bin and $tmp.

# start_server NAME [serve flags...]: sets ${NAME}_pid and ${NAME}_url; the log is $tmp/NAME.log.
start_server() {
  local name=$1
  shift
  : >"$tmp/$name.log"  # exists before the first read below, however the fork is scheduled
  "$bin" serve --port 0 "$@" >>"$tmp/$name.log" 2>&1 &
  local pid=$! port=""
  for _ in $(seq 1 300); do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$tmp/$name.log")
    [[ -n "$port" ]] && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/$name.log" >&2; echo "FAIL: server $name exited" >&2; exit 1; }
    sleep 0.1
  done
  [[ -n "$port" ]] || { cat "$tmp/$name.log" >&2; echo "FAIL: server $name did not start" >&2; exit 1; }
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    sleep 0.1
  done
  printf -v "${name}_pid" '%s' "$pid"
  printf -v "${name}_url" '%s' "http://127.0.0.1:$port"
}

# stop_server PID: SIGTERM, then wait; prints nothing, returns the exit status.
stop_server() {
  kill -TERM "$1" 2>/dev/null || true
  local rc=0
  wait "$1" || rc=$?
  return $rc
}
