#!/usr/bin/env bash
# CPU decode of a mixture of experts: lockstep 4-bit (group 64, BF16 scale + bias: 4.5 bits per
# weight) against llama.cpp Q4_0 (--pure: every matrix Q4_0, also 4.5 bits per weight) on the same
# random qwen3-30b-a3b-shaped BF16 weights with fewer layers, alternated engine by engine, round by
# round, at each thread count. Made to run on the GPU machine's host CPU (16 quiet cores, a
# compiler and CMake), where it builds llama.cpp's llama-bench and llama-quantize (CPU only) from a
# source tarball carried with the call; it also runs anywhere else with those tools.
#   tools/bench/moe_cpu_vs_llamacpp.sh LLAMA_SRC.tar.xz [layers=8] [rounds=2] [threads="2 16"]
#   LOCKSTEP_BIN (default: the packed engine's run-lockstep, else build/lockstep); OUT: logs;
#   LLAMA_BIN_DIR: use that llama.cpp build (e.g. cpu_decode_study.sh's) instead of building one.
#   LOCKSTEP_BIN_B: a second lockstep binary (e.g. a branch's CPU build) run in the same rounds,
#   right after the first, reported as "lockstep-b" (an A/B of a kernel change).
#   PROMPT=P: prefill of P tokens instead of decode (lockstep bench -p P -n 1, llama-bench -p P -n 0).
#   BUILD_ONLY=1: only build llama.cpp into /tmp/moe-vs-llamacpp-work/llama/build (e.g. in the
#   background of a call that checks the GPU first), then exit.
# llama.cpp is not part of this repository (its source comes from npm's node-llama-cpp,
# llama/gitRelease.bundle). Prints one line per run and the median ratio per thread count.
set -euo pipefail
cd "$(dirname "$0")/../.."
src_tar="${1:?usage: $0 LLAMA_SRC.tar.xz [layers] [rounds] [threads]}"
layers="${2:-8}"; rounds="${3:-2}"; threads="${4:-2 $(nproc)}"
out="${OUT:-/tmp/moe-vs-llamacpp}"; work=/tmp/moe-vs-llamacpp-work
mkdir -p "$out" "$work"
root="$(pwd)"
. tools/cuda/engine_env.sh  # the packed engine as $bin, when one travelled
[ -x "$bin" ] || bin=build/lockstep
bin="${LOCKSTEP_BIN:-$bin}"
lscpu | grep -m1 "Model name" | tee "$out/summary.txt"

# llama.cpp, CPU only, in the background while the weights are made (LLAMA_BIN_DIR: an existing
# build's bin/ with llama-bench and llama-quantize instead; the tarball is then not read).
ll="${LLAMA_BIN_DIR:-$work/llama/build/bin}"
build_llama() {
  ( [ -x "$ll/llama-bench" ] && [ -x "$ll/llama-quantize" ] ) ||
  ( mkdir -p "$work/llama" && tar -xJf "$src_tar" -C "$work/llama" &&
    cmake -S "$work/llama" -B "$work/llama/build" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF \
      -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF >"$out/llama_configure.log" 2>&1 &&
    cmake --build "$work/llama/build" --target llama-bench llama-quantize -j "$(nproc)" \
      >"$out/llama_build.log" 2>&1 )
}
if [ "${BUILD_ONLY:-0}" = 1 ]; then build_llama; exit $?; fi
build_llama &
llama_pid=$!

"$bin" make-random --like qwen3-30b-a3b --layers "$layers" -o "$work/bf16" --dtype bf16 >/dev/null 2>&1
"$bin" quantize -m "$work/bf16" -o "$work/q4" --bits 4 --group-size 64 >/dev/null 2>&1
python3 tools/bench/safetensors_to_gguf.py "$work/bf16" "$work/bf16.gguf" >/dev/null 2>&1
wait "$llama_pid" || { echo "llama.cpp build failed:"; tail -n 20 "$out/llama_configure.log" "$out/llama_build.log"; exit 1; }
"$ll/llama-quantize" --pure "$work/bf16.gguf" "$work/q4_0.gguf" Q4_0 "$(nproc)" >"$out/llama_quantize.log" 2>&1
rm -rf "$work/bf16" "$work/bf16.gguf"
"$bin" inspect -m "$work/q4" | grep -E "experts|active|decode weight" | tee -a "$out/summary.txt"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg); llama.cpp ${LLAMA_COMMIT:-de3ff81}" | tee -a "$out/summary.txt"

prompt="${PROMPT:-0}"  # 0: decode
if [ "$prompt" -gt 0 ]; then phase=prefill; ls_args=(-p "$prompt" -n 1); ll_args=(-p "$prompt" -n 0)
else phase=decode; ls_args=(-p 1 -n 32); ll_args=(-p 0 -n 32); fi
echo "phase: $phase" | tee -a "$out/summary.txt"
: >"$out/runs.txt"
for r in $(seq 1 "$rounds"); do
  for t in $threads; do
    a=$("$bin" bench -m "$work/q4" "${ls_args[@]}" -r 3 --threads "$t" 2>&1 | awk -v p="^$phase" '$0 ~ p {print $3}')
    b=$("$ll/llama-bench" -m "$work/q4_0.gguf" "${ll_args[@]}" -r 3 -t "$t" -o csv 2>/dev/null |
        python3 -c 'import csv,sys; rows=list(csv.DictReader(sys.stdin)); print(rows[-1]["avg_ts"])')
    echo "round $r threads $t: lockstep $a tok/s, llama.cpp $b tok/s, ratio $(python3 -c "print(round($a/$b, 3))")" |
      tee -a "$out/runs.txt"
    if [ -n "${LOCKSTEP_BIN_B:-}" ]; then
      c=$("$LOCKSTEP_BIN_B" bench -m "$work/q4" "${ls_args[@]}" -r 3 --threads "$t" 2>&1 | awk -v p="^$phase" '$0 ~ p {print $3}')
      echo "round $r threads $t: lockstep-b $c tok/s, ratio to llama.cpp $(python3 -c "print(round($c/$b, 3))"), to lockstep $(python3 -c "print(round($c/$a, 3))")" |
        tee -a "$out/runs.txt"
    fi
  done
done
python3 - "$out/runs.txt" <<'PY' | tee -a "$out/summary.txt"
import re, statistics, sys
by = {}
for line in open(sys.argv[1]):
    m = re.search(r"threads (\d+): lockstep ([\d.]+) tok/s, llama.cpp ([\d.]+)", line)
    if m:
        by.setdefault(int(m[1]), []).append((float(m[2]), float(m[3])))
bb = {}
for line in open(sys.argv[1]):
    m = re.search(r"threads (\d+): lockstep-b ([\d.]+) tok/s", line)
    if m:
        bb.setdefault(int(m[1]), []).append(float(m[2]))
for t, v in sorted(bb.items()):
    a = [x for x, _ in by.get(t, [])]
    if a:
        print("threads %d: lockstep-b %.2f tok/s (median), b / lockstep per round %s" % (
            t, statistics.median(v), ", ".join("%.3f" % (x / y) for x, y in zip(v, a))))
for t, v in sorted(by.items()):
    print("threads %d: lockstep %.2f, llama.cpp %.2f tok/s (medians), ratio %.3f" % (
        t, statistics.median(a for a, _ in v), statistics.median(b for _, b in v),
        statistics.median(a / b for a, b in v)))
PY
