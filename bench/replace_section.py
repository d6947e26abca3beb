#!/usr/bin/env python3
"""Replaces the text between '<!-- begin NAME -->' and '<!-- end NAME -->' in
a Markdown file with standard input, so each bench/*_table.sh script owns one
generated section of BENCHMARKS.md and leaves the prose around it alone.

Usage: replace_section.py FILE NAME < new_text
"""
import sys


def main():
    path, name = sys.argv[1], sys.argv[2]
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    with open(path) as fh:
        text = fh.read()
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        sys.exit(f"replace_section.py: {path} has no '{begin}' ... '{end}' section")
    body = sys.stdin.read().rstrip("\n")
    text = text[: i + len(begin)] + "\n" + body + "\n" + text[j:]
    with open(path, "w") as fh:
        fh.write(text)


if __name__ == "__main__":
    main()
