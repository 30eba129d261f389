#!/usr/bin/env bash
# lockstep against llama.cpp, both on CUDA, on the same GPU and the same weights (issue 10:
# "decode and prefill ratios of at least 1.0" against llama.cpp built with CUDA, for a
# Qwen3-8B-shaped BF16 checkpoint). Run ON the GPU machine from the repo root, after
# tools/cuda/pack_engine.sh and tools/bench/pack_llama_cuda.sh here and a `run` that carries
# .cuda-carry-engine and .cuda-carry-llama, with timeout_s 600.
#   tools/bench/cuda_vs_llamacpp.sh [LIKE]   LIKE: a qwen3, qwen3_moe, qwen3_5_moe or dense gemma4 make-random
#                                            preset (default qwen3-8b; qwen3-0.6b for a quick
#                                            check; LAYERS=12 qwen3-30b-a3b: the MoE shape, 12
#                                            layers; LAYERS=8 gemma-4-31b: Gemma 4 31B, 8 layers;
#                                            LAYERS=12 qwen3.5-35b-a3b: the Qwen3.5 MoE hybrid,
#                                            12 layers, MTP head left out of the GGUF)
# Steps (every one under a timeout; about 6 to 8 minutes for qwen3-8b on an H200, build included):
#  0. llama-bench: carried (pack_llama_cuda.sh ... binary), or built here in the background from
#     the carried llama.cpp source (pack_llama_cuda.sh ... source: CUDA, sm_90, GGML_NATIVE, all
#     cores) into LLAMA_CUDA_BUILD (/tmp/llama-cuda-build; reused when already built there, as on
#     a machine still warm from an earlier call), while steps 1 and 2 run; nothing is timed
#     before it ends (or is stopped at BUILD_TIMEOUT_S).
#  1. WORK/LIKE: `lockstep make-random --like LIKE --seed 3` (BF16), reused when complete (the
#     path and seed are tools/cuda/engine_on_device.sh's, so either script reuses the other's).
#  2. LIKE.gguf: the same tensors as GGUF (tools/bench/safetensors_to_gguf.py: 2-D tensors copied
#     as BF16, norms widened to F32), next to it, or in /dev/shm or a tmpfs mounted at
#     /tmp/cvl-tmpfs when the disk is short (so is the checkpoint); reused when newer than it.
#  3. ROUNDS rounds, interleaved, each: lockstep exact; llama.cpp prefill; lockstep fast (cuBLAS
#     linears, when libcublas.so.13 is found); llama.cpp decode. The second and later rounds run
#     only while the time spent plus the last round's time stays under BUDGET_S.
#       lockstep:  bench --device cuda -p P -n N -r R --json (one warm-up, then R; prefill of P
#                  tokens from an empty cache, then N decode steps at context P+1..P+N)
#       llama.cpp: llama-bench -ngl 99 -r R -o json, prefill: -p P -n 0 -fa 0,1 -ub LLAMA_UB;
#                  decode: -p 0 -n N -d P,0 -fa 0,1 (tg N after a P-token context, as lockstep
#                  decodes; depth 0, llama-bench's usual "tgN", is reported beside it)
#  4. Summary: per engine and setting the median over rounds of each run's median tok/s;
#     llama.cpp's best setting for prefill and for decode; lockstep / llama.cpp ratios (of those
#     medians, and per round).
# Environment: QUIET_AFTER (a file whose creation starts the timed steps), BUILD_NICE (0; the
#   build's niceness, 19 when other work shares the call), P (2048), N (128), R (3), ROUNDS (2), BUDGET_S (470), DEADLINE_S (560: no step
#   starts, and every step's timeout ends, by then; lower both when this follows other work in
#   the same 600 s call), BUILD_TIMEOUT_S (390), LLAMA_UB (512,2048), FAST (1; 0 skips lockstep
#   --numerics fast), QUANT ("8 4": lockstep also with --quantize 8 and 4, weights kept
#   quantized on the GPU by LOCKSTEP_CUDA_QUANT=1; empty skips), LLAMA_CUDA_BUILD (/tmp/llama-cuda-build),
#   WORK (/tmp/lockstep-cuda), LOCKSTEP_RUN and LLAMA_RUN (the binaries; defaults are the carried
#   wrappers; a dry run elsewhere can point them at CPU builds, with CUDA_DEVICE=cpu for lockstep).
# Output: $OUT (or ./cuda-logs) gets two files, cuda_vs_llamacpp_LIKE.txt (the summary, also
# printed at the end) and cuda_vs_llamacpp_LIKE.log (every command's output and JSON result).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root" || exit 1
like="${1:-qwen3-8b}"
P="${P:-2048}"; N="${N:-128}"; R="${R:-3}"; rounds="${ROUNDS:-2}"; budget="${BUDGET_S:-470}"
deadline="${DEADLINE_S:-560}"; ub="${LLAMA_UB:-512,2048}"; fast="${FAST:-1}"; quant="${QUANT-8 4}"
build_timeout="${BUILD_TIMEOUT_S:-390}"
export LLAMA_CUDA_BUILD="${LLAMA_CUDA_BUILD:-/tmp/llama-cuda-build}"  # read by run-llama-bench
dev="${CUDA_DEVICE:-cuda}"
case "$like" in *[!a-z0-9.-]*|"") echo "usage: $0 [qwen3-8b|qwen3-1.7b|qwen3-0.6b|qwen3-30b-a3b|qwen3.5-35b-a3b|gemma-4-31b]" >&2; exit 2 ;; esac
layers="${LAYERS:-}"  # the first N decoder layers only (make-random --layers), e.g. a MoE shape
name="$like${layers:+-${layers}l}"
work="${WORK:-/tmp/lockstep-cuda}"
ls_bin="${LOCKSTEP_RUN:-$root/.cuda-carry-engine/bin/run-lockstep}"
ll_bin="${LLAMA_RUN:-$root/.cuda-carry-llama/bin/run-llama-bench}"
out="${OUT:-$root/cuda-logs}"
mkdir -p "$out" "$work"
sum="$out/cuda_vs_llamacpp_$name.txt"; log="$out/cuda_vs_llamacpp_$name.log"
res="$work/cvl-$name"  # one JSON file per run, read by the summary
rm -rf "$res"; mkdir -p "$res"
: >"$sum"; : >"$log"
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
stamp() { echo "[$(elapsed) s] $*" | tee -a "$log"; }
note() { echo "$*" | tee -a "$sum" >>"$log"; }
fail() { note "FAILED: $*"; cat "$sum"; exit 1; }
# tmo SECONDS: that, or what is left before DEADLINE_S if less; fails when under 20 s are left.
tmo() {
  local left=$(( deadline - $(elapsed) ))
  [ "$left" -ge 20 ] || { echo "deadline: $(elapsed) s spent (DEADLINE_S $deadline)" | tee -a "$log" >&2; return 1; }
  [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}

# cuBLAS for lockstep --numerics fast and for llama.cpp (too large to carry): the image's toolkit
# or PyTorch's wheel, as tools/cuda/engine_on_device.sh finds it, or any nvidia/*/lib wheel folder.
if [ -z "${LOCKSTEP_CUBLAS_DIR:-}" ]; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
    $(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null) \
    $(python3 -c 'import glob, os, nvidia
for p in nvidia.__path__:
    for f in sorted(glob.glob(os.path.join(p, "*", "lib", "libcublas.so.13"))): print(os.path.dirname(f))' 2>/dev/null); do
    [ -e "$d/libcublas.so.13" ] && export LOCKSTEP_CUBLAS_DIR="$d" && break
  done
fi
echo "cuBLAS: ${LOCKSTEP_CUBLAS_DIR:-not found}" >>"$log"

command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 | tee -a "$sum"
[ -x "$ls_bin" ] || fail "$ls_bin missing (carry .cuda-carry-engine, made by tools/cuda/pack_engine.sh)"
[ -x "$ll_bin" ] || fail "$ll_bin missing (carry .cuda-carry-llama, made by tools/bench/pack_llama_cuda.sh)"
ls_ver=$("$ls_bin" --version 2>&1 | head -1)
note "lockstep: $ls_ver"

# 0. llama-bench: carried, or built here from the carried source (in the background).
carry_ll="$(dirname "$(dirname "$ll_bin")")"  # .cuda-carry-llama
blog="$work/llama-build.log"
. "$root/tools/bench/llama_cuda_build.sh"  # unxz_to, build_llama
bpid=
if [ -x "$carry_ll/bin/llama-bench" ] || [ -f "$carry_ll/bin/llama-bench.xz" ]; then
  note "llama-bench: carried"
elif [ -x "$LLAMA_CUDA_BUILD/bin/llama-bench" ] && [ "$LLAMA_CUDA_BUILD/bin/llama-bench" -nt "$carry_ll/llama-src.tar.xz" ]; then
  note "llama-bench: built here before ($LLAMA_CUDA_BUILD)"
elif [ -f "$carry_ll/llama-src.tar.xz" ]; then
  stamp "building llama-bench ($(cat "$carry_ll/llama-commit.txt" | head -1), $(nproc) cores) in the background"
  bstart=$(date +%s)
  ( export carry_ll LLAMA_CUDA_BUILD
    timeout "$build_timeout" bash -c "$(declare -f unxz_to build_llama); build_llama" ) >"$blog" 2>&1 &
  bpid=$!
else
  note "llama-bench: neither carried nor its source ($carry_ll)"
fi
finish_build() {  # waits for the background build; sets ll_ok
  if [ -n "$bpid" ]; then
    stamp "waiting for the llama-bench build"
    wait "$bpid"; local brc=$?
    bpid=
    if [ $brc -eq 0 ]; then
      note "llama-bench: built here in $(( $(date +%s) - bstart )) s"
    else
      note "llama-bench build failed (rc $brc$([ $brc -eq 124 ] && echo ", stopped at BUILD_TIMEOUT_S $build_timeout"))"
      grep -E 'error:|CMake Error|FAILED:|No such file|cannot find' "$blog" | head -8 | tee -a "$sum" >>"$log"
      tail -5 "$blog" | tee -a "$sum" >>"$log"
    fi
  fi
  # QUIET_AFTER=FILE: other GPU work shares this call (tools/cuda/device_check.sh); nothing is
  # timed before it creates FILE (or the deadline nears).
  if [ -n "${QUIET_AFTER:-}" ]; then
    stamp "waiting for $QUIET_AFTER"
    while [ ! -e "$QUIET_AFTER" ] && [ $(( deadline - $(elapsed) )) -gt 200 ]; do sleep 2; done
    stamp "quiet: $( [ -e "$QUIET_AFTER" ] && echo yes || echo "no, going on (deadline)")"
  fi
  ll_ver=$(RUN_LLAMA_BENCH_VERBOSE=1 timeout 60 "$ll_bin" --version 2>&1)
  ll_ok=$?
  echo "$ll_ver" >>"$log"
  if [ $ll_ok -eq 0 ]; then
    note "llama.cpp: $(echo "$ll_ver" | grep -E '^version' | head -1)"
    echo "$ll_ver" | grep '^run-llama-bench' | head -1 | tee -a "$sum" >>"$log"
    timeout 60 "$ll_bin" --list-devices 2>&1 | tee -a "$log" | grep -v '^Available' >>"$sum"
  else  # say why it does not start (a library?), then go on for lockstep's numbers
    note "llama-bench does not start (rc $ll_ok): $(echo "$ll_ver" | tail -3 | tr '\n' ' ')"
  fi
}

# 1. The checkpoint: complete when every safetensors file's header accounts for its size.
ckpt="$work/$name"
complete() {
  python3 - "$1" <<'PY' 2>>"$log"
import json, os, struct, sys
d = sys.argv[1]
cfg = json.load(open(os.path.join(d, "config.json")))
assert cfg.get("torch_dtype") == "bfloat16", cfg.get("torch_dtype")
files = [f for f in os.listdir(d) if f.endswith(".safetensors")]
assert files
for f in files:
    p = os.path.join(d, f)
    with open(p, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        h = json.loads(fh.read(n)); h.pop("__metadata__", None)
    end = max(t["data_offsets"][1] for t in h.values())
    assert os.path.getsize(p) == 8 + n + end, (p, os.path.getsize(p), 8 + n + end)
PY
}
avail_gb() { df -P -B1G "$1" 2>/dev/null | awk 'NR == 2 {print $4}'; }
case "$name" in qwen3-8b) need_gb=17 ;; qwen3-1.7b) need_gb=5 ;; qwen3-0.6b) need_gb=2 ;; qwen3-30b-a3b-12l) need_gb=16 ;; qwen3.5-35b-a3b-12l) need_gb=27 ;; *) need_gb=10 ;; esac
# Where a file of need_gb goes: the first of DIR... with room, else a tmpfs mounted for it (the
# machine has far more memory than disk; the checkpoint and the GGUF together need twice that).
tmpfs=/tmp/cvl-tmpfs
pick_dir() {  # DIR...
  local d a
  for d in "$@"; do
    a=$(avail_gb "$d")
    [ "${a:-0}" -ge $((need_gb + 1)) ] && { echo "$d"; return 0; }
    echo "$d: ${a:-?} GB free, $need_gb GB needed" >>"$log"
  done
  mkdir -p "$tmpfs"
  grep -q " $tmpfs " /proc/mounts ||
    mount -t tmpfs -o size=$((2 * need_gb + 4))g tmpfs "$tmpfs" >>"$log" 2>&1 || return 1
  a=$(avail_gb "$tmpfs")
  [ "${a:-0}" -ge $((need_gb + 1)) ] && echo "$tmpfs"
}
df -h "$work" /dev/shm >>"$log" 2>&1
[ -d "$tmpfs/$name" ] && ! complete "$ckpt" && complete "$tmpfs/$name" && ckpt="$tmpfs/$name"
if complete "$ckpt"; then
  stamp "reusing $ckpt"
