#!/usr/bin/env bash
# Multi-node tests with PostgreSQL's own TAP framework (PostgreSQL::Test::Cluster, shipped
# with Debian's postgresql-server-dev-15): pg_upgrade and dump/restore between majors, the
# recorded id space, failover. Expects snowflake_id installed into every major named below.
#
#   pg_test/tap.sh                      # SFID_FROM="15 17" SFID_TO=18 SFID_FAILOVER="15 18" SFID_FLEET=18
#   TAP_TESTS=t/004_fleet.pl pg_test/tap.sh   # one test
#   SFID_FLEET="14 16" TAP_TESTS="t/004_*.pl t/006_*.pl" pg_test/tap.sh   # on other majors
#   TAP_JOBS=2 pg_test/tap.sh           # two tests at a time (each prints its output when it ends)
#
# Prints prove's summary, the time each test took ("time: ..." lines) and "TAP: N passed, N
# failed"; exits non-zero on any failure.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

export SFID_FROM="${SFID_FROM:-15 17}" SFID_TO="${SFID_TO:-18}" SFID_FAILOVER="${SFID_FAILOVER:-15 18}" SFID_FLEET="${SFID_FLEET:-18}"
# The portable edition's majors (t/007), and those it runs under pg_tle on (t/008).
export SFID_PORTABLE="${SFID_PORTABLE:-14 15 16 17 18}" SFID_TLE="${SFID_TLE:-15 18}"
# The majors pg_partman partitions a snowflake-keyed table on (t/010).
export SFID_PARTMAN="${SFID_PARTMAN:-15 18}"
# The private trees of scripts/setup.sh throughout, each with the extension built for its major.
for v in $SFID_FROM $SFID_TO $SFID_FAILOVER $SFID_FLEET $SFID_PORTABLE $SFID_TLE $SFID_PARTMAN; do
  export "SFID_PG$v=$(pg_prefix "$v")"
done
# Citus 14.0.1 for t/005_citus.pl, built into the tree of each fleet major it supports (16+); the
# test skips without the tarball. With the tarball present, a failed build fails the test instead
# of skipping it.
export SFID_CITUS=no SFID_CITUS_MAJORS=""
for v in $SFID_FLEET; do
  if [ "$v" -ge 16 ]; then SFID_CITUS_MAJORS="${SFID_CITUS_MAJORS:+$SFID_CITUS_MAJORS }$v"; fi
done
if [ -n "$SFID_CITUS_MAJORS" ] && citus_tarball >/dev/null; then
  SFID_CITUS=yes
  for v in $SFID_CITUS_MAJORS; do build_citus "$(pg_prefix "$v")" || SFID_CITUS=build-failed; done
fi
# pg_tle for t/008_portable_tle.pl, built into each of its majors' trees; as with Citus, the test
# skips without the tarball and fails when it is there but does not build.
export SFID_PG_TLE=no
if pg_tle_tarball >/dev/null; then
  SFID_PG_TLE=yes
  for v in $SFID_TLE; do build_pg_tle "$(pg_prefix "$v")" || SFID_PG_TLE=build-failed; done
fi
# pg_partman 5.1 for t/010_partman.pl, built into each of its majors' trees, the same way.
export SFID_PG_PARTMAN=no
if pg_partman_tarball >/dev/null; then
  SFID_PG_PARTMAN=yes
  for v in $SFID_PARTMAN; do build_pg_partman "$(pg_prefix "$v")" || SFID_PG_PARTMAN=build-failed; done
fi
perl_lib=/usr/lib/postgresql/15/lib/pgxs/src/test/perl
export PG_REGRESS="$(pg_prefix 15)/lib/pgxs/src/test/regress/pg_regress"

# The tests and their logs live where the postgres user can write.
dir="$SNOWFLAKE_RUN_DIR/tap"
$SUDO rm -rf "$dir"
$SUDO install -d -o postgres -g postgres -m 0755 "$SNOWFLAKE_RUN_DIR" "$dir"
$SUDO cp -r "$REPO_ROOT/pg_test/tap/." "$dir/"
$SUDO cp -r "$REPO_ROOT/sql/portable" "$dir/portable"
$SUDO chown -R postgres:postgres "$dir"
out="$(mktemp)"
rc=0
as_postgres env TESTDIR="$dir" PG_REGRESS="$PG_REGRESS" SFID_FROM="$SFID_FROM" SFID_TO="$SFID_TO" \
  SFID_FAILOVER="$SFID_FAILOVER" SFID_FLEET="$SFID_FLEET" SFID_CITUS="$SFID_CITUS" SFID_CITUS_MAJORS="$SFID_CITUS_MAJORS" SFID_PORTABLE="$SFID_PORTABLE" SFID_TLE="$SFID_TLE" SFID_PG_TLE="$SFID_PG_TLE" SFID_PARTMAN="$SFID_PARTMAN" SFID_PG_PARTMAN="$SFID_PG_PARTMAN" $(env | grep -o '^SFID_PG[0-9]*=[^ ]*') \
  bash -c "cd '$dir' && prove -v -j '${TAP_JOBS:-1}' -I '$perl_lib' -I '$dir' ${TAP_TESTS:-t/*.pl}" 2>&1 | tee "$out" || rc=$?
passed="$(grep -cE '^ok [0-9]+' "$out" || true)" failed="$(grep -cE '^not ok [0-9]+' "$out" || true)"
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi # a test died before its plan ended
if [ "$rc" -ne 0 ]; then
  for f in "$dir"/tmp_check/log/*.log; do echo "--- $f"; tail -n 30 "$f"; done
fi
sed -n 's/^# \(time: .*\)/\1/p' "$out"
rm -f "$out"
echo "TAP: $passed passed, $failed failed"
[ "$rc" -eq 0 ]
