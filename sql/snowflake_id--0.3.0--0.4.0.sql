-- snowflake_id 0.3.0 -> 0.4.0
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.4.0'" to load this file. \quit
