#!/usr/bin/env python3
"""The include graph of nsbox's own code (src/, src/common/, rootfs-tools/,
include/), checked for what the layering forbids:

  - a cycle of includes between files;
  - src/common/ (the base layer) including anything above it;
  - a file of src/ including a header of rootfs-tools/ other than the image
    store's public interface (rootfs-tools/image.h);
  - a file of rootfs-tools/ including a header of src/ outside src/common/
    (and include/).

Quoted includes are resolved as the build resolves them (-iquote src/common
-iquote src -iquote rootfs-tools, the including file's directory first).
With --print, the graph is printed as "file -> header" lines.
Exit status: 0 clean, 1 a rule broken (each violation printed)."""
import os
import re
import sys

ROOTS = ["src/common", "src", "rootfs-tools", "include"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# The one header of rootfs-tools/ that src/ may include.
RT_PUBLIC = {"rootfs-tools/image.h"}


def files():
    for root in ROOTS:
        for name in sorted(os.listdir(root)):
            if name.endswith((".c", ".h")):
                yield os.path.join(root, name)


def resolve(including, name):
    for d in [os.path.dirname(including)] + ROOTS:
        path = os.path.normpath(os.path.join(d, name))
        if os.path.exists(path):
            return path
    return None


def layer(path):
    if path.startswith("src/common/") or path.startswith("include/"):
        return "common"
    if path.startswith("src/"):
        return "src"
    return "rootfs-tools"


def main():
    edges = {}
    for f in files():
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        targets = [resolve(f, n) for n in INCLUDE.findall(text)]
        edges[f] = sorted({t for t in targets if t})
    bad = []
    for f, targets in edges.items():
        for t in targets:
            lf, lt = layer(f), layer(t)
            if lf == "common" and lt != "common":
                bad.append("%s (base layer) includes %s" % (f, t))
            if lf == "src" and lt == "rootfs-tools" and t not in RT_PUBLIC:
                bad.append("%s includes rootfs-tools' private %s" % (f, t))
            if lf == "rootfs-tools" and lt == "src":
                bad.append("%s includes %s of src/ (only src/common/ is below it)" % (f, t))
    # Cycles: depth-first search over the whole graph.
    state = {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for t in edges.get(node, []):
            if state.get(t) == 1:
                bad.append("include cycle: " + " -> ".join(stack[stack.index(t):] + [t]))
            elif not state.get(t):
                visit(t, stack)
        stack.pop()
        state[node] = 2

    for node in edges:
        if not state.get(node):
            visit(node, [])
    if "--print" in sys.argv:
        for f, targets in edges.items():
            for t in targets:
                print("%s -> %s" % (f, t))
    for b in bad:
        print("includes: " + b)
    n_edges = sum(len(t) for t in edges.values())
    print("includes: %d files, %d includes, %s" % (len(edges), n_edges,
          "%d violation(s)" % len(bad) if bad else "no cycle, layers respected"),
          file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
