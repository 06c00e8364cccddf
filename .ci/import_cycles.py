#!/usr/bin/env python3
"""Fail when files of src/, or the folders (layers) that hold them, import each other, directly
or around a loop.

Every path in `src/` that starts at `crate::`, `super::`, `self::`, a child module or a name a
`use` bound (in `use` trees and inline, comments and strings ignored) is an edge from the file
it is written in to the file that defines what it names: re-exports are followed, so
`crate::Nanos` is an edge to `nanos.rs`, not to `lib.rs`. Edges between a module and its own
ancestors (a child using its parent's items, a parent declaring or re-exporting its child's)
are the normal shape of a module tree and are not counted, nor are unit tests' (`tests`
modules use whatever they test with). A strongly connected group of files is a cycle; each is
printed with the lines behind its edges.

Usage: python3 .ci/import_cycles.py [--tests] [SRC_DIR]
Exit 1 when a cycle exists that is not in KNOWN. `--tests` counts the unit tests' edges too.
"""
import os
import re
import sys
from collections import defaultdict

from rust_source import strip

ARGS = [a for a in sys.argv[1:] if a != "--tests"]
TESTS = "--tests" in sys.argv[1:]
SRC = ARGS[0] if ARGS else os.path.join(os.path.dirname(__file__), "..", "src")

# Cycles being removed elsewhere: reported, not failed on. Delete an entry once
# its cycle is gone; the check says when that is.
KNOWN = set()
# The same for cycles between the parts of a folder (folder_cycles).
KNOWN_FOLDERS = set()


