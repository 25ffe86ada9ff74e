-- The database's record of its id space (snowflake_id_space), checked before the first id of
-- each session. Every value printed here is independent of the clock.
CREATE EXTENSION snowflake_id;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
\set VERBOSITY default

-- CREATE EXTENSION recorded the server's layout and epoch; pg_dump dumps the table's rows.
SELECT layout, epoch FROM snowflake_id_space;
SELECT extconfig::regclass[] AS config_tables, extcondition FROM pg_extension WHERE extname = 'snowflake_id';
SELECT has_table_privilege('public', 'snowflake_id_space', 'SELECT') AS public_reads,
       has_table_privilege('public', 'snowflake_id_space', 'INSERT') AS public_writes;

-- A row from another id space, as a restore of a database minted elsewhere adds it: a new
-- session refuses snowflake ids with 55000 and a hint naming both settings; UUIDv7 still mints.
INSERT INTO snowflake_id_space (layout, epoch, recorded_at)
VALUES ('twitter', '2020-01-01 00:00+00', '2024-01-01 00:00+00');
\c
SELECT snowflake_next(1);
\echo :LAST_ERROR_SQLSTATE
SELECT uuid_extract_version(uuidv7_next()) AS v;
-- Still refused on the next call, by the same session.
SELECT snowflake_next(1);
-- The same spelled differently is the same space: only the widths, tick and epoch count.
DELETE FROM snowflake_id_space WHERE layout = 'twitter';
INSERT INTO snowflake_id_space (layout, epoch) VALUES ('41/13/9@1ms', '2025-01-01 00:00+00');
-- The refusing session sees the fix at its next call.
SELECT snowflake_next(1) > 0 AS mints;
\c
SELECT snowflake_next(1) > 0 AS mints;
-- A session that already minted sees a record changed afterwards: the table's trigger tells
-- every backend to read it again.
INSERT INTO snowflake_id_space (layout, epoch) VALUES ('twitter', '2020-01-01 00:00+00');
SELECT snowflake_next(1);
DELETE FROM snowflake_id_space WHERE layout = 'twitter';
SELECT snowflake_next(1) > 0 AS mints_again;
-- The trigger fires where only replica triggers do (logical replication applying a change).
SET session_replication_role = replica;
INSERT INTO snowflake_id_space (layout, epoch) VALUES ('twitter', '2020-01-01 00:00+00');
SELECT snowflake_next(1);
\echo :LAST_ERROR_SQLSTATE
DELETE FROM snowflake_id_space WHERE layout = 'twitter';
RESET session_replication_role;
SELECT snowflake_next(1) > 0 AS mints_again;
-- A change to the record cannot be prepared: its notice to other sessions is sent at commit.
BEGIN;
INSERT INTO snowflake_id_space (layout, epoch) SELECT layout, epoch FROM snowflake_layout();
PREPARE TRANSACTION 'sf_record';
\echo :LAST_ERROR_SQLSTATE

-- The first id of a session run by a parallel worker checks too (read-only catalog queries,
-- settings changed only at a saved nesting level).
INSERT INTO snowflake_id_space (layout, epoch) VALUES ('41/13/9', '2021-01-01 00:00+00');
\c
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END, 'on', false) IS NOT NULL AS forced;
SELECT snowflake_next(1);
RESET ALL;
DELETE FROM snowflake_id_space WHERE epoch = '2021-01-01 00:00+00';
\c
SET max_parallel_workers_per_gather = 2;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END, 'on', false) IS NOT NULL AS forced;
SELECT snowflake_next(1) > 0 AS mints_in_a_worker;
RESET ALL;

