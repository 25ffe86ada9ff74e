#!/usr/bin/env bash
# `make package`: a Debian package for each PostgreSQL major, from `cargo pgrx package`:
#
#   target/package/postgresql-NN-snowflake-id_VERSION_ARCH.deb     (NN = 14 ... 18)
#
# - the name postgresql-NN-snowflake-id, Depends on postgresql-NN, as PGDG names extensions, and
#   on the libraries it links (dpkg-shlibdeps); Recommends libpq5, which the fleet check loads;
# - the files where Debian's and PGDG's PostgreSQL look for them: /usr/lib/postgresql/NN/lib and
#   /usr/share/postgresql/NN/extension;
# - the version from Cargo.toml.
#
# Each major is built against Debian's postgresql-server-dev-NN when it is installed (15 on
# Debian 12), else against the headers of the private tree scripts/setup.sh unpacks from the
# PyPI wheel: the server ABI is stable within a major, and the files are laid out in the PGDG
# paths either way. A release build by default; PACKAGE_DEBUG=1 builds a debug one, faster.
#
#   make package                        # every major
#   PG_VERSIONS=15 make package         # one
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VERSIONS="${PG_VERSIONS:-14 15 16 17 18}"
PG_VERSIONS="$VERSIONS" bash "$REPO_ROOT/scripts/setup.sh"
cd "$REPO_ROOT"
export CARGO_PGRX_DISABLE_GC_SECTIONS_WORKAROUND=1
version="$(current_release)"
arch="$(dpkg --print-architecture)"
out="$REPO_ROOT/target/package"
mkdir -p "$out"
flag=()
if [ "${PACKAGE_DEBUG:-0}" = 1 ]; then flag+=(--debug); fi

for v in $VERSIONS; do
  pgc="$(pg_bin "$v")/pg_config"
  if [ -x "/usr/lib/postgresql/$v/bin/pg_config" ] && dpkg-query -W -f='${Status}' "postgresql-server-dev-$v" 2>/dev/null | grep -q "ok installed"; then
    pgc="/usr/lib/postgresql/$v/bin/pg_config"
  fi
  name="postgresql-$v-snowflake-id"
  log "packaging $name $version against $pgc"
  stage="$out/stage-pg$v" root="$out/root-pg$v"
  rm -rf "$stage" "$root"
  cargo pgrx package "${flag[@]}" --no-default-features --features "pg$v" --pg-config "$pgc" --out-dir "$stage" >/dev/null
  # The staged tree mirrors that pg_config's paths; the package uses PGDG's.
  lib="$root/usr/lib/postgresql/$v/lib" ext="$root/usr/share/postgresql/$v/extension" doc="$root/usr/share/doc/$name"
  install -d "$lib" "$ext" "$doc" "$root/DEBIAN"
  install -m 0644 "$stage$("$pgc" --pkglibdir)/snowflake_id.so" "$lib/"
  install -m 0644 "$stage$("$pgc" --sharedir)"/extension/snowflake_id* "$ext/"
  install -m 0644 README.md "$doc/README.md"
  printf 'snowflake_id %s\nLicense: PostgreSQL\n' "$version" >"$doc/copyright"
  # The shared libraries it links (libc6, libgcc-s1), with the versions its symbols need. libpq is
  # not linked: the fleet check loads it when it runs, hence Recommends.
  shlib="$(mktemp -d)" && mkdir "$shlib/debian" && printf 'Source: %s\n\nPackage: %s\nArchitecture: any\n' "$name" "$name" >"$shlib/debian/control"
  libdeps="$(cd "$shlib" && { dpkg-shlibdeps -O -e "$lib/snowflake_id.so" 2>/dev/null || true; } | sed -n 's/^shlibs:Depends=//p')"
  rm -rf "$shlib"
  [ -n "$libdeps" ] || die "dpkg-shlibdeps found no library dependencies of $lib/snowflake_id.so"
  cat >"$root/DEBIAN/control" <<EOF
Package: $name
Version: $version
Architecture: $arch
Maintainer: snowflake_id maintainers <maintainers@users.noreply.a-seed-5781a37b.example>
Depends: postgresql-$v, $libdeps
Recommends: libpq5
Section: database
Priority: optional
Installed-Size: $(du -ks "$root/usr" | cut -f1)
Description: coordinator-free, k-sorted 64-bit ids and UUIDv7 for PostgreSQL $v
 snowflake_id mints primary keys on many servers at once with no coordinator:
 snowflake ids (time, shard, sequence in 63 bits) and RFC 9562 UUIDv7s that are
 monotonic across every backend, with keyed public forms, a fleet check and
 converters for existing bigserial and identity columns. The library must be in
 shared_preload_libraries.
EOF
  (cd "$root" && find usr -type f -exec md5sum {} +) >"$root/DEBIAN/md5sums"
  deb="$out/${name}_${version}_${arch}.deb"
  dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
  rm -rf "$stage" "$root"
  log "built $(basename "$deb") ($(du -h "$deb" | cut -f1))"
done
