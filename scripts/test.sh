#!/usr/bin/env bash
# The README's second command: set up from nothing, then run every test on every PostgreSQL
# version in PG_VERSIONS (default "15 18"; CI runs "14 15 16 17 18"):
#   1. static checks: rustfmt with the line width and import groups it cannot enforce itself
#      (scripts/check-style.py), clippy, that each layer of src/ imports only the ones below it and
#      the pure core never names pgrx (scripts/check-layers.py), that the release metadata agree
#      (scripts/check-release.py: META.json, Cargo.toml, CHANGELOG.md),
#      that docs/errors.md lists every SQLSTATE the code raises (scripts/check-errors.py), and that
#      sql/portable/pg_tle.sql is what scripts/portable-tle.py makes of the portable script;
#   2. cargo pgrx test: the core's #[test]s (fake clock) and the #[pg_test]s (SQL surface), on the
#      versions in HEAVY_VERSIONS (default "15 18");
#   3. pg_test/run.sh: pg_regress files, extension upgrades, cluster tests and a server without
#      the preload on every version; the fault and hardening suites on HEAVY_VERSIONS;
#   4. pg_test/tap.sh, when PG_VERSIONS has 15 and 18: multi-node tests with PostgreSQL's TAP
#      framework (pg_upgrade and dump/restore 15 -> 18 and 17 -> 18, the recorded id space,
#      failover on 15 and 18, a fleet, Citus; the portable edition on every version, and under
#      pg_tle on 15 and 18). It also builds the extension for 17;
#   5. examples/test.sh, when PG_VERSIONS has 15: Django, SQLAlchemy, psycopg 3 and node-postgres
#      against a PostgreSQL 15 server, and the client-side decoders (docs/clients.md); and the
#      chaos proxy (chaos/proxy.py) partitioning a PostgreSQL 15 standby from its primary.
# Every server is a private tree from scripts/setup.sh: nothing is installed into, started or
# stopped in a system PostgreSQL.
# Ends with "snowflake_id: N passed, N failed" and a non-zero exit on any failure.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

export PG_VERSIONS="${PG_VERSIONS:-15 18}"
HEAVY_VERSIONS="${HEAVY_VERSIONS:-15 18}"
heavy() { [[ " $HEAVY_VERSIONS " == *" $1 "* ]]; }
tap=no
if [[ " $PG_VERSIONS " == *" 15 "* && " $PG_VERSIONS " == *" 18 "* ]]; then tap=yes; fi
# The multi-node tests move data from 17 to 18 as well: set up every major they touch.
setup_versions="$PG_VERSIONS"
if [ "$tap" = yes ] && [[ " $PG_VERSIONS " != *" 17 "* ]]; then setup_versions="$PG_VERSIONS 17"; fi
PG_VERSIONS="$setup_versions" bash "$REPO_ROOT/scripts/setup.sh"
cd "$REPO_ROOT"
export CARGO_PGRX_DISABLE_GC_SECTIONS_WORKAROUND=1

TOTAL_PASSED=0 TOTAL_FAILED=0 SUITES_FAILED=()
tally() { # tally SUITE PASSED FAILED
  TOTAL_PASSED=$((TOTAL_PASSED + $2)) TOTAL_FAILED=$((TOTAL_FAILED + $3))
  if [ "$3" -ne 0 ]; then SUITES_FAILED+=("$1"); fi
}

log "static checks"
static_failed=0
cargo fmt --check || static_failed=1
python3 scripts/check-layers.py || static_failed=1
python3 scripts/check-style.py || static_failed=1
cargo clippy --quiet --all-targets -- -D warnings || static_failed=1
python3 scripts/check-release.py || static_failed=1
python3 scripts/check-errors.py || static_failed=1
python3 scripts/portable-tle.py --check || static_failed=1
# The chaos checker on hand-made histories (chaos/test_check.py) and the chaos proxy on plain
# sockets (chaos/test_proxy.py): no PostgreSQL server, a few seconds.
python3 -m unittest discover -s chaos -p 'test_*.py' || static_failed=1
tally "static checks" $((1 - static_failed)) "$static_failed"

