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
#      versions in HEAVY_VERSIONS (default "15 18"); then the extension built and installed for
#      every version (after the test builds, which install a build with the tests in it);
#   3. pg_test/run.sh: pg_regress files, extension upgrades, cluster tests and a server without
#      the preload on every version; the fault and hardening suites on HEAVY_VERSIONS;
#   4. pg_test/tap.sh, when PG_VERSIONS has 15 and 18, beside step 3 (its tests mostly wait for
#      clocks, timeouts and replication; their output is printed after step 5): multi-node tests
#      with PostgreSQL's TAP framework. pg_upgrade and dump/restore from every other version into
#      the newest, failover, synchronous standbys, floors and restores, a fleet and its check, and
#      the portable edition on every version; Citus on 16+; no stall across roles and databases
#      on 15; pg_tle and pg_partman on 15 and 18;
#   5. examples/test.sh, when PG_VERSIONS has 15: Django, SQLAlchemy, psycopg 3 and node-postgres
#      against a PostgreSQL 15 server, and the client-side decoders (docs/clients.md); and the
#      chaos proxy (chaos/proxy.py) partitioning a PostgreSQL 15 standby from its primary.
# Every server is a private tree from scripts/setup.sh: nothing is installed into, started or
# stopped in a system PostgreSQL.
# Ends with the time each step took, then "snowflake_id: N passed, N failed" and a non-zero exit
# on any failure.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

export PG_VERSIONS="${PG_VERSIONS:-15 18}"
HEAVY_VERSIONS="${HEAVY_VERSIONS:-15 18}"
heavy() { [[ " $HEAVY_VERSIONS " == *" $1 "* ]]; }
tap=no
if [[ " $PG_VERSIONS " == *" 15 "* && " $PG_VERSIONS " == *" 18 "* ]]; then tap=yes; fi
bash "$REPO_ROOT/scripts/setup.sh"
cd "$REPO_ROOT"
export CARGO_PGRX_DISABLE_GC_SECTIONS_WORKAROUND=1
setup_seconds=$SECONDS

TOTAL_PASSED=0 TOTAL_FAILED=0 SUITES_FAILED=()
tally() { # tally SUITE PASSED FAILED
  TOTAL_PASSED=$((TOTAL_PASSED + $2)) TOTAL_FAILED=$((TOTAL_FAILED + $3))
  if [ "$3" -ne 0 ]; then SUITES_FAILED+=("$1"); fi
}
# tally_output SUITE FILE PATTERN RC: tallies the "N passed, N failed" line matching PATTERN in a
# suite's output (none at all is a failure: the build or the harness failed).
tally_output() {
  local line p f
  line="$(grep -aE "$3" "$2" | tail -n 1 || true)"
  p="$(sed -nE 's/.* ([0-9]+) passed.*/\1/p' <<<"$line")" f="$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$line")"
  if [ -z "$p" ]; then p=0 f=1; fi
  if [ "$4" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi # failed after its summary line
  tally "$1" "$p" "$f"
}
# The time of each step, and of the parts the suites report ("time: NAME: Ns" lines), printed at
# the end.
TIMES=()
note_time() { TIMES+=("$(printf '%-44s %5ss' "$1" "$2")"); }
gather_times() {
  local l
  while IFS= read -r l; do
    l="${l#time: }"
    note_time "  ${l%: *}" "$(sed -E 's/.*: ([0-9]+)s$/\1/' <<<"$l")"
  done < <(grep -aE '^time: .+: [0-9]+s$' "$1" || true)
}

note_time "setup (scripts/setup.sh)" "$setup_seconds"

log "static checks"
started=$SECONDS
static_failed=0
cargo fmt --check || static_failed=1
python3 scripts/check-layers.py || static_failed=1
python3 scripts/check-style.py || static_failed=1
cargo clippy --quiet --all-targets -- -D warnings || static_failed=1
python3 scripts/check-release.py || static_failed=1
python3 scripts/check-errors.py || static_failed=1
python3 scripts/portable-tle.py --check || static_failed=1
# The chaos checker and timeline on hand-made histories (chaos/test_check.py, test_timeline.py)
# and the chaos proxy on plain sockets (chaos/test_proxy.py): no PostgreSQL server, a few seconds.
python3 -m unittest discover -s chaos -p 'test_*.py' || static_failed=1
tally "static checks" $((1 - static_failed)) "$static_failed"
note_time "static checks" $((SECONDS - started))

