#!/usr/bin/env bash
# SQL-level and cluster-level tests against real PostgreSQL servers.
#
#   pg_test/run.sh 15          # expects snowflake_id installed into PostgreSQL 15
#
# 1. pg_regress: pg_test/sql/*.sql against pg_test/expected/*.out (generator, readers, errors);
# 2. cluster tests (pg_test/cluster.sh): concurrency, k-sortedness, layouts, UUIDv7;
# 3. fault tests (pg_test/faults.sh): crashes, restarts, clock steps, load, fencing, bad input;
# 4. hardening tests (pg_test/hardening.sh): bounded input under a memory limit, server-wide
#    leads, privileges, damaged reservation files, a clock before the epoch;
# 5. a restart without the preload.
# Prints "N passed, N failed" and exits non-zero on any failure.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

V="${1:?usage: pg_test/run.sh PG_MAJOR}"
# Which suites to run (all by default); a subset is for checking a change quickly.
SUITES="${SUITES:-regress upgrade cluster faults hardening not_preloaded}"
want() { [[ " $SUITES " == *" $1 "* ]]; }
NAME="regress$V" PORT="$((5400 + V))"
OUT="$SNOWFLAKE_RUN_DIR/$NAME-results"
rm -rf "$OUT" && mkdir -p "$OUT"
PASSED=0 FAILED=0
FAILURES=()
# The time each suite took, printed at the end as "time: ..." lines (scripts/test.sh gathers them).
TIMES=() SUITE_STARTED=$SECONDS
timed() { TIMES+=("time: pg_test $V $1: $((SECONDS - SUITE_STARTED))s"); SUITE_STARTED=$SECONDS; }

pass() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
fail() { FAILED=$((FAILED + 1)); FAILURES+=("$*"); echo "not ok - $*"; }
# check DESCRIPTION EXPECTED ACTUAL
check() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected [$2], got [$3]"; fi; }

# server_set SETTING VALUE / server_reset SETTING: a server setting (sighup) through ALTER SYSTEM
# and a reload. The reload reaches running backends asynchronously: give them a moment.
server_set() {
  psql -X -q -d postgres -c "ALTER SYSTEM SET $1 = '$2'" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 0.3
}
server_reset() {
  psql -X -q -d postgres -c "ALTER SYSTEM RESET $1" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 0.3
}

