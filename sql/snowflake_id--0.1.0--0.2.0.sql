-- snowflake_id 0.1.0 -> 0.2.0
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.2.0'" to load this file. \quit

-- The statistics show every database's shard activity: for pg_monitor (and superusers), as
-- PostgreSQL's own cluster-wide statistics are, no longer for PUBLIC.
REVOKE ALL ON FUNCTION snowflake_id_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_id_stats() TO pg_monitor;
REVOKE ALL ON snowflake_id_stats FROM PUBLIC;
GRANT SELECT ON snowflake_id_stats TO pg_monitor;

-- PostgreSQL 18's uuidv7() and the 17/18 UUID readers are now members on every major, from the
-- same C symbols, so that pg_upgrade and pg_dump between any two majors find the functions a
-- column default or an index names (0.1.0 created them on 14-17 and 14-16 only). CREATE OR
-- REPLACE keeps the existing ones (and whatever depends on them) and adds the missing ones.
CREATE OR REPLACE FUNCTION uuidv7() RETURNS uuid
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'uuidv7_wrapper';

CREATE OR REPLACE FUNCTION uuidv7(shift interval) RETURNS uuid
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'uuidv7_shifted_wrapper';

CREATE OR REPLACE FUNCTION uuid_extract_timestamp(id uuid) RETURNS timestamp with time zone
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'uuid_extract_timestamp_wrapper';

CREATE OR REPLACE FUNCTION uuid_extract_version(id uuid) RETURNS smallint
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'uuid_extract_version_wrapper';

-- The database's record of its id space: the layout and epoch its snowflake ids are made under,
-- dumped with the data and kept by pg_upgrade; snowflake_next refuses while it names another
-- space than the server's. A database updated from 0.1.0 records the server's settings now: its
-- ids were made under them, unless the settings changed since, which 0.1.0 could not tell.
CREATE TABLE snowflake_id_space (
    layout text NOT NULL,
    epoch timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE snowflake_id_space IS 'The layout and epoch this database''s snowflake ids were minted under; checked before the first id of each session';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_space', '');
GRANT SELECT ON snowflake_id_space TO PUBLIC;
ALTER TABLE snowflake_id_space REPLICA IDENTITY FULL;
-- VOLATILE, PARALLEL UNSAFE: it moves a counter in shared memory, and only a trigger calls it.
CREATE FUNCTION snowflake_id_space_changed() RETURNS trigger
LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'snowflake_id_space_changed';
CREATE TRIGGER snowflake_id_space_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON snowflake_id_space
FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_space_changed();
ALTER TABLE snowflake_id_space ENABLE ALWAYS TRIGGER snowflake_id_space_changed;
INSERT INTO snowflake_id_space (layout, epoch) SELECT layout, epoch FROM snowflake_layout();

-- Key-free text forms: 13 Crockford base32 characters for a snowflake id, ULID text for a UUID.
CREATE FUNCTION snowflake_to_text(id bigint) RETURNS text
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_to_text_wrapper';
CREATE FUNCTION snowflake_from_text(t text) RETURNS bigint
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'snowflake_from_text_wrapper';
CREATE FUNCTION uuid_to_ulid(id uuid) RETURNS text
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'uuid_to_ulid_wrapper';
CREATE FUNCTION ulid_to_uuid(t text) RETURNS uuid
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ulid_to_uuid_wrapper';

-- Public ids: keyed FF1 tokens of snowflake ids and version-4-looking forms of UUIDv7s. STABLE:
-- they read the key file, which stays the same for a statement.
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
CREATE FUNCTION snowflake_public_keys() RETURNS TABLE (version int, encodes boolean, fingerprint text)
STABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_public_keys_wrapper';
REVOKE ALL ON FUNCTION snowflake_public_keys() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_public_keys() TO pg_monitor;

-- The fleet check: this server's facts (pg_monitor), and a check of the peers (superusers).
CREATE FUNCTION snowflake_fleet_info() RETURNS jsonb
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_fleet_info_wrapper';
CREATE FUNCTION snowflake_fleet_check(peers text[], max_skew interval DEFAULT '50 ms', timeout interval DEFAULT '5 s')
RETURNS TABLE (peer text, "check" text, ok boolean, detail text, figures jsonb)
VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_fleet_check_wrapper';
REVOKE ALL ON FUNCTION snowflake_fleet_info() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_fleet_info() TO pg_monitor;
REVOKE ALL ON FUNCTION snowflake_fleet_check(text[], interval, interval) FROM PUBLIC;

-- Converting existing bigserial and identity columns to DEFAULT snowflake_next(), and back.
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
