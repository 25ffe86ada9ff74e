-- The database's record of its id space (snowflake_id_space), checked before the first id of
-- each session. Every value printed here is independent of the clock.
CREATE EXTENSION snowflake_id;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
\set VERBOSITY default

-- CREATE EXTENSION recorded the server's layout and epoch, and an unknown floor ('infinity'),
-- which the first id replaces with a floor of its own (a write that fails leaves a restore
-- waiting out the horizon, never "nothing minted"); pg_dump dumps the table's rows. Only superusers write it; PUBLIC does not read it, the
-- database's owner does (its pg_dump dumps the rows). It lives in a schema of its own that
-- PUBLIC may not use, so that no plain role can even name it, and so lock it.
SELECT layout, epoch, minted_before FROM snowflake_id_private.snowflake_id_space;
SELECT extconfig::regclass[] AS config_tables, extcondition FROM pg_extension WHERE extname = 'snowflake_id';
SELECT has_table_privilege('public', 'snowflake_id_private.snowflake_id_space', 'SELECT') AS public_reads,
       has_table_privilege('public', 'snowflake_id_private.snowflake_id_space', 'INSERT') AS public_writes,
       has_table_privilege('pg_database_owner', 'snowflake_id_private.snowflake_id_space', 'SELECT') AS owner_reads,
       has_schema_privilege('public', 'snowflake_id_private', 'USAGE') AS public_names,
       has_schema_privilege('public', 'snowflake_id_private', 'CREATE') AS public_creates,
       has_schema_privilege('pg_database_owner', 'snowflake_id_private', 'USAGE') AS owner_names;

-- A row the record already has (the same layout, epoch and recorded_at: a data-only refresh from
-- a dump of the same database) is merged into it, keeping the later floor, or unknown if either
-- is: never a second row, nor a unique violation that leaves the older floor in force.
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, recorded_at, minted_before)
SELECT layout, epoch, '2024-06-01 00:00+00', '-infinity' FROM snowflake_layout();
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, recorded_at, minted_before)
SELECT layout, epoch, '2024-06-01 00:00+00', '2024-07-01 00:00+00' FROM snowflake_layout();
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, recorded_at, minted_before)
SELECT layout, epoch, '2024-06-01 00:00+00', '2024-06-15 00:00+00' FROM snowflake_layout();
SELECT count(*), max(minted_before) FROM snowflake_id_private.snowflake_id_space WHERE recorded_at = '2024-06-01 00:00+00';
-- So does a member of pg_write_all_data, who may write the record but not read it.
CREATE ROLE regress_sfid_writer IN ROLE pg_write_all_data;
SET ROLE regress_sfid_writer;
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, recorded_at, minted_before)
SELECT layout, epoch, '2024-06-01 00:00+00', '2024-08-01 00:00+00' FROM snowflake_layout();
RESET ROLE;
DROP ROLE regress_sfid_writer;
SELECT count(*), max(minted_before) FROM snowflake_id_private.snowflake_id_space WHERE recorded_at = '2024-06-01 00:00+00';
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, recorded_at, minted_before)
SELECT layout, epoch, '2024-06-01 00:00+00', 'infinity' FROM snowflake_layout();
SELECT count(*), max(minted_before) FROM snowflake_id_private.snowflake_id_space WHERE recorded_at = '2024-06-01 00:00+00';
DELETE FROM snowflake_id_private.snowflake_id_space WHERE recorded_at = '2024-06-01 00:00+00';

