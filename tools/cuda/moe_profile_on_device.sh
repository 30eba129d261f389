#!/usr/bin/env bash
# MoE decode on the GPU, where its time goes and whether a change kept the bits, in one call each:
#   tools/cuda/moe_profile_on_device.sh profile   random checkpoints of SHAPES (shape:layers, BF16;
#       default qwen3-30b-a3b:12 qwen3.5-35b-a3b:12 gemma-4-26b-a4b:6 qwen3-8b:12): `bench --device
#       cuda -p 128 -n 64 -r 3`, the per-op table of LOCKSTEP_CUDA_PROFILE=1, and ncu
#       (--clock-control none, caches flushed between kernels; NCU=first (default), all or 0) of
#       every kernel of a short eager run, as CSV (ncu_<shape>.csv: duration and DRAM bytes per
#       launch; fold it with tools/cuda/ncu_summary.py). With an old engine (below), the bench
#       runs both binaries, alternated, at -p 128 (2 rounds) and -p 2048 (1) (RUNS: round:prompt
#       pairs), each line with the prefill and decode rates; VARIANT_ENV (e.g.
#       LOCKSTEP_CUDA_DELTANET_NORM=0; several environments separated by ';') adds this engine under
#       each environment to every round.
#       OPPROF=0 skips the per-op table, NCU=0 ncu.
#   tools/cuda/moe_profile_on_device.sh check     the GPU op tests of attention, MoE and Gemma
#       ops, the generation gate (CHECK=moe: small MoE shapes and a dense Qwen3-0.6B shape;
#       CHECK=gemma: the small Gemma 3 / 4 / 4-MoE presets with drafts (GEMMA_PRESETS: which)
#       and Gemma 4's assistant;
#       CHECK="moe gemma": both; TESTS: the op tests' gtest filter), and, with an old engine, greedy tokens and score logit hashes of
#       old and new binaries compared (a speed change must not move a bit; OLDNEW_MODELS: which of
#       the models made, e.g. "q35 qnext", default all).
# Run from the repo root after tools/cuda/pack_engine.sh here, carrying .cuda-carry-engine-xz; an
# old engine to compare with travels as .cuda-carry-old/engine.tar.xz (bin/lockstep,
# bin/run-lockstep, lib/ of an earlier pack), or is this engine under the environment OLD_ENV.
set -uo pipefail
. "$(dirname "$0")/device_script.sh"  # root, out, $bin, summary, note, stamp
mode="${1:-profile}"
work=/tmp/lockstep-moe-profile
mkdir -p "$work"
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$summary"; }
nvidia-smi -L | tee -a "$summary"
old_engine

if [ "$mode" = check ]; then
  # CHECK: moe (default), gemma or "moe gemma".
  sets="${CHECK:-moe}"
  op_tests cuda_tests.log "${TESTS:-*Attention*:*DeviceRouting*:*DeviceGrouping*:*GroupedExpert*:*MoeLayerDevice*:*HostRouted*:*MoeCombine*:*Elementwise*:*GemmaOps*}"
  # Prompts of 4 to 160 ids, a repeat among them (lookup finds matches), longer than the small
  # Gemma presets' window of 16; 160 ids: a prefill past kMoeDeviceMaxTokens (host routing, the
  # grouped expert launches sized by the real groups).
  {
    echo '{"ids": [1, 17, 256, 42]}'
    echo '{"ids": [5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7]}'
    for n in 40 64 160; do
      ids=""
      for ((i = 0; i < n; ++i)); do ids+="$(( (i * 37 + n * 11 + 5) % 509 )),"; done
      echo "{\"ids\": [${ids%,}]}"
    done
  } >"$work/prompts.jsonl"
  gate() {  # name, verify arguments...
    local name="$1"; shift
    stamp "gate $name"
    timeout 300 "$bin" verify --device cuda --prompts "$work/prompts.jsonl" -n 32 "$@" >"$out/$name.log" 2>&1
    note "$name: $(grep -E '^(PASS|FAIL|DIVERGED)|rror' "$out/$name.log" | tail -1)"
  }
  models=""
  case " $sets " in *" moe "*)
    "$bin" make-random --like qwen3.5-35b-a3b --layers 4 -o "$work/q35" --dtype bf16 --seed 11 >/dev/null 2>&1
    "$bin" make-random --like qwen3-30b-a3b --layers 3 -o "$work/q3" --dtype bf16 --seed 12 >/dev/null 2>&1
    "$bin" make-random --like qwen3-30b-a3b --layers 1 -o "$work/q3-draft" --dtype bf16 --seed 13 >/dev/null 2>&1
    "$bin" make-random --like qwen3-0.6b -o "$work/d06" --dtype bf16 --seed 14 >/dev/null 2>&1
    "$bin" make-random --like qwen3-next-80b-a3b --layers 4 -o "$work/qnext" --dtype bf16 --seed 15 >/dev/null 2>&1
    gate gate_qwen35moe_mtp -m "$work/q35"
    gate gate_qwen3next -m "$work/qnext"
    gate gate_qwen3moe_draft -m "$work/q3" --draft-model "$work/q3-draft"
    gate gate_qwen3moe_q4 -m "$work/q3" --quantize 4
    gate gate_dense06 -m "$work/d06"
    models+=" q35 q3 d06 qnext" ;;
  esac
  case " $sets " in *" gemma "*)
    presets="${GEMMA_PRESETS:-small-gemma3 small-gemma4 small-gemma4-moe small-gemma4-hd512}"
    for p in $presets; do
      "$bin" make-random --like "$p" -o "$work/$p" --dtype bf16 --seed 21 >/dev/null 2>&1
      "$bin" make-random --like "$p" -o "$work/$p-draft" --dtype bf16 --seed 22 >/dev/null 2>&1
      gate "gate_$p" -m "$work/$p" --draft-model "$work/$p-draft"
    done
    "$bin" make-random --like small-gemma4-assistant -o "$work/assistant" --dtype bf16 --seed 22 >/dev/null 2>&1
    gate gate_gemma4_assistant -m "$work/small-gemma4" --draft-model "$work/assistant"
    grep -E '^assistant/' "$out/gate_gemma4_assistant.log" | tee -a "$summary"
    models+=" $presets" ;;
  esac
  if [ -n "$old" ]; then
    stamp "old against new binary: score logit hashes and greedy tokens"
    # (ids below 499: the small presets' vocabulary; 300 of them: past one 256-key chunk)
    ids40=$(seq -s, 3 7 283); ids300=$(for i in $(seq 0 299); do echo $(( (i * 37 + 5) % 499 )); done | paste -sd,)
    for m in ${OLDNEW_MODELS:-$models}; do
      for q in "" "--quantize 4"; do old_new_bits "$work/$m" "$q" "$ids40" "$ids300"; done
    done
  fi
  stamp done
  exit 0
