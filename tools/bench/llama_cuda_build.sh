# Sourced (not run) by the GPU-machine scripts that build llama.cpp there from the carried source
# (tools/bench/pack_llama_cuda.sh ... source|server): cuda_vs_llamacpp.sh (llama-bench) and
# tools/cuda/serving_vs_llamaserver_on_device.sh (llama-server). Needs carry_ll (the
# .cuda-carry-llama folder) and LLAMA_CUDA_BUILD (the build folder); LLAMA_TARGETS names what to
# build (default llama-bench; llama-server turns LLAMA_BUILD_SERVER on, and needs the server pack).
unxz_to() {  # FILE.tar.xz DIR
  mkdir -p "$2"
  if command -v xz >/dev/null; then xz -dc "$1"
  else python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"
  fi | tar -x -C "$2"
}
build_llama() {  # llama.cpp's own CMake build, CUDA on (sm_90), every core
  set -x
  local src=/tmp/llama-cuda-src nvcc cuda_root args gen commit number server=OFF
  local targets="${LLAMA_TARGETS:-llama-bench}"
  case " $targets " in *" llama-server "*) server=ON ;; esac
  rm -rf "$src" && unxz_to "$carry_ll/llama-src.tar.xz" "$src" || return 1
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  cuda_root=$(cd "$(dirname "$(readlink -f "$nvcc")")/.." && pwd)
  args=(-DCMAKE_CUDA_COMPILER="$nvcc")
  # The image's toolkit should hold cuBLAS's headers and libcublas.so; if not, the carried
  # headers (CUDA 13.0, as nvcc there) and the libraries run-llama-bench uses.
  if ! ls "$cuda_root"/include/cublas_v2.h "$cuda_root"/targets/*/include/cublas_v2.h >/dev/null 2>&1; then
    unxz_to "$carry_ll/cublas-include.tar.xz" "$src/.cublas-include"
    args+=(-DCMAKE_CUDA_FLAGS="-I$src/.cublas-include" -DCMAKE_CXX_FLAGS="-I$src/.cublas-include")
  fi
  if ! ls "$cuda_root"/lib64/libcublas.so "$cuda_root"/targets/*/lib/libcublas.so >/dev/null 2>&1 &&
     [ -n "${LOCKSTEP_CUBLAS_DIR:-}" ]; then
    args+=(-DCUDA_cublas_LIBRARY="$LOCKSTEP_CUBLAS_DIR/libcublas.so.13"
           -DCUDA_cublasLt_LIBRARY="$LOCKSTEP_CUBLAS_DIR/libcublasLt.so.13")
  fi
  read -r commit _ <"$carry_ll/llama-commit.txt"; number=$(sed -n 2p "$carry_ll/llama-commit.txt")
  # CMake and ninja: on PATH, else beside python3 (PyTorch's venv holds both as pip packages).
  PATH="$PATH:$(dirname "$(python3 -c 'import sys; print(sys.executable)')")"
  gen=Ninja; command -v ninja >/dev/null || gen="Unix Makefiles"
  cmake -S "$src" -B "$LLAMA_CUDA_BUILD" -G "$gen" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DGGML_CUDA_NCCL=OFF -DGGML_CCACHE=OFF \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER="$server" -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMIT="${commit:-unknown}" \
    -DLLAMA_BUILD_NUMBER="${number:-0}" "${args[@]}" || return 1
  # shellcheck disable=SC2086
  nice -n "${BUILD_NICE:-0}" cmake --build "$LLAMA_CUDA_BUILD" -j "$(nproc)" --target $targets
}
