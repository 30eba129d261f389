#!/usr/bin/env python3
"""Write the model cards (README.md) of the shipped models from train.py's results.json.

    python3 tools/train/make_cards.py RESULTS_JSON MODELS_DIR

Pure Python; train.py calls write_all() at its end, and it can be re-run here.
"""

import json
import os
import sys

REPRO = "bash tools/train/run_on_device.sh"


def _f(x, n=4):
    return "n/a" if x is None else f"{x:.{n}f}"


def _cfg(d):
    with open(os.path.join(d, "config.json")) as f:
        return json.load(f)


def _mb(n):
    return f"{n / 1e6:.2f} M"


def _corpus_section(r):
    c = r.get("corpus", {})
    tk = r.get("tokens", {})
    lines = [
        "## Corpus",
        "",
        "Python source files found on the training machine (no download): the CPython "
        f"{r.get('versions', {}).get('python', '')} standard library (`{c.get('stdlib_dir', '')}`) and the "
        f"`.py` files of the interpreter's installed packages (`{', '.join(c.get('site_dirs', []))}`).",
        "",
        f"- filters: UTF-8, 256 B to 256 KB, longest line at most 400 characters, at most 2% non-ASCII; "
        f"CRLF to LF; duplicates by SHA-256 of the content dropped ({c.get('duplicates', 'n/a')} duplicates, "
        f"{c.get('rejected_filter', 'n/a')} files rejected by the filters)",
        f"- size cap {c.get('cap_bytes', 0) / 1e6:.0f} MB: the standard library first, then package files in a "
        f"seeded shuffle (seed {c.get('seed')}), at most {100 * c.get('per_package_frac', 0):.0f}% of the cap from "
        "one top-level package",
        f"- held-out split by file: files whose `int(sha256[:8], 16) % 1000 < {c.get('heldout_permille')}` "
        "(2%) are held out",
        f"- {c.get('files', 0)} files, {c.get('bytes', 0) / 1e6:.1f} MB from {c.get('n_packages', 'n/a')} packages; "
        f"train {c.get('train_files', 0)} files ({c.get('train_bytes', 0) / 1e6:.1f} MB, "
        f"{tk.get('train', 0) / 1e6:.2f} M tokens), held-out {c.get('heldout_files', 0)} files "
        f"({c.get('heldout_bytes', 0) / 1e6:.2f} MB, {tk.get('heldout', 0) / 1e6:.3f} M tokens); "
        f"{tk.get('bytes_per_token', 'n/a')} bytes per token",
        "- every document is followed by `<|endoftext|>` (id 0); training windows are random 513-token slices "
        "of the concatenated stream",
        "",
        "### Licences",
        "",
        "The weights are a statistical summary of these files; no file is shipped except the held-out "
        "sample under `eval/` (from the source named in `eval/reference_loss.json`). The standard library is under "
        "the PSF License (PSF-2.0). The packages, each under its own licence as its metadata states (largest "
        "contributions first):",
        "",
        "| package | distribution | version | licence | files | MB |",
        "| --- | --- | --- | --- | ---: | ---: |",
    ]
    for k, v in c.get("packages", {}).items():
        lic = str(v.get("licence", "")).replace("|", "/")
        lines.append(f"| {k} | {v.get('dist', '')} | {v.get('version', '')} | {lic} | {v['files']} | "
                     f"{v['bytes'] / 1e6:.2f} |")
    if c.get("n_packages", 0) > len(c.get("packages", {})):
        lines.append(f"| (and {c['n_packages'] - len(c['packages'])} smaller ones) | | | | | |")
    return lines


def _samples(r, model):
    out = []
    for s in r.get("samples", []):
        if s["model"] != model:
            continue
        out += [f"Prompt `{s['prompt']!r}` (greedy, 128 new tokens, transformers `{s['via']}`):", "",
                "```python", s["text"].replace("```", "` ` `"), "```", ""]
    return out


def _training(r):
    a, t = r.get("args", {}), r.get("train", {})
    return [
        "## Training",
        "",
        f"One call on one {r.get('device', 'GPU')} (torch {r.get('versions', {}).get('torch')}, transformers "
        f"{r.get('versions', {}).get('transformers')}); the target and the draft are trained side by side on the "
        "same batches.",
        "",
        "| hyper-parameter | value |",
        "| --- | --- |",
        f"| steps | {t.get('steps')} (planned {t.get('planned_steps')}: as many as fit in the wall-clock budget "
        f"`--train-until {a.get('train_until')}` s from the start) |",
        f"| batch | {t.get('batch')} sequences x {t.get('seq')} tokens = {t.get('batch', 0) * t.get('seq', 0)} tokens |",
        f"| tokens seen | {t.get('tokens_seen', 0) / 1e6:.1f} M |",
        "| optimiser | AdamW, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on matrices (>= 2-D), 0 on the rest |",
        f"| learning rate | target {a.get('lr')}, draft {a.get('draft_lr')}; linear warm-up {t.get('warmup')} steps, "
        "cosine to 10% |",
        "| gradient clipping | 1.0 (global norm, each model) |",
        "| precision | float32 weights, bfloat16 autocast; shipped as bfloat16 |",
        f"| loss (target) | CE(next token) + {a.get('mtp_lambda')} x CE(MTP, token t+2) |",
        "| init | transformers' own (normal 0.02, zero-centred norms at 0); MTP matrices normal 0.02 |",
        f"| seed | {a.get('seed')} |",
        "",
    ]


