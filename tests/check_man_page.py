#!/usr/bin/env python3
"""check_man_page.py — docs/man/vt.1 lists what `vt --help` lists, at vt's version.

The manual page is written by hand; this keeps it in step with the binary:
every command `vt --help` lists has its entry under COMMANDS (and no entry
names a command vt does not have), the page's header names `vt version`'s
version, every VT_ variable it documents is one the sources read, and groff
renders it without a warning (groff -ww -man -z).

Usage: check_man_page.py MAN_PAGE VT_BINARY SOURCE_DIR   (exit 0 = OK, 1 = a check failed)
"""
import os
import re
import subprocess
import sys

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def main():
    page_path, vt, source = sys.argv[1], sys.argv[2], sys.argv[3]
    page = open(page_path).read()
    listed = subprocess.run([vt, "--help"], capture_output=True, text=True).stdout
    commands = re.findall(r"^  ([a-z]+) ", listed.split("commands:", 1)[-1], re.M)
    check(len(commands) >= 10, "`vt --help` lists %d commands: %r" % (len(commands), commands))
    section = page.split(".SH COMMANDS", 1)[-1].split("\n.SH ", 1)[0]
    entries = re.findall(r"^\.TP\n\.B (\S+)$", section, re.M)
    check(sorted(entries) == sorted(commands), "COMMANDS has %s, vt --help %s" % (sorted(entries), sorted(commands)))

    version = subprocess.run([vt, "version"], capture_output=True, text=True).stdout.split("\n", 1)[0].split()[-1]
    header = re.search(r'^\.TH VT 1 "[^"]*" "vt ([^"]+)"', page, re.M)
    check(header and header.group(1) == version, "the page is for vt %s, the binary is %s" %
          (header.group(1) if header else "?", version))

    read = set()
    for folder in ("core", "backends"):
        for root, _, files in os.walk(os.path.join(source, folder)):
            for name in files:
                if name.endswith((".c", ".h")):
                    read |= set(re.findall(r'"(VT_[A-Z0-9_]+)"', open(os.path.join(root, name), errors="replace").read()))
    documented = set(re.findall(r"\bVT_[A-Z0-9_]+\b", page)) - {"VT_SERVE_MODEL"}  # the unit's, not vt's
    check(documented and documented <= read, "variables no source reads: %s" % sorted(documented - read))

    try:
        out = subprocess.run(["groff", "-ww", "-man", "-Tutf8", "-z", page_path], capture_output=True, text=True)
        check(out.returncode == 0 and not out.stderr.strip(), "groff: %s" % out.stderr.strip())
    except FileNotFoundError:
        check(False, "groff is not installed (Debian package groff-base: bash .ci/install-deps)")

    for f in failures:
        print("check_man_page: %s" % f)
    print("check_man_page: %s" % ("FAILED" if failures else "OK"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
