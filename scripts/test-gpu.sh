#!/usr/bin/env bash
# The GPU tests, as scripts/test.sh is the CPU's: on a Debian/Ubuntu machine with an NVIDIA GPU
# and the CUDA toolkit, installs what is missing, builds with the CUDA backend for this machine's
# GPU, runs the GPU op tests (tests/cuda) and the generation gate on the GPU, and writes a digest
# of generated tokens that another GPU's run must match bitwise. Exits non-zero on any failure.
#
#   scripts/test-gpu.sh [--quick] [--bin DIR] [--build DIR] [--out DIR]
#     --quick      the op tests and three gates (shipped models, a random Qwen3, a windowed Gemma 3)
#     --bin DIR    use built binaries (DIR/lockstep and DIR/cuda_tests, or their run-* wrappers)
#                  instead of building: the device-transfer scripts (tools/cuda/) pass their pack
#     --build DIR  the build tree (default build-gpu), with device code for this machine's GPUs
#                  (LOCKSTEP_CUDA_ARCHS=auto) unless configured otherwise
#     --out DIR    logs, summary.txt and tokens.txt (default $OUT, else ./gpu-test-logs)
#   LOCKSTEP_CUDA_AS_CC=8.6 (passed through): every launch as an older device chooses it
#   (src/kernels/cuda/device_caps.h); needs device code built for 8.x, e.g. a build configured
#   with -DLOCKSTEP_CUDA_GENCODE=arch=compute_80,code=sm_90 on a Hopper.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
quick=0 bindir="" build="build-gpu" out="${OUT:-$root/gpu-test-logs}"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --bin) bindir="$2"; shift ;;
    --build) build="$2"; shift ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n 2,17p "$0"; exit 0 ;;
    *) echo "test-gpu.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
failures=0
note() { echo "$*" | tee -a "$summary"; }
fail_note() { failures=$((failures + 1)); note "FAILED: $*"; }
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

command -v nvidia-smi >/dev/null && nvidia-smi -L | tee -a "$summary"
if [ -z "$bindir" ]; then
  scripts/setup.sh
  nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
  [ -x "$nvcc" ] || { echo "test-gpu.sh: the CUDA toolkit (nvcc) is not installed" >&2; exit 2; }
  # LOCKSTEP_CUDA_ARCHS defaults to auto: device code for the GPUs nvidia-smi lists.
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON \
    -DLOCKSTEP_TESTS=ON >/dev/null || exit 2
  cmake --build "$build" --target lockstep cuda_tests || exit 2
  lockstep="$build/lockstep" cuda_tests="$build/tests/cuda_tests"
else
  pick() { if [ -x "$bindir/run-$1" ]; then echo "$bindir/run-$1"; else echo "$bindir/$1"; fi; }
  lockstep="$(pick lockstep)" cuda_tests="$(pick cuda_tests)"
fi
[ -n "${LOCKSTEP_CUDA_AS_CC:-}" ] && note "launches as compute capability $LOCKSTEP_CUDA_AS_CC (LOCKSTEP_CUDA_AS_CC)"
work="$(mktemp -d /tmp/lockstep-gpu-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT

# 1. The op tests: every kernel's invariance (batch, chunk, tiles, paths) and its bits against the
#    CPU reference where it promises them.
stamp "cuda_tests"
timeout 900 "$cuda_tests" >"$out/cuda_tests.log" 2>&1
rc=$?
note "cuda_tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/cuda_tests.log" | tr '\n' ' ')(rc $rc)"
grep -E '^\[  FAILED  \]' "$out/cuda_tests.log" | head -20 | tee -a "$summary"
[ $rc = 0 ] || fail_note "cuda_tests (see $out/cuda_tests.log)"

