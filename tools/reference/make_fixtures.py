#!/usr/bin/env python3
"""Make lockstep's reference-parity fixtures with Hugging Face transformers.

For each fixture: build a tiny randomly initialised model (fixed seed; every
norm weight and bias perturbed away from its trivial value), save it with
`save_pretrained` (so names and layout are exactly transformers'), reload it
from disk, and compute float64 reference logits for a fixed id sequence.

  python3 tools/reference/make_fixtures.py --out DIR [--only NAME,NAME]

Writes DIR/<name>/{config.json, model.safetensors, generation_config.json (if
transformers writes one), reference.json[, mtp_reference.json]}; gemma4-assistant-f32 holds
target/, assistant/, assistant-ordered/ and assistant_reference.json. See README.md.
CPU only; float64; takes about a minute.
"""

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import assistant_reference  # noqa: E402
import mtp_reference  # noqa: E402
from common import (  # noqa: E402
    Float64Everywhere,
    read_json,
    rebuild_rotary_float64,
    round9,
    text_parts,
    versions,
    write_json,
)

VOCAB = 257  # > 256 and odd: exercises id 256 and an N tail in the lm_head
IDS = [1, 17, 256, 42, 42, 7, 128, 3, 17, 99, 200, 42, 5, 0, 255, 17, 64, 64, 64, 31]
LIN, FULL = "linear_attention", "full_attention"


# ----------------------------------------------------------------------------
# Fixture specifications
# ----------------------------------------------------------------------------

def _cfg(name, **kw):
    return getattr(transformers, name)(**kw)


def llama_f32():
    return _cfg("LlamaConfig", vocab_size=VOCAB, hidden_size=56, intermediate_size=120, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=False,
                attention_bias=False, mlp_bias=False, bos_token_id=1, eos_token_id=2)


def llama3rope_f32():
    # head_dim 12, theta 1e4, original 32: wavelengths 6.3 (kept: < 32/4), 29.2
    # (smoothed: between 8 and 32) and 135+ (divided by 8): all three regimes.
    return _cfg("LlamaConfig", vocab_size=VOCAB, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256, rms_norm_eps=1e-5,
                rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                 "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 32},
                tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)


def qwen2_f32():
    return _cfg("Qwen2Config", vocab_size=VOCAB, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-6,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=True,
                use_sliding_window=False, bos_token_id=1, eos_token_id=2)


def qwen3_cfg():
    return _cfg("Qwen3Config", vocab_size=VOCAB, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
                rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                tie_word_embeddings=True, attention_bias=False, use_sliding_window=False,
                bos_token_id=1, eos_token_id=2)


def yarn_f32():
    return _cfg("Qwen3Config", vocab_size=VOCAB, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=32,
                rms_norm_eps=1e-6,
                rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                 "original_max_position_embeddings": 8},
                tie_word_embeddings=False, attention_bias=False, use_sliding_window=False,
                bos_token_id=1, eos_token_id=2)


QWEN35_ROPE = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
               "mrope_section": [11, 11, 10], "mrope_interleaved": True}


def qwen35_text(layer_types, kd, vd, kh, vh, tied):
    return _cfg("Qwen3_5TextConfig", vocab_size=VOCAB, hidden_size=40, intermediate_size=56,
                num_hidden_layers=len(layer_types), layer_types=list(layer_types), num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, linear_key_head_dim=kd, linear_value_head_dim=vd,
                linear_num_key_heads=kh, linear_num_value_heads=vh, linear_conv_kernel_dim=4,
                max_position_embeddings=256, rms_norm_eps=1e-6, rope_parameters=dict(QWEN35_ROPE),
                tie_word_embeddings=tied, bos_token_id=1, eos_token_id=2)


def qwen35_f32():
    return qwen35_text([LIN, LIN, LIN, FULL], kd=12, vd=20, kh=2, vh=4, tied=False)


def qwen35_tied_f32():
    return qwen35_text([LIN, FULL], kd=16, vd=16, kh=2, vh=2, tied=True)


def qwen35_wrapped_text():
    return qwen35_text([LIN, FULL], kd=16, vd=16, kh=2, vh=4, tied=False)


VISION = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, in_channels=3, patch_size=2,
              temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=40, num_position_embeddings=16)


def qwen35_wrapped_bf16():
    return _cfg("Qwen3_5Config", text_config=qwen35_wrapped_text(), vision_config=dict(VISION),
                tie_word_embeddings=False)


