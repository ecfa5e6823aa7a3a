#!/usr/bin/env python3
"""check_doc_links.py — every relative link in the project's Markdown
(README.md, docs/*.md, bench/*.md, tests/data/PROVENANCE.md) points to a file
or folder that exists, and a link's #anchor, when it has one, to a heading of
that file (GitHub's anchor rule: lowercase, punctuation dropped, spaces to
dashes). Exit 1 listing every broken link.

usage: check_doc_links.py SOURCE_DIR
"""
import glob
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path):
    found = set()
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            if in_code or not line.startswith("#"):
                continue
            title = line.lstrip("#").strip().lower()
            title = re.sub(r"[^\w\- ]", "", title)
            found.add(title.replace(" ", "-"))
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    files = [os.path.join(root, "README.md"), os.path.join(root, "tests/data/PROVENANCE.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    files += sorted(glob.glob(os.path.join(root, "bench", "*.md")))
    broken, checked = [], 0
    for md in files:
        if not os.path.exists(md):
            broken.append("%s: missing" % md)
            continue
        text = open(md, encoding="utf-8").read()
        text = re.sub(r"```.*?```", "", text, flags=re.S)  # links inside code blocks are examples
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
            checked += 1
            if not os.path.exists(dest):
                broken.append("%s: %s: no such file" % (os.path.relpath(md, root), target))
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                broken.append("%s: %s: no heading with that anchor" % (os.path.relpath(md, root), target))
    for b in broken:
        print("check_doc_links: " + b)
    print("check_doc_links: %d relative links in %d files, %d broken" % (checked, len(files), len(broken)))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
