#!/usr/bin/env python3
"""Checks the layering of minitrace's modules: no import cycle among the
files of minitrace/src, and no file over 600 lines.

Each file is mapped to its module path (src/lib.rs is the crate root,
src/a/mod.rs and src/a.rs are `a`, src/a/b.rs is `a::b`). Every
`crate::...` path in its code (comments and string literals left out),
whether in a `use` (grouped forms `use crate::{a, b::{c, d}}` included) or
written inline, is an import of the file of the longest module that the
path names: `crate::data::id::SpanId` imports src/data/id.rs, and
`crate::local::LocalSpan` imports src/local/mod.rs. `mod` lines, `super::`
and `self::` paths are not imports here, so a folder's mod.rs that only
re-exports with `pub use crate::...` stands above what it re-exports.

Exits 1, printing each cycle found and each file that is too long; 0 when
the tree is clean. Python 3.11 standard library only.
"""

import re
import sys
from pathlib import Path

MAX_LINES = 600
ROOT = Path(__file__).resolve().parent.parent / "minitrace" / "src"


def module_path(file: Path) -> tuple[str, ...]:
    """The module path of a source file, relative to the crate root."""
    parts = list(file.relative_to(ROOT).with_suffix("").parts)
    if parts in (["lib"], ["main"]):
        return ()
    if parts[-1] == "mod":
        parts.pop()
    return tuple(parts)


def strip_comments_and_strings(text: str) -> str:
    """The code alone: comments (doc comments too), string and character
    literals replaced by spaces, so that a path in a doc link or a message
    is not taken for an import. Line breaks are kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    out.append("\n" if text[i] == "\n" else "")
                    i += 1
        elif (m := re.match(r'b?r(#*)"', text[i:])) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            closing = '"' + m.group(1)
            end = text.find(closing, i + m.end())
            end = n if end < 0 else end + len(closing)
            out.append("\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\n":
                    out.append("\n")
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif c == "'" and (m := re.match(r"'(\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.)|[^\\'])'", text[i:])):
            i += m.end()  # a character literal; a lifetime has no closing quote
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_use_tree(tree: str) -> list[str]:
    """`a::{b, c::{d, e}}` -> ["a::b", "a::c::d", "a::c::e"]."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"as\w+$", "", tree)] if tree else []
    prefix, inner = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    items, depth, start = [], 0, 0
    for k, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(inner[start:k])
            start = k + 1
    items.append(inner[start:])
    paths = []
    for item in items:
        for sub in expand_use_tree(item):
            paths.append(prefix + sub if sub not in ("self", "") else prefix.rstrip(":"))
    return paths


def crate_paths(code: str) -> list[list[str]]:
    """Every `crate::` path in the code, as its segments after `crate`."""
    paths = []
    # `use` items: their trees may be grouped, and `use crate::{a, b}` names
    # several paths at once.
    for m in re.finditer(r"\buse\s+(crate\s*::[^;]*);", code):
        for path in expand_use_tree(m.group(1)):
            paths.append(path.split("::")[1:])
    # Inline paths (`crate::util::lock(..)`), and those in `use` items again:
    # a grouped one yields only its prefix here, already covered above.
    for m in re.finditer(r"(?<![\w$])crate\s*::\s*((?:\w+\s*::\s*)*\w+)", code):
        paths.append(re.sub(r"\s+", "", m.group(1)).split("::"))
    return paths


def resolve(segments: list[str], modules: dict[tuple[str, ...], Path]) -> Path | None:
    """The file of the longest module that the path names."""
    for length in range(len(segments), -1, -1):
        file = modules.get(tuple(segments[:length]))
        if file is not None:
            return file
    return None


def find_cycles(graph: dict[Path, set[Path]]) -> list[list[Path]]:
    """The strongly connected components with more than one file (Tarjan),
    each given as one cycle through its files."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    counter = [0]

    def connect(v: Path) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(set(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            connect(v)

    cycles = []
    for component in components:
        # A shortest cycle through the component's first file (breadth-first).
        start = min(component)
        previous = {start: None}
        queue, found = [start], None
        while queue and found is None:
            v = queue.pop(0)
            for w in sorted(graph[v] & component):
                if w == start:
                    found = v
                    break
                if w not in previous:
                    previous[w] = v
                    queue.append(w)
        cycle, v = [], found
        while v is not None:
            cycle.append(v)
            v = previous[v]
        cycles.append((list(reversed(cycle)), component))
    return cycles


def main() -> int:
    files = sorted(ROOT.rglob("*.rs"))
    modules = {module_path(file): file for file in files}
    graph: dict[Path, set[Path]] = {file: set() for file in files}
    names: dict[tuple[Path, Path], set[str]] = {}
    for file in files:
        code = strip_comments_and_strings(file.read_text(encoding="utf-8"))
        for segments in crate_paths(code):
            target = resolve(segments, modules)
            if target is not None and target != file:
                graph[file].add(target)
                names.setdefault((file, target), set()).add("::".join(["crate", *segments]))

    failed = False
    rel = lambda file: file.relative_to(ROOT.parent.parent).as_posix()
    for cycle, component in find_cycles(graph):
        failed = True
        print(f"module-check: an import cycle among {len(component)} files:")
        for a, b in zip(cycle, cycle[1:] + cycle[:1]):
            print(f"  {rel(a)} -> {rel(b)}: {', '.join(sorted(names[(a, b)]))}")
        others = sorted(component - set(cycle))
        if others:
            print(f"  (also in it: {', '.join(rel(file) for file in others)})")
    for file in files:
        lines = len(file.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            failed = True
            print(f"module-check: {rel(file)} has {lines} lines (at most {MAX_LINES})")
    if failed:
        return 1
    edges = sum(len(targets) for targets in graph.values())
    print(f"module-check: {len(files)} files, {edges} imports, no cycle, none over {MAX_LINES} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
