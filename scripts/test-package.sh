#!/usr/bin/env bash
# `make test-package`: the package end to end on Debian's own PostgreSQL 15. Builds
# postgresql-15-snowflake-id (scripts/package.sh), installs it with apt-get, creates a cluster
# with pg_createcluster, adds the preload, runs the pg_regress suite against that server, then
# removes the package and checks that nothing of it is left.
#
# It installs Debian's postgresql-15 if it is missing, and then removes that too: the machine is
# left as it was found. A cluster it did not create is never touched.
# Ends with "package: N passed, N failed".
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

V=15 CLUSTER=sfid_package PORT=5491
PASSED=0 FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
fail() { FAILED=$((FAILED + 1)); echo "not ok - $*"; }
check() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected [$2], got [$3]"; fi; }

installed_server=no
if ! dpkg-query -W -f='${Status}' "postgresql-$V" 2>/dev/null | grep -q "ok installed"; then
  log "installing Debian's postgresql-$V for the test (it is removed again at the end)"
  $SUDO apt-get update -qq
  # Its default cluster is not wanted: create none (postgresql-common's createcluster.conf).
  $SUDO install -d /etc/postgresql-common
  if [ ! -e /etc/postgresql-common/createcluster.conf ]; then echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null; created_conf=yes; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "postgresql-$V" >/dev/null
  installed_server=yes
fi
PG_VERSIONS="$V" bash "$REPO_ROOT/scripts/package.sh"
deb="$(ls "$REPO_ROOT"/target/package/postgresql-$V-snowflake-id_*.deb | head -n 1)"

cleanup() {
  $SUDO pg_dropcluster --stop "$V" "$CLUSTER" 2>/dev/null || true
  $SUDO apt-get remove -y -qq "postgresql-$V-snowflake-id" >/dev/null 2>&1 || true
  if [ "$installed_server" = yes ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get purge -y -qq "postgresql-$V" >/dev/null 2>&1 || true
    if [ "${created_conf:-}" = yes ]; then $SUDO rm -f /etc/postgresql-common/createcluster.conf; fi
  fi
}
trap cleanup EXIT

log "installing $(basename "$deb") with apt-get"
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$deb" >/dev/null
check "the package installs, depending on postgresql-$V" "install ok installed|postgresql-$V" \
  "$(dpkg-query -W -f='${Status}|${Depends}' "postgresql-$V-snowflake-id" | cut -d, -f1)"
check "its files are in Debian's paths (pg_config's pkglibdir and sharedir)" "yes yes" \
  "$([ -f "$(/usr/lib/postgresql/$V/bin/pg_config --pkglibdir)/snowflake_id.so" ] && echo yes || echo no) $([ -f "$(/usr/lib/postgresql/$V/bin/pg_config --sharedir)/extension/snowflake_id.control" ] && echo yes || echo no)"

log "a cluster of Debian's PostgreSQL $V with the preload (pg_createcluster)"
$SUDO pg_dropcluster --stop "$V" "$CLUSTER" 2>/dev/null || true
$SUDO pg_createcluster -p "$PORT" "$V" "$CLUSTER" -- --auth=trust -E UTF8 --locale=C >/dev/null
sock="/var/run/postgresql"
printf '%s\n' "shared_preload_libraries = 'snowflake_id'" "timezone = 'UTC'" "max_connections = 50" "fsync = off" \
  | $SUDO tee "/etc/postgresql/$V/$CLUSTER/conf.d/snowflake_id.conf" >/dev/null
data="/var/lib/postgresql/$V/$CLUSTER"
# The public-id tests rewrite the key file; it must exist with the owner's mode first.
as_postgres install -m 0600 /dev/null "$data/snowflake_id.keys"
$SUDO pg_ctlcluster "$V" "$CLUSTER" start
check "the server runs with the library preloaded" "snowflake_id" \
  "$(as_postgres psql -X -A -t -h "$sock" -p "$PORT" -d postgres -c "SHOW shared_preload_libraries")"

$SUDO install -d -m 0777 "$SNOWFLAKE_RUN_DIR"
regress_bin="/usr/lib/postgresql/$V/lib/pgxs/src/test/regress/pg_regress"
for t in $REGRESS_TESTS; do
  out="$SNOWFLAKE_RUN_DIR/package-regress/$t"
  if pg_regress_suite "$V" "/usr/lib/postgresql/$V/bin" "$regress_bin" "$sock" "$PORT" "$out" "$t"; then
    pass "pg_regress $t against the installed package"
  else
    cat "$out/pg_regress.log"
    if [ -f "$out/regression.diffs" ]; then head -n 100 "$out/regression.diffs"; fi
    fail "pg_regress $t against the installed package"
  fi
done

$SUDO pg_dropcluster --stop "$V" "$CLUSTER"
$SUDO apt-get remove -y -qq "postgresql-$V-snowflake-id" >/dev/null
check "removed: the package and every file of it are gone" "not-installed 0" \
  "$(dpkg-query -W -f='${Status}' "postgresql-$V-snowflake-id" 2>/dev/null | grep -q "ok installed" && echo installed || echo not-installed) $(find "/usr/lib/postgresql/$V/lib" "/usr/share/postgresql/$V/extension" -name 'snowflake_id*' | wc -l)"

echo "package: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
