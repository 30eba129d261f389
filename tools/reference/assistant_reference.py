#!/usr/bin/env python3
"""Float64 reference of the Gemma 4 assistant drafter (Gemma4AssistantForCausalLM).

The fixture `gemma4-assistant-f32` is a tiny random Gemma 4 target
(Gemma4ForCausalLM) with two assistants made for it by transformers: one whose
logits come from its lm_head, one with `use_ordered_embeddings` (the
centroid-masked embedder). The draft steps follow transformers 5.17's
SinglePositionMultiTokenCandidateGenerator.get_candidates:

  target text model over ids[0..n-1] (use_cache=False, return_shared_kv_states):
    h          = hidden_states[-1][n-1]  (after the final norm)
    shared_kv  = {"full_attention": K, V of the target's last full layer with its own KV,
                  "sliding_attention": the same for its last sliding layer}, positions 0..n-1
  x_1 = argmax of the target's logits after ids (the last chosen token, position n)
  step j (j = 1, 2, 3), position_ids = [[n]] for every step:
    inputs_embeds = concat(target.get_input_embeddings()(x_j), h_j)   # scaled embedding first
    out = assistant(inputs_embeds, position_ids, shared_kv_states=shared_kv)
    logits_j = out.logits; h_{j+1} = out.last_hidden_state (post_projection); x_{j+1} = argmax

The assistant's full layers attend to all n target positions, its sliding layers to the
last sliding_window + 1 of them: create_bidirectional_sliding_window_mask keeps |q - kv| <=
sliding_window (inclusive) for query index 0, and the assistant flips that mask along kv.
`checks.<name>_sliding_last_window_plus_1` confirms it by running the steps on sliding KV cut to
those positions (0: the same logits); `checks.<name>_sliding_last_window` cuts to sliding_window
positions and is not 0 (the cut drops a key the mask keeps).

Use: `python3 assistant_reference.py tests/fixtures/gemma4-assistant-f32` recomputes
assistant_reference.json from the fixture's files and prints the largest difference.
make_fixtures.py calls make().
"""

import json
import math
import os
import shutil
import sys

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Float64Everywhere, read_json, round9, versions, write_json  # noqa: E402

NAME = "gemma4-assistant-f32"
VOCAB = 256  # a multiple of num_centroids (the ordered embedder views the vocabulary as [C][V/C])
IDS = [1, 17, 250, 42, 42, 7, 128, 3, 17, 99, 200, 42, 5, 0, 255, 17, 64, 64, 64, 31]
SLIDE, FULL = "sliding_attention", "full_attention"
STEPS = 3


def target_config():
    # gemma4-f32's target shape at vocab 256: 6 layers [S, F, S, S, S, F], the last two share KV
    # (so the assistant reads layer 3's sliding and layer 1's full KV, not the last layers'),
    # full layers hd 32 with one KV head whose values are its keys, per-layer inputs, window 5.
    return transformers.Gemma4TextConfig(
        vocab_size=VOCAB, hidden_size=48, intermediate_size=40, num_hidden_layers=6,
        layer_types=[SLIDE, FULL, SLIDE, SLIDE, SLIDE, FULL], num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, global_head_dim=32, num_global_key_value_heads=1, attention_k_eq_v=True,
        num_kv_shared_layers=2, use_double_wide_mlp=True, hidden_size_per_layer_input=8,
        vocab_size_per_layer_input=VOCAB, max_position_embeddings=256, rms_norm_eps=1e-6, sliding_window=5,
        rope_parameters={SLIDE: {"rope_type": "default", "rope_theta": 10000.0},
                         FULL: {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                "rope_theta": 1000000.0}},
        final_logit_softcapping=10.0, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
        enable_moe_block=False, bos_token_id=2, eos_token_id=1, pad_token_id=0)