def qwen3next_f32():
    base = dict(vocab_size=VOCAB, hidden_size=40, intermediate_size=56, num_hidden_layers=2,
                layer_types=[LIN, FULL], num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                linear_key_head_dim=16, linear_value_head_dim=12, linear_num_key_heads=2,
                linear_num_value_heads=4, linear_conv_kernel_dim=4, max_position_embeddings=256,
                rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                    "partial_rotary_factor": 0.25},
                tie_word_embeddings=False, mlp_only_layers=[0, 1], bos_token_id=1, eos_token_id=2)
    try:
        return _cfg("Qwen3NextConfig", **base, num_experts=0, num_experts_per_tok=0, decoder_sparse_step=1)
    except Exception as e:  # noqa: BLE001
        print("  Qwen3NextConfig rejected num_experts=0 (", e, "); keeping defaults, all layers in mlp_only_layers")
        return _cfg("Qwen3NextConfig", **base)


def mistral_f32():
    # head_dim 8 differs from hidden / heads = 6; a window of 6 that the 20 ids cross.
    return _cfg("MistralConfig", vocab_size=VOCAB, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
                rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                sliding_window=6, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)


MOE = dict(num_experts=6, moe_intermediate_size=20)  # 6 experts: 20 tokens x top-k reach every one


def qwen3moe_f32():
    # Layer 1 is dense (mlp_only_layers), so the family's dense fallback is exercised too;
    # norm_topk_prob stays at its class default (False) and head_dim is explicit as in Qwen3-30B-A3B.
    return _cfg("Qwen3MoeConfig", vocab_size=VOCAB, hidden_size=24, intermediate_size=40, num_hidden_layers=3,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
                rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                tie_word_embeddings=False, num_experts_per_tok=3, decoder_sparse_step=1, mlp_only_layers=[1],
                bos_token_id=1, eos_token_id=2, **MOE)


def qwen3next_moe_f32():
    # Every layer sparse, shared expert with its sigmoid gate, norm_topk_prob off (the class default is on).
    return _cfg("Qwen3NextConfig", vocab_size=VOCAB, hidden_size=40, intermediate_size=56, num_hidden_layers=2,
                layer_types=[LIN, FULL], num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                linear_key_head_dim=16, linear_value_head_dim=12, linear_num_key_heads=2,
                linear_num_value_heads=4, linear_conv_kernel_dim=4, max_position_embeddings=256,
                rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                    "partial_rotary_factor": 0.25},
                tie_word_embeddings=False, mlp_only_layers=[], decoder_sparse_step=1, num_experts_per_tok=2,
                shared_expert_intermediate_size=28, norm_topk_prob=False, bos_token_id=1, eos_token_id=2, **MOE)


def qwen35moe_text():
    return _cfg("Qwen3_5MoeTextConfig", vocab_size=VOCAB, hidden_size=40, num_hidden_layers=2,
                layer_types=[LIN, FULL], num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                linear_key_head_dim=12, linear_value_head_dim=20, linear_num_key_heads=2,
                linear_num_value_heads=4, linear_conv_kernel_dim=4, max_position_embeddings=256,
                rms_norm_eps=1e-6, rope_parameters=dict(QWEN35_ROPE), tie_word_embeddings=False,
                num_experts_per_tok=2, shared_expert_intermediate_size=28, bos_token_id=1, eos_token_id=2, **MOE)


def qwen35moe_wrapped_bf16():
    return _cfg("Qwen3_5MoeConfig", text_config=qwen35moe_text(), vision_config=dict(VISION),
                tie_word_embeddings=False)


SLIDE = "sliding_attention"


def gemma3_f32():
    # 4 layers by sliding_window_pattern 3 (sliding, sliding, full, sliding), window 6 so the
    # 20 ids cross it; query_pre_attn_scalar 20 (not head_dim 16), linear RoPE scaling on the
    # global layer only, final-logit soft-capping on, tied (the Gemma 3 default).
    return _cfg("Gemma3TextConfig", vocab_size=VOCAB, hidden_size=48, intermediate_size=72, num_hidden_layers=4,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
                rms_norm_eps=1e-6, sliding_window=6, sliding_window_pattern=3, query_pre_attn_scalar=20,
                rope_parameters={FULL: {"rope_type": "linear", "rope_theta": 1000000.0, "factor": 2.0},
                                 SLIDE: {"rope_type": "default", "rope_theta": 10000.0}},
                final_logit_softcapping=6.0, attn_logit_softcapping=None, hidden_activation="gelu_pytorch_tanh",
                tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, pad_token_id=0)


def gemma3_wrapped_bf16():
    # Gemma3ForConditionalGeneration's text model: hidden 64 (sqrt 8 is exact in bf16, so the
    # embedding scale's rounding does not depend on the dtype transformers runs in), window 5,
    # explicit layer_types, MQA, rope_parameters as transformers 5 writes them; tiny SigLIP tower.
    text = _cfg("Gemma3TextConfig", vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                layer_types=[SLIDE, FULL, SLIDE], num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                max_position_embeddings=256, rms_norm_eps=1e-6, sliding_window=5, query_pre_attn_scalar=32,
                rope_parameters={FULL: {"rope_type": "default", "rope_theta": 1000000.0},
                                 SLIDE: {"rope_type": "default", "rope_theta": 10000.0}},
                final_logit_softcapping=None, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
                pad_token_id=0)
    vision = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                  image_size=28, patch_size=14, num_channels=3)
    return _cfg("Gemma3Config", text_config=text, vision_config=vision, mm_tokens_per_image=4,
                tie_word_embeddings=True)


