#!/usr/bin/env bash
# Where CPU decode time goes on this machine, and lockstep against llama.cpp on the same weights:
# a random Qwen3-0.6B-shaped checkpoint in BF16, lockstep 4-bit / 8-bit (group 64) against
# llama.cpp Q4_0 --pure / Q8_0 of the same BF16 weights, at each thread count, alternated engine
# by engine and round by round. Besides the defaults, lockstep runs with the CPU tuning choices of
# src/kernels/cpu/cpu_tuning.h (one-row tile width; software prefetch distance and locality;
# pinned to the first T cores), so one call shows which of them moves decode on this CPU. Made for
# the GPU machine's 16-core host (a compiler and CMake, no network); runs anywhere with them.
#   tools/bench/cpu_decode_study.sh LLAMA_SRC.tar.xz [threads="2 16"] [rounds=2]
#   LLAMA_BUILD=DIR reuses an earlier llama.cpp build (DIR/bin) instead of building one.
#   STUDY=full adds the prefetch distance / locality / pinning variants at the first thread count.
#   LOCKSTEP_BIN (default: the packed engine's run-lockstep, else build/lockstep); OUT: logs.
#   LOCKSTEP_BIN_B: a second lockstep binary (e.g. a branch's CPU build), run beside the first on
#   every model as "lockstep-KIND-b" (an A/B of a kernel change in the same rounds).
#   VARIANTS: the tuning variants run per model (default "rows1 rows1-pf0 rows8"; " ": none).
# llama.cpp is not part of this repository (its source: npm's node-llama-cpp,
# llama/gitRelease.bundle). Prints one line per run and the medians per configuration.
set -euo pipefail
cd "$(dirname "$0")/../.."
src_tar="${1:?usage: $0 LLAMA_SRC.tar.xz [threads] [rounds]}"
threads="${2:-2 $(nproc)}"; rounds="${3:-2}"
out="${OUT:-/tmp/cpu-decode-study}"; work=/tmp/cpu-decode-study-work
mkdir -p "$out" "$work"
root="$(pwd)"
. tools/cuda/engine_env.sh  # the packed engine as $bin, when one travelled
[ -x "${bin:-}" ] || bin=build/lockstep
bin="${LOCKSTEP_BIN:-$bin}"
{
  lscpu | grep -E "^Model name|^CPU\(s\)|^Thread|^L2|^L3|^NUMA node\(s\)"
  echo "flags: $(grep -m1 -o -w -E 'avx512f|avx512_bf16|avx512_vnni|amx_tile|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown)"
} | tee "$out/summary.txt"

# LLAMA_BUILD: an earlier llama.cpp build of this script (its bin/ has llama-bench and
# llama-quantize) to reuse instead of building again.
if [ -n "${LLAMA_BUILD:-}" ]; then
  [ -x "$LLAMA_BUILD/bin/llama-bench" ] && [ -x "$LLAMA_BUILD/bin/llama-quantize" ] ||
    { echo "LLAMA_BUILD=$LLAMA_BUILD: no bin/llama-bench and bin/llama-quantize there" >&2; exit 1; }
  true &
else
( mkdir -p "$work/llama" && tar -xJf "$src_tar" -C "$work/llama" &&
  cmake -S "$work/llama" -B "$work/llama/build" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF \
    -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DBUILD_SHARED_LIBS=OFF >"$out/llama_configure.log" 2>&1 &&
  cmake --build "$work/llama/build" --target llama-bench llama-quantize -j "$(nproc)" \
    >"$out/llama_build.log" 2>&1 ) &
fi
llama_pid=$!

"$bin" make-random --like qwen3-0.6b -o "$work/bf16" --dtype bf16 >/dev/null 2>&1
"$bin" quantize -m "$work/bf16" -o "$work/q4" --bits 4 --group-size 64 >/dev/null 2>&1
"$bin" quantize -m "$work/bf16" -o "$work/q8" --bits 8 --group-size 64 >/dev/null 2>&1
python3 tools/bench/safetensors_to_gguf.py "$work/bf16" "$work/bf16.gguf" >/dev/null 2>&1
wait "$llama_pid" || { echo "llama.cpp build failed:"; tail -n 20 "$out"/llama_*.log; exit 1; }
ll="${LLAMA_BUILD:-$work/llama/build}/bin"
"$ll/llama-quantize" --pure "$work/bf16.gguf" "$work/q4_0.gguf" Q4_0 "$(nproc)" >"$out/llama_quantize.log" 2>&1
"$ll/llama-quantize" "$work/bf16.gguf" "$work/q8_0.gguf" Q8_0 "$(nproc)" >>"$out/llama_quantize.log" 2>&1
for t in $threads; do "$bin" bench --machine --threads "$t" 2>/dev/null | tee -a "$out/summary.txt"; done
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg); llama.cpp ${LLAMA_COMMIT:-de3ff81}" | tee -a "$out/summary.txt"

