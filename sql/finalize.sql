-- The install script's hand-written part, run after the functions pgrx derives from the Rust
-- signatures (src/lib.rs: extension_sql_file!(..., finalize)). It holds what pgrx cannot write:
-- functions declared in SQL (a hand-written entry point, text read as bytes, OUT parameters),
-- the record of the id space, the statistics view, comments and every grant. The update scripts
-- (sql/snowflake_id--A--B.sql) repeat the statements of this file that each release changed;
-- pg_test/upgrade.sh checks that an updated database has the catalog of a fresh install.

-- ---------------------------------------- Snowflake ids -----------------------------------------

-- Both snowflake_next functions have hand-written fmgr entries (src/api/snowflake.rs), which
-- serve the common case and hand everything else to the pgrx wrapper of the guarded function.
-- CALLED ON NULL INPUT: a NULL shard is an error (22004), not a NULL key.
CREATE FUNCTION snowflake_next(shard int) RETURNS bigint
LANGUAGE c VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'snowflake_next_fast';
COMMENT ON FUNCTION snowflake_next(int) IS 'The next snowflake id for a shard: time, shard and sequence in 63 bits';

-- From the shards this server owns. The entry point and STRICT (which means nothing without
-- arguments) are what pgrx declared up to 0.3.0, so every version's catalog entry is the same.
CREATE FUNCTION snowflake_next() RETURNS bigint
LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'snowflake_next_default_wrapper';

-- snowflake_decode returns a record with OUT parameters, so it serves both SELECT * FROM
-- snowflake_decode(id) and (snowflake_decode(id)).shard. pgrx 0.18 has no OUT-parameter return,
-- so it is declared in SQL over the three readers pgrx declares earlier in the script.
CREATE FUNCTION snowflake_decode(id bigint, OUT ts timestamptz, OUT shard int, OUT seq int)
RETURNS record
LANGUAGE sql STABLE STRICT PARALLEL SAFE
AS $$ SELECT @extschema@.snowflake_timestamp(id), @extschema@.snowflake_shard(id), @extschema@.snowflake_seq(id) $$;
COMMENT ON FUNCTION snowflake_decode(bigint) IS 'The creation time (start of its tick), shard and sequence of a snowflake id';

-- The readers again, with the layout and epoch as arguments instead of the server's settings:
-- IMMUTABLE, so that generated columns, expression indexes, CHECK constraints and partitioning tools
-- can use them. The layout is read as bytes (src/api/snowflake.rs), which pgrx would declare bytea.
CREATE FUNCTION snowflake_timestamp(id bigint, layout text, epoch timestamptz) RETURNS timestamptz
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'snowflake_timestamp_in_wrapper';
COMMENT ON FUNCTION snowflake_timestamp(bigint, text, timestamptz) IS 'The start of the tick a snowflake id was minted in, under the layout and epoch given';
CREATE FUNCTION snowflake_shard(id bigint, layout text) RETURNS int
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'snowflake_shard_in_wrapper';
COMMENT ON FUNCTION snowflake_shard(bigint, text) IS 'The shard a snowflake id was minted for, under the layout given';
CREATE FUNCTION snowflake_seq(id bigint, layout text) RETURNS int
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'snowflake_seq_in_wrapper';
COMMENT ON FUNCTION snowflake_seq(bigint, text) IS 'A snowflake id''s position in its shard''s tick, under the layout given';
CREATE FUNCTION snowflake_decode(id bigint, layout text, epoch timestamptz, OUT ts timestamptz, OUT shard int, OUT seq int)
RETURNS record
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT @extschema@.snowflake_timestamp(id, layout, epoch), @extschema@.snowflake_shard(id, layout), @extschema@.snowflake_seq(id, layout) $$;
COMMENT ON FUNCTION snowflake_decode(bigint, text, timestamptz) IS 'The creation time (start of its tick), shard and sequence of a snowflake id, under the layout and epoch given';
CREATE FUNCTION snowflake_min_id(ts timestamptz, layout text, epoch timestamptz) RETURNS bigint
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'snowflake_min_id_in_wrapper';
COMMENT ON FUNCTION snowflake_min_id(timestamptz, text, timestamptz) IS 'The smallest id any shard can mint in the tick holding ts, under the layout and epoch given';
CREATE FUNCTION snowflake_max_id(ts timestamptz, layout text, epoch timestamptz) RETURNS bigint
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'snowflake_max_id_in_wrapper';
COMMENT ON FUNCTION snowflake_max_id(timestamptz, text, timestamptz) IS 'The largest id any shard can mint in the tick holding ts, under the layout and epoch given';