fi

find_ncu
note "ncu: ${ncu:-none}"
first=1
for spec in ${SHAPES:-qwen3-30b-a3b:12 qwen3.5-35b-a3b:12 gemma-4-26b-a4b:6 qwen3-8b:12}; do
  s="${spec%%:*}"; layers="${spec##*:}"
  m="$work/$s"
  "$bin" make-random --like "$s" --layers "$layers" -o "$m" --dtype bf16 --seed 5 >/dev/null 2>&1 ||
    { note "$s: make-random failed"; continue; }
  if [ -n "$old" ]; then
    for rp in ${RUNS:-1:128 1:2048 2:128}; do  # round:prompt tokens
      r="${rp%%:*}"; p="${rp##*:}"
        # old, new, then new under each of VARIANT_ENV's ';'-separated environments.
        IFS=';' read -ra variants <<<"${VARIANT_ENV:-}"
        for which in old new "${variants[@]}"; do
          b=$([ "$which" = old ] && echo "$old" || echo "$bin")
          label=$which vars=""
          case "$which" in old|new) ;; *) label="new under $which" vars="$which" ;; esac
          d=$(env $vars "$b" bench -m "$m" --device cuda -p "$p" -n 64 -r 3 2>&1 | tee -a "$out/bench_$s.txt" |
              awk '/^prefill/ {printf "prefill %s tok/s, ", $3} /^decode/ {print "decode", $3, $7, $8}')
          note "$s ($layers layers) round $r -p $p $label: $d"
        done
    done
  else
    stamp "$s: bench"
    "$bin" bench -m "$m" --device cuda -p 128 -n 64 -r 3 2>&1 | tee "$out/bench_$s.txt" |
      grep -E "^(prefill|decode)" | sed "s/^/$s /" | tee -a "$summary"
  fi
  if [ "${OPPROF:-1}" != 0 ]; then
    stamp "$s: op profile"
    LOCKSTEP_CUDA_PROFILE=1 "$bin" bench -m "$m" --device cuda -p 16 -n 32 -r 1 \
      >"$out/profile_$s.txt" 2>&1
  fi
  if [ -n "$ncu" ] && [ "${NCU:-first}" != 0 ] && { [ "${NCU:-first}" = all ] || [ $first = 1 ]; }; then
    stamp "$s: ncu"
    LOCKSTEP_CUDA_GRAPHS=0 timeout 300 "$ncu" --clock-control none --csv --print-units base \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum \
      "$bin" bench -m "$m" --device cuda -p 4 -n 3 -r 1 >"$out/ncu_$s.csv" 2>"$out/ncu_$s.err"
    note "$s: ncu rc $?, $(wc -l <"$out/ncu_$s.csv") lines"
  fi
  first=0
  rm -rf "$m"
done
stamp done