-- A row from another id space, as a restore of a database minted elsewhere adds it: a new
-- session refuses snowflake ids with 55000 and a hint naming both settings; UUIDv7 still mints.
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, recorded_at, minted_before)
VALUES ('twitter', '2020-01-01 00:00+00', '2024-01-01 00:00+00', '-infinity');
\c
SELECT snowflake_next(1);
\echo :LAST_ERROR_SQLSTATE
SELECT uuid_extract_version(uuidv7_next()) AS v;
-- Still refused on the next call, by the same session.
SELECT snowflake_next(1);
-- The same spelled differently is the same space: only the widths, tick and epoch count.
DELETE FROM snowflake_id_private.snowflake_id_space WHERE layout = 'twitter';
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, minted_before) VALUES ('41/13/9@1ms', '2025-01-01 00:00+00', '-infinity');
-- The refusing session sees the fix at its next call.
SELECT snowflake_next(1) > 0 AS mints;
\c
SELECT snowflake_next(1) > 0 AS mints;
-- A session that already minted sees a record changed afterwards: the table's trigger tells
-- every backend to read it again.
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, minted_before) VALUES ('twitter', '2020-01-01 00:00+00', '-infinity');
SELECT snowflake_next(1);
DELETE FROM snowflake_id_private.snowflake_id_space WHERE layout = 'twitter';
SELECT snowflake_next(1) > 0 AS mints_again;
-- The trigger fires where only replica triggers do (logical replication applying a change).
SET session_replication_role = replica;
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, minted_before) VALUES ('twitter', '2020-01-01 00:00+00', '-infinity');
SELECT snowflake_next(1);
\echo :LAST_ERROR_SQLSTATE
DELETE FROM snowflake_id_private.snowflake_id_space WHERE layout = 'twitter';
RESET session_replication_role;
SELECT snowflake_next(1) > 0 AS mints_again;
-- A change to the record cannot be prepared: its notice to other sessions is sent at commit.
BEGIN;
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, minted_before) SELECT layout, epoch, '-infinity' FROM snowflake_layout();
PREPARE TRANSACTION 'sf_record';
\echo :LAST_ERROR_SQLSTATE

-- The generators are PARALLEL UNSAFE (an id past the database's floor writes it): even with
-- parallel query forced, the first id of a session is minted and checked in the leader.
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, minted_before) VALUES ('41/13/9', '2021-01-01 00:00+00', '-infinity');
\c
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END, 'on', false) IS NOT NULL AS forced;
SELECT snowflake_next(1);
RESET ALL;
DELETE FROM snowflake_id_private.snowflake_id_space WHERE epoch = '2021-01-01 00:00+00';
\c
SET max_parallel_workers_per_gather = 2;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END, 'on', false) IS NOT NULL AS forced;
SELECT snowflake_next(1) > 0 AS mints_with_parallel_query_forced;
RESET ALL;

-- The floor (minted_before) carries what the tables hold: nothing reads them. Start afresh.
DELETE FROM snowflake_id_private.snowflake_id_space;
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, minted_before) SELECT layout, epoch, '-infinity' FROM snowflake_layout();
-- A wait for a reload, which a backend applies between statements: :wait50 is 50 statements
-- :wait, each of which sleeps a tenth of a second while the setting still has its old value (5 s
-- at most; nothing once it is in). Each wait below sets :wait, and hides its results.
\set wait10 ':wait :wait :wait :wait :wait :wait :wait :wait :wait :wait'
\set wait50 ':wait10 :wait10 :wait10 :wait10 :wait10'
ALTER SYSTEM SET snowflake_id.max_rewind_wait = '30s';
SELECT pg_reload_conf();
\o /dev/null
\set wait 'SELECT pg_sleep(0.1) WHERE current_setting(''snowflake_id.max_rewind_wait'') <> ''30s'';'
:wait50
\o
\c
-- Minting advances the floor in place, before the id is handed out, to the server's
-- reservation: after every id minted. A read-only transaction advances it too.
CREATE TABLE t_ids (id bigint PRIMARY KEY DEFAULT snowflake_next(3), note text);
INSERT INTO t_ids (note) VALUES ('first');
SELECT minted_before > snowflake_timestamp((SELECT max(id) FROM t_ids)) AS floor_after_every_id FROM snowflake_id_private.snowflake_id_space;
BEGIN READ ONLY;
SELECT snowflake_next(3) AS read_only_id \gset
COMMIT;
SELECT minted_before > snowflake_timestamp(:read_only_id) AS floor_after_a_read_only_id FROM snowflake_id_private.snowflake_id_space;

