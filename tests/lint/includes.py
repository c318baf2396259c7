#!/usr/bin/env python3
"""The file graph of nsbox's own code (src/ and its folders, rootfs-tools/,
include/), checked for what the layering forbids.

Nodes are the files. Edges are
  - includes: a quoted #include, resolved as the build resolves it (the
    including file's folder first, then -iquote src/LAYER for each layer of
    SRC_LAYERS in the GNUmakefile, src, rootfs-tools);
  - references: a name used in one module (inside a function body, an
    initializer or a macro) that is a function another module defines
    without `static`, whichever header declared it (a call through
    include/nsbox.h or an inline helper of a header counts), to the .c
    file that defines it. A header's inline code may use the .c file of
    its own name (util.h's helpers call util.c) without an edge.

The rules:
  - each module uses only modules of its own layer or of layers below it.
    The layers, lowest first: src/common/, rootfs-tools/, then the folders
    of src/ in the order of SRC_LAYERS, then the programs in src/ itself.
    include/nsbox.h, the public interface, belongs to no layer: anyone may
    include it, and a call through it counts as a call to whoever defines
    the function;
  - from src/, only rootfs-tools/image.h of rootfs-tools/ may be included
    (the image store's public interface);
  - no cycle between files;
  - no function defined in two files.

With --print, the edges are printed as "file -> file (how)" lines.
Exit status: 0 clean, 1 a rule broken (each violation printed)."""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
# A definition in the GNU style: the return type on the line before, the
# name at the start of the line, a space and the parameters.
DEFINITION = re.compile(r"^([A-Za-z_]\w*) \(", re.M)
# The one header of rootfs-tools/ that src/ may include.
RT_PUBLIC = {"rootfs-tools/image.h"}


def src_layers():
    with open("GNUmakefile", encoding="utf-8") as fh:
        m = re.search(r"^SRC_LAYERS := (.*)$", fh.read(), re.M)
    return m.group(1).split()


LAYERS = src_layers()
SEARCH = ["src/" + l for l in LAYERS] + ["src", "rootfs-tools", "include"]


def rank(path):
    if path.startswith("include/"):
        return None
    if path.startswith("src/common/"):
        return 0
    if path.startswith("rootfs-tools/"):
        return 1
    parts = path.split("/")
    if len(parts) == 2:
        return 2 + len(LAYERS)  # src/*.c: the programs on top
    return 2 + LAYERS.index(parts[1])


def layer_name(path):
    parts = path.split("/")
    if parts[0] != "src":
        return parts[0] + "/"
    return "src/" if len(parts) == 2 else "src/%s/" % parts[1]


def files():
    for top in ["src", "rootfs-tools", "include"]:
        for d, _, names in sorted(os.walk(top)):
            for name in sorted(names):
                if name.endswith((".c", ".h")):
                    yield os.path.join(d, name)


def resolve(including, name):
    for d in [os.path.dirname(including)] + SEARCH:
        path = os.path.normpath(os.path.join(d, name))
        if os.path.exists(path):
            return path
    return None


def module(path):
    return os.path.splitext(path)[0]


def strip(text):
    """Comments, strings and character constants blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def bodies(text):
    """The text that can use a function: inside top-level braces (function
    bodies, initializers) and macro definitions, not prototypes."""
    used = []
    depth = 0
    in_macro = False
    for line in text.split("\n"):
        if in_macro or line.lstrip().startswith("#"):
            if in_macro:
                used.append(line)
            elif re.match(r"\s*#\s*define\b", line):
                used.append(line.split(None, 2)[-1])
            in_macro = line.rstrip().endswith("\\")
            continue
        for ch in line:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
        if depth > 0 or "}" in line or "=" in line:
            used.append(line)
    return "\n".join(used)


def definitions(text):
    """Functions defined without static (the previous line holds the type)."""
    lines = text.split("\n")
    names = []
    for i, line in enumerate(lines):
        m = DEFINITION.match(line)
        if not m or i == 0:
            continue
        prev = lines[i - 1]
        if not prev.strip() or prev.startswith((" ", "\t", "#")) or prev.rstrip().endswith(";"):
            continue
        if re.search(r"\bstatic\b", prev) or m.group(1) in ("if", "while", "for", "switch"):
            continue
        names.append(m.group(1))
    return names


def main():
    text = {}
    for f in files():
        with open(f, encoding="utf-8") as fh:
            text[f] = fh.read()
    stripped = {f: strip(t) for f, t in text.items()}
    defined = {}
    for f, t in stripped.items():
        if f.endswith(".c"):
            for name in definitions(t):
                if name == "main":
                    continue
                defined.setdefault(name, set()).add(f)
    bad = []
    for name, where in sorted(defined.items()):
        if len(where) > 1:
            bad.append("%s is defined in %s" % (name, " and ".join(sorted(where))))
    edges = {}  # file -> {file: how}
    rep = {}
    for f, t in text.items():
        m = f
        rep[m] = f
        out = edges.setdefault(m, {})
        for name in INCLUDE.findall(t):
            target = resolve(f, name)
            if not target:
                continue
            if target.startswith("rootfs-tools/") and not f.startswith("rootfs-tools/") \
                    and target not in RT_PUBLIC:
                bad.append("%s includes rootfs-tools' private %s" % (f, target))
            if not target.startswith("include/"):
                out.setdefault(target, "includes " + os.path.basename(target))
        if f.startswith("include/"):
            continue  # the public interface: prototypes only
        for name in set(IDENT.findall(bodies(stripped[f]))):
            for target in defined.get(name, ()):
                if target != m and module(target) != module(m):
                    out.setdefault(target, "uses " + name + "()")
    for m, out in edges.items():
        for t, how in out.items():
            rm, rt = rank(rep[m]), rank(rep[t])
            if rm is not None and rt is not None and rt > rm:
                bad.append("%s (%s) %s of %s, a layer above it" % (
                    rep[m], layer_name(rep[m]), how, layer_name(rep[t])))
    # Cycles: the strongly connected components (Tarjan), each reported
    # with one circle through it.
    index, low, on, stack, order = {}, {}, set(), [], [0]

    def connect(v):
        index[v] = low[v] = order[0]
        order[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                bad.append("cycle of %d files: %s" % (len(comp), circle(sorted(comp))))

    def circle(comp):
        inside = set(comp)
        start = comp[0]
        # Breadth-first from start back to start, inside the component.
        prev = {start: None}
        queue = [start]
        while queue:
            v = queue.pop(0)
            for w in edges.get(v, {}):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    path.reverse()
                    hops = []
                    for a, b in zip(path, path[1:] + [start]):
                        hops.append("%s -(%s)->" % (a, edges[a][b]))
                    return " ".join(hops) + " " + start
                if w in inside and w not in prev:
                    prev[w] = v
                    queue.append(w)
        return ", ".join(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            connect(v)
    if "--print" in sys.argv:
        for m in sorted(edges):
            for t in sorted(edges[m]):
                print("%s -> %s (%s)" % (m, t, edges[m][t]))
    for b in bad:
        print("includes: " + b)
    n_edges = sum(len(t) for t in edges.values())
    print("includes: %d files, %d edges (includes and uses), %s" % (
        len(edges), n_edges,
        "%d violation(s)" % len(bad) if bad else "no cycle, layers respected"), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
