-- The readers that take the layout and epoch as arguments: IMMUTABLE, so that generated columns,
-- expression indexes, CHECK constraints and partitioning use them; the partition helpers; and a
-- table partitioned by id into days, pruned at plan time and at executor start. On a server
-- started with the default layout (41/13/9, epoch 2025-01-01). Every value printed here is
-- independent of the clock.
CREATE EXTENSION snowflake_id;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
-- A wait for a reload, which a backend applies between statements: :wait50 is 50 statements
-- :wait, each of which sleeps a tenth of a second while the setting still has its old value (5 s
-- at most; nothing once it is in). Each wait below sets :wait, and hides its results.
\set wait10 ':wait :wait :wait :wait :wait :wait :wait :wait :wait :wait'
\set wait50 ':wait10 :wait10 :wait10 :wait10 :wait10'
ALTER SYSTEM SET snowflake_id.shards = '0-7';
SELECT pg_reload_conf();
\o /dev/null
\set wait 'SELECT pg_sleep(0.1) WHERE current_setting(''snowflake_id.shards'') <> ''0-7'';'
:wait50
\o
SELECT setseed(0.33);

SELECT p.oid::regprocedure AS function, p.provolatile AS volatility, p.proisstrict AS strict, p.proparallel AS parallel
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'snowflake_id'
WHERE p.proname IN ('snowflake_timestamp', 'snowflake_shard', 'snowflake_seq', 'snowflake_decode', 'snowflake_min_id',
                    'snowflake_max_id', 'snowflake_id_interval', 'snowflake_partitions', 'snowflake_compose')
ORDER BY 1::text;

-- Bit for bit what the readers of the layout in force give, for ids of every shard and time.
WITH ids AS (SELECT snowflake_next(g % 8) AS id FROM generate_series(1, 2000) g
             UNION ALL SELECT (random() * 9223372036854775807)::bigint FROM generate_series(1, 2000)),
     ts AS (SELECT timestamptz '2025-01-01 00:00:00+00' + random() * interval '69 years' AS t FROM generate_series(1, 2000))
SELECT (SELECT count(*) FROM ids WHERE snowflake_timestamp(id, 'default', '2025-01-01+00') <> snowflake_timestamp(id)
                                     OR snowflake_shard(id, 'default') <> snowflake_shard(id)
                                     OR snowflake_seq(id, ' 41/13/9 ') <> snowflake_seq(id)
                                     OR snowflake_decode(id, 'DEFAULT', '2025-01-01+00') IS DISTINCT FROM snowflake_decode(id)
                                     OR snowflake_compose(snowflake_timestamp(id), snowflake_shard(id), snowflake_seq(id),
                                                          'default', '2025-01-01+00') <> id) AS ids_differ,
       (SELECT count(*) FROM ts WHERE snowflake_min_id(t, 'default', '2025-01-01') <> snowflake_min_id(t)
                                    OR snowflake_max_id(t, 'default', '2025-01-01') <> snowflake_max_id(t)) AS bounds_differ;
