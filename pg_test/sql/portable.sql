-- The portable edition (sql/portable/snowflake_id_portable.sql) beside the native extension in
-- one database: the same bits, the same figures, the same text forms, the same SQLSTATEs.
CREATE EXTENSION snowflake_id;
CREATE SCHEMA portable;
GRANT USAGE ON SCHEMA portable TO PUBLIC;
-- (The next line becomes sql/portable/snowflake_id_portable.sql: scripts/lib.sh, pg_regress_suite.)
\set ECHO none
\set QUIET on
\o /dev/null
SET search_path = portable;
\ir portable_install.sql
RESET search_path;
\o
\set QUIET off
\set ECHO all
\set VERBOSITY default
-- random() is seeded, so that a failure replays.
SELECT setseed(0.33);
-- A layout of 10 ms ticks, configured before the first id: a time's bounds are its tick's,
-- wherever in the tick it falls. Then the default again.
SELECT layout, epoch FROM portable.snowflake_portable_configure(layout => 'sonyflake', epoch => '2014-09-01 00:00:00+00');
SELECT count(*) FILTER (WHERE portable.snowflake_min_id(ts) <> (floor((extract(epoch FROM ts) * 1000 - 1409529600000) / 10)::bigint << 24)
                           OR portable.snowflake_max_id(ts) <> (floor((extract(epoch FROM ts) * 1000 - 1409529600000) / 10)::bigint << 24) + 16777215)
       AS bounds_off
FROM (SELECT timestamptz '2025-01-01 00:00:00+00' + g * interval '1 ms' AS ts FROM generate_series(0, 99) g) x;
SELECT layout, epoch FROM portable.snowflake_portable_configure(layout => 'default', epoch => '2025-01-01 00:00:00+00');
-- Bit for bit: ids of either edition decode alike in both, for the shard they were minted for,
-- within the millisecond of the call.
WITH n AS (SELECT clock_timestamp() AS t0, snowflake_next(5) AS id, clock_timestamp() AS t1 FROM generate_series(1, 500)),
     p AS (SELECT clock_timestamp() AS t0, portable.snowflake_next(5) AS id, clock_timestamp() AS t1 FROM generate_series(1, 500)),
     r AS (SELECT (random() * 9223372036854775807)::bigint AS id FROM generate_series(1, 500))
SELECT (SELECT count(*) FROM (SELECT id FROM n UNION ALL SELECT id FROM p UNION ALL SELECT id FROM r) a
        WHERE snowflake_decode(id) IS DISTINCT FROM portable.snowflake_decode(id)) AS decoded_differently,
       (SELECT count(*) FROM p WHERE snowflake_shard(id) <> 5
           OR snowflake_timestamp(id) NOT BETWEEN date_trunc('milliseconds', t0) AND t1) AS portable_ids_off,
       (SELECT count(*) FROM n WHERE portable.snowflake_shard(id) <> 5
           OR portable.snowflake_timestamp(id) NOT BETWEEN date_trunc('milliseconds', t0) AND t1) AS native_ids_off;
-- The id of a shard, tick and sequence is the same number: the range bounds agree, and a portable
-- id is exactly its fields' bits.
WITH t AS (SELECT timestamptz '2025-01-01' + random() * interval '60 years' AS ts FROM generate_series(1, 500))
SELECT count(*) FILTER (WHERE snowflake_min_id(ts) <> portable.snowflake_min_id(ts)
                           OR snowflake_max_id(ts) <> portable.snowflake_max_id(ts)) AS bounds_differ
FROM t;
SELECT id = ((((extract(epoch FROM ts) * 1000)::bigint - 1735689600000) << 22) | (5 << 9) | seq) AS same_bits
FROM (SELECT id, (snowflake_decode(id)).* FROM (SELECT portable.snowflake_next(5) AS id) x) y;
-- Layout figures, for the presets and for custom layouts and epochs.
SELECT count(*) AS figures_differ
FROM (VALUES (NULL, NULL), ('default', NULL), ('twitter', '2010-11-04'), ('sonyflake', '2014-09-01'),
             ('39/16/8@10ms', NULL), (' 41/10/12 ', '2020-01-01'), ('50/5/8@1000ms', NULL), ('48/7/8@10ms', NULL),
             ('1/0/1', '1970-01-01'), ('javascript', NULL), ('62/0/1@2ms', '1970-01-01+00')) v(l, e)
