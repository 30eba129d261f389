# Sourced (not run) by the GPU-machine scripts, with $root set to the repo root: the packed engine
# (tools/cuda/pack_engine.sh) as $carry and $bin, unpacked from .cuda-carry-engine-xz when only the
# compressed pack travelled, and LOCKSTEP_CUBLAS_DIR pointed at the image's cuBLAS, which
# --numerics fast dlopens (libcublas.so.13 is too large to carry).
carry="$root/.cuda-carry-engine"
if [ ! -d "$carry/bin" ] && [ -f "$carry-xz/engine.tar.xz" ]; then
  mkdir -p "$carry" && tar -xJf "$carry-xz/engine.tar.xz" -C "$carry"
fi
bin="$carry/bin/run-lockstep"  # sets LD_LIBRARY_PATH for lockstep alone (pack_engine.sh)
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  $(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null); do
  [ -e "$d/libcublas.so.13" ] && export LOCKSTEP_CUBLAS_DIR="$d" && break
done
