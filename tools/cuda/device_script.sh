# Sourced (not run) first by the GPU-machine scripts: `. "$(dirname "$0")/device_script.sh"`.
# Sets root (the repo root, also the working directory), out ($OUT or cuda-logs/, created), the
# packed engine ($carry, $bin, LOCKSTEP_CUBLAS_DIR: engine_env.sh), summary ($out/$summary_name,
# default summary.txt, emptied), note (prints a line and appends it to the summary) and stamp
# (prints a line with the seconds since the script began).
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
out="${OUT:-$root/cuda-logs}"
mkdir -p "$out"
. "$root/tools/cuda/engine_env.sh"
summary="$out/${summary_name:-summary.txt}"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
# op_tests LOG FILTER [SECONDS]: the packed GPU op tests matching FILTER into $out/LOG, their
# verdict noted, failures listed (nothing when the pack has no cuda_tests).
op_tests() {
  [ -x "$carry/bin/run-cuda_tests" ] || return 0
  stamp "cuda_tests ($2)"
  timeout "${3:-400}" "$carry/bin/run-cuda_tests" --gtest_filter="$2" >"$out/$1" 2>&1
  note "cuda_tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$1" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$out/$1" | head -20 | tee -a "$summary"
}
