#!/usr/bin/env python3
"""Fail when the HTTP layer (src/http/) or the Redis backend (src/redis/) reaches into the core.

They are built as an outside backend would be (docs/design.md, "Extension
interface"): through the crate's public API only, so that everything they need is public and
documented. Two checks, on code only (comments, strings and char literals are blanked first;
rustdoc links are checked by `cargo doc -D warnings` anyway):

1. Paths. `crate::Name` (or `$crate::Name`) is allowed when `Name` is re-exported at the crate
   root (a `pub use` line of src/lib.rs, or a `pub mod`); `crate::http::...` inside http,
   `crate::redis::...` inside redis and inside http (its Redis backend uses the Redis limiter's
   public items). Every other `crate::` path (`crate::algorithm::...`, `crate::decision::...`,
   `crate::sync`, `crate::quota::Quota`, ...) is refused, even when the item it ends at is
   public: the core's module tree is private, and the path would break with it.
2. Methods. A call `.name(` or `::name(` of a function that the core (every file outside
   src/http/ and src/redis/) declares `pub(crate)`, or that its sealed `Rules` or `Terms` trait declares,
   is refused, unless the same name is also a public function of the core or a method of
   std's atomics and collections (then the call may be the public one: a name check cannot
   tell without types) or a function http/redis define themselves. `super::` and `self::`
   paths stay inside http or redis and are not checked.

Usage: python3 .ci/public_api_only.py [SRC_DIR]
Exit 1 with one line per finding (file:line: what) when anything is found.
"""
import os
import re
import sys

from rust_source import strip

SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "src")
OWN = ("http", "redis")


# Methods of std's atomics and collections. A name check cannot tell `flag.store(..)` on an
# `AtomicBool` from a call of a core crate-private `store`: as with a name the core also
# declares public, the call may be the public one, and is not refused. (Without this, code in
# http/ or redis/ picked other methods, `swap` for `store`, to get past the check.)
STD_METHODS = {
    "load", "store", "swap", "compare_exchange", "compare_exchange_weak", "fetch_add",
    "fetch_sub", "fetch_and", "fetch_or", "fetch_xor", "fetch_max", "fetch_min",
    "fetch_update", "into_inner", "get", "get_mut", "insert", "remove", "clear", "len",
    "is_empty", "push", "pop", "truncate", "take", "replace", "contains", "contains_key",
    "iter", "entry", "extend", "retain", "drain", "lock", "read", "write",
}


def rust_files(root):
    for d, _, files in os.walk(root):
        for f in sorted(files):
            if f.endswith(".rs"):
                yield os.path.join(d, f)


def area(path):
    """'http', 'redis' or None (the core)."""
    rel = os.path.relpath(path, SRC).split(os.sep)
    if rel[0] in OWN:
        return rel[0]
    if rel[0] in (a + ".rs" for a in OWN):
        return rel[0][:-3]
    return None


def root_names(lib):
    """Names usable as `crate::Name`: the crate root's `pub use` re-exports and `pub mod`s."""
    code = strip(open(lib).read())
    names = set()
    for m in re.finditer(r"^\s*pub\s+use\s+([^;]+);", code, re.M):
        tree = m.group(1)
        if "{" in tree:
            inner = tree[tree.index("{") + 1 : tree.rindex("}")]
            parts = [p.strip() for p in inner.split(",")]
        else:
            parts = [tree.strip()]
        for p in parts:
            if not p:
                continue
            if " as " in p:
                names.add(p.split(" as ")[1].strip())
            else:
                names.add(p.split("::")[-1].strip())
    for m in re.finditer(r"^\s*pub\s+mod\s+(\w+)", code, re.M):
        names.add(m.group(1))
    return names


def fn_names(code, pattern):
    return {m.group(1) for m in re.finditer(pattern, code)}


