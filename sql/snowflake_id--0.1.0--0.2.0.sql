-- snowflake_id 0.1.0 -> 0.2.0
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.2.0'" to load this file. \quit

-- The statistics show every database's shard activity: for pg_monitor (and superusers), as
-- PostgreSQL's own cluster-wide statistics are, no longer for PUBLIC.
REVOKE ALL ON FUNCTION snowflake_id_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_id_stats() TO pg_monitor;
REVOKE ALL ON snowflake_id_stats FROM PUBLIC;
GRANT SELECT ON snowflake_id_stats TO pg_monitor;
