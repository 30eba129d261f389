#!/usr/bin/env bash
# Packs llama.cpp's llama-bench for the GPU machine into .cuda-carry-llama/ (ignored by git), for
# tools/bench/cuda_vs_llamacpp.sh there (`run` with carry [".cuda-carry-engine",
# ".cuda-carry-llama"]). llama.cpp is not part of this repository: it is packed from its own
# checkout or build, outside this tree.
#   tools/bench/pack_llama_cuda.sh LLAMA_BUILD_DIR [source|server|binary]
# server: as source, plus what llama-server's build reads (about 0.7 MB more of xz).
# source (default): the llama.cpp sources llama-bench's CMake build reads (its git HEAD, about
#   2.0 MB as tar.xz; the source folder is LLAMA_BUILD_DIR's CMAKE_HOME_DIRECTORY), plus this
#   machine's cuBLAS headers in case the image's toolkit lacks them; cuda_vs_llamacpp.sh builds
#   llama-bench there with CUDA and every core (a few minutes, overlapped with the checkpoint).
#   This is the one that fits: a call carries at most 64 MiB in all, working tree included (43 MB
#   today, the shipped models) plus .cuda-carry-engine (18 MB), which leaves about 5 MB. The
#   last line printed sums the three.
# binary: LLAMA_BUILD_DIR/bin/llama-bench of a CUDA build here (-DGGML_CUDA=ON, static ggml and
#   llama, sm_90), stripped, xz-compressed when over MAX_MB (default 40), with the libraries that
#   machine lacks (libcudart.so.13). About 40 MB for sm_90: use it only where the call has room.
# Either way cuBLAS (libcublas.so.13, libcublasLt.so.13: several hundred MB) is not carried: the
# wrapper bin/run-llama-bench finds it there (the CUDA toolkit, PyTorch's nvidia-cublas wheel or
# $LOCKSTEP_CUBLAS_DIR) and sets LD_LIBRARY_PATH for llama-bench alone (PyTorch keeps its own).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:?usage: $0 LLAMA_BUILD_DIR [source|binary]}"
mode="${2:-source}"
out="$root/.cuda-carry-llama"
max_mb="${MAX_MB:-40}"
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"

if [ "$mode" = source ] || [ "$mode" = server ]; then
  [ -n "$src" ] && git -C "$src" rev-parse HEAD >/dev/null 2>&1 ||
    { echo "pack_llama_cuda.sh: no llama.cpp git checkout behind $build" >&2; exit 1; }
  # What configuring and building llama-bench reads: the library, ggml with its CPU and CUDA
  # backends, and the tools that tools/CMakeLists.txt adds (server, UI and RPC stay off).
  paths="CMakeLists.txt LICENSE cmake include src common vendor ggml/CMakeLists.txt ggml/cmake
    ggml/include ggml/src/CMakeLists.txt ggml/src/ggml-cpu ggml/src/ggml-cuda tools/CMakeLists.txt
    tools/llama-bench tools/batched-bench tools/gguf-split tools/imatrix tools/completion
    tools/perplexity tools/quantize tools/tokenize tools/tts tools/mtmd tools/cvector-generator
    tools/export-lora tools/fit-params tools/results"
  exclude=(':(exclude)vendor/miniaudio/miniaudio.h')
  if [ "$mode" = server ]; then
    # llama-server too (tools/cuda/serving_vs_llamaserver_on_device.sh): its sources, mtmd's
    # audio header, and the UI's CMake files without the UI itself (configured with
    # LLAMA_USE_PREBUILT_UI=OFF and no npm build, it embeds an empty asset table).
    paths="$paths tools/server tools/cli tools/ui/CMakeLists.txt tools/ui/sources.cmake tools/ui/ui.cpp.in
      tools/ui/ui.h.in scripts/ui-assets.cmake"
    exclude=(':(exclude)tools/server/tests' ':(exclude)tools/server/bench')
  fi
  # shellcheck disable=SC2086
  top=$(git -C "$src" ls-files -- 'ggml/src/*' | grep -E '^ggml/src/[^/]+$' | grep -v CMakeLists.txt)
  # shellcheck disable=SC2086
  changed=$(git -C "$src" status --porcelain -- $paths $top)
  [ -z "$changed" ] || echo "pack_llama_cuda.sh: local changes in $src are NOT packed (HEAD is):
$changed" >&2
  # Left out (1.6 MB of xz): test media, and miniaudio.h (header-only, never read for llama-bench).
  # shellcheck disable=SC2086
  git -C "$src" archive --format=tar HEAD $paths $top ':(exclude,glob)**/*.jpeg' \
    ':(exclude,glob)**/*.jpg' ':(exclude,glob)**/*.png' ':(exclude,glob)**/*.mp3' \
    ':(exclude,glob)**/*.mp4' ':(exclude,glob)**/*.wav' "${exclude[@]}" |
    xz -T2 -9 >"$out/llama-src.tar.xz"
  git -C "$src" log -1 --format='%h %cd' >"$out/llama-commit.txt"
  git -C "$src" rev-list --count HEAD >>"$out/llama-commit.txt"
  # cuBLAS headers of this toolkit (13.0, as nvcc there), used only when the image's toolkit
  # has none; llama.cpp's CUDA backend includes cublas_v2.h.
  inc=$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")/../include
  tar -C "$inc" -cf - cublas_v2.h cublas_api.h cublas.h cublasLt.h | xz -9 >"$out/cublas-include.tar.xz"
  rmdir "$out/lib"
