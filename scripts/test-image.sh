#!/usr/bin/env bash
# `make test-image`: the OCI image of `make extension-image` (target/image/snowflake-id) on a
# PostgreSQL 18 server that has no snowflake_id of its own, set up as CloudNativePG sets up an
# image volume extension (docs/kubernetes.md):
#
# - the image is checked as it is stored: one layer, holding lib/ and share/extension/ at its
#   root and nothing else, with its labels;
# - it is unpacked into a temporary directory, as the pod mounts it at /extensions/NAME;
# - the server is a copy of the private tree of scripts/setup.sh (/opt/snowflake_id/pg18), with
#   every snowflake_id file removed from the copy (the shared tree is never written), so that the
#   extension can only come from the image;
# - extension_control_path = '$system:IMAGE/share' and dynamic_library_path = '$libdir:IMAGE/lib',
#   the values CloudNativePG appends, and shared_preload_libraries = 'snowflake_id';
# - the cluster is a throwaway one in the same temporary directory, run by the postgres user, on
#   a Unix socket only.
# Then the server must start with the library preloaded from the image, CREATE EXTENSION must find
# the control file there, and the functions must mint. Removes everything on exit.
# Ends with "image: N passed, N failed".
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

V=18
version="$(current_release)"
license="$(sed -n 's/^license = "\(.*\)"/\1/p' "$REPO_ROOT/Cargo.toml" | head -n 1)"
img="$REPO_ROOT/target/image/snowflake-id"
[ -f "$img/index.json" ] || die "no image at $img: run make extension-image first"
finish() {
  echo "image: $PASSED passed, $FAILED failed"
  if [ "$FAILED" -eq 0 ]; then exit 0; else exit 1; fi
}

need_debian_packages umoci
rootless=()
if [ "$(id -u)" -ne 0 ]; then rootless=(--rootless); fi
PG_VERSIONS="$V" bash "$REPO_ROOT/scripts/setup.sh"

work="$(mktemp -d /tmp/sfid-image.XXXXXX)"
chmod 0711 "$work" # postgres may pass through to what it needs, not list or write here
pg="$work/pg" ext="$work/extensions/snowflake-id" cluster="$work/cluster"
data="$cluster/data" started=no
cleanup() {
  if [ "$started" = yes ]; then as_postgres "$pg/bin/pg_ctl" -D "$data" -w -t 60 -m immediate stop >/dev/null 2>&1 || true; fi
  $SUDO rm -rf "$work"
}
trap cleanup EXIT

# A TCP port no one listens on (the server listens on none, but its socket file is named after
# it), outside the ranges of the other tests.
port=""
for p in $(seq 5495 5599); do
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port="$p"; break; fi
done
[ -n "$port" ] || die "no free port in 5495-5599"

log "checking the image layout $img:$version"
layout="$(python3 - "$img" "$version" <<'EOF'
import json, os, sys, tarfile
img, version = sys.argv[1:]
def blob(d):
    return os.path.join(img, "blobs", *d.split(":", 1))
index = json.load(open(os.path.join(img, "index.json")))
refs = [m.get("annotations", {}).get("org.opencontainers.image.ref.name") for m in index["manifests"]]
manifest = json.load(open(blob(index["manifests"][0]["digest"])))
config = json.load(open(blob(manifest["config"]["digest"])))
names = []
for layer in manifest["layers"]:
    with tarfile.open(blob(layer["digest"])) as t:
        names += [m.name + ("/" if m.isdir() else "") for m in t.getmembers()]
used = {index["manifests"][0]["digest"], manifest["config"]["digest"]} | {l["digest"] for l in manifest["layers"]}
stored = {"sha256:" + f for f in os.listdir(os.path.join(img, "blobs", "sha256"))}
labels = config.get("config", {}).get("Labels") or {}
print("refs", ",".join(map(str, refs)))
print("layers", len(manifest["layers"]))
print("entries", " ".join(sorted(names)))
print("top", " ".join(sorted(os.listdir(img))))
print("blobs", "all-used" if stored == used else "unreferenced:" + ",".join(sorted(stored - used)))
print("runtime", "none" if not any(config.get("config", {}).get(k) for k in ("Entrypoint", "Cmd", "Env", "User", "WorkingDir")) else "set")
print("platform", config.get("os"), config.get("architecture"))
for k in ("title", "version", "licenses", "source", "description"):
    print("label." + k, labels.get("org.opencontainers.image." + k, ""))
