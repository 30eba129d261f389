#!/usr/bin/env bash
# The benchmarks of the serving path, run as a user would on the shipped model: bench-serve against
# a live `lockstep serve` (two concurrency levels: every request complete, exact token counts, the
# identity check all identical, the engine's step breakdown present), its failure reporting (a
# server too small for the concurrency answers 503s: exit 1, the first error named), a clear error
# for an unreachable URL; and `bench --batch` (the engine's batched decode step without HTTP).
# Usage: bash bench_serve.sh <lockstep-binary> <source-dir>
set -euo pipefail
bin="$1"
src="$(cd "$2" && pwd)"
tmp="$(mktemp -d)"
server_pid=""
small_pid=""
trap '[[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null; [[ -n "$small_pid" ]] && kill "$small_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$src/tests/server/server_lib.sh"
model="$src/models/lockstep-code-16m"
# check FILE PYTHON-EXPR: the expression, with `j` = the JSON in FILE, must hold.
check() {
  python3 - "$1" "$2" <<'PY' || fail "$2 is false for $(cat "$1")"
import json, sys
j = json.load(open(sys.argv[1]))
assert eval(sys.argv[2])
PY
}

start_server server -m "$model" --threads 2 --parallel 4
"$bin" bench-serve --url "$server_url" --concurrency 1,4 --input-len 24 --output-len 8 --requests 8 --json \
  > "$tmp/run.json" 2> "$tmp/run.err" || fail "bench-serve exited $?: $(cat "$tmp/run.err") $(cat "$tmp/run.json")"
j="$tmp/run.json"
check "$j" 'j["passed"] is True and j["input_len"] == 24 and j["output_len"] == 8'
check "$j" '[L["concurrency"] for L in j["levels"]] == [1, 4]'
check "$j" 'all(L["requests"] == 8 and L["succeeded"] == 8 and L["failed"] == 0 and L["first_error"] is None for L in j["levels"])'
check "$j" 'all(L["completion_tokens"] == 8 * 8 and L["prompt_tokens"] == 8 * 24 for L in j["levels"])'
check "$j" 'all(L["output_tok_s"] > 0 and L["request_s"] > 0 and L["wall_s"] > 0 for L in j["levels"])'
check "$j" 'all(0 < L["ttft_ms"]["p50"] <= L["ttft_ms"]["p99"] and 0 < L["itl_ms"]["p50"] <= L["itl_ms"]["p99"] for L in j["levels"])'
check "$j" 'all(L["e2e_ms"]["p50"] >= L["ttft_ms"]["p50"] and L["itl_tokens_counted"] == "usage_per_chunk" for L in j["levels"])'
check "$j" 'j["identity"]["concurrency"] == 4 and j["identity"]["checked"] == 8 and j["identity"]["identical"] == 8'
check "$j" 'all(L["steps"]["steps"] > 0 and L["steps"]["rows_per_step"] >= 1 and L["steps"]["sequences_per_step"] >= 1 for L in j["levels"])'
check "$j" 'all(list(L["steps"]["ms_per_step"]) == ["admit", "build", "forward", "consume", "retire", "total"] for L in j["levels"])'
check "$j" 'all(L["steps"]["ms_per_step"]["forward"] > 0 and L["steps"]["ms_per_step"]["total"] > 0 and L["steps"]["http_stream_s"] > 0 for L in j["levels"])'
grep -q "identity: rerunning 8 requests of concurrency 4" "$tmp/run.err" || fail "no progress on stderr: $(cat "$tmp/run.err")"

# The table form says the same.
"$bin" bench-serve --url "$server_url" --concurrency 2 --input-len 16 --output-len 4 --requests 4 \
  --check-identity 2 > "$tmp/table.txt" 2>/dev/null || fail "bench-serve (table) failed: $(cat "$tmp/table.txt")"
grep -q "identity: 2/2 identical" "$tmp/table.txt" || fail "table: $(cat "$tmp/table.txt")"
grep -q "forward" "$tmp/table.txt" || fail "table has no step breakdown: $(cat "$tmp/table.txt")"

# The fields bench-serve reads from the server.
curl -sf "$server_url/v1/models" > "$tmp/models.json"
check "$tmp/models.json" 'j["data"][0]["vocab_size"] > 0 and j["data"][0]["max_model_len"] == j["data"][0]["context_length"]'
stop_server "$server_pid" || fail "server exit status $?"
server_pid=""