elif [ "$mode" = binary ]; then
  exe="$build/bin/llama-bench"
  [ -x "$exe" ] || { echo "pack_llama_cuda.sh: $exe not built" >&2; exit 1; }
  ldd "$exe" | grep -q 'libcublas\.so' ||
    { echo "pack_llama_cuda.sh: $exe does not link cuBLAS: not a CUDA build?" >&2; exit 1; }
  ldd "$exe" | grep 'not found' | grep -v 'libcuda\.so' &&
    { echo "pack_llama_cuda.sh: unresolved libraries" >&2; exit 1; }
  strip -o "$out/bin/llama-bench" "$exe"
  ldd "$exe" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    case "$name" in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
      libcuda.so*|libcublas.so*|libcublasLt.so*) ;;  # the driver's, and cuBLAS: found there
      *) cp -L "$path" "$out/lib/$name" ;;
    esac
  done
  if [ "$(stat -c %s "$out/bin/llama-bench")" -gt $(( max_mb << 20 )) ]; then
    xz -T2 -6 "$out/bin/llama-bench"  # leaves llama-bench.xz; the wrapper unpacks it once
  fi
  # The GLIBC / GLIBCXX / CXXABI versions it needs (that machine's libraries must be as new).
  objdump -T "$exe" | grep -oE '(GLIBC|GLIBCXX|CXXABI)_[0-9.]+' | sort -t_ -k1,1 -k2,2V -u |
    awk -F_ '{v[$1] = $2} END {for (k in v) printf "needs %s_%s\n", k, v[k]}' >"$out/needs.txt"
  [ -n "$src" ] && git -C "$src" log -1 --format='%h %cd' >"$out/llama-commit.txt" 2>/dev/null || true
  cat "$out/needs.txt"
else
  echo "usage: $0 LLAMA_BUILD_DIR [source|server|binary]" >&2; exit 2
fi

cat >"$out/bin/run-llama-bench" <<'EOF'
#!/bin/sh
# run-llama-bench / run-llama-server: that llama.cpp tool with cuBLAS from this machine (and the
# carried libraries), for this process alone: the carried binary if any, else the one built here
# ($LLAMA_CUDA_BUILD: cuda_vs_llamacpp.sh, serving_vs_llamaserver_on_device.sh).
d="$(cd "$(dirname "$0")" && pwd)"
tool=$(basename "$0"); tool="${tool#run-}"
cub="${LOCKSTEP_CUBLAS_DIR:-}"
if [ -z "$cub" ] || [ ! -e "$cub/libcublas.so.13" ]; then
  cub=
  for c in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
    $(python3 -c 'import glob, os, nvidia
for p in nvidia.__path__:
    for f in sorted(glob.glob(os.path.join(p, "*", "lib", "libcublas.so.13"))):
        print(os.path.dirname(f))' 2>/dev/null) \
    $(ldconfig -p 2>/dev/null | awk '/libcublas\.so\.13 / {print $NF}' | xargs -r -n1 dirname); do
    [ -e "$c/libcublas.so.13" ] && [ -e "$c/libcublasLt.so.13" ] && cub="$c" && break
  done
fi
[ -n "$cub" ] || { echo "run-$tool: libcublas.so.13 not found (set LOCKSTEP_CUBLAS_DIR)" >&2; exit 127; }
exe="$d/$tool"
if [ ! -x "$exe" ] && [ -f "$exe.xz" ]; then  # stored compressed: unpack once
  u="${TMPDIR:-/tmp}/llama-cuda-carry"
  mkdir -p "$u"
  if [ ! -x "$u/$tool" ] || [ "$exe.xz" -nt "$u/$tool" ]; then
    if command -v xz >/dev/null; then xz -dc "$exe.xz"
    else python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$exe.xz"
    fi >"$u/$tool.part" && chmod +x "$u/$tool.part" &&
      mv "$u/$tool.part" "$u/$tool" || { echo "run-$tool: cannot unpack" >&2; exit 127; }
  fi
  exe="$u/$tool"
fi
[ -x "$exe" ] || exe="${LLAMA_CUDA_BUILD:-/tmp/llama-cuda-build}/bin/$tool"
[ -x "$exe" ] || { echo "run-$tool: no $tool (carried or built in ${LLAMA_CUDA_BUILD:-/tmp/llama-cuda-build})" >&2; exit 127; }
[ -n "${RUN_LLAMA_BENCH_VERBOSE:-}" ] && echo "run-$tool: $exe, cuBLAS from $cub" >&2
LD_LIBRARY_PATH="$d/../lib:$cub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$exe" "$@"
EOF
chmod +x "$out/bin/run-llama-bench"
cp "$out/bin/run-llama-bench" "$out/bin/run-llama-server"  # the same script, named for its tool
ls -la "$out" "$out/bin"
du -sh "$out"
# What cuda_vs_llamacpp.sh's call would carry in all (64 MiB at most): the working tree, the
# engine's carry and this one.
tree=$(cd "$root" && { git ls-files -z; git ls-files -z --others --exclude-standard; } |
  xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
# (the compressed pack, .cuda-carry-engine-xz, where there is one: what the scripts carry)
eng_dir="$root/.cuda-carry-engine"; [ -d "$eng_dir-xz" ] && eng_dir="$eng_dir-xz"
eng=$(du -sb "$eng_dir" 2>/dev/null | cut -f1); eng=${eng:-0}
mine=$(du -sb "$out" | cut -f1)
total=$(( tree + eng + mine ))
echo "working tree $(( tree >> 10 )) KiB + $(basename "$eng_dir") $(( eng >> 10 )) KiB + .cuda-carry-llama" \
  "$(( mine >> 10 )) KiB = $(( total >> 10 )) KiB of 65536"
[ "$total" -le $(( 64 << 20 )) ] || echo "pack_llama_cuda.sh: WARNING: over the 64 MiB a call carries" >&2
