#!/usr/bin/env bash
# `make dist`: the source archive PGXN takes, target/dist/snowflake_id-VERSION.zip, from the
# release's commit once VERSION is released (its tag, or "Release VERSION": scripts/lib.sh), else
# from HEAD: one top directory snowflake_id-VERSION/ with META.json in it. Checks the
# release metadata first (scripts/check-release.py) and the archive after. Uploading it to PGXN is
# done by hand (see the README's "PGXN").
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
python3 scripts/check-release.py || die "the release metadata disagree (above)"
version="$(current_release)"
if ref="$(release_commit "$version")"; then
  [ "$(git rev-parse HEAD)" = "$ref" ] || log "note: $version was released at ${ref:0:12}: the archive is made from that commit, not HEAD"
else
  ref="$(git rev-parse HEAD)"
  if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    log "note: uncommitted changes are not in the archive (it is made from HEAD)"
  fi
fi
out="$REPO_ROOT/target/dist" zip="$REPO_ROOT/target/dist/snowflake_id-$version.zip"
mkdir -p "$out" && rm -f "$zip"
git archive --format=zip --prefix="snowflake_id-$version/" -o "$zip" "$ref"
# What PGXN needs, and nothing built.
listing="$(python3 -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$zip")"
for f in META.json LICENSE README.md CHANGELOG.md Cargo.toml Cargo.lock Makefile snowflake_id.control src/lib.rs sql/finalize.sql; do
  grep -qx "snowflake_id-$version/$f" <<<"$listing" || die "the archive has no $f"
done
if grep -v "^snowflake_id-$version/" <<<"$listing" | grep -q .; then die "the archive has files outside snowflake_id-$version/"; fi
if grep -q "^snowflake_id-$version/target/" <<<"$listing"; then die "the archive has build output"; fi
[ "$(python3 -c 'import json, sys, zipfile; print(json.loads(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))["version"])' "$zip" "snowflake_id-$version/META.json")" = "$version" ] \
  || die "the archive's META.json is not at $version (commit it first)"
log "built $zip ($(du -h "$zip" | cut -f1), $(wc -l <<<"$listing") entries)"
