#!/usr/bin/env python3
"""Fail when a public item of the crate has no code example in its rustdoc.

`#![deny(missing_docs)]` makes every public item documented; this checks the rest of the
standard, "rustdoc on every public item with an example", on the rendered documentation (the
output of `cargo doc --no-deps --all-features -p tollgate`), so that it sees what a reader sees:
re-exports, hidden items and cfg-gated items as rustdoc resolved them.

Checked, each needing a Rust code block (`<pre class="rust ...">`; a `text` block is not an
example) in its own docblock:

- the top docblock of every struct, enum, union, trait, function, type alias and macro page;
- every method and associated function of those structs', enums' and unions' inherent impls
  (and of a trait's `impl dyn Trait` blocks);
- every method a trait of the crate declares, required and provided, on the trait's page.

Not checked: constants, statics and associated constants (exempt: a value needs no example);
enum variants and fields (part of their type's docs); methods of trait impls (a trait's method
is checked once, on the trait's page, and an impl of a foreign trait is the foreign trait's);
the methods rendered on a type alias's page (they are the aliased type's, checked on its
page); modules; the `guide` modules (prose chapters, no items); `#[doc(hidden)]` items (rustdoc
renders no page for them, e.g. `__loom`).

Only the crate's own items: a page of a re-exported foreign item (`http::HeaderName`,
`http::Method`, `http::StatusCode`, `http::request::*`, `http::response::*`) has no source link
into the crate's sources (rustdoc `--no-deps` links its own items only), so it is told apart
by its heading's source link, not by a list of names. Redirect pages (an item's private path,
rustdoc's forward to where it is re-exported) are skipped.

It reads every page in DOC_DIR, and rustdoc never deletes a page: run it on a fresh
`cargo doc` output (as CI does), or a page of an item since removed is checked too.

Usage: python3 .ci/doc_examples.py [DOC_DIR]   (default: target/doc/tollgate; the crate's name
is the folder's name)
Exit 1 with one line per item lacking an example (its path, then the page and anchor).
"""
import os
import sys
from html.parser import HTMLParser

KINDS = ("struct", "enum", "union", "trait", "fn", "type", "macro")
# Pages of a type with methods of its own to check (a type alias's are the aliased type's).
WITH_METHODS = ("struct", "enum", "union", "trait")
SKIP_DIRS = {"guide", "__loom"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Node:
    __slots__ = ("tag", "attrs", "children", "parent")

    def __init__(self, tag, attrs, parent):
        self.tag = tag
        self.attrs = dict(attrs)
        self.children = []
        self.parent = parent

    def classes(self):
        return (self.attrs.get("class") or "").split()

    def walk(self):
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def find(self, pred):
        return next((n for n in self.walk() if pred(n)), None)


class Tree(HTMLParser):
    """The page as a tree of elements (text is not kept: only tags and attributes matter)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", [], None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, attrs, self.cur))

    def handle_endtag(self, tag):
        # Close up to the matching open element; a stray end tag is ignored.
        node = self.cur
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.cur = node.parent


def parse(path):
    tree = Tree()
    with open(path, encoding="utf-8") as f:
        tree.feed(f.read())
    tree.close()
    return tree.root


def has_example(docblock):
    return docblock is not None and docblock.find(
        lambda n: n.tag == "pre" and "rust" in n.classes()) is not None


def is_own(root, page, src_root):
    """Whether the page's heading links to a source file of the crate."""
    heading = root.find(lambda n: "sub-heading" in n.classes())
    if heading is None:
        return False
    for a in heading.walk():
        href = a.attrs.get("href")
        if a.tag == "a" and "src" in a.classes() and href and "://" not in href:
            target = os.path.normpath(os.path.join(os.path.dirname(page), href.split("#")[0]))
            if target.startswith(src_root + os.sep):
                return True
    return False


def docblock_of(section):
    """The docblock of a method's `<section>`: in the `<details>` around its `<summary>`."""
    summary = section.parent
    if summary is None or summary.tag != "summary":
        return None  # undocumented: no toggle
    details = summary.parent
    return next((c for c in details.children
                 if c.tag == "div" and "docblock" in c.classes()), None)


def methods(root, kind):
    """(anchor, docblock) of the methods the page's item owns."""
    containers = [root.find(lambda n: n.attrs.get("id") == "implementations-list")]
    if kind == "trait":
        # Each "Required Methods" / "Provided Methods" heading is followed by its list.
        for h2 in root.walk():
            if h2.tag == "h2" and h2.attrs.get("id") in ("required-methods", "provided-methods"):
                siblings = h2.parent.children
                i = siblings.index(h2)
                if i + 1 < len(siblings) and "methods" in siblings[i + 1].classes():
                    containers.append(siblings[i + 1])
    for container in containers:
        if container is None:
            continue
        for node in container.walk():
            anchor = node.attrs.get("id") or ""
            if node.tag == "section" and anchor.startswith(("method.", "tymethod.")):
                yield anchor, docblock_of(node)


def item_path(crate, rel):
    parts = rel.split(os.sep)
    name = parts[-1].split(".")[1]
    return "::".join([crate] + parts[:-1] + [name])


def main():
    doc = os.path.abspath(sys.argv[1] if len(sys.argv) > 1
                          else os.path.join(os.path.dirname(__file__), "..", "target", "doc",
                                            "tollgate"))
    crate = os.path.basename(doc)
    src_root = os.path.join(os.path.dirname(doc), "src", crate)
    if not os.path.isfile(os.path.join(doc, "index.html")):
        sys.exit(f"{doc}: no rustdoc output here (run cargo doc first)")
    missing, own = [], 0
    for dirpath, dirnames, filenames in os.walk(doc):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for filename in sorted(filenames):
            kind = filename.split(".")[0]
            if kind not in KINDS or not filename.endswith(".html"):
                continue
            page = os.path.join(dirpath, filename)
            root = parse(page)
            if root.find(lambda n: n.tag == "meta" and n.attrs.get("http-equiv") == "refresh"):
                continue  # a redirect from the item's private path
            if not is_own(root, page, src_root):
                continue  # a foreign item re-exported
            own += 1
            rel = os.path.relpath(page, doc)
            path = item_path(crate, rel)
            top = root.find(lambda n: n.tag == "details" and "top-doc" in n.classes())
            top_doc = top and next((c for c in top.children
                                    if c.tag == "div" and "docblock" in c.classes()), None)
            if not has_example(top_doc):
                missing.append(f"{path} ({rel})")
            if kind not in WITH_METHODS:
                continue
            for anchor, docblock in methods(root, kind):
                if not has_example(docblock):
                    # `method.new-1`: a second `new`, in another impl block.
                    name = anchor.split(".", 1)[1].split("-")[0]
                    missing.append(f"{path}::{name} ({rel}#{anchor})")
    if own == 0:
        # Guards against a rustdoc whose pages this script no longer reads (no source links).
        sys.exit(f"{doc}: no page of {crate}'s own items found (built without source links?)")
    for line in missing:
        print(f"no example: {line}")
    if missing:
        print(f"{len(missing)} public item(s) of {crate} without an example", file=sys.stderr)
        sys.exit(1)
    print(f"{own} pages of {crate}'s items checked: every item has an example")


if __name__ == "__main__":
    main()
