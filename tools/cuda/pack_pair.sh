#!/usr/bin/env bash
# Packs this engine and an old one into one archive for a call that compares them, when the two
# packs apart would not fit the device tool's carry limit beside the working tree: the binaries
# are mostly the same bytes, and one xz stream with a 64 MiB window stores the second almost for
# free. Writes .cuda-carry-pair/pair.tar.xz (ignored by git) holding .cuda-carry-engine/ and
# .cuda-carry-old/; on the GPU machine, `tar -xJf .cuda-carry-pair/pair.tar.xz` in the repo root
# unpacks both where engine_env.sh and old_engine (device_script.sh) look.
#   tools/cuda/pack_pair.sh NEW_ENGINE_TAR_XZ OLD_ENGINE_TAR_XZ   (pack_engine.sh's engine.tar.xz)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
new="${1:?usage: $0 NEW_ENGINE_TAR_XZ OLD_ENGINE_TAR_XZ}"
old="${2:?usage: $0 NEW_ENGINE_TAR_XZ OLD_ENGINE_TAR_XZ}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/.cuda-carry-engine" "$tmp/.cuda-carry-old" "$root/.cuda-carry-pair"
tar -xJf "$new" -C "$tmp/.cuda-carry-engine"
tar -xJf "$old" -C "$tmp/.cuda-carry-old"
rm -f "$tmp"/.cuda-carry-*/bin/barrier_probe "$tmp"/.cuda-carry-old/bin/*cuda_tests
# The two lockstep binaries next to each other in the stream, so the window holds the first.
(cd "$tmp" && { echo .cuda-carry-engine/bin/lockstep; echo .cuda-carry-old/bin/lockstep;
  find .cuda-carry-engine .cuda-carry-old -type f ! -path '*/bin/lockstep'; } |
  tar -cf - --no-recursion -T -) | xz -9e -T2 >"$root/.cuda-carry-pair/pair.tar.xz"
ls -la "$root/.cuda-carry-pair/pair.tar.xz"
