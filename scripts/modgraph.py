#!/usr/bin/env python3
"""The core's module graph: each file of core/src -> the crate modules it names via `crate::` or
`super::` (doc comments and tests excluded), and any circle in it. Usage: modgraph.py [core/src]"""
import os, re, sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "core", "src")
root = os.path.normpath(root)

def module_of(path):
    rel = os.path.relpath(path, root)[:-3]
    parts = rel.split(os.sep)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return "::".join(parts) or "lib"

mods = {}
for d, _, files in os.walk(root):
    for f in files:
        if f.endswith(".rs"):
            mods[module_of(os.path.join(d, f))] = os.path.join(d, f)

def resolve(path):
    """The longest known module prefix of a `a::b::c` path."""
    parts = path.split("::")
    for n in range(len(parts), 0, -1):
        m = "::".join(parts[:n])
        if m in mods:
            return m
    return None

# `crate::Limiter` and the like: names lib.rs re-exports, mapped to the module they come from.
reexports = {}
for path, names in re.findall(r"pub use ([a-z_:]+)::\{?([A-Za-z0-9_, ]+)\}?;", open(os.path.join(root, "lib.rs")).read()):
    for n in names.split(","):
        t = resolve(path)
        if t:
            reexports[n.strip()] = t

graph = {}
for m, path in sorted(mods.items()):
    src = open(path).read()
    src = src.split("#[cfg(test)]")[0]
    src = "\n".join(l for l in src.splitlines() if not l.lstrip().startswith("//"))
    deps = set()
    parent = m.rsplit("::", 1)[0] if "::" in m else ""
    for kind, rest in re.findall(r"\b(crate|super)::((?:\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)(?:::[A-Za-z_{][A-Za-z0-9_{}:, ]*)?)", src):
        base = "" if kind == "crate" else parent
        heads = []
        if rest.startswith("{"):
            heads = [h.strip() for h in rest.strip("{}").split(",")]
        else:
            heads = [rest]
        for h in heads:
            h = h.split("{")[0].strip(": ")
            h = re.sub(r"::(self)?$", "", h)
            full = f"{base}::{h}" if base else h
            t = resolve(full) or reexports.get(full)
            # A submodule's use of its parent's items is one unit with it, not a layer.
            if t and t != m and not m.startswith(t + "::"):
                deps.add(t)
    graph[m] = sorted(deps)

for m in sorted(graph):
    print(f"{m} -> {', '.join(graph[m]) if graph[m] else '(none)'}")

# circles (strongly connected components of more than one module, or self-loops)
index, low, stack, on, sccs, i = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)
def strong(v):
    index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
    for w in graph.get(v, []):
        if w not in index:
            strong(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1:
            sccs.append(sorted(comp))
for v in graph:
    if v not in index:
        strong(v)
print()
print("circles:", "none" if not sccs else "; ".join(" <-> ".join(c) for c in sccs))
