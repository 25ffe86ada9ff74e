-- Key-free text forms: fixed width, sorting like the values, strict parsing (22P02).
CREATE EXTENSION snowflake_id;
\set VERBOSITY default
SELECT snowflake_to_text(0) AS zero, snowflake_to_text(9223372036854775807) AS largest,
       snowflake_from_text('7ZZZZZZZZZZZZ') AS back, snowflake_from_text('7zzzzzzzzzzzz') AS either_case;
-- The RFC 9562 UUIDv7 example and its ULID text.
SELECT uuid_to_ulid('017F22E2-79B0-7CC3-98C4-DC0C0C07398F') AS ulid,
       ulid_to_uuid('01FWHE4YDGFK1SHH6W1G60EECF') AS uuid,
       ulid_to_uuid('7ZZZZZZZZZZZZZZZZZZZZZZZZZ') AS largest;
-- Round trips, and text order is id order.
WITH ids AS (SELECT snowflake_next(1) AS id FROM generate_series(1, 1000)
             UNION ALL SELECT (random() * 9223372036854775807)::bigint FROM generate_series(1, 1000))
SELECT bool_and(snowflake_from_text(snowflake_to_text(id)) = id) AS round_trip,
       bool_and(length(snowflake_to_text(id)) = 13) AS width_13,
       count(*) FILTER (WHERE (a < b) <> (snowflake_to_text(a) COLLATE "C" < snowflake_to_text(b) COLLATE "C")) AS misordered
FROM (SELECT id, id AS a, lead(id) OVER (ORDER BY random()) AS b FROM ids) s WHERE b IS NOT NULL;
WITH u AS (SELECT uuidv7_next() AS id FROM generate_series(1, 1000) UNION ALL SELECT gen_random_uuid() FROM generate_series(1, 1000))
SELECT bool_and(ulid_to_uuid(uuid_to_ulid(id)) = id) AS round_trip,
       count(*) FILTER (WHERE (a < b) <> (uuid_to_ulid(a) COLLATE "C" < uuid_to_ulid(b) COLLATE "C")) AS misordered
FROM (SELECT id, id AS a, lead(id) OVER (ORDER BY random()) AS b FROM u) s WHERE b IS NOT NULL;
-- Refused: a negative id (22003); wrong length, a character outside the alphabet (the
-- ambiguous I, L, O, U included), a value too large, garbage, a huge text (22P02).
SELECT snowflake_to_text(-1);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_text('000000000000');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_text('00000O0000000');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_text('8000000000000');
\echo :LAST_ERROR_SQLSTATE
SELECT ulid_to_uuid('80000000000000000000000000');
\echo :LAST_ERROR_SQLSTATE
SELECT ulid_to_uuid('01FWHE4YDGFK1SHH6W1G60EEC-');
\echo :LAST_ERROR_SQLSTATE
SELECT ulid_to_uuid(repeat('Z', 100000));
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_text(E'0000000000\x01\x7f\t');
\echo :LAST_ERROR_SQLSTATE
