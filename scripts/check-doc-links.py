#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/check-doc-links.py [FILE.md...]: every relative link [text](path#anchor)
in README.md and docs/*.md (or the files given) must name a file or folder
that exists, and an anchor must name a heading of that file (GitHub's rule:
lower case, punctuation dropped, spaces to hyphens). Exit status 1 and one
line per broken link otherwise."""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def text_outside_code(path):
    """The file's lines outside fenced code blocks, with inline code removed."""
    lines, fenced = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line.strip()):
                fenced = not fenced
                continue
            if not fenced:
                lines.append(re.sub(r"`[^`]*`", "``", line))
    return lines


def anchors(path):
    found, fenced = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line.strip()):
                fenced = not fenced
                continue
            m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
                base, n = slug, 1
                while slug in found:
                    slug, n = f"{base}-{n}", n + 1
                found.add(slug)
    return found


def main(files):
    if not files:
        files = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    broken = 0
    for path in files:
        for number, line in enumerate(text_outside_code(path), 1):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                rel = os.path.relpath(path, ROOT)
                if not os.path.exists(dest):
                    print(f"{rel}: {target}: no such file")
                    broken += 1
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    print(f"{rel}: {target}: no heading #{anchor} in {os.path.relpath(dest, ROOT)}")
                    broken += 1
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
