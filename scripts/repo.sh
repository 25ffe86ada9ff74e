#!/usr/bin/env bash
# `make repo`: a signed apt repository in target/repo/, with the postgresql-NN-snowflake-id
# packages of this release and of the previous one (so that an upgrade can be tried), for the
# majors in PG_VERSIONS (default 14-18):
#
#   target/repo/snowflake-id-archive-keyring.gpg   the public key, for signed-by= (also .asc)
#   target/repo/dists/bookworm/{InRelease,Release,Release.gpg}
#   target/repo/dists/bookworm/main/binary-ARCH/Packages{,.gz}
#   target/repo/pool/main/postgresql-NN-snowflake-id_VERSION_ARCH.deb
#
# Serve the directory from any static file host. Signed with REPO_KEY (a key id or fingerprint
# in the keyring of GNUPGHOME, or of ~/.gnupg) when given; otherwise with a throwaway key made
# once in target/repo-key/ (for tests: never publish a repository signed with it).
# This release's packages come from scripts/package.sh; the previous release's are built the same
# way from its commit (the tag vX.Y.Z, or the commit that released it) and kept in
# target/previous/VERSION-COMMIT/, so that they are built once.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VERSIONS="${PG_VERSIONS:-14 15 16 17 18}" SUITE=bookworm COMPONENT=main
cd "$REPO_ROOT"
need_debian_packages apt-utils gnupg
version="$(current_release)" previous="$(previous_release)"
arch="$(dpkg --print-architecture)"
[ -n "$previous" ] || die "CHANGELOG.md names no release before $version"
# The previous release's commit: its tag, or the commit that released it (scripts/lib.sh).
ref="$(release_commit "$previous")" \
  || die "cannot find release $previous's commit: no tag v$previous, and no commit in this clone's history released it (a shallow clone?)"
log "the previous release, $previous, is commit ${ref:0:12}"

repo="$REPO_ROOT/target/repo" pool="$REPO_ROOT/target/repo/pool/$COMPONENT"
rm -rf "$repo" && mkdir -p "$pool"

log "the $version packages (PostgreSQL ${VERSIONS// /, })"
PG_VERSIONS="$VERSIONS" bash scripts/package.sh
for v in $VERSIONS; do cp "target/package/postgresql-$v-snowflake-id_${version}_$arch.deb" "$pool/"; done

prev="$REPO_ROOT/target/previous/$previous-${ref:0:12}"
for v in $VERSIONS; do
  deb="$prev/postgresql-$v-snowflake-id_${previous}_$arch.deb"
  if [ ! -f "$deb" ]; then
    log "building the $previous package for PostgreSQL $v from ${ref:0:12} (kept in $prev)"
    src="$(mktemp -d)"
    git archive "$ref" | tar -x -C "$src"
    # The same cargo target directory: the dependencies both releases share build once.
    (cd "$src" && PG_VERSIONS="$v" CARGO_TARGET_DIR="$REPO_ROOT/target" bash scripts/package.sh) \
      || { rm -rf "$src"; die "the $previous package for PostgreSQL $v did not build"; }
    mkdir -p "$prev" && cp "$src/target/package/postgresql-$v-snowflake-id_${previous}_$arch.deb" "$prev/"
    rm -rf "$src"
  fi
  cp "$deb" "$pool/"
done

# The signing key.
if [ -n "${REPO_KEY:-}" ]; then
  key="$REPO_KEY" gpg=(gpg --batch)
else
  export GNUPGHOME="$REPO_ROOT/target/repo-key"
  if [ ! -f "$GNUPGHOME/throwaway" ]; then
    rm -rf "$GNUPGHOME" && install -d -m 0700 "$GNUPGHOME"
    gpg --batch --quiet --passphrase '' --quick-generate-key \
      "snowflake_id throwaway test repository key <nobody@invalid>" ed25519 sign 1y 2>/dev/null
    touch "$GNUPGHOME/throwaway"
    log "generated a throwaway signing key in $GNUPGHOME (for tests; pass REPO_KEY= to publish)"
  fi
  key="$(gpg --batch --with-colons --list-secret-keys | awk -F: '$1 == "fpr" { print $10; exit }')"
  gpg=(gpg --batch)
fi
"${gpg[@]}" --export "$key" >"$repo/snowflake-id-archive-keyring.gpg"
"${gpg[@]}" --armor --export "$key" >"$repo/snowflake-id-archive-keyring.asc"
[ -s "$repo/snowflake-id-archive-keyring.gpg" ] || die "no public key for $key"

log "indexing and signing the repository ($SUITE/$COMPONENT, $arch)"
dists="$repo/dists/$SUITE"
mkdir -p "$dists/$COMPONENT/binary-$arch"
(cd "$repo" && apt-ftparchive packages "pool/$COMPONENT") >"$dists/$COMPONENT/binary-$arch/Packages"
gzip -9nk "$dists/$COMPONENT/binary-$arch/Packages"
apt-ftparchive \
  -o APT::FTPArchive::Release::Origin=snowflake_id -o APT::FTPArchive::Release::Label=snowflake_id \
  -o APT::FTPArchive::Release::Suite="$SUITE" -o APT::FTPArchive::Release::Codename="$SUITE" \
  -o APT::FTPArchive::Release::Architectures="$arch" -o APT::FTPArchive::Release::Components="$COMPONENT" \
  -o APT::FTPArchive::Release::Description="snowflake_id packages for PostgreSQL" \
  release "$dists" >"$dists/Release.tmp"
mv "$dists/Release.tmp" "$dists/Release"
"${gpg[@]}" --yes --local-user "$key" --digest-algo SHA512 --clearsign -o "$dists/InRelease" "$dists/Release"
"${gpg[@]}" --yes --local-user "$key" --digest-algo SHA512 --armor --detach-sign -o "$dists/Release.gpg" "$dists/Release"
gpgv --keyring "$repo/snowflake-id-archive-keyring.gpg" "$dists/InRelease" 2>/dev/null \
  || die "InRelease does not verify with the exported key"
log "target/repo: $(ls "$pool" | wc -l) packages ($version and $previous), signed by $key"
