#!/usr/bin/env bash
# Multi-node tests with PostgreSQL's own TAP framework (PostgreSQL::Test::Cluster, shipped
# with Debian's postgresql-server-dev-15): pg_upgrade and dump/restore between majors, the
# recorded id space, failover. Expects snowflake_id installed into every major named below.
#
#   pg_test/tap.sh                      # SFID_FROM="15 17" SFID_TO=18 SFID_FAILOVER="15 18" SFID_FLEET=18
#   TAP_TESTS=t/004_fleet.pl pg_test/tap.sh   # one test
#
# Prints prove's summary and "TAP: N passed, N failed"; exits non-zero on any failure.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

export SFID_FROM="${SFID_FROM:-15 17}" SFID_TO="${SFID_TO:-18}" SFID_FAILOVER="${SFID_FAILOVER:-15 18}" SFID_FLEET="${SFID_FLEET:-18}"
# The private trees of scripts/setup.sh throughout, each with the extension built for its major.
for v in $SFID_FROM $SFID_TO $SFID_FAILOVER $SFID_FLEET; do
  export "SFID_PG$v=$(pg_prefix "$v")"
done
# Citus for t/005_citus.pl, built into the fleet major's tree; the test skips without it.
# With the tarball present, a failed build fails the test instead of skipping it.
export SFID_CITUS=no
if [ "$SFID_FLEET" -ge 16 ] && citus_tarball >/dev/null; then
  if build_citus "$(pg_prefix "$SFID_FLEET")"; then SFID_CITUS=yes; else SFID_CITUS=build-failed; fi
fi
perl_lib=/usr/lib/postgresql/15/lib/pgxs/src/test/perl
export PG_REGRESS="$(pg_prefix 15)/lib/pgxs/src/test/regress/pg_regress"

# The tests and their logs live where the postgres user can write.
dir="$SNOWFLAKE_RUN_DIR/tap"
$SUDO rm -rf "$dir"
$SUDO install -d -o postgres -g postgres -m 0755 "$SNOWFLAKE_RUN_DIR" "$dir"
$SUDO cp -r "$REPO_ROOT/pg_test/tap/." "$dir/"
$SUDO chown -R postgres:postgres "$dir"
out="$(mktemp)"
rc=0
as_postgres env TESTDIR="$dir" PG_REGRESS="$PG_REGRESS" SFID_FROM="$SFID_FROM" SFID_TO="$SFID_TO" \
  SFID_FAILOVER="$SFID_FAILOVER" SFID_FLEET="$SFID_FLEET" SFID_CITUS="$SFID_CITUS" $(env | grep -o '^SFID_PG[0-9]*=[^ ]*') \
  bash -c "cd '$dir' && prove -v -I '$perl_lib' -I '$dir' ${TAP_TESTS:-t/*.pl}" 2>&1 | tee "$out" || rc=$?
passed="$(grep -cE '^ok [0-9]+' "$out" || true)" failed="$(grep -cE '^not ok [0-9]+' "$out" || true)"
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi # a test died before its plan ended
if [ "$rc" -ne 0 ]; then
  for f in "$dir"/tmp_check/log/*.log; do echo "--- $f"; tail -n 30 "$f"; done
fi
rm -f "$out"
echo "TAP: $passed passed, $failed failed"
[ "$rc" -eq 0 ]
