-- snowflake_id 0.2.0 -> 0.3.0
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.3.0'" to load this file. \quit

-- The trigger function on snowflake_id_space runs only as that table's trigger (a direct call is
-- refused with 39P01), and no role but a superuser may attach it elsewhere.
REVOKE ALL ON FUNCTION snowflake_id_space_changed() FROM PUBLIC;

-- The reservation's figures (how often it is written) tell the server's mint rate: for pg_monitor
-- (and superusers), as the statistics are.
REVOKE ALL ON FUNCTION snowflake_id_reservation() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_id_reservation() TO pg_monitor;

-- The floor of the ids minted in the database, carried by dumps and pg_upgrade; it replaces the
-- scan of every generator column's index at the first mint. Existing rows start from the
-- server's reservation, which lies above every id this server minted (and above every stored id
-- 0.2.0's scan raised it past); without the preload, from 'infinity' (unknown), which makes the
-- next start raise the generators as far as a call may wait, once.
ALTER TABLE snowflake_id_space ADD COLUMN minted_before timestamptz NOT NULL DEFAULT 'infinity';
COMMENT ON COLUMN snowflake_id_space.minted_before IS 'Every id minted in this database lies before this time (-infinity: none yet; infinity: unknown); advanced by the extension';
DO $$
BEGIN
    UPDATE snowflake_id_space SET minted_before = r.reserved_until
    FROM snowflake_id_reservation() r WHERE r.reserved_until IS NOT NULL;
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    NULL; -- not preloaded: the floor stays unknown
END
$$;
