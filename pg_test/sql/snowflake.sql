-- snowflake_next, the readers and the layout, on a server started with the default layout.
-- Every value printed here is independent of the clock.
CREATE EXTENSION snowflake_id;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

-- A primary key minted by the extension.
CREATE TABLE orders (
    id   bigint PRIMARY KEY DEFAULT snowflake_next(7),
    n    int NOT NULL
);
INSERT INTO orders (n) SELECT g FROM generate_series(1, 20000) g;
-- All distinct, all shard 7, strictly increasing in insertion order, and recent: never more
-- than snowflake_id.max_lead (5 ms) ahead of the clock.
SELECT count(*) AS rows,
       count(DISTINCT id) AS distinct_ids,
       bool_and(snowflake_shard(id) = 7) AS all_shard_7,
       count(*) FILTER (WHERE id <= prev) AS not_increasing,
       bool_and(snowflake_timestamp(id) BETWEEN now() - interval '1 min' AND clock_timestamp() + interval '5 ms') AS recent
FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev FROM orders) s;

-- Shard 0 and the largest shard.
SELECT snowflake_shard(snowflake_next(0)) AS lo, snowflake_shard(snowflake_next(8191)) AS hi;

-- Decoding exact ids: tick, shard and sequence sit at bits 22, 9 and 0.
SELECT * FROM snowflake_decode(0);
SELECT * FROM snowflake_decode((1000::bigint << 22) | (3 << 9) | 5);
SELECT (snowflake_decode(9223372036854775807)).*;
SELECT (snowflake_decode(4194304 + 511)).shard AS shard, (snowflake_decode(4194304 + 511)).seq AS seq;
SELECT snowflake_timestamp(1 << 22), snowflake_shard(8191 << 9), snowflake_seq(511);
-- Round trip through a freshly minted id.
WITH i AS (SELECT snowflake_next(42) AS id)
SELECT d.shard, d.ts = snowflake_timestamp(i.id) AS same_ts,
       snowflake_min_id(d.ts) <= i.id AND i.id <= snowflake_max_id(d.ts) AS within_bounds
FROM i, snowflake_decode(i.id) d;

-- Range bounds: the first and last id of a millisecond.
SELECT snowflake_min_id('2025-01-01 00:00:00+00') AS first_id,
       snowflake_max_id('2025-01-01 00:00:00.000999+00') AS last_id_of_first_ms,
       snowflake_min_id('2025-01-01 00:00:00.001+00') AS next_ms;
SELECT snowflake_max_id('2094-09-07 15:47:35.551+00') = 9223372036854775807 AS last_ms_is_max_id;

-- A time range is an index range: one id per second over the last day, then the last hour. (The
-- count is taken at the time the rows were made, t0, so that it does not depend on how long the
-- insert took: the seconds 0 to 3600 before t0.)
SELECT now() AS t0 \gset
CREATE TABLE events (id bigint PRIMARY KEY, payload text);
INSERT INTO events
SELECT snowflake_min_id(:'t0'::timestamptz - g * interval '1 second') + (7 << 9), 'x'
FROM generate_series(0, 86399) g;
ANALYZE events;
EXPLAIN (COSTS OFF)
SELECT count(*) FROM events WHERE id >= snowflake_min_id(now() - interval '1 hour');
SELECT count(*) FROM events WHERE id >= snowflake_min_id(:'t0'::timestamptz - interval '1 hour');
EXPLAIN (COSTS OFF)
SELECT * FROM events
WHERE id BETWEEN snowflake_min_id(now() - interval '2 hours') AND snowflake_max_id(now() - interval '1 hour');

-- The layout this server runs with, and the bit budget of others.
SELECT * FROM snowflake_layout();
SELECT layout, max_shard, ids_per_ms, ids_per_second, last_timestamp, round(lifetime_years::numeric, 1) AS years
FROM unnest(ARRAY['default', 'twitter', 'sonyflake', '42/12/9', '41/13/9@2ms']) AS p, snowflake_layout(p);
SELECT layout, epoch, last_timestamp FROM snowflake_layout('twitter', '2010-11-04 01:42:54.657+00');

-- Errors, each with its SQLSTATE.
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT snowflake_next(-1);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_next(8192);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_next(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_decode(-1);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_timestamp(-9223372036854775808);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_min_id('2024-12-31 23:59:59.999+00');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_max_id('2094-09-07 15:47:35.552+00');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_min_id('infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_layout('41/13/10');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_layout('instagram');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_layout('41/17/5');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_layout('default', '1969-12-31 23:59:59+00');
\echo :LAST_ERROR_SQLSTATE
-- NULL in, NULL out for the readers; the generator refuses NULL (above).
SELECT snowflake_timestamp(NULL) IS NULL AS ts, snowflake_shard(NULL) IS NULL AS shard,
       snowflake_min_id(NULL) IS NULL AS min_id, (SELECT count(*) FROM snowflake_decode(NULL)) AS decoded_rows;

-- The settings, and their contexts.
-- (clock_source_status depends on the machine: pg_test/cluster.sh checks it against the kernel.)
SELECT name, setting, unit, context FROM pg_settings
WHERE name LIKE 'snowflake_id.%' AND name <> 'snowflake_id.clock_source_status' ORDER BY name;
-- The function attributes the README promises.
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args, p.provolatile, p.proparallel, p.proisstrict
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'snowflake_id'
WHERE p.proname LIKE 'snowflake%'
ORDER BY 1, 2;