EOF
)" || die "could not read the OCI layout at $img"
field() { sed -n "s/^$1 //p" <<<"$layout"; }
check "the layout has one image, tagged $version, of one layer" "$version 1" "$(field refs) $(field layers)"
check "the layout holds index.json, oci-layout and only the blobs the image uses" "blobs index.json oci-layout all-used" "$(field top) $(field blobs)"
sqls="$(cd "$REPO_ROOT" && { ls sql/snowflake_id--*.sql 2>/dev/null || true; } | sed 's#^sql/#share/extension/#' | tr '\n' ' ')"
want="$(printf '%s\n' ./ lib/ lib/snowflake_id.so share/ share/extension/ share/extension/snowflake_id.control "share/extension/snowflake_id--$version.sql" $sqls | sort -u | paste -sd' ')"
check "the layer holds lib/snowflake_id.so and share/extension/snowflake_id* at the root, nothing else" "$want" "$(field entries)"
check "no entrypoint, command, environment or user: not a runnable image" "none" "$(field runtime)"
check "the image is for linux on this machine's architecture" \
  "linux $(dpkg --print-architecture | sed 's/^ppc64el$/ppc64le/; s/^i386$/386/; s/^armhf$/arm/')" "$(field platform)"
check "the labels: title, version, licenses" "snowflake_id $version $license" \
  "$(field label.title) $(field label.version) $(field label.licenses)"
if [ -n "$(field label.description)" ]; then pass "the description label: $(field label.description)"; else fail "no description label"; fi
if [ -n "$(field label.source)" ]; then pass "the source label: $(field label.source)"; else echo "# no org.opencontainers.image.source label (no IMAGE_SOURCE, Cargo.toml repository or git remote when it was built)"; fi

log "unpacking it into $ext (as CloudNativePG mounts it at /extensions/NAME)"
mkdir -p "$(dirname "$ext")"
umoci raw unpack "${rootless[@]}" --image "$img:$version" "$ext" >"$work/unpack.log" 2>&1 \
  || { cat "$work/unpack.log" >&2; die "umoci could not unpack $img:$version"; }
chmod 0755 "$(dirname "$ext")" "$ext"
check "the unpacked image has lib/ and share/ at its root, nothing else" "lib share" "$(ls -A "$ext" | paste -sd' ')"
check "the postgres user can read the library and the control file" "yes" \
  "$(as_postgres test -r "$ext/lib/snowflake_id.so" && as_postgres test -r "$ext/share/extension/snowflake_id.control" && echo yes || echo no)"

log "copying the PostgreSQL $V tree without its snowflake_id files"
cp -a "$(pg_prefix "$V")" "$pg"
find "$pg" -name 'snowflake_id*' -exec rm -rf {} +
pkglibdir="$("$pg/bin/pg_config" --pkglibdir)" sharedir="$("$pg/bin/pg_config" --sharedir)"
check "the server's pg_config names the copy, and the copy has no snowflake_id file" "yes yes 0" \
  "$([[ "$pkglibdir" == "$pg"/* ]] && echo yes || echo no) $([[ "$sharedir" == "$pg"/* ]] && echo yes || echo no) $(find "$pg" -name 'snowflake_id*' | wc -l)"

log "a PostgreSQL $V cluster with the image's paths, on port $port"
$SUDO install -d -o postgres -g postgres -m 0700 "$cluster"
as_postgres bash -c 'exec "$@" >"$0" 2>&1' "$cluster/initdb.log" "$pg/bin/initdb" -D "$data" -U postgres --auth=trust --no-sync -E UTF8 --locale=C \
  || { as_postgres cat "$cluster/initdb.log" >&2; die "initdb failed"; }