def module_of(rel):
    """`a/b.rs` -> ('a', 'b'); `a/mod.rs` -> ('a',); `lib.rs` -> ()."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


def expand_use(tree):
    """`a::{b, c::{d, e as f}, self}` -> [(['a','b'],'b'), (['a','c','d'],'d'), (['a','c','e'],'f'),
    (['a'],'a')]: each path a `use` names, with the name it binds (`None` for a glob)."""
    tree = re.sub(r"\s+as\s+(\w+)", r"@\1", tree)
    tree = re.sub(r"\s+", "", tree)

    def parse(s, prefix):
        paths = []
        depth, start, items = 0, 0, []
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(s[start:k])
                start = k + 1
        items.append(s[start:])
        for item in filter(None, items):
            brace = item.find("{")
            if brace >= 0:
                head = [p for p in item[:brace].split("::") if p]
                paths += parse(item[brace + 1:item.rfind("}")], prefix + head)
                continue
            item, _, alias = item.partition("@")
            segs = [p for p in item.split("::") if p]
            if segs == ["*"]:
                paths.append((prefix, None))
            elif segs == ["self"]:
                paths.append((prefix, alias or prefix[-1]))
            else:
                paths.append((prefix + segs, alias or segs[-1]))
        return paths

    return parse(tree, [])


def scopes_of(text):
    """The inline `mod name {` blocks of a file: [(open offset, close offset, name)]."""
    out, stack, depth = [], [], 0
    for m in re.finditer(r"\bmod\s+(\w+)\s*\{|[{}]", text):
        tok = m.group(0)
        if tok.startswith("mod"):
            depth += 1
            stack.append((m.start(), m.group(1), depth))
        elif tok == "{":
            depth += 1
        else:
            if stack and stack[-1][2] == depth:
                start, name, _ = stack.pop()
                out.append((start, m.end(), name))
            depth -= 1
    return out


def module_at(mod, scopes, offset):
    """The module path at `offset` of a file whose own module is `mod`."""
    inner = sorted((a, name) for a, b, name in scopes if a < offset < b)
    return mod + tuple(name for _, name in inner)


def main():
    files = {}
    for root, _, names in os.walk(SRC):
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(root, name)
                files[module_of(os.path.relpath(path, SRC))] = path
    texts = {mod: strip(open(path, encoding="utf-8").read()) for mod, path in files.items()}
    scopes = {mod: scopes_of(text) for mod, text in texts.items()}
    # Inline `mod x { ... }` blocks resolve like files, but their edges belong to their file.
    owner = {m: m for m in files}
    for mod, found in scopes.items():
        for start, _, name in found:
            owner[module_at(mod, found, start) + (name,)] = mod
    modules = set(owner)

    # What each module's `use` items bind: name -> (module written in, path), so a path through
    # a re-export (`crate::clock::DefaultClock`) reaches the file that defines the item.
    uses = []  # (file module, offset, span, module written in, path)
    bindings = defaultdict(dict)
    for mod, text in texts.items():
        for m in re.finditer(r"\buse\s+([^;]*);", text):
            ctx = module_at(mod, scopes[mod], m.start())
            for segs, name in expand_use(m.group(1)):
                if not segs:
                    continue
                uses.append((mod, m.start(), (m.start(), m.end()), ctx, segs))
                if name and name != "*":
                    bindings[ctx][name] = (ctx, segs)

    def resolve(ctx, segs, depth=0):
        """The module defining what `segs` (written in `ctx`) names; None if outside the crate."""
        head, rest = segs[0], list(segs[1:])
        if head == "crate":
            target = ()
        elif head in ("self", "super"):
            target = ctx
            rest = list(segs)
            while rest and rest[0] in ("self", "super"):
                target = target[:-1] if rest[0] == "super" else target
                rest = rest[1:]
        elif ctx + (head,) in modules:
            target = ctx + (head,)
        elif head in bindings[ctx] and depth < 16:
            bctx, bsegs = bindings[ctx][head]
            return resolve(bctx, list(bsegs) + rest, depth + 1)
        else:
            return None
        for i, s in enumerate(rest):
            if target + (s,) in modules:
                target = target + (s,)
            elif s in bindings[target] and depth < 16:
                bctx, bsegs = bindings[target][s]
                return resolve(bctx, list(bsegs) + rest[i + 1:], depth + 1) or target
            else:
                break
        return target

    edges = defaultdict(set)  # (from file module, to file module) -> {"file:line"}

    def add(mod, offset, ctx, segs):
        if "tests" in ctx and not TESTS:
            return  # unit tests use whatever they test with; they are nobody's dependency
        target = resolve(ctx, segs)
        if target is None:
            return
        line = texts[mod].count("\n", 0, offset) + 1
        edges[(mod, owner.get(target, target))].add(f"{os.path.relpath(files[mod], SRC)}:{line}")

    spans = defaultdict(list)
    for mod, offset, span, ctx, segs in uses:
        add(mod, offset, ctx, segs)
        spans[mod].append(span)
    for mod, text in texts.items():
        for m in re.finditer(r"(?<![\w:])(\w+(?:::\w+)+)", text):
            if not any(a <= m.start() < b for a, b in spans[mod]):
                add(mod, m.start(), module_at(mod, scopes[mod], m.start()), m.group(1).split("::"))

    # A file importing from its own ancestors or descendants is the normal shape of a module
    # tree (a child uses its parent's items, a parent re-exports its child's): not counted.
    graph = defaultdict(set)
    witness = defaultdict(set)
    for (a, b), where in edges.items():
        if a[: len(b)] == b or b[: len(a)] == a:
            continue
        graph[a].add(b)
        witness[(a, b)] = where

    def name(m):
        return "::".join(("crate",) + m)

    cycles = sorted(" <-> ".join(name(m) for m in sorted(c)) for c in sccs(graph) if len(c) > 1)
    members = {name(m): m for c in sccs(graph) for m in c}
    failed = False
    for cycle in cycles:
        known = cycle in KNOWN
        failed |= not known
        print(("known " if known else "") + "cycle: " + cycle)
        comp = [members[m] for m in cycle.split(" <-> ")]
        for a in comp:
            for b in sorted(graph[a]):
                if b in comp:
                    print(f"  {name(a)} -> {name(b)}: {', '.join(sorted(witness[(a, b)]))}")
    for gone in sorted(KNOWN - set(cycles)):
        print(f"note: known cycle gone, delete it from KNOWN in {__file__}: {gone}")
    if not cycles:
        print("import cycles between files of src/: none")
    return 1 if (failed | folder_cycles(edges, name)) else 0


def folder_cycles(edges, name):
    """Cycles between the parts of one folder: a folder's parts are its files and subfolders
    (`x.rs` and `x/` are one part), and an import from anywhere inside one part to anywhere
    inside another is an edge between the two. Layers are folders, so a cycle here is a layer
    importing from a layer above it, even where no two files import each other. A child and
    its ancestors are one tree, as above. Returns whether a cycle not in KNOWN_FOLDERS exists."""
    parts = defaultdict(lambda: defaultdict(set))  # folder -> graph of its parts
    witness = defaultdict(set)
    for (a, b), where in edges.items():
        c = 0
        while c < min(len(a), len(b)) and a[c] == b[c]:
            c += 1
        if c == len(a) or c == len(b):
            continue  # ancestor and descendant
        pa, pb = a[: c + 1], b[: c + 1]
        parts[a[:c]][pa].add(pb)
        witness[(pa, pb)] |= where
    failed = False
    found = []
    for folder, graph in sorted(parts.items()):
        for comp in sccs(graph):
            if len(comp) < 2:
                continue
            cycle = " <-> ".join(name(m) for m in sorted(comp))
            found.append(cycle)
            known = cycle in KNOWN_FOLDERS
            failed |= not known
            print(("known " if known else "") + "folder cycle: " + cycle)
            for a in sorted(comp):
                for b in sorted(graph[a]):
                    if b in comp:
                        shown = sorted(witness[(a, b)])
                        more = f" (+{len(shown) - 4} more)" if len(shown) > 4 else ""
                        print(f"  {name(a)} -> {name(b)}: {', '.join(shown[:4])}{more}")
    for gone in sorted(KNOWN_FOLDERS - set(found)):
        print(f"note: known folder cycle gone, delete it from KNOWN_FOLDERS in {__file__}: {gone}")
    if not found:
        print("import cycles between the parts of any folder of src/: none")
    return failed


def sccs(graph):
    """Tarjan's strongly connected components."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    nodes = set(graph) | {b for bs in graph.values() for b in bs}

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
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
            out.append(comp)

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    sys.exit(main())
