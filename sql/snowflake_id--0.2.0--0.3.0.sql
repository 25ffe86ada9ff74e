-- snowflake_id 0.2.0 -> 0.3.0
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.3.0'" to load this file. \quit

-- The trigger function on snowflake_id_space runs only as that table's trigger (a direct call is
-- refused with 39P01), and no role but a superuser may attach it elsewhere.
REVOKE ALL ON FUNCTION snowflake_id_space_changed() FROM PUBLIC;

-- The reservation's figures (how often it is written) tell the server's mint rate: for pg_monitor
-- (and superusers), as the statistics are.
REVOKE ALL ON FUNCTION snowflake_id_reservation() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_id_reservation() TO pg_monitor;
