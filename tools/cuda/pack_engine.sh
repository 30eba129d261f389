#!/usr/bin/env bash
# Packs the lockstep binary of a CUDA build, plus the shared libraries a stock CUDA image lacks
# (everything but glibc, libstdc++ and libgcc), into .cuda-carry-engine/ (ignored by git) for the
# GPU machine: `run` with carry [".cuda-carry-engine"], then tools/cuda/engine_on_device.sh there.
#   tools/cuda/pack_engine.sh [build-dir]     (default build-gpu: -DLOCKSTEP_CUDA=ON)
#   PACK_OUT=dir packs there instead (another folder that git ignores, so engineers sharing a
#   checkout do not overwrite each other's pack; unpack it to .cuda-carry-engine on the device).
# Also writes OUT-xz/engine.tar.xz (binaries stripped, xz -9: about 7 MB): the device tool carries
# at most 64 MiB with the working tree (~49 MB), so carry that folder instead; engine_on_device.sh unpacks it
# when .cuda-carry-engine itself did not travel.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-build-gpu}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
out="${PACK_OUT:-$root/.cuda-carry-engine}"
[ -x "$build/lockstep" ] || { echo "pack_engine.sh: $build/lockstep not built" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$build/lockstep" "$out/bin/"
# The GPU op tests too, when that build has them (-DLOCKSTEP_TESTS=ON), and the kernel benchmarks
# with PACK_BENCH=1 (15 MB: the carry limit leaves room for little beside the working tree).
for b in cuda_tests $([ "${PACK_BENCH:-0}" = 1 ] && echo cuda_bench); do
  if [ -x "$build/tests/$b" ]; then cp "$build/tests/$b" "$out/bin/"; fi
done
# The named-barrier racecheck probe (engine_on_device.sh SANITIZE=1, decode_ab_on_device.sh),
# built here: the GPU machine need not have nvcc.
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" -O3 -arch=sm_90 \
    "$root/tools/cuda/barrier_race_probe.cu" -o "$out/bin/barrier_probe"
fi
ldd "$build/lockstep" | awk '/=> \// {print $1, $3}' | while read -r name path; do
  case "$name" in
    libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
    *) cp -L "$path" "$out/lib/$name" ;;
  esac
done
# Wrappers that find the carried libraries without exporting LD_LIBRARY_PATH to everything else
# (PyTorch on that machine must keep its own libssl / libz).
for b in lockstep cuda_tests; do
  [ -x "$out/bin/$b" ] || continue
  cat >"$out/bin/run-$b" <<EOF
#!/bin/sh
d="\$(cd "\$(dirname "\$0")" && pwd)"
LD_LIBRARY_PATH="\$d/../lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$d/$b" "\$@"
EOF
  chmod +x "$out/bin/run-$b"
done
du -sh "$out"
mkdir -p "$out-xz"
strip "$out"/bin/lockstep "$out"/bin/cuda_tests "$out"/bin/cuda_bench "$out"/bin/barrier_probe 2>/dev/null || true
tar -C "$out" -cf - . | xz -T0 -9 >"$out-xz/engine.tar.xz"
du -sh "$out-xz"
