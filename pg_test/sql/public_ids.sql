-- Public ids: keyed, reversible tokens (FF1), key versions and rotation, tampering refused with
-- 22P02, contexts, the UUIDv7 public form, and what a plain role can and cannot reach.
-- pg_test/run.sh creates the key file empty with mode 0600; COPY rewrites its contents (COPY would
-- create a new file readable by others, which the extension refuses).
CREATE EXTENSION snowflake_id;
\set VERBOSITY default
CREATE FUNCTION pg_temp.keys(VARIADIC lines text[]) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('COPY (SELECT unnest(%L::text[])) TO %L', lines,
                 current_setting('data_directory') || '/' || current_setting('snowflake_id.public_keys_file'));
  RETURN 'written';
END $$;
-- No key: 55000, with a hint saying how to make one.
SELECT pg_temp.keys(VARIADIC '{}'::text[]);
SELECT snowflake_to_public(1);
\echo :LAST_ERROR_SQLSTATE
SELECT pg_temp.keys('# keys of public ids', '');
SELECT snowflake_from_public('10000000000000000000');
\echo :LAST_ERROR_SQLSTATE
-- A key that only decodes: encoding refuses (55000).
SELECT pg_temp.keys('1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f');
SELECT snowflake_to_public(1);
\echo :LAST_ERROR_SQLSTATE
SELECT uuidv7_to_public('017F22E2-79B0-7CC3-98C4-DC0C0C07398F');
\echo :LAST_ERROR_SQLSTATE
-- A file that does not parse: F0000, naming the line, never quoting it.
SELECT pg_temp.keys('1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f encode',
                    '2 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1 encode');
SELECT snowflake_to_public(1);
\echo :LAST_ERROR_SQLSTATE
-- Key 1 encodes. Known answers under it: the version first, 19 characters of FF1.
SELECT pg_temp.keys('# version secret [encode]',
                    '1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f encode');
SELECT snowflake_to_public(0) AS zero, snowflake_to_public(1) AS one,
       snowflake_to_public(9223372036854775807) AS largest, snowflake_to_public(252969121090637507) AS an_id;
SELECT snowflake_from_public(snowflake_to_public(252969121090637507)) AS back,
       snowflake_from_public(lower(snowflake_to_public(252969121090637507))) AS either_case;
-- Round trips; neighbouring ids give tokens in no order; distinct ids, distinct tokens.
WITH ids AS (SELECT snowflake_next(1) AS id FROM generate_series(1, 1000)
             UNION ALL SELECT (random() * 9223372036854775807)::bigint FROM generate_series(1, 1000))
SELECT bool_and(snowflake_from_public(snowflake_to_public(id)) = id) AS round_trip,
       bool_and(length(snowflake_to_public(id)) = 20) AS width_20,
       count(DISTINCT id) = count(DISTINCT snowflake_to_public(id)) AS injective
FROM ids;
SELECT count(*) FILTER (WHERE snowflake_to_public(g) COLLATE "C" < snowflake_to_public(g + 1) COLLATE "C") AS in_order_of_1000,
       count(*) FILTER (WHERE left(snowflake_to_public(g), 3) = left(snowflake_to_public(g + 1), 3)) AS same_prefix
FROM generate_series(252969121090637000, 252969121090637999) g;
-- Tampering: a flipped character, a truncated token, an unknown key version, garbage, a huge
-- text, bytes that are not ASCII: all 22P02, none an id.
SELECT snowflake_from_public('1' || substr(snowflake_to_public(252969121090637507), 2, 18) ||
       CASE WHEN right(snowflake_to_public(252969121090637507), 1) = '0' THEN '1' ELSE '0' END);
\echo :LAST_ERROR_SQLSTATE
DO $$
DECLARE t text := snowflake_to_public(252969121090637507); bad text; c text; accepted int := 0; tried int := 0;
BEGIN
  FOR p IN 2..20 LOOP
    FOREACH c IN ARRAY string_to_array('0123456789ABCDEFGHJKMNPQRSTVWXYZ', NULL) LOOP
      CONTINUE WHEN c = substr(t, p, 1);
      bad := overlay(t PLACING c FROM p FOR 1);
      tried := tried + 1;
      BEGIN
        PERFORM snowflake_from_public(bad);
        accepted := accepted + 1;
      EXCEPTION WHEN invalid_text_representation THEN NULL;
      END;
    END LOOP;
  END LOOP;
  RAISE NOTICE 'every one-character change: % tried, % accepted', tried, accepted;
