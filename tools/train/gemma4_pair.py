#!/usr/bin/env python3
"""Train a small Gemma 4 target (gemma4_text) and its assistant drafter (gemma4_assistant) in one GPU call.

    python3 tools/train/gemma4_pair.py --work /tmp/lockstep-gemma4 --out OUTDIR [--train-until 250]

The pair exists to measure lockstep's `--spec assistant` on weights whose drafts are worth
accepting (random weights accept ~20%). Same corpus as train.py (Python source found on the GPU
machine), the shipped tokenizer of models/lockstep-code-16m (vocabulary 8192), so the gate prompts
of tests/gate/prompts.jsonl read naturally.

Target: Gemma4ForCausalLM, 24 layers [5 sliding : 1 full], sliding window 128, head dim 64 (2 KV
heads) on sliding layers, 128 with one KV head whose values are its keys (attention_k_eq_v) on full
layers, proportional RoPE (partial 0.25) on full layers, the last 6 layers reading earlier layers'
KV (num_kv_shared_layers), final-logit soft-capping 30.
Assistant: Gemma4AssistantForCausalLM, 2 layers [sliding, full] of hidden 256 reading the target's
KV, pre/post projections to the target's hidden 384, tied lm_head.

Training is joint: each step trains the target on next-token loss, then the assistant on the same
windows with the target's states detached. The assistant's K = --draft-steps unrolled steps follow
transformers 5.17's candidate generator: for a query at position p (the target cache holds keys
[0, p), its last chosen token x_p, its final hidden h_{p-1}), step 1 reads
pre_projection([target_embed(x_p) | h_{p-1}]), step j > 1 reads the token at p + j - 1 (teacher
forced) and step j - 1's post_projection, all at position p over the same keys: full layers see
[0, p), sliding layers the last sliding_window + 1 of them. Every query of a window runs in one
batched call with those masks; the `check` stage proves that call equal to transformers' own
Gemma4AssistantForCausalLM forward, one position at a time, on the exported weights. The loss is the
cross-entropy of the assistant's distribution against the target's (soft labels: forward KL).

Stages: data (corpus + encode), build, precheck (the check below on the untrained pair), train (wall-clock deadline), export (BF16, reload checks),
check (batched assistant forward vs transformers' API), eval (held-out loss, draft agreement).
OUTDIR/models/<name>/ and OUTDIR/results.json.
"""

import argparse
import copy
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import corpus as corpus_mod  # noqa: E402
import train as base  # noqa: E402  (T0, StepPlan, count, save_results)

from train import RESULTS, add_tokenizer, bf16_reference, edit_json, encode_docs, log, lr_at, make_opt, stage  # noqa: E402

SLIDE, FULL = "sliding_attention", "full_attention"
TOK_DIR = os.path.join(REPO, "models", "lockstep-code-16m")


def rope():
    return {SLIDE: {"rope_type": "default", "rope_theta": 10000.0},
            FULL: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}}


