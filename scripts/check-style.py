#!/usr/bin/env python3
"""The formatting rules of src/ that stable rustfmt cannot enforce itself.

- No line is longer than rustfmt.toml's max_width. rustfmt skips a whole statement it cannot fit,
  such as a call around one long string literal, and says nothing: wrap long literals with a
  backslash at the end of the line (or concat!), and long SQL between its tokens.
- Imports come in groups separated by a blank line, in the order std (and core, alloc), other
  crates, then this crate (crate::, super::, self::); each group holds one kind. rustfmt sorts
  within a group (its group_imports option is unstable).

Run from anywhere; exits 1 and names each offending line.
"""

import os
import re
import sys

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def max_width():
    text = open(os.path.join(TOP, "rustfmt.toml"), encoding="utf-8").read()
    m = re.search(r"^max_width\s*=\s*(\d+)", text, re.M)
    return int(m.group(1)) if m else 100


def kind(use_line):
    """0 for std, 1 for another crate, 2 for this crate, from the path after `use`."""
    path = re.sub(r"^\s*(pub(\([^)]*\))?\s+)?use\s+(::)?", "", use_line)
    root = re.match(r"[A-Za-z_]\w*", path)
    root = root.group(0) if root else ""
    if root in ("std", "core", "alloc"):
        return 0
    if root in ("crate", "super", "self"):
        return 2
    return 1


def check_file(path, width, problems):
    lines = open(path, encoding="utf-8").read().split("\n")
    where = os.path.relpath(path, TOP)
    for n, line in enumerate(lines, 1):
        if len(line) > width:
            problems.append(f"{where}:{n}: {len(line)} characters, more than max_width {width}")
    # Blocks of `use` statements: consecutive ones, with blank lines allowed between groups.
    names = ("std", "other crates", "this crate")
    i = 0
    while i < len(lines):
        if not re.match(r"^\s*(pub(\([^)]*\))?\s+)?use\s", lines[i]):
            i += 1
            continue
        groups, current, seen = [], [], set()
        while i < len(lines):
            line = lines[i]
            if re.match(r"^\s*(pub(\([^)]*\))?\s+)?use\s", line):
                start = i
                while not lines[i].rstrip().endswith(";"):
                    i += 1
                current.append((start + 1, kind(line)))
                i += 1
            elif line.strip() == "" and current:
                groups.append(current)
                current = []
                i += 1
            else:
                break
        if current:
            groups.append(current)
        last = -1
        for group in groups:
            kinds = {k for _, k in group}
            first_line = group[0][0]
            if len(kinds) > 1:
                problems.append(f"{where}:{first_line}: one import group mixes {', '.join(names[k] for k in sorted(kinds))}")
            k = min(kinds)
            if k in seen or k < last:
                problems.append(f"{where}:{first_line}: imports of {names[k]} out of order (std, other crates, this crate)")
            seen |= kinds
            last = max(kinds)


def main():
    width = max_width()
    problems = []
    for dirpath, _, files in os.walk(os.path.join(TOP, "src")):
        for f in sorted(files):
            if f.endswith(".rs"):
                check_file(os.path.join(dirpath, f), width, problems)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check-style: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check-style: every line of src/ within {width} characters, imports grouped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