def gemma4_text_dense(hidden=48, ple=8, dtype_note=""):
    # 6 layers (sliding, full, sliding, sliding, sliding, full): the last two share the KV of the
    # last earlier layer of their type (num_kv_shared_layers 2: layer 4 reads layer 3's, layer 5
    # layer 1's) and are double-wide; full layers have their own head dim (32) and one KV head
    # whose values are its keys (attention_k_eq_v) and rotate a quarter of the head
    # (proportional RoPE); per-layer inputs of 8; window 5 crossed by the 20 ids; soft-capping.
    return _cfg("Gemma4TextConfig", vocab_size=VOCAB, hidden_size=hidden, intermediate_size=40, num_hidden_layers=6,
                layer_types=[SLIDE, FULL, SLIDE, SLIDE, SLIDE, FULL], num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, global_head_dim=32, num_global_key_value_heads=1,
                attention_k_eq_v=True, num_kv_shared_layers=2, use_double_wide_mlp=True,
                hidden_size_per_layer_input=ple, vocab_size_per_layer_input=VOCAB, max_position_embeddings=256,
                rms_norm_eps=1e-6, sliding_window=5,
                rope_parameters={SLIDE: {"rope_type": "default", "rope_theta": 10000.0},
                                 FULL: {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                        "rope_theta": 1000000.0}},
                final_logit_softcapping=10.0, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
                enable_moe_block=False, bos_token_id=2, eos_token_id=1, pad_token_id=0)


def gemma4_f32():
    return gemma4_text_dense()


def gemma4_moe_f32():
    # The 26B-A4B shape in small: every layer runs a dense MLP and, beside it, 4 experts (top 2,
    # router with its scale and per-expert scale); no per-layer inputs, no KV sharing; full layers
    # with their own head dim and separate values (attention_k_eq_v off).
    return _cfg("Gemma4TextConfig", vocab_size=VOCAB, hidden_size=40, intermediate_size=48, num_hidden_layers=3,
                layer_types=[SLIDE, SLIDE, FULL], num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                global_head_dim=24, attention_k_eq_v=False, num_kv_shared_layers=0,
                hidden_size_per_layer_input=0, max_position_embeddings=256, rms_norm_eps=1e-6, sliding_window=6,
                rope_parameters={SLIDE: {"rope_type": "default", "rope_theta": 10000.0},
                                 FULL: {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                        "rope_theta": 1000000.0}},
                final_logit_softcapping=None, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
                enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=24,
                bos_token_id=2, eos_token_id=1, pad_token_id=0)


def gemma4_wrapped_bf16():
    # Gemma4ForConditionalGeneration with no vision or audio tower: hidden 64 and per-layer
    # inputs 16 (sqrt 8 and 4 are exact in bf16, so the embedding scales do not depend on the
    # dtype transformers runs in).
    return _cfg("Gemma4Config", text_config=gemma4_text_dense(hidden=64, ple=16), vision_config=None,
                audio_config=None, tie_word_embeddings=True)


