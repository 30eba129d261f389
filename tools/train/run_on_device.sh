#!/usr/bin/env bash
# The one command that makes lockstep's shipped models, on the GPU machine, from the repository root:
#   bash tools/train/run_on_device.sh [train.py options]
# Writes to $OUT: train.log, results.json and models.tgz.part-NN (a tar of models/, split in 15 MiB
# pieces for transfer). Unpack here with
#   cat models.tgz.part-* | tar xzf - -C .        (creates models/<name>/...)
# Work files (tokenizer, tokens, ckpt.pt) stay in /tmp/lockstep-train; --resume reuses them.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/lockstep-train-out}"
work=/tmp/lockstep-train
mkdir -p "$out" "$work"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=true
python3 tools/train/train.py --work "$work" --out "$work/out" "$@" 2>&1 | tee "$out/train.log"
rc=${PIPESTATUS[0]}
cp "$work/out/results.json" "$out/" 2>/dev/null
if [ -d "$work/out/models" ]; then
  tar czf - -C "$work/out" models | split -b 15m -d - "$out/models.tgz.part-"
fi
ls -la "$out"
exit "$rc"
