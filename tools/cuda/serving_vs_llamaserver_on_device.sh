#!/usr/bin/env bash
# lockstep serve against llama.cpp's llama-server, both on the one GPU, the same weights and the
# same client, in one call (issue #22's ">= 2x llama-server at 64 concurrent and above").
#   1. llama-server is built from the carried source in the background (CUDA, sm_90, niced;
#      tools/bench/llama_cuda_build.sh with LLAMA_TARGETS=llama-server).
#   2. Meanwhile: the Qwen3-8B-shaped random BF16 checkpoint with Qwen3's tokenizer
#      (serving_on_device.sh's, reused when there), its GGUF with the vocabulary llama-server needs
#      (tools/bench/safetensors_to_gguf.py), and lockstep's first round: `serve --device cuda`
#      (exact numerics, the GPU defaults) driven by `lockstep bench-serve` at LEVELS (64,256),
#      1024-token random prompts, 128 output tokens, SECONDS per level, the identity check of 16.
#      This round shares the host with the build (nice 19).
#   3. llama-server -ngl 99 -fa on -np 256 --cache-ram 0 (one slot per client at the highest
#      level; context 256 x 1280; no host-memory prompt cache: with it, de3ff81 spent ~130 ms
#      saving a 162 MiB slot state per new random prompt and served nothing at 256 clients in
#      270 s), driven by the same bench-serve (its usage counts the tokens; it sends no
#      per-chunk usage, so each streamed chunk counts one token for ITL).
#   4. lockstep's second round, alone on the host, when DEADLINE_S leaves time for it.
#   5. A table: output tok/s, ITL p50/p99, TTFT p50/p95, failures, identity, and the ratio.
# Run from the repo root after tools/cuda/pack_engine.sh and `tools/bench/pack_llama_cuda.sh
# LLAMA_BUILD_DIR server` here, carrying .cuda-carry-engine-xz, .cuda-carry-llama and
# .cuda-carry-qwen3tok (tools/bench/make_qwen3tok_carry.sh), with timeout_s 600.
# Env: LEVELS (64,256), SECONDS_PER_LEVEL (12), IN (1024), OUT_LEN (128), DEADLINE_S (575),
#      BUILD_TIMEOUT_S (420), LLAMA_FLAGS (extra llama-server flags). A dry run on a CPU machine:
#      DEVICE=cpu LIKE=qwen3-0.6b LAYERS=2 LLAMA_SERVER=path/to/llama-server LEVELS=2,4 IN=64
#      OUT_LEN=8 (LLAMA_SERVER: that binary, nothing built; LIKE, LAYERS: make-random's preset).
set -uo pipefail
. "$(dirname "$0")/device_script.sh"  # root, out, $bin, summary, note, stamp, wait_health
work=/tmp/lockstep-serve
like="${LIKE:-qwen3-8b}"
dev="${DEVICE:-cuda}"
ckpt="$work/$like${LAYERS:+-${LAYERS}l}"
gguf="$ckpt.gguf"
levels="${LEVELS:-64,256}"
secs="${SECONDS_PER_LEVEL:-12}"
in_len="${IN:-1024}"
out_len="${OUT_LEN:-128}"
deadline="${DEADLINE_S:-575}"
top=$(echo "$levels" | tr ',' '\n' | sort -n | tail -1)
mkdir -p "$work"
left() { echo $(( deadline - ($(date +%s) - t0) )); }

nvidia-smi -L
note "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
note "lockstep: $("$bin" --version 2>&1 | head -1)"

# 1. llama-server, built in the background (unless LLAMA_SERVER names one).
carry_ll="$root/.cuda-carry-llama"
bstart=$(date +%s)
if [ -n "${LLAMA_SERVER:-}" ]; then
  llama_server=("$LLAMA_SERVER")
  true & bpid=$!
else
  llama_server=("$carry_ll/bin/run-llama-server")
  export carry_ll LLAMA_CUDA_BUILD=/tmp/llama-cuda-build LLAMA_TARGETS=llama-server BUILD_NICE=19
  . "$root/tools/bench/llama_cuda_build.sh"  # unxz_to, build_llama
  ( timeout "${BUILD_TIMEOUT_S:-420}" bash -c "$(declare -f unxz_to build_llama); build_llama" ) \
    >"$out/llama_build.log" 2>&1 &
  bpid=$!
fi

# 2. The checkpoint, its GGUF, and lockstep's first round.
if [ ! -f "$ckpt/config.json" ]; then
  stamp "make-random $like"
  "$bin" make-random --like "$like" ${LAYERS:+--layers "$LAYERS"} -o "$ckpt" --dtype bf16 --seed 3 \
    >"$out/make_random.log" 2>&1 ||
    { note "make-random failed: $(tail -3 "$out/make_random.log")"; exit 1; }
fi
[ -f "$root/.cuda-carry-qwen3tok/tokenizer.json.xz" ] ||
  { note "no .cuda-carry-qwen3tok: llama-server needs a vocabulary"; exit 1; }
xz -dc "$root/.cuda-carry-qwen3tok/tokenizer.json.xz" >"$ckpt/tokenizer.json"
cp "$root/.cuda-carry-qwen3tok/tokenizer_config.json" "$ckpt/"
stamp "GGUF"
# As many bytes again as the checkpoint: a machine still warm from cuda_vs_llamacpp.sh may hold
# its 50 GB of checkpoint and GGUF in /tmp/lockstep-cuda.
rm -f "$gguf"
need_kb=$(du -sk "$ckpt" | cut -f1)
free_kb=$(df -Pk "$work" | awk 'NR == 2 {print $4}')
if [ "$free_kb" -lt $(( need_kb + (1 << 20) )) ]; then
  note "GGUF: $(( need_kb >> 20 )) GB needed, $(( free_kb >> 20 )) GB free in $work ($(du -sh /tmp/lockstep-cuda 2>/dev/null | cut -f1) in /tmp/lockstep-cuda)"
  exit 1
