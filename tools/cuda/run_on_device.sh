#!/usr/bin/env bash
# Runs on the GPU machine, from the repo root, after tools/cuda/pack.sh here and a `run` that
# carries .cuda-carry: the GPU tests, then the kernel microbenchmarks. Logs go to $OUT (or
# ./cuda-logs): nvidia-smi.txt, tests.log, tests.xml, bench.log. If the carried binaries cannot
# start there (system libraries differ), the benchmark is rebuilt there with nvcc instead.
#   tools/cuda/run_on_device.sh [gtest filter] [bench section: linear|linear-sweep|attention|rows]
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="${OUT:-$root/cuda-logs}"
mkdir -p "$out"
carry="$root/${CARRY:-.cuda-carry}"  # CARRY: the folder pack.sh packed into
export LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# linear_fast dlopens libcublas.so.13 (too large to carry): use the image's toolkit or pip wheel.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  $(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null); do
  [ -e "$d/libcublas.so.13" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done
filter="${1:-*}"
section="${2:-}"

nvidia-smi -L 2>&1 | tee "$out/nvidia-smi.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total,driver_version --format=csv \
  >>"$out/nvidia-smi.txt" 2>&1

bench="$carry/bin/cuda_bench"
tests_rc=99
if "$carry/bin/cuda_tests" --gtest_list_tests >/dev/null 2>&1; then
  "$carry/bin/cuda_tests" --gtest_filter="$filter" --gtest_output="xml:$out/tests.xml" \
    >"$out/tests.log" 2>&1
  tests_rc=$?
else
  echo "carried cuda_tests does not start here:" | tee "$out/tests.log"
  "$carry/bin/cuda_tests" --gtest_list_tests 2>&1 | head -5 | tee -a "$out/tests.log"
fi
if ldd "$bench" 2>&1 | grep -q "not found"; then
  echo "carried cuda_bench lacks libraries here; rebuilding it with nvcc" | tee -a "$out/bench.log"
  bench=""
  nvcc -std=c++20 --fmad=false -O3 -arch=sm_90 -Isrc src/kernels/cuda/*.cu src/core/dtype.cpp \
    tools/cuda/kernel_bench.cu -o /tmp/cuda_bench >>"$out/bench.log" 2>&1 && bench=/tmp/cuda_bench
fi
if [ -n "$bench" ]; then "$bench" $section 2>&1 | tee -a "$out/bench.log"; fi

echo "=== summary ==="
grep -E "^\[  (PASSED|FAILED) |tests? ran|FAILED  \]" "$out/tests.log" | tail -20
grep -E "bitwise equal to the CPU|device:" "$out/tests.log" | head -20
echo "tests exit code: $tests_rc"
exit $tests_rc
