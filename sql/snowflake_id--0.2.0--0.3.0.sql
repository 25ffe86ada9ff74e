-- snowflake_id 0.2.0 -> 0.3.0
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.3.0'" to load this file. \quit

-- The trigger function on snowflake_id_space runs only as that table's trigger (a direct call is
-- refused with 39P01), and no role but a superuser may attach it elsewhere.
REVOKE ALL ON FUNCTION snowflake_id_space_changed() FROM PUBLIC;

-- The reservation's figures (how often it is written) tell the server's mint rate: for pg_monitor
-- (and superusers), as the statistics are.
REVOKE ALL ON FUNCTION snowflake_id_reservation() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_id_reservation() TO pg_monitor;

-- Only superusers, pg_read_all_data and the database's owner read the record. The generators
-- read it with the extension's own access, and never join its lock queue. It moves to a schema
-- of its own that PUBLIC may not use: a role that can name a table can lock it (a PREPARE locks
-- before privileges are checked, CREATE RULE asks for ACCESS EXCLUSIVE before ownership is), and
-- a lock held with a stronger request queued behind would hold up new sessions' first ids.
CREATE SCHEMA snowflake_id_private;
COMMENT ON SCHEMA snowflake_id_private IS 'The snowflake_id extension''s record of this database''s id space; PUBLIC may not use it';
GRANT USAGE ON SCHEMA snowflake_id_private TO pg_database_owner;
ALTER TABLE snowflake_id_space SET SCHEMA snowflake_id_private;
REVOKE ALL ON snowflake_id_private.snowflake_id_space FROM PUBLIC;
GRANT SELECT ON snowflake_id_private.snowflake_id_space TO pg_database_owner; -- its pg_dump dumps the rows

-- The floor of the ids minted in the database, carried by dumps and pg_upgrade; it replaces the
-- scan of every generator column's index at the first mint. Existing rows start from 'infinity'
-- (unknown): a 0.2.0 database may hold ids minted on another server (moved by pg_upgrade, or
-- restored), which this server's reservation says nothing about, so the database's first id waits
-- as long as a call may wait (snowflake_id.max_rewind_wait), once: at the first check since the
-- start that does not find the database checked already (at the latest, after the next restart).
ALTER TABLE snowflake_id_private.snowflake_id_space ADD COLUMN minted_before timestamptz NOT NULL DEFAULT 'infinity';
COMMENT ON COLUMN snowflake_id_private.snowflake_id_space.minted_before IS 'Every id minted in this database lies before this time (-infinity: none yet; infinity: unknown); advanced by the extension';
-- ADD COLUMN rewrites no row, and an in-place advance may not change a row's length: rewrite
-- every row with the column.
UPDATE snowflake_id_private.snowflake_id_space SET minted_before = 'infinity';

-- Logical replication of the record: the floors differ on each side, so its replica identity is
-- the columns the extension never writes in place (identical rows, from restoring one dump
-- twice, are one).
DELETE FROM snowflake_id_private.snowflake_id_space a USING snowflake_id_private.snowflake_id_space b
WHERE a.ctid < b.ctid AND (a.layout, a.epoch, a.recorded_at) = (b.layout, b.epoch, b.recorded_at);
CREATE UNIQUE INDEX snowflake_id_space_key ON snowflake_id_private.snowflake_id_space (layout, epoch, recorded_at);
ALTER TABLE snowflake_id_private.snowflake_id_space REPLICA IDENTITY USING INDEX snowflake_id_space_key;

-- The generators advance the database's floor, a write, which parallel mode forbids: a query that
-- mints runs without parallel workers. (Qualified: on 18, an unqualified uuidv7() is core's.)
ALTER FUNCTION @extschema@.snowflake_next(int) PARALLEL UNSAFE;
ALTER FUNCTION @extschema@.snowflake_next() PARALLEL UNSAFE;
ALTER FUNCTION @extschema@.uuidv7_next() PARALLEL UNSAFE;
ALTER FUNCTION @extschema@.uuidv7_next(interval) PARALLEL UNSAFE;
ALTER FUNCTION @extschema@.uuidv7() PARALLEL UNSAFE;
ALTER FUNCTION @extschema@.uuidv7(interval) PARALLEL UNSAFE;
