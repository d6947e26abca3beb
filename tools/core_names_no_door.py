#!/usr/bin/env python3
"""Fails if a C++ file under server/core/ names a front door (the ctest
core_names_no_door; docs/architecture.md "The server's rooms").

core/ is the call lifecycle every door shares; each door registers its own
rows with it at start (Metrics::AddMethod, Metrics::AddConnections). So
core/'s code, string literals included, must not name one. The rule, on each
*.h and *.cc file with its comments removed (comments may say where a
caller comes from; code may not depend on it):

  1. no #include of a door's room: server/grpc/, server/http/, server/v1/;
  2. no door's transport, in any case: "grpc", "http", "beast", "asio";
  3. no door's method or service, as a whole word: Execute, ExecuteStream,
     ListOps, ModelInfer, ModelStreamInfer (and any Execute* or Model*Infer*
     name), REST, TensorOpsService, InferenceService.

Usage: core_names_no_door.py SOURCE_DIR   (exit 1 and a line per hit)
"""
import pathlib
import re
import sys

RULES = [
    ("includes a door's room", re.compile(r'#\s*include\s*[<"]server/(grpc|http|v1)/')),
    ("names a door's transport", re.compile(r"grpc|http|beast|asio", re.IGNORECASE)),
    ("names a door's method or service",
     re.compile(r"\b(Execute\w*|ListOps|Model\w*Infer\w*|REST|TensorOpsService|InferenceService)\b")),
]


def strip_comments(text):
    """The text with // and /* */ comments blanked (newlines kept), string
    and character literals left as they are."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    core = root / "server" / "core"
    files = sorted(p for p in core.rglob("*") if p.suffix in (".h", ".cc"))
    if not files:
        print(f"no C++ files under {core}")
        return 1
    hits = 0
    for path in files:
        code = strip_comments(path.read_text())
        for number, line in enumerate(code.split("\n"), 1):
            for why, rule in RULES:
                m = rule.search(line)
                if m:
                    hits += 1
                    print(f"{path.relative_to(root)}:{number}: {why} ({m.group(0)!r}): "
                          f"{line.strip()}")
    if hits:
        print(f"{hits} hit(s): core/ must name no door; let the door register it "
              "(server/core/metrics.h AddMethod/AddConnections)")
        return 1
    print(f"{len(files)} files under server/core/ name no door")
    return 0


if __name__ == "__main__":
    sys.exit(main())
