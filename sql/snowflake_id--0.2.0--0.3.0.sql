-- snowflake_id 0.2.0 -> 0.3.0
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.3.0'" to load this file. \quit
