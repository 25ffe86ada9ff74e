#!/usr/bin/env python3
"""The release's metadata agree with each other (run by `make test`'s static checks and `make dist`).

- META.json follows the PGXN Meta Spec 1.0.0 (its required keys, a semantic version, a known
  licence, every provided extension with a file that exists), and its versions are Cargo.toml's;
- the control file renders Cargo.toml's version, and sql/ has an update script into it from the
  previous release;
- CHANGELOG.md has a section for the version, "(unreleased)" exactly when META.json's
  release_status is not "stable";
- LICENSE is the PostgreSQL Licence, which Cargo.toml and META.json name.
Prints one line per problem and exits 1 if there is any.
"""
import json
import os
import re
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
problems = []


def read(path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


cargo = re.search(r'^version = "([^"]+)"', read("Cargo.toml"), re.M).group(1)
semver = re.compile(r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")
meta = json.loads(read("META.json"))
for key in ("name", "abstract", "version", "maintainer", "license", "provides", "meta-spec"):
    if key not in meta:
        problems.append(f"META.json: no {key!r} (required by the PGXN Meta Spec 1.0.0)")
if meta.get("meta-spec", {}).get("version") != "1.0.0":
    problems.append("META.json: meta-spec version is not 1.0.0")
if meta.get("version") != cargo:
    problems.append(f"META.json: version {meta.get('version')} is not Cargo.toml's {cargo}")
if meta.get("license") != "postgresql":
    problems.append("META.json: license is not postgresql")
if not semver.match(str(meta.get("version", ""))):
    problems.append("META.json: version is not a semantic version")
for name, ext in meta.get("provides", {}).items():
    if ext.get("version") != cargo:
        problems.append(f"META.json: provides {name} at {ext.get('version')}, not {cargo}")
    for key in ("file", "docfile"):
        if key in ext and not os.path.isfile(os.path.join(root, ext[key])):
            problems.append(f"META.json: provides {name}: {key} {ext[key]} does not exist")
    if "file" not in ext:
        problems.append(f"META.json: provides {name} without a file")
if meta.get("release_status", "stable") not in ("stable", "testing", "unstable"):
    problems.append("META.json: release_status is not stable, testing or unstable")

if "default_version = '@CARGO_VERSION@'" not in read("snowflake_id.control"):
    problems.append("snowflake_id.control: default_version is not Cargo.toml's (@CARGO_VERSION@)")
scripts = [f for f in os.listdir(os.path.join(root, "sql")) if re.match(r"snowflake_id--[\d.]+--[\d.]+\.sql$", f)]
if not any(f.endswith(f"--{cargo}.sql") for f in scripts):
    problems.append(f"sql/: no update script into {cargo}")

changelog = read("CHANGELOG.md")
heading = re.search(rf"^## {re.escape(cargo)}( \(unreleased\))?$", changelog, re.M)
if not heading:
    problems.append(f"CHANGELOG.md: no section for {cargo}")
elif bool(heading.group(1)) != (meta.get("release_status") != "stable"):
    problems.append("CHANGELOG.md says (unreleased) exactly when META.json's release_status is not stable: they disagree")

if "PostgreSQL License" not in read("LICENSE") or 'license = "PostgreSQL"' not in read("Cargo.toml"):
    problems.append("LICENSE is not the PostgreSQL Licence, or Cargo.toml names another")

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
