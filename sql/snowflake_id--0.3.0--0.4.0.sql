-- snowflake_id 0.3.0 -> 0.4.0
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.4.0'" to load this file. \quit

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

-- A restore that loads a row the record already has (a data-only refresh from a dump of the same
-- database) keeps that one row with the later floor, rather than fail on the unique index and leave
-- the older floor in force (sql/finalize.sql).
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

-- A floor still "nothing minted" (-infinity) after 0.3.0 is one whose first in-place write
-- failed (a lock, a minor release without the in-place API) or one of a database that minted
-- nothing: either way it is not known. It starts unknown, as a new record does since 0.4.0, so
-- that a dump of it makes its restore wait out the horizon at worst; the database's next first id
-- waits as long as a call may wait, once, and writes its floor. Only where such a row exists: the
-- record's statement trigger fires for an UPDATE that changes nothing too, and would hold back every
-- id of the database until the update commits (src/runtime/space.rs, record changes).
DO $$
BEGIN
    IF EXISTS (SELECT FROM snowflake_id_private.snowflake_id_space WHERE minted_before = '-infinity') THEN
        UPDATE snowflake_id_private.snowflake_id_space SET minted_before = 'infinity'
        WHERE minted_before = '-infinity';
    END IF;
END $$;
