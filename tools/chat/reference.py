#!/usr/bin/env python3
"""Renders chat templates with Python Jinja2 exactly as transformers' apply_chat_template does.

This is the reference side of tests/chat/parity_test.cpp. The environment below is written to
match transformers (utils/chat_template_utils.py): ImmutableSandboxedEnvironment with
trim_blocks=True and lstrip_blocks=True, the loopcontrols extension, a {% generation %} tag
that renders its body, and the globals/filters tojson, raise_exception and strftime_now.
Render variables: messages, tools, documents, add_generation_prompt, then the tokenizer's
special tokens, then the conversation's extra options (which override them).

usage: reference.py OUT.json CONVERSATIONS.json SNIPPETS.json NAME=PATH...
(PATH: a tokenizer_config.json, or a bare template ending in .jinja)
The option "strftime_now" fixes the date strftime_now() formats ("YYYY-MM-DD[THH:MM:SS]").
"""
import datetime
import json
import sys

try:
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    sys.exit("reference.py: Python Jinja2 is not installed (apt-get install python3-jinja2, "
             "or run scripts/setup.sh)")

SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                  "mask_token"]


class Generation(Extension):
    """{% generation %}...{% endgeneration %}: transformers marks assistant text with it."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render_body")
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def environment(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return (now or datetime.datetime.now()).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def fixed_time(options):
    value = options.pop("strftime_now", None)
    return datetime.datetime.fromisoformat(value) if value else None


def render(source, messages, options):
    """The rendered text, or an error record when Jinja2 refuses (both sides must then fail)."""
    options = dict(options)
    now = fixed_time(options)
    kwargs = {"messages": messages, "tools": options.pop("tools", None),
              "documents": options.pop("documents", None),
              "add_generation_prompt": options.pop("add_generation_prompt", False)}
    kwargs.update(options)
    try:
        return {"text": environment(now).from_string(source).render(**kwargs)}
    except Exception as e:  # noqa: BLE001 - any refusal is a result to compare
        return {"error": f"{type(e).__name__}: {e}"}


def special_tokens(config):
    out = {}
    for key in SPECIAL_TOKENS:
        v = config.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            out[key] = v
    return out


def main():
    out_path, conversations_path, snippets_path, *templates = sys.argv[1:]
    with open(conversations_path, encoding="utf-8") as f:
        conversations = json.load(f)
    with open(snippets_path, encoding="utf-8") as f:
        snippets = json.load(f)
    renders = []
    for spec in templates:
        name, path = spec.split("=", 1)
        with open(path, encoding="utf-8") as f:
            # A .jinja file is a bare template (no special tokens); otherwise tokenizer_config.json.
            config = {"chat_template": f.read()} if path.endswith(".jinja") else json.load(f)
        source = config["chat_template"]
        if isinstance(source, list):
            source = next(t["template"] for t in source if t.get("name") == "default")
        for conv in conversations:
            options = {**special_tokens(config), **conv.get("options", {})}
            renders.append({"template": name, "conversation": conv["id"],
                            **render(source, conv["messages"], options)})
    snippet_results = []
    for s in snippets:
        variables = dict(s.get("vars", {}))
        now = fixed_time(variables)
        try:
            text = environment(now).from_string(s["template"]).render(**variables)
            snippet_results.append({"id": s["id"], "text": text})
        except Exception as e:  # noqa: BLE001
            snippet_results.append({"id": s["id"], "error": f"{type(e).__name__}: {e}"})
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"jinja2": jinja2.__version__, "renders": renders, "snippets": snippet_results},
                  f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
