#!/usr/bin/env python3
"""Every relative link in the repository's Markdown files names a file that
exists (and, for a link to a heading of a Markdown file, a heading that
exists), so that docs do not point at moved sections or files.

usage: check_links.py ROOT
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path):
    """GitHub's anchors for the headings of a Markdown file."""
    out = set()
    with open(path, encoding="utf-8") as f:
        in_code = False
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            if in_code or not line.startswith("#"):
                continue
            text = line.lstrip("#").strip().lower()
            text = re.sub(r"[^\w\- ]", "", text)
            out.add(text.replace(" ", "-"))
    return out


def main():
    root = sys.argv[1]
    try:
        files = subprocess.run(["git", "-C", root, "ls-files", "*.md"], capture_output=True,
                               text=True).stdout.split()
    except FileNotFoundError:  # no git on this machine
        files = []
    if not files:  # not a git checkout (e.g. a source tarball): walk instead
        for dirpath, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(("build", ".")) and d != "node_modules"]
            files += [os.path.relpath(os.path.join(dirpath, n), root) for n in names
                      if n.endswith(".md")]
    problems = 0
    for md in files:
        with open(os.path.join(root, md), encoding="utf-8") as f:
            text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(root, os.path.dirname(md), path))
            if not os.path.exists(full):
                print(f"{md}: link to {target}: no such file")
                problems += 1
            elif anchor and full.endswith(".md") and anchor not in anchors(full):
                print(f"{md}: link to {target}: no such heading")
                problems += 1
    print(f"{len(files)} Markdown files, {problems} broken links")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