-- Other layouts, and the same id read under each (the epoch of sonyflake's own examples).
SELECT l AS layout, snowflake_decode(1234567890123, l, '2014-09-01+00') AS decoded,
       snowflake_min_id('2026-12-03 12:00:00+00', l, '2014-09-01+00') AS noon_min_id
FROM unnest(ARRAY['twitter', 'sonyflake', '39/16/8@10ms', 'javascript']) l;
-- A layout whose life fills 64 bits of milliseconds is valid from the 1970 epoch only: the readers
-- that take no epoch check it against 1970, so they accept every layout a server may run with.
-- A time field that outlives 64 bits from 1970 too is still 22023.
SELECT snowflake_shard(12345, '61/0/1@4ms') AS shard, snowflake_seq(12345, '61/0/1@4ms') AS seq,
       snowflake_decode(12345, '61/0/1@4ms', '1970-01-01+00') AS decoded,
       snowflake_id_interval('1 day', '61/0/1@4ms') AS ids_a_day;
-- javascript: every id of the layout's life below 2^53, JavaScript's largest exact integer.
SELECT max_shard, ids_per_ms, last_timestamp, snowflake_max_id(last_timestamp, 'javascript', epoch) AS last_id,
       snowflake_max_id(last_timestamp, 'javascript', epoch) < 2::numeric ^ 53 AS below_2_53
FROM snowflake_layout('javascript');
-- Bad arguments, each with its SQLSTATE.
CREATE FUNCTION pg_temp.outcome(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ' ' || SQLERRM;
END $$;
SELECT stmt, pg_temp.outcome('SELECT ' || stmt) AS outcome
FROM (VALUES ('snowflake_timestamp(1, ''bogus'', ''2025-01-01'')'), ('snowflake_shard(1, repeat(''9'', 100))'),
             ('snowflake_seq(1, ''41/17/5'')'), ('snowflake_seq(1, ''62/0/1@4ms'')'),
             ('snowflake_timestamp(1, ''61/0/1@4ms'', ''1970-01-01 00:00:00.001+00'')'),
             ('snowflake_timestamp(1, ''default'', ''1969-12-31'')'),
             ('snowflake_timestamp(1, ''default'', ''infinity'')'), ('snowflake_timestamp(-1, ''default'', ''2025-01-01'')'),
             ('snowflake_shard(1::bigint << 53, ''javascript'')'), ('snowflake_min_id(''2024-12-31'', ''default'', ''2025-01-01'')'),
             ('snowflake_max_id(''infinity'', ''default'', ''2025-01-01'')'),
             ('snowflake_id_interval(''1 month'', ''default'')'), ('snowflake_id_interval(''1.5 ms'', ''default'')'),
             ('snowflake_id_interval(''5 ms'', ''sonyflake'')'), ('snowflake_id_interval(''0'', ''default'')'),
             ('snowflake_id_interval(''-1 day'', ''default'')'), ('snowflake_id_interval(''70 years'', ''default'')'),
             ('snowflake_compose(''2026-01-01'', 16, 0, ''javascript'', ''2025-01-01'')'),
             ('snowflake_compose(''2026-01-01'', 0, 256, ''javascript'', ''2025-01-01'')'),
             ('snowflake_compose(''2026-01-01'', -1, 0, ''default'', ''2025-01-01'')')) s(stmt);

-- A generated column, an expression index and a CHECK constraint over the immutable forms.
CREATE TABLE orders (
    id         bigint PRIMARY KEY DEFAULT snowflake_next(3),
    created_at timestamptz GENERATED ALWAYS AS (snowflake_timestamp(id, 'default', '2025-01-01+00')) STORED,
    total      numeric,
    CHECK (snowflake_shard(id, 'default') BETWEEN 0 AND 7)
);
CREATE INDEX orders_day ON orders (((snowflake_timestamp(id, 'default', '2025-01-01+00') AT TIME ZONE 'UTC')::date));
INSERT INTO orders (total) SELECT g FROM generate_series(1, 1000) g;
INSERT INTO orders (id, total) VALUES (snowflake_compose('2026-01-01', 9, 0, 'default', '2025-01-01'), 0);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS rows, bool_and(created_at = snowflake_timestamp(id)) AS generated_right FROM orders;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF)
SELECT count(*) FROM orders WHERE (snowflake_timestamp(id, 'default', '2025-01-01+00') AT TIME ZONE 'UTC')::date = '2026-06-01';
RESET enable_seqscan;

-- Partitioned by id into UTC days. A day holds snowflake_id_interval('1 day', 'default') ids, and
-- the partitions' bounds come from snowflake_partitions(), the same days' snowflake_min_id().
SELECT snowflake_id_interval('1 day', 'default') AS ids_a_day, snowflake_id_interval('1 day', 'default')
       = snowflake_min_id('2026-01-02', 'default', '2025-01-01') - snowflake_min_id('2026-01-01', 'default', '2025-01-01') AS agrees;
SELECT * FROM snowflake_partitions('2026-01-01', '2026-03-15', '1 month', 'default', '2025-01-01');
-- Steps are added at once from the first start, so months keep their day (no drift to the 28th);
-- the partitions run until one holds the last time, and none when the first is after the last.
SELECT starts, ends FROM snowflake_partitions('2026-01-31', '2026-04-30', '1 month', 'default', '2025-01-01');
SELECT count(*) AS none_backwards FROM snowflake_partitions('2026-01-02', '2026-01-01', '1 day', 'default', '2025-01-01');
SELECT stmt, pg_temp.outcome('SELECT count(*) FROM ' || stmt) AS outcome
FROM (VALUES ('snowflake_partitions(''-infinity'', ''2026-01-01'', ''1 day'', ''default'', ''2025-01-01'')'),
             ('snowflake_partitions(''2026-01-01'', ''infinity'', ''1 day'', ''default'', ''2025-01-01'')'),
             ('snowflake_partitions(''2026-01-01'', ''2026-01-02'', ''0'', ''default'', ''2025-01-01'')'),
             ('snowflake_partitions(''2026-01-01'', ''2026-01-02'', ''-1 day'', ''default'', ''2025-01-01'')'),
             ('snowflake_partitions(''2026-01-01'', ''2026-01-02'', ''1 month -1 day'', ''default'', ''2025-01-01'')'),
             ('snowflake_partitions(''2026-01-01'', ''2026-01-02'', ''0.5 ms'', ''default'', ''2025-01-01'')'),
             ('snowflake_partitions(''2026-01-01'', ''2026-01-02'', ''5 ms'', ''sonyflake'', ''2025-01-01'')'),
             ('snowflake_partitions(''2026-01-01'', ''2026-12-31'', ''1 minute'', ''default'', ''2025-01-01'')'),
             ('snowflake_partitions(''2024-12-31'', ''2025-01-02'', ''1 day'', ''default'', ''2025-01-01'')'),
             ('snowflake_partitions(''2094-09-06'', ''2094-09-07'', ''1 day'', ''default'', ''2025-01-01'')')) s(stmt);
CREATE TABLE events (id bigint NOT NULL DEFAULT snowflake_next(), payload text) PARTITION BY RANGE (id);
SELECT format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%s) TO (%s)',
              'events_' || to_char(starts, 'YYYYMMDD'), lower_id, upper_id)
