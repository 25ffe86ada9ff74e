#!/usr/bin/env bash
# `make test-package`: the package end to end on Debian's own PostgreSQL 15. Builds
# postgresql-15-snowflake-id (scripts/package.sh), installs it with apt-get, creates a cluster
# with pg_createcluster, adds the preload, runs the pg_regress suite against that server, then
# removes the package and checks that nothing of it is left.
#
# It leaves the machine as it found it, and refuses rather than guess:
# - postgresql-15-snowflake-id already installed (in any state): refused, since the test ends by
#   removing it;
# - Debian's postgresql-15 installed: used as it is, never removed, and no cluster of it touched
#   but the test's own (15/sfid_package, which must not exist yet);
# - postgresql-15 in any other dpkg state, or not installed but with /etc/postgresql/15 or
#   /var/lib/postgresql/15 left behind: refused;
# - not installed at all: installed for the test, its default cluster dropped, and at the end
#   every package that installation added purged again.
# The test's cluster listens on no TCP port, only on a Unix socket in a private directory, and
# authenticates by peer: pg_regress runs as postgres.
# Ends with "package: N passed, N failed".
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

V=15 CLUSTER=sfid_package PORT=5491
PASSED=0 FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
fail() { FAILED=$((FAILED + 1)); echo "not ok - $*"; }
check() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected [$2], got [$3]"; fi; }
# The two-letter dpkg state of a package ("ii" installed, "un" or nothing: not installed).
dpkg_state() { dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null | tr -d ' ' || true; }
installed_packages() { dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" { print $2 }' | sort; }

name="postgresql-$V-snowflake-id"
case "$(dpkg_state "$name")" in
  "" | un) ;;
  *) die "$name is already on this machine ($(dpkg_state "$name")); this test installs and removes it. Remove it first, or run the test elsewhere." ;;
esac

installed_server=no added_packages=()
case "$(dpkg_state "postgresql-$V")" in
  ii)
    if [ -e "/etc/postgresql/$V/$CLUSTER" ] || [ -e "/var/lib/postgresql/$V/$CLUSTER" ]; then
      die "a cluster $V/$CLUSTER exists already; this test creates and drops it. If it is a leftover of this test: pg_dropcluster --stop $V $CLUSTER"
    fi
    ;;
  "" | un)
    for d in "/etc/postgresql/$V" "/var/lib/postgresql/$V"; do
      [ ! -e "$d" ] || die "postgresql-$V is not installed but $d exists (clusters of an earlier installation?); refusing to install over it"
    done
    ;;
  *) die "postgresql-$V is in dpkg state $(dpkg_state "postgresql-$V"); this test needs it installed or absent" ;;
esac

work="$(mktemp -d /tmp/sfid-package.XXXXXX)"
chmod 0711 "$work" # postgres may pass through to its own directories, not list or write here
sock="$work/socket" out_root="$work/regress"
cluster_created=no package_installed=no
cleanup() {
  if [ "$cluster_created" = yes ]; then
    $SUDO pg_dropcluster --stop "$V" "$CLUSTER" 2>/dev/null || true
    $SUDO rm -rf "/etc/postgresql/$V/$CLUSTER"
  fi
  if [ "$package_installed" = yes ]; then $SUDO apt-get purge -y -qq "$name" >/dev/null 2>&1 || true; fi
  if [ "$installed_server" = yes ]; then
    # The clusters the installation created (there were none before), then what it installed.
    for c in /etc/postgresql/"$V"/*/; do
      if [ -d "$c" ]; then $SUDO pg_dropcluster --stop "$V" "$(basename "$c")" 2>/dev/null || true; fi
    done
    if [ ${#added_packages[@]} -gt 0 ]; then
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get purge -y -qq "${added_packages[@]}" >/dev/null 2>&1 || true
    fi
    $SUDO rmdir "/etc/postgresql/$V" "/var/lib/postgresql/$V" 2>/dev/null || true
  fi
  $SUDO rm -rf "$work"
}
trap cleanup EXIT

if [ "$(dpkg_state "postgresql-$V")" != ii ]; then
  log "installing Debian's postgresql-$V for the test (it is purged again at the end)"
  before="$work/packages.before"
  installed_packages >"$before"
  installed_server=yes
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "postgresql-$V" >/dev/null
  mapfile -t added_packages < <(installed_packages | comm -13 "$before" -)
  # Its default cluster is not wanted; it did not exist before.
  for c in /etc/postgresql/"$V"/*/; do
    if [ -d "$c" ]; then $SUDO pg_dropcluster --stop "$V" "$(basename "$c")"; fi
  done
fi
PG_VERSIONS="$V" bash "$REPO_ROOT/scripts/package.sh"
deb="$(ls "$REPO_ROOT"/target/package/"$name"_*.deb | head -n 1)"

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
printf '%s\n' "shared_preload_libraries = 'snowflake_id'" "listen_addresses = ''" "timezone = 'UTC'" "max_connections = 50" "fsync = off" \
  | $SUDO tee "/etc/postgresql/$V/$CLUSTER/conf.d/snowflake_id.conf" >/dev/null
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
    cat "$out/pg_regress.log"
    if [ -f "$out/regression.diffs" ]; then head -n 100 "$out/regression.diffs"; fi
    fail "pg_regress $t against the installed package"
  fi
done

$SUDO pg_dropcluster --stop "$V" "$CLUSTER"
$SUDO rm -rf "/etc/postgresql/$V/$CLUSTER"
cluster_created=no
check "the test's cluster is gone, configuration and data" "0" \
  "$(find "/etc/postgresql/$V" "/var/lib/postgresql/$V" -maxdepth 1 -name "$CLUSTER" 2>/dev/null | wc -l)"
$SUDO apt-get purge -y -qq "$name" >/dev/null
package_installed=no
check "purged: the package and every file of it are gone" "not-installed 0" \
  "$(case "$(dpkg_state "$name")" in ii) echo installed ;; *) echo not-installed ;; esac) $(find "/usr/lib/postgresql/$V/lib" "/usr/share/postgresql/$V/extension" -name 'snowflake_id*' | wc -l)"

echo "package: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
