#!/usr/bin/env bash
# Configures and builds the release tree into build/ (binary: build/lockstep).
# Usage: scripts/build.sh [preset]   (release by default; ci adds -Werror)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
