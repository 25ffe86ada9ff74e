#!/usr/bin/env bash
# `make test-package`: the package end to end on Debian's own PostgreSQL 15. Builds
# postgresql-15-snowflake-id (scripts/package.sh), installs it with apt-get, creates a cluster
# with pg_createcluster, adds the preload, runs the pg_regress suite against that server, then
# removes the package and checks that nothing of it is left.
#
# It leaves the machine as it found it, and refuses rather than guess:
# - another run of it under way: refused (a lock directory, /run/snowflake-id-test-package);
# - postgresql-15-snowflake-id already installed (in any state), or snowflake_id files in Debian's
#   PostgreSQL 15 paths that no package owns (a source install), or a cluster of 15 configured
#   with snowflake_id: refused, since the test installs the package over those paths and ends by
#   removing it;
# - Debian's postgresql-15 installed: used as it is, never removed, and no cluster of it touched
#   but the test's own (15/sfid_package, which must not exist yet);
# - postgresql-15 in any other dpkg state, or not installed but with /etc/postgresql/15 or
#   /var/lib/postgresql/15 left behind: refused;
# - not installed at all: installed for the test, its default cluster dropped, and at the end
#   every package that installation added purged again (one that was only left as configuration
#   files before is removed back to that state). What the installation upgraded or created
#   outside dpkg (the postgres user, apt's lists) stays.
# The test's cluster listens on no TCP port, only on a Unix socket in a private directory, and
# authenticates by peer: pg_regress runs as postgres.
# Ends with "package: N passed, N failed".
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

V=15 CLUSTER=sfid_package PORT=5491
PASSED=0 FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
fail() { FAILED=$((FAILED + 1)); echo "not ok - $*"; }
check() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected [$2], got [$3]"; fi; }
# A package's dpkg status: installed, not-installed, config-files, half-configured, ...
dpkg_state() {
  local st
  st="$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)"
  echo "${st:-not-installed}"
}
# Every package dpkg knows of, with its status, sorted by name.
package_states() { dpkg-query -W -f='${Package} ${db:Status-Status}\n' | sort; }

lockdir=/run/snowflake-id-test-package
$SUDO mkdir "$lockdir" 2>/dev/null || die "another make test-package is running (or one was killed: remove $lockdir)"
work="" cluster_created=no package_installed=no installed_server=no before=""
cleanup() {
  if [ "$cluster_created" = yes ]; then
    $SUDO pg_dropcluster --stop "$V" "$CLUSTER" 2>/dev/null || true
    # The configuration only once the data is gone: never orphan a data directory.
    if [ ! -e "/var/lib/postgresql/$V/$CLUSTER" ]; then $SUDO rm -rf "/etc/postgresql/$V/$CLUSTER"; fi
  fi
  if [ "$package_installed" = yes ]; then $SUDO apt-get purge -y -qq "$name" >/dev/null 2>&1 || true; fi
  if [ "$installed_server" = yes ]; then
    # The clusters the installation created (there were none before), then what it installed,
    # however far it got.
    for c in /etc/postgresql/"$V"/*/; do
      if [ -d "$c" ]; then $SUDO pg_dropcluster --stop "$V" "$(basename "$c")" 2>/dev/null || true; fi
    done
    local purge=() remove=()
    while read -r pkg was; do
      if [ "$was" = config-files ]; then remove+=("$pkg"); else purge+=("$pkg"); fi
    done < <(awk 'NR == FNR { was[$1] = $2; next }
                  { w = ($1 in was) ? was[$1] : "not-installed" }
                  $2 !~ /^(not-installed|config-files)$/ && w != "installed" { print $1, w }' "$before" <(package_states))
    if [ ${#purge[@]} -gt 0 ]; then DEBIAN_FRONTEND=noninteractive $SUDO apt-get purge -y -qq "${purge[@]}" >/dev/null 2>&1 || true; fi
    if [ ${#remove[@]} -gt 0 ]; then DEBIAN_FRONTEND=noninteractive $SUDO apt-get remove -y -qq "${remove[@]}" >/dev/null 2>&1 || true; fi
    $SUDO rmdir "/etc/postgresql/$V" "/var/lib/postgresql/$V" 2>/dev/null || true
  fi
  if [ -n "$work" ]; then $SUDO rm -rf "$work"; fi
  $SUDO rmdir "$lockdir"
}
trap cleanup EXIT

name="postgresql-$V-snowflake-id"
[ "$(dpkg_state "$name")" = not-installed ] \
  || die "$name is already on this machine ($(dpkg_state "$name")); this test installs and removes it. Remove it first, or run the test elsewhere."
for f in "/usr/lib/postgresql/$V/lib/snowflake_id.so" "/usr/share/postgresql/$V/extension/snowflake_id.control"; do
  [ ! -e "$f" ] || die "$f exists and no package of this test installed it (a source install?); the test would replace it, then remove it"
done
if [ -d "/etc/postgresql/$V" ] && grep -rqs snowflake_id "/etc/postgresql/$V"; then
  die "a cluster in /etc/postgresql/$V is configured with snowflake_id ($(grep -rls snowflake_id "/etc/postgresql/$V" | head -n 1)); the test would install over its library, then remove it"
fi

case "$(dpkg_state "postgresql-$V")" in
  installed)
    if [ -e "/etc/postgresql/$V/$CLUSTER" ] || [ -e "/var/lib/postgresql/$V/$CLUSTER" ]; then
      die "a cluster $V/$CLUSTER exists already; this test creates and drops it. If it is a leftover of this test: pg_dropcluster --stop $V $CLUSTER"
    fi
    ;;
  not-installed | config-files)
    for d in "/etc/postgresql/$V" "/var/lib/postgresql/$V"; do
      [ ! -e "$d" ] || die "postgresql-$V is not installed but $d exists (clusters of an earlier installation?); refusing to install over it"
    done
    ;;
  *) die "postgresql-$V is in dpkg state $(dpkg_state "postgresql-$V"); this test needs it installed or absent" ;;
esac

work="$(mktemp -d /tmp/sfid-package.XXXXXX)"
chmod 0711 "$work" # postgres may pass through to its own directories, not list or write here
sock="$work/socket" out_root="$work/regress"

if [ "$(dpkg_state "postgresql-$V")" != installed ]; then
  log "installing Debian's postgresql-$V for the test (it is purged again at the end)"
  before="$work/packages.before"
  package_states >"$before"
  installed_server=yes
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "postgresql-$V" >/dev/null
  # Its default cluster is not wanted; it did not exist before.
  for c in /etc/postgresql/"$V"/*/; do
    if [ -d "$c" ]; then $SUDO pg_dropcluster --stop "$V" "$(basename "$c")"; fi
  done
fi
PG_VERSIONS="$V" bash "$REPO_ROOT/scripts/package.sh"
deb="$REPO_ROOT/target/package/${name}_$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO_ROOT/Cargo.toml" | head -n 1)_$(dpkg --print-architecture).deb"
[ -f "$deb" ] || die "package.sh did not build $deb"

