#!/usr/bin/env python3
"""Fails when the modules of a directory include each other in a loop.

A module is a header and its source (x.h + x.cc); module A depends on B when
A's header or source includes B's header (#include "dir/b.h"). Any loop of
such dependencies (a strongly connected set of more than one module) is
printed and the exit status is 1: each room's modules must form layers, so
that any of them can be read, tested and changed with only what is below it.

usage: include_cycles.py ROOT DIR...   (DIR relative to ROOT, e.g. kernels)
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def modules(root, d):
    deps = {}
    for dirpath, _, files in os.walk(os.path.join(root, d)):
        for f in files:
            stem, ext = os.path.splitext(f)
            if ext not in (".h", ".cc"):
                continue
            path = os.path.join(dirpath, f)
            mod = os.path.relpath(os.path.join(dirpath, stem), root)
            deps.setdefault(mod, set())
            with open(path, encoding="utf-8") as fh:
                for inc in INCLUDE.findall(fh.read()):
                    target = os.path.splitext(inc)[0]
                    if target != mod and target.startswith(d.rstrip("/") + "/"):
                        deps[mod].add(target)
    return deps


def cycles(deps):
    """Tarjan's strongly connected components of more than one module."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(deps.get(v, ())):
            if w not in deps:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                out.append(sorted(scc))

    for v in sorted(deps):
        if v not in index:
            visit(v)
    return out


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root, failed = sys.argv[1], False
    for d in sys.argv[2:]:
        deps = modules(root, d)
        found = cycles(deps)
        for scc in found:
            failed = True
            edges = [f"{a} -> {b}" for a in scc for b in sorted(deps[a]) if b in scc]
            print(f"{d}: modules include each other in a loop: {', '.join(scc)}")
            for e in edges:
                print(f"  {e}")
        if not found:
            print(f"{d}: {len(deps)} modules, no include loop")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