# 2. The generation gate on the GPU: every mode and width against classic decode.
gate() {  # name, verify arguments...
  local name="$1"; shift
  stamp "gate $name"
  timeout 400 "$lockstep" verify --device cuda "$@" >"$out/gate_$name.log" 2>&1
  local rc=$? line
  line=$(grep -E '^(PASS|FAIL|DIVERGED)|rror|terminate' "$out/gate_$name.log" | tail -1)
  note "gate $name: $line"
  [ $rc = 0 ] && [[ "$line" == PASS* ]] || fail_note "gate $name (rc $rc, $out/gate_$name.log)"
}
ids_prompts() {  # file, vocab, seed: prompts of random ids, some longer than a 16-key window
  python3 -c "
import json, random, sys
r = random.Random(int(sys.argv[2]))
for i in range(5):
    ids = [r.randrange(int(sys.argv[1])) for _ in range(r.randrange(9, 90))]
    print(json.dumps({'ids': ids + ids[:6]}))
" "$2" "$3" >"$1"
}
random_model() { "$lockstep" make-random --like "$1" -o "$work/$2" --dtype bf16 --seed "$3" >/dev/null; }

gate shipped -m models/lockstep-code-16m --draft-model models/lockstep-draft-3m \
  --prompts tests/gate/prompts.jsonl -n 48
random_model qwen3-0.6b q06 1 && random_model qwen3-0.6b q06-draft 2 && ids_prompts "$work/q06.jsonl" 151936 5
gate qwen3-0.6b -m "$work/q06" --draft-model "$work/q06-draft" --prompts "$work/q06.jsonl" -n 24
random_model small-gemma3 g3 21 && random_model small-gemma3 g3-draft 22 && ids_prompts "$work/g.jsonl" 509 7
gate small-gemma3 -m "$work/g3" --draft-model "$work/g3-draft" --prompts "$work/g.jsonl" -n 32
if [ $quick = 0 ]; then
  "$lockstep" quantize -m models/lockstep-draft-3m -o "$work/d-q4" --bits 4 >/dev/null
  "$lockstep" quantize -m models/lockstep-draft-3m -o "$work/d-q8" --bits 8 >/dev/null
  gate quantized -m "$work/d-q4" --draft-model "$work/d-q8" --prompts tests/gate/prompts.jsonl -n 32
  random_model qwen3.5-0.8b q35 1 && ids_prompts "$work/q35.jsonl" 248320 6
  gate qwen3.5-0.8b -m "$work/q35" --prompts "$work/q35.jsonl" -n 24
  for p in small-gemma4 small-gemma4-moe small-mistral; do
    random_model "$p" "$p" 21 && random_model "$p" "$p-draft" 22
    gate "$p" -m "$work/$p" --draft-model "$work/$p-draft" --prompts "$work/g.jsonl" -n 32
  done
fi

# 3. Tokens to compare across GPUs and build targets (the same bits everywhere): greedy and
#    seeded generations of each model above, one line per generation.
stamp "tokens"
: >"$out/tokens.txt"
digest() {  # label, generate arguments...
  local label="$1"; shift
  local ids
  ids=$("$lockstep" generate --device cuda "$@" -n 32 --json --ignore-eos 2>>"$out/tokens.err" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])' 2>>"$out/tokens.err")
  echo "$label: ${ids:-ERROR}" >>"$out/tokens.txt"
  [ -n "$ids" ] || fail_note "tokens $label (see $out/tokens.err)"
}
prompt="1,17,256,42,42,7,128,3,17,99,200,42,5,0,255,17,64,64,64,31,9,8,7,6,5"
for m in "$work"/*; do
  [ -f "$m/config.json" ] || continue
  for s in "--temperature 0" "--temperature 0.8 --seed 3"; do
    # shellcheck disable=SC2086
    digest "$(basename "$m") $s" -m "$m" --prompt-ids "$prompt" $s
  done
done
digest "shipped --temperature 0" -m models/lockstep-code-16m -p "def fibonacci(n):" --temperature 0
note "tokens: $(wc -l <"$out/tokens.txt") generations in $out/tokens.txt ($(sha256sum "$out/tokens.txt" | cut -c1-16))"

stamp "done"
note "test-gpu.sh: $failures failure(s)"
[ $failures = 0 ]