def assistant_config(ordered):
    # 3 layers [S, S, F] of hidden 32 (smaller than the target's 48, as published assistants are),
    # 2 query heads per KV head on sliding layers, 4 on the full layer (one KV head).
    text = transformers.Gemma4TextConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=56, num_hidden_layers=3,
        layer_types=[SLIDE, SLIDE, FULL], num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        global_head_dim=32, num_global_key_value_heads=1, attention_k_eq_v=True, num_kv_shared_layers=3,
        use_double_wide_mlp=False, hidden_size_per_layer_input=0, vocab_size_per_layer_input=0,
        max_position_embeddings=256, rms_norm_eps=1e-6, sliding_window=5,
        rope_parameters={SLIDE: {"rope_type": "default", "rope_theta": 10000.0},
                         FULL: {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                "rope_theta": 1000000.0}},
        final_logit_softcapping=None, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
        enable_moe_block=False, bos_token_id=2, eos_token_id=1, pad_token_id=0)
    return transformers.Gemma4AssistantConfig(
        text_config=text, backbone_hidden_size=48, use_ordered_embeddings=ordered, num_centroids=8,
        centroid_intermediate_top_k=3, tie_word_embeddings=True)


def target_pass(target, ids):
    """(final-normed hidden [n, H], shared_kv dict, logits [n, V]) of the target over ids."""
    text = target.model
    with torch.no_grad():
        out = text(input_ids=torch.tensor([ids]), use_cache=False, output_hidden_states=True,
                   return_shared_kv_states=True)
        hidden = out.hidden_states[-1][0]  # what the candidate generator feeds the assistant
        normed_gap = (hidden - out.last_hidden_state[0]).abs().max().item()
        logits = target(input_ids=torch.tensor([ids]), use_cache=False).logits[0]
    return hidden, dict(out.shared_kv_states), logits, normed_gap


def draft_steps(target, assistant, ids, hidden, shared_kv, first_token, steps=STEPS):
    n = len(ids)
    embed = target.get_input_embeddings()
    pos = torch.tensor([[n]], dtype=torch.long)
    token, h = first_token, hidden[n - 1][None, None]
    out = []
    with torch.no_grad():
        for j in range(steps):
            e = embed(torch.tensor([[token]]))
            r = assistant(inputs_embeds=torch.cat([e, h], dim=-1), position_ids=pos, shared_kv_states=shared_kv,
                          attention_mask=None, use_cache=False)
            logits, h_next = r.logits[0, 0], r.last_hidden_state
            out.append({"step": j + 1, "token": token, "logits": logits, "hidden": h_next[0, 0]})
            token, h = int(torch.argmax(logits)), h_next
    return out


def truncated_sliding(shared_kv, window):
    k, v = shared_kv[SLIDE]
    return {FULL: shared_kv[FULL], SLIDE: (k[:, :, -window:], v[:, :, -window:])}


def compute(target, assistants, ids):
    """assistant_reference.json's content (inside Float64Everywhere with float64 models)."""
    hidden, shared_kv, logits, normed_gap = target_pass(target, ids)
    first = int(torch.argmax(logits[-1]))
    window = assistants["assistant"].config.get_text_config().sliding_window
    ref = {"ids": list(ids), "position": len(ids), "first_token": first, "target_hidden": round9(hidden),
           "target_logits": round9(logits),
           "shared_kv_shapes": {k: list(v[0].shape) for k, v in shared_kv.items()}, "assistants": {}}
    # 0: hidden_states[-1] is the final-normed hidden (what lockstep's observe_hidden gives).
    checks = {"hidden_states_last_vs_last_hidden_state": normed_gap}
    for name, a in assistants.items():
        steps = draft_steps(target, a, ids, hidden, shared_kv, first)
        for suffix, keep in (("", window), ("_plus_1", window + 1)):
            alt = draft_steps(target, a, ids, hidden, truncated_sliding(shared_kv, keep), first)
            checks[f"{name}_sliding_last_window{suffix}"] = max(
                (s["logits"] - t["logits"]).abs().max().item() for s, t in zip(steps, alt))
        ref["assistants"][name] = [
            {"step": s["step"], "token": s["token"], "logits": round9(s["logits"]), "hidden": round9(s["hidden"])}
            for s in steps]
        ref["assistants"][name + "_tokens"] = [s["token"] for s in steps]
    return ref, checks