WHERE (SELECT row(f.*) FROM snowflake_layout(l, e::timestamptz) f) IS DISTINCT FROM
      (SELECT row(f.*) FROM portable.snowflake_layout(l, e::timestamptz) f);
-- The javascript layout: 53 bits (every id below 2^53), 16 shards, 256 ids a millisecond per shard,
-- more than a default server's backends.
SELECT layout, max_shard, ids_per_ms, (SELECT max_id < 2::numeric ^ 53 FROM (SELECT (1::bigint << (time_bits + shard_bits + seq_bits)) - 1 AS max_id) m) AS below_2_53
FROM portable.snowflake_layout('javascript');
-- Text forms.
WITH v AS (SELECT (random() * 9223372036854775807)::bigint AS id, md5(random()::text)::uuid AS u FROM generate_series(1, 300)
           UNION ALL VALUES (0, '00000000-0000-0000-0000-000000000000'::uuid), (9223372036854775807, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
SELECT count(*) FILTER (WHERE snowflake_to_text(id) <> portable.snowflake_to_text(id)
                           OR portable.snowflake_from_text(lower(snowflake_to_text(id))) <> id
                           OR uuid_to_ulid(u) <> portable.uuid_to_ulid(u)
                           OR portable.ulid_to_uuid(lower(uuid_to_ulid(u))) <> u) AS text_differs
FROM v;
-- A UUIDv7 of the portable edition: version 7, variant RFC 9562, the call's millisecond.
SELECT uuid_extract_version(u) AS version, substr(u::text, 20, 1) IN ('8', '9', 'a', 'b') AS rfc_variant,
       uuidv7_timestamp(u) BETWEEN date_trunc('milliseconds', t0) AND t1 AS its_millisecond
FROM (SELECT clock_timestamp() AS t0, portable.uuidv7_next() AS u, clock_timestamp() AS t1) x;
-- Errors: each statement, run by both editions, gives the same SQLSTATE. (Both messages shown.)
CREATE FUNCTION pg_temp.outcome(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ' ' || SQLERRM;
END $$;
SELECT left(native, 5) = left(port, 5) AS same_sqlstate, stmt, native, port
FROM (VALUES ('snowflake_next(NULL)'), ('snowflake_next(-1)'), ('snowflake_next(8192)'), ('snowflake_next()'),
             ('snowflake_timestamp(-1)'), ('snowflake_shard(-5)'), ('snowflake_decode(-1)'),
             ('snowflake_min_id(''infinity'')'), ('snowflake_max_id(''2024-12-31 23:59:59+00'')'),
             ('snowflake_min_id(''2094-09-08'')'),
             ('snowflake_layout(''41/13/10'')'), ('snowflake_layout(''bogus'')'), ('snowflake_layout(repeat(''/'', 100))'),
             ('snowflake_layout(''41/17/5'')'), ('snowflake_layout(''41/13/9@1001ms'')'),
             ('snowflake_to_text(-1)'), ('snowflake_from_text(''000000000000'')'), ('snowflake_from_text(''00000O0000000'')'),
             ('snowflake_from_text(''8000000000000'')'), ('ulid_to_uuid(''8ZZZZZZZZZZZZZZZZZZZZZZZZZ'')'),
             ('ulid_to_uuid(''01FWHE4YDGFK1SHH6W1G60EEC'')'),
             -- Non-ASCII look-alikes of the right length in bytes: U+017F (upper() makes it S), a
             -- full-width digit.
             ('snowflake_from_text(''00000000000ſ'')'), ('snowflake_from_text(''0000000000０'')'),
             ('ulid_to_uuid(''000000000000000000000000ſ'')')) s(stmt),
     LATERAL (SELECT pg_temp.outcome('SELECT public.' || stmt) AS native, pg_temp.outcome('SELECT portable.' || stmt) AS port) o;
-- The readers that take the layout and epoch as arguments, and the partition helpers: the same
-- results in both editions, for every preset, a custom layout and two epochs.
WITH l AS (SELECT * FROM unnest(ARRAY['default', 'twitter', 'sonyflake', 'javascript', '39/16/8@10ms']) l,
                         unnest(ARRAY[timestamptz '2025-01-01+00', '2014-09-01+00']) e),
     v AS (SELECT l, e, (random() * ((2::numeric ^ (w.time_bits + w.shard_bits + w.seq_bits)) - 1))::bigint AS id,
                  e + random() * interval '30 years' AS t
           FROM l, snowflake_layout(l.l) w, generate_series(1, 300))
SELECT count(*) FILTER (WHERE snowflake_decode(id, l, e) IS DISTINCT FROM portable.snowflake_decode(id, l, e)
                           OR snowflake_timestamp(id, l, e) <> portable.snowflake_timestamp(id, l, e)
                           OR snowflake_shard(id, l) <> portable.snowflake_shard(id, l)
                           OR snowflake_seq(id, l) <> portable.snowflake_seq(id, l)
                           OR snowflake_min_id(t, l, e) <> portable.snowflake_min_id(t, l, e)
                           OR snowflake_max_id(t, l, e) <> portable.snowflake_max_id(t, l, e)
                           OR snowflake_compose(t, 3, 2, l, e) <> portable.snowflake_compose(t, 3, 2, l, e)) AS differ,
       count(*) AS compared
FROM v;
SELECT (SELECT array_agg(snowflake_id_interval(i, l) = portable.snowflake_id_interval(i, l))
        FROM unnest(ARRAY['1 day', '1 hour', '10 ms']::interval[]) i, unnest(ARRAY['default', 'sonyflake', 'javascript']) l) AS intervals_agree;
SELECT left(native, 5) = left(port, 5) AS same_sqlstate, stmt, native, port
FROM (VALUES ('snowflake_timestamp(1, ''bogus'', ''2025-01-01'')'), ('snowflake_shard(1, repeat(''9'', 100))'),
             ('snowflake_seq(1, ''41/17/5'')'), ('snowflake_timestamp(1, ''default'', ''1969-12-31'')'),
             ('snowflake_timestamp(-1, ''default'', ''2025-01-01'')'), ('snowflake_shard(1::bigint << 53, ''javascript'')'),
             ('snowflake_min_id(''2024-12-31'', ''default'', ''2025-01-01'')'),
             ('snowflake_id_interval(''1 month'', ''default'')'), ('snowflake_id_interval(''5 ms'', ''sonyflake'')'),
             ('snowflake_id_interval(''0'', ''default'')'), ('snowflake_id_interval(''70 years'', ''default'')'),
             ('snowflake_compose(''2026-01-01'', 16, 0, ''javascript'', ''2025-01-01'')'),
             ('snowflake_compose(''2026-01-01'', 0, 256, ''javascript'', ''2025-01-01'')'),
             ('snowflake_compose(''2026-01-01'', 15, 255, ''javascript'', ''2025-01-01'')'),
             -- An infinite epoch is a timestamp out of range (22008), checked before the layout
             -- where the native edition checks it first (but for snowflake_layout); so is a time
             -- past an i64 of Unix microseconds (294247-01-10).
             ('snowflake_timestamp(1, ''default'', ''infinity'')'), ('snowflake_timestamp(1, ''bogus'', ''infinity'')'),
             ('snowflake_decode(1, ''default'', ''-infinity'')'), ('snowflake_min_id(''2026-01-01'', ''default'', ''infinity'')'),
             ('snowflake_max_id(''2026-01-01'', ''bogus'', ''infinity'')'),
             ('snowflake_compose(''2026-01-01'', 0, 0, ''default'', ''infinity'')'),
             ('snowflake_partitions(''2026-01-01'', ''2026-02-01'', ''1 day'', ''bogus'', ''infinity'')'),
             ('snowflake_layout(''default'', ''infinity'')'), ('snowflake_layout(''bogus'', ''-infinity'')'),
             ('snowflake_timestamp(1, ''default'', ''1969-12-31 23:59:59.9995+00'')'),
             ('snowflake_timestamp(1, ''default'', ''294250-01-01+00'')'), ('snowflake_min_id(''294250-01-01+00'', ''default'', ''2025-01-01'')'),
             -- The functions without an epoch check the layout against 1970, the epoch that
             -- leaves the most room: 2^62 ticks of 2 ms, or 2^61 of 4 ms, end beyond an i64 of
             -- milliseconds from 2025 and just within it from 1970, so a server may run with them
             -- (epoch 1970) and these read its ids. 2^62 ticks of 4 ms outlive it from 1970 too.
             ('snowflake_shard(1, ''62/0/1@2ms'')'), ('snowflake_seq(1, ''62/0/1@2ms'')'),
             ('snowflake_id_interval(''2 ms'', ''62/0/1@2ms'')'), ('snowflake_timestamp(1, ''62/0/1@2ms'', ''1970-01-01+00'')'),
             ('snowflake_decode(1, ''62/0/1@2ms'', ''1970-01-01+00'')'), ('snowflake_id_interval(''1 day'', ''bogus'')'),
             ('snowflake_shard(12345, ''61/0/1@4ms'')'), ('snowflake_seq(12345, ''61/0/1@4ms'')'),
             ('snowflake_id_interval(''1 day'', ''61/0/1@4ms'')'), ('snowflake_decode(12345, ''61/0/1@4ms'', ''1970-01-01+00'')'),
             ('snowflake_timestamp(12345, ''61/0/1@4ms'', ''1970-01-01 00:00:00.001+00'')'),
             ('snowflake_shard(1, ''62/0/1@4ms'')'), ('snowflake_seq(1, ''62/0/1@4ms'')'),
             ('snowflake_id_interval(''1 day'', ''62/0/1@4ms'')'),
             -- A span past an i64 of microseconds.
             ('snowflake_id_interval(''200000000 days'', ''default'')')) s(stmt),
     LATERAL (SELECT pg_temp.outcome('SELECT public.' || stmt) AS native, pg_temp.outcome('SELECT portable.' || stmt) AS port) o;
-- Layouts are read as the native edition reads them: at most 64 bytes, ASCII only, ASCII
-- whitespace trimmed, presets in any ASCII case, numbers as Rust's u32 reads them (a +, leading
-- zeros), and the bounds; and whatever the caller's collation (lower() and regular expressions
-- follow it: under C.utf8, U+3000 is a space and upper-case letters have non-ASCII lower cases).
-- For each spelling (its characters other than ASCII's printable ones in hexadecimal, and its
-- length in bytes): the native edition's layout and the shard of an id (or the SQLSTATE), and
-- whether the portable edition gives the same under every collation at hand.
CREATE FUNCTION pg_temp.result(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    EXECUTE sql INTO r;
    RETURN coalesce(r, 'NULL');
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;
WITH spelling(l) AS (
         VALUES (E'\tdefault'), (E'default\n'), (E'\x0bDEFAULT\x0c\r'), (' Twitter '), ('SONYFLAKE'), ('JavaScript'),
                ('+41/+13/+9'), ('0000000041/13/9'), (repeat('0', 50) || '41/13/9'), ('41/13/9@+0010ms'),
                (E'41 /\t13/ 9 @ 10 ms'), ('39/16/8@10'), (repeat(' ', 57) || 'default'), (repeat(' ', 58) || 'default'),
                ('41/13/9@10MS'), ('41/13/9@ms'), ('41/13/9@'), ('41/13/9ms'), ('41/13/9@10msms'), ('41/13/9@10 m s'),
                ('-41/13/9'), ('41/-0/9'), ('+/13/9'), ('++41/13/9'), ('41/+ 13/9'), ('41//13/9'), ('41/13'), ('41/13/9/1'),
                ('41/13/9@10ms@'), ('4294967295/0/1'), ('4294967296/0/1'), ('41/13/9@4294967296ms'), ('41/13/9@0ms'),
                ('41/13/9@1001ms'), ('0/13/9'), ('41/17/5'), ('41/13/0'), ('62/0/1@2ms'), ('1/0/1'),
                (E'\x1cdefault'), (U&'41/13/9\3000'), (U&'\3000default'), (U&'default\00A0'), (U&'\FF14\FF11/13/9'),
                (U&'\017Fonyflake'), (U&'tw\0131tter'), (U&'default\0085')),
     colls AS (SELECT collname FROM pg_collation
                   WHERE collname IN ('default', 'C', 'POSIX', 'ucs_basic', 'C.utf8', 'C.UTF-8', 'pg_c_utf8', 'pg_unicode_fast')
                     AND collencoding IN (-1, pg_char_to_encoding(getdatabaseencoding())))
SELECT (SELECT string_agg(CASE WHEN ascii(c) BETWEEN 32 AND 126 THEN c ELSE format('<%s>', to_hex(ascii(c))) END, '' ORDER BY i)
        FROM unnest(string_to_array(l, NULL)) WITH ORDINALITY u(c, i)) AS layout, octet_length(l) AS bytes, native,
       (SELECT bool_and(pg_temp.result(format('SELECT (portable.snowflake_layout(%L COLLATE %I)).layout || '' '' || portable.snowflake_shard(8405005, %L COLLATE %I)',
                                             l, collname, l, collname)) = native)
        FROM colls) AS portable_agrees
FROM spelling,
     LATERAL pg_temp.result(format('SELECT (public.snowflake_layout(%L)).layout || '' '' || public.snowflake_shard(8405005, %L)', l, l)) native;
-- Partitions by time: partition k starts k steps after the first start, added at once in UTC (a
-- month from January 31 is February 28, two are March 31), and ends where partition k + 1 starts.
SELECT to_char(p.starts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') AS starts, to_char(p.ends AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') AS ends,
       p.lower_id, p.upper_id, p = n AS native_agrees
FROM portable.snowflake_partitions('2026-01-31+00', '2026-04-30+00', '1 month', 'default', '2025-01-01+00') WITH ORDINALITY p(starts, ends, lower_id, upper_id, i)
     FULL JOIN snowflake_partitions('2026-01-31+00', '2026-04-30+00', '1 month', 'default', '2025-01-01+00') WITH ORDINALITY n(starts, ends, lower_id, upper_id, i) USING (i)
ORDER BY i;
-- The same partitions in both editions, whatever the TimeZone: fixed cases, then random ones (first
-- and last anywhere in and around the layouts' lives, steps of every kind); each case's rows as
-- Unix times and ids, or its SQLSTATE.
CREATE TEMP TABLE partition_case (n int, first timestamptz, last timestamptz, step interval, layout text, epoch timestamptz);
INSERT INTO partition_case
SELECT row_number() OVER (), * FROM (
    VALUES (timestamptz '2026-01-31 00:00+00', timestamptz '2026-12-31 00:00+00', interval '1 month', 'default', timestamptz '2025-01-01+00'),
           ('2026-01-31 12:00+00', '2026-06-01+00', '1 mon 1 day 1 hour', 'javascript', '2025-01-01+00'),
           ('2024-02-29+00', '2032-03-01+00', '1 year', 'twitter', '2010-11-04+00'),
           ('2026-03-07 23:30+00', '2026-03-09+00', '90 minutes', 'default', '2025-01-01+00'),
           ('2026-01-01+00', '2026-01-01 00:00:00.1+00', '10 ms', 'sonyflake', '2014-09-01+00'),
           ('2026-01-01+00', '2026-01-01 00:00:00.01+00', '1.5 ms', 'default', '2025-01-01+00'),
           ('2026-01-01 00:00:00.0004+00', '2026-01-01 00:00:00.004+00', '1 ms', 'default', '2025-01-01+00'),
           ('2026-05-01+00', '2026-04-01+00', '1 day', 'default', '2025-01-01+00'),
           ('2094-08-01+00', '2094-09-01+00', '1 month', 'default', '2025-01-01+00'),
           ('2024-12-31+00', '2025-01-02+00', '1 day', 'default', '2025-01-01+00')) c
UNION ALL
SELECT * FROM (
    WITH drawn AS MATERIALIZED (
             SELECT g, (ARRAY['default', 'twitter', 'sonyflake', 'javascript', '40/10/12@2ms'])[1 + floor(random() * 5)::int] AS l,
                    (ARRAY[timestamptz '2025-01-01+00', '2010-11-04+00', '1970-01-01+00'])[1 + floor(random() * 3)::int] AS e,
                    (ARRAY[interval '1 day', '1 month', '7 days', '3 months', '1 year', '6 hours', '1 mon 15 days', '90 minutes',
                           '10 ms', '1 day 0.001 s', '2 years 1 day'])[1 + floor(random() * 11)::int] AS s
             FROM generate_series(1, 200) g),
         firsts AS MATERIALIZED (SELECT *, e + random() * interval '75 years' AS f FROM drawn)
    SELECT 10 + g, f, f + random() * 50 * s, s, l, e FROM firsts) r;
CREATE FUNCTION pg_temp.partitions_of(edition text) RETURNS TABLE (n int, result text) LANGUAGE sql AS $$
    SELECT n, pg_temp.result(format('SELECT array_agg(row(extract(epoch FROM starts), extract(epoch FROM ends), lower_id, upper_id))::text FROM %I.snowflake_partitions(%L, %L, %L, %L, %L)',
                                    edition, first, last, step, layout, epoch))
    FROM partition_case
$$;
SET TimeZone = 'UTC';
CREATE TEMP TABLE partitions_utc AS SELECT * FROM pg_temp.partitions_of('public');
SELECT count(*) AS cases, count(*) FILTER (WHERE result ~ '^[0-9A-Z]{5}$') > 10 AS some_refused,
       count(*) FILTER (WHERE result ~ '^{') > 150 AS most_made, count(*) FILTER (WHERE result = 'NULL') AS empty
FROM partitions_utc;
SET TimeZone = 'Australia/Lord_Howe';
SELECT count(*) AS differ_from_native_in_utc
FROM partitions_utc u FULL JOIN pg_temp.partitions_of('portable') p USING (n) WHERE u.result IS DISTINCT FROM p.result;
SET TimeZone = 'America/New_York';
SELECT count(*) AS differ_from_native_in_utc
FROM partitions_utc u FULL JOIN pg_temp.partitions_of('portable') p USING (n) WHERE u.result IS DISTINCT FROM p.result;
SELECT count(*) AS native_differs_from_itself_in_utc
FROM partitions_utc u FULL JOIN pg_temp.partitions_of('public') p USING (n) WHERE u.result IS DISTINCT FROM p.result;
RESET TimeZone;
-- The step, the bounds and the count, checked in the native edition's order: the layout and epoch,
-- then first and last (finite), then the step (no negative part, not zero, a tick at least), then
-- partition by partition (at most 100,000, each bound within the layout).
SELECT left(native, 5) = left(port, 5) AS same_sqlstate, stmt, native, port
FROM (VALUES ('''2026-01-01'', ''2026-02-01'', ''0'', ''default'', ''2025-01-01'''),
             ('''2026-01-01'', ''2026-02-01'', ''-1 day'', ''default'', ''2025-01-01'''),
             ('''2026-01-01'', ''2026-02-01'', ''1 month -1 day'', ''default'', ''2025-01-01'''),
             ('''2026-01-01'', ''2026-02-01'', ''-1 month 40 days'', ''default'', ''2025-01-01'''),
             ('''2026-01-01'', ''2026-02-01'', ''1 day -1 ms'', ''default'', ''2025-01-01'''),
             ('''2026-01-01'', ''2026-02-01'', ''0.5 ms'', ''default'', ''2025-01-01'''),
             ('''2026-01-01'', ''2026-02-01'', ''9 ms'', ''sonyflake'', ''2014-09-01'''),
             ('''-infinity'', ''2026-02-01'', ''1 day'', ''default'', ''2025-01-01'''),
             ('''2026-01-01'', ''infinity'', ''1 day'', ''default'', ''2025-01-01'''),
             ('''-infinity'', ''2026-02-01'', ''0'', ''bogus'', ''2025-01-01'''),
             ('''-infinity'', ''2026-02-01'', ''0'', ''default'', ''2025-01-01'''),
             ('''1900-01-01'', ''1900-02-01'', ''0'', ''default'', ''2025-01-01'''),
             ('''1900-01-01'', ''2200-01-01'', ''1 day'', ''default'', ''2025-01-01'''),
             ('''4713-01-01 BC'', ''294276-01-01'', ''1 ms'', ''default'', ''2025-01-01'''),
             ('''2094-09-07'', ''2094-09-07'', ''1 day'', ''default'', ''2025-01-01'''),
             ('''2026-01-01'', ''2026-01-01'', ''1000000 years'', ''default'', ''2025-01-01'''),
             ('''294260-01-01'', ''294250-01-01'', ''1 day'', ''default'', ''2025-01-01'''),
             ('''2025-01-01'', ''2025-01-01 00:01:40'', ''1 ms'', ''default'', ''2025-01-01''')) s(stmt),
     LATERAL (SELECT pg_temp.outcome('SELECT public.snowflake_partitions(' || stmt || ')') AS native,
                     pg_temp.outcome('SELECT portable.snowflake_partitions(' || stmt || ')') AS port) o;
SELECT (SELECT count(*) FROM snowflake_partitions('2025-01-01', '2025-01-01 00:01:39.999', '1 ms', 'default', '2025-01-01')) AS native_most,
       (SELECT count(*) FROM portable.snowflake_partitions('2025-01-01', '2025-01-01 00:01:39.999', '1 ms', 'default', '2025-01-01')) AS portable_most;
-- Infinite steps (PostgreSQL 17 and later): the same SQLSTATE in both editions.
SELECT count(*) FILTER (WHERE pg_temp.result(format('SELECT count(*) FROM public.snowflake_partitions(''2026-01-01'', ''2026-02-01'', %L, ''default'', ''2025-01-01'')', s))
                           <> pg_temp.result(format('SELECT count(*) FROM portable.snowflake_partitions(''2026-01-01'', ''2026-02-01'', %L, ''default'', ''2025-01-01'')', s))
                           OR pg_temp.result(format('SELECT public.snowflake_id_interval(%L, ''default'')', s))
                           <> pg_temp.result(format('SELECT portable.snowflake_id_interval(%L, ''default'')', s))) AS infinite_steps_differ
FROM unnest(ARRAY['infinity', '-infinity']) s
WHERE current_setting('server_version_num')::int >= 170000;
-- An IMMUTABLE function's result must not follow the caller's settings: the portable edition's
-- IMMUTABLE functions, called under a search_path that puts look-alike functions, operators and
-- types before pg_catalog's, and under another DateStyle, IntervalStyle and TimeZone, give what
-- they give under the defaults (the collation: above). The SQL ones are inlined into the caller's
-- query, and so parsed under its search_path: the look-alikes are those their bodies would find.
CREATE SCHEMA decoy;
CREATE FUNCTION decoy.plus(timestamp, interval) RETURNS timestamp LANGUAGE sql AS 'SELECT $1';
CREATE OPERATOR decoy.+ (LEFTARG = timestamp, RIGHTARG = interval, FUNCTION = decoy.plus);
CREATE FUNCTION decoy.shl(bigint, int) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint';
CREATE OPERATOR decoy.<< (LEFTARG = bigint, RIGHTARG = int, FUNCTION = decoy.shl);
CREATE FUNCTION decoy.int8_op(bigint, bigint) RETURNS bigint LANGUAGE sql AS 'SELECT 7::bigint';
CREATE OPERATOR decoy.+ (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = decoy.int8_op);
CREATE OPERATOR decoy.- (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = decoy.int8_op);
CREATE OPERATOR decoy.* (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = decoy.int8_op);
CREATE OPERATOR decoy.| (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = decoy.int8_op);
CREATE FUNCTION decoy.numeric_op(numeric, numeric) RETURNS numeric LANGUAGE sql AS 'SELECT 7::numeric';
CREATE OPERATOR decoy./ (LEFTARG = numeric, RIGHTARG = numeric, FUNCTION = decoy.numeric_op);
CREATE OPERATOR decoy.- (LEFTARG = numeric, RIGHTARG = numeric, FUNCTION = decoy.numeric_op);
CREATE FUNCTION decoy.floor(numeric) RETURNS numeric LANGUAGE sql AS 'SELECT 7::numeric';
CREATE FUNCTION decoy.make_timestamp(int, int, int, int, int, float8) RETURNS timestamp LANGUAGE sql AS 'SELECT ''2000-01-01''::timestamp';
CREATE FUNCTION decoy.concat_ws(text, int, int, int) RETURNS text LANGUAGE sql AS 'SELECT ''bogus''::text';
CREATE DOMAIN decoy.int4 AS bigint CHECK (VALUE < 0);
CREATE DOMAIN decoy.int8 AS bigint CHECK (VALUE < 0);
CREATE FUNCTION decoy.isfinite(timestamptz) RETURNS boolean LANGUAGE sql AS 'SELECT false';
CREATE FUNCTION decoy.btrim(text, text) RETURNS text LANGUAGE sql AS 'SELECT ''bogus''::text';
CREATE FUNCTION decoy.translate(text, text, text) RETURNS text LANGUAGE sql AS 'SELECT ''bogus''::text';
CREATE FUNCTION decoy.strpos(text, text) RETURNS int LANGUAGE sql AS 'SELECT 0';
CREATE FUNCTION pg_temp.immutable_results() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(' | ',
        portable.snowflake_shard(8405005, ' Default '), portable.snowflake_seq(8405005, E'\t39/16/8@10ms '),
        extract(epoch FROM portable.snowflake_timestamp(8813286522880, '39/16/8@10ms', '2014-09-01+00')),
        (SELECT extract(epoch FROM ts) || ' ' || shard || ' ' || seq FROM portable.snowflake_decode(123456789012345, 'twitter', '2010-11-04 01:42:54.657+00')),
        portable.snowflake_min_id('2026-01-01 12:34:56.789+00', 'default', '2025-01-01+00'),
        portable.snowflake_max_id('2026-01-01 12:34:56.789+00', 'javascript', '2025-01-01+00'),
        portable.snowflake_compose('2026-01-01 12:34:56.789+00', 15, 255, 'javascript', '2025-01-01+00'),
        portable.snowflake_id_interval('1 day', 'sonyflake'),
        (SELECT array_agg(row(extract(epoch FROM starts), extract(epoch FROM ends), lower_id, upper_id))::text
         FROM portable.snowflake_partitions('2026-01-31+00', '2026-04-30+00', '1 month', 'default', '2025-01-01+00')),
        portable.snowflake_to_text(8405005), portable.snowflake_from_text('0000000080G0D'),
        portable.uuid_to_ulid('0190b6a4-6c6e-7c2e-9f3a-2b1c0d9e8f7a'), portable.ulid_to_uuid('01J2VA8V3EFGQ9YEHB3G6SX3VT'))
$$;
CREATE TEMP TABLE immutable_defaults AS SELECT pg_temp.immutable_results() AS r;
SET search_path = decoy, pg_catalog, pg_temp;
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = 'sql_standard';
SET TimeZone = 'Asia/Kathmandu';
SELECT r = pg_temp.immutable_results() AS same_under_other_settings FROM immutable_defaults;
RESET search_path;
RESET DateStyle;
RESET IntervalStyle;
RESET TimeZone;
DROP SCHEMA decoy CASCADE;
-- The IMMUTABLE functions, and the helpers in snowflake_id_layout, are plain functions (not
-- SECURITY DEFINER), STRICT and PARALLEL SAFE, and name nothing of snowflake_id_portable (the
-- counters and the configuration): a generated column, an index or a CHECK made of them outlives
-- the edition's counters. The PL/pgSQL ones pin their search_path to pg_catalog; the SQL ones have
-- no SET, so that they are inlined (and name everything with its schema, as tested above). None is
-- listed here.
SELECT p.oid::regprocedure AS function, l.lanname, p.prosecdef, p.proisstrict, p.proparallel, p.proconfig
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE (p.pronamespace = 'portable'::regnamespace AND p.provolatile = 'i' OR p.pronamespace = 'snowflake_id_layout'::regnamespace)
  AND (p.prosecdef OR NOT p.proisstrict OR p.proparallel <> 's' OR p.provolatile <> 'i' OR p.prosrc LIKE '%snowflake_id_portable%'
       OR l.lanname NOT IN ('sql', 'plpgsql')
       OR p.proconfig IS DISTINCT FROM CASE WHEN l.lanname = 'plpgsql' THEN '{"search_path=pg_catalog, pg_temp"}'::text[] END)
ORDER BY 1::text;
-- The readers in SQL are inlined into the query that calls them, and their layout computed when it
-- is planned: the plan names the helpers they call, with the layout as a constant, not the reader.
CREATE TEMP TABLE inlined_ids (id bigint, t timestamptz);
CREATE FUNCTION pg_temp.plan_of(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    line text;
    plan text := '';
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP
        plan := plan || line || chr(10);
    END LOOP;
    RETURN plan;
END $$;
SELECT f, plan LIKE '%snowflake_id_layout.%' AND plan NOT LIKE '%portable.%' AS inlined,
       plan NOT LIKE '%named(%' AS layout_at_plan_time
FROM unnest(ARRAY['snowflake_timestamp(id, ''default'', ''2025-01-01+00'')', 'snowflake_shard(id, ''default'')',
                  'snowflake_seq(id, ''twitter'')', 'snowflake_min_id(t, ''sonyflake'', ''2014-09-01+00'')',
                  'snowflake_max_id(t, ''javascript'', ''2025-01-01+00'')']) f,
     LATERAL pg_temp.plan_of('SELECT portable.' || f || ' FROM pg_temp.inlined_ids') plan;
SELECT count(*) AS immutable_functions FROM pg_proc WHERE pronamespace = 'portable'::regnamespace AND provolatile = 'i';
-- What PUBLIC may do: mint and read, never configure or reach the counters.
CREATE ROLE sfid_portable_plain;
SET ROLE sfid_portable_plain;
SELECT portable.snowflake_next(9) > 0 AS mints, portable.snowflake_shard(portable.snowflake_next(9)) AS shard,
       portable.snowflake_shard(portable.snowflake_next(9), 'default') AS shard_by_layout,
       snowflake_id_layout.widths(' Twitter ') AS helper;
SELECT portable.snowflake_portable_configure(shards => '1');
\echo :LAST_ERROR_SQLSTATE
SELECT nextval('snowflake_id_portable.owned_words');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_id_portable.config;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE sfid_portable_plain;