for v in $PG_VERSIONS; do
  if heavy "$v"; then
    log "cargo pgrx test pg$v"
    pgdata="$SNOWFLAKE_RUN_DIR/pgrx$v"
    $SUDO install -d -o postgres -g postgres -m 0755 "$SNOWFLAKE_RUN_DIR"
    $SUDO rm -rf "$pgdata" && $SUDO install -d -o postgres -g postgres -m 0700 "$pgdata"
    out="$(mktemp)"
    rc=0
    cargo pgrx test "pg$v" --runas postgres --pgdata "$pgdata" 2>&1 | tee "$out" || rc=$?
    line="$(grep -E '^test result:' "$out" | tail -n 1 || true)"
    p="$(sed -nE 's/.* ([0-9]+) passed.*/\1/p' <<<"$line")" f="$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$line")"
    if [ -z "$p" ]; then p=0 f=1; fi # no result line: the build or the harness failed
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi # failed after its summary line
    tally "cargo pgrx test pg$v" "$p" "$f"
    rm -f "$out"
  fi

  install_extension "$v"
  out="$(mktemp)"
  rc=0
  suites=()
  if ! heavy "$v"; then suites=(env SUITES="regress upgrade cluster not_preloaded"); fi
  "${suites[@]}" bash pg_test/run.sh "$v" 2>&1 | tee "$out" || rc=$?
  line="$(grep -aE "^PostgreSQL $v: [0-9]+ passed, [0-9]+ failed" "$out" | tail -n 1 || true)"
  p="$(sed -nE 's/.*: ([0-9]+) passed.*/\1/p' <<<"$line")" f="$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$line")"
  if [ -z "$p" ]; then p=0 f=1; fi
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  tally "pg_test PostgreSQL $v" "$p" "$f"
  rm -f "$out"
done

if [[ " $PG_VERSIONS " == *" 15 "* ]]; then
  log "client examples (PostgreSQL 15)"
  out="$(mktemp)"
  rc=0
  bash examples/test.sh 2>&1 | tee "$out" || rc=$?
  line="$(grep -aE '^clients: [0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1 || true)"
  p="$(sed -nE 's/.*: ([0-9]+) passed.*/\1/p' <<<"$line")" f="$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$line")"
  if [ -z "$p" ]; then p=0 f=1; fi
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  tally "client examples" "$p" "$f"
  rm -f "$out"
fi

if [[ " $PG_VERSIONS " == *" 15 "* ]]; then
  # The chaos proxy between a real primary and its streaming standby: a partition stops the
  # standby, the heal catches it up (chaos/test_proxy.py, PostgresThroughProxy). As postgres, who
  # may not read the checkout: from a copy.
  log "chaos proxy with PostgreSQL 15"
  dir="$SNOWFLAKE_RUN_DIR/proxy"
  $SUDO install -d -o postgres -g postgres -m 0755 "$SNOWFLAKE_RUN_DIR"
  $SUDO rm -rf "$dir" && $SUDO install -d -o postgres -g postgres -m 0755 "$dir"
  $SUDO install -o postgres -g postgres -m 0644 chaos/proxy.py chaos/test_proxy.py "$dir/"
  out="$(mktemp)"
  rc=0
  as_postgres env SFID_PROXY_PG_BIN="$(pg_bin 15)" SFID_PROXY_WORK="$dir" \
    /usr/bin/python3 "$dir/test_proxy.py" -v PostgresThroughProxy 2>&1 | tee "$out" || rc=$?
  ran="$(sed -nE 's/^Ran ([0-9]+) tests?.*/\1/p' "$out" | tail -n 1)"
  f="$({ grep -aoE '(failures|errors)=[0-9]+' "$out" || true; } | awk -F= '{ s += $2 } END { print s + 0 }')"
  if [ -z "$ran" ]; then ran=1 f=1; fi
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  tally "chaos proxy with PostgreSQL 15" $((ran - f)) "$f"
  rm -f "$out"
fi

if [ "$tap" = yes ]; then
  log "multi-node tests (PostgreSQL's TAP framework)"
  if [[ " $PG_VERSIONS " != *" 17 "* ]]; then install_extension 17; fi
  out="$(mktemp)"
  rc=0
  # The portable edition (t/007) on every version of this run: it needs no build, only a server.
  SFID_PORTABLE="$PG_VERSIONS" bash pg_test/tap.sh 2>&1 | tee "$out" || rc=$?
  line="$(grep -aE '^TAP: [0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1 || true)"
  p="$(sed -nE 's/.*: ([0-9]+) passed.*/\1/p' <<<"$line")" f="$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$line")"
  if [ -z "$p" ]; then p=0 f=1; fi
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  tally "TAP multi-node tests" "$p" "$f"
  rm -f "$out"
fi

echo
for s in "${SUITES_FAILED[@]}"; do echo "FAILED: $s"; done
echo "snowflake_id: $TOTAL_PASSED passed, $TOTAL_FAILED failed"
[ "$TOTAL_FAILED" -eq 0 ]