-- No role's data moves the generators: a plain role stores ids 20 s ahead of the clock (within
-- the 31 s a floor would be followed here), and the database's record changes, as a restore's
-- does. New ids stay with the clock, in that database and in every other.
CREATE ROLE sf_mallory;
GRANT CREATE ON SCHEMA public TO sf_mallory;
SET ROLE sf_mallory;
CREATE TABLE mallory_ids (id bigint PRIMARY KEY DEFAULT snowflake_next(5), u uuid DEFAULT uuidv7_next());
INSERT INTO mallory_ids VALUES (snowflake_min_id(clock_timestamp() + interval '20 s'), uuidv7_min_id(clock_timestamp() + interval '20 s'))
RETURNING id AS planted_id, u AS planted_u \gset
-- An index expression and extended statistics that raise for anyone but their owner: nothing
-- of the table is planned or read, so they never run.
CREATE FUNCTION public.sf_evil(int) RETURNS int IMMUTABLE LANGUAGE plpgsql
AS $$BEGIN IF current_user <> 'sf_mallory' THEN RAISE EXCEPTION 'user code ran as %', current_user; END IF; RETURN $1; END$$;
CREATE INDEX mallory_evil ON mallory_ids ((id + public.sf_evil(1)));
CREATE STATISTICS mallory_stats ON (id + public.sf_evil(2)), u FROM mallory_ids;
RESET ROLE;
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, minted_before) SELECT layout, epoch, '-infinity' FROM snowflake_layout();
\c
SELECT snowflake_next(5) < :planted_id AS snowflake_not_raised, uuidv7_next() < :'planted_u' AS uuidv7_not_raised;
DROP TABLE mallory_ids;
DROP FUNCTION public.sf_evil(int);
REVOKE CREATE ON SCHEMA public FROM sf_mallory;
DROP ROLE sf_mallory;

-- A restored row (a superuser's restore adds the dumped rows) with a floor ahead of the clock, as
-- a dump from a server whose clock ran ahead carries: new ids of both kinds lie after it.
SELECT clock_timestamp() + interval '300 ms' AS restored_floor \gset
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, minted_before) SELECT layout, epoch, :'restored_floor' FROM snowflake_layout();
\c
SELECT snowflake_timestamp(snowflake_next(3)) >= :'restored_floor' AS snowflake_after_floor,
       uuidv7_timestamp(uuidv7_next()) >= :'restored_floor' AS uuidv7_after_floor;

-- A row whose floor is unknown (a dump from 0.2.0 has no floor; the column's default is
-- 'infinity'): the generators go as far ahead as a call may wait (2 s here) less a quarter
-- second, and the backend that raised them records its reservation instead.
ALTER SYSTEM SET snowflake_id.max_rewind_wait = '1s';
SELECT pg_reload_conf();
\o /dev/null
\set wait 'SELECT pg_sleep(0.1) WHERE current_setting(''snowflake_id.max_rewind_wait'') <> ''1s'';'
:wait50
\o
SELECT clock_timestamp() AS before_unknown \gset
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch) SELECT layout, epoch FROM snowflake_layout();
\c
SELECT snowflake_timestamp(snowflake_next(3)) >= :'before_unknown'::timestamptz + interval '1700 ms' AS past_the_horizon,
       (SELECT count(*) FROM snowflake_id_private.snowflake_id_space WHERE minted_before = 'infinity') AS unknown_rows;

-- A floor further ahead than a call may wait (a restore onto a clock far behind): ids of both
-- kinds refuse in this database (58000) rather than mint below it, in a new session and in one
-- that already minted; ids resume once the record is fixed.
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, minted_before) SELECT layout, epoch, '2100-01-01+00' FROM snowflake_layout();
\set VERBOSITY sqlstate
SELECT snowflake_next(3);
\c
\set VERBOSITY sqlstate
SELECT snowflake_next(3);
SELECT uuidv7_next();
\set VERBOSITY default
DELETE FROM snowflake_id_private.snowflake_id_space WHERE minted_before = '2100-01-01+00';
SELECT snowflake_next(3) < snowflake_min_id('2090-01-01+00') AS minting_again;
ALTER SYSTEM RESET snowflake_id.max_rewind_wait;
SELECT pg_reload_conf();