else
  rm -rf "$ckpt"
  dir=$(pick_dir "$work") || fail "no room for $like ($need_gb GB) in $work nor in a tmpfs"
  ckpt="$dir/$name"
  stamp "make-random $like into $ckpt ($need_gb GB)"
  t=$(tmo 240) || fail "no time left for make-random"
  # Few generator threads while llama.cpp compiles (the bytes do not depend on the count).
  timeout "$t" "$ls_bin" make-random --like "$like" ${layers:+--layers "$layers"} -o "$ckpt" --seed 3 --dtype bf16 \
    ${bpid:+--threads 4} >>"$log" 2>&1 ||
    fail "make-random (rc $?; log: cuda_vs_llamacpp_$name.log)"
  complete "$ckpt" || fail "make-random wrote an incomplete checkpoint"
fi
stamp "checkpoint ready"

# 2. The GGUF: next to the checkpoint, else in /dev/shm or a tmpfs (memory) when the disk is short.
gguf=
for g in "$work/$name.gguf" "/dev/shm/$name.gguf" "$tmpfs/$name.gguf"; do
  [ -f "$g" ] && [ -z "$(find "$ckpt" -name '*.safetensors' -newer "$g")" ] && gguf="$g" && break
done
if [ -n "$gguf" ]; then
  stamp "reusing $gguf"
