#!/usr/bin/env bash
# The CUDA engine on the GPU machine, in one go (issue #10): the generation gate on the GPU, CPU
# versus GPU token agreement, and decode/prefill benchmarks, with a summary at the end. Run from
# the repo root after tools/cuda/pack_engine.sh here and a `run` that carries .cuda-carry-engine.
# Logs go to $OUT (or ./cuda-logs).
#   tools/cuda/engine_on_device.sh [full|quick|check|gates]
#     full (default): everything; quick: op tests, shipped-model gates (one under emulated
#     tensor parallelism) and agreement;
#     check: everything but the benchmarks; gates: op tests and every gate
#   RANDOM_GATE_TOKENS (default 32): tokens per generation in the random-checkpoint gates
#   SKIP_OP_TESTS=1: leave out the op tests (a caller ran them already)
#   SANITIZE=1: also the op tests under compute-sanitizer memcheck and racecheck (SANITIZE_FILTER,
#   SANITIZE_TOOLS, SANITIZE_TIMEOUT seconds per tool)
set -uo pipefail
. "$(dirname "$0")/device_script.sh"  # root, out, $bin, summary, note, stamp
mode="${1:-full}"
work=/tmp/lockstep-cuda
mkdir -p "$work"

nvidia-smi -L | tee -a "$summary"
"$bin" --version 2>/dev/null | head -1

# 0. The GPU op tests (tests/cuda, when packed): per-op invariance and accuracy on the GPU.
if [ -x "$carry/bin/run-cuda_tests" ] && [ "${SKIP_OP_TESTS:-0}" != 1 ]; then
  stamp "cuda_tests"
  timeout 240 "$carry/bin/run-cuda_tests" >"$out/cuda_tests.log" 2>&1
  note "cuda_tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/cuda_tests.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$out/cuda_tests.log" | head -20 | tee -a "$summary"
fi

# 0b. SANITIZE=1: the op tests under compute-sanitizer (memcheck: out-of-bounds and misaligned
#     accesses, leaks; racecheck: shared-memory hazards). Tools slow kernels 10-100x, so a subset
#     that still reaches every kernel family; the binary itself runs (the wrapper is a shell).
if [ "${SANITIZE:-0}" = 1 ] && [ -x "$carry/bin/cuda_tests" ] && command -v compute-sanitizer >/dev/null; then
  filter="${SANITIZE_FILTER:-CudaTest.*:Shapes/AttentionTest.*/1:Shapes/LinearTest.*/0}"
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
    stamp "compute-sanitizer $tool"
    LD_LIBRARY_PATH="$carry/lib" timeout "${SANITIZE_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$carry/bin/cuda_tests" --gtest_filter="$filter" >"$out/sanitize_$tool.log" 2>&1
    rc=$?
    note "compute-sanitizer $tool (rc $rc): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize_$tool.log" | tail -1)"
  done
  # Does racecheck report a correct bar.arrive / bar.sync hand-off (the warp-specialized
  # quantized kernel's protocol)? tools/cuda/barrier_race_probe.cu, built here.
  probe="$carry/bin/barrier_probe"  # packed by pack_engine.sh; else built here
  if [ -x "$probe" ] || { probe="$work/barrier_probe" && command -v nvcc >/dev/null &&
    nvcc -O3 -arch=sm_90 tools/cuda/barrier_race_probe.cu -o "$probe" >/dev/null 2>&1; }; then
    for sync in 0 1; do
      PROBE_SYNC=$sync timeout 60 compute-sanitizer --tool racecheck "$probe" \
        >"$out/sanitize_probe_$sync.log" 2>&1
      note "racecheck probe ($([ $sync = 1 ] && echo __syncthreads || echo bar.arrive/bar.sync)): $(grep -E '^probe' "$out/sanitize_probe_$sync.log" | head -1); $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$out/sanitize_probe_$sync.log" | tail -1)"
    done
  fi
fi

# 1. The shipped dense model (qwen3, 8k vocab) as target, its own 4-bit quantization as the draft
#    (it proposes well but not perfectly, so acceptance and rejection are both exercised), the
#    draft dequantized to BF16 when placed (LOCKSTEP_CUDA_QUANT=0; 1a gates the default).
stamp "gate: shipped draft model on cuda"
"$bin" quantize -m models/lockstep-draft-3m -o "$work/draft-q4" --bits 4 >/dev/null
LOCKSTEP_CUDA_QUANT=0 timeout 150 "$bin" verify --device cuda -m models/lockstep-draft-3m --draft-model "$work/draft-q4" \
  --prompts tests/gate/prompts.jsonl -n 64 >"$out/gate_shipped_dense.log" 2>&1
note "gate shipped draft-3m as target (cuda): $(grep -E '^(PASS|FAIL|DIVERGED)|error|terminate' "$out/gate_shipped_dense.log" | head -1)"

