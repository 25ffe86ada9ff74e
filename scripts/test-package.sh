#!/usr/bin/env bash
# `make test-package`: the package end to end on Debian's own PostgreSQL 15, from the signed apt
# repository `make repo` builds (scripts/repo.sh: this release and the previous one), served over
# HTTP and added with signed-by as the README says (apt's lists for it kept apart from the
# machine's). A repository signed by another key is refused. The previous release's package is
# installed, a cluster created with pg_createcluster and the preload added, ids minted; then
# `apt-get install --only-upgrade`, a restart and ALTER EXTENSION UPDATE, and the new ids must lie
# above the old. The pg_regress suite runs against the upgraded package, which is then purged, and
# nothing of it may be left.
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

V=15 CLUSTER=sfid_package PORT=5491 HTTP_PORT=5492
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
work="" cluster_created=no package_installed=no installed_server=no before="" http_pid=""
cleanup() {
  if [ -n "$http_pid" ]; then kill "$http_pid" 2>/dev/null || true; fi
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
current="$(current_release)" previous="$(previous_release)"
PG_VERSIONS="$V" bash "$REPO_ROOT/scripts/repo.sh"

# The repository as a user adds it (README, "From an apt repository"), served over HTTP, with the
# key for signed-by; apt's lists for it are kept apart from the machine's own.
log "serving target/repo on 127.0.0.1:$HTTP_PORT"
python3 -m http.server --bind 127.0.0.1 "$HTTP_PORT" --directory "$REPO_ROOT/target/repo" >"$work/http.log" 2>&1 &
http_pid=$!
for _ in $(seq 50); do curl -fsS -o /dev/null "http://127.0.0.1:$HTTP_PORT/dists/bookworm/InRelease" 2>/dev/null && break; sleep 0.1; done
install -m 0644 "$REPO_ROOT/target/repo/snowflake-id-archive-keyring.gpg" "$work/keyring.gpg"
mkdir -p "$work/lists/partial" "$work/sources.d"
apt_private=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts="$work/sources.d" -o Dir::State::Lists="$work/lists")
apt_repo() { # apt-get with only the test's repository, signed-by KEYRING
  local keyring="$1"; shift
  echo "deb [signed-by=$keyring] http://127.0.0.1:$HTTP_PORT bookworm main" >"$work/sources.list"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${apt_private[@]}" "$@"
}
# A repository signed by another key than the one given is refused.
other="$work/other-gnupg" && install -d -m 0700 "$other"
GNUPGHOME="$other" gpg --batch --quiet --passphrase '' --quick-generate-key "not the repository's key <nobody@invalid>" ed25519 sign 1d 2>/dev/null
GNUPGHOME="$other" gpg --batch --export >"$work/other.gpg" && chmod 0644 "$work/other.gpg"
refused=0
apt_repo "$work/other.gpg" update -qq >"$work/apt-other.log" 2>&1 || refused=1
check "apt refuses the repository with a key that did not sign it" "1 yes" \
  "$refused $(grep -qE "NO_PUBKEY|not signed|signature" "$work/apt-other.log" && echo yes || echo no)"
rm -rf "$work/lists" && mkdir -p "$work/lists/partial"
apt_repo "$work/keyring.gpg" update -qq >/dev/null
check "the repository offers $previous and $current" "$previous $current" \
  "$(apt-cache "${apt_private[@]}" madison "$name" | awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | sort -V | paste -sd' ')"

log "installing $name $previous from the repository"
package_installed=yes
apt_repo "$work/keyring.gpg" install -y -qq "$name=$previous" >/dev/null
check "the package installs, depending on postgresql-$V and the libraries it links, recommending libpq5" \
  "install ok installed|postgresql-$V|yes|libpq5|$previous" \
  "$(dpkg-query -W -f='${Status}|${Depends}|${Recommends}|${Version}' "$name" | awk -F'|' '{ split($2, d, ", "); print $1 "|" d[1] "|" ($2 ~ /libc6 \(>= [0-9.]+\)/ ? "yes" : "no") "|" $3 "|" $4 }')"
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

psql_c() { as_postgres psql -X -A -t -v ON_ERROR_STOP=1 -h "$sock" -p "$PORT" -d "$1" -c "$2"; }
psql_c postgres "CREATE DATABASE sfid_upgrade" >/dev/null
psql_c sfid_upgrade "CREATE EXTENSION snowflake_id; CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(1), n int); INSERT INTO t (n) SELECT generate_series(1, 1000)" >/dev/null
old_max="$(psql_c sfid_upgrade "SELECT max(id) FROM t")"
check "the $previous extension mints" "$previous|1000" "$(psql_c sfid_upgrade "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'")|$(psql_c sfid_upgrade "SELECT count(*) FROM t")"

log "upgrading to $current: apt-get install --only-upgrade, a restart, ALTER EXTENSION UPDATE"
apt_repo "$work/keyring.gpg" install -y -qq --only-upgrade "$name" >/dev/null
check "apt-get install --only-upgrade moves the package to $current" "install ok installed $current" \
  "$(dpkg-query -W -f='${Status} ${Version}' "$name")"
$SUDO pg_ctlcluster "$V" "$CLUSTER" restart
# Between the restart and ALTER EXTENSION UPDATE the new library serves the old SQL definitions.
psql_c sfid_upgrade "INSERT INTO t (n) SELECT generate_series(1001, 1500)" >/dev/null
check "restarted on the $current library, the $previous extension still mints" "$previous|t" \
  "$(psql_c sfid_upgrade "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'")|$(psql_c sfid_upgrade "SELECT count(*) = 500 AND min(id) > $old_max FROM t WHERE n > 1000")"
psql_c sfid_upgrade "ALTER EXTENSION snowflake_id UPDATE" >/dev/null
psql_c sfid_upgrade "INSERT INTO t (n) SELECT generate_series(1501, 2000)" >/dev/null
check "after the update the extension is $current, and its new ids lie above the old ones, on shard 1" "$current|t|t" \
  "$(psql_c sfid_upgrade "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'")|$(psql_c sfid_upgrade "SELECT min(id) > $old_max FROM t WHERE n > 1000")|$(psql_c sfid_upgrade "SELECT bool_and(snowflake_shard(id) = 1) FROM t")"

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