-- The first mint after a restore raises the generators above the ids a table already holds,
-- through its index: a row from the future (as a restore from a server whose clock ran ahead
-- leaves it) puts new ids above it. A restore adds the dumped record's rows, which is what
-- makes a database already checked since the start be scanned again; this one adds its own.
CREATE TABLE restored (id bigint PRIMARY KEY DEFAULT snowflake_next(3), note text);
INSERT INTO restored VALUES (snowflake_min_id(clock_timestamp() + interval '300 ms'), 'restored');
INSERT INTO snowflake_id_space (layout, epoch) SELECT layout, epoch FROM snowflake_layout();
\c
INSERT INTO restored (note) VALUES ('new');
SELECT (SELECT id FROM restored WHERE note = 'new') > (SELECT id FROM restored WHERE note = 'restored') AS above_restored;
-- A partitioned table is read through its leaf partitions, each alone through its own index.
CREATE TABLE parted (id bigint PRIMARY KEY DEFAULT snowflake_next(4), note text) PARTITION BY RANGE (id);
CREATE TABLE parted_lo PARTITION OF parted FOR VALUES FROM (MINVALUE) TO (1000);
CREATE TABLE parted_hi PARTITION OF parted FOR VALUES FROM (1000) TO (MAXVALUE);
INSERT INTO parted VALUES (snowflake_min_id(clock_timestamp() + interval '300 ms'), 'restored');
INSERT INTO snowflake_id_space (layout, epoch) SELECT layout, epoch FROM snowflake_layout();
\c
INSERT INTO parted (note) VALUES ('new');
SELECT (SELECT id FROM parted WHERE note = 'new') > (SELECT id FROM parted WHERE note = 'restored') AS above_restored;

-- No code of any role runs in the first mint's scan. A role that may create tables puts a
-- function into an index expression and into extended statistics; planning a query on the
-- table would run it (as whoever plans). The scan reads the index pages instead.
CREATE ROLE sf_mallory;
GRANT CREATE ON SCHEMA public TO sf_mallory;
SET ROLE sf_mallory;
CREATE FUNCTION public.sf_evil(int) RETURNS int IMMUTABLE LANGUAGE plpgsql
AS $$BEGIN IF current_user <> 'sf_mallory' THEN RAISE EXCEPTION 'user code ran as %', current_user; END IF; RETURN $1; END$$;
CREATE TABLE mallory_ids (id bigint PRIMARY KEY DEFAULT snowflake_next(5), x bigint);
CREATE INDEX mallory_evil ON mallory_ids ((x + public.sf_evil(1)));
CREATE STATISTICS mallory_stats ON (x + public.sf_evil(2)), id FROM mallory_ids;
RESET ROLE;
INSERT INTO snowflake_id_space (layout, epoch) SELECT layout, epoch FROM snowflake_layout();
\c
SELECT snowflake_next(1) > 0 AS mints_without_running_user_code;
DROP TABLE mallory_ids;
DROP FUNCTION public.sf_evil(int);
REVOKE CREATE ON SCHEMA public FROM sf_mallory;
DROP ROLE sf_mallory;

-- A stored id further ahead of the clock than a call may wait (2 s with the default settings) is
-- not followed: any role that can create a table could otherwise make every call on the server
-- refuse until then. A LOG line names the column.
CREATE TABLE far_ids (id bigint PRIMARY KEY DEFAULT snowflake_next(6));
INSERT INTO far_ids VALUES (snowflake_max_id(now() + interval '1 day'));
CREATE TABLE far_uuids (id uuid PRIMARY KEY DEFAULT uuidv7_next());
INSERT INTO far_uuids VALUES (uuidv7_max_id(now() + interval '1 day'));
INSERT INTO snowflake_id_space (layout, epoch) SELECT layout, epoch FROM snowflake_layout();
\c
SELECT snowflake_next(6) < (SELECT id FROM far_ids) AS snowflake_not_followed,
       uuidv7_next() < (SELECT id FROM far_uuids) AS uuidv7_not_followed,
       snowflake_next(1) > 0 AS still_mints;

-- A descending index keeps the largest id at its start: it is read from there.
CREATE TABLE desc_ids (id bigint DEFAULT snowflake_next(7), note text);
CREATE INDEX desc_ids_id ON desc_ids (id DESC);
INSERT INTO desc_ids VALUES (snowflake_min_id(now() - interval '1 day'), 'old'),
                            (snowflake_min_id(clock_timestamp() + interval '300 ms'), 'restored');
INSERT INTO snowflake_id_space (layout, epoch) SELECT layout, epoch FROM snowflake_layout();
\c
INSERT INTO desc_ids (note) VALUES ('new');
SELECT (SELECT id FROM desc_ids WHERE note = 'new') > (SELECT id FROM desc_ids WHERE note = 'restored') AS above_restored;
