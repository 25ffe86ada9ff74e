#!/usr/bin/env bash
# SQL-level and cluster-level tests against real PostgreSQL servers.
#
#   pg_test/run.sh 15          # expects snowflake_id installed into PostgreSQL 15
#
# 1. pg_regress: pg_test/sql/*.sql against pg_test/expected/*.out (generator, readers, errors);
# 2. cluster tests (pg_test/cluster.sh): concurrency, k-sortedness, layouts, UUIDv7;
# 3. fault tests (pg_test/faults.sh): crashes, restarts, clock steps, load, fencing, bad input;
# 4. a restart without the preload.
# Prints "N passed, N failed" and exits non-zero on any failure.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

V="${1:?usage: pg_test/run.sh PG_MAJOR}"
NAME="regress$V" PORT="$((5400 + V))"
OUT="$SNOWFLAKE_RUN_DIR/$NAME-results"
rm -rf "$OUT" && mkdir -p "$OUT"
PASSED=0 FAILED=0
FAILURES=()

pass() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
fail() { FAILED=$((FAILED + 1)); FAILURES+=("$*"); echo "not ok - $*"; }
# check DESCRIPTION EXPECTED ACTUAL
check() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected [$2], got [$3]"; fi; }

cluster_start "$V" "$NAME" "$PORT"
trap 'cluster_stop "$V" "$NAME" || true' EXIT
cluster_env "$V" "$NAME" "$PORT"
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -d sfid_cluster "$@"; }

# regress TEST: runs pg_regress on pg_test/sql/TEST.sql.
regress() {
  local regress_bin out="$OUT/$1"
  regress_bin="$(dirname "$("$(pg_bin "$V")/pg_config" --pgxs)")/../test/regress/pg_regress"
  rm -rf "$out" && mkdir -p "$out/input"
  # Version-specific expected output in expected/pgNN/ overrides expected/.
  cp -r "$REPO_ROOT/pg_test/sql" "$REPO_ROOT/pg_test/expected" "$out/input/"
  if [ -d "$REPO_ROOT/pg_test/expected/pg$V" ]; then cp "$REPO_ROOT/pg_test/expected/pg$V"/*.out "$out/input/expected/"; fi
  if "$regress_bin" --bindir="$(pg_bin "$V")" --host="$PGHOST" --port="$PGPORT" --user=postgres \
      --inputdir="$out/input" --outputdir="$out" --dbname=sfid_regress "$@" >"$out/pg_regress.log" 2>&1; then
    pass "pg_regress $1 (PostgreSQL $V)"
  else
    cat "$out/pg_regress.log"
    if [ -f "$out/regression.diffs" ]; then head -n 200 "$out/regression.diffs"; fi
    fail "pg_regress $1 (PostgreSQL $V)"
  fi
}

log "pg_regress on PostgreSQL $V"
for t in snowflake uuidv7 uuidv7_api; do regress "$t"; done

log "cluster tests on PostgreSQL $V"
psql -X -q -c "CREATE DATABASE sfid_cluster" >/dev/null
q -c "CREATE EXTENSION snowflake_id"
source "$REPO_ROOT/pg_test/cluster.sh"
source "$REPO_ROOT/pg_test/faults.sh"

log "without shared_preload_libraries"
conf="$SNOWFLAKE_RUN_DIR/$NAME/data/postgresql.conf"
as_postgres sed -i "/^shared_preload_libraries/d" "$conf"
cluster_restart "$V" "$NAME"
regress not_preloaded
echo "shared_preload_libraries = 'snowflake_id'" | as_postgres tee -a "$conf" >/dev/null

echo
echo "PostgreSQL $V: $PASSED passed, $FAILED failed"
for f in "${FAILURES[@]}"; do echo "  FAILED: $f"; done
[ "$FAILED" -eq 0 ]