def target_card(r, d):
    cfg = _cfg(d)
    p, e = r.get("params", {}), r.get("eval", {})
    ref = r.get("reference", {})
    name = os.path.basename(d)
    lines = [
        f"# {name}",
        "",
        "A small Python code model with the **Qwen3.5 text architecture** (`qwen3_5_text`: three Gated DeltaNet "
        "linear-attention layers for every gated full-attention layer) and a jointly trained **multi-token-"
        "prediction (MTP) head** under `mtp.*`, trained from scratch by lockstep's recipe (`tools/train/`). It is "
        "meant to be lockstep's default model (no `-m`) and the one its speculative decoding is measured on. "
        "It writes plausible-looking Python; it is not a useful assistant.",
        "",
        "## Architecture",
        "",
        f"`Qwen3_5ForCausalLM`, {_mb(p.get('target_backbone', 0))} parameters in the backbone (embedding tied to "
        f"the lm_head) + {_mb(p.get('target_mtp', 0))} in the MTP head; BF16 safetensors.",
        "",
        "| field | value |",
        "| --- | --- |",
    ]
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "layer_types",
              "num_attention_heads", "num_key_value_heads", "head_dim", "linear_num_key_heads",
              "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
              "partial_rotary_factor", "rope_parameters", "rms_norm_eps", "tie_word_embeddings", "attn_output_gate",
              "mtp_num_hidden_layers", "max_position_embeddings", "eos_token_id"):
        if k in cfg:
            lines.append(f"| `{k}` | `{json.dumps(cfg[k])}` |")
    lines += [
        "",
        "Trained context: 512 tokens. mrope sections are irrelevant for text (all three position rows are equal).",
        "",
        "### MTP head",
        "",
        "Tensors `mtp.pre_fc_norm_embedding.weight`, `mtp.pre_fc_norm_hidden.weight`, `mtp.fc.weight` [H, 2H], "
        "`mtp.layers.0.*` (one full-attention decoder layer shaped exactly like the backbone's), `mtp.norm.weight`; "
        "all norms zero-centred (x_hat * (1 + w)). transformers ignores `mtp.*` on load.",
        "",
        "- h_p: the backbone's hidden state at position p **after** its final norm",
        "- slot p input: `fc(concat[pre_fc_norm_embedding(embed(t_{p+1})), pre_fc_norm_hidden(h_p)])` "
        "(embedding first)",
        "- the decoder layer runs causally over the slots with rotary position p; then `mtp.norm`; logits through "
        "the backbone's lm_head (the tied embedding); slot p predicts t_{p+2}",
        f"- trained jointly: loss = CE(next) + {r.get('args', {}).get('mtp_lambda')} x CE(MTP, t+2); the MTP "
        "gradient also flows into the backbone",
        "- checked against lockstep's float64 reference (`tools/reference/mtp_reference.py`) on the shipped "
        f"weights: max |logit difference| {ref.get('mtp_vs_reference_max_abs_diff', 'n/a')} "
        f"(largest logit {ref.get('mtp_reference_max_abs_logit', 'n/a')}); `mtp_check` in `eval/reference_loss.json` "
        "holds that reference's argmax tokens and largest logits for the first 64 held-out tokens",
        "",
        "## Tokenizer",
        "",
        "Byte-level BPE trained with the `tokenizers` library on the training split "
        f"({r.get('tokenizer', {}).get('trained_on_bytes', 0) / 1e6:.0f} MB of it), vocabulary "
        f"{r.get('tokenizer', {}).get('vocab_size', cfg.get('vocab_size'))}: a `Split` pre-tokenizer with the "
        "GPT-4 (cl100k) pattern, then `ByteLevel` (use_regex false), `ByteLevel` decoder, no post-processor. "
        "Special tokens: `<|endoftext|>` = 0 (EOS, document separator), `<|im_start|>` = 1, `<|im_end|>` = 2. "
        "`tokenizer_config.json` names `PreTrainedTokenizerFast` and a ChatML-style chat template (never trained "
        "on: the model only knows raw code). `generation_config.json` stops on ids 0 and 2.",
        "",
    ]
    lines += _training(r)
    lines += _corpus_section(r)
    lines += [
        "",
        "## Evaluation (held-out files, shipped BF16 weights computed in float32)",
        "",
        f"{e.get('windows')} windows of {e.get('seq')} tokens ({e.get('tokens')} predictions), teacher-forced.",
        "",
        "| measure | value |",
        "| --- | --- |",
        f"| loss (nats/token) | {_f(e.get('target_loss'))} |",
        f"| perplexity | {_f(e.get('target_ppl'), 3)} |",
        f"| top-1 next-token accuracy | {_f(e.get('target_top1'))} |",
        f"| MTP loss on t+2 | {_f(e.get('mtp_loss_t2'))} |",
        f"| MTP top-1 accuracy on t+2 | {_f(e.get('mtp_top1_t2'))} |",
        f"| **MTP top-1 agreement with the backbone's greedy next-next token** (argmax MTP slot p == argmax "
        f"backbone at p+1) | **{_f(e.get('mtp_agreement_with_backbone_next_next'))}** |",
        f"| draft model ({r.get('export', {}).get('draft_name', 'draft')}) agreement with this model's greedy "
        f"next token | {_f(e.get('draft_agreement_with_target_greedy'))} |",
        "",
        "### Reference loss for lockstep's `score`",
        "",
        f"`eval/heldout_sample.txt` ({ref.get('chars')} characters from held-out file `{ref.get('source')}`, "
        f"{ref.get('n_tokens')} tokens without special tokens). transformers {ref.get('transformers')} mean loss "
        "(positions 1..n-1, CPU, eager attention) from the BF16 weights:",
        "",
        f"- float32: **{ref.get('target_loss_f32')}**",
        f"- float64 (transformers' code with its float32 casts promoted): {ref.get('target_loss_f64')}",
        "",
        "`eval/reference_loss.json` has these, the token ids, and the draft model's numbers. lockstep's `score` "
        "on this file must agree within 1e-3.",
        "",
        "## Samples",
        "",
    ]
    lines += _samples(r, "target")
    lines += [
        "## Reproduce",
        "",
        "On the GPU machine (PyTorch, transformers and tokenizers installed; nothing downloaded), from the "
        "repository root:",
        "",
        "```sh",
        REPRO,
        "```",
        "",
        "It writes `models.tgz.part-*` (split for transfer), `results.json` and `train.log` to `$OUT`; see "
        "`tools/train/README.md`. The step count follows the wall-clock budget, so a rerun on other hardware "
        "gives a similar, not bit-identical, model; pass `--steps N` to fix it "
        f"(this one: `--steps {r.get('train', {}).get('steps')}`).",
        "",
        "## Limitations",
        "",
        "Tiny and briefly trained: it repeats itself, invents APIs and loses track past a few hundred tokens. "
        "Trained on 512-token windows only. Not for any use beyond testing and measuring lockstep.",
        "",
    ]
    return "\n".join(lines)


