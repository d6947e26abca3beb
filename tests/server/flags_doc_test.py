#!/usr/bin/env python3
"""docs/server.md's flag table matches the server's --help.

Every flag the server defines (but the tests-only ones) has a row in the
table of docs/server.md, every row names a flag the server has, and each
row's default is the one --help prints (written as the docs write it: `0`,
`10s`, `127.0.0.1`; "empty"/"none" for an empty string; a row may also say
what -1 means, e.g. "`-1` (derived)"). Without this check the table drifted
from the flags (issue 39).

usage: flags_doc_test.py SERVER_BINARY DOCS_SERVER_MD
"""
import re
import subprocess
import sys

def help_flags(binary):
    out = subprocess.run([binary, "--helpfull"], capture_output=True, text=True).stdout
    flags = {}
    for section in re.split(r"^  Flags from ", out, flags=re.M)[1:]:
        source = section.split(":", 1)[0]
        # Abseil's own flags (--flagfile, --help...) and tests-only switches.
        if "absl/" in source or "test_only" in source:
            continue
        # One flag: "--name (help text); default: VALUE;" over several lines,
        # each flag's first line indented by four spaces.
        for entry in re.split(r"^(?=    --)", section, flags=re.M)[1:]:
            # The last flag of the output is followed by a blank line and
            # Abseil's "Try --helpfull" footer: not part of its entry.
            text = " ".join(entry.split("\n\n")[0].split())
            m = re.match(r"--(\w+) \(.*\); default: (.*);$", text)
            if m:
                flags[m.group(1)] = m.group(2).strip()
    return flags


def doc_rows(path):
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            # "| `--a` | default | meaning |" or "| `--a`, `--b` | ... |"
            m = re.match(r"^\| ((?:`--\w+`(?:, )?)+) \| ([^|]*) \|", line)
            if m:
                for name in re.findall(r"`--(\w+)`", m.group(1)):
                    rows[name] = m.group(2).strip()
    return rows


DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|us|ns|h|m|s)")
UNIT_SECONDS = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def seconds(text):
    """An Abseil duration ("1m", "1h30m", "500ms") in seconds, else None."""
    if not text or DURATION_PART.sub("", text) != "":
        return None
    return sum(float(n) * UNIT_SECONDS[u] for n, u in DURATION_PART.findall(text))


def default_matches(help_default, doc):
    value = help_default.strip('"')
    if value == "":
        return re.search(r"\b(empty|none|off|unset)\b", doc, re.I) is not None or doc in ("`\"\"`", "``")
    codes = re.findall(r"`([^`]*)`", doc)
    if value in codes or value == doc:
        return True
    # Durations as the docs write them: `60s` for --help's 1m.
    return seconds(value) is not None and any(seconds(c) == seconds(value) for c in codes)


def main():
    binary, md = sys.argv[1], sys.argv[2]
    flags, rows = help_flags(binary), doc_rows(md)
    if len(flags) < 10:
        print(f"--helpfull listed only {len(flags)} flags: the parser no longer matches it")
        return 1
    problems = []
    for name in sorted(set(flags) - set(rows)):
        problems.append(f"--{name} (default {flags[name]}) has no row in {md}")
    for name in sorted(set(rows) - set(flags)):
        problems.append(f"{md} has a row for --{name}, which the server does not define")
    for name in sorted(set(flags) & set(rows)):
        if not default_matches(flags[name], rows[name]):
            problems.append(f"--{name}: --help says default {flags[name]}, {md} says {rows[name]}")
    for p in problems:
        print(p)
    print(f"{len(flags)} flags, {len(rows)} rows, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
