#!/usr/bin/env bash
# `make chaos`: a Jepsen-style fault run over a replicated fleet with an independent checker
# (chaos/harness.py runs it, chaos/check.py judges it). See docs/reliability.md.
#
#   make chaos                                  # MODE=sync SEED=1 DURATION=120
#   MODE=async SEED=7 DURATION=3600 make chaos  # the long run of docs/reliability.md
#   SABOTAGE=no-reservation make chaos          # a broken build: must exit non-zero
#   SABOTAGE=no-replay make chaos               # broken only where a standby is promoted
#   SABOTAGE=no-sync make chaos                 # broken only where the power goes (MODE=async)
#
# Writes target/chaos/report.json, report.md and timeline.png, and copies the acknowledged ids
# (acked/), the clients' errors, the fault log and every server's log under target/chaos/. Exits 0
# only when the run holds. The servers listen on the ports after CHAOS_PORT (5600). PostgreSQL 15 (PG= for
# another major, 15 or later: failover needs the WAL records of 15+). Every data directory lies on
# a LazyFS mount (built once into /opt/lazyfs from the vendored tarball, see scripts/lib.sh), so
# that a power loss drops what was not fsynced.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

V="${PG:-15}" SEED="${SEED:-1}" DURATION="${DURATION:-120}" SABOTAGE="${SABOTAGE:-}"
# The no-sync sabotage shows only without a synchronous standby: a renewal that waits for one
# waits for its own WAL to be flushed first (a WAL sender sends only flushed WAL).
if [ "$SABOTAGE" = no-sync ]; then MODE="${MODE:-async}"; else MODE="${MODE:-sync}"; fi
[ "$V" -ge 15 ] || die "make chaos needs PostgreSQL 15 or later"
case "$MODE" in sync | async) ;; *) die "MODE is sync or async" ;; esac
case "$SABOTAGE" in "" | no-reservation | no-replay | no-sync) ;; *) die "SABOTAGE is no-reservation, no-replay or no-sync" ;; esac
PG_VERSIONS="$V" bash "$REPO_ROOT/scripts/setup.sh"
need_debian_packages faketime python3-psycopg2
build_lazyfs || die "make chaos needs LazyFS: no lazyfs tarball in ../shared/vendor (or LAZYFS_TARBALL)"
# The harness, as postgres, mounts a LazyFS per server (through fusermount3), which opens
# /dev/fuse: Debian's udev makes it 0666, a container may not.
as_postgres test -r /dev/fuse -a -w /dev/fuse || $SUDO chmod 0666 /dev/fuse

work="$SNOWFLAKE_RUN_DIR/chaos"
# Servers and mounts left by a run that was killed go first.
if [ -d "$work" ]; then
  for f in "$work"/servers/*/data/postmaster.pid; do
    [ -f "$f" ] && $SUDO kill -9 "$(head -n 1 "$f")" 2>/dev/null || true
  done
  for m in $(awk -v w="$work/" 'index($2, w) == 1 { print $2 }' /proc/mounts); do $SUDO umount -l "$m" || true; done
fi
$SUDO rm -rf "$work" && $SUDO install -d -o postgres -g postgres -m 0755 "$work"
if [ -z "$SABOTAGE" ]; then
  install_extension "$V"
  bin="$(pg_bin "$V")"
else
  # The sabotaged library goes into a copy of the server's tree (the wheel's trees are
  # relocatable), never into the one the tests use. Built against the same pg_config as the tests'
  # build, so that only this crate compiles again.
  install_extension "$V"
  tree="$SNOWFLAKE_RUN_DIR/chaos-pg$V-$SABOTAGE"
  log "building the sabotaged snowflake_id ($SABOTAGE) into $tree"
  $SUDO rm -rf "$tree" && $SUDO cp -a "$(pg_prefix "$V")" "$tree"
  (cd "$REPO_ROOT" && PGRX_PG_CONFIG_PATH="$(pg_bin "$V")/pg_config" cargo build --quiet --lib \
    --no-default-features --features "pg$V sabotage-$SABOTAGE") || die "the sabotaged build failed"
  $SUDO install -m 0755 "${CARGO_TARGET_DIR:-$REPO_ROOT/target}/debug/libsnowflake_id.so" "$tree/lib/snowflake_id.so"
  bin="$tree/bin"
fi

log "chaos: MODE=$MODE SEED=$SEED DURATION=${DURATION}s${SABOTAGE:+ SABOTAGE=$SABOTAGE}"
harness_rc=0
# The harness runs as postgres, who may not read the checkout (a clone under a private directory).
$SUDO install -o postgres -g postgres -m 0644 "$REPO_ROOT/chaos/harness.py" "$REPO_ROOT/chaos/proxy.py" "$work/"
as_postgres /usr/bin/python3 "$work/harness.py" --work "$work" --bin "$bin" --lazyfs "$LAZYFS_PREFIX/bin/lazyfs" --seed "$SEED" \
  --duration "$DURATION" --mode "$MODE" --sabotage "$SABOTAGE" --base-port "${CHAOS_PORT:-5600}" || harness_rc=$?
out="$REPO_ROOT/target/chaos"
rm -rf "$out" && mkdir -p "$out/logs"
cp -r "$work/acked" "$work/errors" "$out/" 2>/dev/null || true
cp "$work/faults.jsonl" "$out/" 2>/dev/null || true
for s in "$work"/servers/*/; do cp "$s/server.log" "$out/logs/$(basename "$s").log" 2>/dev/null || true; done
[ "$harness_rc" -eq 0 ] || die "the harness failed (exit $harness_rc); see $out/logs and $out/faults.jsonl"
cp "$work/topology.json" "$out/"
cp -r "$work/final" "$out/"
check_rc=0
/usr/bin/python3 "$REPO_ROOT/chaos/check.py" "$out" "$out" || check_rc=$?
# The run at a glance (chaos/timeline.py): drawn whatever the verdict, and never part of it.
if python="$(plot_python)" && "$python" "$REPO_ROOT/chaos/timeline.py" "$out" "$out/timeline.png"; then
  log "chaos: the run's timeline is $out/timeline.png"
else
  log "chaos: no timeline.png (drawing it failed; the verdict above stands)"
fi
[ -n "$SABOTAGE" ] && $SUDO rm -rf "$tree"
exit "$check_rc"