def draft_card(r, d):
    cfg = _cfg(d)
    p, e = r.get("params", {}), r.get("eval", {})
    ref = r.get("reference", {})
    tname = r.get("export", {}).get("target_name", "the target")
    lines = [
        f"# {os.path.basename(d)}",
        "",
        f"A tiny dense `qwen3` model ({_mb(p.get('draft', 0))} parameters, embedding tied) with the same tokenizer "
        f"as `{tname}`, trained on the same batches at the same time, for draft-model speculative decoding in "
        "lockstep. BF16 safetensors.",
        "",
        "| field | value |",
        "| --- | --- |",
    ]
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim", "rope_parameters", "rope_theta", "rms_norm_eps",
              "tie_word_embeddings", "max_position_embeddings", "eos_token_id"):
        if k in cfg:
            lines.append(f"| `{k}` | `{json.dumps(cfg[k])}` |")
    lines += [""] + _training(r) + [
        f"Corpus, tokenizer and licences: as in `models/{tname}/README.md`.",
        "",
        "## Evaluation (held-out files, shipped BF16 weights computed in float32)",
        "",
        "| measure | value |",
        "| --- | --- |",
        f"| loss (nats/token) | {_f(e.get('draft_loss'))} |",
        f"| perplexity | {_f(e.get('draft_ppl'), 3)} |",
        f"| top-1 next-token accuracy | {_f(e.get('draft_top1'))} |",
        f"| **top-1 agreement with `{tname}`'s greedy next token** | "
        f"**{_f(e.get('draft_agreement_with_target_greedy'))}** |",
        "",
        f"transformers' mean loss on `models/{tname}/eval/heldout_sample.txt`: float32 {ref.get('draft_loss_f32')}, "
        f"float64 {ref.get('draft_loss_f64')}.",
        "",
        "## Sample",
        "",
    ] + _samples(r, "draft") + [
        "## Reproduce",
        "",
        "```sh",
        REPRO,
        "```",
        "",
    ]
    return "\n".join(lines)


def write_all(out_dir, results):
    ex = results.get("export", {})
    models = os.path.join(out_dir, "models") if os.path.isdir(os.path.join(out_dir, "models")) else out_dir
    td = os.path.join(models, ex["target_name"])
    dd = os.path.join(models, ex["draft_name"])
    with open(os.path.join(td, "README.md"), "w") as f:
        f.write(target_card(results, td))
    with open(os.path.join(dd, "README.md"), "w") as f:
        f.write(draft_card(results, dd))


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        write_all(sys.argv[2], json.load(f))