log "installing $(basename "$deb") with apt-get"
package_installed=yes
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$deb" >/dev/null
check "the package installs, depending on postgresql-$V and the libraries it links, recommending libpq5" \
  "install ok installed|postgresql-$V|yes|libpq5" \
  "$(dpkg-query -W -f='${Status}|${Depends}|${Recommends}' "$name" | awk -F'|' '{ split($2, d, ", "); print $1 "|" d[1] "|" ($2 ~ /libc6 \(>= [0-9.]+\)/ ? "yes" : "no") "|" $3 }')"
check "its files are in Debian's paths (pg_config's pkglibdir and sharedir)" "yes yes" \
  "$([ -f "$(/usr/lib/postgresql/$V/bin/pg_config --pkglibdir)/snowflake_id.so" ] && echo yes || echo no) $([ -f "$(/usr/lib/postgresql/$V/bin/pg_config --sharedir)/extension/snowflake_id.control" ] && echo yes || echo no)"

log "a cluster of Debian's PostgreSQL $V with the preload (pg_createcluster)"
$SUDO install -d -o postgres -g postgres -m 0700 "$sock" "$out_root"
cluster_created=yes
$SUDO pg_createcluster -s "$sock" -p "$PORT" "$V" "$CLUSTER" -- --auth-local=peer --auth-host=scram-sha-256 -E UTF8 --locale=C >/dev/null
# Written as postgres, who owns the directory (root never writes a path postgres controls).
printf '%s\n' "shared_preload_libraries = 'snowflake_id'" "listen_addresses = ''" "timezone = 'UTC'" "max_connections = 50" "fsync = off" \
  | as_postgres tee "/etc/postgresql/$V/$CLUSTER/conf.d/snowflake_id.conf" >/dev/null
data="/var/lib/postgresql/$V/$CLUSTER"
# The public-id tests rewrite the key file; it must exist with the owner's mode first.
as_postgres install -m 0600 /dev/null "$data/snowflake_id.keys"
$SUDO pg_ctlcluster "$V" "$CLUSTER" start
check "the server runs with the library preloaded, on no TCP port" "snowflake_id|" \
  "$(as_postgres psql -X -A -t -h "$sock" -p "$PORT" -d postgres -c "SHOW shared_preload_libraries" -c "SHOW listen_addresses" | paste -sd'|')"

regress_bin="/usr/lib/postgresql/$V/lib/pgxs/src/test/regress/pg_regress"
for t in $REGRESS_TESTS; do
  out="$out_root/$t"
  if REGRESS_AS_POSTGRES=yes pg_regress_suite "$V" "/usr/lib/postgresql/$V/bin" "$regress_bin" "$sock" "$PORT" "$out" "$t"; then
    pass "pg_regress $t against the installed package"
  else
    as_postgres cat "$out/pg_regress.log" || true
    as_postgres head -n 100 "$out/regression.diffs" 2>/dev/null || true
    fail "pg_regress $t against the installed package"
  fi
done

$SUDO pg_dropcluster --stop "$V" "$CLUSTER"
if [ ! -e "/var/lib/postgresql/$V/$CLUSTER" ]; then $SUDO rm -rf "/etc/postgresql/$V/$CLUSTER"; fi
cluster_created=no
check "the test's cluster is gone, configuration and data" "0" \
  "$(find "/etc/postgresql/$V" "/var/lib/postgresql/$V" -maxdepth 1 -name "$CLUSTER" 2>/dev/null | wc -l)"
$SUDO apt-get purge -y -qq "$name" >/dev/null
package_installed=no
check "purged: the package and every file of it are gone" "not-installed 0" \
  "$(dpkg_state "$name") $(find "/usr/lib/postgresql/$V/lib" "/usr/share/postgresql/$V/extension" -name 'snowflake_id*' | wc -l)"

echo "package: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
