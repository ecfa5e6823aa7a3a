#!/usr/bin/env python3
"""Validate vt serve's answers under a JSON schema with an independent checker.

usage: check_json_schema.py SCHEMA.json ANSWERS.jsonl MIN_COMPLETE

ANSWERS.jsonl holds one HTTP answer body per line (a chat.completion or a
text_completion). Every answer that finished with "stop" must be JSON that
python-jsonschema validates against the schema (Draft 2020-12, formats
checked); "length" answers are counted as incomplete; any other finish
reason fails. At least MIN_COMPLETE (a fraction) must have finished.
Needs python3-jsonschema: without it this fails, it never skips."""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("check_json_schema.py: python3-jsonschema is required (bash .ci/install-deps)", file=sys.stderr)
    sys.exit(1)


def answer_text(body):
    choice = body["choices"][0]
    if "message" in choice:
        return choice["message"]["content"], choice["finish_reason"]
    return choice["text"], choice["finish_reason"]


def main():
    schema_path, answers_path, min_complete = sys.argv[1], sys.argv[2], float(sys.argv[3])
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator_class.check_schema(schema)
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    total = complete = 0
    bad = []
    with open(answers_path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            total += 1
            text, finish = answer_text(json.loads(line))
            if finish == "length":
                continue
            if finish != "stop":
                bad.append(f"finish_reason {finish!r}: {text!r}")
                continue
            complete += 1
            try:
                value = json.loads(text)
            except ValueError as e:
                bad.append(f"not JSON ({e}): {text!r}")
                continue
            errors = sorted(validator.iter_errors(value), key=str)
            if errors:
                bad.append(f"invalid ({errors[0].message}): {text!r}")
    print(f"{schema_path}: {total} answers, {complete} complete, {len(bad)} bad")
    for b in bad[:5]:
        print("  " + b[:400])
    if total == 0 or bad:
        sys.exit(1)
    if complete < min_complete * total:
        print(f"  only {complete}/{total} completed (wanted at least {min_complete:.0%})")
        sys.exit(1)


if __name__ == "__main__":
    main()
