-- Which UUID functions this extension creates (the same on every version, so that pg_upgrade
-- and pg_dump between majors find them), and what DEFAULT uuidv7() resolves to. The expected
-- output is per version (expected/pgNN/): on 14-17 an unqualified uuidv7() is the extension's,
-- monotonic across all backends; on 18 it is pg_catalog.uuidv7(), monotonic within one backend
-- only, while public.uuidv7() (what pg_dump writes for a 14-17 column) is still the
-- extension's. uuidv7_next() is the extension's everywhere.
CREATE EXTENSION snowflake_id;
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args, p.provolatile, p.proparallel, p.proisstrict
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'snowflake_id'
WHERE p.proname LIKE 'uuid%'
ORDER BY 1, 2;
CREATE TABLE t (id uuid PRIMARY KEY DEFAULT uuidv7(), id2 uuid DEFAULT uuidv7_next(), id3 uuid DEFAULT public.uuidv7());
SELECT a.attname, pg_get_expr(d.adbin, d.adrelid) AS default_expr, p.pronamespace::regnamespace AS schema,
       (SELECT extname FROM pg_extension e JOIN pg_depend x ON x.refobjid = e.oid AND x.deptype = 'e'
         WHERE x.objid = p.oid) AS extension
FROM pg_attrdef d
JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
JOIN pg_proc p ON p.oid = (regexp_match(d.adbin::text, ':funcid (\d+)'))[1]::oid
WHERE d.adrelid = 't'::regclass
ORDER BY a.attnum;
INSERT INTO t DEFAULT VALUES;
SELECT uuid_extract_version(id) AS v, uuid_extract_version(id2) AS v2, uuid_extract_version(id3) AS v3 FROM t;
