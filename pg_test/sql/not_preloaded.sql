-- A server without shared_preload_libraries: the extension installs and reads ids, but the
-- generators refuse with SQLSTATE 55000 and say how to fix it.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
DROP EXTENSION IF EXISTS snowflake_id;
CREATE EXTENSION snowflake_id;
SELECT * FROM snowflake_decode((1000::bigint << 22) | (3 << 9) | 5);
SELECT snowflake_min_id('2025-01-01 00:00:01+00');
SELECT layout, max_shard FROM snowflake_layout();
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT snowflake_next(1);
\echo :LAST_ERROR_SQLSTATE
-- snowflake_next() on this server, whose shard list is the default '*', names the missing
-- preload too, not the shard list: the preload is what the server needs first.
SELECT snowflake_next();
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(1));
INSERT INTO t DEFAULT VALUES;
\echo :LAST_ERROR_SQLSTATE