def target_config(args, vocab):
    import transformers

    types = ([SLIDE] * 5 + [FULL]) * (args.layers // 6)
    return transformers.Gemma4TextConfig(
        vocab_size=vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=len(types), layer_types=types, num_attention_heads=6, num_key_value_heads=2,
        head_dim=64, global_head_dim=128, num_global_key_value_heads=1, attention_k_eq_v=True,
        num_kv_shared_layers=args.kv_shared, use_double_wide_mlp=False, hidden_size_per_layer_input=0,
        vocab_size_per_layer_input=vocab, max_position_embeddings=4096, rms_norm_eps=1e-6,
        sliding_window=args.window, rope_parameters=rope(), final_logit_softcapping=30.0,
        hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True, enable_moe_block=False,
        initializer_range=0.02, bos_token_id=None, eos_token_id=0, pad_token_id=None)


def assistant_config(args, vocab):
    import transformers

    text = transformers.Gemma4TextConfig(
        vocab_size=vocab, hidden_size=args.assistant_hidden, intermediate_size=4 * args.assistant_hidden,
        num_hidden_layers=2, layer_types=[SLIDE, FULL], num_attention_heads=4, num_key_value_heads=2,
        head_dim=64, global_head_dim=128, num_global_key_value_heads=1, attention_k_eq_v=True,
        num_kv_shared_layers=2, use_double_wide_mlp=False, hidden_size_per_layer_input=0,
        vocab_size_per_layer_input=0, max_position_embeddings=4096, rms_norm_eps=1e-6,
        sliding_window=args.window, rope_parameters=rope(), final_logit_softcapping=None,
        hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True, enable_moe_block=False,
        initializer_range=0.02, bos_token_id=None, eos_token_id=0, pad_token_id=None)
    return transformers.Gemma4AssistantConfig(text_config=text, backbone_hidden_size=args.hidden,
                                              use_ordered_embeddings=False, tie_word_embeddings=True)


# ----------------------------------------------------------------------------
# the two forwards training and the checks share
# ----------------------------------------------------------------------------

def target_pass(tgt, x):
    """Final hidden [B, T, H] (what the candidate generator feeds the assistant), shared KV, logits."""
    out = tgt.model(input_ids=x, use_cache=False, output_hidden_states=True, return_shared_kv_states=True)
    logits = tgt.lm_head(out.last_hidden_state)
    cap = tgt.config.final_logit_softcapping
    if cap:
        logits = torch.tanh(logits / cap) * cap
    shared = {k: (v[0].detach(), v[1].detach()) for k, v in dict(out.shared_kv_states).items()}
    return out.hidden_states[-1], shared, logits


def query_masks(asst, first, Q, T, B, dev):
    """Masks for queries at positions first .. first+Q-1 over T target keys: full layers see keys
    [0, p), sliding layers the last sliding_window + 1 of those (transformers' flipped bidirectional
    window), in the format of the assistant's attention implementation."""
    p = torch.arange(first, first + Q, device=dev)[:, None]
    k = torch.arange(T, device=dev)[None, :]
    window = asst.config.get_text_config().sliding_window
    full = k < p
    sliding = full & (k >= p - 1 - window)
    impl = asst.model.config._attn_implementation
    out = {}
    for name, allowed in ((FULL, full), (SLIDE, sliding)):
        m = allowed[None, None].expand(B, 1, Q, T)
        if impl == "eager":
            m = torch.zeros(m.shape, device=dev, dtype=asst.dtype).masked_fill(~m, torch.finfo(asst.dtype).min)
        elif impl != "sdpa":
            raise RuntimeError(f"assistant attention implementation {impl}: the training masks need sdpa or eager")
        out[name] = m
    return out


def assistant_steps(asst, embed, h0, tokens, shared, first, masks):
    """Draft steps for every query p = first .. first+Q-1 at once: tokens[j] [B, Q] is step j's
    input token, h0 [B, Q, H] the target's hidden at p - 1. Returns the logits of each step."""
    B, Q = tokens[0].shape
    pos = torch.arange(first, first + Q, device=h0.device)[None].expand(B, Q)
    h, logits = h0, []
    for t in tokens:
        e = embed(t).detach()
        z = asst.pre_projection(torch.cat([e, h], dim=-1))
        hs = asst.model(inputs_embeds=z, attention_mask=masks, position_ids=pos, shared_kv_states=shared,
                        use_cache=False).last_hidden_state
        logits.append(asst.lm_head(hs))
        h = asst.post_projection(hs)
    return logits


def assistant_loss(asst, tgt, x, hidden, shared, t_logits, K):
    """Soft cross-entropy of K unrolled draft steps against the target's distributions."""
    B, T = x.shape
    first, Q = 1, T - K
    masks = query_masks(asst, first, Q, T, B, x.device)
    tokens = [x[:, first + j: first + j + Q] for j in range(K)]
    out = assistant_steps(asst, tgt.get_input_embeddings(), hidden[:, first - 1: first - 1 + Q].detach(),
                          tokens, shared, first, masks)
    losses, agree = [], []
    for j, a in enumerate(out):
        t = t_logits[:, first + j: first + j + Q].detach().float()
        a = a.float()
        losses.append(-(F.softmax(t, -1) * F.log_softmax(a, -1)).sum(-1).mean())
        agree.append((a.argmax(-1) == t.argmax(-1)).float().mean())
    return sum(losses) / K, losses, agree


# ----------------------------------------------------------------------------
# stages
# ----------------------------------------------------------------------------

def stage_data(args):
    from tokenizers import Tokenizer

    p = os.path.join(args.work, "tokens.npz")
    tok = Tokenizer.from_file(os.path.join(TOK_DIR, "tokenizer.json"))
    if os.path.exists(p) and args.resume:
        z = np.load(p)
        return tok, z["train"], z["held"]
    train, held, stats = corpus_mod.collect(cap_mb=args.corpus_mb, heldout_permille=20)
    tr, he = encode_docs(tok, train), encode_docs(tok, held)
    np.savez(p, train=tr, held=he)
    RESULTS["tokens"] = {"files": stats["files"], "train": int(tr.size), "heldout": int(he.size)}
    log(f"tokens: train {tr.size / 1e6:.2f} M, held-out {he.size / 1e6:.3f} M")
    return tok, tr, he


def build(args, vocab, dev):
    import transformers

    torch.manual_seed(args.seed)
    tgt = transformers.Gemma4ForCausalLM._from_config(target_config(args, vocab), attn_implementation="sdpa").to(dev)
    asst = transformers.Gemma4AssistantForCausalLM._from_config(assistant_config(args, vocab),
                                                                attn_implementation="sdpa").to(dev)
    n_t, n_a = base.count(tgt), base.count(asst)
    RESULTS["params"] = {"target": n_t, "assistant": n_a,
                         "assistant_attn": asst.model.config._attn_implementation,
                         "target_attn": tgt.config._attn_implementation}
    log(f"target {n_t / 1e6:.1f} M parameters, assistant {n_a / 1e6:.2f} M "
        f"(attention: {tgt.config._attn_implementation}, {asst.model.config._attn_implementation})")
    return tgt, asst


def stage_train(args, tgt, asst, train_ids, dev):
    T, B, K = args.seq, args.batch, args.draft_steps
    data = torch.from_numpy(train_ids.astype(np.int64)).to(dev)
    n = data.numel() - (T + 2)
    opt_t, opt_a = make_opt(list(tgt.parameters()), args.lr), make_opt(list(asst.parameters()), args.assistant_lr)
    gen = torch.Generator(device=dev).manual_seed(args.seed)
    ar = torch.arange(T + 1, device=dev)
    plan = base.StepPlan(base.T0 + args.train_until, args.steps)
    step, hist = 0, []
    tgt.train(), asst.train()
    V = tgt.config.vocab_size
    while plan.more(step):
        total, warm = plan.total, plan.warmup(args.warmup)
        w = data[torch.randint(0, n, (B,), device=dev, generator=gen)[:, None] + ar]
        x, y = w[:, :T], w[:, 1:]
        for opt, peak in ((opt_t, args.lr), (opt_a, args.assistant_lr)):
            for g in opt.param_groups:
                g["lr"] = lr_at(step, total or 10 ** 9, peak, warm)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            hidden, shared, t_logits = target_pass(tgt, x)
            l_t = F.cross_entropy(t_logits.float().view(-1, V), y.reshape(-1))
        l_t.backward()
        gn = torch.nn.utils.clip_grad_norm_(tgt.parameters(), 1.0)
        opt_t.step()
        opt_t.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            l_a, per_step, agree = assistant_loss(asst, tgt, x, hidden.detach(), shared, t_logits.detach(), K)
        l_a.backward()
        torch.nn.utils.clip_grad_norm_(asst.parameters(), 1.0)
        opt_a.step()
        opt_a.zero_grad(set_to_none=True)
        step += 1
        if step % args.log_every == 0 or step == 1:
            row = {"step": step, "loss": round(l_t.item(), 4), "assistant": [round(v.item(), 4) for v in per_step],
                   "agree": [round(v.item(), 3) for v in agree], "gnorm": round(gn.item(), 3),
                   "t": round(time.time() - base.T0, 1)}
            hist.append(row)
            log(json.dumps(row))
            if not math.isfinite(row["loss"]):
                raise RuntimeError("loss is not finite")
    RESULTS["train"] = {"steps": step, "planned_steps": plan.total, "tokens_seen": step * B * T, "batch": B, "seq": T,
                        "lr": args.lr, "assistant_lr": args.assistant_lr, "draft_steps": K, "history": hist}
    return step


def save(model, d):
    os.makedirs(d, exist_ok=True)
    copy.deepcopy(model).to(torch.bfloat16).eval().save_pretrained(d)


def stage_export(args, tgt, asst, held_ids, dev):
    import transformers

    root = os.path.join(args.out, "models")
    td, ad = os.path.join(root, args.target_name), os.path.join(root, args.target_name + "-assistant")
    save(tgt, td)
    save(asst, ad)
    add_tokenizer(td, TOK_DIR)
    edit_json(os.path.join(ad, "config.json"), {})  # sorted keys, as the target's
    ids = torch.from_numpy(held_ids[:257].astype(np.int64))[None].to(dev)
    rt = transformers.AutoModelForCausalLM.from_pretrained(td, dtype=torch.float32, attn_implementation="sdpa").to(dev)
    ra = transformers.Gemma4AssistantForCausalLM.from_pretrained(ad, dtype=torch.float32,
                                                                  attn_implementation="sdpa").to(dev)
    ref_t, ref_a = bf16_reference(tgt), bf16_reference(asst)
    with torch.no_grad():
        a = rt(input_ids=ids, use_cache=False).logits
        b = ref_t(input_ids=ids, use_cache=False).logits
        h, shared, mine = target_pass(rt, ids)
        masks = query_masks(ra, 1, 200, ids.shape[1], 1, dev)
        toks = [ids[:, 1:201]]
        la = assistant_steps(ra, rt.get_input_embeddings(), h[:, :200], toks, shared, 1, masks)[0]
        lb = assistant_steps(ref_a, rt.get_input_embeddings(), h[:, :200], toks, shared, 1,
                             query_masks(ref_a, 1, 200, ids.shape[1], 1, dev))[0]
    RESULTS["export"] = {
        "target": td, "assistant": ad, "target_class": type(rt).__name__,
        "target_reload_max_abs_logit_diff": (a - b).abs().max().item(),
        "target_pass_vs_forward_max_abs_logit_diff": (mine - a).abs().max().item(),
        "assistant_reload_max_abs_logit_diff": (la - lb).abs().max().item()}
    log("export:", json.dumps(RESULTS["export"]))
    return rt, ra, td, ad


def stage_check(args, rt, ra, held_ids, dev, name="check"):
    """The batched training forward against transformers' own assistant forward, one position at a
    time over a target cache of exactly that position's keys (transformers 5.17's candidate generator)."""
    K = args.draft_steps
    # Float64 copies: a random or lightly trained stack amplifies float32 (and TF32) rounding
    # through its attention peaks, so only float64 separates a semantic difference from noise.
    rt, ra = copy.deepcopy(rt).double().eval(), copy.deepcopy(ra).double().eval()
    ids = torch.from_numpy(held_ids[:400].astype(np.int64))[None].to(dev)
    L = ids.shape[1]
    embed = rt.get_input_embeddings()
    worst, checks = 0.0, []
    with torch.no_grad():
        h_all, shared_all, _ = target_pass(rt, ids)
        for n in (1, 7, args.window - 1, args.window + 2, 300):
            # transformers: target over ids[0..n-1], the assistant at position n with token ids[n]
            out = rt.model(input_ids=ids[:, :n], use_cache=False, output_hidden_states=True,
                           return_shared_kv_states=True)
            shared = dict(out.shared_kv_states)
            h = out.hidden_states[-1][:, n - 1: n]
            pos = torch.tensor([[n]], device=dev)
            ref = []
            for j in range(K):
                e = embed(ids[:, n + j: n + j + 1])
                r = ra(inputs_embeds=torch.cat([e, h], -1), position_ids=pos, shared_kv_states=shared,
                       attention_mask=None, use_cache=False)
                ref.append(r.logits[0, 0])
                h = r.last_hidden_state
            # the batched path: every query of the window, this one picked out
            masks = query_masks(ra, 1, L - K, L, 1, dev)
            toks = [ids[:, 1 + j: 1 + j + L - K] for j in range(K)]
            mine = assistant_steps(ra, embed, h_all[:, : L - K], toks, shared_all, 1, masks)
            d = max((m[0, n - 1] - r).abs().max().item() / max(1e-6, r.abs().max().item()) for m, r in zip(mine, ref))
            checks.append({"n": n, "max_rel_diff": d, "ref_argmax": [int(r.argmax()) for r in ref],
                           "mine_argmax": [int(m[0, n - 1].argmax()) for m in mine]})
            worst = max(worst, d)
    RESULTS[name] = {"positions": checks, "worst_rel_diff": worst}
    log(f"{name}:", json.dumps(RESULTS[name]))
    # transformers keeps float32 islands in a float64 model (the rotary tables), and a random stack
    # amplifies them through its attention peaks: the untrained pair measured 1.6e-5 with every
    # argmax equal, the trained one 8.9e-8; a mask or position off by one is O(1).
    if worst > 1e-4:
        raise RuntimeError(f"the batched assistant forward differs from transformers' by {worst:.3g} (relative)")
    return worst


def stage_eval(args, rt, ra, held_ids, dev):
    T, K, W = args.seq, args.draft_steps, args.eval_windows
    data = torch.from_numpy(held_ids.astype(np.int64)).to(dev)
    n = (data.numel() - 1) // (T + 1)
    starts = torch.linspace(0, (n - 1) * (T + 1), min(W, n), device=dev).long()
    ar = torch.arange(T + 1, device=dev)
    tot, agree, chained = 0.0, torch.zeros(K, device=dev), torch.zeros(K, device=dev)
    with torch.no_grad():
        for i in range(0, starts.numel(), 16):
            w = data[starts[i:i + 16, None] + ar]
            x, y = w[:, :T], w[:, 1:]
            h, shared, t_logits = target_pass(rt, x)
            tot += F.cross_entropy(t_logits.view(-1, t_logits.shape[-1]), y.reshape(-1), reduction="sum").item()
            Q = T - K
            masks = query_masks(ra, 1, Q, T, x.shape[0], dev)
            greedy = t_logits.argmax(-1)
            # teacher forced with the target's own greedy tokens: step j's input is what the target chose
            toks = [x[:, 1:1 + Q]] + [greedy[:, 1 + j - 1: 1 + j - 1 + Q] for j in range(1, K)]
            outs = assistant_steps(ra, rt.get_input_embeddings(), h[:, :Q], toks, shared, 1, masks)
            ok = torch.ones_like(greedy[:, :Q], dtype=torch.bool)
            for j, a in enumerate(outs):
                hit = a.argmax(-1) == greedy[:, 1 + j: 1 + j + Q]
                agree[j] += hit.float().mean() / math.ceil(starts.numel() / 16)
                ok &= hit
                chained[j] += ok.float().mean() / math.ceil(starts.numel() / 16)
    tokens = starts.numel() * T
    RESULTS["eval"] = {"windows": int(starts.numel()), "loss": tot / tokens, "ppl": math.exp(tot / tokens),
                       "step_agreement": [round(v, 4) for v in agree.tolist()],
                       "all_first_j_accepted": [round(v, 4) for v in chained.tolist()],
                       "expected_tokens_per_round": [round(1 + sum(chained.tolist()[:k]), 3) for k in range(1, K + 1)]}
    log("eval:", json.dumps(RESULTS["eval"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/lockstep-gemma4")
    ap.add_argument("--out", required=True)
    ap.add_argument("--resume", action="store_true", help="reuse WORK's tokens")
    ap.add_argument("--corpus-mb", type=float, default=200.0)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--intermediate", type=int, default=1536)
    ap.add_argument("--layers", type=int, default=24, help="a multiple of 6 ([5 sliding : 1 full])")
    ap.add_argument("--kv-shared", type=int, default=6, help="num_kv_shared_layers")
    ap.add_argument("--window", type=int, default=128, help="sliding_window")
    ap.add_argument("--assistant-hidden", type=int, default=256)
    ap.add_argument("--draft-steps", type=int, default=3, help="assistant steps unrolled in training")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--assistant-lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--steps", type=int, default=0, help="0: as many as fit before --train-until")
    ap.add_argument("--train-until", type=float, default=250.0, help="seconds after start")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--eval-windows", type=int, default=128)
    ap.add_argument("--seed", type=int, default=4321)
    ap.add_argument("--strict", action="store_true", help="stop when the untrained pair fails the check")
    ap.add_argument("--target-name", default="lockstep-gemma4-code")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    RESULTS["args"] = vars(args)
    import transformers

    RESULTS["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
    dev = torch.device("cuda")
    RESULTS["device"] = torch.cuda.get_device_name(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    got = stage("data", args, stage_data, args)
    if got is None:
        return 1
    tok, train_ids, held_ids = got
    models = stage("build", args, build, args, tok.get_vocab_size(), dev)
    if models is None:
        return 1
    tgt, asst = models
    # The same check on the untrained pair first: with --strict a mismatch ends the call in its
    # first minute instead of after training.
    if stage("precheck", args, stage_check, args, tgt, asst, held_ids, dev, "precheck") is None and args.strict:
        return 1
    if stage("train", args, stage_train, args, tgt, asst, train_ids, dev) is None:
        return 1
    exported = stage("export", args, stage_export, args, tgt, asst, held_ids, dev)
    if exported is None:
        return 1
    rt, ra, _, _ = exported
    rt.eval(), ra.eval()
    stage("check", args, stage_check, args, rt, ra, held_ids, dev)
    stage("eval", args, stage_eval, args, rt, ra, held_ids, dev)
    base.save_results(args)
    return 1 if RESULTS["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
