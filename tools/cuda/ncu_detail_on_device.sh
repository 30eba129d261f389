#!/usr/bin/env bash
# Why a few small kernels take what they take: Nsight Compute's detail sections (launch, occupancy,
# speed of light, memory, warp stall reasons, scheduler) for the kernels whose names match KERNELS
# in a short eager decode of one random checkpoint (LIKE, default qwen3.5-35b-a3b, LAYERS layers,
# BF16), caches flushed between kernels (ncu's default) as a decode step's state and weights would
# be after a step that read gigabytes. `--clock-control none` (METHOD.md). Output:
# $OUT/ncu_detail.txt. Run from the repo root with carry [".cuda-carry-engine-xz"].
#   KERNELS   ncu --kernel-name regex (default: the recurrence, decode attention, routing, combine)
#   SKIP / COUNT   launches of those kernels skipped, then profiled (default 24 / 16)
set -uo pipefail
. "$(dirname "$0")/device_script.sh"
find_ncu
[ -n "$ncu" ] || { note "no ncu on this machine"; exit 1; }
nvidia-smi -L | tee -a "$summary"
like="${LIKE:-qwen3.5-35b-a3b}" layers="${LAYERS:-4}"
m="/tmp/lockstep-ncu-detail/$like"
rm -rf "$m" && mkdir -p "$(dirname "$m")"
stamp "make-random $like ($layers layers)"
"$bin" make-random --like "$like" --layers "$layers" -o "$m" --dtype bf16 --seed 5 >/dev/null 2>&1 ||
  { note "make-random failed"; exit 1; }
kernels="${KERNELS:-deltanet_recur|attn_decode|attention_prep|moe_route_group_one|moe_combine}"
stamp "ncu: $kernels"
LOCKSTEP_CUDA_GRAPHS=0 timeout 400 "$ncu" --clock-control none --kernel-name "regex:$kernels" \
  --launch-skip "${SKIP:-24}" --launch-count "${COUNT:-16}" \
  --section LaunchStats --section Occupancy --section SpeedOfLight \
  --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  "$bin" bench -m "$m" --device cuda -p 128 -n 4 -r 1 >"$out/ncu_detail.txt" 2>"$out/ncu_detail.err"
note "ncu exit $?; $(grep -c '^  [a-z_]' "$out/ncu_detail.txt") kernel reports"
stamp done
