#!/usr/bin/env python3
"""Train lockstep's shipped models in one GPU call: a Qwen3.5 (qwen3_5_text) code
model with a jointly trained MTP head, and a small dense qwen3 draft model.

    python3 tools/train/train.py --work /tmp/lockstep-train --out OUTDIR [--smoke]

Stages (each wrapped: a failure in a late stage keeps what earlier ones made):
  corpus -> tokenizer -> encode -> train (wall-clock deadline, checkpoints every
  --ckpt-every s, resumable from WORK/ckpt.pt) -> export (BF16 HF checkpoints,
  reload check) -> eval (held-out loss/ppl, MTP and draft agreement, reference
  loss on a held-out sample, MTP cross-check against tools/reference) -> samples.
Everything lands in OUTDIR/models/<name>/ plus OUTDIR/results.json.
"""

import argparse
import json
import math
import os
import sys
import time
import traceback

T0 = time.time()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import corpus as corpus_mod  # noqa: E402
import tokenizer as tok_mod  # noqa: E402
from mtp import build_mtp, mtp_hidden  # noqa: E402

RESULTS = {"errors": {}, "timings": {}}
LIN, FULL = "linear_attention", "full_attention"
PROMPTS = ["def parse_args(", "class Stack:", "import os\n\ndef "]


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


def save_results(args):
    RESULTS["elapsed_s"] = round(time.time() - T0, 1)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(RESULTS, f, indent=1, default=str)


def stage(name, args, fn, *a, **kw):
    t = time.time()
    log(f"== {name}")
    try:
        r = fn(*a, **kw)
        RESULTS["timings"][name] = round(time.time() - t, 1)
        log(f"== {name} done in {time.time() - t:.1f}s")
        return r
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        RESULTS["errors"][name] = f"{type(e).__name__}: {e}"
        log(f"== {name} FAILED: {e}")
        return None
    finally:
        save_results(args)


# ----------------------------------------------------------------------------
# configs
# ----------------------------------------------------------------------------

