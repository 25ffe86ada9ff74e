#!/usr/bin/env bash
# `make extension-image`: snowflake_id for PostgreSQL 18 as an OCI image for CloudNativePG's
# image volume extensions (docs/kubernetes.md):
#
#   target/image/snowflake-id      an OCI image layout, tagged with the version in Cargo.toml
#
# The image is built from scratch and holds nothing but the extension's files, at its root:
#
#   lib/snowflake_id.so
#   share/extension/snowflake_id.control, snowflake_id--*.sql
#
# which is the layout CloudNativePG expects: it mounts the image at /extensions/NAME and appends
# /extensions/NAME/share to extension_control_path and /extensions/NAME/lib to
# dynamic_library_path. No shell, no libc: the library runs inside the PostgreSQL image.
#
# The files are those of the Debian package postgresql-18-snowflake-id (scripts/package.sh, a
# release build on Debian 12): the package and the image come from one build. Built with umoci
# (installed from Debian if missing); as root or, with umoci's --rootless, as any user.
# IMAGE_SOURCE sets the org.opencontainers.image.source label (default: Cargo.toml's
# repository, else the git remote origin; without either the label is left out).
# Push it with skopeo: skopeo copy oci:target/image/snowflake-id:VERSION docker://REGISTRY/...
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

V=18
cd "$REPO_ROOT"
version="$(current_release)"
description="$(sed -n 's/^description = "\(.*\)"/\1/p' Cargo.toml | head -n 1)"
license="$(sed -n 's/^license = "\(.*\)"/\1/p' Cargo.toml | head -n 1)"
arch="$(dpkg --print-architecture)"
deb="$REPO_ROOT/target/package/postgresql-$V-snowflake-id_${version}_$arch.deb"
img="$REPO_ROOT/target/image/snowflake-id"

need_debian_packages umoci
rootless=()
if [ "$(id -u)" -ne 0 ]; then rootless=(--rootless); fi

PG_VERSIONS="$V" bash "$REPO_ROOT/scripts/package.sh"
[ -f "$deb" ] || die "package.sh did not build $deb"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$deb" "$work/deb"
lib="$work/deb/usr/lib/postgresql/$V/lib" ext="$work/deb/usr/share/postgresql/$V/extension"
[ -f "$lib/snowflake_id.so" ] && [ -f "$ext/snowflake_id.control" ] && [ -f "$ext/snowflake_id--$version.sql" ] \
  || die "$(basename "$deb") lacks snowflake_id.so, snowflake_id.control or snowflake_id--$version.sql"

# The OCI architecture of the Debian one (they differ in a few names).
case "$arch" in
  amd64 | arm64 | s390x | riscv64) oci_arch="$arch" ;;
  ppc64el) oci_arch=ppc64le ;;
  i386) oci_arch=386 ;;
  armhf) oci_arch=arm ;;
  *) die "no OCI architecture known for $arch" ;;
esac
# The time of the commit, for the files and the image's dates: the same files make the same layer.
epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
created="$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)"
revision="$(git rev-parse HEAD 2>/dev/null || true)"
source_url="${IMAGE_SOURCE:-$(sed -n 's/^repository = "\(.*\)"/\1/p' Cargo.toml | head -n 1)}"
if [ -z "$source_url" ]; then
  # Never a remote's credentials (https://user:token@host/...).
  # Only a web address: a clone of a local checkout has a path for its origin.
  source_url="$(git remote get-url origin 2>/dev/null | sed -E 's#^([a-z+]+://)[^/@]*@#\1#' | grep -E '^https?://' || true)"
fi

log "building the OCI image snowflake-id:$version (PostgreSQL $V, $oci_arch) from $(basename "$deb")"
rm -rf "$img"
mkdir -p "$(dirname "$img")"
umoci init --layout "$img"
umoci new --image "$img:$version"
bundle="$work/bundle"
umoci unpack "${rootless[@]}" --image "$img:$version" "$bundle" >"$work/umoci.log" 2>&1 \
  || { cat "$work/umoci.log" >&2; die "umoci unpack failed"; }
rootfs="$bundle/rootfs"
install -d -m 0755 "$rootfs/lib" "$rootfs/share" "$rootfs/share/extension"
install -m 0644 "$lib/snowflake_id.so" "$rootfs/lib/"
install -m 0644 "$ext"/snowflake_id* "$rootfs/share/extension/"
find "$rootfs" -exec touch -h -d "@$epoch" {} +
umoci repack --image "$img:$version" --history.created "$created" \
  --history.created_by "scripts/image.sh: lib/ and share/extension/ of $(basename "$deb")" "$bundle"

labels=(
  "org.opencontainers.image.title=snowflake_id"
  "org.opencontainers.image.version=$version"
  "org.opencontainers.image.licenses=$license"
  "org.opencontainers.image.description=$description (PostgreSQL $V extension for CloudNativePG image volumes)"
  "org.opencontainers.image.created=$created"
)
if [ -n "$revision" ]; then labels+=("org.opencontainers.image.revision=$revision"); fi
if [ -n "$source_url" ]; then
  labels+=("org.opencontainers.image.source=$source_url")
else
  log "no source URL (IMAGE_SOURCE, Cargo.toml repository, git remote origin): leaving out org.opencontainers.image.source"
fi
config=(--created "$created" --architecture "$oci_arch" --os linux --no-history)
for l in "${labels[@]}"; do config+=(--config.label "$l" --manifest.annotation "$l"); done
umoci config --image "$img:$version" "${config[@]}"
umoci gc --layout "$img"
chmod -R a+rX "$img" # umoci writes index.json for its owner only

digest="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$img/index.json")"
log "built $img:$version ($(du -sh "$img" | cut -f1), manifest $digest)"
log "push it: skopeo copy oci:target/image/snowflake-id:$version docker://REGISTRY/snowflake-id:$version"
