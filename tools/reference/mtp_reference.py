#!/usr/bin/env python3
"""Float64 reference of the Qwen3.5 multi-token-prediction (MTP) head.

transformers drops `mtp.*` tensors when it loads a Qwen3.5 checkpoint, so this
file is lockstep's own definition of one MTP step, written from the issue's
description and built out of transformers' own modules (the backbone's
zero-centred RMSNorm class, its full-attention decoder layer class with gated
attention, q/k norm and partial rotary, its rotary embedding and its lm_head):

  h_p   backbone hidden state at position p, AFTER the final model norm
  e     = pre_fc_norm_embedding(embed_tokens(t_{p+1}))
  g     = pre_fc_norm_hidden(h_p)
  x     = fc(concat([e, g]))                # embedding first; fc has no bias
  y     = decoder_layer(x) at rotary position p, causal attention over the
          MTP's own KV cache of slots 0..p
  h'    = mtp.norm(y)                       # the hidden for a chained step
  logits = lm_head(h')                      # backbone lm_head (tied or not)

Checkpoint names (exactly as real Qwen3.5 checkpoints):
  mtp.pre_fc_norm_embedding.weight [H]   zero-centred: x_normed * (1 + w)
  mtp.pre_fc_norm_hidden.weight    [H]   zero-centred
  mtp.fc.weight                    [H, 2H]
  mtp.layers.0.*                   a full-attention decoder layer, named and
                                   shaped like the backbone's
  mtp.norm.weight                  [H]   zero-centred

Use: `python3 mtp_reference.py tests/fixtures/qwen35-f32` recomputes
mtp_reference.json from the fixture's files and prints the largest difference
from the stored one. make_fixtures.py calls build_mtp() and compute().
"""

import copy
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    Float64Everywhere,
    read_json,
    rebuild_rotary_float64,
    round9,
    rotary_positions,
    text_parts,
    versions,
    write_json,
)


def build_mtp(model):
    """An MTP container whose state_dict names are the checkpoint names less 'mtp.'.

    Built from copies of the backbone's own modules so names, shapes and the
    forward math match a backbone full-attention layer exactly.
    """
    text, _ = text_parts(model)
    cfg = text.config
    hidden = cfg.hidden_size
    full = [i for i, t in enumerate(cfg.layer_types) if t == "full_attention"]
    if not full:
        raise ValueError("backbone has no full-attention layer to copy for the MTP layer")
    mtp = nn.Module()
    mtp.pre_fc_norm_embedding = copy.deepcopy(text.norm)
    mtp.pre_fc_norm_hidden = copy.deepcopy(text.norm)
    ref = next(iter(text.norm.parameters()))
    mtp.fc = nn.Linear(2 * hidden, hidden, bias=False, dtype=ref.dtype)
    mtp.layers = nn.ModuleList([copy.deepcopy(text.layers[full[0]])])
    mtp.norm = copy.deepcopy(text.norm)
    return mtp


def load_mtp(model, tensors):
    """build_mtp() for `model`, weights from checkpoint `tensors` (name -> tensor)."""
    mtp = build_mtp(model)
    dtype = next(model.parameters()).dtype
    sd = {k[len("mtp."):]: v.to(dtype) for k, v in tensors.items() if k.startswith("mtp.")}
    mtp.load_state_dict(sd, strict=True)
    return mtp.eval()


def mtp_forward(model, mtp, tokens, hiddens, positions):
    """Run MTP slots 0..T-1 in one causal pass.

    tokens [T] (t_{p+1} of each slot), hiddens [T, H] (h_p of each slot),
    positions [T] (rotary position of each slot). Returns (logits [T, V],
    hidden after mtp.norm [T, H]). Slot j attends to slots 0..j: the same as a
    KV cache filled one slot at a time.
    """
    text, lm_head = text_parts(model)
    e = mtp.pre_fc_norm_embedding(text.embed_tokens(tokens[None]))
    g = mtp.pre_fc_norm_hidden(hiddens[None])
    x = mtp.fc(torch.cat([e, g], dim=-1))
    n = x.shape[1]
    cos, sin = text.rotary_emb(x, rotary_positions(text, positions))
    neg = torch.finfo(x.dtype).min
    mask = torch.full((n, n), neg, dtype=x.dtype).triu(1)[None, None]
    y = mtp.layers[0](
        x,
        position_embeddings=(cos, sin),
        attention_mask=mask,
        position_ids=positions[None],
        past_key_values=None,
    )
    if isinstance(y, tuple):
        y = y[0]
    h = mtp.norm(y)
    return lm_head(h)[0], h[0]