# The Rust tests first: each installs a build with the #[pg_test]s in it, which the builds below
# replace before any other suite starts a server.
for v in $PG_VERSIONS; do
  heavy "$v" || continue
  log "cargo pgrx test pg$v"
  started=$SECONDS
  pgdata="$SNOWFLAKE_RUN_DIR/pgrx$v"
  $SUDO install -d -o postgres -g postgres -m 0755 "$SNOWFLAKE_RUN_DIR"
  $SUDO rm -rf "$pgdata" && $SUDO install -d -o postgres -g postgres -m 0700 "$pgdata"
  out="$(mktemp)"
  rc=0
  cargo pgrx test "pg$v" --runas postgres --pgdata "$pgdata" 2>&1 | tee "$out" || rc=$?
  tally_output "cargo pgrx test pg$v" "$out" '^test result:' "$rc"
  rm -f "$out"
  note_time "cargo pgrx test pg$v (build and run)" $((SECONDS - started))
done
for v in $PG_VERSIONS; do
  started=$SECONDS
  install_extension "$v"
  note_time "build and install pg$v" $((SECONDS - started))
done

# The multi-node tests, in the background: from every other version of the run into the newest,
# failover and a fleet on every version, Citus where it builds (16+), the portable edition on
# every version.
if [ "$tap" = yes ]; then
  newest="$(tr ' ' '\n' <<<"$PG_VERSIONS" | sort -n | tail -n 1)"
  older="$(tr ' ' '\n' <<<"$PG_VERSIONS" | sort -n | grep -vx "$newest" | tr '\n' ' ')"
  log "multi-node tests (PostgreSQL's TAP framework) in the background; their output follows the other suites'"
  tap_out="$(mktemp)"
  tap_started=$SECONDS
  # Two tests at a time: most of their time is spent waiting for clocks, timeouts and replicas.
  # In a session of their own, which goes with this script however it ends (an error, Ctrl-C,
  # which a background job does not receive): on SIGTERM the TAP tests stop their clusters
  # (pg_test/tap/SnowflakeNode.pm).
  SFID_FROM="${older% }" SFID_TO="$newest" SFID_FAILOVER="$PG_VERSIONS" SFID_FLEET="$PG_VERSIONS" SFID_PORTABLE="$PG_VERSIONS" \
    TAP_JOBS="${TAP_JOBS:-2}" setsid bash pg_test/tap.sh >"$tap_out" 2>&1 &
  tap_pid=$!
  trap 'kill -TERM -- -"$tap_pid" 2>/dev/null || true' EXIT
fi

for v in $PG_VERSIONS; do
  started=$SECONDS
  out="$(mktemp)"
  rc=0
  suites=()
  if ! heavy "$v"; then suites=(env SUITES="regress upgrade cluster not_preloaded"); fi
  "${suites[@]}" bash pg_test/run.sh "$v" 2>&1 | tee "$out" || rc=$?
  tally_output "pg_test PostgreSQL $v" "$out" "^PostgreSQL $v: [0-9]+ passed, [0-9]+ failed" "$rc"
  note_time "pg_test PostgreSQL $v" $((SECONDS - started))
  gather_times "$out"
  rm -f "$out"
done

if [[ " $PG_VERSIONS " == *" 15 "* ]]; then
  log "client examples (PostgreSQL 15)"
  started=$SECONDS
  out="$(mktemp)"
  rc=0
  bash examples/test.sh 2>&1 | tee "$out" || rc=$?
  tally_output "client examples" "$out" '^clients: [0-9]+ passed, [0-9]+ failed' "$rc"
  rm -f "$out"
  note_time "client examples" $((SECONDS - started))
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
  log "multi-node tests (PostgreSQL's TAP framework): waiting for them"
  rc=0
  wait "$tap_pid" || rc=$?
  trap - EXIT # its pid is free again: never signal whoever takes it next
  cat "$tap_out"
  tally_output "TAP multi-node tests" "$tap_out" '^TAP: [0-9]+ passed, [0-9]+ failed' "$rc"
  note_time "TAP multi-node tests (in the background)" $((SECONDS - tap_started))
  gather_times "$tap_out"
  rm -f "$tap_out"
fi

echo
echo "make test steps (total ${SECONDS}s; the TAP tests ran beside the pg_test suites and the examples):"
printf '  %s\n' "${TIMES[@]}"
echo
for s in "${SUITES_FAILED[@]}"; do echo "FAILED: $s"; done
echo "snowflake_id: $TOTAL_PASSED passed, $TOTAL_FAILED failed"
[ "$TOTAL_FAILED" -eq 0 ]