-- For tables partitioned by id into spans of time: how many ids a span holds (pg_partman's integer
-- interval), and the bounds of the partitions that cover a time range, step by step in UTC (calendar
-- months included, src/core/partition.rs). A partition's bounds are FROM (lower_id) TO (upper_id),
-- upper_id being the next one's lower_id. Both read the layout as bytes, as the readers do.
CREATE FUNCTION snowflake_id_interval(span interval, layout text) RETURNS bigint
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'snowflake_id_interval_wrapper';
COMMENT ON FUNCTION snowflake_id_interval(interval, text) IS 'How many ids a span of time holds across every shard of a layout: a partition''s width';
CREATE FUNCTION snowflake_partitions(first timestamptz, last timestamptz, step interval, layout text, epoch timestamptz,
                                     OUT starts timestamptz, OUT ends timestamptz, OUT lower_id bigint, OUT upper_id bigint)
RETURNS SETOF record
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'snowflake_partitions_wrapper';
COMMENT ON FUNCTION snowflake_partitions(timestamptz, timestamptz, interval, text, timestamptz) IS 'The id bounds of partitions of one step each, in UTC, from first until one holds last';

-- A backfill's ids: the id of a tick, shard and position, for rows of past times on a shard no
-- server mints for (docs/partitioning.md).
CREATE FUNCTION snowflake_compose(ts timestamptz, shard int, seq int, layout text, epoch timestamptz) RETURNS bigint
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'snowflake_compose_wrapper';
COMMENT ON FUNCTION snowflake_compose(timestamptz, int, int, text, timestamptz) IS 'The snowflake id of a time, shard and position under the layout and epoch given';

-- ------------------------------------------- Layouts --------------------------------------------

