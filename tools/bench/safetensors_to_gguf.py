#!/usr/bin/env python3
"""Minimal safetensors -> GGUF v3 writer for a Qwen3, Qwen3-MoE, Qwen3.5-MoE or dense Gemma 4
checkpoint (standard library only).

Usage: tools/bench/safetensors_to_gguf.py SRC_DIR DST.gguf

SRC_DIR holds config.json and either model.safetensors or a sharded checkpoint
(model.safetensors.index.json naming model-0000x-of-0000y.safetensors; without an index, every
*.safetensors file in SRC_DIR is read). Made for checkpoints from `lockstep make-random --like
qwen3-*`, so llama.cpp (llama-bench) can run the very same weights: 2-D tensors are copied as they
are (BF16 / F16 / F32), 1-D tensors (norms) are widened to F32 like llama.cpp's own converter, and
the tokenizer is "no_vocab" unless SRC_DIR holds a BPE tokenizer.json (Qwen's: then the vocabulary
llama-server needs, written as llama.cpp's converter writes it). A qwen3_moe checkpoint (one tensor per expert, as `make-random --like
qwen3-30b-a3b` and the Hub write them) becomes llama.cpp's qwen3moe: the router as
ffn_gate_inp, each layer's experts stacked into ffn_{gate,up,down}_exps [E, rows, cols]. A dense
gemma4_text checkpoint (`make-random --like gemma-4-31b`) becomes llama.cpp's gemma4: its four
norms per layer as written (Gemma 4's RMSNorm has no +1), layer_scalar as layer_output_scale,
per-layer KV head counts and the sliding-window pattern as arrays, and the proportional RoPE of
full-attention layers as the rope_freqs factors llama.cpp's converter writes; per-layer inputs
and the MoE block are refused. A qwen3_5_moe checkpoint becomes llama.cpp's qwen35moe as its
own converter writes it: norms as (1 + w), A_log as -exp(A_log), the Gated DeltaNet's value heads
in llama.cpp's tiled order, the conv kernel as F32, the shared expert and its gate; the MTP head
is left out. Tensor data is copied in the kernel (copy_file_range; plain reads
and writes where that is refused), so a 16 GB checkpoint costs about what copying the file costs.
The output is written to DST.gguf.part and renamed when complete, so a partial file is never
mistaken for a finished one.
"""
import array
import errno
import json
import math
import os
import struct
import sys
import time

