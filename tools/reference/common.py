"""Helpers shared by make_fixtures.py and mtp_reference.py.

Runs where PyTorch and transformers are installed (the GPU machine); nothing
here is needed to build or test lockstep itself.
"""

import json
import os

import torch
from torch.overrides import TorchFunctionMode


class Float64Everywhere(TorchFunctionMode):
    """Promote every float32 request to float64 while active.

    transformers computes some pieces in float32 on purpose even when the model
    is float64: RMSNorm (`x.float()` / `.to(torch.float32)`), the attention
    softmax (`softmax(..., dtype=torch.float32)`), the rotary cos/sin and the
    Gated DeltaNet kernels (inputs cast to float32). Inside this mode those casts
    become float64, so the reference is the same math as transformers' code, in
    float64 throughout. make_fixtures.py also runs the model without this mode
    and records the difference (it is tiny: ~1e-7 of the largest logit).
    """

    def __enter__(self):
        self._old_default = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        return super().__enter__()

    def __exit__(self, *exc):
        torch.set_default_dtype(self._old_default)
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if kwargs.get("dtype", None) is torch.float32:
            kwargs = dict(kwargs)
            kwargs["dtype"] = torch.float64
        name = getattr(func, "__name__", "")
        if args and isinstance(args[0], torch.Tensor):
            if name == "float":
                func = torch.Tensor.double
            elif name in ("to", "type"):
                args = tuple(torch.float64 if a is torch.float32 else a for a in args)
        return func(*args, **kwargs)


def rebuild_rotary_float64(model):
    """Recompute every text rotary embedding's inv_freq in float64.

    transformers builds inv_freq in float32 at construction; model.to(float64)
    only widens those float32 values. Rebuilding under Float64Everywhere gives
    the exact float64 frequencies (llama3 / yarn scaling included).
    Returns the largest relative change of inv_freq (for the log).
    """
    worst = 0.0
    for name, mod in list(model.named_modules()):
        if not name.endswith("rotary_emb") or "visual" in name or not hasattr(mod, "inv_freq"):
            continue
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        with Float64Everywhere():
            new = type(mod)(config=mod.config)
        new.to(torch.float64)
        old = mod.inv_freq.double()
        rel = ((new.inv_freq - old).abs() / old.abs().clamp_min(1e-300)).max().item()
        worst = max(worst, rel)
        setattr(parent, attr, new)
    return worst


def text_parts(model):
    """(text model, lm_head) for a *ForCausalLM or a *ForConditionalGeneration."""
    inner = model.model
    text = inner.language_model if hasattr(inner, "language_model") else inner
    return text, model.lm_head


def rotary_positions(text, positions):
    """Position ids in the shape the text model's rotary embedding expects.

    Qwen3.5's text rotary is multimodal (mrope): it wants [3, batch, T] (one row
    each for time, height, width; all equal for text). Others want [batch, T].
    """
    pos = positions.view(1, -1)
    if hasattr(text.rotary_emb, "mrope_section"):
        return pos[None].expand(3, 1, -1)
    return pos


def round9(x):
    """Nested lists of floats rounded to 9 significant digits."""
    if isinstance(x, torch.Tensor):
        x = x.tolist()
    if isinstance(x, list):
        return [round9(v) for v in x]
    return float(f"{x:.9g}")


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, separators=(",", ":"))
        f.write("\n")


def read_json(path):
    with open(path) as f:
        return json.load(f)


def versions():
    import transformers

    return transformers.__version__, torch.__version__


def fixture_file(d, name):
    return os.path.join(d, name)