else
  rm -f "$work/$name.gguf"* "/dev/shm/$name.gguf"* "$tmpfs/$name.gguf"*
  dir=$(pick_dir "$(dirname "$ckpt")" /dev/shm) || fail "no room for $name.gguf ($need_gb GB)"
  gguf="$dir/$name.gguf"
  stamp "writing $gguf"
  t=$(tmo 240) || fail "no time left for the GGUF"
  timeout "$t" python3 tools/bench/safetensors_to_gguf.py "$ckpt" "$gguf" >>"$log" 2>&1 ||
    fail "safetensors_to_gguf (rc $?; log: cuda_vs_llamacpp_$name.log)"
  note "$(grep '^safetensors_to_gguf: .* GB in' "$log" | tail -1)"
fi
stamp "gguf ready"
finish_build

# 3. Interleaved rounds.
ls_bench() {  # NAME ROUND [extra lockstep flags]
  local name=$1 r=$2; shift 2
  local t
  t=$(tmo 150) || return 1
  stamp "round $r: lockstep $name"
  timeout "$t" "$ls_bin" bench --device "$dev" -m "$ckpt" -p "$P" -n "$N" -r "$R" --json "$@" \
    >"$res/ls-$name-$r.json" 2>>"$log" || { echo "lockstep $name round $r: rc $?" | tee -a "$log"; }
}
ll_bench() {  # NAME ROUND [llama-bench flags]
  local name=$1 r=$2; shift 2
  local t
  t=$(tmo 200) || return 1
  stamp "round $r: llama.cpp $name"
  timeout "$t" "$ll_bin" -m "$gguf" -ngl 99 -r "$R" -o json "$@" \
    >"$res/ll-$name-$r.json" 2>>"$log" || { echo "llama.cpp $name round $r: rc $?" | tee -a "$log"; }
}
last=0
for r in $(seq 1 "$rounds"); do
  if [ "$r" -gt 1 ] && [ $(( $(elapsed) + last )) -gt "$budget" ]; then
    note "rounds $r..$rounds skipped: $(elapsed) s spent, the last round took $last s (BUDGET_S $budget)"
    break
  fi
  if [ $(( deadline - $(elapsed) )) -lt 60 ]; then
    note "rounds $r..$rounds skipped: $(elapsed) s spent (DEADLINE_S $deadline)"
    break
  fi
  rs=$(date +%s)
  ls_bench exact "$r"
  [ $ll_ok -eq 0 ] && ll_bench pp "$r" -p "$P" -n 0 -fa 0,1 -ub "$ub"
  if [ "$fast" = 1 ] && [ -n "${LOCKSTEP_CUBLAS_DIR:-}" ]; then
    LD_LIBRARY_PATH="$LOCKSTEP_CUBLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ls_bench fast "$r" --numerics fast
  fi
  for q in $quant; do  # the same weights quantized at load, kept quantized on the GPU
    LOCKSTEP_CUDA_QUANT=1 ls_bench "q$q" "$r" --quantize "$q"
  done
  [ $ll_ok -eq 0 ] && ll_bench tg "$r" -p 0 -n "$N" -d "$P,0" -fa 0,1
  last=$(( $(date +%s) - rs ))