# Unreachable: the port the server just left.
if "$bin" bench-serve --url "$server_url" --concurrency 1 --requests 1 > "$tmp/out" 2> "$tmp/err"; then
  fail "bench-serve succeeded against a stopped server"
fi
grep -q "cannot connect to $server_url" "$tmp/err" || fail "unclear error for an unreachable server: $(cat "$tmp/err")"

# Failures are counted, named and fail the run: one sequence and no queue, four clients.
start_server small -m "$model" --threads 2 --parallel 1 --max-queue 0
rc=0
"$bin" bench-serve --url "$small_url" --concurrency 4 --input-len 24 --output-len 32 --requests 8 --warmup 0 \
  --check-identity 0 --json > "$tmp/fail.json" 2>/dev/null || rc=$?
[[ $rc == 1 ]] || fail "bench-serve exited $rc with 503s (expected 1): $(cat "$tmp/fail.json")"
check "$tmp/fail.json" 'j["passed"] is False and j["levels"][0]["failed"] > 0 and "HTTP 503" in j["levels"][0]["first_error"]'
stop_server "$small_pid" || fail "small server exit status $?"
small_pid=""

# bench --batch: a machine figure written beforehand (so nothing is measured here) sets the floor.
cpu=$(grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: //' || true)
mkdir -p "$tmp/cache/lockstep"
python3 - "$tmp/cache/lockstep/machine.json" "${cpu:-unknown}" <<'PY'
import json, sys
m = {"cpu": sys.argv[2], "threads": 1, "method": 3,  # kernels::kPeakMethod
     "read_gbps": {"median": 10.0, "spread": 0.0},
     "fma_gflops": {"median": 100.0, "spread": 0.0}}
json.dump({"1": m}, open(sys.argv[1], "w"))
PY
XDG_CACHE_HOME="$tmp/cache" "$bin" bench -m "$model" --batch 3 -p 8 -n 4 -r 1 --threads 1 --json \
  > "$tmp/batch.json" 2> "$tmp/batch.err" || fail "bench --batch failed: $(cat "$tmp/batch.err")"
b="$tmp/batch.json"
check "$b" 'j["batch"] == 3 and j["prompt_tokens"] == 8 and j["gen_tokens"] == 4 and j["decode"]["steps"] == 4'
check "$b" '0 < j["decode_step_ms"]["min"] <= j["decode_step_ms"]["median"] <= j["decode_step_ms"]["max"]'
check "$b" 'abs(j["decode"]["aggregate_tok_s"] - 3000 / j["decode_step_ms"]["mean"]) < 1e-6 * j["decode"]["aggregate_tok_s"]'
check "$b" 'abs(j["decode"]["fraction_of_bandwidth_floor"] - j["decode"]["gbps"] / 10.0) < 1e-9 and j["decode"]["floor_tok_s"] > 0'
check "$b" 'j["workload"]["decode_bytes_per_step"] > 0 and j["prefill"]["tok_s"] > 0'
check "$b" '"routed_expert_share" not in j["workload"]'  # dense: every weight read once
# A mixture of experts: its routed experts counted at the share 3 uniformly routed tokens reach.
"$bin" make-random --like tiny-qwen3-moe -o "$tmp/moe" --seed 3 > /dev/null 2>&1 || fail "make-random tiny-qwen3-moe failed"
XDG_CACHE_HOME="$tmp/cache" "$bin" bench -m "$tmp/moe" --batch 3 -p 8 -n 2 -r 1 --threads 1 --json \
  > "$tmp/moe.json" 2> "$tmp/batch.err" || fail "bench --batch (MoE) failed: $(cat "$tmp/batch.err")"
python3 - "$tmp/moe.json" "$tmp/moe/config.json" <<'PY' || fail "MoE routed share: $(cat "$tmp/moe.json")"
import json, sys
j, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
share = c["num_experts_per_tok"] / c["num_experts"]
assert abs(j["workload"]["routed_expert_share"] - (1 - (1 - share) ** 3)) < 1e-12
PY
if "$bin" bench -m "$model" --batch 2 --spec mtp -p 8 -n 2 > "$tmp/out" 2> "$tmp/err"; then fail "--batch with --spec ran"; fi
grep -q -- "--batch" "$tmp/err" || fail "--batch --spec: unclear error: $(cat "$tmp/err")"
echo "bench_serve.sh: ok"
