#!/usr/bin/env bash
# Decode speed of lockstep's quantized weights against llama.cpp's closest formats, on the same
# random Qwen3-1.7B-shaped BF16 checkpoint (issue 9). Runs are interleaved engine by engine, round
# by round, so the noise of a shared machine spreads over all of them alike.
#
# Usage: tools/bench/quant_vs_llamacpp.sh LLAMA_BUILD_DIR [workdir=/tmp/quant-vs-llamacpp]
#                                          [rounds=3] [threads=2] [tokens=64] [reps=3]
#        ENGINES="ls:q8 ll:Q8_0 ..." overrides the engines run each round (default: all six below).
# LLAMA_BUILD_DIR must hold bin/llama-bench and bin/llama-quantize (llama.cpp is not part of this
# repository: build those two targets from its source). Python: standard library only.
#
# Made in WORKDIR (kept; an existing file is reused):
#   bf16/            lockstep make-random --like qwen3-1.7b --dtype bf16
#   q8/, q4/         lockstep quantize --bits 8|4 --group-size 64 (bf16 scales and biases)
#   bf16.gguf        the same tensors written as GGUF by the writer below (2-D tensors copied as
#                    BF16, norms widened to F32; tokenizer "no_vocab")
#   Q8_0, Q4_0-pure (llama-quantize --pure: every matrix Q4_0, the same bytes as lockstep 4-bit),
#   Q4_0, Q4_K_M     (llama-quantize defaults: the tied embedding / output becomes Q6_K)
# Each round runs, in this order: lockstep q8, llama Q8_0, lockstep q4, llama Q4_0-pure,
# llama Q4_0, llama Q4_K_M. lockstep: bench -p 1 -n N -r REPS (-p 0 is refused: one prompt
# token), llama.cpp: llama-bench -p 0 -n N -r REPS; both run one untimed warm-up first. Each
# run's median decode tok/s is kept (WORKDIR/runs.jsonl, rewritten each call); the summary gives
# the median over rounds and the per-round ratios. Results: docs/benchmarks.md, "Against
# llama.cpp (quantized)".
set -euo pipefail
cd "$(dirname "$0")/../.."
llama="${1:?usage: $0 LLAMA_BUILD_DIR [workdir] [rounds] [threads] [tokens]}"
work="${2:-/tmp/quant-vs-llamacpp}"; rounds="${3:-3}"; threads="${4:-2}"; n="${5:-64}"; reps="${6:-3}"
bin="${LOCKSTEP_BIN:-build/lockstep}"  # LOCKSTEP_BIN: another build's binary
mkdir -p "$work"
[ -f "$work/bf16/model.safetensors" ] || "$bin" make-random --like qwen3-1.7b -o "$work/bf16" --dtype bf16
for b in 8 4; do
  [ -f "$work/q$b/model.safetensors" ] ||
    "$bin" quantize -m "$work/bf16" -o "$work/q$b" --bits "$b" --group-size 64
done

if [ ! -f "$work/bf16.gguf" ]; then
python3 - "$work/bf16" "$work/bf16.gguf" <<'EOF'
# Minimal safetensors -> GGUF v3 writer for a dense Qwen3 checkpoint from lockstep make-random.
import json, struct, sys, os, array
src, dst = sys.argv[1], sys.argv[2]
cfg = json.load(open(os.path.join(src, "config.json")))
f = open(os.path.join(src, "model.safetensors"), "rb")
hlen = struct.unpack("<Q", f.read(8))[0]
hdr = json.loads(f.read(hlen)); hdr.pop("__metadata__", None)
base = 8 + hlen
arch = "qwen3"
names = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
         "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
         "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
         "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
         "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
         "mlp.down_proj.weight": "ffn_down.weight"}
def gname(n):
    n = n.replace("model.", "", 1)
    top = {"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight",
           "lm_head.weight": "output.weight"}
    if n in top: return top[n]
    p = n.split("."); assert p[0] == "layers", n
    return "blk.%s.%s" % (p[1], names[".".join(p[2:])])
def s(x):
    b = x.encode(); return struct.pack("<Q", len(b)) + b
kv = []
def put(k, t, v):
    kv.append(s(k) + struct.pack("<I", t) + (s(v) if t == 8 else struct.pack({4: "<I", 6: "<f"}[t], v)))
put("general.architecture", 8, arch)
put("general.name", 8, "lockstep-random-" + os.path.basename(src.rstrip("/")))
put("general.alignment", 4, 32)
for k, c in [("context_length", "max_position_embeddings"), ("embedding_length", "hidden_size"),
             ("block_count", "num_hidden_layers"), ("feed_forward_length", "intermediate_size"),
             ("attention.head_count", "num_attention_heads"), ("attention.head_count_kv", "num_key_value_heads"),
             ("attention.key_length", "head_dim"), ("attention.value_length", "head_dim")]:
    put(arch + "." + k, 4, cfg[c])