def target_config(args, vocab):
    import transformers

    return transformers.Qwen3_5TextConfig(
        vocab_size=vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, layer_types=[LIN, LIN, LIN, FULL] * (args.layers // 4),
        num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        linear_key_head_dim=64, linear_value_head_dim=64, linear_num_key_heads=3, linear_num_value_heads=6,
        linear_conv_kernel_dim=4, max_position_embeddings=4096, rms_norm_eps=1e-6, hidden_act="silu",
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": [3, 3, 2], "mrope_interleaved": True},
        tie_word_embeddings=True, initializer_range=0.02, bos_token_id=None, eos_token_id=0, pad_token_id=None)


def draft_config(args, vocab):
    import transformers

    return transformers.Qwen3Config(
        vocab_size=vocab, hidden_size=192, intermediate_size=512, num_hidden_layers=3,
        num_attention_heads=3, num_key_value_heads=1, head_dim=64, max_position_embeddings=4096,
        rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=True, attention_bias=False, use_sliding_window=False, initializer_range=0.02,
        bos_token_id=None, eos_token_id=0, pad_token_id=None)


CONFIG_EXTRA_TARGET = {"attn_output_gate": True, "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False}


# ----------------------------------------------------------------------------
# stages
# ----------------------------------------------------------------------------

def stage_corpus(args):
    train, held, stats = corpus_mod.collect(cap_mb=args.corpus_mb, heldout_permille=20)
    RESULTS["corpus"] = {k: v for k, v in stats.items() if k != "packages"}
    RESULTS["corpus"]["packages"] = dict(sorted(stats["packages"].items(), key=lambda kv: -kv[1]["bytes"])[:40])
    RESULTS["corpus"]["n_packages"] = len(stats["packages"])
    log(f"corpus: {stats['files']} files {stats['bytes'] / 1e6:.1f} MB; train {stats['train_files']}, "
        f"held-out {stats['heldout_files']}; {len(stats['packages'])} packages; "
        f"dups {stats['duplicates']} rejected {stats['rejected_filter']}")
    return train, held


def stage_tokenizer(args, train):
    d = os.path.join(args.work, "tokenizer")
    if os.path.exists(os.path.join(d, "tokenizer.json")) and args.resume:
        from tokenizers import Tokenizer

        log("tokenizer: reusing", d)
        return Tokenizer.from_file(os.path.join(d, "tokenizer.json")), d
    budget, texts = args.tok_mb * 1e6, []
    for _, t in train:  # train docs are in corpus order (stdlib, then shuffled packages): take every k-th
        texts.append(t)
    step = max(1, int(sum(len(t) for t in texts) / budget + 0.999))
    texts = texts[::step]
    log(f"tokenizer: training on {len(texts)} files, {sum(len(t) for t in texts) / 1e6:.1f} MB")
    tok = tok_mod.train_tokenizer(texts, vocab_size=args.vocab)
    tok_mod.save_tokenizer(tok, d)
    RESULTS["tokenizer"] = {"vocab_size": tok.get_vocab_size(), "trained_on_bytes": sum(len(t) for t in texts),
                            "split_pattern": tok_mod.SPLIT_PATTERN, "specials": tok_mod.SPECIALS}
    return tok, d


def encode_docs(tok, docs):
    ids = []
    for i in range(0, len(docs), 2048):
        for enc in tok.encode_batch([t for _, t in docs[i:i + 2048]], add_special_tokens=False):
            ids.extend(enc.ids)
            ids.append(0)  # <|endoftext|> after every document
    return np.asarray(ids, dtype=np.uint16)


def stage_encode(args, tok, train, held):
    p = os.path.join(args.work, "tokens.npz")
    if os.path.exists(p) and args.resume:
        z = np.load(p)
        return z["train"], z["held"]
    tr = encode_docs(tok, train)
    he = encode_docs(tok, held)
    np.savez(p, train=tr, held=he)
    nbytes = sum(len(t.encode()) for _, t in train)
    RESULTS["tokens"] = {"train": int(tr.size), "heldout": int(he.size),
                         "bytes_per_token": round(nbytes / max(1, tr.size), 3)}
    log(f"tokens: train {tr.size / 1e6:.2f} M, held-out {he.size / 1e6:.3f} M, "
        f"{nbytes / max(1, tr.size):.2f} bytes/token")
    return tr, he


def count(m):
    return sum(p.numel() for p in m.parameters())


def build_models(args, vocab, dev):
    import transformers

    torch.manual_seed(args.seed)
    tcfg = target_config(args, vocab)
    tgt = transformers.Qwen3_5ForCausalLM._from_config(tcfg, attn_implementation="sdpa").to(dev)
    if tgt.config._attn_implementation != "sdpa":  # the MTP layer relies on sdpa's is_causal when mask is None
        raise RuntimeError(f"attention implementation is {tgt.config._attn_implementation}, not sdpa")
    mtp = build_mtp(tgt.config).to(dev)
    dcfg = draft_config(args, vocab)
    drf = transformers.Qwen3ForCausalLM._from_config(dcfg, attn_implementation="sdpa").to(dev)
    RESULTS["params"] = {"target_backbone": count(tgt), "target_mtp": count(mtp), "draft": count(drf)}
    log("params:", RESULTS["params"])
    return tgt, mtp, drf


def make_opt(params, lr):
    decay = [p for p in params if p.dim() >= 2]
    other = [p for p in params if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8, fused=True)


def lr_at(step, total, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def target_losses(tgt, mtp, x, y, pos, lam):
    h = tgt.model(input_ids=x, use_cache=False).last_hidden_state  # after the final norm
    v = tgt.config.vocab_size
    l_main = F.cross_entropy(tgt.lm_head(h).float().view(-1, v), y.reshape(-1))
    hm = mtp_hidden(mtp, tgt.model, x[:, 1:], h[:, :-1], pos[:-1])
    l_mtp = F.cross_entropy(tgt.lm_head(hm).float().view(-1, v), y[:, 1:].reshape(-1))
    return l_main + lam * l_mtp, l_main, l_mtp


class StepPlan:
    """How many steps fit before a wall-clock deadline: measured over steps 5-25, then fixed
    (a positive `total` fixes it from the start)."""

    def __init__(self, deadline, total=0):
        self.deadline, self.total, self.t_meas = deadline, total, None

    def more(self, step):
        if self.total and step >= self.total:
            return False
        if time.time() > self.deadline:
            log(f"deadline reached at step {step}")
            return False
        if step == 5:
            torch.cuda.synchronize()
            self.t_meas = time.time()
        if step == 25 and not self.total:
            torch.cuda.synchronize()
            dt = (time.time() - self.t_meas) / 20
            self.total = 25 + int((self.deadline - time.time()) / dt * 0.97)
            log(f"{dt * 1e3:.1f} ms/step -> total steps {self.total}")
        return True

    def warmup(self, peak_warmup):
        return min(peak_warmup, max(1, (self.total or 10 ** 9) // 10))


def stage_train(args, tgt, mtp, drf, train_ids, dev):
    T, B = args.seq, args.batch
    data = torch.from_numpy(train_ids.astype(np.int64)).to(dev)
    n = data.numel() - (T + 2)
    tparams = list(tgt.parameters()) + list(mtp.parameters())
    opt_t, opt_d = make_opt(tparams, args.lr), make_opt(list(drf.parameters()), args.draft_lr)
    ck = os.path.join(args.work, "ckpt.pt")
    step, total = 0, args.steps
    if args.resume and os.path.exists(ck):
        s = torch.load(ck, map_location=dev)
        tgt.load_state_dict(s["target"]), mtp.load_state_dict(s["mtp"]), drf.load_state_dict(s["draft"])
        opt_t.load_state_dict(s["opt_t"]), opt_d.load_state_dict(s["opt_d"])
        step, total = s["step"], s["total"]
        log(f"resumed from {ck} at step {step}/{total}")
    gen = torch.Generator(device=dev).manual_seed(args.seed + step)
    pos = torch.arange(T, device=dev)
    ar = torch.arange(T + 1, device=dev)
    plan = StepPlan(T0 + args.train_until, total)
    last_ck, hist = time.time(), []
    tgt.train(), mtp.train(), drf.train()

    def save_ckpt():
        tmp = ck + ".tmp"
        torch.save({"target": tgt.state_dict(), "mtp": mtp.state_dict(), "draft": drf.state_dict(),
                    "opt_t": opt_t.state_dict(), "opt_d": opt_d.state_dict(), "step": step, "total": plan.total},
                   tmp)
        os.replace(tmp, ck)

    while plan.more(step):
        total = plan.total
        warm = plan.warmup(args.warmup)
        off = torch.randint(0, n, (B,), device=dev, generator=gen)
        w = data[off[:, None] + ar]
        x, y = w[:, :T], w[:, 1:]
        lr = lr_at(step, total or 10 ** 9, args.lr, warm)
        lrd = lr_at(step, total or 10 ** 9, args.draft_lr, warm)
        for g in opt_t.param_groups:
            g["lr"] = lr
        for g in opt_d.param_groups:
            g["lr"] = lrd
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss, l_main, l_mtp = target_losses(tgt, mtp, x, y, pos, args.mtp_lambda)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(tparams, 1.0)
        opt_t.step()
        opt_t.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            l_d = F.cross_entropy(drf(input_ids=x, use_cache=False).logits.float().view(-1, drf.config.vocab_size),
                                  y.reshape(-1))
        l_d.backward()
        torch.nn.utils.clip_grad_norm_(drf.parameters(), 1.0)
        opt_d.step()
        opt_d.zero_grad(set_to_none=True)
        step += 1
        if step % args.log_every == 0 or step == 1:
            row = {"step": step, "loss": round(l_main.item(), 4), "mtp": round(l_mtp.item(), 4),
                   "draft": round(l_d.item(), 4), "gnorm": round(gn.item(), 3), "lr": lr,
                   "t": round(time.time() - T0, 1)}
            hist.append(row)
            log(json.dumps(row))
            if not math.isfinite(row["loss"]):
                raise RuntimeError("loss is not finite")
        if time.time() - last_ck > args.ckpt_every:
            save_ckpt()
            last_ck = time.time()
    total = plan.total
    save_ckpt()
    RESULTS["train"] = {"steps": step, "planned_steps": total, "tokens_seen": step * B * T, "history": hist,
                        "batch": B, "seq": T, "lr": args.lr, "draft_lr": args.draft_lr, "mtp_lambda": args.mtp_lambda,
                        "warmup": plan.warmup(args.warmup)}
    return step


# ----------------------------------------------------------------------------
# export and checks
# ----------------------------------------------------------------------------

def edit_json(path, extra):
    with open(path) as f:
        cfg = json.load(f)
    cfg.update(extra)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def export_one(model, d, tok_dir, extra_cfg, mtp=None):
    import copy

    from safetensors.torch import load_file, save_file

    os.makedirs(d, exist_ok=True)
    m = copy.deepcopy(model).to(torch.bfloat16).eval()
    m.save_pretrained(d)
    ref = bf16_reference(model)
    st = os.path.join(d, "model.safetensors")
    if mtp is not None:
        t = load_file(st)
        t.update({"mtp." + k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in mtp.state_dict().items()})
        save_file(t, st, metadata={"format": "pt"})
    edit_json(os.path.join(d, "config.json"), extra_cfg)
    add_tokenizer(d, tok_dir)
    return ref


def bf16_reference(model):
    """The float32 model a BF16 checkpoint stands for: BF16-rounded parameters, buffers (rotary inv_freq) untouched."""
    import copy

    ref = copy.deepcopy(model).float().eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    return ref


def add_tokenizer(d, tok_dir):
    """The tokenizer files and a generation config (stops at <|endoftext|> and <|im_end|>) beside a checkpoint."""
    import shutil

    gc = os.path.join(d, "generation_config.json")
    g = json.load(open(gc)) if os.path.exists(gc) else {}
    g.update({"eos_token_id": [0, 2], "pad_token_id": 0, "bos_token_id": None, "do_sample": False})
    with open(gc, "w") as f:
        json.dump(g, f, indent=2, sort_keys=True)
        f.write("\n")
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, fn), os.path.join(d, fn))


def check_reload(ref, d, dev, ids):
    """AutoModelForCausalLM loads the backbone unchanged: same logits as the BF16-rounded trained model."""
    import transformers

    r, info = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, output_loading_info=True,
                                                                attn_implementation="sdpa")
    r = r.to(dev).eval()
    ref = ref.to(dev)
    with torch.no_grad():
        a = r(input_ids=ids, use_cache=False).logits
        b = ref(input_ids=ids, use_cache=False).logits
    info = {k: sorted(v)[:8] if isinstance(v, (list, set)) else str(v) for k, v in dict(info).items()}
    return {"class": type(r).__name__, "max_abs_logit_diff": (a - b).abs().max().item(), "loading_info": info}, r


def stage_export(args, tgt, mtp, drf, tok_dir, held_ids, dev):
    from safetensors import safe_open

    pt = RESULTS["params"]
    tname = args.target_name or f"lockstep-code-{round((pt['target_backbone'] + pt['target_mtp']) / 1e6)}m"
    dname = args.draft_name or f"lockstep-draft-{round(pt['draft'] / 1e6)}m"
    td, dd = os.path.join(args.out, "models", tname), os.path.join(args.out, "models", dname)
    ids = torch.from_numpy(held_ids[:256].astype(np.int64))[None].to(dev)
    mt = export_one(tgt, td, tok_dir, CONFIG_EXTRA_TARGET, mtp=mtp)
    md = export_one(drf, dd, tok_dir, {})
    out = {"target_name": tname, "draft_name": dname}
    out["target_reload"], rt = check_reload(mt, td, dev, ids)
    out["draft_reload"], rd = check_reload(md, dd, dev, ids)
    with safe_open(os.path.join(td, "model.safetensors"), framework="pt") as f:
        keys = sorted(f.keys())
        out["target_tensors"] = {k: [str(f.get_slice(k).get_dtype()), list(f.get_slice(k).get_shape())]
                                 for k in keys}
    out["sizes_bytes"] = {n: sum(os.path.getsize(os.path.join(p, x)) for x in os.listdir(p))
                          for n, p in ((tname, td), (dname, dd))}
    RESULTS["export"] = out
    log(json.dumps({k: v for k, v in out.items() if k != "target_tensors"}, default=str)[:3000])
    return td, dd, rt, rd


def load_mtp_from(d, text_model, dev):
    from safetensors.torch import load_file

    t = load_file(os.path.join(d, "model.safetensors"))
    m = build_mtp(text_model.config)
    m.load_state_dict({k[4:]: v.float() for k, v in t.items() if k.startswith("mtp.")}, strict=True)
    return m.to(dev).eval(), t


@torch.no_grad()
def stage_eval(args, td, rt, rd, held_ids, dev):
    """Held-out metrics of the SHIPPED weights (BF16, computed in float32)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    mtp, _ = load_mtp_from(td, rt.model, dev)
    T = args.seq
    nwin = min(args.eval_windows, (held_ids.size - 1) // (T + 1))
    data = torch.from_numpy(held_ids[: nwin * (T + 1)].astype(np.int64)).view(nwin, T + 1).to(dev)
    pos = torch.arange(T, device=dev)
    s = {k: 0.0 for k in ("t_loss", "t_acc", "d_loss", "d_acc", "d_agree", "m_loss", "m_acc", "m_agree")}
    nt = nm = 0
    v = rt.config.vocab_size
    # Causality of the MTP layer with attention_mask None (sdpa is_causal) vs an explicit causal mask.
    x0 = data[:2, :T]
    h0 = rt.model(input_ids=x0, use_cache=False).last_hidden_state
    a0 = mtp_hidden(mtp, rt.model, x0[:, 1:], h0[:, :-1], pos[:-1])
    mask = torch.full((T - 1, T - 1), torch.finfo(torch.float32).min, device=dev).triu(1)[None, None]
    b0 = mtp_hidden(mtp, rt.model, x0[:, 1:], h0[:, :-1], pos[:-1], attention_mask=mask)
    RESULTS["mtp_mask_none_vs_explicit_max_abs"] = (a0 - b0).abs().max().item()
    log("MTP causal check (mask None vs explicit):", RESULTS["mtp_mask_none_vs_explicit_max_abs"])
    for i in range(0, nwin, 16):
        w = data[i:i + 16]
        x, y = w[:, :T], w[:, 1:]
        h = rt.model(input_ids=x, use_cache=False).last_hidden_state
        lt = rt.lm_head(h).float()
        ld = rd(input_ids=x, use_cache=False).logits.float()
        lm = rt.lm_head(mtp_hidden(mtp, rt.model, x[:, 1:], h[:, :-1], pos[:-1])).float()
        at, ad, am = lt.argmax(-1), ld.argmax(-1), lm.argmax(-1)
        s["t_loss"] += F.cross_entropy(lt.view(-1, v), y.reshape(-1), reduction="sum").item()
        s["d_loss"] += F.cross_entropy(ld.view(-1, v), y.reshape(-1), reduction="sum").item()
        s["t_acc"] += (at == y).sum().item()
        s["d_acc"] += (ad == y).sum().item()
        s["d_agree"] += (ad == at).sum().item()
        s["m_loss"] += F.cross_entropy(lm.reshape(-1, v), y[:, 1:].reshape(-1), reduction="sum").item()
        s["m_acc"] += (am == y[:, 1:]).sum().item()
        s["m_agree"] += (am == at[:, 1:]).sum().item()  # MTP slot p vs backbone greedy at p+1
        nt += y.numel()
        nm += y[:, 1:].numel()
    r = {"windows": nwin, "seq": T, "tokens": nt,
         "target_loss": s["t_loss"] / nt, "target_ppl": math.exp(s["t_loss"] / nt), "target_top1": s["t_acc"] / nt,
         "draft_loss": s["d_loss"] / nt, "draft_ppl": math.exp(s["d_loss"] / nt), "draft_top1": s["d_acc"] / nt,
         "draft_agreement_with_target_greedy": s["d_agree"] / nt,
         "mtp_loss_t2": s["m_loss"] / nm, "mtp_top1_t2": s["m_acc"] / nm,
         "mtp_agreement_with_backbone_next_next": s["m_agree"] / nm}
    RESULTS["eval"] = r
    log(json.dumps(r))
    return mtp


def pick_sample(held, lo=3000, hi=6000):
    for rel, text in sorted(held, key=lambda rt: (not rt[0].startswith("stdlib/"), rt[0])):  # PSF code first
        if len(text) >= lo and "def " in text:
            cut = text[:hi]
            return rel, cut[: cut.rfind("\n") + 1]
    rel, text = sorted(held)[0]
    return rel, text[:hi]


def stage_reference(args, td, dd, held, dev):
    """transformers' mean loss on a held-out sample (float32 from the BF16 weights, CPU, eager)."""
    import transformers
    from common import Float64Everywhere, rebuild_rotary_float64

    import mtp_reference

    ev = os.path.join(td, "eval")
    os.makedirs(ev, exist_ok=True)
    rel, text = pick_sample(held)
    with open(os.path.join(ev, "heldout_sample.txt"), "w") as f:
        f.write(text)
    hf_tok = transformers.AutoTokenizer.from_pretrained(td)
    ids = hf_tok(text, add_special_tokens=False)["input_ids"]
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(os.path.join(td, "tokenizer.json")).encode(text, add_special_tokens=False).ids
    out = {"file": "heldout_sample.txt", "source": rel, "chars": len(text), "n_tokens": len(ids),
           "ids_match_tokenizers_library": ids == raw, "decode_roundtrip": hf_tok.decode(ids) == text,
           "tokenizer_class": type(hf_tok).__name__,
           "chat_template_render": hf_tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                                              add_generation_prompt=True),
           "loss_definition": "mean over positions 1..n-1 of -log softmax(logits[i-1])[ids[i]]; no special tokens "
                              "added; float32 activations from the BF16 checkpoint, CPU, eager attention",
           "transformers": transformers.__version__, "torch": torch.__version__, "ids": ids}
    x = torch.tensor([ids])
    for key, d in (("target", td), ("draft", dd)):
        m = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
        m.eval()
        with torch.no_grad():
            out[f"{key}_loss_f32"] = m(input_ids=x, labels=x, use_cache=False).loss.item()
            m64 = m.to(torch.float64)
            rebuild_rotary_float64(m64)
            with Float64Everywhere():
                out[f"{key}_loss_f64"] = m64(input_ids=x, labels=x, use_cache=False).loss.item()
        if key == "target":
            # Cross-check this recipe's MTP forward against tools/reference/mtp_reference.py (float64).
            from safetensors.torch import load_file

            tensors = load_file(os.path.join(d, "model.safetensors"))
            n = min(64, len(ids))
            with Float64Everywhere():
                ref_mtp = mtp_reference.load_mtp(m64, tensors)
                ref = mtp_reference.compute(m64, ref_mtp, ids[:n])[0]
                mine_m = build_mtp(m64.config).to(torch.float64)
                mine_m.load_state_dict({k[4:]: v.double() for k, v in tensors.items() if k.startswith("mtp.")})
                hb = m64.model(input_ids=x[:, :n], use_cache=False).last_hidden_state
                mask = torch.full((n - 1, n - 1), torch.finfo(torch.float64).min, dtype=torch.float64).triu(1)
                mine = m64.lm_head(mtp_hidden(mine_m, m64.model, x[:, 1:n], hb[:, :-1], torch.arange(n - 1),
                                              attention_mask=mask[None, None]))[0]
            refl = torch.tensor(ref["teacher_forced"]["logits"], dtype=torch.float64)
            out["mtp_vs_reference_max_abs_diff"] = (mine - refl).abs().max().item()
            out["mtp_reference_max_abs_logit"] = refl.abs().max().item()
            try:
                out["mtp_check"] = mtp_check(ref, refl, m64, n)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                RESULTS["errors"]["mtp_check"] = str(e)
        del m
    with open(os.path.join(ev, "reference_loss.json"), "w") as f:
        json.dump(out, f, indent=1)
    RESULTS["reference"] = {k: v for k, v in out.items() if k != "ids"}
    log(json.dumps(RESULTS["reference"])[:2000])


def mtp_check(ref, tf, m64, n):
    ch = [torch.tensor(c["logits"], dtype=torch.float64) for c in ref["chained"]]
    return {
                "what": "tools/reference/mtp_reference.py (float64) on ids[:n]: teacher-forced slot p uses "
                        "token ids[p+1] and the backbone hidden at p; then 3 chained steps from the backbone's "
                        "greedy next token",
                "n": n, "teacher_forced_argmax": tf.argmax(-1).tolist(),
                "teacher_forced_max_logit": [round(v, 6) for v in tf.max(-1).values.tolist()],
                "backbone_argmax": torch.tensor(ref["backbone_hidden"], dtype=torch.float64).matmul(
                    m64.lm_head.weight.T).argmax(-1).tolist(),
                "chained_tokens_in": [c["token"] for c in ref["chained"]],
                "chained_argmax": [int(c.argmax()) for c in ch],
                "chained_max_logit": [round(float(c.max()), 6) for c in ch]}


@torch.no_grad()
def stage_samples(args, td, rt, rd, dev):
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(td)
    out = []
    for name, m in (("target", rt), ("draft", rd)):
        for p in PROMPTS if name == "target" else PROMPTS[:1]:
            x = tok(p, return_tensors="pt", add_special_tokens=False)["input_ids"].to(dev)
            try:
                g = m.generate(input_ids=x, max_new_tokens=128, do_sample=False, eos_token_id=0, pad_token_id=0)
                via = "generate"
            except Exception as e:  # noqa: BLE001
                log("generate failed, greedy without cache:", e)
                g = x
                for _ in range(128):
                    nxt = m(input_ids=g, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)
                    g = torch.cat([g, nxt], 1)
                    if nxt.item() == 0:
                        break
                via = "manual"
            text = tok.decode(g[0].tolist())
            out.append({"model": name, "prompt": p, "via": via, "text": text, "ids": g[0].tolist()})
            log(f"--- {name} {p!r} ({via})\n{text}\n---")
    RESULTS["samples"] = out


# ----------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/lockstep-train")
    ap.add_argument("--out", required=True)
    ap.add_argument("--resume", action="store_true", help="reuse WORK's tokenizer, tokens and ckpt.pt")
    ap.add_argument("--corpus-mb", type=float, default=200.0)
    ap.add_argument("--tok-mb", type=float, default=40.0)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--intermediate", type=int, default=768)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--draft-lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--mtp-lambda", type=float, default=0.3)
    ap.add_argument("--steps", type=int, default=0, help="0: as many as fit before --train-until")
    ap.add_argument("--train-until", type=float, default=480.0, help="seconds after start")
    ap.add_argument("--ckpt-every", type=float, default=90.0)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--eval-windows", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--target-name", default="")
    ap.add_argument("--draft-name", default="")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    RESULTS["args"] = vars(args)
    import transformers

    RESULTS["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__,
                           "python": sys.version.split()[0]}
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    RESULTS["device"] = torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    log(RESULTS["versions"], RESULTS["device"])

    c = stage("corpus", args, stage_corpus, args)
    if c is None:
        return 1
    train, held = c
    r = stage("tokenizer", args, stage_tokenizer, args, train)
    if r is None:
        return 1
    tok, tok_dir = r
    r = stage("encode", args, stage_encode, args, tok, train, held)
    if r is None:
        return 1
    train_ids, held_ids = r
    del train
    models = stage("build", args, build_models, args, tok.get_vocab_size(), dev)
    if models is None:
        return 1
    tgt, mtp, drf = models
    stage("train", args, stage_train, args, tgt, mtp, drf, train_ids, dev)
    r = stage("export", args, stage_export, args, tgt, mtp, drf, tok_dir, held_ids, dev)
    if r is None:
        return 1
    td, dd, rt, rd = r
    del tgt, drf
    torch.cuda.empty_cache()
    stage("eval", args, stage_eval, args, td, rt, rd, held_ids, dev)
    stage("reference", args, stage_reference, args, td, dd, held, dev)
    stage("samples", args, stage_samples, args, td, rt, rd, dev)
    try:
        import make_cards

        stage("cards", args, make_cards.write_all, args.out, RESULTS)
    except ImportError:
        pass
    return 1 if RESULTS["errors"] else 0


if __name__ == "__main__":
    rc = main()
    log("errors:", RESULTS["errors"])
    sys.exit(rc)