FROM snowflake_partitions('2026-01-01', '2026-01-04', '1 day', 'default', '2025-01-01') \gexec
CREATE TABLE events_default PARTITION OF events DEFAULT;
-- Backfilled rows of past days, on shard 9: outside this server's shards (0-7), so that no id it
-- mints can be one of theirs.
SELECT pg_temp.outcome('SELECT snowflake_next(9)') AS mint_on_the_backfill_shard;
INSERT INTO events (id, payload)
SELECT snowflake_compose('2026-01-01'::timestamptz + g * interval '1 hour', 9, 0, 'default', '2025-01-01'), 'x'
FROM generate_series(0, 95) g;
SELECT tableoid::regclass AS partition, count(*), min(snowflake_timestamp(id)), max(snowflake_timestamp(id))
FROM events GROUP BY 1 ORDER BY 1;
-- A constant bound prunes at plan time.
EXPLAIN (COSTS OFF) SELECT count(*) FROM events WHERE id >= snowflake_min_id('2026-01-03 12:00+00', 'default', '2025-01-01 00:00+00');
-- The STABLE reader of the layout in force, over a parameter or now(), prunes at executor start.
SET plan_cache_mode = force_generic_plan;
PREPARE since(timestamptz) AS SELECT count(*) FROM events WHERE id >= snowflake_min_id($1);
EXPLAIN (COSTS OFF) EXECUTE since('2026-01-03 12:00');
EXECUTE since('2026-01-03 12:00');
RESET plan_cache_mode;
-- Partitions around now: the last hour's rows are found in today's partition only.
BEGIN;
CREATE TABLE recent (id bigint NOT NULL) PARTITION BY RANGE (id);
-- Three days' partitions that start at now() - 2 days, so that an hour ago falls in the middle one
-- whatever the time; made in a DO block, as their bounds depend on the clock.
DO $$
DECLARE
    p record;