END $$;
SELECT snowflake_from_public(left(snowflake_to_public(252969121090637507), 19));
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_public('5' || substr(snowflake_to_public(252969121090637507), 2));
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_public('1OOOOOOOOOOOOOOOOOOO');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_public(repeat('Z', 100000));
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_public(E'1000000000000000000\x01');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_to_public(-1);
\echo :LAST_ERROR_SQLSTATE
-- Random texts under the key: a forgery passes with odds 2^-32, so none of 20,000.
DO $$
DECLARE accepted int := 0;
BEGIN
  FOR i IN 1..20000 LOOP
    BEGIN
      PERFORM snowflake_from_public('1' || (SELECT string_agg(substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', (random() * 31)::int + 1, 1), '')
                                            FROM generate_series(1, 19) WHERE i > 0));
      accepted := accepted + 1;
    EXCEPTION WHEN invalid_text_representation THEN NULL;
    END;
  END LOOP;
  RAISE NOTICE 'random tokens accepted: % of 20000', accepted;
END $$;
-- A context binds a token to one tenant or table: another context refuses it.
SELECT snowflake_to_public(42, 'tenant-a') AS tenant_a, snowflake_to_public(42, 'tenant-b') AS tenant_b,
       snowflake_from_public(snowflake_to_public(42, 'tenant-a'), 'tenant-a') AS back;
SELECT snowflake_from_public(snowflake_to_public(42, 'tenant-a'), 'tenant-b');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_public(snowflake_to_public(42, 'tenant-a'));
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_to_public(42, repeat('x', 65));
\echo :LAST_ERROR_SQLSTATE
-- Within one statement the keys stay those it started with (STABLE); the next transaction reads
-- the new file.
SELECT a = c AS same_keys_in_one_statement, left(a, 1) AS version
FROM (SELECT snowflake_to_public(7) AS a,
             pg_temp.keys('1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f',
                          '2 f0e1d2c3b4a5968778695a4b3c2d1e0ff0e1d2c3b4a5968778695a4b3c2d1e0f encode') AS b,
             snowflake_to_public(7) AS c OFFSET 0) s;
-- A transaction sees one set of keys, a cursor's fetches included; the next one sees the file.
BEGIN;
DECLARE c CURSOR FOR SELECT g, left(snowflake_to_public(g), 1) AS version FROM generate_series(1, 4) g;
FETCH 2 FROM c;
SELECT pg_temp.keys('1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f encode');
FETCH 2 FROM c;
SELECT left(snowflake_to_public(7), 1) AS still_key_2;
COMMIT;
SELECT left(snowflake_to_public(7), 1) AS now_key_1;
SELECT pg_temp.keys('1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f',
                    '2 f0e1d2c3b4a5968778695a4b3c2d1e0ff0e1d2c3b4a5968778695a4b3c2d1e0f encode');
-- Rotation: key 2 now encodes, key 1 still decodes the tokens already published.
SELECT left(snowflake_to_public(252969121090637507), 1) AS new_version;
-- Key 2's token relabelled as key 1's is refused.
SELECT snowflake_from_public('1' || substr(snowflake_to_public(252969121090637507), 2));
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_public(snowflake_to_public(252969121090637507)) AS new_token_decodes;
SELECT * FROM snowflake_public_keys();
CREATE TABLE pub_orders (id bigint PRIMARY KEY, token_v1 text);
INSERT INTO pub_orders SELECT g, NULL FROM generate_series(252969121090637000, 252969121090637999) g;
SELECT pg_temp.keys('1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f encode');
UPDATE pub_orders SET token_v1 = snowflake_to_public(id);
SELECT pg_temp.keys('1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f',
                    '2 f0e1d2c3b4a5968778695a4b3c2d1e0ff0e1d2c3b4a5968778695a4b3c2d1e0f encode');
SELECT count(*) FILTER (WHERE snowflake_from_public(token_v1) = id) AS old_tokens_decode,
       count(*) FILTER (WHERE snowflake_from_public(snowflake_to_public(id)) = id) AS new_tokens_decode
FROM pub_orders;
-- A token in a WHERE clause is decoded once: the primary key's index finds the row.
EXPLAIN (COSTS OFF) SELECT * FROM pub_orders WHERE id = snowflake_from_public('2DPJ9WPD0QWC593MXBC1');
SELECT id FROM pub_orders WHERE id = snowflake_from_public((SELECT token_v1 FROM pub_orders WHERE id = 252969121090637507));
-- Key 1 removed: its tokens stop decoding (22P02, naming the version), key 2's keep working.
SELECT pg_temp.keys('2 f0e1d2c3b4a5968778695a4b3c2d1e0ff0e1d2c3b4a5968778695a4b3c2d1e0f encode');
SELECT snowflake_from_public(token_v1) FROM pub_orders WHERE id = 252969121090637507;
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_public(snowflake_to_public(252969121090637507)) AS key_2_decodes;
-- UUIDv7: a public form that is a well-formed version 4 UUID, and maps back exactly.
SELECT uuidv7_to_public('017F22E2-79B0-7CC3-98C4-DC0C0C07398F') AS public_form,
       uuid_extract_version(uuidv7_to_public('017F22E2-79B0-7CC3-98C4-DC0C0C07398F')) AS version,
       uuidv7_from_public(uuidv7_to_public('017F22E2-79B0-7CC3-98C4-DC0C0C07398F')) AS back;
WITH u AS (SELECT uuidv7_next() AS id FROM generate_series(1, 2000))
SELECT bool_and(uuidv7_from_public(uuidv7_to_public(id)) = id) AS round_trip,
       bool_and(uuid_extract_version(uuidv7_to_public(id)) = 4) AS all_version_4,
       bool_and(uuid_extract_timestamp(uuidv7_to_public(id)) IS NULL) AS no_time_to_read,
       count(DISTINCT uuidv7_to_public(id)) AS distinct_forms
FROM u;
SELECT uuidv7_from_public(uuidv7_to_public('017F22E2-79B0-7CC3-98C4-DC0C0C07398F', 'orders'), 'orders') AS back_in_context;
-- Refused: a public form that is not version 4 (22P02), a UUID that is not v7 (22023), a time
-- after 2248-09-26 (22008), an altered public form (22P02 for 31 in 32 of them).
SELECT uuidv7_from_public('017F22E2-79B0-7CC3-98C4-DC0C0C07398F');
\echo :LAST_ERROR_SQLSTATE
SELECT uuidv7_to_public('8d2f4c6e-1b3a-4f5d-9e7c-2a4b6c8d0e1f');
\echo :LAST_ERROR_SQLSTATE
SELECT uuidv7_to_public('ffffffff-ffff-7fff-bfff-ffffffffffff');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FILTER (WHERE cardinality(uuidv7_public_candidates(u)) > 0) BETWEEN 50 AND 170 AS about_1_in_32_of_3200_pass
FROM (SELECT gen_random_uuid() AS u FROM generate_series(1, 3200)) s;
-- During a rotation, a public form of either key finds its row through the candidates.
CREATE TABLE pub_events (id uuid PRIMARY KEY, public_v1 uuid);
INSERT INTO pub_events SELECT uuidv7_next(), NULL FROM generate_series(1, 500);
SELECT pg_temp.keys('1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f encode');
UPDATE pub_events SET public_v1 = uuidv7_to_public(id);
SELECT pg_temp.keys('1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f',
                    '2 f0e1d2c3b4a5968778695a4b3c2d1e0ff0e1d2c3b4a5968778695a4b3c2d1e0f encode');
SELECT count(*) FILTER (WHERE (SELECT count(*) FROM pub_events f WHERE f.id = ANY (uuidv7_public_candidates(e.public_v1))) = 1
                         AND e.id = ANY (uuidv7_public_candidates(e.public_v1))) AS old_forms_found,
       count(*) FILTER (WHERE (uuidv7_public_candidates(uuidv7_to_public(e.id)))[1] = e.id) AS new_forms_first
FROM pub_events e;
-- A plain role encodes and decodes, but reaches neither the keys nor where they are.
DO $$ BEGIN CREATE ROLE sfid_public_reader; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
SET ROLE sfid_public_reader;
SELECT snowflake_from_public(snowflake_to_public(99)) AS plain_role_round_trip;
-- SHOW and current_setting() refuse (42501; the message differs between versions).
DO $$ BEGIN PERFORM current_setting('snowflake_id.public_keys_file');
EXCEPTION WHEN insufficient_privilege THEN RAISE NOTICE 'snowflake_id.public_keys_file: refused (42501)'; END $$;
SELECT count(*) AS visible_in_pg_settings FROM pg_settings WHERE name = 'snowflake_id.public_keys_file';
SELECT pg_read_file('snowflake_id.keys');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_public_keys();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE sfid_public_reader;
