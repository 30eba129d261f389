#!/usr/bin/env bash
# Installs what lockstep needs on Debian 12, only what is missing. Idempotent and non-interactive.
# Run as root (CI and fresh machines are root); otherwise it uses sudo when available.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libhwy-dev            # Highway: portable SIMD with runtime dispatch
  nlohmann-json3-dev    # JSON (config.json, tokenizer.json, CLI --json)
  libcli11-dev          # command-line parsing
  libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev          # tokenizer pre-tokenizer regexes (JIT)
  libutf8proc-dev       # NFC / NFKC normalizers
  libboost1.81-dev      # Beast/Asio (header-only): the OpenAI-compatible server's HTTP
  python3
  python3-jinja2        # reference renderer for the chat-template parity test
  json-schema-test-suite  # the JSON Schema organisation's cases (constraints_tests)
)
# Node.js and npm run the reference tokenizer library and the OpenAI client in tests. A machine
# may carry its own Node.js build (which bundles npm and conflicts with Debian's npm package), so
# check for the commands, not the packages.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
