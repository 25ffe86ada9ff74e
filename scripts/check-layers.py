#!/usr/bin/env python3
"""Checks that src/ keeps its three layers, each importing only what lies below it.

- src/core/ is pure Rust: it never names pgrx, and each of its modules imports only core modules
  listed before it in src/core/mod.rs's numbered order.
- src/runtime/ talks to PostgreSQL: each module imports core modules, and runtime modules listed
  before it in src/runtime/mod.rs's numbered order.
- src/api/ is the SQL surface: its files import core, runtime and the API layer's root
  (src/api/mod.rs), never one another.
- Nothing but lib.rs and the API layer names api.

Every module file must appear in its layer's order, and every name in an order must be a module.
Imports are read from the code with comments and string literals removed: every path from
`crate`, `super`, `self`, or a name a `use` binds to a module (an `as` alias, `use crate::runtime;`
or `{self as rt}` included), resolved to the module files it names. A glob import of another module
is refused, since it would hide what the code uses (a test module's `use super::*` imports its own
file). Test modules count like any other code.

What would let a path name one module while the code reaches another is refused outright: a
`#[path]` attribute, `extern crate`, an exported macro (`#[macro_export]`, `#[macro_use]`), and a
re-export (`pub use`) in lib.rs or a layer's mod.rs. A module file below a layer's module (such as
`runtime/errors/sub.rs`) takes its parent's place in the order. Outside its test modules, the core
names none of the ways Rust reads a real clock or calls the OS (`SystemTime`, `Instant`,
`UNIX_EPOCH`, `libc`, `std::fs`, `std::env`, `std::thread`, `std::net`, `std::process`): it takes
time and the outside world as arguments. Run from
anywhere; exits 1 and names each offending import.
"""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def strip(src):
    """The source with comments removed and string and char literals emptied."""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif (m := re.match(r'(?:b|c)?r(#*)"', src[i:])) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            end = '"' + m.group(1)
            i = src.index(end, i + len(m.group(0))) + len(end)
            out.append('""')
        elif src[i] == '"':
            j = i + 1
            while src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            i = j + 1
            out.append('""')
        elif m := re.match(r"'(\\.[^']*|[^\\'])'", src[i:]):
            i += len(m.group(0))
            out.append("' '")
        else:
            out.append(src[i])
            i += 1
    return "".join(out)


def modules():
    """Every module file: its path, as `runtime::guc` ('' for lib.rs)."""
    found = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".rs"):
                path = os.path.join(dirpath, f)
                parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
                if parts[-1] in ("mod", "lib"):
                    parts = parts[:-1]
                found["::".join(parts)] = path
    return found


def use_leaves(tree):
    """The leaves of a `use` tree as (segments, alias, glob): `a::{b as c, d::*, self}` gives
    (['a', 'b'], 'c', False), (['a', 'd'], None, True) and (['a'], None, False)."""
    tree = re.sub(r"\s+", " ", tree).strip()

    def split_top(body):
        parts, depth, cur = [], 0, ""
        for ch in body:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        parts.append(cur)
        return [x.strip() for x in parts if x.strip()]

    def walk(prefix, t):
        t = t.strip()
        brace = t.find("{")
        if brace >= 0 and t.endswith("}"):
            head = [x for x in re.split(r"\s*::\s*", t[:brace]) if x]
            for part in split_top(t[brace + 1 : -1]):
                yield from walk(prefix + head, part)
            return
        alias = None
        m = re.match(r"(.*?)\s+as\s+(\w+)$", t)
        if m:
            t, alias = m.group(1), m.group(2)
        segs = [x for x in re.split(r"\s*::\s*", t) if x]
        if segs and segs[-1] == "*":
            yield prefix + segs[:-1], None, True
        elif segs and segs[-1] == "self":
            yield prefix + segs[:-1], alias, False
        else:
            yield prefix + segs, alias, False

    yield from walk([], tree)