cluster_start "$V" "$NAME" "$PORT"
trap 'cluster_stop "$V" "$NAME" || true' EXIT
cluster_env "$V" "$NAME" "$PORT"
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -d sfid_cluster "$@"; }
# sqlstate SQL...: runs the statements in one session and prints the SQLSTATE of the last one,
# "ok" if it succeeded with a non-NULL result, "null" if its result was NULL.
sqlstate() {
  local out
  out="$(psql -X -q -A -t -d sfid_cluster -v ON_ERROR_STOP=0 "${@/#/-c}" -c "\\echo :LAST_ERROR_SQLSTATE" 2>/dev/null | tail -n 2)"
  local value="${out%%$'\n'*}" code="${out##*$'\n'}"
  if [ "$code" != 00000 ]; then echo "$code"; elif [ -z "$value" ] || [ "$value" = "$code" ]; then echo null; else echo ok; fi
}

# regress TEST: runs pg_regress on pg_test/sql/TEST.sql.
regress() {
  local out="$OUT/$1"
  if pg_regress_suite "$V" "$(pg_bin "$V")" "$(dirname "$("$(pg_bin "$V")/pg_config" --pgxs)")/../test/regress/pg_regress" \
      "$PGHOST" "$PGPORT" "$out" "$@"; then
    pass "pg_regress $1 (PostgreSQL $V)"
  else
    cat "$out/pg_regress.log"
    if [ -f "$out/regression.diffs" ]; then head -n 200 "$out/regression.diffs"; fi
    fail "pg_regress $1 (PostgreSQL $V)"
  fi
}

# run_clients N SQL_TEMPLATE: N concurrent psql sessions, each running SQL_TEMPLATE with
# :c replaced by its client number (1..N). Returns the number of sessions that failed.
run_clients() {
  local n="$1" tmpl="$2" pids=() failed=0
  for c in $(seq 1 "$n"); do
    (echo "${tmpl//:c/$c}" | psql -X -q -v ON_ERROR_STOP=1 -d sfid_cluster >/dev/null 2>"$OUT/client$c.err") &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
  [ "$failed" -eq 0 ] || cat "$OUT"/client*.err >&2
  return "$failed"
}

# For the fault and hardening tests: the cluster's files, and stopping and starting it.
DATA="$SNOWFLAKE_RUN_DIR/$NAME/data"
LOG="$SNOWFLAKE_RUN_DIR/$NAME/server.log"
pg_ctl_() { as_postgres "$(pg_bin "$V")/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 "$@" >/dev/null; }
wait_ready() { for _ in $(seq 1 120); do pg_isready -q && return 0; sleep 0.25; done; return 1; }
set_fault_conf() { as_postgres sed -i '/^snowflake_id.debug_clock_offset/d' "$DATA/postgresql.conf"; [ $# -eq 0 ] || echo "$1" | as_postgres tee -a "$DATA/postgresql.conf" >/dev/null; }
# A comparable form of ids: snowflake ids as 19-digit zero-padded numbers, so text order is
# numeric order; UUIDs are already fixed-width lowercase hex.
pad_ids() { awk -F'|' '{ s = $1; while (length(s) < 19) s = "0" s; print s "|" $2 }'; }

if want regress; then
  log "pg_regress on PostgreSQL $V"
  # public_ids rewrites the key file with COPY, which keeps the mode of a file that exists.
  as_postgres install -m 0600 /dev/null "$DATA/snowflake_id.keys"
  for t in $REGRESS_TESTS; do regress "$t"; done
  timed regress
fi

if want upgrade; then
  log "extension upgrades on PostgreSQL $V"
  source "$REPO_ROOT/pg_test/upgrade.sh"
  timed upgrade
fi

psql -X -q -c "CREATE DATABASE sfid_cluster" >/dev/null
q -c "CREATE EXTENSION snowflake_id" -c "DO \$\$ BEGIN CREATE ROLE sf_plain LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END \$\$"
if want cluster; then
  log "cluster tests on PostgreSQL $V"
  source "$REPO_ROOT/pg_test/cluster.sh"
  timed cluster
fi
if want faults; then source "$REPO_ROOT/pg_test/faults.sh"; timed faults; fi
if want hardening; then source "$REPO_ROOT/pg_test/hardening.sh"; timed hardening; fi

if want not_preloaded; then
log "without shared_preload_libraries"
conf="$SNOWFLAKE_RUN_DIR/$NAME/data/postgresql.conf"
as_postgres sed -i "/^shared_preload_libraries/d" "$conf"
cluster_restart "$V" "$NAME"
regress not_preloaded
# Without the preload the readers take the layout and epoch from the configuration files, never
# from a value the session set before the library loaded (any user can SET a placeholder).
echo "snowflake_id.epoch = '2024-01-01 00:00:00+00'" | as_postgres tee -a "$conf" >/dev/null
cluster_restart "$V" "$NAME"
check "not preloaded: the readers use the configured epoch, whatever the session SET before" "41/13/9|2024-01-01 00:00:00+00" \
  "$(psql -X -q -A -t -d sfid_cluster -c "SET ROLE sf_plain" -c "SET snowflake_id.epoch = '2000-01-01'" -c "SET snowflake_id.layout = 'twitter'" \
       -c "SELECT layout || '|' || epoch FROM snowflake_layout()" 2>&1 | tail -n 1)"
as_postgres sed -i "/^snowflake_id.epoch = '2024-01-01 00:00:00+00'/d" "$conf"
echo "shared_preload_libraries = 'snowflake_id'" | as_postgres tee -a "$conf" >/dev/null
timed not_preloaded
fi

echo
printf '%s\n' "${TIMES[@]}"
echo "PostgreSQL $V: $PASSED passed, $FAILED failed"
for f in "${FAILURES[@]}"; do echo "  FAILED: $f"; done
[ "$FAILED" -eq 0 ]