done
stamp "benchmarks done"
for f in "$res"/*.json; do echo "== $(basename "$f")"; cat "$f"; done >>"$log" 2>/dev/null
[ -f "$blog" ] && { echo "== llama-bench build log"; cat "$blog"; } >>"$log"

# 4. Summary.
python3 - "$res" "$name" "$P" "$N" "$R" >>"$sum" 2>>"$log" <<'PY'
import glob, json, os, re, statistics as st, sys
res, like, P, N, R = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows = {}  # (engine, setting, metric) -> {round: tok/s}
def add(key, r, v):
    rows.setdefault(key, {})[r] = v
for f in sorted(glob.glob(os.path.join(res, "*.json"))):
    m = re.match(r"(ls|ll)-(\w+)-(\d+)\.json$", os.path.basename(f))
    text = open(f).read().strip()
    if not m or not text:
        continue
    kind, name, r = m.group(1), m.group(2), int(m.group(3))
    try:
        j = json.loads(text)
    except ValueError:  # llama-bench stopped part way: keep the tests it finished
        try:
            j = json.loads(text.rstrip().rstrip(",") + "]") if kind == "ll" else None
        except ValueError:
            j = None
        print("incomplete: %s%s" % (os.path.basename(f), "" if j else " (unreadable)"))
        if not j:
            continue
    if kind == "ls":
        add(("lockstep", name, "prefill"), r, j["prefill"]["tok_s"]["median"])
        add(("lockstep", name, "decode"), r, j["decode"]["tok_s"]["median"])
        continue
    for t in j:
        v = st.median(t["samples_ts"])
        fa = "fa%d" % t["flash_attn"]
        if t["n_prompt"] > 0:
            add(("llama.cpp", "%s ub%d" % (fa, t["n_ubatch"]), "prefill"), r, v)
        elif t["n_depth"] == P:
            add(("llama.cpp", fa, "decode"), r, v)
        else:
            add(("llama.cpp", "%s d%d" % (fa, t["n_depth"]), "decode-ref"), r, v)
med = {k: st.median(v.values()) for k, v in rows.items()}
nrounds = max((max(v) for v in rows.values()), default=0)
print("%s BF16 (random, seed 3): prefill %d tokens; decode %d tokens after a %d-token context; "
      "median of %d runs after a warm-up; %d round(s)" % (like, P, N, P, R, nrounds))
def line(label, key):
    v = rows.get(key)
    if not v:
        return
    print("  %-34s %10.1f   rounds: %s" % (label, med[key], " ".join("%.1f" % v[r] for r in sorted(v))))
def order(k):  # lockstep first, then llama.cpp by setting, numbers compared as numbers
    return (k[0] != "lockstep", [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", k[1])])
for metric, unit in (("prefill", "prefill tok/s"), ("decode", "decode tok/s")):
    print(unit + ":")
    for k in sorted((k for k in rows if k[2] == metric), key=order):
        line("%s %s" % (k[0], k[1]), k)
    if metric == "decode":
        for k in sorted((k for k in rows if k[2] == "decode-ref"), key=order):
            line("%s %s (reference)" % (k[0], k[1]), k)
best = {}
for metric in ("prefill", "decode"):
    ll = [k for k in rows if k[0] == "llama.cpp" and k[2] == metric]
    if ll:
        best[metric] = max(ll, key=lambda k: med[k])
ok = True
print("lockstep / llama.cpp (llama.cpp's best setting by median; per round: against that round's best):")
for name in ("exact", "fast", "best"):
    parts = []
    for metric in ("prefill", "decode"):
        if metric not in best:
            continue
        b = best[metric]
        if name == "best":
            # BF16 only: llama.cpp runs the BF16 weights (the q rows are listed above)
            cands = [k for k in rows if k[0] == "lockstep" and k[2] == metric
                     and k[1] in ("exact", "fast")]
            if len(cands) < 2:
                continue
            k = max(cands, key=lambda k: med[k])
            label = k[1]
        else:
            k = ("lockstep", name, metric)
            label = None
            if k not in rows:
                continue
        ll_keys = [x for x in rows if x[0] == "llama.cpp" and x[2] == metric]
        per = []
        for r in sorted(rows[k]):
            lb = [rows[x][r] for x in ll_keys if r in rows[x]]
            if lb:
                per.append("%.2f" % (rows[k][r] / max(lb)))
        parts.append("%s %.2f (vs %s%s; rounds %s)" % (metric, med[k] / med[b], b[1],
                     ", lockstep " + label if label else "", " ".join(per)))
    if parts:
        print("  %-6s %s" % (name, "; ".join(parts)))
if "prefill" not in best or "decode" not in best or ("lockstep", "exact", "decode") not in rows:
    print("INCOMPLETE: some runs gave no result (see cuda_vs_llamacpp_%s.log)" % like)
    sys.exit(1)
PY
rc=$?
stamp "done"
echo "=== cuda_vs_llamacpp summary ==="
cat "$sum"
exit $rc