ALIGN = 32
# Attention and MLP tensors, named alike in both families.
ATTN_MLP_NAMES = {
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
LAYER_NAMES = {  # qwen3, qwen3moe
    **ATTN_MLP_NAMES,
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate.weight": "ffn_gate_inp.weight",  # the MoE router
}
# Gemma 4 (dense, gemma4_text): four norms per layer and the per-layer output scale; full-attention
# layers with attention_k_eq_v have no v_proj (llama.cpp then reads k as v).
GEMMA4_LAYER_NAMES = {
    **ATTN_MLP_NAMES,
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
    "layer_scalar": "layer_output_scale.weight",
}
# Qwen3.5-MoE (qwen35moe): Gated DeltaNet layers, gated full attention, routed experts and a
# shared expert with its sigmoid gate; llama.cpp names the attention block's second norm
# post_attention_norm here.
QWEN35_LAYER_NAMES = {
    **ATTN_MLP_NAMES,
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "mlp.gate.weight": "ffn_gate_inp.weight",
    "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
    "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
    "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight",
    "linear_attn.in_proj_qkv.weight": "attn_qkv.weight",
    "linear_attn.in_proj_z.weight": "attn_gate.weight",
    "linear_attn.in_proj_b.weight": "ssm_beta.weight",
    "linear_attn.in_proj_a.weight": "ssm_alpha.weight",
    "linear_attn.conv1d.weight": "ssm_conv1d.weight",
    "linear_attn.dt_bias": "ssm_dt.bias",
    "linear_attn.A_log": "ssm_a",
    "linear_attn.norm.weight": "ssm_norm.weight",
    "linear_attn.out_proj.weight": "ssm_out.weight",
}
EXPERT_NAMES = {"gate_proj.weight": "ffn_gate_exps.weight", "up_proj.weight": "ffn_up_exps.weight",
                "down_proj.weight": "ffn_down_exps.weight"}
TOP_NAMES = {"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
GGML_TYPE = {"F32": 0, "F16": 1, "BF16": 30}


def gguf_name(n, arch):
    """(GGUF name, expert index or None): experts.{e}.* of a layer stack into one GGUF tensor.
    (None, None): a tensor the GGUF leaves out (Qwen3.5's MTP head: llama-bench does not draft)."""
    if arch == "qwen35moe" and n.startswith("mtp."):
        return None, None
    n = n.replace("model.language_model.", "", 1).replace("model.", "", 1)
    if n in TOP_NAMES:
        return TOP_NAMES[n], None
    p = n.split(".")
    layer_names = {"gemma4": GEMMA4_LAYER_NAMES, "qwen35moe": QWEN35_LAYER_NAMES}.get(arch, LAYER_NAMES)
    if (arch != "gemma4" and p[0] == "layers" and p[2:4] == ["mlp", "experts"]
            and ".".join(p[5:]) in EXPERT_NAMES):
        return "blk.%s.%s" % (p[1], EXPERT_NAMES[".".join(p[5:])]), int(p[4])
    if p[0] != "layers" or ".".join(p[2:]) not in layer_names:
        sys.exit("safetensors_to_gguf: no GGUF name for tensor %r (%s)" % (n, arch))
    return "blk.%s.%s" % (p[1], layer_names[".".join(p[2:])]), None


def shard_files(src):
    """The safetensors files of SRC, in a stable order."""
    index = os.path.join(src, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        return sorted(set(weight_map.values()))
    if os.path.exists(os.path.join(src, "model.safetensors")):
        return ["model.safetensors"]
    files = sorted(f for f in os.listdir(src) if f.endswith(".safetensors"))
    if not files:
        sys.exit("safetensors_to_gguf: no model.safetensors, index or *.safetensors in " + src)
    return files


def read_headers(src):
    """{tensor name: (fd, absolute data offset, byte count, dtype, shape)} over every shard."""
    tensors = {}
    for name in shard_files(src):
        fd = os.open(os.path.join(src, name), os.O_RDONLY)
        hlen = struct.unpack("<Q", os.pread(fd, 8, 0))[0]
        hdr = json.loads(os.pread(fd, hlen, 8))
        hdr.pop("__metadata__", None)
        for n, t in hdr.items():
            if n in tensors:
                sys.exit("safetensors_to_gguf: tensor %r is in more than one shard" % n)
            b, e = t["data_offsets"]
            tensors[n] = (fd, 8 + hlen + b, e - b, t["dtype"], t["shape"])
    return tensors


def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def text_config(cfg):
    """The language model's config (a wrapped gemma4 or qwen3_5_moe keeps it under text_config)."""
    return cfg["text_config"] if cfg.get("model_type") in ("gemma4", "qwen3_5_moe") else cfg


def arch_of(cfg):
    t = cfg.get("model_type")
    if t in ("gemma4", "gemma4_text"):
        tc = text_config(cfg)
        # What this writer maps: Gemma 4's dense layers. Per-layer inputs and the MoE block have
        # tensors of their own that it does not write; refuse rather than write a wrong model.
        for field, off in (("hidden_size_per_layer_input", 0), ("enable_moe_block", False),
                           ("use_double_wide_mlp", False)):
            if (tc.get(field) or off) != off:
                sys.exit("safetensors_to_gguf: gemma4 with %s = %r is not supported (dense "
                         "Gemma 4 only)" % (field, tc.get(field)))
        return "gemma4"
    if t in ("qwen3_5_moe", "qwen3_5_moe_text"):
        return "qwen35moe"
    if t not in ("qwen3", "qwen3_moe"):
        sys.exit("safetensors_to_gguf: model_type %r (expected qwen3, qwen3_moe, qwen3_5_moe or "
                 "gemma4_text)" % t)
    return "qwen3moe" if t == "qwen3_moe" else "qwen3"


def gemma4_rope_freqs(cfg):
    """Proportional RoPE on full-attention layers as llama.cpp's NeoX rope takes it: frequency
    factors of 1 for the rotated pairs and 1e30 (no rotation) for the rest of the global head."""
    rp = cfg["rope_parameters"]["full_attention"]
    if rp.get("rope_type") != "proportional":
        sys.exit("safetensors_to_gguf: gemma4 full-attention rope_type %r (expected proportional)"
                 % rp.get("rope_type"))
    half = cfg["global_head_dim"] // 2
    rot = int(cfg["global_head_dim"] * rp["partial_rotary_factor"] / 2)
    return struct.pack("<%df" % half, *([1.0] * rot + [1e30] * (half - rot)))


def metadata(src, cfg):
    ARCH = arch_of(cfg)
    cfg = text_config(cfg)
    kv = []

    def put(k, t, v):
        if t == 9:  # array: (element type, values)
            et, vals = v
            if et == 8:  # strings
                body = b"".join(s(x) for x in vals)
            else:
                body = array.array({4: "I", 5: "i", 6: "f"}[et], vals).tobytes() if et != 7 else \
                    b"".join(struct.pack("<?", x) for x in vals)
            kv.append(s(k) + struct.pack("<IIQ", 9, et, len(vals)) + body)
            return
        kv.append(s(k) + struct.pack("<I", t) +
                  (s(v) if t == 8 else struct.pack({4: "<I", 6: "<f", 7: "<?"}[t], v)))

    put("general.architecture", 8, ARCH)
    put("general.name", 8, "lockstep-random-" + os.path.basename(src.rstrip("/")))
    put("general.alignment", 4, ALIGN)
    # (Qwen3.5-MoE has no dense intermediate_size: its experts' width stands in, as llama.cpp
    # reads it only where the expert width is missing.)
    ffn = "intermediate_size" if "intermediate_size" in cfg else "moe_intermediate_size"
    for k, c in [("context_length", "max_position_embeddings"), ("embedding_length", "hidden_size"),
                 ("block_count", "num_hidden_layers"), ("feed_forward_length", ffn),
                 ("attention.head_count", "num_attention_heads")]:
        put(ARCH + "." + k, 4, cfg[c])
    if ARCH == "gemma4":
        gemma4_metadata(cfg, put)
    elif ARCH == "qwen35moe":
        qwen35moe_metadata(cfg, put)
    else:
        for k, c in [("attention.head_count_kv", "num_key_value_heads"),
                     ("attention.key_length", "head_dim"), ("attention.value_length", "head_dim")]:
            put(ARCH + "." + k, 4, cfg[c])
        put(ARCH + ".rope.freq_base", 6, float(cfg["rope_theta"]))
        put(ARCH + ".attention.layer_norm_rms_epsilon", 6, float(cfg["rms_norm_eps"]))
        put(ARCH + ".vocab_size", 4, cfg["vocab_size"])
    if ARCH == "qwen3moe":
        put(ARCH + ".expert_count", 4, cfg.get("num_experts", cfg.get("num_local_experts")))
        put(ARCH + ".expert_used_count", 4, cfg["num_experts_per_tok"])
        put(ARCH + ".expert_feed_forward_length", 4, cfg["moe_intermediate_size"])
    if os.path.exists(os.path.join(src, "tokenizer.json")):
        bpe_vocab(src, cfg["vocab_size"], put)
    else:
        put("tokenizer.ggml.model", 8, "no_vocab")
    return kv


# llama.cpp's token types (llama_token_type): what its converter writes for a BPE vocabulary.
TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED = 1, 3, 4


def bpe_vocab(src, vocab_size, put):
    """SRC_DIR's byte-level BPE tokenizer (tokenizer.json, as Qwen's) as llama.cpp's converter
    writes it for Qwen ("gpt2" model, "qwen2" pre-tokenizer): every id below vocab_size gets a
    token, ids the tokenizer lacks become [PAD<id>] (user defined), special added tokens are
    control tokens; merges as "a b"; eos and padding from tokenizer_config.json. llama-server
    refuses a GGUF without a vocabulary; llama-bench does not need one."""
    with open(os.path.join(src, "tokenizer.json")) as f:
        tok = json.load(f)
    model = tok.get("model", {})
    if model.get("type") != "BPE":
        sys.exit("safetensors_to_gguf: %s/tokenizer.json: model.type %r (expected BPE)"
                 % (src, model.get("type")))
    by_id = {i: t for t, i in model["vocab"].items()}
    special = {}
    for a in tok.get("added_tokens", []):
        by_id[a["id"]] = a["content"]
        special[a["id"]] = a.get("special", False)
    if max(by_id) >= vocab_size:
        sys.exit("safetensors_to_gguf: %s/tokenizer.json has id %d, past vocab_size %d"
                 % (src, max(by_id), vocab_size))
    tokens, types = [], []
    for i in range(vocab_size):
        if i not in by_id:
            tokens.append("[PAD%d]" % i)
            types.append(TOKEN_USER_DEFINED)
        else:
            tokens.append(by_id[i])
            types.append(TOKEN_NORMAL if i not in special else
                         TOKEN_CONTROL if special[i] else TOKEN_USER_DEFINED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    put("tokenizer.ggml.model", 8, "gpt2")
    put("tokenizer.ggml.pre", 8, "qwen2")
    put("tokenizer.ggml.tokens", 9, (8, tokens))
    put("tokenizer.ggml.token_type", 9, (5, types))
    put("tokenizer.ggml.merges", 9, (8, merges))
    tc_path = os.path.join(src, "tokenizer_config.json")
    tc = json.load(open(tc_path)) if os.path.exists(tc_path) else {}
    ids = {t: i for i, t in by_id.items()}

    def token_id(field):
        v = tc.get(field)
        if isinstance(v, dict):
            v = v.get("content")
        return ids.get(v) if v is not None else None
    for field, key in (("eos_token", "eos_token_id"), ("pad_token", "padding_token_id"),
                       ("bos_token", "bos_token_id")):
        i = token_id(field)
        if i is not None:
            put("tokenizer.ggml." + key, 4, i)
    put("tokenizer.ggml.add_bos_token", 7, bool(tc.get("add_bos_token", False)))
    if isinstance(tc.get("chat_template"), str):
        put("tokenizer.chat_template", 8, tc["chat_template"])


def qwen35moe_metadata(cfg, put):
    """What llama.cpp's qwen35moe reads beyond the shared sizes (its converter's keys): attention
    heads and RoPE (partial, interleaved MRoPE sections), the experts, the shared expert, the
    Gated DeltaNet sizes and which layers are recurrent."""
    A = "qwen35moe"
    rp = cfg.get("rope_parameters") or {}
    put(A + ".attention.head_count_kv", 4, cfg["num_key_value_heads"])
    put(A + ".attention.key_length", 4, cfg["head_dim"])
    put(A + ".attention.value_length", 4, cfg["head_dim"])
    put(A + ".rope.freq_base", 6, float(rp.get("rope_theta", cfg.get("rope_theta", 10000000.0))))
    put(A + ".rope.dimension_count", 4,
        int(cfg["head_dim"] * rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 0.25))))
    sections = list(rp.get("mrope_section") or [11, 11, 10])
    put(A + ".rope.dimension_sections", 9, (5, (sections + [0, 0, 0, 0])[:4]))
    put(A + ".attention.layer_norm_rms_epsilon", 6, float(cfg["rms_norm_eps"]))
    put(A + ".vocab_size", 4, cfg["vocab_size"])
    put(A + ".expert_count", 4, cfg["num_experts"])
    put(A + ".expert_used_count", 4, cfg["num_experts_per_tok"])
    put(A + ".expert_feed_forward_length", 4, cfg["moe_intermediate_size"])
    put(A + ".expert_shared_feed_forward_length", 4, cfg["shared_expert_intermediate_size"])
    put(A + ".ssm.conv_kernel", 4, cfg["linear_conv_kernel_dim"])
    put(A + ".ssm.state_size", 4, cfg["linear_key_head_dim"])
    put(A + ".ssm.group_count", 4, cfg["linear_num_key_heads"])
    put(A + ".ssm.time_step_rank", 4, cfg["linear_num_value_heads"])
    put(A + ".ssm.inner_size", 4, cfg["linear_value_head_dim"] * cfg["linear_num_value_heads"])
    put(A + ".full_attention_interval", 4, cfg.get("full_attention_interval", 4))
    if cfg.get("layer_types"):
        put(A + ".attention.recurrent_layers", 9,
            (7, [t == "linear_attention" for t in cfg["layer_types"]]))


def qwen35_v_order(num_k, per_k):
    """llama.cpp's order of Qwen3.5's value heads: the checkpoint groups them by key head
    (k0: v0..v{r-1}, k1: ...); its converter tiles them (v0 of every key head, then v1, ...), so
    that ggml broadcasts the key heads. Position p holds checkpoint head order[p]."""
    return [g * per_k + j for j in range(per_k) for g in range(num_k)]


def permute_blocks(raw, order, block):
    """raw as consecutive blocks of `block` bytes, reordered: block p of the result is block
    order[p] of raw (blocks past len(order) stay where they are)."""
    out = bytearray(raw)
    for p, src in enumerate(order):
        out[p * block:(p + 1) * block] = raw[src * block:(src + 1) * block]
    return bytes(out)


def qwen35_transformed(name):
    """Whether qwen35_transform may rewrite this tensor (the others are copied without a read)."""
    return name.endswith("norm.weight") or ".linear_attn." in name


def qwen35_transform(name, raw, dtype, shape, cfg):
    """A Qwen3.5 tensor's bytes as llama.cpp's converter writes them, or None to copy as is:
    (1 + w) for the zero-centred RMSNorms (not the DeltaNet output norm), A_log as -exp(A_log),
    the value heads in llama.cpp's order (rows of qkv's value part, z, a, b and the conv's value
    channels; out_proj's columns; A_log and dt_bias), the conv kernel as F32 [C, K]."""
    esize = {"BF16": 2, "F16": 2, "F32": 4}[dtype]
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    order = qwen35_v_order(nk, nv // nk) if nv != nk else None

    def floats(b):
        return array.array("f", widen_to_f32(b, dtype))

    if name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight"):
        return array.array("f", (x + 1.0 for x in floats(raw))).tobytes()
    if ".linear_attn." not in name:
        return None
    if name.endswith(".A_log") or name.endswith(".dt_bias"):
        v = floats(raw)
        if name.endswith(".A_log"):
            v = array.array("f", (-math.exp(x) for x in v))
        b = v.tobytes()
        return permute_blocks(b, order, 4) if order else b
    if name.endswith(".conv1d.weight"):  # [C, 1, K] -> F32 [C, K], value channels reordered
        b = floats(raw).tobytes()
        k = shape[-1]
        if order:
            qk = 2 * nk * dk * k * 4
            b = b[:qk] + permute_blocks(b[qk:], order, dv * k * 4)
        return b
    if order is None:
        return None
    row = shape[-1] * esize  # bytes per row of a 2-D [rows, cols] matrix
    if name.endswith(".in_proj_qkv.weight"):
        qk = 2 * nk * dk * row
        return raw[:qk] + permute_blocks(raw[qk:], order, dv * row)
    if name.endswith(".in_proj_z.weight"):
        return permute_blocks(raw, order, dv * row)
    if name.endswith(".in_proj_a.weight") or name.endswith(".in_proj_b.weight"):
        return permute_blocks(raw, order, row)
    if name.endswith(".out_proj.weight"):  # columns: each row's value heads
        return b"".join(permute_blocks(raw[r * row:(r + 1) * row], order, dv * esize)
                        for r in range(shape[0]))
    return None


def gemma4_metadata(cfg, put):
    """What llama.cpp's gemma4 reads beyond the shared sizes: per-layer KV heads, the global and
    sliding head dims and RoPE, the window and its pattern, KV sharing, soft-capping."""
    A = "gemma4"
    swa = [t == "sliding_attention" for t in cfg["layer_types"]]
    put(A + ".vocab_size", 4, cfg["vocab_size"])
    put(A + ".attention.sliding_window", 4, cfg["sliding_window"])
    kv_swa = cfg["num_key_value_heads"]
    kv_full = cfg.get("num_global_key_value_heads") or kv_swa
    put(A + ".attention.head_count_kv", 9, (4, [kv_swa if w else kv_full for w in swa]))
    put(A + ".attention.key_length", 4, cfg["global_head_dim"])
    put(A + ".attention.value_length", 4, cfg["global_head_dim"])
    put(A + ".attention.key_length_swa", 4, cfg["head_dim"])
    put(A + ".attention.value_length_swa", 4, cfg["head_dim"])
    put(A + ".rope.dimension_count", 4, cfg["global_head_dim"])
    rp = cfg["rope_parameters"]
    put(A + ".rope.dimension_count_swa", 4,
        int(cfg["head_dim"] * rp["sliding_attention"].get("partial_rotary_factor", 1.0)))
    put(A + ".rope.freq_base", 6, float(rp["full_attention"]["rope_theta"]))
    put(A + ".rope.freq_base_swa", 6, float(rp["sliding_attention"]["rope_theta"]))
    put(A + ".attention.layer_norm_rms_epsilon", 6, float(cfg["rms_norm_eps"]))
    put(A + ".attention.sliding_window_pattern", 9, (7, swa))
    put(A + ".attention.shared_kv_layers", 4, cfg.get("num_kv_shared_layers") or 0)
    put(A + ".embedding_length_per_layer_input", 4, 0)
    if cfg.get("final_logit_softcapping"):
        put(A + ".final_logit_softcapping", 6, float(cfg["final_logit_softcapping"]))


def copy_range(src_fd, src_off, dst_fd, dst_off, n):
    """Copies n bytes inside the kernel where it can; plain reads and writes otherwise."""
    done = 0
    if copy_range.mode == "copy_file_range":
        try:
            while done < n:
                k = os.copy_file_range(src_fd, dst_fd, n - done, src_off + done, dst_off + done)
                if k == 0:
                    raise OSError(errno.EIO, "copy_file_range: unexpected end of file")
                done += k
            return
        except (OSError, AttributeError) as e:  # EXDEV, ENOSYS, EINVAL, EOPNOTSUPP, ...
            if done:
                raise
            copy_range.mode = "pread"
            print("safetensors_to_gguf: copy_file_range unusable (%s); copying through memory" % e,
                  file=sys.stderr)
    chunk = 64 << 20
    while done < n:
        buf = os.pread(src_fd, min(chunk, n - done), src_off + done)
        if not buf:
            raise OSError(errno.EIO, "pread: unexpected end of file")
        pwrite_all(dst_fd, buf, dst_off + done)
        done += len(buf)


# SAFETENSORS_TO_GGUF_COPY=pread skips copy_file_range (to test the fallbacks).
copy_range.mode = os.environ.get("SAFETENSORS_TO_GGUF_COPY", "copy_file_range")


def pwrite_all(fd, data, off):
    view = memoryview(data)
    while view:
        k = os.pwrite(fd, view, off)
        view, off = view[k:], off + k


def widen_to_f32(raw, dtype):
    """A 1-D BF16 or F16 tensor as little-endian F32 bytes."""
    if dtype == "BF16":
        h = array.array("H", raw)
        if sys.byteorder != "little":
            h.byteswap()
        w = array.array("I", (x << 16 for x in h))
        if sys.byteorder != "little":
            w.byteswap()
        return w.tobytes()
    if dtype == "F16":
        k = len(raw) // 2
        return struct.pack("<%df" % k, *struct.unpack("<%de" % k, raw))
    return raw


def convert(src, dst):
    t0 = time.time()
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    hdr = read_headers(src)
    kv = metadata(src, cfg)
    arch = arch_of(cfg)
    # Tensors made here rather than copied: GGUF name -> F32 bytes.
    extra = {"rope_freqs.weight": gemma4_rope_freqs(text_config(cfg))} if arch == "gemma4" else {}
    # GGUF tensor -> [source tensors in order] (one, or a layer's experts 0..E-1), shape, type, bytes.
    groups = {}
    for n, (fd, off, size, dtype, shape) in hdr.items():
        if dtype not in GGML_TYPE:
            sys.exit("safetensors_to_gguf: tensor %r has dtype %s (expected BF16, F16 or F32)"
                     % (n, dtype))
        g, expert = gguf_name(n, arch)
        if g is None:
            continue
        groups.setdefault(g, []).append((expert if expert is not None else 0, n))
    tensors = []
    for g, parts in groups.items():
        parts.sort()
        names = [n for _, n in parts]
        _, _, size, dtype, shape = hdr[names[0]]
        if len(names) > 1:  # stacked experts: [E] + the expert's own shape
            if [e for e, _ in parts] != list(range(len(parts))):
                sys.exit("safetensors_to_gguf: %s: experts %s are not 0..E-1" % (g, [e for e, _ in parts]))
            shape = [len(names)] + list(shape)
            size *= len(names)
        if len(shape) == 1:
            ot, nb = 0, shape[0] * 4  # norms as F32, like llama.cpp's converter
        else:
            ot, nb = GGML_TYPE[dtype], size
        if arch == "qwen35moe" and g.endswith("ssm_conv1d.weight"):
            shape, ot, nb = [shape[0], shape[-1]], 0, shape[0] * shape[-1] * 4  # F32 [C, K]
        tensors.append((g, names, shape, ot, nb))
    for g, raw in extra.items():
        tensors.append((g, [], [len(raw) // 4], 0, len(raw)))
    tensors.sort()
    infos = b""
    off = 0
    offs = []
    for g, names, shape, ot, nb in tensors:
        off = (off + ALIGN - 1) // ALIGN * ALIGN
        offs.append(off)
        dims = list(reversed(shape))
        infos += (s(g) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
                  + struct.pack("<IQ", ot, off))
        off += nb
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)) + b"".join(kv) + infos
    head += b"\0" * ((-len(head)) % ALIGN)
    data0 = len(head)
    total = data0 + off

    part = dst + ".part"
    out = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(out, head, 0)
        prev_end = 0
        for (g, names, shape, ot, nb), o in zip(tensors, offs):
            if o > prev_end:  # alignment padding between tensors: zeros, written out
                pwrite_all(out, b"\0" * (o - prev_end), data0 + prev_end)
            prev_end = o + nb
            at = o
            if g in extra:
                pwrite_all(out, extra[g], data0 + at)
                at += len(extra[g])
            for n in names:
                fd, src_off, size, dtype, src_shape = hdr[n]
                made = (qwen35_transform(n, os.pread(fd, size, src_off), dtype, src_shape,
                                         text_config(cfg))
                        if arch == "qwen35moe" and len(names) == 1 and qwen35_transformed(n)
                        else None)
                if made is not None:
                    pwrite_all(out, made, data0 + at)
                    at += len(made)
                elif ot == 0 and dtype != "F32":
                    raw = widen_to_f32(os.pread(fd, size, src_off), dtype)
                    pwrite_all(out, raw, data0 + at)
                    at += len(raw)
                else:
                    copy_range(fd, src_off, out, data0 + at, size)
                    at += size
            assert at == o + nb, (g, at - o, nb)
        os.ftruncate(out, total)
    finally:
        os.close(out)
    for fd in {v[0] for v in hdr.values()}:
        os.close(fd)
    got = os.path.getsize(part)
    if got != total:
        sys.exit("safetensors_to_gguf: %s has %d bytes, expected %d" % (part, got, total))
    os.replace(part, dst)
    secs = time.time() - t0
    print("safetensors_to_gguf: %.2f GB in %.1f s (%.2f GB/s, %s)" % (
        total / 1e9, secs, total / 1e9 / max(secs, 1e-9), copy_range.mode), file=sys.stderr)
    print("wrote", dst, len(tensors), "tensors")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    convert(sys.argv[1], sys.argv[2])