def compute(model, mtp, ids):
    """Reference outputs for mtp_reference.json (see README.md for the layout).

    Call inside Float64Everywhere with a float64 model for a strict float64
    reference.
    """
    ids_t = torch.tensor(ids, dtype=torch.long)
    n = len(ids)
    text, lm_head = text_parts(model)
    with torch.no_grad():
        hb = text(input_ids=ids_t[None], use_cache=False).last_hidden_state[0]  # after final norm
        backbone_logits = lm_head(hb)

        # (a) teacher forced: slot p uses token ids[p+1] and backbone h_p.
        slots = list(range(n - 1))
        tf_tokens = ids_t[1:]
        tf_hidden = hb[: n - 1]
        tf_pos = torch.arange(n - 1)
        tf_logits, tf_h = mtp_forward(model, mtp, tf_tokens, tf_hidden, tf_pos)

        # (b) chained: 3 more slots, each appended to the MTP's causal KV history.
        tokens, hiddens, pos = tf_tokens.clone(), tf_hidden.clone(), tf_pos.clone()
        x = int(torch.argmax(backbone_logits[n - 1]))  # the backbone's next token
        prev_h = hb[n - 1]
        chained = []
        causal_err = 0.0
        for step in range(3):
            slot = n - 1 + step
            tokens = torch.cat([tokens, torch.tensor([x])])
            hiddens = torch.cat([hiddens, prev_h[None]])
            pos = torch.cat([pos, torch.tensor([slot])])
            lg, hh = mtp_forward(model, mtp, tokens, hiddens, pos)
            causal_err = max(causal_err, (lg[: n - 1] - tf_logits).abs().max().item())
            chained.append(
                {
                    "step": step + 1,
                    "slot": slot,
                    "position": slot,
                    "token": x,
                    "hidden_in": "backbone_hidden[n-1]" if step == 0 else f"chained[{step - 1}].hidden",
                    "logits": lg[-1],
                    "hidden": hh[-1],
                }
            )
            prev_h = hh[-1]
            x = int(torch.argmax(lg[-1]))
    tv, pv = versions()
    out = {
        "ids": list(ids),
        "backbone_hidden": round9(hb),
        "teacher_forced": {
            "slots": slots,
            "positions": tf_pos.tolist(),
            "tokens": tf_tokens.tolist(),
            "logits": round9(tf_logits),
            "hidden": round9(tf_h),
        },
        "chained": [
            {k: (round9(v) if isinstance(v, torch.Tensor) else v) for k, v in c.items()} for c in chained
        ],
        "transformers": tv,
        "torch": pv,
    }
    return out, causal_err


def _max_diff(a, b):
    if isinstance(a, list):
        return max([_max_diff(x, y) for x, y in zip(a, b)] + [0.0])
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b)
    return 0.0


def main(argv):
    from safetensors.torch import load_file

    import transformers

    d = argv[1]
    cfg = read_json(os.path.join(d, "config.json"))
    cls = {
        "qwen3_5": "Qwen3_5ForConditionalGeneration",
        "qwen3_5_text": "Qwen3_5ForCausalLM",
    }[cfg["model_type"]]
    model = getattr(transformers, cls).from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    model = model.to(torch.float64).eval()
    rebuild_rotary_float64(model)
    tensors = load_file(os.path.join(d, "model.safetensors"))
    stored = read_json(os.path.join(d, "mtp_reference.json"))
    with Float64Everywhere():
        mtp = load_mtp(model, tensors)
        out, causal = compute(model, mtp, stored["ids"])
    print("causality check (teacher-forced slots unchanged by later slots):", causal)
    print("max |recomputed - stored| teacher-forced logits:",
          _max_diff(out["teacher_forced"]["logits"], stored["teacher_forced"]["logits"]))
    for a, b in zip(out["chained"], stored["chained"]):
        print(f"chained step {a['step']}: token {a['token']} (stored {b['token']}), max |diff| logits",
              _max_diff(a["logits"], b["logits"]))


if __name__ == "__main__":
    main(sys.argv)