-- Declared here because the layout is read as bytes (pgrx's &str panics on text that is not UTF-8),
-- which pgrx would declare as bytea.
CREATE FUNCTION snowflake_layout(layout text DEFAULT NULL, epoch timestamptz DEFAULT NULL)
RETURNS TABLE (layout text, epoch timestamptz, time_bits int, shard_bits int, seq_bits int, tick_ms int,
               max_shard int, ids_per_ms double precision, ids_per_second bigint,
               last_timestamp timestamptz, lifetime_years double precision)
LANGUAGE c STABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'snowflake_layout_wrapper';

-- ---------------------------------- The record of the id space ----------------------------------

-- The database's record of its id space (crate::runtime::space): the layout and epoch its
-- snowflake ids are made under, written when the extension is created and dumped with the data,
-- and the floor of the ids minted in it (minted_before), which the extension advances in place and
-- a dump or pg_upgrade carries. A restore into a database that already has the extension adds the
-- dumped rows to its own: any row that names another space than the server's makes snowflake_next
-- refuse, and the latest floor counts. A row without a floor (a dump from 0.2.0, a row a DBA adds)
-- gets 'infinity': unknown. So does the row written here: the floor is written in place by the
-- first id past it, and where that write fails (a minor release without the in-place API, the row
-- locked), 'infinity' makes a restore wait out the horizon, where '-infinity' (nothing minted)
-- would make it wait for nothing. On the server that runs CREATE EXTENSION the first id does not
-- wait (the trigger counts the database as checked) and writes a floor of its own; elsewhere the
-- first id waits out the horizon once. The trigger makes backends that already checked read it
-- again. Its replica identity is a unique index on the columns the extension never writes in
-- place, so that a publication FOR ALL TABLES replicates its UPDATEs and DELETEs (the floors differ on each side:
-- logical replication does not carry in-place writes). It lives in a schema of its own that PUBLIC
-- may not use: a role that can name a table can lock it (a PREPARE locks before privileges are
-- checked, CREATE RULE asks for ACCESS EXCLUSIVE before ownership is), and a lock held with a
-- stronger request queued behind would hold up the first ids of new sessions. Naming needs USAGE
-- on the schema, checked before any lock is taken. The database's owner keeps USAGE and SELECT, so
-- that its pg_dump dumps the rows.
CREATE SCHEMA snowflake_id_private;
COMMENT ON SCHEMA snowflake_id_private IS 'The snowflake_id extension''s record of this database''s id space; PUBLIC may not use it';
GRANT USAGE ON SCHEMA snowflake_id_private TO pg_database_owner;
CREATE TABLE snowflake_id_private.snowflake_id_space (
    layout text NOT NULL,
    epoch timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    minted_before timestamptz NOT NULL DEFAULT 'infinity'
);
COMMENT ON TABLE snowflake_id_private.snowflake_id_space IS 'The layout and epoch this database''s snowflake ids were minted under; checked before the first id of each session';
COMMENT ON COLUMN snowflake_id_private.snowflake_id_space.minted_before IS 'Every id minted in this database lies before this time (-infinity: none yet; infinity: unknown); advanced by the extension';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_private.snowflake_id_space', '');
-- Not readable by PUBLIC; the database's owner reads it, so that its pg_dump dumps the rows.
REVOKE ALL ON snowflake_id_private.snowflake_id_space FROM PUBLIC;
GRANT SELECT ON snowflake_id_private.snowflake_id_space TO pg_database_owner;
CREATE UNIQUE INDEX snowflake_id_space_key ON snowflake_id_private.snowflake_id_space (layout, epoch, recorded_at);
ALTER TABLE snowflake_id_private.snowflake_id_space REPLICA IDENTITY USING INDEX snowflake_id_space_key;
-- VOLATILE, PARALLEL UNSAFE: it moves a counter in shared memory, and only a trigger calls it.
CREATE FUNCTION snowflake_id_space_changed() RETURNS trigger
LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'snowflake_id_space_changed';
REVOKE ALL ON FUNCTION snowflake_id_space_changed() FROM PUBLIC;
CREATE TRIGGER snowflake_id_space_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON snowflake_id_private.snowflake_id_space
FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_space_changed();
ALTER TABLE snowflake_id_private.snowflake_id_space ENABLE ALWAYS TRIGGER snowflake_id_space_changed;
-- A restore that loads a row the record already has (a data-only refresh from a dump of the same
-- database: the same layout, epoch and record time) keeps that one row with the later floor, or
-- unknown if either is, rather than fail on the unique index and leave the older floor in force.
-- It runs as its owner (a superuser, as CREATE EXTENSION makes it), since reading the row it
-- merges into needs SELECT, which pg_write_all_data, a role that may write the record, lacks; it
-- changes only the floor of the row with the loaded row's identity, as that role could.
CREATE FUNCTION snowflake_id_private.snowflake_id_space_merge() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- A row without a floor is not merged: the column's NOT NULL refuses it.
    IF NEW.minted_before IS NULL THEN
        RETURN NEW;
    END IF;
    UPDATE snowflake_id_private.snowflake_id_space s
    SET minted_before = greatest(s.minted_before, NEW.minted_before)
    WHERE s.layout = NEW.layout AND s.epoch = NEW.epoch AND s.recorded_at = NEW.recorded_at;
    IF FOUND THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION snowflake_id_private.snowflake_id_space_merge() FROM PUBLIC;
CREATE TRIGGER snowflake_id_space_merge BEFORE INSERT ON snowflake_id_private.snowflake_id_space
FOR EACH ROW EXECUTE FUNCTION snowflake_id_private.snowflake_id_space_merge();
ALTER TABLE snowflake_id_private.snowflake_id_space ENABLE ALWAYS TRIGGER snowflake_id_space_merge;
INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch) SELECT layout, epoch FROM snowflake_layout();

-- ------------------------------------------ Text forms ------------------------------------------

-- Declared here because the text arguments are read as bytes (pgrx's &str panics on text that is
-- not UTF-8), which pgrx would declare as bytea.
CREATE FUNCTION snowflake_from_text(t text) RETURNS bigint
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'snowflake_from_text_wrapper';
CREATE FUNCTION ulid_to_uuid(t text) RETURNS uuid
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ulid_to_uuid_wrapper';

