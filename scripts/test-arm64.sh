#!/usr/bin/env bash
# ARM64 portability check (not in CI: see docs/design-notes.md, "ARM64"). Installs what is missing
# (the x86 build's packages via setup.sh, then Debian's aarch64 cross compiler, qemu-user and the
# arm64 dev packages), builds lockstep and the kernel tests for x86 (build-x86/, CPU only) and,
# with cmake/aarch64-linux-gnu.cmake, for aarch64 (build-arm64/), then on each emulated Arm CPU
# (NEON only; SVE at 128, 256, 384 and 512 bits):
#  - runs the kernel tests under qemu-aarch64 (each forces every Highway target that CPU has and
#    checks it against the scalar oracle),
#  - runs a small generation gate (lockstep verify) there,
#  - compares tools/arm64/fingerprint.sh's output (token ids and per-position logit hashes) with
#    the x86 build's, byte for byte.
# Exits non-zero on any failed test or any difference. Usage: scripts/test-arm64.sh
# Env: JOBS (build parallelism, default 2), ARM64_CPUS (the qemu -cpu values to run).
set -euo pipefail
cd "$(dirname "$0")/.."
src="$PWD"
jobs="${JOBS:-2}"
cpus=(${ARM64_CPUS:-max,sve=off max,sve128=on max,sve256=on max,sve384=on max,sve512=on})
start=$SECONDS
log() { echo "test-arm64: $* ($((SECONDS - start)) s)"; }

scripts/setup.sh
# The arm64 side: multiarch dev packages (headers shared, libraries in /usr/lib/aarch64-linux-gnu).
arm_packages=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64
  libpcre2-dev:arm64 libutf8proc-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64
  libboost1.81-dev:arm64)
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
missing=()
for p in "${arm_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Builds: only what the check runs (the binary and the kernel tests).
cmake -S . -B build-x86 -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=OFF >/dev/null
cmake --build build-x86 -j "$jobs" --target lockstep kernels_tests
log "x86 build done"
cmake -S . -B build-arm64 -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=OFF \
  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake --no-warn-unused-cli >/dev/null
cmake --build build-arm64 -j "$jobs" --target lockstep kernels_tests
log "arm64 build done"

out="build-arm64/portability"
rm -rf "$out"
mkdir -p "$out/models"
# Random checkpoints written once, by the x86 binary, so every run reads the same bytes.
build-x86/lockstep make-random --like tiny-gemma3 -o "$out/models/tiny-gemma3" --seed 5 2>/dev/null
build-x86/lockstep make-random --like tiny-qwen3-moe -o "$out/models/tiny-qwen3-moe" --seed 6 \
  2>/dev/null

failures=0
# "N passed, M failed" from a gtest log.
counts() {
  local p f
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\.$/\1/p' "$1")
  f=$(sed -n 's/^ *\([0-9]*\) FAILED TESTS\?$/\1/p' "$1")
  echo "${p:-0} passed, ${f:-0} failed"
}
build-x86/tests/kernels_tests --gtest_brief=1 > "$out/kernels-x86.log" 2>&1 ||
  { echo "FAIL: x86 kernel tests (see $out/kernels-x86.log)"; failures=$((failures + 1)); }
tools/arm64/fingerprint.sh "$out/models" "$src" build-x86/lockstep > "$out/fingerprint-x86.txt"
log "x86: $(grep '^hwy targets' "$out/kernels-x86.log"); kernel tests $(counts \
  "$out/kernels-x86.log"); fingerprint: $(grep -c ' logits ' "$out/fingerprint-x86.txt") logit" \
  "rows, $(grep -c ' ids ' "$out/fingerprint-x86.txt") generations"

# The gate on Arm: 2 prompts, 16 tokens, every mode and width (verify exits 1 on any divergence).
head -2 tests/gate/prompts.jsonl > "$out/gate-prompts.jsonl"
for cpu in "${cpus[@]}"; do
  tag="${cpu#max,}"
  tag="${tag//=/-}"
  export QEMU_CPU="$cpu"
  t0=$SECONDS
  if ! qemu-aarch64 build-arm64/tests/kernels_tests --gtest_brief=1 > "$out/kernels-$tag.log" \
    2>&1; then
    echo "FAIL: kernel tests on $cpu (see $out/kernels-$tag.log)"
    failures=$((failures + 1))
  fi
  t1=$SECONDS
  tools/arm64/fingerprint.sh "$out/models" "$src" qemu-aarch64 build-arm64/lockstep \
    > "$out/fingerprint-$tag.txt"
  if ! cmp -s "$out/fingerprint-x86.txt" "$out/fingerprint-$tag.txt"; then
    echo "FAIL: $cpu differs from x86 ($(diff "$out/fingerprint-x86.txt" \
      "$out/fingerprint-$tag.txt" | grep -c '^>') of $(wc -l < "$out/fingerprint-x86.txt") lines):"
    diff "$out/fingerprint-x86.txt" "$out/fingerprint-$tag.txt" | head -5
    failures=$((failures + 1))
  fi
  t2=$SECONDS
  if ! qemu-aarch64 build-arm64/lockstep verify --prompts "$out/gate-prompts.jsonl" -n 16 \
    --threads 2 > "$out/gate-$tag.log" 2>&1; then
    echo "FAIL: the generation gate on $cpu (see $out/gate-$tag.log)"
    failures=$((failures + 1))
  fi
  log "$cpu: $(grep '^hwy targets' "$out/kernels-$tag.log" || echo 'no target line'); kernel" \
    "tests $(counts "$out/kernels-$tag.log") ($((t1 - t0)) s); fingerprint $(cmp -s \
    "$out/fingerprint-x86.txt" "$out/fingerprint-$tag.txt" && echo identical || echo DIFFERENT)" \
    "($((t2 - t1)) s); gate $(grep -E '^(PASS|DIVERGED)' \
    "$out/gate-$tag.log" || echo 'did not finish') ($((SECONDS - t2)) s)"
done
unset QEMU_CPU
if [ "$failures" -ne 0 ]; then
  log "$failures failure(s); logs in $out"
  exit 1
fi
log "every Arm CPU passed its tests and gate and gave the x86 bits"
