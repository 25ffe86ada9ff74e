-- UUIDv7 generation and reading back. The readers' output must be the same on every version:
-- on 14-16 uuid_extract_timestamp/_version come from this extension, on 17+ from core. The one
-- exception is PostgreSQL 17's core uuid_extract_timestamp(), which reads version 1 only and
-- gives NULL for UUIDv7 (expected/pg17/).
CREATE EXTENSION snowflake_id;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

-- RFC 9562 appendix A.6 (v7) and A.1 (v1): both are 2022-02-22 19:22:22 UTC.
SELECT uuid_extract_timestamp('017F22E2-79B0-7CC3-98C4-DC0C0C07398F') AS v7_ts,
       uuid_extract_version('017F22E2-79B0-7CC3-98C4-DC0C0C07398F') AS v7_version,
       uuid_extract_timestamp('C232AB00-9414-11EC-B3C8-9F6BDECED846') AS v1_ts,
       uuid_extract_version('C232AB00-9414-11EC-B3C8-9F6BDECED846') AS v1_version;
-- The sub-millisecond fraction, to the microsecond (rand_a = 0xCC3 = 3267/4096 ms).
SELECT uuidv7_timestamp('017F22E2-79B0-7CC3-98C4-DC0C0C07398F');
-- No timestamp: other versions, the nil and max UUIDs, and non-RFC variants give NULL.
SELECT u, uuid_extract_version(u) AS version, uuid_extract_timestamp(u) AS ts, uuidv7_timestamp(u) AS v7_ts
FROM (VALUES ('00000000-0000-0000-0000-000000000000'::uuid),
             ('ffffffff-ffff-ffff-ffff-ffffffffffff'),
             ('6ba7b810-9dad-41d1-80b4-00c04fd430c8'),
             ('017f22e2-79b0-7cc3-c8c4-dc0c0c07398f'),
             ('017f22e2-79b0-7cc3-18c4-dc0c0c07398f'),
             ('C232AB00-9414-11EC-B3C8-9F6BDECED846')) AS t(u);
SELECT uuid_extract_timestamp(NULL) IS NULL AS a, uuidv7_timestamp(NULL) IS NULL AS b, uuidv7_min_id(NULL) IS NULL AS c;

-- Range bounds: every UUIDv7 of a millisecond lies between them.
SELECT uuidv7_min_id('2022-02-22 19:22:22+00') AS lo, uuidv7_max_id('2022-02-22 19:22:22.0009+00') AS hi;
SELECT '017F22E2-79B0-7CC3-98C4-DC0C0C07398F'::uuid
       BETWEEN uuidv7_min_id('2022-02-22 19:22:22+00') AND uuidv7_max_id('2022-02-22 19:22:22+00') AS inside;
SELECT uuidv7_min_id('1970-01-01 00:00:00+00') AS first, uuidv7_max_id('10889-08-02 05:31:50.655+00') AS last;

-- Generated values: version 7, variant 10, distinct and increasing, time from the clock.
CREATE TABLE g AS
SELECT n, clock_timestamp() AS c0, uuidv7_next() AS u, clock_timestamp() AS c1
FROM generate_series(1, 10000) n;
SELECT count(*) AS n,
       count(DISTINCT u) AS distinct_u,
       bool_and(uuid_extract_version(u) = 7) AS v7,
       bool_and(substr(u::text, 20, 1) IN ('8', '9', 'a', 'b')) AS variant_10,
       count(*) FILTER (WHERE u <= prev) AS not_increasing,
       bool_and(uuid_extract_timestamp(u) = date_trunc('milliseconds', uuidv7_timestamp(u))) AS ms_agree
