#!/usr/bin/env bash
# What each class of launches costs inside a replayed decode step (docs/benchmarks.md, "Where a
# decode step's time goes inside the graph"): batch-1 decode of one random checkpoint with each
# class made twice (LOCKSTEP_CUDA_TIMING_TWICE) or left out (LOCKSTEP_CUDA_TIMING_SKIP), alternated
# with the default, through decode_configs_on_device.sh (LIKE, LAYERS, ROUNDS as there; no batched
# runs, no op tests). The difference in step time against the default is the class's cost; a
# timing experiment only (the output under these variables is not the model's).
# Run from the repo root with carry [".cuda-carry-engine-xz"] (tools/cuda/pack_engine.sh).
#   TWICE   ';'-separated prefix lists to double (default: each row op on its own, the experts)
#   SKIPS   ';'-separated prefix lists to leave out (default: the row ops, the experts, both)
set -uo pipefail
row_ops=rms_norm_kernel,silu_mul_kernel,moe_combine_kernel,deltanet_recur_kernel
row_ops+=,deltanet_prepare_kernel,attn,attention_prep,add_kernel,copy_2d_kernel
row_ops+=,sigmoid_mul_kernel,gated_rms_norm_kernel,rope_kernel,kv_write_kernel,gelu_tanh_mul_kernel
twice="${TWICE:-deltanet_recur_kernel;attn,attention_prep;rms_norm_kernel;moe_route_group_one_kernel;moe_combine_kernel;deltanet_prepare_kernel;silu_mul_kernel;linear_experts}"
skips="${SKIPS:-$row_ops;linear_experts;$row_ops,linear_experts}"
envs="LOCKSTEP_CUDA_GRAPH_STATS=1"
IFS=';' read -ra t <<<"$twice"
for p in "${t[@]}"; do envs+=";LOCKSTEP_CUDA_TIMING_TWICE=$p"; done
IFS=';' read -ra s <<<"$skips"
for p in "${s[@]}"; do envs+=";LOCKSTEP_CUDA_TIMING_SKIP=$p"; done
DECODE_ENVS="$envs" BATCH_ENVS="" TESTS="${TESTS:-none}" \
  exec bash "$(dirname "$0")/decode_configs_on_device.sh"
