"""The Qwen3.5 multi-token-prediction (MTP) head, trained jointly with the backbone.

Definition (the same as tools/reference/mtp_reference.py, lockstep issue 4):
  h_p    backbone hidden at position p, AFTER the backbone's final norm
  x_p    = fc(concat[pre_fc_norm_embedding(embed(t_{p+1})), pre_fc_norm_hidden(h_p)])
  y      = one full-attention decoder layer over the slots, causal, rotary position p
  logits = lm_head(norm(y))    (the backbone's lm_head: the tied embedding)
  slot p predicts t_{p+2}.

State-dict names (prefix 'mtp.' in the checkpoint) are the real Qwen3.5 ones:
pre_fc_norm_embedding.weight, pre_fc_norm_hidden.weight, fc.weight [H, 2H],
layers.0.* (transformers' own Qwen3.5 decoder layer, full attention), norm.weight.
"""

import torch
from torch import nn


def build_mtp(text_config):
    from transformers.models.qwen3_5 import modeling_qwen3_5 as q

    full = [i for i, t in enumerate(text_config.layer_types) if t == "full_attention"]
    if not full:
        raise ValueError("the backbone has no full-attention layer to mirror")
    h, eps = text_config.hidden_size, text_config.rms_norm_eps
    m = nn.Module()
    m.pre_fc_norm_embedding = q.Qwen3_5RMSNorm(h, eps=eps)  # zero-centred: x_hat * (1 + w)
    m.pre_fc_norm_hidden = q.Qwen3_5RMSNorm(h, eps=eps)
    m.fc = nn.Linear(2 * h, h, bias=False)
    m.layers = nn.ModuleList([q.Qwen3_5DecoderLayer(text_config, full[0])])
    m.norm = q.Qwen3_5RMSNorm(h, eps=eps)
    std = getattr(text_config, "initializer_range", 0.02)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() == 2:
                p.normal_(0.0, std)
            elif name.endswith("weight"):
                p.zero_()  # every 1-D weight here is a zero-centred norm
    return m


def rotary(text_model, x, positions):
    """cos/sin for 1-D or [B, T] positions (Qwen3.5's text rotary wants [3, B, T])."""
    if positions.dim() == 1:
        positions = positions[None].expand(x.shape[0], -1)
    return text_model.rotary_emb(x, positions[None].expand(3, -1, -1))


def mtp_hidden(mtp, text_model, next_tokens, hidden, positions, attention_mask=None):
    """next_tokens [B, S] = t_{p+1}, hidden [B, S, H] = h_p, positions [S] or [B, S].

    Returns the MTP hidden after mtp.norm, [B, S, H]. With attention_mask None the
    layer's attention is causal over the S slots (sdpa's is_causal; eager needs a mask).
    """
    e = mtp.pre_fc_norm_embedding(text_model.embed_tokens(next_tokens))
    g = mtp.pre_fc_norm_hidden(hidden)
    x = mtp.fc(torch.cat([e, g], dim=-1))
    cos_sin = rotary(text_model, x, positions)
    y = mtp.layers[0](x, position_embeddings=cos_sin, attention_mask=attention_mask, position_ids=None,
                      past_key_values=None)
    if isinstance(y, tuple):
        y = y[0]
    return mtp.norm(y)