def load_pair(d):
    target = transformers.Gemma4ForCausalLM.from_pretrained(
        os.path.join(d, "target"), dtype=torch.float32, attn_implementation="eager").to(torch.float64).eval()
    assistants = {}
    for name in ("assistant", "assistant-ordered"):
        assistants[name] = transformers.Gemma4AssistantForCausalLM.from_pretrained(
            os.path.join(d, name), dtype=torch.float32, attn_implementation="eager").to(torch.float64).eval()
    return target, assistants


def make(outroot, randomize, rebuild_rotary):
    """Builds, saves, reloads and references the fixture. randomize(module, seed, tied=...) and
    rebuild_rotary(model) are make_fixtures.py's."""
    d = os.path.join(outroot, NAME)
    shutil.rmtree(d, ignore_errors=True)
    torch.manual_seed(301)
    target = transformers.Gemma4ForCausalLM(target_config()).eval()
    randomize(target, 301, tied=True)
    target.save_pretrained(os.path.join(d, "target"))
    for i, (name, ordered) in enumerate((("assistant", False), ("assistant-ordered", True))):
        a = transformers.Gemma4AssistantForCausalLM(assistant_config(ordered)).eval()
        randomize(a, 302 + i, tied=True)
        if ordered:  # a permutation of the vocabulary (the buffer is saved with the weights)
            g = torch.Generator().manual_seed(310)
            a.masked_embedding.token_ordering.copy_(torch.randperm(VOCAB, generator=g))
        a.save_pretrained(os.path.join(d, name))
    target, assistants = load_pair(d)  # from disk, as lockstep reads them
    for m in [target, *assistants.values()]:
        rebuild_rotary(m)
    with Float64Everywhere():
        ref, checks = compute(target, assistants, IDS)
    plain, _ = compute(target, assistants, IDS)  # float64 as is (transformers' float32 islands)
    checks["transformers_f64_vs_strict"] = max(
        abs(a - b) for name in assistants for s, t in zip(ref["assistants"][name], plain["assistants"][name])
        for a, b in zip(s["logits"], t["logits"]))
    tv, pv = versions()
    ref.update({"model": NAME, "weights_dtype": "float32", "transformers": tv, "torch": pv,
                "precision": "float64: transformers' modeling code with its float32 casts promoted to float64",
                "checks": checks})
    write_json(os.path.join(d, "assistant_reference.json"), ref)
    print(f"[{NAME}] first token {ref['first_token']}, draft tokens "
          + ", ".join(f"{n}: {ref['assistants'][n + '_tokens']}" for n in assistants)
          + "  " + "  ".join(f"{k}={v:.2e}" for k, v in checks.items()))
    print("  shared kv shapes:", ref["shared_kv_shapes"])
    for sub in ("target", "assistant", "assistant-ordered"):
        print(f"  {sub}/config.json:", json.dumps(read_json(os.path.join(d, sub, "config.json")), sort_keys=True))
        print(f"  {sub} files:", sorted(os.listdir(os.path.join(d, sub))))
    return True


def main(argv):
    d = argv[1]
    stored = read_json(os.path.join(d, "assistant_reference.json"))
    target, assistants = load_pair(d)
    import make_fixtures  # noqa: E402  (its float64 rotary rebuild)

    for m in [target, *assistants.values()]:
        make_fixtures.rebuild_layer_type_rotary_float64(m)
    with Float64Everywhere():
        ref, _ = compute(target, assistants, stored["ids"])
    for name in assistants:
        worst = max(abs(a - b) for s, t in zip(ref["assistants"][name], stored["assistants"][name])
                    for a, b in zip(s["logits"], t["logits"]))
        print(f"{name}: tokens {ref['assistants'][name + '_tokens']} (stored "
              f"{stored['assistants'][name + '_tokens']}), max |recomputed - stored| logits {worst:.3g}")
    return 0 if math.isfinite(worst) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
