#!/usr/bin/env bash
# The one command to run on the GPU machine (from the repository root):
#   bash tools/reference/run_on_device.sh
# Makes every fixture into a scratch folder (CPU, float64), then packs them as
# $OUT/fixtures.tgz with the log as $OUT/make_fixtures.log. Unpack here with
#   tar xzf fixtures.tgz -C tests/fixtures
# Extra arguments go to make_fixtures.py (for example --only qwen35-f32).
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/reference-out}"
work="$(mktemp -d)"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES="" TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
python3 tools/reference/make_fixtures.py --out "$work/fixtures" "$@" 2>&1 | tee "$out/make_fixtures.log"
rc=${PIPESTATUS[0]}
tar czf "$out/fixtures.tgz" -C "$work/fixtures" .
ls -la "$out"
exit "$rc"