fi
python3 "$root/tools/bench/safetensors_to_gguf.py" "$ckpt" "$gguf" >"$out/gguf.log" 2>&1 ||
  { note "GGUF failed: $(tail -3 "$out/gguf.log")"; exit 1; }

# drive NAME URL [bench-serve flags]: the sweep into $out/NAME.json (progress in NAME.log)
drive() {
  local name="$1" url="$2"; shift 2
  stamp "bench-serve $name"
  timeout "$(( $(left) > 30 ? $(left) : 30 ))" "$bin" bench-serve --url "$url" --concurrency "$levels" \
    --input-len "$in_len" --output-len "$out_len" --seconds "$secs" --check-identity 16 --json "$@" \
    >"$out/$name.json" 2>"$out/$name.log"
  note "bench-serve $name: exit $? ($(grep -iE 'identity|fail' "$out/$name.log" | tail -1))"
}
lockstep_round() {  # NAME
  "$bin" serve -m "$ckpt" --device "$dev" --port 8093 --parallel "$top" --max-queue 2048 \
    --ctx-size $(( top * (in_len + out_len + 128) )) >"$out/$1_serve.log" 2>&1 &
  local pid=$!
  if wait_health http://127.0.0.1:8093 "$pid"; then
    grep -m1 -i "step" "$out/$1_serve.log" | tee -a "$summary"
    drive "$1" http://127.0.0.1:8093
  else
    note "lockstep serve did not come up: $(tail -3 "$out/$1_serve.log")"
  fi
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
}
lockstep_round lockstep_r1

# 3. llama-server.
stamp "waiting for the llama-server build"
wait "$bpid"; brc=$?
if [ $brc -ne 0 ]; then
  note "llama-server build failed (rc $brc) after $(( $(date +%s) - bstart )) s:"
  grep -E 'error:|CMake Error|FAILED:|No such file' "$out/llama_build.log" 2>/dev/null | head -8 | tee -a "$summary"
else
  [ -n "${LLAMA_SERVER:-}" ] ||
    note "llama-server: built in $(( $(date +%s) - bstart )) s ($(head -1 "$carry_ll/llama-commit.txt"))"
  # shellcheck disable=SC2086
  "${llama_server[@]}" -m "$gguf" -ngl "${NGL:-99}" -fa on -np "$top" --cache-ram 0 \
    -c $(( top * (in_len + out_len + 128) )) --host 127.0.0.1 --port 8094 ${LLAMA_FLAGS:-} \
    >"$out/llama_server_process.log" 2>&1 &
  lpid=$!
  if wait_health http://127.0.0.1:8094 "$lpid"; then
    drive llama_server http://127.0.0.1:8094  # (vocabulary and slot context from its meta)
  else
    note "llama-server did not come up: $(tail -5 "$out/llama_server_process.log")"
  fi
  kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null
fi

# 4. lockstep alone on the host, when there is time.
if [ "$(left)" -gt 100 ]; then lockstep_round lockstep_r2; else note "no time for lockstep's second round"; fi
stamp done

# 5. The table.
python3 - "$out" "$levels" <<'PY' | tee -a "$summary"
import json, os, sys
out, levels = sys.argv[1], [int(x) for x in sys.argv[2].split(",")]
def load(name):
    try: return json.load(open(os.path.join(out, name + ".json")))
    except Exception: return None
def level(j, c):
    for l in (j or {}).get("levels", []):
        if l.get("concurrency") == c: return l
    return None
def pct(l, key, p):
    v = (l or {}).get(key, {})
    return v.get(p) if isinstance(v, dict) else None
runs = [(n, load(n)) for n in ("lockstep_r1", "lockstep_r2", "llama_server")]
print(f"{'run':14} {'clients':>7} {'tok/s':>8} {'ITL p50':>8} {'ITL p99':>8} {'TTFT p50':>9} {'TTFT p99':>9} {'fail':>5}")
for n, j in runs:
    if j is None: print(f"{n:14} (no result)"); continue
    for c in levels:
        l = level(j, c)
        if l is None: print(f"{n:14} {c:>7} (none)"); continue
        f = lambda x: "-" if x is None else f"{x:.1f}"
        print(f"{n:14} {c:>7} {l.get('output_tok_s', 0):8.0f} {f(pct(l,'itl_ms','p50')):>8} {f(pct(l,'itl_ms','p99')):>8} "
              f"{f(pct(l,'ttft_ms','p50')):>9} {f(pct(l,'ttft_ms','p99')):>9} {l.get('failed', 0):>5}")
    idc = j.get("identity")
    if idc: print(f"{'':14} identity: {idc.get('identical')} of {idc.get('checked')} identical alone vs under load")
ll = dict(runs)["llama_server"]
for c in levels:
    base = level(ll, c)
    for n in ("lockstep_r1", "lockstep_r2"):
        l = level(dict(runs)[n], c)
        if l and base and base.get("output_tok_s"):
            print(f"{n} / llama-server at {c} clients: {l['output_tok_s'] / base['output_tok_s']:.2f}x")
PY
