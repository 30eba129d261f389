#!/usr/bin/env bash
# Packs the built GPU test and benchmark binaries, plus the shared libraries they need that a
# stock CUDA image lacks (anything but glibc, libstdc++, libgcc), into .cuda-carry/ at the repo
# root (ignored by git), for the device machine: `run` with carry [".cuda-carry"], then
# tools/cuda/run_on_device.sh there.
#   tools/cuda/pack.sh [build-dir]     (default build-cuda)
#   CARRY=.cuda-carry-x packs into another folder (one per person sharing the checkout).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-build-cuda}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
out="$root/${CARRY:-.cuda-carry}"
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for b in cuda_tests cuda_bench; do
  [ -x "$build/tests/$b" ] || { echo "pack.sh: $build/tests/$b not built" >&2; exit 1; }
  cp "$build/tests/$b" "$out/bin/"
  ldd "$build/tests/$b" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    case "$name" in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
      *) cp -L "$path" "$out/lib/$name" ;;
    esac
  done
done
du -sh "$out"
ls "$out/bin" "$out/lib"