def main():
    lib = os.path.join(SRC, "lib.rs")
    allowed_roots = root_names(lib)
    core_private, core_public, own_defined = set(), set(), set()
    own_files = []
    for path in rust_files(SRC):
        code = strip(open(path).read())
        a = area(path)
        if a:
            own_files.append((path, a, code))
            own_defined |= fn_names(code, r"\bfn\s+(\w+)")
            continue
        core_private |= fn_names(code, r"\bpub\s*\((?:crate|super|in [^)]*)\)\s*(?:const\s+|async\s+|unsafe\s+)*fn\s+(\w+)")
        core_public |= fn_names(code, r"\bpub\s+(?:const\s+|async\s+|unsafe\s+)*fn\s+(\w+)")
        # The sealed traits' methods are crate-private whatever their marker says.
        for m in re.finditer(r"\btrait\s+(?:Rules|Terms)\b[^{]*\{", code):
            depth, j = 1, m.end()
            while j < len(code) and depth:
                depth += {"{": 1, "}": -1}.get(code[j], 0)
                j += 1
            core_private |= fn_names(code[m.end() : j], r"\bfn\s+(\w+)")
    # Trait methods of the public traits (`Algorithm`, `Clock`, ...) are public: a `fn` without a
    # marker inside a `pub trait` other than the sealed `Rules` and `Terms`.
    for path in rust_files(SRC):
        if area(path):
            continue
        code = strip(open(path).read())
        for m in re.finditer(r"\bpub\s+trait\s+(\w+)[^{]*\{", code):
            if m.group(1) in ("Rules", "Terms"):
                continue
            depth, j = 1, m.end()
            while j < len(code) and depth:
                depth += {"{": 1, "}": -1}.get(code[j], 0)
                j += 1
            core_public |= fn_names(code[m.end() : j], r"\bfn\s+(\w+)")
    refused_fns = core_private - core_public - own_defined - STD_METHODS
    # http may use redis's public items only: redis's crate-private fns, called from http.
    redis_private, redis_public, http_defined = set(), set(), set()
    for path, a, code in own_files:
        if a == "redis":
            redis_private |= fn_names(code, r"\bpub\s*\((?:crate|super|in [^)]*)\)\s*(?:const\s+|async\s+|unsafe\s+)*fn\s+(\w+)")
            redis_public |= fn_names(code, r"\bpub\s+(?:const\s+|async\s+|unsafe\s+)*fn\s+(\w+)")
        else:
            http_defined |= fn_names(code, r"\bfn\s+(\w+)")
    refused_from_http = redis_private - redis_public - core_public - http_defined

    findings = []
    for path, a, code in own_files:
        rel = os.path.relpath(path, os.path.join(SRC, ".."))
        lines = code.split("\n")
        for lineno, line in enumerate(lines, 1):
            for m in re.finditer(r"\$?\bcrate((?:\s*::\s*\w+)+)", line):
                segs = [s.strip() for s in m.group(1).split("::") if s.strip()]
                first = segs[0]
                if first in OWN:
                    if first == a or (a == "http" and first == "redis"):
                        continue
                    findings.append(f"{rel}:{lineno}: crate::{first} used from {a}/")
                elif first not in allowed_roots:
                    findings.append(f"{rel}:{lineno}: crate::{'::'.join(segs)} is not re-exported at the crate root")
            # `crate::{A, b::C}` groups.
            for m in re.finditer(r"\bcrate\s*::\s*\{([^}]*)\}", line):
                for p in m.group(1).split(","):
                    p = p.strip()
                    head = p.split("::")[0].strip()
                    if p and head not in allowed_roots and head not in OWN:
                        findings.append(f"{rel}:{lineno}: crate::{p} is not re-exported at the crate root")
            for m in re.finditer(r"(?:\.|::)\s*(\w+)\s*(?:::\s*<[^()]*>\s*)?\(", line):
                if m.group(1) in refused_fns:
                    findings.append(f"{rel}:{lineno}: calls the core's crate-private fn `{m.group(1)}`")
                elif a == "http" and m.group(1) in refused_from_http:
                    findings.append(f"{rel}:{lineno}: calls the Redis backend's crate-private fn `{m.group(1)}`")
        # `Decision` is #[non_exhaustive]: outside code builds it with its constructors only.
        for m in re.finditer(r"(?<![\w:])(?:crate\s*::\s*)?Decision\s*\{([^{}]*)\}", code):
            if ".." not in m.group(1) and not re.search(r"(\bstruct|\bimpl|\bfor|->)\s*$", code[: m.start()]):
                lineno = code.count("\n", 0, m.start()) + 1
                findings.append(f"{rel}:{lineno}: a `Decision {{ .. }}` literal (non_exhaustive: use its constructors)")
    for f in findings:
        print(f)
    if findings:
        print(f"\n{len(findings)} use(s) of the core's crate-private items from src/http or src/redis")
        return 1
    print("src/http and src/redis use the core's public API only")
    return 0


if __name__ == "__main__":
    sys.exit(main())