put(arch + ".rope.freq_base", 6, float(cfg["rope_theta"]))
put(arch + ".attention.layer_norm_rms_epsilon", 6, float(cfg["rms_norm_eps"]))
put(arch + ".vocab_size", 4, cfg["vocab_size"])
put("tokenizer.ggml.model", 8, "no_vocab")
tensors = []
for n, t in hdr.items():
    shape = t["shape"]
    if len(shape) == 1: ot, nb = 0, shape[0] * 4  # norms as F32, like llama.cpp's converter
    else: ot, nb = {"BF16": 30, "F16": 1, "F32": 0}[t["dtype"]], t["data_offsets"][1] - t["data_offsets"][0]
    tensors.append((gname(n), n, shape, ot, nb))
tensors.sort()
A = 32; infos = b""; off = 0; offs = []
for g, n, shape, ot, nb in tensors:
    off = (off + A - 1) // A * A; offs.append(off)
    dims = list(reversed(shape))
    infos += s(g) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ot, off)
    off += nb
head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)) + b"".join(kv) + infos
out = open(dst, "wb"); out.write(head); out.write(b"\0" * ((-len(head)) % A)); data0 = out.tell()
for (g, n, shape, ot, nb), o in zip(tensors, offs):
    out.write(b"\0" * (data0 + o - out.tell()))
    t = hdr[n]; f.seek(base + t["data_offsets"][0])
    raw = f.read(t["data_offsets"][1] - t["data_offsets"][0])
    if ot == 0 and t["dtype"] == "BF16":
        raw = b"".join(struct.pack("<I", x << 16) for x in array.array("H", raw))
    elif ot == 0 and t["dtype"] == "F16":
        raw = b"".join(struct.pack("<f", struct.unpack("<e", raw[i:i+2])[0]) for i in range(0, len(raw), 2))
    assert len(raw) == nb, (n, len(raw), nb)
    out.write(raw)
out.close()
print("wrote", dst, len(tensors), "tensors")
EOF
fi

q="$llama/bin/llama-quantize"
[ -f "$work/Q8_0.gguf" ]      || "$q" "$work/bf16.gguf" "$work/Q8_0.gguf" Q8_0 "$threads"
[ -f "$work/Q4_0-pure.gguf" ] || "$q" --pure "$work/bf16.gguf" "$work/Q4_0-pure.gguf" Q4_0 "$threads"
[ -f "$work/Q4_0.gguf" ]      || "$q" "$work/bf16.gguf" "$work/Q4_0.gguf" Q4_0 "$threads"
[ -f "$work/Q4_K_M.gguf" ]    || "$q" "$work/bf16.gguf" "$work/Q4_K_M.gguf" Q4_K_M "$threads"

read -r -a runs <<< "${ENGINES:-ls:q8 ll:Q8_0 ls:q4 ll:Q4_0-pure ll:Q4_0 ll:Q4_K_M}"
log="$work/runs.jsonl"; : > "$log"
for r in $(seq 1 "$rounds"); do
  for e in "${runs[@]}"; do
    kind=${e%%:*}; name=${e##*:}
    load=$(cut -d' ' -f1 /proc/loadavg)
    if [ "$kind" = ls ]; then
      out=$("$bin" bench -m "$work/$name" --threads "$threads" -p 1 -n "$n" -r "$reps" --json 2>/dev/null)
      tps=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["decode"]["tok_s"]["median"])' "$out")
    else
      out=$("$llama/bin/llama-bench" -m "$work/$name.gguf" -t "$threads" -p 0 -n "$n" -r "$reps" -o json 2>/dev/null)
      tps=$(python3 -c 'import json,sys,statistics; print(statistics.median(json.loads(sys.argv[1])[0]["samples_ts"]))' "$out")
    fi
    echo "{\"round\": $r, \"engine\": \"$e\", \"tok_s\": $tps, \"load\": $load}" | tee -a "$log"
  done
done

python3 - "$log" <<'EOF'
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows: by.setdefault(r["engine"], {})[r["round"]] = r["tok_s"]
med = {e: st.median(v.values()) for e, v in by.items()}
print("\nmedian decode tok/s over rounds:")
for e, m in med.items():
    print("  %-14s %7.2f   rounds: %s" % (e, m, " ".join("%.2f" % by[e][k] for k in sorted(by[e]))))
print("\nlockstep / llama.cpp (ratio of medians; per-round ratios):")
for a, b in [("ls:q8", "ll:Q8_0"), ("ls:q4", "ll:Q4_0-pure"), ("ls:q4", "ll:Q4_0"), ("ls:q4", "ll:Q4_K_M")]:
    if a not in by or b not in by: continue
    per = [by[a][k] / by[b][k] for k in sorted(by[a]) if k in by[b]]
    print("  %-6s vs %-12s %5.2f   rounds: %s" % (a, b, med[a] / med[b], " ".join("%.2f" % x for x in per)))
EOF