# One lockstep decode figure: tok/s of `bench -p 16 -n 32 -r 2`.
ls_run() {  # ls_run THREADS MODEL [VAR=VALUE ...] [--pin]   (LS: another binary than $bin)
  local t="$1" m="$2"; shift 2
  local envs=() pin=() b="${LS:-$bin}"
  for a in "$@"; do
    if [ "$a" = --pin ]; then pin=(taskset -c "0-$((t - 1))"); else envs+=("$a"); fi
  done
  env "${envs[@]}" "${pin[@]}" "$b" bench -m "$m" -p 16 -n 32 -r 2 --threads "$t" 2>&1 |
    awk '/^decode/ {print $3}'
}
ll_run() {  # ll_run THREADS GGUF
  "$ll/llama-bench" -m "$2" -p 0 -n 32 -r 2 -t "$1" -o csv 2>/dev/null |
    python3 -c 'import csv,sys; rows=list(csv.DictReader(sys.stdin)); print(rows[-1]["avg_ts"])'
}

variant() {  # the environment of a named tuning variant
  case "$1" in
    rows1) echo LOCKSTEP_CPU_GEMV_ROWS=1 ;;
    rows1-pf0) echo LOCKSTEP_CPU_GEMV_ROWS=1 LOCKSTEP_CPU_PREFETCH_BYTES=0 ;;
    rows8) echo LOCKSTEP_CPU_GEMV_ROWS=8 ;;
  esac
}

: >"$out/runs.txt"
variants="${VARIANTS:-rows1 rows1-pf0 rows8}"
# One dtype's runs in a round: llama.cpp, lockstep, the second binary, the tuning variants.
kind_runs() {  # kind_runs KIND GGUF (rec and t from the round)
  local kind="$1" m="$work/$1" k
  rec "llama.cpp-$2" "$(ll_run "$t" "$work/$2.gguf")"
  rec "lockstep-$kind" "$(ls_run "$t" "$m")"
  if [ -n "${LOCKSTEP_BIN_B:-}" ]; then rec "lockstep-$kind-b" "$(LS="$LOCKSTEP_BIN_B" ls_run "$t" "$m")"; fi
  # The one-row tile's width (cpu_tuning.h: rows read side by side) with and without prefetch.
  for k in $variants; do
    rec "lockstep-$kind-$k" "$(ls_run "$t" "$m" $(variant "$k"))"
  done
}
for r in $(seq 1 "$rounds"); do
  for t in $threads; do
    rec() { echo "round $r threads $t $1: $2 tok/s" | tee -a "$out/runs.txt"; }
    kind_runs bf16 bf16
    # Prefetch distance and locality variants at the first thread count (STUDY=full).
    if [ "${STUDY:-short}" = full ] && [ "$t" = "${threads%% *}" ]; then
      rec "lockstep-bf16-pin" "$(ls_run "$t" "$work/bf16" --pin)"
      for pf in 0 12288 24576; do
        rec "lockstep-bf16-pf$pf" "$(ls_run "$t" "$work/bf16" LOCKSTEP_CPU_PREFETCH_BYTES=$pf)"
      done
      for h in t2 t0; do
        rec "lockstep-bf16-$h" "$(ls_run "$t" "$work/bf16" LOCKSTEP_CPU_PREFETCH_HINT=$h)"
        rec "lockstep-bf16-$h-pf12288" "$(ls_run "$t" "$work/bf16" LOCKSTEP_CPU_PREFETCH_HINT=$h LOCKSTEP_CPU_PREFETCH_BYTES=12288)"
      done
    fi
    kind_runs q4 q4_0
    kind_runs q8 q8_0
  done
done
# Where the time goes: one profiled run per thread count (wall time per op kind).
for t in $threads; do
  echo "== LOCKSTEP_PROFILE, bf16, $t threads" >>"$out/profile.txt"
  LOCKSTEP_PROFILE=1 "$bin" bench -m "$work/bf16" -p 16 -n 32 -r 1 --threads "$t" >>"$out/profile.txt" 2>&1
done
python3 - "$out/runs.txt" <<'PY' | tee -a "$out/summary.txt"
import re, statistics, sys
by = {}
for line in open(sys.argv[1]):
    m = re.search(r"threads (\d+) (\S+): ([\d.]+) tok/s", line)
    if m:
        by.setdefault((int(m[1]), m[2]), []).append(float(m[3]))
for t in sorted({t for t, _ in by}):
    base = {k: statistics.median(v) for (tt, k), v in by.items() if tt == t}
    for k, v in sorted(base.items()):
        kind = "q4_0" if "-q4" in k else "q8_0" if "-q8" in k else "bf16"
        peer = base.get("llama.cpp-" + kind, 0)
        ratio = " (%.3f of llama.cpp)" % (v / peer) if k.startswith("lockstep") and peer else ""
        print("threads %d %-22s %8.2f tok/s%s" % (t, k, v, ratio))
PY