# 1a. Weights kept quantized on the GPU (the default; LOCKSTEP_CUDA_QUANT=1 says so: 4-bit
#     target, 8-bit draft, both through the quantized kernels), and the 4-bit target's greedy
#     text quantized-on-GPU against BF16-placed (the same values by definition, so the same text).
stamp "gate: quantized on the GPU"
"$bin" quantize -m models/lockstep-draft-3m -o "$work/draft-q8" --bits 8 >/dev/null
LOCKSTEP_CUDA_QUANT=1 timeout 150 "$bin" verify --device cuda -m "$work/draft-q4" \
  --draft-model "$work/draft-q8" --prompts tests/gate/prompts.jsonl -n 64 >"$out/gate_quant_gpu.log" 2>&1
note "gate draft-3m q4 target + q8 draft kept quantized (cuda): $(grep -E '^(PASS|FAIL|DIVERGED)|error|terminate' "$out/gate_quant_gpu.log" | head -1)"
for q in 1 0; do
  LOCKSTEP_CUDA_QUANT=$q timeout 30 "$bin" generate --device cuda -m "$work/draft-q4" \
    -p "The quick brown fox" -n 48 --temperature 0 >"$work/gen_quant$q.txt" 2>/dev/null
done
if [ -s "$work/gen_quant1.txt" ] && cmp -s "$work/gen_quant1.txt" "$work/gen_quant0.txt"; then
  note "q4 greedy text: kept quantized == dequantized to BF16"
else
  note "q4 greedy text: DIFFERENT or empty (kept quantized vs dequantized to BF16)"
fi

# 1b. The shipped target (Qwen3.5 hybrid with its MTP head) and the shipped draft: the CI gate's
#     prompts on the GPU (MTP, draft and lookup at every width, batched, chunked, seeded).
stamp "gate: shipped target on cuda"
timeout 240 "$bin" verify --device cuda --prompts tests/gate/prompts.jsonl -n 64 \
  >"$out/gate_shipped_target.log" 2>&1
note "gate shipped code-16m + draft-3m (cuda): $(grep -E '^(PASS|FAIL|DIVERGED)|error|terminate' "$out/gate_shipped_target.log" | head -1)"

# 1c. Tensor parallelism emulated on this GPU (LOCKSTEP_CUDA_TP_EMULATE, kernels/cuda/tensor_parallel.cu):
#     the shipped target's score logit hashes and 40 greedy tokens at 2 and 4 ranks equal one
#     GPU's, and the gate holds under 2 ranks (tools/cuda/tp_emulate_on_device.sh does more shapes).
stamp "tensor parallelism emulated: shipped target"
ids=$(seq -s, 5 11 1500)
for r in off 2 4; do
  vars=""; [ "$r" = off ] || vars="LOCKSTEP_CUDA_TP_EMULATE=$r"
  {
    env $vars "$bin" score --device cuda -m models/lockstep-code-16m --ids "$ids" --logits-hash --json 2>/dev/null |
      python3 -c 'import json,sys; print(" ".join(p["logits_fnv1a"] for p in json.load(sys.stdin)["positions"]))'
    env $vars "$bin" generate --device cuda -m models/lockstep-code-16m --prompt-ids "$ids" -n 40 --json 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])'
  } | md5sum | cut -c1-32
done >"$work/tp.txt"
note "TP emulated (off, 2, 4 ranks): $([ "$(sort -u "$work/tp.txt" | wc -l)" = 1 ] &&
  ! grep -q d41d8cd98f00b204e9800998ecf8427e "$work/tp.txt" && echo identical || echo "DIFFER or empty")"
LOCKSTEP_CUDA_TP_EMULATE=2 timeout 240 "$bin" verify --device cuda --prompts tests/gate/prompts.jsonl -n 32 \
  >"$out/gate_tp2.log" 2>&1
note "gate shipped target, TP 2 emulated (cuda): $(grep -E '^(PASS|FAIL|DIVERGED)|error|terminate' "$out/gate_tp2.log" | head -1)"

# 2. CPU versus GPU tokens on the same model (reported, not required to be bitwise equal).
if [ "$mode" != gates ]; then
stamp "cpu vs gpu agreement"
timeout 120 python3 - "$bin" >"$out/agreement.log" 2>&1 <<'PY'
import json, subprocess, sys
bin = sys.argv[1]
prompts = [json.loads(l) for l in open("tests/gate/prompts.jsonl")][:10]
same = 0; prefix = []
for p in prompts:
    text = p if isinstance(p, str) else p.get("prompt")
    ids = {}
    for dev in ("cpu", "cuda"):
        r = subprocess.run([bin, "generate", "--device", dev, "-m", "models/lockstep-draft-3m",
                            "-p", text, "-n", "64", "--json", "--ignore-eos"],
                           capture_output=True, text=True, check=True)
        ids[dev] = json.loads(r.stdout)["ids"]
    a, b = ids["cpu"], ids["cuda"]
    n = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    prefix.append(n); same += a == b
