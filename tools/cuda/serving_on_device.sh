#!/usr/bin/env bash
# Serving at concurrency on the GPU machine (issue #22), in one call: a random Qwen3-8B-shaped BF16
# checkpoint (Qwen3's own tokenizer when .cuda-carry-qwen3tok travelled: tools/bench/
# make_qwen3tok_carry.sh), the engine's batched decode step without HTTP (`bench --batch`, exact
# and fast), then `lockstep serve` driven by `lockstep bench-serve` in exact and in fast numerics:
# random-token prompts of LONG_IN (1024) tokens and of SHORT_IN (128), 128 output tokens each, with
# the batched-vs-alone identity check at the highest level. Run from the repo root after
# `tools/cuda/pack_engine.sh BUILD` here and a `run` that carries .cuda-carry-engine-xz (and
# .cuda-carry-qwen3tok). Logs and JSON go to $OUT (or ./cuda-logs); a table is printed last.
#   env: BATCHES="64 256" (bench --batch sizes), LEVELS_LONG=1,64,256, LEVELS_SHORT=64,256,
#        SECONDS_PER_LEVEL=15, SERVE_FLAGS (extra serve flags), NUMERICS="exact fast"
set -uo pipefail
. "$(dirname "$0")/device_script.sh"  # root, out, $bin, summary, note, stamp, wait_health
work=/tmp/lockstep-serve
ckpt="$work/qwen3-8b"
mkdir -p "$work"
port=8093
url="http://127.0.0.1:$port"

nvidia-smi -L
echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
if [ ! -f "$ckpt/config.json" ]; then
  stamp "make-random qwen3-8b"
  "$bin" make-random --like qwen3-8b -o "$ckpt" --dtype bf16 --seed 3 >"$out/make_random.log" 2>&1 ||
    { echo "make-random failed"; tail -5 "$out/make_random.log"; exit 1; }
fi
if [ -f "$root/.cuda-carry-qwen3tok/tokenizer.json.xz" ]; then
  xz -dc "$root/.cuda-carry-qwen3tok/tokenizer.json.xz" >"$ckpt/tokenizer.json"
  cp "$root/.cuda-carry-qwen3tok/tokenizer_config.json" "$ckpt/"
fi

for numerics in ${NUMERICS:-exact fast}; do
  for n in ${BATCHES:-64 256}; do
    stamp "bench --batch $n ($numerics)"
    timeout 180 "$bin" bench -m "$ckpt" --device cuda --numerics "$numerics" --batch "$n" -p 512 -n 32 \
      -r 1 --ctx-size $(( n * 600 )) --json >"$out/batch_${numerics}_$n.json" 2>"$out/batch_${numerics}_$n.log" ||
      echo "bench --batch $n ($numerics) failed: $(tail -2 "$out/batch_${numerics}_$n.log")"
  done
done

for numerics in ${NUMERICS:-exact fast}; do
  stamp "serve ($numerics)"
  "$bin" serve -m "$ckpt" --device cuda --numerics "$numerics" --port "$port" --parallel 256 \
    --max-queue 2048 --ctx-size 300000 ${SERVE_FLAGS:-} >"$out/serve_$numerics.log" 2>&1 &
  pid=$!
  if ! wait_health "$url" "$pid"; then
    echo "serve ($numerics) did not come up: $(tail -3 "$out/serve_$numerics.log")"
    kill "$pid" 2>/dev/null
    continue
  fi
  for shape in long short; do
    if [ "$shape" = long ]; then in=${LONG_IN:-1024} levels=${LEVELS_LONG:-1,64,256}; else in=${SHORT_IN:-128} levels=${LEVELS_SHORT:-64,256}; fi
    stamp "bench-serve $numerics $shape: input $in, levels $levels"
    timeout 240 "$bin" bench-serve --url "$url" --concurrency "$levels" --input-len "$in" --output-len 128 \
      --seconds "${SECONDS_PER_LEVEL:-15}" --check-identity 16 --json \
      >"$out/serve_${numerics}_$shape.json" 2>"$out/serve_${numerics}_$shape.log" ||
      echo "bench-serve $numerics $shape: exit $? ($(tail -2 "$out/serve_${numerics}_$shape.log"))"
  done
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
done
stamp "done"

python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
print("\n== bench --batch (Qwen3-8B shape, BF16, -p 512 -n 32) ==")
print(f"{'numerics':8} {'N':>4} {'step ms':>8} {'tok/s':>8} {'floor':>6}")
for f in sorted(glob.glob(f"{out}/batch_*.json")):
    try: j = json.load(open(f))
    except Exception: continue
    d = j["decode"]
    print(f"{j.get('numerics', '?'):8} {j['batch']:>4} {j['decode_step_ms']['median']:8.2f} {d['aggregate_tok_s']:8.0f} {d['fraction_of_bandwidth_floor']:6.2f}")
print("\n== bench-serve (output tok/s, TTFT p50/p99 ms, ITL p50/p99 ms, engine ms/step forward/total, rows/step) ==")
for f in sorted(glob.glob(f"{out}/serve_*_*.json")):
    try: j = json.load(open(f))
    except Exception: continue
    name = os.path.basename(f)[6:-5]
    idt = j.get("identity") or {}
    print(f"{name}: input {j['input_len']}, output {j['output_len']}, passed {j['passed']}, identity {idt.get('identical')}/{idt.get('checked')} at {idt.get('concurrency')}")
    for L in j["levels"]:
        s = L.get("steps") or {}
        ms = s.get("ms_per_step") or {}
        print(f"  c={L['concurrency']:>4} reqs {L['succeeded']:>5}/{L['requests']:<5} {L['output_tok_s']:8.0f} tok/s"
              f"  TTFT {L['ttft_ms']['p50']:7.0f}/{L['ttft_ms']['p99']:7.0f}  ITL {L['itl_ms']['p50']:6.2f}/{L['itl_ms']['p99']:6.2f}"
              f"  step {ms.get('forward', 0):6.2f}/{ms.get('total', 0):6.2f} ms  rows {s.get('rows_per_step', 0):6.1f}"
              + (f"  FAIL {L['failed']}: {L['first_error']}" if L['failed'] else ""))
PY
