-- What runs as whom (the README's security model), each rule tried the way an attacker would:
-- 1. The converters never run a table owner's code: they read the stored ids by OID with
--    PostgreSQL's own scans, which plan nothing and evaluate no index expression. An index
--    expression that tries to make its owner a superuser never runs, in a dry run, a conversion
--    and an unconversion, with an index on the column and without one.
-- 2. The triggers on snowflake_id_space: the statement one runs only as a trigger (39P01), and
--    PUBLIC may call neither function.
--    A plain role cannot name the record, so it cannot queue a strong lock request for it (42501
--    before any lock). (It can lock it ROW EXCLUSIVE by OID, which no id call waits for: t/003.)
-- 3. The fleet check's rules for a grantee that is not a superuser (no connection needed): a
--    password of its own (2F003), no keyword that reads the server's files (42501); and the
--    server's switch, which refuses everyone (55000).
-- 4. What only pg_monitor sees: the statistics and the reservation's figures.
CREATE EXTENSION snowflake_id;
\set VERBOSITY default
-- A wait for a reload, which a backend applies between statements: :wait50 is 50 statements
-- :wait, each of which sleeps a tenth of a second while the setting still has its old value (5 s
-- at most; nothing once it is in). Each wait below sets :wait, and hides its results.
\set wait10 ':wait :wait :wait :wait :wait :wait :wait :wait :wait :wait'
\set wait50 ':wait10 :wait10 :wait10 :wait10 :wait10'
ALTER SYSTEM SET snowflake_id.shards = '0-7';
SELECT pg_reload_conf();
\o /dev/null
\set wait 'SELECT pg_sleep(0.1) WHERE current_setting(''snowflake_id.shards'') <> ''0-7'';'
:wait50
\o

-- 1. A plain role's table, with an index expression that calls an IMMUTABLE function, which calls
-- a VOLATILE one that records who it runs as and tries to make its owner a superuser.
CREATE ROLE regress_sfid_alice;
CREATE SCHEMA alice AUTHORIZATION regress_sfid_alice;
SET ROLE regress_sfid_alice;
CREATE TABLE alice.calls (run_as name, became_superuser boolean);
CREATE FUNCTION alice.escalate() RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    BEGIN
        EXECUTE 'ALTER ROLE regress_sfid_alice SUPERUSER';
        INSERT INTO alice.calls VALUES (current_user, true);
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO alice.calls VALUES (current_user, false);
    END;
    RETURN 0;
END $$;
CREATE FUNCTION alice.zero(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN $1 * alice.escalate(); END $$;
CREATE TABLE alice.orders (id bigserial PRIMARY KEY, v int);
CREATE INDEX orders_trap ON alice.orders ((id + alice.zero(0)));
INSERT INTO alice.orders (v) SELECT g FROM generate_series(1, 10) g;
CREATE TABLE alice.loose (id bigint);
CREATE INDEX loose_trap ON alice.loose ((id + alice.zero(0)));
INSERT INTO alice.loose SELECT g FROM generate_series(1, 10) g;
RESET ROLE;
DELETE FROM alice.calls;
-- A superuser's dry runs, in a new session (a planner would read the index expression afresh).
-- (0.3.0 planned a max() query as the owner: the expression ran, as regress_sfid_alice.)
\c
SELECT count(*) > 0 AS planned FROM snowflake_convert('alice.orders', 'id', dry_run => true);
SELECT count(*) > 0 AS planned FROM snowflake_convert('alice.loose', 'id', dry_run => true);
SELECT rolsuper AS alice_is_superuser FROM pg_roles WHERE rolname = 'regress_sfid_alice';
SELECT count(*) AS index_expression_calls FROM alice.calls;
\c
SELECT count(*) > 0 AS converted FROM snowflake_convert('alice.orders', 'id', drop_sequence => true);
SELECT count(*) > 0 AS converted FROM snowflake_convert('alice.loose', 'id');
\c
SELECT count(*) > 0 AS unconverted FROM snowflake_unconvert('alice.orders', 'id', dry_run => true);
SELECT count(*) > 0 AS unconverted FROM snowflake_unconvert('alice.orders', 'id');
SELECT rolsuper AS alice_is_superuser FROM pg_roles WHERE rolname = 'regress_sfid_alice';
SELECT count(*) AS index_expression_calls FROM alice.calls;
DROP SCHEMA alice CASCADE;

-- 2. The trigger functions: not for PUBLIC, and the record's not as a function (39P01).
SELECT has_function_privilege('regress_sfid_alice', 'snowflake_id_space_changed()', 'EXECUTE') AS alice_may_execute;
SELECT has_function_privilege('regress_sfid_alice', 'snowflake_id_private.snowflake_id_space_merge()', 'EXECUTE') AS alice_may_merge;
SELECT snowflake_id_space_changed();
\echo :LAST_ERROR_SQLSTATE
-- Nor as a trigger on another table (0.2.0 let PUBLIC attach it anywhere, and such triggers
-- outlive the update): 39P01.
CREATE TABLE not_the_record (i int);
CREATE TRIGGER t AFTER INSERT ON not_the_record FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_space_changed();
INSERT INTO not_the_record VALUES (1);
\echo :LAST_ERROR_SQLSTATE
DROP TABLE not_the_record;
-- Nor on a table of the record's name elsewhere, a superuser's included.
CREATE TABLE public.snowflake_id_space (i int);
CREATE TRIGGER t AFTER INSERT ON public.snowflake_id_space FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_space_changed();
INSERT INTO public.snowflake_id_space VALUES (1);
\echo :LAST_ERROR_SQLSTATE
DROP TABLE public.snowflake_id_space;
-- As a trigger it still tells the backends (a change to the record is read at once).
BEGIN;
UPDATE snowflake_id_private.snowflake_id_space SET recorded_at = recorded_at;
ROLLBACK;
-- A PREPARE locks a table before its privileges are checked, and CREATE RULE asks for ACCESS
-- EXCLUSIVE before it checks ownership: held and queued, they would hold up every new session's
-- first id. Neither gets a lock on the record: the schema refuses the name first.
-- (The TAP test t/003 shows the stall this prevents.)
SET ROLE regress_sfid_alice;
PREPARE p AS SELECT FROM snowflake_id_private.snowflake_id_space;
CREATE RULE r AS ON INSERT TO snowflake_id_private.snowflake_id_space DO INSTEAD NOTHING;
SET search_path = snowflake_id_private, public;
PREPARE p AS SELECT FROM snowflake_id_space;
RESET search_path;
RESET ROLE;

-- 3. The fleet check for a grantee that is not a superuser: judged before any connection.
CREATE ROLE regress_sfid_monitor IN ROLE pg_monitor;
GRANT EXECUTE ON FUNCTION snowflake_fleet_check(text[], interval, interval) TO regress_sfid_monitor;
SET ROLE regress_sfid_monitor;
SELECT * FROM snowflake_fleet_check(ARRAY['host=/nonexistent port=1 user=postgres']);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_fleet_check(ARRAY['host=/nonexistent port=1 user=postgres password=']);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_fleet_check(ARRAY['host=/nonexistent port=1 user=postgres password=x passfile=/etc/passwd']);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_fleet_check(ARRAY['postgresql:///postgres?host=/nonexistent&password=x&sslkey=/etc/ssl/private/key']);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_fleet_check(ARRAY['host=/nonexistent password=x service=prod']);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_fleet_check(ARRAY['host=/nonexistent password=x sslrootcert=/etc/passwd']);
\echo :LAST_ERROR_SQLSTATE
-- Every string is judged before the first peer is reached.
SELECT * FROM snowflake_fleet_check(ARRAY['host=/nonexistent port=1 password=x', 'host=/nonexistent passfile=/x']);
\echo :LAST_ERROR_SQLSTATE
-- Allowed keywords with a password of its own: judged fit, then reached or not.
SELECT "check", ok FROM snowflake_fleet_check(ARRAY['host=/nonexistent port=1 user=postgres password=x sslmode=prefer connect_timeout=2 application_name=x'])
WHERE peer <> '(this server)' ORDER BY 1;
RESET ROLE;
-- The server's switch refuses everyone, a superuser too.
ALTER SYSTEM SET snowflake_id.fleet_connections = off;
SELECT pg_reload_conf();
\o /dev/null
\set wait 'SELECT pg_sleep(0.1) WHERE current_setting(''snowflake_id.fleet_connections'') <> ''off'';'
:wait50
\o
SELECT * FROM snowflake_fleet_check(ARRAY[]::text[]);
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM RESET snowflake_id.fleet_connections;
SELECT pg_reload_conf();
\o /dev/null
\set wait 'SELECT pg_sleep(0.1) WHERE current_setting(''snowflake_id.fleet_connections'') <> ''on'';'
:wait50
\o
SELECT count(*) > 0 AS this_server_checked FROM snowflake_fleet_check(ARRAY[]::text[]);

-- 4. Cluster-wide figures are for pg_monitor: the reservation's writes tell the server's mint rate.
SELECT has_function_privilege('regress_sfid_alice', 'snowflake_id_reservation()', 'EXECUTE') AS alice_reads_reservation,
       has_function_privilege('regress_sfid_monitor', 'snowflake_id_reservation()', 'EXECUTE') AS monitor_reads_reservation,
       has_function_privilege('regress_sfid_alice', 'snowflake_id_stats()', 'EXECUTE') AS alice_reads_stats;

REVOKE EXECUTE ON FUNCTION snowflake_fleet_check(text[], interval, interval) FROM regress_sfid_monitor;
DROP ROLE regress_sfid_monitor, regress_sfid_alice;
ALTER SYSTEM RESET snowflake_id.shards;
SELECT pg_reload_conf();
DROP EXTENSION snowflake_id;