FROM (SELECT u, lag(u) OVER (ORDER BY n) AS prev FROM g) s;
-- A wait for a reload, which a backend applies between statements: :wait50 is 50 statements
-- :wait, each of which sleeps a tenth of a second while the setting still has its old value (5 s
-- at most; nothing once it is in). Each wait below sets :wait, and hides its results.
\set wait10 ':wait :wait :wait :wait :wait :wait :wait :wait :wait :wait'
\set wait50 ':wait10 :wait10 :wait10 :wait10 :wait10'
-- With no lead allowed, the time is the clock's at the call, to the millisecond. Inside a
-- millisecond the 12-bit fraction counts on (RFC 9562 method 3) when calls come faster than
-- one per 244 ns, so it may read a few microseconds past the clock, never a millisecond.
-- The lead is a server setting (the UUIDv7 state is shared by every backend): set it for the
-- server, and let the reload reach this session.
ALTER SYSTEM SET snowflake_id.uuidv7_max_lead = 0;
SELECT pg_reload_conf();
\o /dev/null
\set wait 'SELECT pg_sleep(0.1) WHERE current_setting(''snowflake_id.uuidv7_max_lead'') <> ''0'';'
:wait50
\o
SHOW snowflake_id.uuidv7_max_lead;
SELECT count(*) FILTER (WHERE uuidv7_timestamp(u) < date_trunc('milliseconds', c0)
                           OR date_trunc('milliseconds', uuidv7_timestamp(u)) > c1) AS outside_the_call
FROM (SELECT clock_timestamp() AS c0, uuidv7_next() AS u, clock_timestamp() AS c1
      FROM generate_series(1, 20000)) s;
ALTER SYSTEM RESET snowflake_id.uuidv7_max_lead;
SELECT pg_reload_conf();
\o /dev/null
\set wait 'SELECT pg_sleep(0.1) WHERE current_setting(''snowflake_id.uuidv7_max_lead'') <> ''1s'';'
:wait50
\o
SHOW snowflake_id.uuidv7_max_lead;
-- A session cannot change it: one session's lead would be every session's.
\set VERBOSITY sqlstate
SET snowflake_id.uuidv7_max_lead = '10s';
\set VERBOSITY default

-- Shifted values (PostgreSQL 18's uuidv7(interval)): the time moves, calendar-aware.
SELECT uuidv7_timestamp(uuidv7_next(interval '-1 day')) BETWEEN now() - interval '1 day 1 minute' AND clock_timestamp() - interval '1 day' AS minus_a_day,
       uuidv7_timestamp(uuidv7_next(interval '1 month')) BETWEEN now() + interval '1 month' - interval '1 minute' AND clock_timestamp() + interval '1 month 1 second' AS plus_a_month,
       uuid_extract_version(uuidv7_next(interval '1 hour')) AS version;

-- Errors, each with its SQLSTATE.
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT uuidv7_next(interval '-100 years');
\echo :LAST_ERROR_SQLSTATE
SELECT uuidv7_next(interval '9000 years');
\echo :LAST_ERROR_SQLSTATE
SELECT uuidv7_next(interval '300000 years');
\echo :LAST_ERROR_SQLSTATE
SELECT uuidv7_next(NULL::interval) IS NULL AS null_shift_gives_null;
SELECT uuidv7_min_id('1969-12-31 23:59:59.999+00');
\echo :LAST_ERROR_SQLSTATE
SELECT uuidv7_max_id('10889-08-02 05:31:50.656+00');
\echo :LAST_ERROR_SQLSTATE
SELECT uuidv7_min_id('-infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT uuidv7_timestamp('not a uuid');
\echo :LAST_ERROR_SQLSTATE

-- A time range is an index range on a uuid key too.
-- (Counted at t0, the time the rows were made, whatever the insert took: seconds 0 to 3600.)
SELECT now() AS t0 \gset
CREATE TABLE ev (id uuid PRIMARY KEY);
INSERT INTO ev SELECT uuidv7_min_id(:'t0'::timestamptz - g * interval '1 second') FROM generate_series(0, 86399) g;
ANALYZE ev;
EXPLAIN (COSTS OFF) SELECT count(*) FROM ev WHERE id >= uuidv7_min_id(now() - interval '1 hour');
SELECT count(*) FROM ev WHERE id >= uuidv7_min_id(:'t0'::timestamptz - interval '1 hour');
