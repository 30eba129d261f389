#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, and generate text.
# Usage: scripts/demo.sh [extra generate flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
# With no -m, lockstep uses the shipped model (models/lockstep-code-16m, or $LOCKSTEP_MODEL).
exec build/lockstep generate -p "def parse_args(" -n 64 "$@"
