#!/usr/bin/env python3
"""docs/errors.md lists every SQLSTATE the extension raises, and no other (run by `make test`'s
static checks).

- Every `ERRCODE_...` named under src/ (outside comments and `#[cfg(test)]` or `pg_test` modules)
  is mapped to its SQLSTATE through PostgreSQL's errcodes.txt (from `pg_config --sharedir`, or
  the first one found under /usr/share/postgresql), or, without one, through the table below;
- docs/errors.md's rows between `<!-- check-errors: begin -->` and `<!-- check-errors: end -->`
  start with a SQLSTATE in backticks, sorted. Every SQLSTATE of the code needs a row, and every
  row's SQLSTATE must be one the code raises.
Prints one line per problem and exits 1 if there is any.
"""
import glob
import os
import re
import subprocess
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DOC = "docs/errors.md"

# The codes src/ uses today, for machines without PostgreSQL's errcodes.txt.
KNOWN = {
    "ERRCODE_SUCCESSFUL_COMPLETION": "00000",
    "ERRCODE_WARNING": "01000",
    "ERRCODE_FEATURE_NOT_SUPPORTED": "0A000",
    "ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE": "22003",
    "ERRCODE_NULL_VALUE_NOT_ALLOWED": "22004",
    "ERRCODE_DATETIME_FIELD_OVERFLOW": "22008",
    "ERRCODE_INVALID_PARAMETER_VALUE": "22023",
    "ERRCODE_INVALID_TEXT_REPRESENTATION": "22P02",
    "ERRCODE_INVALID_TRANSACTION_STATE": "25000",
    "ERRCODE_READ_ONLY_SQL_TRANSACTION": "25006",
    "ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED": "2F003",
    "ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED": "39P01",
    "ERRCODE_INSUFFICIENT_PRIVILEGE": "42501",
    "ERRCODE_UNDEFINED_COLUMN": "42703",
    "ERRCODE_DATATYPE_MISMATCH": "42804",
    "ERRCODE_WRONG_OBJECT_TYPE": "42809",
    "ERRCODE_UNDEFINED_TABLE": "42P01",
    "ERRCODE_PROGRAM_LIMIT_EXCEEDED": "54000",
    "ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE": "55000",
    "ERRCODE_LOCK_NOT_AVAILABLE": "55P03",
    "ERRCODE_SYSTEM_ERROR": "58000",
    "ERRCODE_IO_ERROR": "58030",
    "ERRCODE_CONFIG_FILE_ERROR": "F0000",
    "ERRCODE_INTERNAL_ERROR": "XX000",
    "ERRCODE_DATA_CORRUPTED": "XX001",
}


def errcodes_txt():
    """PostgreSQL's list of SQLSTATEs, or None."""
    candidates = []
    try:
        sharedir = subprocess.run(["pg_config", "--sharedir"], capture_output=True, text=True, check=True).stdout.strip()
        candidates.append(os.path.join(sharedir, "errcodes.txt"))
    except (OSError, subprocess.CalledProcessError):
        pass
    candidates += sorted(glob.glob("/usr/share/postgresql/*/errcodes.txt"))
    for path in candidates:
        if os.path.isfile(path):
            return path
    return None


def mapping():
    codes = dict(KNOWN)
    path = errcodes_txt()
    if path:
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = re.match(r"^([0-9A-Z]{5})\s+[EWS]\s+(ERRCODE_\w+)", line)
                if m:
                    codes[m.group(2)] = m.group(1)
    return codes


def without_tests(text):
    """The source without comments and without the item that follows each #[cfg(test)] or
    #[cfg(any(test, feature = "pg_test"))] attribute (a module, or a function)."""
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    attr = re.compile(r"#\[cfg\((?:test|any\(test, *feature *= *\"pg_test\"\))\)\]")
    while True:
        m = attr.search(text, i)
        if not m:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i : m.start()])
        # Skip to the end of the item: its first `{ ... }` block, or the `;` that ends it first.
        j = m.end()
        while j < len(text) and text[j] not in "{;":
            j += 1
        if j < len(text) and text[j] == "{":
            depth = 0
            while j < len(text):
                if text[j] == "{":
                    depth += 1
                elif text[j] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
        i = j + 1


def raised():
    """{SQLSTATE: [files]} for every ERRCODE the extension's code names."""
    codes = mapping()
    found, problems = {}, []
    for path in sorted(glob.glob(os.path.join(root, "src", "**", "*.rs"), recursive=True)):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            source = without_tests(f.read())
        for name in sorted(set(re.findall(r"\bERRCODE_[A-Z0-9_]+\b", source))):
            if name not in codes:
                problems.append(f"{rel}: {name} is in neither errcodes.txt nor this script's table")
                continue
            found.setdefault(codes[name], set()).add(rel)
    return found, problems


def documented():
    """[(line number, SQLSTATE)] of the rows between the markers."""
    try:
        with open(os.path.join(root, DOC), encoding="utf-8") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return [], False
    rows, inside, seen_begin = [], False, False
    for n, line in enumerate(lines, 1):
        if "<!-- check-errors: begin -->" in line:
            inside, seen_begin = True, True
        elif "<!-- check-errors: end -->" in line:
            inside = False
        elif inside:
            m = re.match(r"^\|\s*`([0-9A-Z]{5})`", line)
            if m:
                rows.append((n, m.group(1)))
    return rows, seen_begin


def main():
    found, problems = raised()
    rows, seen_begin = documented()
    if not seen_begin:
        problems.append(f"{DOC}: no <!-- check-errors: begin --> marker")
    listed = {code for _, code in rows}
    for code in sorted(set(found) - listed):
        problems.append(f"{DOC}: SQLSTATE {code} is raised ({', '.join(sorted(found[code]))}) but not listed")
    for n, code in rows:
        if code not in found:
            problems.append(f"{DOC}:{n}: SQLSTATE {code} is listed but nothing under src/ raises it")
    for (n1, a), (n2, b) in zip(rows, rows[1:]):
        if b < a:
            problems.append(f"{DOC}:{n2}: {b} comes after {a}: sort the rows by SQLSTATE")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"check-errors: {len(found)} SQLSTATEs raised under src/, each listed in {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