def imports(module, text, names):
    """The modules `module`'s code (`text`, stripped) names, other than itself and its parents,
    and the problems of its imports (a glob import of another module, which would hide what it
    uses). Paths are resolved from `crate`, `super`, `self` and every name a `use` binds to a
    module (an alias included), so `use crate::runtime as rt; rt::wal::x()` counts as wal."""
    # Where each inline `mod name { ... }` starts and ends, so that `super` is resolved from the
    # module it is written in.
    inline, stack, depth = [], [], 0
    for m in re.finditer(r"\bmod\s+([A-Za-z_]\w*)\s*\{|\{|\}", text):
        if m.group(1):
            depth += 1
            stack.append((m.group(1), depth, m.start()))
        elif m.group(0) == "{":
            depth += 1
        else:
            if stack and stack[-1][1] == depth:
                name, _, start = stack.pop()
                inline.append((start, m.end(), name))
            depth -= 1
    base = module.split("::") if module else []
    bound = {}  # a name a `use` binds -> the module path it names

    def scope(pos):
        inner = sorted((s, name) for s, e, name in inline if s <= pos < e)
        return base + [name for _, name in inner]

    def absolute(segments, pos):
        """The path `segments` names from the crate root, or None for another crate's."""
        if not segments:
            return None
        head, rest = segments[0], segments[1:]
        if head in ("crate", "$crate"):
            path = []
        elif head == "self":
            path = scope(pos)
        elif head == "super":
            path = scope(pos)[:-1]
            while rest and rest[0] == "super":
                path, rest = path[:-1], rest[1:]
        elif head in bound:
            path = bound[head].split("::")
        else:
            return None
        return path + rest

    def module_of(path):
        """The longest prefix of `path` that is a module file."""
        best = None
        for i in range(len(path) + 1):
            if "::".join(path[:i]) in names:
                best = "::".join(path[:i])
        return best

    found, problems = set(), []
    for m in re.finditer(r"\buse\s+((?:::)?[^;]*);", text):
        for segments, alias, glob in use_leaves(m.group(1)):
            path = absolute(segments, m.start())
            if path is None:
                continue
            target = module_of(path)
            if target is not None:
                found.add(target)
            if glob and "::".join(path) in names and "::".join(path) != "::".join(base):
                problems.append(f"a glob import of {'::'.join(path) or 'the crate root'}")
            if not glob and "::".join(path) in names:
                bound[alias or (segments[-1] if segments[-1] not in ("self", "super", "crate") else path[-1])] = "::".join(path)
    heads = "|".join(["crate", r"\$crate", "super", "self"] + [re.escape(n) for n in bound])
    for m in re.finditer(r"(?<![\w:.])(" + heads + r")((?:\s*::\s*(?:super|[A-Za-z_]\w*))+)", text):
        segments = [m.group(1)] + [x for x in re.split(r"\s*::\s*", m.group(2)) if x]
        path = absolute(segments, m.start())
        target = module_of(path) if path is not None else None
        if target is not None:
            found.add(target)
    found = {t for t in found if t != module and not module.startswith(t + "::") and t != ""}
    return found, problems


def without_test_modules(text):
    """`text` (comments and literals already stripped) without its `#[cfg(test)] mod name { ... }`
    blocks."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def order(mod_rs):
    """The numbered order in a layer's mod.rs comment: lines such as `//! 3. `layout`: ...`."""
    text = open(mod_rs, encoding="utf-8").read()
    return re.findall(r"^//!\s+\d+\.\s+\[?`(\w+)`", text, re.M)


def main():
    names = modules()
    problems = []
    ranks = {}
    for layer in ("core", "runtime"):
        listed = order(os.path.join(ROOT, layer, "mod.rs"))
        files = sorted(n.split("::")[1] for n in names if n.startswith(layer + "::") and n.count("::") == 1)
        for name in sorted(set(files) - set(listed)):
            problems.append(f"src/{layer}/{name}.rs is not in the numbered order of src/{layer}/mod.rs")
        for name in sorted(set(listed) - set(files)):
            problems.append(f"src/{layer}/mod.rs lists `{name}`, which is no module of src/{layer}/")
        if len(listed) != len(set(listed)):
            problems.append(f"src/{layer}/mod.rs lists a module twice")
        for rank, name in enumerate(listed):
            ranks[f"{layer}::{name}"] = (layer, rank)
    for module, path in sorted(names.items()):
        raw = open(path, encoding="utf-8").read()
        text = strip(raw)
        where = os.path.relpath(path, os.path.join(ROOT, ".."))
        layer = module.split("::")[0] if module else ""
        if layer == "core" and re.search(r"\bpgrx\b", text):
            problems.append(f"{where}: the pure core names pgrx")
        if layer == "core" and (m := re.search(r"\b(SystemTime|Instant|UNIX_EPOCH|libc|std\s*::\s*(?:fs|env|thread|net|process))\b",
                                                without_test_modules(text))):
            problems.append(f"{where}: the pure core reads a real clock or the OS ({m.group(1)}) outside its tests")
        for pattern, what in ((r"#\s*\[\s*path\b", "a #[path] attribute"), (r"\bextern\s+crate\b", "extern crate"),
                              (r"#\s*\[\s*macro_(?:export|use)\b", "an exported macro")):
            if re.search(pattern, text):
                problems.append(f"{where}: {what}, which hides which module a path names")
        if os.path.basename(path) in ("lib.rs", "mod.rs") and re.search(r"\bpub\s*(?:\([^)]*\)\s*)?use\b", text):
            problems.append(f"{where}: a re-export in a layer's root, which hides which module a path names")
        own_top = "::".join(module.split("::")[:2])
        found, import_problems = imports(module, text, names)
        problems.extend(f"{where}: {p}" for p in import_problems)
        for target in sorted(found):
            target_layer = target.split("::")[0]
            top = "::".join(target.split("::")[:2])
            if layer == "core" and target_layer != "core":
                problems.append(f"{where}: the core imports {target}")
            elif layer == "runtime" and target_layer not in ("core", "runtime"):
                problems.append(f"{where}: the runtime imports {target}")
            elif layer == "api" and target_layer == "api" and target != "api" and module != "api":
                problems.append(f"{where}: {module} imports {target}; API files share code through src/api/mod.rs only")
            elif layer in ("core", "runtime") and target_layer == layer and target != layer and top != own_top:
                mine, theirs = ranks.get(own_top), ranks.get(top)
                if mine and theirs and theirs[1] >= mine[1]:
                    problems.append(
                        f"{where}: {module} imports {top}, which does not come before it in src/{layer}/mod.rs's order"
                    )
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check-layers: {len(problems)} problem(s); see CONTRIBUTING.md, \"The module map\"", file=sys.stderr)
        return 1
    print(f"check-layers: {len(names)} modules keep their layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
