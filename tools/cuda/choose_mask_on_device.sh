#!/usr/bin/env bash
# Constrained token choice on the GPU machine: the device choose kernel's tests (masked rows
# bitwise against the host's masked choice among them, tests/cuda/choose_test.cpp), then the
# constrained / unconstrained decode ratio on Qwen3's vocabulary for the bench schema and for
# json_object (tools/bench/constrained_on_device.sh). Run from the repo root after
# tools/cuda/pack_engine.sh (with -DLOCKSTEP_TESTS=ON, so the pack has cuda_tests) and
# tools/bench/make_qwen3tok_carry.sh; carry .cuda-carry-engine-xz and .cuda-carry-qwen3tok.
#   tools/cuda/choose_mask_on_device.sh [pairs]
set -uo pipefail
root="$(pwd)"
. "$root/tools/cuda/engine_env.sh"  # $carry, $bin
status=0
"$carry/bin/run-cuda_tests" --gtest_filter='Choose.*' || status=1
"$root/tools/bench/constrained_on_device.sh" "${1:-4}" || status=1
"$root/tools/bench/constrained_on_device.sh" "${1:-4}" -- --json-object || status=1
exit "$status"
