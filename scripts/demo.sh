#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, and generate text.
# Usage: scripts/demo.sh [extra generate flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
model="${LOCKSTEP_MODEL:-}"
if [ -z "$model" ]; then
  # No shipped model yet: a random checkpoint with Qwen3's architecture (tiny, so it is quick).
  model=build/demo-model
  [ -f "$model/config.json" ] || build/lockstep make-random --like tiny-qwen3 -o "$model"
  build/lockstep inspect -m "$model"
  exec build/lockstep generate -m "$model" --prompt-ids 1,2,3,4 -n 32 "$@"
fi
exec build/lockstep generate -m "$model" -p "def parse_args(" -n 64 "$@"