print(f"cpu vs cuda: {same}/{len(prompts)} generations identical over 64 tokens; "
      f"first difference at token {sorted(prefix)} (64 = none)")
PY
note "$(tail -1 "$out/agreement.log")"
fi
[ "$mode" = quick ] && { cat "$summary"; exit 0; }

# 3. Random Qwen3-0.6B-shaped target and draft (near-uniform logits: many near-ties), id prompts.
stamp "gate: random qwen3-0.6b pair on cuda"
"$bin" make-random --like qwen3-0.6b -o "$work/q06" --seed 1 >/dev/null
"$bin" make-random --like qwen3-0.6b -o "$work/q06-draft" --seed 2 >/dev/null
python3 -c "
import json, random
r = random.Random(5)
for i in range(6):
    print(json.dumps({'ids': [r.randrange(151936) for _ in range(r.randrange(8, 200))]}))
" >"$work/ids.jsonl"
timeout 150 "$bin" verify --device cuda -m "$work/q06" --draft-model "$work/q06-draft" \
  --prompts "$work/ids.jsonl" -n "${RANDOM_GATE_TOKENS:-32}" >"$out/gate_q06.log" 2>&1
note "gate random qwen3-0.6b (cuda): $(grep -E '^(PASS|FAIL|DIVERGED)|error|terminate' "$out/gate_q06.log" | head -1)"

# 3b. Random Qwen3.5-0.8B-shaped hybrid (with MTP head): lookup and MTP speculation.
stamp "gate: random qwen3.5-0.8b on cuda"
"$bin" make-random --like qwen3.5-0.8b -o "$work/q35" --seed 1 >/dev/null
python3 -c "
import json, random
r = random.Random(6)
for i in range(6):
    print(json.dumps({'ids': [r.randrange(248320) for _ in range(r.randrange(8, 200))]}))
" >"$work/ids35.jsonl"
timeout 150 "$bin" verify --device cuda -m "$work/q35" --prompts "$work/ids35.jsonl" -n "${RANDOM_GATE_TOKENS:-32}" \
  >"$out/gate_q35.log" 2>&1
note "gate random qwen3.5-0.8b (cuda): $(grep -E '^(PASS|FAIL|DIVERGED)|error|terminate' "$out/gate_q35.log" | head -1)"

case "$mode" in gates|check) echo "=== summary ==="; cat "$summary"; exit 0 ;; esac

# 4. Benchmarks: the BF16 tensor-core peak through cuBLAS (PyTorch), then lockstep bench.
stamp "peak"
peak=$(python3 - <<'PY'
import torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
for _ in range(3): a @ b
torch.cuda.synchronize()
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(10): a @ b
e.record(); torch.cuda.synchronize()
print(f"{2 * 8192**3 * 10 / (s.elapsed_time(e) / 1e3) / 1e12:.1f}")
PY
)
export LOCKSTEP_GPU_PEAK_TFLOPS="$peak"
note "cuBLAS bf16 8192^3 (PyTorch): $peak TFLOP/s"
for like in qwen3-8b qwen3-0.6b qwen3.5-0.8b; do
  stamp "bench $like"
  [ -d "$work/$like" ] || "$bin" make-random --like "$like" -o "$work/$like" --seed 3 >/dev/null
  timeout 120 "$bin" bench --device cuda -m "$work/$like" -p 2048 -n 128 -r 3 \
    >"$out/bench_$like.log" 2>&1
  if [ "$like" != qwen3-8b ]; then  # what CUDA graphs save on a small model
    LOCKSTEP_CUDA_GRAPHS=0 timeout 120 "$bin" bench --device cuda -m "$work/$like" -p 512 -n 128 \
      -r 3 >"$out/bench_${like}_nograph.log" 2>&1
    note "bench $like without graphs: $(grep -E '^decode |error' "$out/bench_${like}_nograph.log" | tr -s ' ')"
  fi
  if [ "$like" = qwen3-8b ] && [ -n "${LOCKSTEP_CUBLAS_DIR:-}" ]; then  # exact vs fast (cuBLAS)
    LD_LIBRARY_PATH="$LOCKSTEP_CUBLAS_DIR" timeout 120 "$bin" bench --device cuda -m "$work/$like" \
      -p 2048 -n 128 -r 3 --numerics fast >"$out/bench_${like}_fast.log" 2>&1
    note "bench $like fast: $(grep -E '^(prefill|decode) |error' "$out/bench_${like}_fast.log" | tr -s ' ' | tr '\n' '|')"
  fi
  note "bench $like: $(grep -E '^(prefill|decode) ' "$out/bench_$like.log" | tr -s ' ' | tr '\n' '|')"
done
stamp "done"
echo "=== summary ==="
cat "$summary"
