#!/usr/bin/env python3
"""Fails if one of FILES #includes a header matching REGEX (ctest checks
that keep a library's sources off another room, e.g. the HTTP transport off
the Open Inference Protocol and JSON: http_transport_includes_no_oip).

Usage: forbid_includes.py REGEX FILE...   (exit 1 and a line per hit)
"""
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    forbid = re.compile(sys.argv[1])
    hits = 0
    for name in sys.argv[2:]:
        with open(name) as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if m and forbid.search(m.group(1)):
                    hits += 1
                    print(f"{name}:{number}: includes {m.group(1)} (forbidden: /{sys.argv[1]}/)")
    if hits:
        return 1
    print(f"{len(sys.argv) - 2} files include nothing matching /{sys.argv[1]}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
