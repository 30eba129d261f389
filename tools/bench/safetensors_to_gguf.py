#!/usr/bin/env python3
"""Minimal safetensors -> GGUF v3 writer for a Qwen3 or Qwen3-MoE checkpoint (standard library only).

Usage: tools/bench/safetensors_to_gguf.py SRC_DIR DST.gguf

SRC_DIR holds config.json and either model.safetensors or a sharded checkpoint
(model.safetensors.index.json naming model-0000x-of-0000y.safetensors; without an index, every
*.safetensors file in SRC_DIR is read). Made for checkpoints from `lockstep make-random --like
qwen3-*`, so llama.cpp (llama-bench) can run the very same weights: 2-D tensors are copied as they
are (BF16 / F16 / F32), 1-D tensors (norms) are widened to F32 like llama.cpp's own converter, and
the tokenizer is "no_vocab". A qwen3_moe checkpoint (one tensor per expert, as `make-random --like
qwen3-30b-a3b` and the Hub write them) becomes llama.cpp's qwen3moe: the router as
ffn_gate_inp, each layer's experts stacked into ffn_{gate,up,down}_exps [E, rows, cols]. Tensor data is copied in the kernel (copy_file_range; plain reads
and writes where that is refused), so a 16 GB checkpoint costs about what copying the file costs.
The output is written to DST.gguf.part and renamed when complete, so a partial file is never
mistaken for a finished one.
"""
import array
import errno
import json
import os
import struct
import sys
import time

ALIGN = 32
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.gate.weight": "ffn_gate_inp.weight",  # the MoE router
}
EXPERT_NAMES = {"gate_proj.weight": "ffn_gate_exps.weight", "up_proj.weight": "ffn_up_exps.weight",
                "down_proj.weight": "ffn_down_exps.weight"}
TOP_NAMES = {"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
GGML_TYPE = {"F32": 0, "F16": 1, "BF16": 30}


def gguf_name(n):
    """(GGUF name, expert index or None): experts.{e}.* of a layer stack into one GGUF tensor."""
    n = n.replace("model.", "", 1)
    if n in TOP_NAMES:
        return TOP_NAMES[n], None
    p = n.split(".")
    if p[0] == "layers" and p[2:4] == ["mlp", "experts"] and ".".join(p[5:]) in EXPERT_NAMES:
        return "blk.%s.%s" % (p[1], EXPERT_NAMES[".".join(p[5:])]), int(p[4])
    if p[0] != "layers" or ".".join(p[2:]) not in LAYER_NAMES:
        sys.exit("safetensors_to_gguf: no GGUF name for tensor %r (Qwen3 / Qwen3-MoE only)" % n)
    return "blk.%s.%s" % (p[1], LAYER_NAMES[".".join(p[2:])]), None


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


def arch_of(cfg):
    t = cfg.get("model_type")
    if t not in ("qwen3", "qwen3_moe"):
        sys.exit("safetensors_to_gguf: model_type %r (expected qwen3 or qwen3_moe)" % t)
    return "qwen3moe" if t == "qwen3_moe" else "qwen3"


def metadata(src, cfg):
    ARCH = arch_of(cfg)
    kv = []

    def put(k, t, v):
        kv.append(s(k) + struct.pack("<I", t) +
                  (s(v) if t == 8 else struct.pack({4: "<I", 6: "<f"}[t], v)))

    put("general.architecture", 8, ARCH)
    put("general.name", 8, "lockstep-random-" + os.path.basename(src.rstrip("/")))
    put("general.alignment", 4, ALIGN)
    for k, c in [("context_length", "max_position_embeddings"), ("embedding_length", "hidden_size"),
                 ("block_count", "num_hidden_layers"), ("feed_forward_length", "intermediate_size"),
                 ("attention.head_count", "num_attention_heads"),
                 ("attention.head_count_kv", "num_key_value_heads"),
                 ("attention.key_length", "head_dim"), ("attention.value_length", "head_dim")]:
        put(ARCH + "." + k, 4, cfg[c])
    put(ARCH + ".rope.freq_base", 6, float(cfg["rope_theta"]))
    put(ARCH + ".attention.layer_norm_rms_epsilon", 6, float(cfg["rms_norm_eps"]))
    put(ARCH + ".vocab_size", 4, cfg["vocab_size"])
    if ARCH == "qwen3moe":
        put(ARCH + ".expert_count", 4, cfg.get("num_experts", cfg.get("num_local_experts")))
        put(ARCH + ".expert_used_count", 4, cfg["num_experts_per_tok"])
        put(ARCH + ".expert_feed_forward_length", 4, cfg["moe_intermediate_size"])
    put("tokenizer.ggml.model", 8, "no_vocab")
    return kv


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
    # GGUF tensor -> [source tensors in order] (one, or a layer's experts 0..E-1), shape, type, bytes.
    groups = {}
    for n, (fd, off, size, dtype, shape) in hdr.items():
        if dtype not in GGML_TYPE:
            sys.exit("safetensors_to_gguf: tensor %r has dtype %s (expected BF16, F16 or F32)"
                     % (n, dtype))
        g, expert = gguf_name(n)
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
        tensors.append((g, names, shape, ot, nb))
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
            for n in names:
                fd, src_off, size, dtype, _ = hdr[n]
                if ot == 0 and dtype != "F32":
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
