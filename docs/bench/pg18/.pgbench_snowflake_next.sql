SELECT snowflake_next(7);
