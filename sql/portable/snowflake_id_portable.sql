-- snowflake_id, portable edition: the same ids in plain SQL and PL/pgSQL, for servers that load no
-- shared library (Amazon RDS and Aurora, Cloud SQL, Azure, Supabase, Neon).
--
--   psql -v ON_ERROR_STOP=1 -1 -d mydb -c 'SET search_path = app' -f snowflake_id_portable.sql
--
-- runs it as any role that may create in the first schema of its search_path and create schemas
-- in the database (CREATE on both). The functions go into that schema; the counters and the
-- record of the configuration go into the schema snowflake_id_portable, which no other role may
-- use; the pure helpers of the IMMUTABLE functions (layouts, text forms) go into the schema
-- snowflake_id_layout, which every role may use, and which outlives the counters when a database
-- moves to the native edition (docs/managed.md). Where pg_tle is the way in,
-- sql/portable/pg_tle.sql installs the same text as the extension snowflake_id_portable
-- (scripts/portable-tle.py makes it; a check keeps them equal).
--
-- The ids are the native extension's, bit for bit: for the same layout, epoch, shard and tick,
-- the same id, and each edition's snowflake_decode reads the other's ids exactly.
--
-- How an id is made, and why it never repeats. Each generator is a sequence of "words": a tick
-- (the clock's milliseconds since the epoch, divided by the tick length) times the words a tick
-- holds, plus a position in the tick. A sequence is WAL-logged, replicated and dumped with setval,
-- so its value survives a crash, a failover and a restore. A call takes nextval: when the word is
-- at or after the clock's tick, that word is the id (the common case under load). When the
-- generator has fallen behind the clock, it jumps: under a lock that only these functions take,
-- setval moves it to the clock's first word. The clock only ever moves a generator forward.
--
-- That lock is a row lock on the one row of the table state (lock_config()), which only a role
-- that may UPDATE the table can take, never a lock on a table itself: any role can hold ROW
-- EXCLUSIVE on any relation, ours included, to the end of its transaction (nextval() of a
-- relation's OID locks it before it checks anything, and a rolled-back savepoint keeps the lock),
-- so a table lock that conflicts with it would let any role stall every call that jumps. The row
-- lock's own table lock (ROW SHARE) conflicts with no lock a role can take without privileges; it
-- is taken with NOWAIT, so that a call never queues behind a stronger request (a VACUUM FULL
-- waiting for such a role), and tried again every few milliseconds for a second at most (55P03).
-- The row holds the serial of the configuration in force, read under the lock: so what a jump
-- acts on is the configuration of the row's latest committed version, whatever the caller's
-- snapshot or catalog cache holds (waiting for a row lock, unlike a table lock, does not make a
-- backend take in other sessions' catalog changes).
--
-- A jump must never move a generator back over a word that a concurrent nextval handed out. So
-- the sequence gen works as a sequence lock: a jump makes it odd before its setval and even after,
-- and a call uses the word from nextval only if gen read the same even value before and after the
-- nextval. Then the nextval did not overlap any jump: it came before one (below the word that
-- jump read under its lock, so below its target) or after it (above the target). Words a call
-- discards are skipped, never reissued. gen also carries the configuration's serial (its low 16
-- bits), so that functions made for another configuration never take the fast path. Every jump
-- first makes gen even and stamps it with the serial in force, as the catalog has it: a jump
-- that died between its two steps, or a configure() that committed or rolled back, leaves gen odd
-- or foreign, and the next jump repairs it.
--
-- A new configuration never moves a generator. configure() makes gen odd, so that the generators'
-- last values bound every word a call kept, and records offsets that map their next values to
-- the first word of the tick after the latest one minted, in the new scale. Rolled back, it
-- leaves nothing but gen odd, which the next jump settles; no id is minted in its transaction
-- meanwhile (55000).
--
-- An id must not repeat after a crash either. nextval logs 32 values ahead, and the record that
-- covers a word may belong to another session's transaction, not yet flushed; a transaction that
-- writes no WAL of its own (even one with an xid, from a temporary table or pg_current_xact_id())
-- is not flushed at commit. So the first call of each transaction writes a record of its own (a
-- setval of the sequence flush; the setting snowflake_id_portable.flushed remembers the
-- transaction), and the commit then waits for the WAL flush, which takes every earlier record with
-- it (synchronous_commit = off gives that up, as for any commit).
--
-- What this edition cannot do that the native one does, by the nature of SQL:
-- - it cannot wait out a clock that steps back: ids continue above the generator, ahead of the
--   clock, until the clock catches up (never a repeat, but timestamps in the future);
-- - it has no lead limit: past a tick's capacity a generator runs ahead of the clock (under
--   shards '*', one generator serves every shard the calls name);
-- - uuidv7_next() counts within a millisecond (12 bits, 4,096 per ms) instead of sub-millisecond
--   time;
-- - snowflake_next(shard) under a configured set of more than one shard is refused for shards in
--   the set (0A000), since those ids come from the set's one generator.

CREATE SCHEMA snowflake_id_portable;
COMMENT ON SCHEMA snowflake_id_portable IS 'The snowflake_id portable edition''s counters and configuration; no other role may use it';
REVOKE ALL ON SCHEMA snowflake_id_portable FROM PUBLIC;

-- The serial of the configuration in force, kept by apply() (a restore included), and the lock
-- that serialises the jumps, configure() and advance(): its one row (see lock_config()). It has no
-- index: a call plans its query over this table, and the planner would lock an index with a lock
-- that waits, behind a REINDEX queued behind any role's lock on it. A trigger keeps it to one row.
CREATE TABLE snowflake_id_portable.state (serial int NOT NULL);
COMMENT ON TABLE snowflake_id_portable.state IS 'The serial of the snowflake_id portable configuration in force; never change it by hand';
INSERT INTO snowflake_id_portable.state (serial) VALUES (0);
CREATE FUNCTION snowflake_id_portable.one_state() RETURNS trigger
LANGUAGE plpgsql SET search_path = snowflake_id_portable, pg_temp AS $$
BEGIN
    IF (SELECT count(*) FROM snowflake_id_portable.state) <> 1 THEN
        RAISE EXCEPTION 'snowflake_id_portable.state must hold exactly one row' USING ERRCODE = '23514';
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION snowflake_id_portable.one_state() FROM PUBLIC;
CREATE TRIGGER one_row AFTER INSERT OR DELETE OR TRUNCATE ON snowflake_id_portable.state
FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_portable.one_state();

-- The configuration, one row per configure() call; the row with the highest serial is in force.
-- Serial 0 is the built-in default (41/13/9, 2025-01-01, shards *).
CREATE TABLE snowflake_id_portable.config (
    serial int PRIMARY KEY CHECK (serial BETWEEN 0 AND 65535),
    layout text NOT NULL,
    epoch timestamptz NOT NULL,
    shards text NOT NULL,
    configured_at timestamptz NOT NULL DEFAULT now(),
    -- What a raw value of snowflake_words and owned_words is above its word (see configure()).
    snowflake_offset bigint NOT NULL DEFAULT 0,
    owned_offset bigint NOT NULL DEFAULT 0
);
COMMENT ON TABLE snowflake_id_portable.config IS 'The layout, epoch and shards of this database''s snowflake ids; change it only with snowflake_portable_configure()';
INSERT INTO snowflake_id_portable.config (serial, layout, epoch, shards) VALUES (0, '41/13/9', '2025-01-01 00:00:00+00', '*');

-- The generators. snowflake_words: snowflake_next(shard) under shards '*' (a tick holds 2^seq_bits
-- words, the shard comes from the call). owned_words: snowflake_next() (a tick holds one block of
-- 2^seq_bits words per owned shard, in shard order, as the native edition fills them).
-- uuid_words: uuidv7_next() (4,096 words per Unix millisecond). gen: the sequence lock. flush:
-- written to make a transaction's commit wait for the WAL (see above).
CREATE SEQUENCE snowflake_id_portable.snowflake_words MINVALUE 0 START 0 NO CYCLE;
CREATE SEQUENCE snowflake_id_portable.owned_words MINVALUE 0 START 0 NO CYCLE;
CREATE SEQUENCE snowflake_id_portable.uuid_words MINVALUE 0 START 0 NO CYCLE;
CREATE SEQUENCE snowflake_id_portable.gen MINVALUE 0 START 0 NO CYCLE;
CREATE SEQUENCE snowflake_id_portable.flush;
SELECT pg_catalog.setval('snowflake_id_portable.gen', 0, true);

-- pg_tle: SELECT pg_catalog.pg_extension_config_dump('snowflake_id_portable.config', 'WHERE serial > 0');
-- pg_tle: SELECT pg_catalog.pg_extension_config_dump('snowflake_id_portable.snowflake_words', '');
-- pg_tle: SELECT pg_catalog.pg_extension_config_dump('snowflake_id_portable.owned_words', '');
-- pg_tle: SELECT pg_catalog.pg_extension_config_dump('snowflake_id_portable.uuid_words', '');
-- pg_tle: SELECT pg_catalog.pg_extension_config_dump('snowflake_id_portable.gen', '');

------------------------------------------------------------------------------------------------
-- Layouts, read as the native edition reads them: the schema snowflake_id_layout.
--
-- What the functions that take the layout and epoch as arguments need: pure functions of their
-- arguments, which read no table, no sequence and no setting. PUBLIC may use the schema, and its
-- functions and those IMMUTABLE forms are plain functions (not SECURITY DEFINER) that name only
-- this schema and pg_catalog: so a generated column, an expression index or a CHECK constraint
-- made of them keeps working when the counters and the configuration (snowflake_id_portable) are
-- gone, after a move to the native edition (docs/managed.md). Each reads text in the "C" collation
-- or byte by byte, and is independent of the caller's search_path: an IMMUTABLE function must give
-- the same result whatever the caller's search_path, collation, TimeZone or DateStyle. The PL/pgSQL
-- ones pin their search_path to pg_catalog (PostgreSQL never looks for functions or operators in
-- pg_temp). The SQL ones carry no SET, so that PostgreSQL inlines them into the query that calls
-- them (a SET, like SECURITY DEFINER, prevents it, and costs a save and restore of the settings on
-- every call): with a constant layout and epoch, named() is then computed once, when the query is
-- planned, instead of once a row. Their bodies are parsed under the caller's search_path, so they
-- name everything with its schema: functions as snowflake_id_layout.f() or pg_catalog.f(), operators
-- as OPERATOR(pg_catalog.+) (which binds as any other operator does, left to right with no
-- precedence: hence every parenthesis), types as pg_catalog.int8.

CREATE SCHEMA snowflake_id_layout;
COMMENT ON SCHEMA snowflake_id_layout IS 'Pure helpers of the snowflake_id portable edition''s IMMUTABLE functions: layouts, epochs, text forms';
GRANT USAGE ON SCHEMA snowflake_id_layout TO PUBLIC;

-- The widths of a layout text: {time_bits, shard_bits, seq_bits, tick_ms}, as the native edition's
-- parser reads it (src/core/layout.rs, Widths::parse, and src/api/mod.rs, layout_arg), with its
-- messages: at most 64 bytes; ASCII only; ASCII whitespace (\t \n \v \f \r and space) trimmed; a
-- preset in any ASCII case; or TIME/SHARD/SEQ, optionally @N or @Nms (ms in lower case), with
-- whitespace around each field, each number as Rust's u32::from_str reads it (an optional +, then
-- digits, leading zeros allowed, at most 4294967295); then the bounds. 22023 for anything else.
CREATE FUNCTION snowflake_id_layout.widths(layout text) RETURNS int[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- What Rust's str::trim takes off ASCII text. (chr(), not backslash escapes, whose reading
    -- depends on standard_conforming_strings.)
    blanks CONSTANT text COLLATE pg_catalog."C" := chr(9) || chr(10) || chr(11) || chr(12) || chr(13) || ' ';
    spec text COLLATE pg_catalog."C";
    m text[];
    w numeric[];
    field CONSTANT text[] := '{time,shard,sequence}';
    low CONSTANT int[] := '{1,0,1,1}';
    high CONSTANT int[] := '{63,16,31,1000}';
