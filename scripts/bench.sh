#!/usr/bin/env bash
# `make bench`: builds snowflake_id in release mode, starts a throwaway cluster (PostgreSQL 15,
# or PG=18, which adds core uuidv7() to the comparison; both private trees from the wheel), and runs
# bench/bench.py against it. Regenerates docs/benchmarks.md and docs/bench/* (PostgreSQL 15), or
# docs/benchmarks-pgNN.md and docs/bench/pgNN/* for another version.
#
#   PG=18 make bench
#   BENCH_ARGS="--rows 200000 --insert-rows 200000 --reps 3 --pgbench-seconds 2" make bench   # a quick look
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

V="${PG:-15}" NAME="bench$V" PORT="$((5450 + ${PG:-15}))"
PG_VERSIONS="$V" bash "$REPO_ROOT/scripts/setup.sh"
# The charts need matplotlib.
python="$(plot_python)" || die "make bench needs matplotlib for its charts (pip install failed)"
install_extension "$V" release
log "starting a throwaway PostgreSQL $V cluster for the benchmark (fsync and synchronous_commit on)"
CLUSTER_CONF="fsync = on
snowflake_id.shards = '0-8191'
synchronous_commit = on
shared_buffers = '512MB'
max_wal_size = '8GB'
checkpoint_timeout = '30min'
jit = off" cluster_start "$V" "$NAME" "$PORT"
trap 'cluster_stop "$V" "$NAME"' EXIT
cluster_env "$V" "$NAME" "$PORT"
# A key for the public forms, for this throwaway cluster only.
as_postgres bash -c "umask 077 && printf '1 %s encode\n' \"\$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')\" > '$SNOWFLAKE_RUN_DIR/$NAME/data/snowflake_id.keys'"
# shellcheck disable=SC2086
SNOWFLAKE_SOURCE_STAMP="$(source_stamp)" "$python" "$REPO_ROOT/bench/bench.py" --pg-major "$V" ${BENCH_ARGS:-}
