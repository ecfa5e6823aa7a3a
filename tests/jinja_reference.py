#!/usr/bin/env python3
"""Render chat templates with Python's jinja2 exactly as Hugging Face
transformers' apply_chat_template does: an ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, the loopcontrols extension, transformers' own
tojson (json.dumps, ensure_ascii off) and the globals raise_exception and
strftime_now. The reference test_jinja_templates compares vt's interpreter
against (needs Debian's python3-jinja2).

usage: jinja_reference.py CASES.json RESULTS.json
  CASES.json   [{"template": PATH, "context": {...}}, ...]
  RESULTS.json written: [{"ok": true, "text": "..."} or {"ok": false, "error": "..."}, ...]
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    env = environment()
    compiled = {}
    results = []
    for case in cases:
        try:
            path = case["template"]
            if path not in compiled:
                with open(path, encoding="utf-8") as f:
                    compiled[path] = env.from_string(f.read())
            results.append({"ok": True, "text": compiled[path].render(**case["context"])})
        except Exception as e:  # every failure is a result: vt must fail too
            results.append({"ok": False, "error": "%s: %s" % (type(e).__name__, e)})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