# What CloudNativePG sets for an extension mounted at /extensions/snowflake-id: its share/ (the
# parent of extension/: PostgreSQL 18 appends "extension" to each entry but $system) and its lib/,
# after the server's own. The control file's module_pathname, '$libdir/snowflake_id', still
# finds the library: PostgreSQL 18 drops the "$libdir/" of a function's library and searches
# dynamic_library_path.
printf '%s\n' "port = $port" "listen_addresses = ''" "unix_socket_directories = '$cluster'" "timezone = 'UTC'" \
  "max_connections = 20" "fsync = off" "shared_preload_libraries = 'snowflake_id'" \
  "extension_control_path = '\$system:$ext/share'" "dynamic_library_path = '\$libdir:$ext/lib'" \
  | as_postgres tee -a "$data/postgresql.conf" >/dev/null
started=yes
if ! as_postgres "$pg/bin/pg_ctl" -D "$data" -l "$cluster/server.log" -w -t 60 start >/dev/null; then
  as_postgres tail -n 20 "$cluster/server.log" | sed 's/^/# /'
  fail "the server starts with snowflake_id preloaded from the image"
  finish
fi
pass "the server starts with snowflake_id preloaded from the image"

# One psql call as postgres; prints the rows, unaligned, or the error.
sql() { as_postgres "$pg/bin/psql" -X -A -t -q -v ON_ERROR_STOP=1 -h "$cluster" -p "$port" -U postgres -d postgres -c "$1" 2>&1; }
check "the settings are in force" "snowflake_id|\$system:$ext/share|\$libdir:$ext/lib" \
  "$(sql "SELECT current_setting('shared_preload_libraries') || '|' || current_setting('extension_control_path') || '|' || current_setting('dynamic_library_path')")"
# The library mapped into the postmaster (and so into every backend it forks), by path.
postmaster="$(as_postgres head -n 1 "$data/postmaster.pid")"
check "the postmaster has the image's lib/snowflake_id.so mapped, and no other" "$ext/lib/snowflake_id.so" \
  "$(as_postgres cat "/proc/$postmaster/maps" | awk '$6 ~ /snowflake_id/ { print $6 }' | sort -u | paste -sd' ')"
check "pg_available_extensions finds snowflake_id $version (only the image has a control file)" "snowflake_id|$version" \
  "$(sql "SELECT name || '|' || default_version FROM pg_available_extensions WHERE name = 'snowflake_id'")"
check "CREATE EXTENSION snowflake_id installs $version from the image" "$version" \
  "$(sql "CREATE EXTENSION snowflake_id" && sql "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'")"
check "its functions name \$libdir/snowflake_id, which the image's lib/ satisfies" "\$libdir/snowflake_id" \
  "$(sql "SELECT string_agg(DISTINCT probin, ',') FROM pg_proc WHERE probin LIKE '%snowflake_id%'")"
id="$(sql "SELECT snowflake_next(1)")" || true
if [[ "$id" =~ ^[1-9][0-9]*$ ]]; then pass "snowflake_next(1) mints $id"; else fail "snowflake_next(1): [$id]"; id=0; fi
check "snowflake_shard and snowflake_decode of it give shard 1" "1|1" \
  "$(sql "SELECT snowflake_shard($id) || '|' || (snowflake_decode($id)).shard")"
check "uuidv7_next() mints version-7 UUIDs in order" "7|true" \
  "$(sql "SELECT uuid_extract_version(a) || '|' || (a < b) FROM (SELECT uuidv7_next() AS a) x, LATERAL (SELECT uuidv7_next() AS b) y")"
check "a backend calling the functions has only the image's library loaded" "$ext/lib/snowflake_id.so" \
  "$(sql "SELECT string_agg(DISTINCT substring(l FROM '(/\S*snowflake_id\S*)\$'), ' ') FROM (SELECT snowflake_next(1) AS id) AS c, regexp_split_to_table(pg_read_file('/proc/self/maps'), E'\n') AS l WHERE c.id > 0 AND l LIKE '%snowflake_id%'")"
check "pg_get_loaded_modules() reports snowflake_id's library" "snowflake_id.so" \
  "$(sql "SELECT string_agg(file_name, ',') FROM pg_get_loaded_modules() WHERE file_name LIKE 'snowflake_id%'")"

as_postgres "$pg/bin/pg_ctl" -D "$data" -w -t 60 -m fast stop >/dev/null && started=no
check "the server stops cleanly" "no" "$started"
finish