BEGIN
    FOR p IN SELECT row_number() OVER (ORDER BY starts) AS n, *
             FROM snowflake_partitions(now() - interval '2 days', now(), '1 day', 'default', '2025-01-01') LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF recent FOR VALUES FROM (%s) TO (%s)', 'recent_' || p.n, p.lower_id, p.upper_id);
    END LOOP;
END $$;
EXPLAIN (COSTS OFF) SELECT count(*) FROM recent WHERE id >= snowflake_min_id(now() - interval '1 hour');
EXPLAIN (COSTS OFF) SELECT count(*) FROM recent WHERE id >= snowflake_min_id(now() - interval '1 hour', 'default', '2025-01-01 00:00+00');
ROLLBACK;

-- The session's TimeZone changes nothing an immutable form computes, since its arguments are
-- timestamptz: the same instants give the same ids and partitions. What it changes is how a literal
-- without an offset is read: '2025-01-01' is midnight in the session's zone, another epoch.
CREATE TEMP TABLE under_utc AS
SELECT * FROM snowflake_partitions('2026-03-01 00:00+00', '2026-04-01 00:00+00', '1 day', 'default', '2025-01-01 00:00+00');
SET timezone = 'America/New_York';
SELECT (SELECT count(*) FROM under_utc) AS partitions,
       (SELECT count(*) FROM (SELECT * FROM snowflake_partitions('2026-03-01 00:00+00', '2026-04-01 00:00+00', '1 day',
                                                                 'default', '2025-01-01 00:00+00')
                              EXCEPT SELECT * FROM under_utc) d) AS differ_across_dst,
       (SELECT bool_and(extract(hour FROM starts AT TIME ZONE 'UTC') = 0) FROM under_utc) AS all_utc_midnights,
       snowflake_compose('2026-01-01 12:00+00', 8191, 0, 'default', '2025-01-01 00:00+00')
       = snowflake_compose('2026-01-01 07:00-05', 8191, 0, 'default', '2025-01-01 00:00+00') AS same_instant_same_id,
       snowflake_timestamp(snowflake_compose('2026-01-01 12:00+00', 8191, 0, 'default', '2025-01-01'), 'default', '2025-01-01 00:00+00')
       AT TIME ZONE 'UTC' AS epoch_without_offset_reads_as_local;
SET timezone = 'UTC';

-- UUIDv7 keys, partitioned by uuidv7_min_id() of the UTC days, as docs/partitioning.md makes them:
-- the days stepped and named as timestamps without time zone, and only the bounds converted, so
-- that the session's TimeZone plays no part. Made under New York's, over the day its clocks go
-- forward (2026-03-08): each partition holds 24 hourly rows of its UTC day (a timestamptz series
-- would step and name New York's days, from 05:00 UTC and then 04:00).
SET timezone = 'America/New_York';
CREATE TABLE uevents (id uuid NOT NULL DEFAULT uuidv7_next()) PARTITION BY RANGE (id);
SELECT format('CREATE TABLE %I PARTITION OF uevents FOR VALUES FROM (%L) TO (%L)', 'uevents_' || to_char(g, 'YYYYMMDD'),
              uuidv7_min_id(g AT TIME ZONE 'UTC'), uuidv7_min_id((g + interval '1 day') AT TIME ZONE 'UTC'))
FROM generate_series(timestamp '2026-03-07', timestamp '2026-03-09', interval '1 day') g \gexec
INSERT INTO uevents SELECT uuidv7_min_id(timestamptz '2026-03-07 00:00+00' + g * interval '1 hour') FROM generate_series(0, 71) g;
SET timezone = 'UTC';
SELECT tableoid::regclass AS partition, count(*), min(uuidv7_timestamp(id)) AS first, max(uuidv7_timestamp(id)) AS last
FROM uevents GROUP BY 1 ORDER BY 1;
EXPLAIN (COSTS OFF) SELECT count(*) FROM uevents WHERE id >= uuidv7_min_id('2026-03-09 06:00+00');
ALTER SYSTEM RESET snowflake_id.shards;
SELECT pg_reload_conf();
