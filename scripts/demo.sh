#!/usr/bin/env bash
# The README's first command: set up from nothing, then show snowflake_id at work on a
# throwaway PostgreSQL 15 cluster that is stopped again at the end.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PG_VERSIONS="${PG_VERSIONS:-15}" bash "$REPO_ROOT/scripts/setup.sh"
V=15 NAME=demo PORT=5499
install_extension "$V"
log "starting a throwaway PostgreSQL $V cluster with shared_preload_libraries = 'snowflake_id' and snowflake_id.shards = '0-127'"
# The one line of configuration each server needs: the shards it owns, one block of the shard
# plan (docs/fleet.md: 128 each for up to 63 servers; the next server gets '128-255'). The
# migration below is the same on every server.
CLUSTER_CONF="snowflake_id.shards = '0-127'" cluster_start "$V" "$NAME" "$PORT"
trap 'cluster_stop "$V" "$NAME"' EXIT
cluster_env "$V" "$NAME" "$PORT"

run() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

run <<'SQL'
CREATE EXTENSION snowflake_id;
CREATE TABLE orders (
    id         bigint PRIMARY KEY DEFAULT snowflake_next(),
    client     int NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
SQL

log "inserting 4 x 50,000 rows from 4 concurrent connections"
pids=()
for c in 1 2 3 4; do
  (for batch in $(seq 1 10); do
     echo "INSERT INTO orders (client) SELECT $c FROM generate_series(1, 5000);"
   done | run) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done

log "what the ids say"
psql -X -v ON_ERROR_STOP=1 <<'SQL'
\echo 'The layout this server mints with:'
SELECT layout, epoch, max_shard, ids_per_ms, last_timestamp FROM snowflake_layout();

\echo 'Rows, distinct ids and the shards they used:'
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_ids, array_agg(DISTINCT snowflake_shard(id)) AS shards
FROM orders;

\echo 'Each row has two clock readings: its id (the first default) and created_at (the second). How far apart:'
SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM created_at - snowflake_timestamp(id)) * 1000)::numeric, 3) AS median_ms,
       round(max(extract(epoch FROM created_at - snowflake_timestamp(id)) * 1000)::numeric, 3) AS max_ms,
       count(*) FILTER (WHERE created_at < snowflake_timestamp(id)) AS created_before_its_id
FROM orders;
\echo 'So ORDER BY id is ORDER BY created_at up to that gap. A backend descheduled between the two readings'
\echo '(four clients share this machine) records a created_at later than its id says; and in a burst past'
\echo 'the 512 ids a shard mints in a millisecond, an id borrows the next one (by at most snowflake_id.max_lead,'
\echo '5 ms), so its time is a little after its created_at. Rows whose id order disagrees with created_at by'
\echo 'more than 1 ms, and rows whose id order disagrees with the times the ids carry:'
SELECT (SELECT count(*) FROM (SELECT created_at, lag(created_at) OVER (ORDER BY id) prev FROM orders) s
         WHERE created_at < prev - interval '1 ms') AS by_created_at,
       (SELECT count(*) FROM (SELECT snowflake_timestamp(id) t, lag(snowflake_timestamp(id)) OVER (ORDER BY id) prev FROM orders) s
         WHERE t < prev) AS by_id_time;

\echo 'The newest five ids, decoded:'
SELECT o.id, d.ts, d.shard, d.seq, o.client
FROM (SELECT * FROM orders ORDER BY id DESC LIMIT 5) o, snowflake_decode(o.id) d
ORDER BY o.id;

\echo 'Ids per millisecond (the default layout allows 512 per shard; this server owns 128):'
SELECT max(n) AS busiest_ms, round(avg(n), 1) AS average FROM (
  SELECT count(*) n FROM orders GROUP BY snowflake_timestamp(id)) s;

\echo 'A time range becomes a primary-key range:'
EXPLAIN (COSTS OFF) SELECT count(*) FROM orders WHERE id >= snowflake_min_id(now() - interval '1 hour');
SQL
log "demo done; the cluster is stopped"