BEGIN
    -- First, before anything reads the text: a long one costs nothing.
    IF octet_length(layout) > 64 THEN
        RAISE EXCEPTION 'invalid snowflake layout' USING ERRCODE = '22023',
            DETAIL = format('A layout of %s bytes is too long: a layout is at most 64 bytes, such as sonyflake or 39/16/8@10ms.',
                            octet_length(layout));
    END IF;
    spec := layout COLLATE pg_catalog."C";
    IF spec ~ ('[^' || chr(1) || '-' || chr(127) || ']') THEN
        RAISE EXCEPTION 'invalid snowflake layout' USING ERRCODE = '22023',
            DETAIL = 'A layout is ASCII text, such as sonyflake or 39/16/8@10ms.';
    END IF;
    spec := btrim(spec, blanks);
    CASE translate(spec, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')
        WHEN 'default' THEN RETURN '{41,13,9,1}';
        WHEN 'twitter' THEN RETURN '{41,10,12,1}';
        WHEN 'sonyflake' THEN RETURN '{39,16,8,10}';
        WHEN 'javascript' THEN RETURN '{41,4,8,1}';
        ELSE NULL;
    END CASE;
    -- Every blank as a space; the numbers without their +.
    m := regexp_match(translate(spec, blanks, '      '),
                      '^ *[+]?([0-9]+) */ *[+]?([0-9]+) */ *[+]?([0-9]+) *(@ *[+]?([0-9]+) *(ms)?)? *$');
    IF m IS NOT NULL THEN
        w := ARRAY[m[1]::numeric, m[2]::numeric, m[3]::numeric, coalesce(m[5]::numeric, 1)];
    END IF;
    IF m IS NULL OR greatest(w[1], w[2], w[3], w[4]) > 4294967295 THEN
        RAISE EXCEPTION 'invalid snowflake layout' USING ERRCODE = '22023',
            DETAIL = format('"%s" is not a snowflake layout. Use default, twitter, sonyflake, javascript, or TIME/SHARD/SEQ bit widths with an optional @Nms tick, such as 41/13/9 or 39/16/8@10ms.',
                            CASE WHEN char_length(spec) <= 32 THEN spec
                                 ELSE left(spec, 32) || CASE WHEN getdatabaseencoding() = 'UTF8' THEN chr(8230) ELSE '...' END END);
    END IF;
    IF w[1] + w[2] + w[3] > 63 THEN
        RAISE EXCEPTION 'invalid snowflake layout' USING ERRCODE = '22023',
            DETAIL = format('Layout %s/%s/%s needs %s bits, but ids have 63: the sign bit stays clear so that ids never go negative.',
                            w[1], w[2], w[3], w[1] + w[2] + w[3]);
    END IF;
    FOR i IN 1 .. 4 LOOP
        IF w[i] NOT BETWEEN low[i] AND high[i] THEN
            RAISE EXCEPTION 'invalid snowflake layout' USING ERRCODE = '22023',
                DETAIL = CASE WHEN i = 4 THEN format('A tick of %s ms is out of range: it must be between 1 and 1000 ms.', w[4])
                              ELSE format('A %s field of %s bits is out of range: it must be between %s and %s bits.', field[i], w[i], low[i], high[i]) END;
        END IF;
    END LOOP;
    RETURN w::int[];
END $$;

-- The canonical spelling of widths, as the native edition writes it: 41/13/9, or 39/16/8@10ms.
CREATE FUNCTION snowflake_id_layout.spelling(w int[]) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT pg_catalog.concat_ws('/', w[1], w[2], w[3])
        OPERATOR(pg_catalog.||) CASE WHEN w[4] OPERATOR(pg_catalog.=) 1 THEN '' ELSE pg_catalog.concat('@', w[4], 'ms') END
$$;

-- The time of Unix milliseconds, exactly (a product with an interval goes through float8), and
-- its text as the native edition writes it in messages. In UTC, whatever the TimeZone.
CREATE FUNCTION snowflake_id_layout.ts_of_ms(ms numeric) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT ((pg_catalog.make_timestamp(1970, 1, 1, 0, 0, 0)
             OPERATOR(pg_catalog.+) (pg_catalog.floor(ms OPERATOR(pg_catalog./) 86400000) OPERATOR(pg_catalog.*) interval '1 day'))
            OPERATOR(pg_catalog.+) ((ms OPERATOR(pg_catalog.-) (pg_catalog.floor(ms OPERATOR(pg_catalog./) 86400000) OPERATOR(pg_catalog.*) 86400000))
                                    OPERATOR(pg_catalog.*) interval '1 ms')) AT TIME ZONE 'UTC'
$$;

CREATE FUNCTION snowflake_id_layout.format_ms(ms numeric) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT pg_catalog.concat(pg_catalog.to_char(snowflake_id_layout.ts_of_ms(ms) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),
        CASE WHEN pg_catalog.mod(ms, 1000) OPERATOR(pg_catalog.=) 0 THEN ''
             ELSE '.' OPERATOR(pg_catalog.||) pg_catalog.lpad(CAST(pg_catalog.mod(pg_catalog.mod(ms, 1000) OPERATOR(pg_catalog.+) 1000, 1000) AS pg_catalog.text), 3, '0') END,
        '+00')
$$;

-- The Unix microsecond of a time: 22008 for an infinite one, and for one past an i64 of Unix
-- microseconds (the year 294247; PostgreSQL's timestamps go on to 294276), as the native edition
-- (src/runtime/timestamp.rs, unix_us) reads every time it is given.
CREATE FUNCTION snowflake_id_layout.unix_us(ts timestamptz) RETURNS numeric
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    us numeric;
BEGIN
    IF isfinite(ts) THEN
        us := extract(epoch FROM ts) * 1000000;
    END IF;
    IF us IS NULL OR us > 9223372036854775807 THEN
        RAISE EXCEPTION 'timestamp out of range' USING ERRCODE = '22008',
            DETAIL = 'Infinite timestamps, and timestamps beyond PostgreSQL''s range, have no id.';
    END IF;
    RETURN us;
END $$;

-- The Unix millisecond holding an epoch (22008 as unix_us()).
CREATE FUNCTION snowflake_id_layout.epoch_ms(epoch timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CAST(pg_catalog.floor(snowflake_id_layout.unix_us(epoch) OPERATOR(pg_catalog./) 1000) AS pg_catalog.int8)
$$;

-- The layout of widths `w` (from widths()) from an epoch in Unix ms, as a settings() array
-- {0, epoch ms, tick_ms, time_bits, shard_bits, seq_bits, 0, 0, 0}: 22023 for an epoch before 1970
-- and for a layout that ends beyond 64 bits of milliseconds (native: Layout::new).
CREATE FUNCTION snowflake_id_layout.layout_of(w int[], epoch_ms bigint) RETURNS bigint[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF epoch_ms < 0 THEN
        RAISE EXCEPTION 'invalid snowflake layout' USING ERRCODE = '22023',
            DETAIL = format('Epoch %s is before 1970-01-01.', snowflake_id_layout.format_ms(epoch_ms));
    END IF;
    IF epoch_ms + 2::numeric ^ w[1] * w[4] - 1 > 9223372036854775807 THEN
        RAISE EXCEPTION 'invalid snowflake layout' USING ERRCODE = '22023',
            DETAIL = 'The time field reaches beyond the year 292 million.';
    END IF;
    RETURN ARRAY[0, epoch_ms, w[4], w[1], w[2], w[3], 0, 0, 0];
END $$;

-- The layout that a layout text and an epoch name, in the native edition's order: the epoch's
-- 22008, then the layout's 22023, then the layout and epoch together (22023).
CREATE FUNCTION snowflake_id_layout.named(layout text, epoch timestamptz) RETURNS bigint[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    ms CONSTANT bigint := snowflake_id_layout.epoch_ms(epoch);
BEGIN
    RETURN snowflake_id_layout.layout_of(snowflake_id_layout.widths(layout), ms);
END $$;

-- The same for the functions that take no epoch (shard, position, a span's ids), whose results
-- do not depend on one: the layout is checked against 1970-01-01, the epoch that leaves the most
-- room, so that every layout a server may run with is accepted, as in the native edition.
CREATE FUNCTION snowflake_id_layout.named(layout text) RETURNS bigint[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT snowflake_id_layout.layout_of(snowflake_id_layout.widths(layout), CAST(0 AS pg_catalog.int8))
$$;

-- The fields of an id under the layout `s` (a settings() array): {ticks, shard, seq}; 22003 for an
-- id the layout cannot hold.
CREATE FUNCTION snowflake_id_layout.parts(id bigint, s bigint[]) RETURNS bigint[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    bits int := (s[4] + s[5] + s[6])::int;
BEGIN
    IF id < 0 OR (bits < 63 AND id >= 1::bigint << bits) THEN
        RAISE EXCEPTION 'snowflake id % is out of range', id USING ERRCODE = '22003',
            DETAIL = format('Valid ids are 0 to %s under snowflake layout %s.',
                CASE WHEN bits < 63 THEN (1::bigint << bits) - 1 ELSE 9223372036854775807 END,
                snowflake_id_layout.spelling(ARRAY[s[4], s[5], s[6], s[3]]::int[]));
    END IF;
    RETURN ARRAY[id >> (s[5] + s[6])::int, (id >> s[6]::int) & ((1::bigint << s[5]::int) - 1), id & ((1::bigint << s[6]::int) - 1)];
END $$;

-- The tick holding a time under the layout `s`: 22008 for infinity (as unix_us()) and times
-- outside the layout.
CREATE FUNCTION snowflake_id_layout.tick_at(ts timestamptz, s bigint[]) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    ms CONSTANT numeric := floor(snowflake_id_layout.unix_us(ts) / 1000);
BEGIN
    IF ms < s[2] OR ms >= s[2] + 2::numeric ^ s[4] * s[3] THEN
        RAISE EXCEPTION 'timestamp % is outside the snowflake layout', snowflake_id_layout.format_ms(ms) USING ERRCODE = '22008',
            DETAIL = format('Snowflake ids cover %s to %s.', snowflake_id_layout.format_ms(s[2]),
                snowflake_id_layout.format_ms(s[2] + 2::numeric ^ s[4] * s[3] - 1));
    END IF;
    RETURN div(ms - s[2], s[3])::bigint;
END $$;

------------------------------------------------------------------------------------------------
-- Shard lists, parsed as the native edition parses them.

-- The shards of a list such as '0-127' or '0-15,40', sorted; NULL for '*'. 22023 otherwise.
CREATE FUNCTION snowflake_id_portable.shard_list(shards text, max_shard int) RETURNS int[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = snowflake_id_portable, pg_temp AS $$
DECLARE
    item text;
    m text[];
    lo bigint;
    hi bigint;
    out int[] := '{}';
BEGIN
    IF octet_length(shards) > 1024 THEN
        RAISE EXCEPTION 'invalid shard list' USING ERRCODE = '22023',
            DETAIL = 'the list of shards may be at most 1024 bytes long; use ranges such as 0-15';
    END IF;
    IF btrim(shards) = '*' THEN
        RETURN NULL;
    END IF;
    IF btrim(shards) = '' THEN
        RAISE EXCEPTION 'invalid shard list' USING ERRCODE = '22023', DETAIL = 'the list of shards is empty; use * for every shard';
    END IF;
    FOREACH item IN ARRAY string_to_array(shards, ',') LOOP
        m := regexp_match(item, '^\s*([0-9]{1,9})\s*(?:-\s*([0-9]{1,9})\s*)?$');
        IF m IS NULL THEN
            RAISE EXCEPTION 'invalid shard list' USING ERRCODE = '22023',
                DETAIL = format('"%s" is not a shard or a range such as 0-15', left(btrim(item), 32));
        END IF;
        lo := m[1]::bigint;
        hi := coalesce(m[2], m[1])::bigint;
        IF lo > hi THEN
            RAISE EXCEPTION 'invalid shard list' USING ERRCODE = '22023',
                DETAIL = format('range "%s" runs backwards', btrim(item));
        END IF;
        IF hi > max_shard THEN
            RAISE EXCEPTION 'invalid shard list' USING ERRCODE = '22023',
                DETAIL = format('shard %s is out of range: the layout''s shards are 0 to %s', hi, max_shard);
        END IF;
        out := out || ARRAY(SELECT generate_series(lo, hi)::int);
    END LOOP;
    RETURN ARRAY(SELECT DISTINCT s FROM unnest(out) s ORDER BY s);
END $$;

------------------------------------------------------------------------------------------------
-- The configuration in force, as constants. snowflake_id_portable.apply() writes these two
-- functions from the configuration table; PostgreSQL inlines them, so a call reads no table.

-- {serial, epoch in Unix ms, tick_ms, time_bits, shard_bits, seq_bits, owned shard count (0: *),
--  snowflake_words' offset, owned_words' offset}
CREATE FUNCTION snowflake_id_portable.settings() RETURNS bigint[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT '{0,1735689600000,1,41,13,9,0,0,0}'::bigint[] $$;
-- The owned shards, in order ('{}' for *).
CREATE FUNCTION snowflake_id_portable.owned() RETURNS int[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT '{}'::int[] $$;

-- A configuration's owned shards, in order ('{}' for *), and its settings() array.
CREATE FUNCTION snowflake_id_portable.owned_of(c snowflake_id_portable.config) RETURNS int[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = snowflake_id_portable, pg_temp AS $$
    SELECT coalesce(snowflake_id_portable.shard_list(c.shards, (1 << (snowflake_id_layout.widths(c.layout))[2]) - 1), '{}')
$$;
CREATE FUNCTION snowflake_id_portable.settings_of(c snowflake_id_portable.config) RETURNS bigint[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = snowflake_id_portable, pg_temp AS $$
    SELECT ARRAY[c.serial, floor(extract(epoch FROM c.epoch) * 1000)::bigint, w[4], w[1], w[2], w[3],
                 cardinality(snowflake_id_portable.owned_of(c)), c.snowflake_offset, c.owned_offset]
    FROM snowflake_id_layout.widths(c.layout) w
$$;

-- Writes the two functions above, and the serial in state, from the configuration in force. A
-- trigger runs it whenever the configuration table changes, a restore included.
CREATE FUNCTION snowflake_id_portable.apply() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = snowflake_id_portable, pg_temp AS $$
DECLARE
    c snowflake_id_portable.config;
BEGIN
    SELECT * INTO c FROM snowflake_id_portable.config ORDER BY serial DESC LIMIT 1;
    EXECUTE format('CREATE OR REPLACE FUNCTION snowflake_id_portable.settings() RETURNS bigint[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
        format('SELECT %L::bigint[]', snowflake_id_portable.settings_of(c)));
    EXECUTE format('CREATE OR REPLACE FUNCTION snowflake_id_portable.owned() RETURNS int[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
        format('SELECT %L::int[]', snowflake_id_portable.owned_of(c)));
    UPDATE snowflake_id_portable.state SET serial = c.serial;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION snowflake_id_portable.apply() FROM PUBLIC;
CREATE TRIGGER apply AFTER INSERT OR UPDATE OR DELETE ON snowflake_id_portable.config
FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_portable.apply();

------------------------------------------------------------------------------------------------
-- The generators.

-- The clock's tick: Unix milliseconds since the epoch, divided by the tick length.
CREATE FUNCTION snowflake_id_portable.tick(epoch_ms bigint, tick_ms bigint) RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint - epoch_ms) / tick_ms
$$;

-- Takes the lock that serialises the jumps, configure() and advance(), the row of state, FOR
-- UPDATE until the caller's (sub)transaction ends, and returns the serial of the configuration in
-- force (see the header). 55P03 when the table's ROW SHARE lock stays unavailable for a second (a
-- session holds a lock on it with a stronger request queued behind); 40001 when the caller's
-- snapshot predates the configuration in force (REPEATABLE READ), as for any row it would lock.
CREATE FUNCTION snowflake_id_portable.lock_config() RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = snowflake_id_portable, pg_temp AS $$
DECLARE
    give_up CONSTANT timestamptz := clock_timestamp() + interval '1 s';
    in_force bigint;
BEGIN
    LOOP
        BEGIN
            LOCK TABLE snowflake_id_portable.state IN ROW SHARE MODE NOWAIT;
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            IF clock_timestamp() >= give_up THEN
                RAISE EXCEPTION 'could not lock the snowflake_id portable configuration' USING ERRCODE = '55P03',
                    DETAIL = 'For a second, a session held a lock on snowflake_id_portable.state with a stronger request (VACUUM FULL, ALTER TABLE) queued behind it.',
                    HINT = 'Give maintenance of the portable edition''s tables a lock_timeout; pg_locks shows who holds and who waits.';
            END IF;
            PERFORM pg_sleep(0.005);
        END;
    END LOOP;
    SELECT serial INTO in_force FROM snowflake_id_portable.state FOR UPDATE;
    IF in_force IS NULL THEN
        RAISE EXCEPTION 'the snowflake_id portable configuration has no state' USING ERRCODE = '55000',
            HINT = 'A restore is not complete, or the row of snowflake_id_portable.state was deleted: restore it.';
    END IF;
    RETURN in_force;
END $$;

-- The configuration of serial `in_force` (from lock_config(), whose snapshot sees it).
CREATE FUNCTION snowflake_id_portable.config_of(in_force bigint) RETURNS snowflake_id_portable.config
LANGUAGE plpgsql STABLE STRICT SET search_path = snowflake_id_portable, pg_temp AS $$
DECLARE
    c snowflake_id_portable.config;
BEGIN
    SELECT * INTO STRICT c FROM snowflake_id_portable.config WHERE serial = in_force;
    RETURN c;
EXCEPTION WHEN no_data_found THEN
    RAISE EXCEPTION 'the snowflake_id portable configuration % is missing', in_force USING ERRCODE = '55000',
        HINT = 'A restore is not complete, or rows of snowflake_id_portable.config were deleted: restore them.';
END $$;

-- Makes every lock wait of the caller's transaction end within a second (55P03), or within its own
-- shorter lock_timeout: a jump, configure() and advance() hold the jumps' lock while they wait, and
-- every call that jumps waits for it. Returns the lock_timeout to restore.
CREATE FUNCTION snowflake_id_portable.bound_lock_waits() RETURNS text
LANGUAGE plpgsql VOLATILE SET search_path = snowflake_id_portable, pg_temp AS $$
DECLARE
    previous CONSTANT text := current_setting('lock_timeout');
BEGIN
    IF previous::interval NOT BETWEEN '1 us' AND '1 s' THEN
        PERFORM set_config('lock_timeout', '1s', true);
    END IF;
    RETURN previous;
END $$;

-- Makes gen even and stamps it with the serial of the configuration in force. The caller holds
-- lock_config(), which returned `in_force`.
CREATE FUNCTION snowflake_id_portable.settle_gen(in_force bigint) RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = snowflake_id_portable, pg_temp AS $$
DECLARE
    g bigint := pg_sequence_last_value('snowflake_id_portable.gen');
BEGIN
    IF g IS NULL OR g & 131071 <> in_force THEN
        PERFORM setval('snowflake_id_portable.gen', (((coalesce(g >> 16, 0) + 2) & ~1::bigint) << 16) | in_force);
    END IF;
END $$;

-- 55000 in the transaction that changed the configuration: its ids would follow a configuration
-- that a rollback takes back. (configure() leaves gen odd, so every call of that transaction
-- comes through a jump, and here.)
CREATE FUNCTION snowflake_id_portable.not_configuring() RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = snowflake_id_portable, pg_temp AS $$
BEGIN
    IF current_setting('snowflake_id_portable.configured', true) = pg_current_xact_id_if_assigned()::text THEN
        RAISE EXCEPTION 'cannot mint ids in the transaction that changed the portable configuration' USING ERRCODE = '55000',
            HINT = 'Commit the change first.';
    END IF;
END $$;

-- Makes gen odd (a jump, a configuration or an advance is moving the generators): a call whose
-- nextval overlaps this and the next step discards its word. The caller holds lock_config() and
-- settled gen. Returns the value to give gen afterwards, even.
CREATE FUNCTION snowflake_id_portable.fence() RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = snowflake_id_portable, pg_temp AS $$
DECLARE
    g bigint := pg_sequence_last_value('snowflake_id_portable.gen');
BEGIN
    PERFORM setval('snowflake_id_portable.gen', g + 65536);
    RETURN g + 131072;
END $$;

-- The jump: a generator behind the clock's tick is moved to the tick's first word, under
-- lock_config(), in a subtransaction that is rolled back to release the lock at once (a sequence's
-- setval is not rolled back). Returns the word the caller's id is made of: the generator's raw value less
-- `offset`. 40001 if the caller was made for another configuration than the one in force (its
-- next statement has the new one). No lock wait of a jump lasts more than a second, or the caller's
-- shorter lock_timeout (55P03): the row lock waits only for other jumps and a configure() or
-- advance() in progress, but a sequence's lock waits behind DDL queued on it (ALTER SEQUENCE by its
-- owner), as any nextval() does.
CREATE FUNCTION snowflake_id_portable.jump(generator regclass, "offset" bigint, per_tick bigint, epoch_ms bigint, tick_ms bigint,
                                           serial bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = snowflake_id_portable, pg_temp AS $$
DECLARE
    in_force bigint;
    word bigint;
    first bigint;
    after bigint;
BEGIN
    BEGIN
        PERFORM snowflake_id_portable.bound_lock_waits();    -- the rollback below undoes it
        in_force := snowflake_id_portable.lock_config();
        PERFORM snowflake_id_portable.not_configuring();
        PERFORM snowflake_id_portable.settle_gen(in_force);
        IF in_force <> serial THEN
            RAISE EXCEPTION 'the snowflake_id portable configuration changed during this call' USING ERRCODE = '40001',
                HINT = 'Retry the statement.';
        END IF;
        word := nextval(generator) - "offset";
        first := snowflake_id_portable.tick(epoch_ms, tick_ms) * per_tick;
        IF word < first THEN
            after := snowflake_id_portable.fence();
            -- Every word a call kept was handed out before gen turned odd: below this one.
            word := nextval(generator) - "offset";
            IF word < first THEN
                PERFORM setval(generator, first + "offset");
                word := first;
            END IF;
            PERFORM setval('snowflake_id_portable.gen', after);
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'SFJ01';
    EXCEPTION WHEN SQLSTATE 'SFJ01' THEN
        NULL;
    END;
    RETURN word;
END $$;
REVOKE ALL ON FUNCTION snowflake_id_portable.jump(regclass, bigint, bigint, bigint, bigint, bigint) FROM PUBLIC;

-- Makes the commit of the caller's transaction wait for the WAL flush, once per transaction
-- (see the header).
CREATE FUNCTION snowflake_id_portable.flush() RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = snowflake_id_portable, pg_temp AS $$
BEGIN
    PERFORM setval('snowflake_id_portable.flush', 1);
    -- A session-level value, which a later transaction's xid no longer matches.
    PERFORM set_config('snowflake_id_portable.flushed', pg_current_xact_id()::text, false);
END $$;

-- 22008 for a tick past the end of the layout (ids that ran that far ahead of the clock).
CREATE FUNCTION snowflake_id_portable.outside_layout(tick bigint, s bigint[]) RETURNS void
LANGUAGE plpgsql STABLE STRICT SET search_path = snowflake_id_portable, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'timestamp % is outside the snowflake layout', snowflake_id_layout.format_ms(s[2] + tick * s[3])
        USING ERRCODE = '22008',
        DETAIL = format('Snowflake ids cover %s to %s.', snowflake_id_layout.format_ms(s[2]),
            snowflake_id_layout.format_ms(s[2] + 2::numeric ^ s[4] * s[3] - 1));
END $$;

-- The next id for a shard. Not STRICT: a NULL shard is an error (22004), never a NULL key.
CREATE FUNCTION snowflake_next(shard int) RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER SET search_path = snowflake_id_portable, pg_temp AS $$
DECLARE
    s CONSTANT bigint[] := snowflake_id_portable.settings();
    owned CONSTANT int[] := snowflake_id_portable.owned();
    generator regclass := 'snowflake_id_portable.snowflake_words';
    "offset" bigint := s[8];
    per_tick bigint := 1::bigint << s[6]::int;
    tick bigint;
    g bigint;
    word bigint;
BEGIN
    IF shard IS NULL THEN
        RAISE EXCEPTION 'shard must not be null' USING ERRCODE = '22004';
    END IF;
    IF shard < 0 OR shard >= (1 << s[5]::int) THEN
        RAISE EXCEPTION 'shard % is out of range', shard USING ERRCODE = '22003',
            DETAIL = format('Valid shards are 0 to %s under snowflake layout %s/%s/%s%s.', (1 << s[5]::int) - 1, s[4], s[5], s[6],
                CASE WHEN s[3] = 1 THEN '' ELSE '@' || s[3] || 'ms' END);
    END IF;
    IF s[7] > 0 THEN
        IF NOT shard = ANY (owned) THEN
            RAISE EXCEPTION 'shard % is not assigned to this server', shard USING ERRCODE = '22023',
                DETAIL = format('The portable edition''s shards are "%s".', (SELECT c.shards FROM snowflake_id_portable.config c ORDER BY c.serial DESC LIMIT 1)),
                HINT = format('Another server probably mints for shard %s. Call this database with one of its own shards, or add %s to its shards if it really owns it.', shard, shard);
        END IF;
        IF s[7] > 1 THEN
            RAISE EXCEPTION 'snowflake_next(shard) cannot mint for one of several owned shards in the portable edition'
                USING ERRCODE = '0A000',
                DETAIL = 'The owned shards share one generator, which snowflake_next() takes from.',
                HINT = 'Call snowflake_next(), or own a single shard.';
        END IF;
        generator := 'snowflake_id_portable.owned_words';
        "offset" := s[9];
    END IF;
    tick := snowflake_id_portable.tick(s[2], s[3]);
    g := pg_sequence_last_value('snowflake_id_portable.gen');
    word := nextval(generator) - "offset";
    IF (g = pg_sequence_last_value('snowflake_id_portable.gen') AND g & 131071 = s[1] AND word >= tick * per_tick) IS NOT TRUE THEN
        word := snowflake_id_portable.jump(generator, "offset", per_tick, s[2], s[3], s[1]);
    END IF;
    IF pg_current_xact_id_if_assigned() IS NULL
       OR current_setting('snowflake_id_portable.flushed', true) IS DISTINCT FROM pg_current_xact_id_if_assigned()::text THEN
        PERFORM snowflake_id_portable.flush();
    END IF;
    tick := word / per_tick;
    IF tick >= 1::bigint << s[4]::int THEN
        PERFORM snowflake_id_portable.outside_layout(tick, s);
    END IF;
    RETURN (tick << (s[5] + s[6])::int) | (shard::bigint << s[6]::int) | (word % per_tick);
END $$;
COMMENT ON FUNCTION snowflake_next(int) IS 'The next snowflake id for a shard: time, shard and sequence in 63 bits';

-- The next id from the shards this database owns: within a tick, the first shard's sequence,
-- then the next shard's, as the native edition fills them. 55000 under shards '*'. (The steps
-- after the first check are snowflake_next(shard)'s, and uuidv7_next() repeats them too: written
-- out in each, because a call to a shared PL/pgSQL function would add a tenth to every id.)
CREATE FUNCTION snowflake_next() RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER SET search_path = snowflake_id_portable, pg_temp AS $$
DECLARE
    s CONSTANT bigint[] := snowflake_id_portable.settings();
    owned CONSTANT int[] := snowflake_id_portable.owned();
    block bigint := 1::bigint << s[6]::int;
    per_tick bigint := s[7] * block;
    tick bigint;
    g bigint;
    word bigint;
BEGIN
    IF s[7] = 0 THEN
        RAISE EXCEPTION 'the portable edition''s shards do not say which shards this database owns' USING ERRCODE = '55000',
            DETAIL = 'snowflake_next() mints from the shards this database owns, and its shards are "*": every shard, which another database may also mint for.',
            HINT = 'Give each database its own shards, for example SELECT snowflake_portable_configure(shards => ''0-127'');';
    END IF;
    tick := snowflake_id_portable.tick(s[2], s[3]);
    g := pg_sequence_last_value('snowflake_id_portable.gen');
    word := nextval('snowflake_id_portable.owned_words') - s[9];
    IF (g = pg_sequence_last_value('snowflake_id_portable.gen') AND g & 131071 = s[1] AND word >= tick * per_tick) IS NOT TRUE THEN
        word := snowflake_id_portable.jump('snowflake_id_portable.owned_words', s[9], per_tick, s[2], s[3], s[1]);
    END IF;
    IF pg_current_xact_id_if_assigned() IS NULL
       OR current_setting('snowflake_id_portable.flushed', true) IS DISTINCT FROM pg_current_xact_id_if_assigned()::text THEN
        PERFORM snowflake_id_portable.flush();
    END IF;
    tick := word / per_tick;
    IF tick >= 1::bigint << s[4]::int THEN
        PERFORM snowflake_id_portable.outside_layout(tick, s);
    END IF;
    RETURN (tick << (s[5] + s[6])::int) | (owned[(word % per_tick / block)::int + 1]::bigint << s[6]::int) | (word % block);
END $$;
COMMENT ON FUNCTION snowflake_next() IS 'The next snowflake id from the shards this database owns';

-- An RFC 9562 UUIDv7: 48 bits of Unix milliseconds, a 12-bit counter within the millisecond
-- (rand_a, RFC 9562's method 1), and 62 random bits, monotonic across every session.
CREATE FUNCTION uuidv7_next() RETURNS uuid
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER SET search_path = snowflake_id_portable, pg_temp AS $$
DECLARE
    s CONSTANT bigint[] := snowflake_id_portable.settings();
    ms bigint;
    g bigint;
    word bigint;
    r bytea;
BEGIN
    ms := snowflake_id_portable.tick(0, 1);
    g := pg_sequence_last_value('snowflake_id_portable.gen');
    word := nextval('snowflake_id_portable.uuid_words');
    IF (g = pg_sequence_last_value('snowflake_id_portable.gen') AND g & 131071 = s[1] AND word >= ms * 4096) IS NOT TRUE THEN
        word := snowflake_id_portable.jump('snowflake_id_portable.uuid_words', 0, 4096, 0, 1, s[1]);
    END IF;
    IF word >> 12 >= 1::bigint << 48 THEN
        RAISE EXCEPTION 'the clock is outside the UUIDv7 range' USING ERRCODE = '22008',
            DETAIL = 'A UUIDv7 holds 48 bits of Unix milliseconds: 1970-01-01 00:00:00+00 to 10889-08-02 05:31:50.655+00.';
    END IF;
    IF pg_current_xact_id_if_assigned() IS NULL
       OR current_setting('snowflake_id_portable.flushed', true) IS DISTINCT FROM pg_current_xact_id_if_assigned()::text THEN
        PERFORM snowflake_id_portable.flush();
    END IF;
    -- A version 4 UUID's random bits, with its variant bits (10) kept; then the time, the version
    -- (7) and the counter written over its first 8 bytes.
    r := overlay(uuid_send(gen_random_uuid()) PLACING substr(int8send(word >> 12), 3) FROM 1 FOR 6);
    r := set_byte(set_byte(r, 6, 112 | ((word >> 8) & 15)::int), 7, (word & 255)::int);
    RETURN encode(r, 'hex')::uuid;
END $$;
COMMENT ON FUNCTION uuidv7_next() IS 'An RFC 9562 UUIDv7, monotonic across every session of this database';

------------------------------------------------------------------------------------------------
-- Reading ids back. STABLE: they follow the configuration, which may change between statements.

CREATE FUNCTION snowflake_timestamp(id bigint) RETURNS timestamptz
LANGUAGE sql STABLE STRICT PARALLEL SAFE SECURITY DEFINER SET search_path = snowflake_id_portable, pg_temp AS $$
    SELECT snowflake_id_layout.ts_of_ms((snowflake_id_portable.settings())[2]
        + (snowflake_id_layout.parts(id, snowflake_id_portable.settings()))[1] * (snowflake_id_portable.settings())[3])
$$;
COMMENT ON FUNCTION snowflake_timestamp(bigint) IS 'The start of the tick a snowflake id was minted in';

CREATE FUNCTION snowflake_shard(id bigint) RETURNS int
LANGUAGE sql STABLE STRICT PARALLEL SAFE SECURITY DEFINER SET search_path = snowflake_id_portable, pg_temp AS $$ SELECT (snowflake_id_layout.parts(id, snowflake_id_portable.settings()))[2]::int $$;
COMMENT ON FUNCTION snowflake_shard(bigint) IS 'The shard a snowflake id was minted for';

CREATE FUNCTION snowflake_seq(id bigint) RETURNS int
LANGUAGE sql STABLE STRICT PARALLEL SAFE SECURITY DEFINER SET search_path = snowflake_id_portable, pg_temp AS $$ SELECT (snowflake_id_layout.parts(id, snowflake_id_portable.settings()))[3]::int $$;
COMMENT ON FUNCTION snowflake_seq(bigint) IS 'A snowflake id''s position in its shard''s tick';

CREATE FUNCTION snowflake_decode(id bigint, OUT ts timestamptz, OUT shard int, OUT seq int) RETURNS record
LANGUAGE sql STABLE STRICT PARALLEL SAFE SECURITY DEFINER SET search_path = snowflake_id_portable, pg_temp AS $$
    SELECT snowflake_id_layout.ts_of_ms(s[2] + p[1] * s[3]), p[2]::int, p[3]::int
    FROM snowflake_id_layout.parts(id, snowflake_id_portable.settings()) p, snowflake_id_portable.settings() s
$$;
COMMENT ON FUNCTION snowflake_decode(bigint) IS 'The creation time (start of its tick), shard and sequence of a snowflake id';

CREATE FUNCTION snowflake_min_id(ts timestamptz) RETURNS bigint
LANGUAGE sql STABLE STRICT PARALLEL SAFE SECURITY DEFINER SET search_path = snowflake_id_portable, pg_temp AS $$
    SELECT snowflake_id_layout.tick_at(ts, snowflake_id_portable.settings()) << ((snowflake_id_portable.settings())[5] + (snowflake_id_portable.settings())[6])::int
$$;
COMMENT ON FUNCTION snowflake_min_id(timestamptz) IS 'The smallest id any shard can mint in the tick holding ts';

CREATE FUNCTION snowflake_max_id(ts timestamptz) RETURNS bigint
LANGUAGE sql STABLE STRICT PARALLEL SAFE SECURITY DEFINER SET search_path = snowflake_id_portable, pg_temp AS $$
    SELECT (snowflake_id_layout.tick_at(ts, snowflake_id_portable.settings()) << ((snowflake_id_portable.settings())[5] + (snowflake_id_portable.settings())[6])::int) | ((1::bigint << ((snowflake_id_portable.settings())[5] + (snowflake_id_portable.settings())[6])::int) - 1)
$$;
COMMENT ON FUNCTION snowflake_max_id(timestamptz) IS 'The largest id any shard can mint in the tick holding ts';

------------------------------------------------------------------------------------------------
-- The readers again, with the layout and epoch as arguments instead of the configuration: IMMUTABLE,
-- so that generated columns, expression indexes, CHECK constraints and partitioning tools can use
-- them. The same results and SQLSTATEs as the native edition's, in the same order. Plain functions
-- over snowflake_id_layout and pg_catalog only (see snowflake_id_layout above): they outlive the
-- counters. The functions without an epoch check the layout against 1970-01-01, as the native
-- edition does. The ones in SQL are single expressions with no SET, named as in snowflake_id_layout's
-- SQL helpers, so that PostgreSQL inlines them: a generated column or an index over one computes
-- the layout once, when its expression is planned, instead of once a row.

CREATE FUNCTION snowflake_timestamp(id bigint, layout text, epoch timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT snowflake_id_layout.ts_of_ms(CAST((snowflake_id_layout.named(layout, epoch))[2]
        OPERATOR(pg_catalog.+) ((snowflake_id_layout.parts(id, snowflake_id_layout.named(layout, epoch)))[1]
                                OPERATOR(pg_catalog.*) (snowflake_id_layout.named(layout, epoch))[3]) AS pg_catalog.numeric))
$$;
COMMENT ON FUNCTION snowflake_timestamp(bigint, text, timestamptz) IS 'The start of the tick a snowflake id was minted in, under the layout and epoch given';

CREATE FUNCTION snowflake_shard(id bigint, layout text) RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CAST((snowflake_id_layout.parts(id, snowflake_id_layout.named(layout)))[2] AS pg_catalog.int4)
$$;
COMMENT ON FUNCTION snowflake_shard(bigint, text) IS 'The shard a snowflake id was minted for, under the layout given';

CREATE FUNCTION snowflake_seq(id bigint, layout text) RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CAST((snowflake_id_layout.parts(id, snowflake_id_layout.named(layout)))[3] AS pg_catalog.int4)
$$;
COMMENT ON FUNCTION snowflake_seq(bigint, text) IS 'A snowflake id''s position in its shard''s tick, under the layout given';

-- The native edition's is snowflake_timestamp, snowflake_shard and snowflake_seq in turn: their
-- checks, in that order, which are the first one's (a layout that passes under the epoch given
-- passes under 1970). PostgreSQL inlines no function that returns a record, but with no SET it is
-- a plain SQL function, planned once per query.
CREATE FUNCTION snowflake_decode(id bigint, layout text, epoch timestamptz, OUT ts timestamptz, OUT shard int, OUT seq int) RETURNS record
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT snowflake_id_layout.ts_of_ms(CAST(s[2] OPERATOR(pg_catalog.+) (p[1] OPERATOR(pg_catalog.*) s[3]) AS pg_catalog.numeric)),
           CAST(p[2] AS pg_catalog.int4), CAST(p[3] AS pg_catalog.int4)
    FROM snowflake_id_layout.named(layout, epoch) s, snowflake_id_layout.parts(id, s) p
$$;
COMMENT ON FUNCTION snowflake_decode(bigint, text, timestamptz) IS 'The creation time (start of its tick), shard and sequence of a snowflake id, under the layout and epoch given';

CREATE FUNCTION snowflake_min_id(ts timestamptz, layout text, epoch timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT snowflake_id_layout.tick_at(ts, snowflake_id_layout.named(layout, epoch))
        OPERATOR(pg_catalog.<<) CAST((snowflake_id_layout.named(layout, epoch))[5]
                                     OPERATOR(pg_catalog.+) (snowflake_id_layout.named(layout, epoch))[6] AS pg_catalog.int4)
$$;
COMMENT ON FUNCTION snowflake_min_id(timestamptz, text, timestamptz) IS 'The smallest id any shard can mint in the tick holding ts, under the layout and epoch given';

CREATE FUNCTION snowflake_max_id(ts timestamptz, layout text, epoch timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT (snowflake_id_layout.tick_at(ts, snowflake_id_layout.named(layout, epoch))
            OPERATOR(pg_catalog.<<) CAST((snowflake_id_layout.named(layout, epoch))[5]
                                         OPERATOR(pg_catalog.+) (snowflake_id_layout.named(layout, epoch))[6] AS pg_catalog.int4))
        OPERATOR(pg_catalog.|) ((CAST(1 AS pg_catalog.int8)
                                 OPERATOR(pg_catalog.<<) CAST((snowflake_id_layout.named(layout, epoch))[5]
                                                              OPERATOR(pg_catalog.+) (snowflake_id_layout.named(layout, epoch))[6] AS pg_catalog.int4))
                                OPERATOR(pg_catalog.-) 1)
$$;
COMMENT ON FUNCTION snowflake_max_id(timestamptz, text, timestamptz) IS 'The largest id any shard can mint in the tick holding ts, under the layout and epoch given';

-- How many ids a span of time holds across every shard of a layout: a partition's width when a
-- table is partitioned by id (pg_partman's integer interval). 22023 for months or years, and for a
-- span that is not 1 to 2^time_bits - 1 whole ticks.
CREATE FUNCTION snowflake_id_interval(span interval, layout text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    s CONSTANT bigint[] := snowflake_id_layout.named(layout);
    us numeric;
BEGIN
    IF NOT isfinite(span) OR extract(month FROM span) <> 0 OR extract(year FROM span) <> 0 THEN
        RAISE EXCEPTION 'a span of months or years holds no fixed number of snowflake ids' USING ERRCODE = '22023',
            HINT = 'Give the span in days or smaller units; for calendar months, use snowflake_partitions().';
    END IF;
    us := extract(epoch FROM span) * 1000000;
    IF us <= 0 OR us % (1000 * s[3]) <> 0 OR us / (1000 * s[3]) > 2::numeric ^ s[4] - 1 THEN
        RAISE EXCEPTION '%', CASE WHEN us > 9223372036854775807 THEN 'a span this long does not fit the snowflake layout'
                                  ELSE format('a span of %s ms does not fit the snowflake layout', trim_scale(us / 1000)) END
            USING ERRCODE = '22023',
            DETAIL = format('Under snowflake layout %s, a span is 1 to %s ticks of %s ms, with no months or years.',
                snowflake_id_layout.spelling(ARRAY[s[4], s[5], s[6], s[3]]::int[]), (2::numeric ^ s[4] - 1)::bigint, s[3]);
    END IF;
    RETURN ((us / (1000 * s[3]))::bigint) << (s[5] + s[6])::int;
END $$;
COMMENT ON FUNCTION snowflake_id_interval(interval, text) IS 'How many ids a span of time holds across every shard of a layout: a partition''s width';

-- The id bounds of the partitions that cover a time range, in UTC whatever the TimeZone: partition
-- k (from 0) starts at first + k * step (calendar months included, the day of the month clamped
-- to a shorter month, as PostgreSQL adds an interval to a timestamp: from January 31 by a month,
-- February 28, March 31, April 30), for as long as that start is at or before last, and ends where
-- partition k + 1 starts. Its bounds: FROM (lower_id) TO (upper_id), each the snowflake_min_id of
-- the time. The checks, in order (the native edition's): the layout and epoch; first and last
-- finite (22008); a step with no negative part, not zero, and at least a tick long when it has no
-- months or days (22023); then partition by partition, at most 100,000 (54000).
CREATE FUNCTION snowflake_partitions(first timestamptz, last timestamptz, step interval, layout text, epoch timestamptz,
                                     OUT starts timestamptz, OUT ends timestamptz, OUT lower_id bigint, OUT upper_id bigint)
RETURNS SETOF record
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    l CONSTANT bigint[] := snowflake_id_layout.named(layout, epoch);
    most CONSTANT int := 100000;
    months numeric;
    days numeric;
    micros numeric;
    base timestamp;
    upto timestamp;
    t timestamp;
    after timestamp;
    k int := 0;
BEGIN
    PERFORM snowflake_id_layout.unix_us(first), snowflake_id_layout.unix_us(last);
    -- The step's three fields, exactly: months, days, microseconds. (An infinite step, from
    -- PostgreSQL 17: -infinity has negative fields; infinity has none, and no partition ends.)
    IF isfinite(step) THEN
        months := extract(year FROM step) * 12 + extract(month FROM step);
        days := extract(day FROM step);
        micros := extract(epoch FROM step - make_interval(months => months::int, days => days::int)) * 1000000;
    END IF;
    IF (NOT isfinite(step) AND step < interval '0') OR months < 0 OR days < 0 OR micros < 0
       OR (months = 0 AND days = 0 AND micros < l[3] * 1000) THEN
        RAISE EXCEPTION 'invalid partition step' USING ERRCODE = '22023',
            DETAIL = format('A partition step is positive, has no negative part, and is at least one tick (%s ms) long.', l[3]);
    END IF;
    base := first AT TIME ZONE 'UTC';
    upto := last AT TIME ZONE 'UTC';
    -- Partition by partition, as the native edition makes them: the count, the end (the next
    -- start), the lower bound, the upper bound. At most 100,000, however far apart first and
    -- last are; the upper bound of one is the lower bound of the next.
    t := base;
    WHILE t <= upto LOOP
        IF k = most THEN
            RAISE EXCEPTION 'too many partitions' USING ERRCODE = '54000',
                DETAIL = format('snowflake_partitions makes at most %s partitions in one call.', most);
        END IF;
        k := k + 1;
        IF NOT isfinite(step) THEN
            RAISE EXCEPTION 'timestamp out of range' USING ERRCODE = '22008',
                DETAIL = 'Infinite timestamps, and timestamps beyond PostgreSQL''s range, have no id.';
        END IF;
        -- k steps at once: the months, then the days, then the time (days and time are the same
        -- in a timestamp without time zone, and a product with an interval goes through float8,
        -- exact only to 2^53: so the microseconds are split into days and the rest of a day).
        after := base + interval '1 month' * (k * months)::float8;
        after := after + interval '1 day' * (k * days + div(k * micros, 86400000000))::float8
                     + interval '1 microsecond' * mod(k * micros, 86400000000)::float8;
        starts := t AT TIME ZONE 'UTC';
        ends := after AT TIME ZONE 'UTC';
        lower_id := CASE WHEN k = 1 THEN snowflake_id_layout.tick_at(starts, l) << (l[5] + l[6])::int ELSE upper_id END;
        upper_id := snowflake_id_layout.tick_at(ends, l) << (l[5] + l[6])::int;
        RETURN NEXT;
        t := after;
    END LOOP;
END $$;
COMMENT ON FUNCTION snowflake_partitions(timestamptz, timestamptz, interval, text, timestamptz) IS 'The id bounds of partitions of one step each, in UTC, from first until one holds last';

-- The id of a time, shard and position under a layout and epoch: for backfilling rows of past times
-- on a shard no database mints for (docs/partitioning.md).
CREATE FUNCTION snowflake_compose(ts timestamptz, shard int, seq int, layout text, epoch timestamptz) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    s CONSTANT bigint[] := snowflake_id_layout.named(layout, epoch);
    tick CONSTANT bigint := snowflake_id_layout.tick_at(ts, s);
    kind CONSTANT text := snowflake_id_layout.spelling(ARRAY[s[4], s[5], s[6], s[3]]::int[]);
BEGIN
    IF shard < 0 OR shard >= 1::bigint << s[5]::int THEN
        RAISE EXCEPTION 'shard % is out of range', shard USING ERRCODE = '22003',
            DETAIL = format('Valid shards are 0 to %s under snowflake layout %s.', (1::bigint << s[5]::int) - 1, kind);
    END IF;
    IF seq < 0 OR seq >= 1::bigint << s[6]::int THEN
        RAISE EXCEPTION 'sequence % is out of range', seq USING ERRCODE = '22003',
            DETAIL = format('Valid sequences are 0 to %s under snowflake layout %s.', (1::bigint << s[6]::int) - 1, kind);
    END IF;
    RETURN (tick << (s[5] + s[6])::int) | (shard::bigint << s[6]::int) | seq;
END $$;
COMMENT ON FUNCTION snowflake_compose(timestamptz, int, int, text, timestamptz) IS 'The snowflake id of a time, shard and position under the layout and epoch given';

------------------------------------------------------------------------------------------------
-- Layout figures.

-- The figures of a layout: the configured one, or any a DBA is weighing.
-- (The figures are computed by snowflake_id_portable.figures: PL/pgSQL cannot name an argument
-- and a result column alike, as this signature, the native edition's, does.)
CREATE FUNCTION snowflake_id_portable.figures(l text, e timestamptz,
    OUT layout text, OUT epoch timestamptz, OUT time_bits int, OUT shard_bits int, OUT seq_bits int, OUT tick_ms int,
    OUT max_shard int, OUT ids_per_ms double precision, OUT ids_per_second bigint,
    OUT last_timestamp timestamptz, OUT lifetime_years double precision)
LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = snowflake_id_portable, pg_temp AS $$
DECLARE
    s CONSTANT bigint[] := snowflake_id_portable.settings();
    w int[] := CASE WHEN l IS NULL THEN ARRAY[s[4], s[5], s[6], s[3]]::int[] ELSE snowflake_id_layout.widths(l) END;
    epoch_ms bigint := CASE WHEN e IS NULL THEN s[2] ELSE snowflake_id_layout.epoch_ms(e) END;
    end_ms numeric := (snowflake_id_layout.layout_of(w, epoch_ms))[2] + 2::numeric ^ w[1] * w[4] - 1;
BEGIN
    layout := w[1] || '/' || w[2] || '/' || w[3] || CASE WHEN w[4] = 1 THEN '' ELSE '@' || w[4] || 'ms' END;
    epoch := snowflake_id_layout.ts_of_ms(epoch_ms);
    time_bits := w[1];
    shard_bits := w[2];
    seq_bits := w[3];
    tick_ms := w[4];
    max_shard := (1 << w[2]) - 1;
    ids_per_ms := (2::numeric ^ w[3] / w[4])::double precision;
    ids_per_second := (2::numeric ^ w[3] * 1000 / w[4])::bigint;
    last_timestamp := CASE WHEN end_ms >= 9224318016000000 THEN 'infinity'::timestamptz ELSE snowflake_id_layout.ts_of_ms(end_ms) END;
    lifetime_years := (2::numeric ^ w[1] * w[4] / 31557600000)::double precision;
END $$;

CREATE FUNCTION snowflake_layout(layout text DEFAULT NULL, epoch timestamptz DEFAULT NULL)
RETURNS TABLE (layout text, epoch timestamptz, time_bits int, shard_bits int, seq_bits int, tick_ms int,
               max_shard int, ids_per_ms double precision, ids_per_second bigint,
               last_timestamp timestamptz, lifetime_years double precision)
LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER SET search_path = snowflake_id_portable, pg_temp AS $$
    SELECT * FROM snowflake_id_portable.figures($1, $2)
$$;
COMMENT ON FUNCTION snowflake_layout(text, timestamptz) IS 'The figures of a snowflake layout: the configured one by default';

------------------------------------------------------------------------------------------------
-- Text forms: Crockford base32 of fixed width, which sorts like the value. 13 characters for a
-- snowflake id, the 26 of a ULID for a UUID. Decoding is strict: exactly the width, the alphabet
-- in either case, no aliases. IMMUTABLE, and plain functions over snowflake_id_layout and
-- pg_catalog, as the readers with a layout argument are.

-- 22P02 for a text that is not the width in bytes, has a character outside the alphabet (ASCII
-- only: no upper(), which maps look-alikes such as U+017F onto letters), or is too large. The
-- alphabet is spelled out in both cases: its lower-case letters (from position 33) are digits 10
-- to 31. Every character before the first bad one is ASCII, so its position is also its byte's.
CREATE FUNCTION snowflake_id_layout.base32_digits(t text, kind text, width int) RETURNS int[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    digits int[] := '{}';
    d int;
    why text;
    shown text := '';
    b bytea := convert_to(left(t, 40), 'UTF8');
BEGIN
    IF octet_length(t) <> width THEN
        why := format('The text is %s bytes long, not %s.', octet_length(t), width);
    ELSE
        FOR i IN 1 .. char_length(t) LOOP
            d := strpos('0123456789ABCDEFGHJKMNPQRSTVWXYZabcdefghjkmnpqrstvwxyz', substr(t COLLATE pg_catalog."C", i, 1)) - 1;
            IF d > 31 THEN
                d := d - 22;
            END IF;
            IF d < 0 THEN
                why := format('The text has a character outside Crockford''s base32 alphabet at position %s.', i);
                EXIT;
            END IF;
            digits := digits || d;
        END LOOP;
        IF why IS NULL AND digits[1] > 7 THEN
            why := 'The text is larger than the largest value of its type.';
        END IF;
    END IF;
    IF why IS NULL THEN
        RETURN digits;
    END IF;
    FOR i IN 0 .. least(octet_length(b), 32) - 1 LOOP
        shown := shown || CASE WHEN get_byte(b, i) BETWEEN 32 AND 126 THEN chr(get_byte(b, i))
                               ELSE chr(92) || 'x' || lpad(to_hex(get_byte(b, i)), 2, '0') END;
    END LOOP;
    IF octet_length(t) > 32 THEN
        shown := shown || '...';
    END IF;
    RAISE EXCEPTION 'invalid input syntax for %: "%"', kind, shown USING ERRCODE = '22P02', DETAIL = why;
END $$;

CREATE FUNCTION snowflake_to_text(id bigint) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    out text := '';
BEGIN
    IF id < 0 THEN
        RAISE EXCEPTION 'snowflake id % is negative', id USING ERRCODE = '22003';
    END IF;
    FOR i IN REVERSE 12 .. 0 LOOP
        out := out || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((id >> (5 * i)) & 31)::int + 1, 1);
    END LOOP;
    RETURN out;
END $$;
COMMENT ON FUNCTION snowflake_to_text(bigint) IS 'The 13-character text of a snowflake id: Crockford base32, which sorts like the ids';

CREATE FUNCTION snowflake_from_text(t text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id bigint := 0;
    d int;
BEGIN
    FOREACH d IN ARRAY snowflake_id_layout.base32_digits(t, 'a snowflake id''s text', 13) LOOP
        id := (id << 5) | d;
    END LOOP;
    RETURN id;
END $$;
COMMENT ON FUNCTION snowflake_from_text(text) IS 'The snowflake id of a 13-character text (either case)';

CREATE FUNCTION uuid_to_ulid(id uuid) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    bits bit(130) := B'00' || ('x' || encode(uuid_send(id), 'hex'))::bit(128);
    out text := '';
BEGIN
    FOR i IN 0 .. 25 LOOP
        out := out || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', substring(bits FROM i * 5 + 1 FOR 5)::int + 1, 1);
    END LOOP;
    RETURN out;
END $$;
COMMENT ON FUNCTION uuid_to_ulid(uuid) IS 'The ULID text of a UUID: for a UUIDv7, the ULID of the same time and bits';

CREATE FUNCTION ulid_to_uuid(t text) RETURNS uuid
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    bits varbit := B'';
    hex text := '';
    d int;
BEGIN
    FOREACH d IN ARRAY snowflake_id_layout.base32_digits(t, 'a ULID', 26) LOOP
        bits := bits || d::bit(5);
    END LOOP;
    FOR i IN 0 .. 31 LOOP
        hex := hex || to_hex(substring(bits FROM 3 + i * 4 FOR 4)::int);
    END LOOP;
    RETURN hex::uuid;
END $$;
COMMENT ON FUNCTION ulid_to_uuid(text) IS 'The UUID of a 26-character ULID text (either case)';

------------------------------------------------------------------------------------------------
-- Configuration and moving between editions: for the role that installed it (and superusers).

-- The latest tick of each generator, as the configuration `s` maps its raw values: {snowflake
-- tick, UUID ms}; -1 for one that never minted. The last values bound every word a call kept
-- once gen is odd (a caller that fences first).
CREATE FUNCTION snowflake_id_portable.latest(s bigint[]) RETURNS bigint[]
LANGUAGE sql VOLATILE SET search_path = snowflake_id_portable, pg_temp AS $$
    SELECT ARRAY[greatest(
               coalesce(floor((pg_sequence_last_value('snowflake_id_portable.snowflake_words') - s[8])::numeric / (1::bigint << s[6]::int))::bigint, -1),
               coalesce(floor((pg_sequence_last_value('snowflake_id_portable.owned_words') - s[9])::numeric / (greatest(s[7], 1) << s[6]::int))::bigint, -1)),
           coalesce(pg_sequence_last_value('snowflake_id_portable.uuid_words') >> 12, -1)]
$$;

-- Moves a generator so that its next raw value is at least `first`, fenced as a jump is (gen odd
-- around the setval). The caller holds lock_config() and settled gen.
CREATE FUNCTION snowflake_id_portable.raise_to(generator regclass, first bigint) RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = snowflake_id_portable, pg_temp AS $$
DECLARE
    after bigint := snowflake_id_portable.fence();
BEGIN
    IF nextval(generator) < first THEN
        PERFORM setval(generator, first - 1);
    END IF;
    PERFORM setval('snowflake_id_portable.gen', after);
END $$;

-- Chooses the layout, epoch and shards (NULL keeps the current one), and returns the
-- configuration in force. The layout and epoch may change only before the first snowflake id;
-- the shards at any time. The generators are not moved: gen is made odd, and the new row's
-- offsets map their next raw values to the first words of the tick after the latest one minted,
-- in the new scale. Every call waits for this transaction to end; run it on its own.
CREATE FUNCTION snowflake_id_portable.configure(layout text, epoch timestamptz, shards text)
RETURNS snowflake_id_portable.config
LANGUAGE plpgsql VOLATILE SET search_path = snowflake_id_portable, pg_temp AS $$
DECLARE
    previous_lock_timeout text;
    in_force bigint;
    cur snowflake_id_portable.config;
    s bigint[];
    w int[];
    owned int[];
    new_layout text;
    new_epoch timestamptz;
    latest bigint[];
    base bigint;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'snowflake_portable_configure() runs only in a READ COMMITTED transaction' USING ERRCODE = '0A000',
            HINT = 'Run it on its own, in autocommit.';
    END IF;
    previous_lock_timeout := snowflake_id_portable.bound_lock_waits();
    -- The configuration table and its index are locked before the jumps' lock, so that planning a
    -- read of them under it never waits (behind a REINDEX queued behind another role's lock).
    PERFORM 1 FROM snowflake_id_portable.config LIMIT 1;
    -- Two statements: the second's snapshot, taken after the lock, sees the configuration a
    -- configure() that committed while this one waited made.
    in_force := snowflake_id_portable.lock_config();
    cur := snowflake_id_portable.config_of(in_force);
    PERFORM snowflake_id_portable.settle_gen(cur.serial);
    s := snowflake_id_portable.settings_of(cur);
    w := snowflake_id_layout.widths(coalesce(configure.layout, cur.layout));
    new_layout := w[1] || '/' || w[2] || '/' || w[3] || CASE WHEN w[4] = 1 THEN '' ELSE '@' || w[4] || 'ms' END;
    new_epoch := coalesce(configure.epoch, cur.epoch);
    IF NOT isfinite(new_epoch) OR new_epoch < 'epoch' OR new_epoch > now() THEN
        RAISE EXCEPTION 'invalid snowflake epoch' USING ERRCODE = '22023',
            DETAIL = 'The epoch must lie between 1970-01-01 00:00:00+00 and now.';
    END IF;
    IF (new_layout <> cur.layout OR new_epoch <> cur.epoch) AND (snowflake_id_portable.latest(s))[1] >= 0 THEN
        RAISE EXCEPTION 'the snowflake layout and epoch can change only before the first id' USING ERRCODE = '55000',
            DETAIL = format('This database minted snowflake ids under %s from %s; other ids would not sort or decode with them.', cur.layout, cur.epoch);
    END IF;
    owned := coalesce(snowflake_id_portable.shard_list(coalesce(configure.shards, cur.shards), (1 << w[2]) - 1), '{}');
    IF cur.serial >= 65535 THEN
        RAISE EXCEPTION 'the portable edition has been configured 65,535 times' USING ERRCODE = '54000';
    END IF;
    -- gen odd until the first jump after this transaction: no call keeps a word meanwhile, so the
    -- generators' last values bound every word kept.
    PERFORM snowflake_id_portable.fence();
    latest := snowflake_id_portable.latest(s);
    base := latest[1] + 1;
    INSERT INTO snowflake_id_portable.config (serial, layout, epoch, shards, snowflake_offset, owned_offset)
    VALUES (cur.serial + 1, new_layout, new_epoch,
            CASE WHEN cardinality(owned) = 0 THEN '*' ELSE btrim(coalesce(configure.shards, cur.shards)) END,
            coalesce(pg_sequence_last_value('snowflake_id_portable.snowflake_words'), -1) + 1 - base * (1::bigint << w[3]),
            coalesce(pg_sequence_last_value('snowflake_id_portable.owned_words'), -1) + 1 - base * (greatest(cardinality(owned), 1) << w[3]));
    PERFORM set_config('snowflake_id_portable.configured', pg_current_xact_id()::text, false);
    SELECT * INTO cur FROM snowflake_id_portable.config c ORDER BY c.serial DESC LIMIT 1;
    PERFORM set_config('lock_timeout', previous_lock_timeout, true);
    RETURN cur;
END $$;

CREATE FUNCTION snowflake_portable_configure(layout text DEFAULT NULL, epoch timestamptz DEFAULT NULL, shards text DEFAULT NULL)
RETURNS TABLE (layout text, epoch timestamptz, shards text)
LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY DEFINER SET search_path = snowflake_id_portable, pg_temp AS $$
    SELECT c.layout, c.epoch, c.shards FROM snowflake_id_portable.configure($1, $2, $3) c
$$;
REVOKE ALL ON FUNCTION snowflake_portable_configure(text, timestamptz, text) FROM PUBLIC;
COMMENT ON FUNCTION snowflake_portable_configure(text, timestamptz, text) IS 'Chooses the layout and epoch (before the first id) and the shards this database owns';

-- The time every id this database minted lies before: the native edition's floor, for
-- SELECT snowflake_id_advance(...) when moving to it.
CREATE FUNCTION snowflake_id_portable.high_water(s bigint[]) RETURNS timestamptz
LANGUAGE sql VOLATILE SET search_path = snowflake_id_portable, pg_temp AS $$
    SELECT greatest(snowflake_id_layout.ts_of_ms(s[2] + (l[1] + 1) * s[3]), snowflake_id_layout.ts_of_ms(l[2] + 1))
    FROM snowflake_id_portable.latest(s) l
$$;

CREATE FUNCTION snowflake_portable_high_water() RETURNS timestamptz
LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY DEFINER SET search_path = snowflake_id_portable, pg_temp AS $$
    SELECT snowflake_id_portable.high_water(snowflake_id_portable.settings_of(snowflake_id_portable.config_of(serial)))
    FROM snowflake_id_portable.state
$$;
REVOKE ALL ON FUNCTION snowflake_portable_high_water() FROM PUBLIC;
COMMENT ON FUNCTION snowflake_portable_high_water() IS 'A time after every id this database minted';

-- Moves every generator past `ts`: the next ids come from later ticks. For a database whose ids
-- were minted elsewhere (the native edition, another server) up to that time. At most an hour
-- ahead of the clock (22023): the move is permanent.
CREATE FUNCTION snowflake_portable_advance(ts timestamptz) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE STRICT SECURITY DEFINER SET search_path = snowflake_id_portable, pg_temp AS $$
DECLARE
    previous_lock_timeout text;
    in_force bigint;
    s bigint[];
    tick bigint;
    ms bigint;
BEGIN
    IF ts > clock_timestamp() + interval '1 hour' THEN
        RAISE EXCEPTION 'cannot advance the generators to %', ts USING ERRCODE = '22023',
            DETAIL = 'It is more than an hour ahead of the clock; the move would be permanent.';
    END IF;
    previous_lock_timeout := snowflake_id_portable.bound_lock_waits();
    PERFORM 1 FROM snowflake_id_portable.config LIMIT 1;    -- as configure() does, before the lock
    in_force := snowflake_id_portable.lock_config();
    PERFORM snowflake_id_portable.not_configuring();
    PERFORM snowflake_id_portable.settle_gen(in_force);
    s := snowflake_id_portable.settings_of(snowflake_id_portable.config_of(in_force));
    tick := snowflake_id_layout.tick_at(ts, s);
    ms := floor(extract(epoch FROM ts) * 1000);
    PERFORM snowflake_id_portable.raise_to('snowflake_id_portable.snowflake_words', (tick + 1) * (1::bigint << s[6]::int) + s[8]);
    PERFORM snowflake_id_portable.raise_to('snowflake_id_portable.owned_words', (tick + 1) * (greatest(s[7], 1) << s[6]::int) + s[9]);
    PERFORM snowflake_id_portable.raise_to('snowflake_id_portable.uuid_words', (ms + 1) << 12);
    PERFORM set_config('lock_timeout', previous_lock_timeout, true);
    RETURN snowflake_id_portable.high_water(s);
END $$;
REVOKE ALL ON FUNCTION snowflake_portable_advance(timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION snowflake_portable_advance(timestamptz) IS 'Moves every generator past a time: the next ids are later';