-- ------------------------------------------ Public ids ------------------------------------------

-- The text arguments are read as bytes, as for the text forms; the public-id keys are for
-- pg_monitor to list, not PUBLIC.
CREATE FUNCTION snowflake_to_public(id bigint, context text DEFAULT '') RETURNS text
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'snowflake_to_public_wrapper';
CREATE FUNCTION snowflake_from_public(token text, context text DEFAULT '') RETURNS bigint
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'snowflake_from_public_wrapper';
CREATE FUNCTION uuidv7_to_public(id uuid, context text DEFAULT '') RETURNS uuid
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'uuidv7_to_public_wrapper';
CREATE FUNCTION uuidv7_from_public(token uuid, context text DEFAULT '') RETURNS uuid
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'uuidv7_from_public_wrapper';
CREATE FUNCTION uuidv7_public_candidates(token uuid, context text DEFAULT '') RETURNS uuid[]
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'uuidv7_public_candidates_wrapper';
REVOKE ALL ON FUNCTION snowflake_public_keys() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_public_keys() TO pg_monitor;

-- ------------------------------------------ Conversion ------------------------------------------

-- With search_path fixed, so that a caller's objects cannot stand in for the catalogs' or the
-- extension's, and row_security off, so that a row policy would make a query over a user's table
-- fail rather than miss rows. (None runs: the stored ids are read by OID below the query layer,
-- where no policy applies; src/runtime/convert.rs.)
CREATE FUNCTION snowflake_convert(tbl regclass, col name, drop_sequence boolean DEFAULT false, dry_run boolean DEFAULT false)
RETURNS SETOF text
LANGUAGE c VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET row_security = off
AS 'MODULE_PATHNAME', 'snowflake_convert_wrapper';
CREATE FUNCTION snowflake_unconvert(tbl regclass, col name, dry_run boolean DEFAULT false)
RETURNS SETOF text
LANGUAGE c VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET row_security = off
AS 'MODULE_PATHNAME', 'snowflake_unconvert_wrapper';

-- -------------------------------- Statistics and the reservation --------------------------------

-- The statistics show every database's shard activity, and the reservation's writes the server's
-- mint rate, so, as PostgreSQL does for its own cluster-wide statistics, they are for pg_monitor
-- (and superusers), not PUBLIC.
CREATE VIEW snowflake_id_stats AS SELECT * FROM snowflake_id_stats();
COMMENT ON VIEW snowflake_id_stats IS 'Ids issued, leads, waits, clock steps back and errors per generator, since start or the last reset';
REVOKE ALL ON FUNCTION snowflake_id_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_id_stats() TO pg_monitor;
REVOKE ALL ON snowflake_id_stats FROM PUBLIC;
GRANT SELECT ON snowflake_id_stats TO pg_monitor;
REVOKE ALL ON FUNCTION snowflake_id_stats_reset() FROM PUBLIC;
REVOKE ALL ON FUNCTION snowflake_id_reservation() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_id_reservation() TO pg_monitor;

REVOKE ALL ON FUNCTION snowflake_id_advance(timestamptz) FROM PUBLIC;

-- --------------------------------------- The fleet check ----------------------------------------

-- Declared here because the peers are taken as the array itself (src/api/fleet.rs), which pgrx
-- would declare as bytea[]. The same declaration pgrx wrote up to 0.3.0, so the catalog is the same.
CREATE FUNCTION snowflake_fleet_check(peers text[], max_skew interval DEFAULT '50 ms', timeout interval DEFAULT '5 s')
RETURNS TABLE (peer text, "check" text, ok boolean, detail text, figures jsonb)
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'snowflake_fleet_check_wrapper';

-- snowflake_fleet_info() is for pg_monitor, like the statistics it summarises; the check connects
-- out of the server, so it is for superusers unless granted.
REVOKE ALL ON FUNCTION snowflake_fleet_info() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_fleet_info() TO pg_monitor;
REVOKE ALL ON FUNCTION snowflake_fleet_check(text[], interval, interval) FROM PUBLIC;