# name -> (config fn, model class, weights dtype, seed, legacy rope keys in config.json, MTP, extra config keys)
FIXTURES = {
    "llama-f32": (llama_f32, "LlamaForCausalLM", "float32", 101, True, False, {}),
    "llama3rope-f32": (llama3rope_f32, "LlamaForCausalLM", "float32", 102, True, False, {}),
    "qwen2-f32": (qwen2_f32, "Qwen2ForCausalLM", "float32", 103, True, False, {}),
    "qwen3-f32": (qwen3_cfg, "Qwen3ForCausalLM", "float32", 104, True, False, {}),
    "qwen3-bf16": (qwen3_cfg, "Qwen3ForCausalLM", "bfloat16", 104, True, False, {}),
    "yarn-f32": (yarn_f32, "Qwen3ForCausalLM", "float32", 106, True, False, {}),
    "qwen35-f32": (qwen35_f32, "Qwen3_5ForCausalLM", "float32", 107, False, True,
                   {"attn_output_gate": True, "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False}),
    "qwen35-tied-f32": (qwen35_tied_f32, "Qwen3_5ForCausalLM", "float32", 108, False, False,
                        {"attn_output_gate": True}),
    "qwen35-wrapped-bf16": (qwen35_wrapped_bf16, "Qwen3_5ForConditionalGeneration", "bfloat16", 109, False, True,
                            {"attn_output_gate": True, "mtp_num_hidden_layers": 1,
                             "mtp_use_dedicated_embeddings": False}),
    "qwen3next-f32": (qwen3next_f32, "Qwen3NextForCausalLM", "float32", 110, True, False, {}),
    "mistral-f32": (mistral_f32, "MistralForCausalLM", "float32", 115, True, False, {}),
    "qwen3moe-f32": (qwen3moe_f32, "Qwen3MoeForCausalLM", "float32", 111, True, False, {}),
    "qwen3next-moe-f32": (qwen3next_moe_f32, "Qwen3NextForCausalLM", "float32", 112, True, False, {}),
    "qwen35moe-f32": (qwen35moe_text, "Qwen3_5MoeForCausalLM", "float32", 113, False, True,
                      {"attn_output_gate": True, "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False}),
    "qwen35moe-wrapped-bf16": (qwen35moe_wrapped_bf16, "Qwen3_5MoeForConditionalGeneration", "bfloat16", 114,
                               False, True, {"attn_output_gate": True, "mtp_num_hidden_layers": 1,
                                             "mtp_use_dedicated_embeddings": False}),
    "gemma3-f32": (gemma3_f32, "Gemma3ForCausalLM", "float32", 115, "gemma3", False, {}),
    "gemma3-wrapped-bf16": (gemma3_wrapped_bf16, "Gemma3ForConditionalGeneration", "bfloat16", 116, False, False,
                            {}),
    "gemma4-f32": (gemma4_f32, "Gemma4ForCausalLM", "float32", 117, "gemma4", False, {}),
    "gemma4-moe-f32": (gemma4_moe_f32, "Gemma4ForCausalLM", "float32", 118, "gemma4", False, {}),
    "gemma4-wrapped-bf16": (gemma4_wrapped_bf16, "Gemma4ForConditionalGeneration", "bfloat16", 119, False, False,
                            {}),
}


# ----------------------------------------------------------------------------
# Random weights
# ----------------------------------------------------------------------------

def init_tensor(name, p, g):
    """Deterministic non-trivial value for parameter `name` (shape of p)."""
    shape = tuple(p.shape)

    def rn():
        return torch.randn(shape, generator=g, dtype=torch.float32)

    leaf = name.rsplit(".", 1)[-1]
    if leaf == "A_log":  # decay rates A in [0.05, 1): exp(g) spans ~0.25..0.97
        return torch.log(torch.rand(shape, generator=g) * 0.95 + 0.05)
    if leaf == "dt_bias":
        return 0.5 * rn()
    if leaf == "bias":
        return 0.3 * rn()
    if p.dim() == 1:  # a norm weight: zero-centred ones start at 0, standard ones at 1
        if bool(torch.all(p == 0)):
            return 0.3 * rn()
        if bool(torch.all(p == 1)):
            return 1.0 + 0.3 * rn()
        raise ValueError(f"unexpected 1-D parameter {name}")
    if "conv1d" in name:
        return 0.5 * rn()
    if "embed_tokens" in name:
        return rn()
    if p.dim() == 2:
        scale = 3.0 if name.startswith("lm_head") else 1.0
        return scale * rn() / math.sqrt(shape[1])
    if p.dim() == 3 and ".experts." in name:  # fused experts [E, out, in]
        return rn() / math.sqrt(shape[2])
    raise ValueError(f"unexpected parameter {name} {shape}")


def randomize(module, seed, skip=("model.visual.", "model.vision_tower."), tied=False):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(module.named_parameters(), key=lambda kv: kv[0]):
            if any(name.startswith(s) for s in skip):
                continue
            v = init_tensor(name, p, g)
            if tied and "embed_tokens" in name:
                v = v * 0.4  # else each token's own logit (|e|^2) dominates the tied lm_head
            p.copy_(v)
        # Gemma 4's per-layer output scale is a buffer (saved, initialised to 1).
        for name, b in sorted(module.named_buffers(), key=lambda kv: kv[0]):
            if name.endswith("layer_scalar"):
                b.copy_(0.7 + 0.6 * torch.rand(b.shape, generator=g))


# ----------------------------------------------------------------------------
# config.json rewriting
# ----------------------------------------------------------------------------

def to_legacy_rope(cfg):
    """transformers 5 writes `rope_parameters`; most hub checkpoints (Llama 3,
    Qwen2.5, Qwen3, Qwen3-Next) carry the older top-level `rope_theta`,
    `partial_rotary_factor` and `rope_scaling`. Rewrite to that older form."""
    rp = cfg.pop("rope_parameters", None)
    if not rp:
        return cfg
    rp = dict(rp)
    cfg["rope_theta"] = rp.pop("rope_theta")
    prf = rp.pop("partial_rotary_factor", None)
    if prf is not None and prf != 1.0:
        cfg["partial_rotary_factor"] = prf
    cfg["rope_scaling"] = None if rp.get("rope_type", "default") == "default" else rp
    return cfg


def to_legacy_gemma3(cfg):
    """Gemma 3 as most published configs have it: rope_theta and rope_scaling (global layers),
    rope_local_base_freq (sliding layers), and sliding_window_pattern instead of layer_types."""
    rp = cfg.pop("rope_parameters")
    full, slide = dict(rp[FULL]), dict(rp[SLIDE])
    cfg["rope_theta"] = full.pop("rope_theta")
    cfg["rope_local_base_freq"] = slide.pop("rope_theta")
    cfg["rope_scaling"] = None if full.get("rope_type", "default") == "default" else full
    types = cfg.get("layer_types")
    for n in range(1, len(types) + 2):
        if types == [SLIDE if (i + 1) % n else FULL for i in range(len(types))]:
            cfg.pop("layer_types")
            cfg["sliding_window_pattern"] = n
            break
    return cfg


def to_published_gemma4(cfg):
    """Gemma 4 as the published configs have it: global_head_dim and num_global_key_value_heads
    instead of the per_layer_config that transformers 5.17 writes for the full layers."""
    per_layer = cfg.pop("per_layer_config", None) or {}
    overrides = [dict(v) for v in per_layer.values()]
    if overrides and any(o != overrides[0] for o in overrides):
        raise RuntimeError(f"per_layer_config differs between layers: {per_layer}")
    first = overrides[0] if overrides else {}
    if "head_dim" in first:
        cfg["global_head_dim"] = first["head_dim"]
    if "num_key_value_heads" in first:
        cfg["num_global_key_value_heads"] = first["num_key_value_heads"]
    return cfg


def edit_config(path, legacy, extra):
    cfg = read_json(path)
    target = cfg["text_config"] if "text_config" in cfg else cfg
    if legacy == "gemma4":
        to_published_gemma4(target)
    elif legacy == "gemma3":
        to_legacy_gemma3(target)
    elif legacy:
        to_legacy_rope(target)
    target.update(extra)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


# ----------------------------------------------------------------------------
# Reference computation
# ----------------------------------------------------------------------------

def logits_whole(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]


def logits_incremental(model, ids):
    rows, cache = [], None
    with torch.no_grad():
        for t in range(len(ids)):
            out = model(input_ids=torch.tensor([[ids[t]]]), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            rows.append(out.logits[0, -1])
    return torch.stack(rows)


def load(cls, d, dtype):
    # Eager experts: transformers' default grouped_mm MoE path has no float64 kernel.
    model, info = getattr(transformers, cls).from_pretrained(
        d, dtype=dtype, attn_implementation="eager", experts_implementation="eager", output_loading_info=True)
    return model.eval(), info


def describe_safetensors(path):
    rows = []
    with safe_open(path, framework="pt") as f:
        for k in sorted(f.keys()):
            t = f.get_tensor(k)
            rows.append(f"    {k} {str(t.dtype).replace('torch.', '')} {list(t.shape)}")
    return "\n".join(rows)


def make_fixture(name, outroot):
    cfg_fn, cls, wdtype, seed, legacy, has_mtp, extra = FIXTURES[name]
    d = os.path.join(outroot, name)
    shutil.rmtree(d, ignore_errors=True)
    t0 = time.time()
    torch.manual_seed(seed)
    config = cfg_fn()
    model = getattr(transformers, cls)(config).eval()
    mtp_tensors = {}
    if has_mtp:  # copies of freshly initialised modules, so norms still read 0 (zero-centred)
        mtp = mtp_reference.build_mtp(model)
        randomize(mtp, seed + 1000)
    randomize(model, seed, tied=bool(config.get_text_config().tie_word_embeddings))
    if wdtype == "bfloat16":
        model = model.to(torch.bfloat16)
        if has_mtp:
            mtp = mtp.to(torch.bfloat16)
    if has_mtp:
        mtp_tensors = {"mtp." + k: v.detach().clone().contiguous() for k, v in mtp.state_dict().items()}
    model.save_pretrained(d)
    st = os.path.join(d, "model.safetensors")
    if not os.path.exists(st):
        raise RuntimeError(f"save_pretrained did not write a single model.safetensors: {os.listdir(d)}")
    if mtp_tensors:
        tensors = load_file(st)
        tensors.update(mtp_tensors)
        save_file(tensors, st, metadata={"format": "pt"})

    # Logits from the checkpoint exactly as save_pretrained wrote it.
    m0, _ = load(cls, d, torch.float32)
    before = logits_whole(m0.to(torch.float64), IDS)
    del m0

    # Rewrite config.json (older rope keys / real-checkpoint keys), reload from
    # disk, and keep the rewrite only if transformers reads it identically.
    cfg_path = os.path.join(d, "config.json")
    original_cfg = open(cfg_path).read()
    edit_config(cfg_path, legacy, extra)
    config_note = ("legacy rope keys (rope_theta/partial_rotary_factor/rope_scaling)" if legacy is True
                   else "legacy Gemma 3 keys (rope_theta/rope_local_base_freq/rope_scaling/sliding_window_pattern)"
                   if legacy == "gemma3"
                   else "published Gemma 4 keys (global_head_dim/num_global_key_value_heads, no per_layer_config)"
                   if legacy == "gemma4" else "transformers 5 rope_parameters")
    try:
        m64, info = load(cls, d, torch.float32)
        m64 = m64.to(torch.float64)
        after = logits_whole(m64, IDS)
        if not torch.equal(before, after):
            raise RuntimeError(f"edited config changes the logits by {(before - after).abs().max().item()}")
    except Exception as e:  # noqa: BLE001
        print(f"  config edit rejected ({e}); keeping transformers' own config.json")
        with open(cfg_path, "w") as f:
            f.write(original_cfg)
        config_note = "as written by save_pretrained (edit rejected)"
        m64, info = load(cls, d, torch.float32)
        m64 = m64.to(torch.float64)
        after = logits_whole(m64, IDS)
    tied = bool(getattr(m64.config.get_text_config(), "tie_word_embeddings", False))
    info = dict(info)
    info["missing_keys"] = [k for k in info.get("missing_keys") or [] if not (tied and k.endswith("lm_head.weight"))]
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "mismatched_keys", "error_msgs")}
    if bad:
        raise RuntimeError(f"reload problems: {bad}")
    if info.get("unexpected_keys"):
        print("  unexpected keys on reload (ignored by transformers):", sorted(info["unexpected_keys"])[:6], "...")

    # (1) transformers as is, model in float64 (it keeps some float32 islands).
    tf64 = after
    tf64_inc = logits_incremental(m64, IDS)
    # (2) the same code with every float32 cast promoted to float64.
    rot_change = max(rebuild_rotary_float64(m64), rebuild_layer_type_rotary_float64(m64))
    with Float64Everywhere():
        strict = logits_whole(m64, IDS)
        strict_inc = logits_incremental(m64, IDS)
    # (3) float32 activations, for scale: what an F32 engine's error looks like.
    m32, _ = load(cls, d, torch.float32)
    f32 = logits_whole(m32, IDS).double()
    del m32

    scale = strict.abs().max().item()
    checks = {
        "max_abs_logit": scale,
        "incremental_vs_whole_f64": (tf64_inc - tf64).abs().max().item() / scale,
        "incremental_vs_whole_strict": (strict_inc - strict).abs().max().item() / scale,
        "transformers_f64_vs_strict": (tf64 - strict).abs().max().item() / scale,
        "transformers_f32_vs_reference": (f32 - strict).abs().max().item() / scale,
        "rotary_inv_freq_float32_rel_error": rot_change,
    }
    margin = router_margin(m64, IDS)
    if margin is not None:
        checks["router_min_topk_margin"] = margin
    use_strict = checks["transformers_f64_vs_strict"] < 1e-5
    ref_logits = strict if use_strict else tf64
    tv, pv = versions()
    ref = {
        "model": name,
        "weights_dtype": wdtype,
        "ids": IDS,
        "logits": round9(ref_logits),
        "transformers": tv,
        "torch": pv,
        "architecture": cls,
        "precision": ("float64: transformers' modeling code with its internal float32 casts promoted to float64"
                      if use_strict else "float64: transformers as is (model.to(float64))"),
        "config_format": config_note,
        "seed": seed,
        "checks": checks,
    }
    write_json(os.path.join(d, "reference.json"), ref)

    mtp_note = ""
    if has_mtp:
        tensors = load_file(st)
        with Float64Everywhere():
            mtp64 = mtp_reference.load_mtp(m64, tensors)
            out, causal = mtp_reference.compute(m64, mtp64, IDS)
        out = {"model": name, "weights_dtype": wdtype, **out}
        write_json(os.path.join(d, "mtp_reference.json"), out)
        mtp_note = (f" mtp: causal={causal:.1e} chained tokens="
                    f"{[c['token'] for c in out['chained']]}")

    argmax = ref_logits.argmax(-1).tolist()
    print(f"[{name}] {cls} {wdtype} {time.time() - t0:.1f}s  max|logit|={scale:.3f}  "
          + "  ".join(f"{k}={v:.2e}" for k, v in checks.items() if k != "max_abs_logit") + mtp_note)
    print("  argmax per position:", argmax)
    print("  files:", sorted(os.listdir(d)))
    print("  config.json:", json.dumps(read_json(cfg_path), sort_keys=True))
    print("  tensors:\n" + describe_safetensors(st))
    return True


def rebuild_layer_type_rotary_float64(model):
    """rebuild_rotary_float64 for rotary modules with one inv_freq per layer type (Gemma 3:
    full_attention_inv_freq, sliding_attention_inv_freq), which common.py's version skips."""
    worst = 0.0
    for name, mod in list(model.named_modules()):
        if not name.endswith("rotary_emb") or hasattr(mod, "inv_freq") or not hasattr(mod, "layer_types"):
            continue
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        with Float64Everywhere():
            new = type(mod)(config=mod.config)
        new.to(torch.float64)
        for lt in mod.layer_types:
            old = getattr(mod, f"{lt}_inv_freq").double()
            fresh = getattr(new, f"{lt}_inv_freq")
            worst = max(worst, ((fresh - old).abs() / old.abs().clamp_min(1e-300)).max().item())
        setattr(parent, attr, new)
    return worst


# ----------------------------------------------------------------------------
# Mixture of experts: routing margins and the other published expert layouts
# ----------------------------------------------------------------------------

def router_margin(model, ids):
    """Smallest gap, over tokens and MoE layers, between the k-th and (k+1)-th routing probability.

    A near-tie there would let float32 and float64 pick different experts, so a parity
    fixture must keep it far from zero (recorded in checks)."""
    seen = []
    hooks = []
    for name, mod in model.named_modules():
        if (name.endswith("mlp.gate") or name.endswith("router.proj")) and hasattr(mod, "weight") \
                and mod.weight.dim() == 2:
            hooks.append(mod.register_forward_pre_hook(lambda m, a: seen.append((m.weight, a[0]))))
    if not hooks:
        return None
    try:
        logits_whole(model, ids)
    finally:
        for h in hooks:
            h.remove()
    cfg = model.config.get_text_config()
    k = getattr(cfg, "num_experts_per_tok", None) or cfg.top_k_experts
    worst = float("inf")
    for w, x in seen:
        probs = torch.softmax(x.reshape(-1, x.shape[-1]).double() @ w.double().t(), dim=-1)
        top = probs.sort(dim=-1, descending=True).values
        worst = min(worst, (top[:, k - 1] - top[:, k]).min().item())
    return worst


def to_fused(tensors):
    """One tensor per expert and projection (experts.{e}.gate_proj.weight ..., what transformers'
    save_pretrained and the published Qwen3-MoE / Qwen3-Next checkpoints hold) as transformers 5's
    in-memory fused layout: experts.gate_up_proj [E, 2I, H] (gate rows first), experts.down_proj
    [E, H, I]. Other tensors pass through."""
    out, groups = {}, {}
    for k, t in tensors.items():
        parts = k.split(".")
        if len(parts) > 4 and parts[-4] == "experts" and parts[-3].isdigit() and parts[-1] == "weight":
            stem = ".".join(parts[:-3])
            groups.setdefault(stem, {})[(int(parts[-3]), parts[-2])] = t
        else:
            out[k] = t
    for stem, g in groups.items():
        n = 1 + max(e for e, _ in g)
        out[stem + ".gate_up_proj"] = torch.stack(
            [torch.cat([g[(e, "gate_proj")], g[(e, "up_proj")]]) for e in range(n)]).contiguous()
        out[stem + ".down_proj"] = torch.stack([g[(e, "down_proj")] for e in range(n)]).contiguous()
    return out


def save_sharded(tensors, d, shards):
    """Tensors alternated over `shards` files (so one layer's experts span them) + the index."""
    names = sorted(tensors)
    weight_map, total = {}, 0
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for i, n in enumerate(names) if i % shards == s}
        save_file(part, os.path.join(d, fname), metadata={"format": "pt"})
        for n, t in part.items():
            weight_map[n] = fname
            total += t.numel() * t.element_size()
    write_json(os.path.join(d, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": weight_map})


# variant -> (base fixture, what it changes). The variant holds the base's weights in another
# published layout, so its reference is the base's reference, unchanged.
VARIANTS = {
    "qwen3moe-fused-f32": ("qwen3moe-f32", "fused experts (gate_up_proj / down_proj 3-D), 2 shards, "
                           "config key num_experts (as published) instead of num_local_experts"),
    "qwen3next-moe-sharded-f32": ("qwen3next-moe-f32", "one tensor per expert, 2 shards"),
    "gemma3-wrapped-modulenames-bf16": ("gemma3-wrapped-bf16", "transformers 5 module names (model.language_model.*, "
                                        "model.vision_tower.*, model.multi_modal_projector.*) instead of the "
                                        "published checkpoints' language_model.model.* that save_pretrained writes, "
                                        "2 shards"),
}


def to_module_names_gemma3(tensors):
    """Gemma 3's published names (which save_pretrained keeps writing) -> the names of
    Gemma3ForConditionalGeneration's modules in transformers 5, which it also loads."""
    out = {}
    for k, t in tensors.items():
        if k.startswith("language_model.model."):
            k = "model.language_model." + k[len("language_model.model."):]
        elif k.startswith("language_model.lm_head."):
            k = k[len("language_model."):]
        elif k.startswith(("vision_tower.", "multi_modal_projector.")):
            k = "model." + k
        out[k] = t
    return out


def make_variant(name, outroot):
    base, what = VARIANTS[name]
    src, d = os.path.join(outroot, base), os.path.join(outroot, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    tensors = load_file(os.path.join(src, "model.safetensors"))
    if "fused" in what:
        tensors = to_fused(tensors)
    if "module names" in what:
        tensors = to_module_names_gemma3(tensors)
    save_sharded(tensors, d, 2)
    for f in os.listdir(src):
        if f.endswith(".json") and f != "reference.json":
            shutil.copy(os.path.join(src, f), d)
    if "num_experts (as published)" in what:
        cfg = read_json(os.path.join(d, "config.json"))
        cfg["num_experts"] = cfg.pop("num_local_experts")
        write_json(os.path.join(d, "config.json"), cfg)
    ref = read_json(os.path.join(src, "reference.json"))
    ref["model"], ref["layout"] = name, what
    # transformers must read this layout as the same model (its per-expert loading path).
    try:
        m, _ = load(FIXTURES[base][1], d, torch.float32)
        mine = logits_whole(m.to(torch.float64), IDS)
        m0, _ = load(FIXTURES[base][1], src, torch.float32)
        theirs = logits_whole(m0.to(torch.float64), IDS)
        ref["checks"]["layout_vs_base"] = (mine - theirs).abs().max().item()
    except Exception as e:  # noqa: BLE001
        ref["checks"]["layout_vs_base"] = f"transformers could not load it: {e}"
    write_json(os.path.join(d, "reference.json"), ref)
    print(f"[{name}] from {base}: {what}; layout_vs_base={ref['checks']['layout_vs_base']}")
    print("  files:", sorted(os.listdir(d)))


def print_moe_defaults():
    for cls in ("Qwen3MoeConfig", "Qwen3NextConfig", "Qwen3_5MoeTextConfig", "MistralConfig"):
        try:
            c = getattr(transformers, cls)()
            keys = ("num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size",
                    "shared_expert_intermediate_size", "norm_topk_prob", "decoder_sparse_step",
                    "mlp_only_layers", "head_dim", "hidden_act", "intermediate_size", "sliding_window",
                    "max_position_embeddings", "rms_norm_eps", "rope_parameters", "tie_word_embeddings")
            print(f"  defaults {cls}:", {k: getattr(c, k, "<absent>") for k in keys})
        except Exception as e:  # noqa: BLE001
            print(f"  defaults {cls}: {e}")


def print_gemma3_defaults():
    try:
        c = transformers.Gemma3TextConfig()
        keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
                "sliding_window", "query_pre_attn_scalar", "tie_word_embeddings", "hidden_activation",
                "final_logit_softcapping", "attn_logit_softcapping", "use_bidirectional_attention",
                "bos_token_id", "eos_token_id")
        print("  defaults Gemma3TextConfig:", {k: getattr(c, k, "<absent>") for k in keys},
              "layer_types[:7]:", c.layer_types[:7])
        print("  defaults Gemma3Config.tie_word_embeddings:", transformers.Gemma3Config().tie_word_embeddings)
    except Exception as e:  # noqa: BLE001
        print("  defaults Gemma3TextConfig:", e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    tv, pv = versions()
    print(f"transformers {tv}, torch {pv}")
    print_moe_defaults()
    if not args.only or "gemma3" in args.only:
        print_gemma3_defaults()
    everything = list(FIXTURES) + list(VARIANTS) + [assistant_reference.NAME]
    names = [n for n in everything if not args.only or n in args.only.split(",")]
    os.makedirs(args.out, exist_ok=True)
    ok, failed = [], []
    for name in names:
        try:
            if name in VARIANTS:
                make_variant(name, args.out)
            elif name == assistant_reference.NAME:  # a target and its assistants (assistant_reference.py)
                assistant_reference.make(args.out, randomize, rebuild_layer_type_rotary_float64)
            else:
                make_fixture(name, args.out)
            ok.append(name)
        except Exception:  # noqa: BLE001
            print(f"[{name}] FAILED")
            traceback.print_exc()
            shutil.rmtree(os.path.join(args.out, name), ignore_errors=True)
            failed.append(name)
    print("made:", ok)
    print("failed:", failed)
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
