#!/usr/bin/env bash
# scripts/test-gpu.sh on the GPU machine with the packed binaries (tools/cuda/pack_engine.sh;
# carry .cuda-carry-engine-xz), once per device profile, then the generated tokens of every run
# compared with each other and with the committed reference (the same bits on every GPU).
#   AS="native 8.6 8.0" tools/cuda/gpu_tests_on_device.sh [--quick]
#     native: the H200 as itself; X.Y: LOCKSTEP_CUDA_AS_CC=X.Y (needs a pack whose device code is
#     8.x: -DLOCKSTEP_CUDA_GENCODE=arch=compute_80,code=sm_90, see tools/cuda/README.md)
#   REF (default tools/cuda/reference_tokens.txt): tokens a run must equal; UPDATE_REF=1 writes
#   the native run's tokens to $OUT/reference_tokens.txt to commit instead
set -uo pipefail
root="$(pwd)"
out="${OUT:-$root/cuda-logs}"
mkdir -p "$out"
. "$root/tools/cuda/engine_env.sh"  # $carry, $bin
ref="${REF:-$root/tools/cuda/reference_tokens.txt}"
rc=0
first=""
for as in ${AS:-native}; do
  dir="$out/$as"
  if [ "$as" = native ]; then
    env -u LOCKSTEP_CUDA_AS_CC scripts/test-gpu.sh --bin "$carry/bin" --out "$dir" "$@" || rc=1
  else
    LOCKSTEP_CUDA_AS_CC="$as" scripts/test-gpu.sh --bin "$carry/bin" --out "$dir" "$@" || rc=1
  fi
  [ -s "$dir/tokens.txt" ] || continue
  if [ -z "$first" ]; then
    first="$dir/tokens.txt"
  elif cmp -s "$first" "$dir/tokens.txt"; then
    echo "tokens $as: identical to $(basename "$(dirname "$first")")"
  else
    echo "tokens $as: DIFFER from $(basename "$(dirname "$first")")"; rc=1
    diff "$first" "$dir/tokens.txt" | head -10
  fi
  if [ "${UPDATE_REF:-0}" != 1 ] && [ -s "$ref" ]; then
    # The reference may list more models than a --quick run makes: compare the lines both have.
    missing=$(grep -vxF -f "$ref" "$dir/tokens.txt" | head -5)
    if [ -z "$missing" ]; then echo "tokens $as: every line equals $(basename "$ref")"
    else echo "tokens $as: DIFFER from $(basename "$ref"):"; echo "$missing"; rc=1; fi
  fi
done
[ "${UPDATE_REF:-0}" = 1 ] && [ -n "$first" ] && cp "$first" "$out/reference_tokens.txt"
for as in ${AS:-native}; do echo "== $as"; cat "$out/$as/summary.txt" 2>/dev/null; done
exit $rc
