# The portable edition through pg_tle, and moving a database between the editions, on every major
# in SFID_TLE (default 15 and 18). pg_tle is built from ../shared/vendor by pg_test/tap.sh.
# - A role granted pgtle_admin, not a superuser, registers sql/portable/pg_tle.sql and creates the
#   extension snowflake_id_portable; its ids decode with the native extension's functions.
# - pg_dump / pg_restore of that database: the configuration and the generators travel (marked
#   with pg_extension_config_dump), and the next ids are above the restored ones.
# - Portable to native: a database whose portable ids run 15 s ahead is restored onto a
#   server with the native extension; after the documented switch, the first native id is above
#   every portable id, and a table whose generated columns, expression index and CHECK constraint
#   are made of the IMMUTABLE functions takes rows as before, with the native functions' values.
#   The same switch in place under pg_tle, where those functions are taken out of the extension.
# - Native to portable: the reverse, restored without the extension into a database with the
#   portable edition, on a clock a minute behind the native ids.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeNode;

# A table whose generated columns, expression index and CHECK constraint are made of the portable
# edition's IMMUTABLE functions (those a move to the native edition keeps), and rows in it.
my $events = q{
	CREATE TABLE events (
		id bigint PRIMARY KEY DEFAULT snowflake_next(),
		shard int GENERATED ALWAYS AS (snowflake_shard(id, 'default')) STORED,
		made_at timestamptz GENERATED ALWAYS AS (snowflake_timestamp(id, 'default', '2025-01-01 00:00+00')) STORED,
		code text GENERATED ALWAYS AS (snowflake_to_text(id)) STORED,
		CHECK (id >= snowflake_min_id('2025-01-02 00:00+00', 'default', '2025-01-01 00:00+00') AND snowflake_seq(id, 'default') >= 0));
	CREATE INDEX events_second ON events (date_trunc('second', snowflake_timestamp(id, 'default', '2025-01-01 00:00+00') AT TIME ZONE 'UTC'));
	INSERT INTO events (id) SELECT snowflake_next() FROM generate_series(1, 100);};

# After a move to the native edition (in schema snowflake): a row goes into that table, every
# row's columns are what the native functions give, the index finds them and the CHECK refuses.
sub events_work
{
	my ($node, $db, $what, $shard) = @_;
	is($node->safe_psql($db, q{INSERT INTO events DEFAULT VALUES RETURNING shard}), $shard,
		"$what: a row goes into the table of generated columns over the IMMUTABLE functions, from the native generator");
	is($node->safe_psql($db, q{
		SELECT count(*), count(*) FILTER (WHERE shard = snowflake.snowflake_shard(id) AND made_at = snowflake.snowflake_timestamp(id)
		                                    AND code = snowflake.snowflake_to_text(id))
		FROM events}), '101|101', "$what: its columns hold the native functions' values, for the portable rows and the native one");
	is($node->safe_psql($db, q{
		REINDEX TABLE events;
		SET enable_seqscan = off;
		SELECT count(*) FROM events
		WHERE date_trunc('second', snowflake_timestamp(id, 'default', '2025-01-01 00:00+00') AT TIME ZONE 'UTC') >= '2025-01-02'}),
		'101', "$what: the expression index rebuilds and finds the rows");
	my ($rc, $out, $err) = $node->psql($db, 'INSERT INTO events (id) VALUES (5)');
	like($err, qr/violates check constraint/, "$what: the CHECK constraint holds");
}

my $dir = "$ENV{TESTDIR}/portable";
-e "$dir/pg_tle.sql" or BAIL_OUT("$dir/pg_tle.sql is missing: pg_test/tap.sh copies sql/portable");
if (($ENV{SFID_PG_TLE} // '') ne 'yes')
{
	plan skip_all => "pg_tle was not built ($ENV{SFID_PG_TLE}): the vendored tarball is missing" if ($ENV{SFID_PG_TLE} // '') eq 'no';
	BAIL_OUT("pg_tle failed to build");
}

for my $major (split ' ', $ENV{SFID_TLE} // '15 18')
{
	my $node = sfid_node("tle_$major", $major,
		"shared_preload_libraries = 'pg_tle,snowflake_id'\nsnowflake_id.shards = '200-207'\nmax_connections = 20"
		  # The native ids below start 15 s ahead of the clock: a call waits for it.
		  . "\nsnowflake_id.max_rewind_wait = '60s'");
	start_with_clock($node);
	my $psql_as = sub {
		my ($user, $db, @args) = @_;
		return [ $node->installed_command('psql'), '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($db) . " user=$user", @args ];
	};
	my $as = sub { my ($user, $db, $sql) = @_; return $node->safe_psql($db, $sql, extra_params => [ '-U', $user ]); };

	# pg_tle: the superuser's part is pg_tle's own set-up; the rest is a role granted pgtle_admin.
	$node->safe_psql('postgres', 'CREATE ROLE tle LOGIN; CREATE DATABASE tledb OWNER tle');
	$node->safe_psql('tledb', 'CREATE EXTENSION pg_tle; GRANT pgtle_admin TO tle');
	$node->command_ok($psql_as->('tle', 'tledb', '-f', "$dir/pg_tle.sql"), "PG $major: a pgtle_admin registers pg_tle.sql");
	$as->('tle', 'tledb', 'CREATE EXTENSION snowflake_id_portable');
	is($as->('tle', 'tledb', qq{SELECT rolsuper FROM pg_roles WHERE rolname = current_user}), 'f', "PG $major: as a role that is not a superuser");
	is($as->('tle', 'tledb', qq{SELECT count(*) FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid
		WHERE e.extname = 'snowflake_id_portable' AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'}) > 20 ? 'members' : 'few',
		'members', "PG $major: CREATE EXTENSION snowflake_id_portable creates its functions as members");
	$as->('tle', 'tledb', qq{
		SELECT snowflake_portable_configure(shards => '0-127');
		CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), note text);
		SELECT snowflake_portable_advance(now() + interval '2 minutes');
		INSERT INTO t (note) SELECT 'pg_tle' FROM generate_series(1, 3000);});
	# The native extension reads the same ids (its layout is the default, as the portable one's).
	$node->safe_psql('tledb', 'CREATE SCHEMA native; CREATE EXTENSION snowflake_id SCHEMA native');
	is($node->safe_psql('tledb', q{SELECT count(*) FROM t WHERE native.snowflake_decode(id)::text IS DISTINCT FROM snowflake_decode(id)::text}),
		'0', "PG $major: the native snowflake_decode reads every pg_tle id as the portable one does");
	$node->safe_psql('tledb', 'DROP EXTENSION snowflake_id; DROP SCHEMA native');

	# pg_dump / pg_restore (as the superuser, into an empty database: pg_tle's objects come with it).
	my $dump = $node->basedir . '/tledb.dump';
	$node->command_ok([ $node->installed_command('pg_dump'), '-Fc', '-f', $dump, '-d', $node->connstr('tledb') ], "PG $major: pg_dump of the pg_tle database");
	$node->safe_psql('postgres', 'CREATE DATABASE tlerestored OWNER tle');
	$node->command_ok([ $node->installed_command('pg_restore'), '--exit-on-error', '-d', $node->connstr('tlerestored'), $dump ],
		"PG $major: pg_restore into a new database");
	my ($first, $last_restored, $shard) = split /\|/, $node->safe_psql('tlerestored', qq{
		SELECT snowflake_next(), (SELECT max(id) FROM t), snowflake_shard(snowflake_next())});
	cmp_ok($first, '>', $last_restored, "PG $major: after the restore the next id is above the restored ones");
	cmp_ok($shard, '<=', 127, "PG $major: and the restored configuration (shards 0-127) is in force");

	# Portable to native: a plain install whose ids run 15 s ahead of the clock (the native
	# extension then waits for the clock to pass them: max_rewind_wait above).
	$node->safe_psql('postgres', 'CREATE ROLE app LOGIN; CREATE DATABASE portable OWNER app');
	$node->command_ok($psql_as->('app', 'portable', '-1', '-f', "$dir/snowflake_id_portable.sql"), "PG $major: the portable script, installed with psql");
	$as->('app', 'portable', qq{
		SELECT snowflake_portable_configure(shards => '5');
		CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_next(), note text);
		SELECT snowflake_portable_advance(now() + interval '15 seconds');
		INSERT INTO orders (note) SELECT 'portable' FROM generate_series(1, 2000);
		$events});
	$dump = $node->basedir . '/portable.dump';
	$node->command_ok([ $node->installed_command('pg_dump'), '-Fc', '-f', $dump, '-d', $node->connstr('portable') ], "PG $major: pg_dump of the portable database");
	$node->safe_psql('postgres', 'CREATE DATABASE native OWNER app');
	$node->command_ok([ $node->installed_command('pg_restore'), '--exit-on-error', '-d', $node->connstr('native'), $dump ],
		"PG $major: restored onto the server with the native extension");
	# The switch, as docs/managed.md gives it.
	$node->safe_psql('native', qq{
		CREATE SCHEMA snowflake;
		CREATE EXTENSION snowflake_id SCHEMA snowflake;
		SELECT snowflake.snowflake_id_advance(public.snowflake_portable_high_water());
		ALTER TABLE orders ALTER COLUMN id SET DEFAULT snowflake.snowflake_next();
		ALTER TABLE events ALTER COLUMN id SET DEFAULT snowflake.snowflake_next();
		DROP SCHEMA snowflake_id_portable CASCADE;
		DROP FUNCTION public.snowflake_next(int), public.snowflake_next(), public.uuidv7_next(),
			public.snowflake_timestamp(bigint), public.snowflake_shard(bigint), public.snowflake_seq(bigint),
			public.snowflake_decode(bigint), public.snowflake_min_id(timestamptz), public.snowflake_max_id(timestamptz),
			public.snowflake_layout(text, timestamptz), public.snowflake_portable_configure(text, timestamptz, text),
			public.snowflake_portable_high_water(), public.snowflake_portable_advance(timestamptz);});
	my ($native_first, $portable_max) = split /\|/, $node->safe_psql('native', qq{
		INSERT INTO orders (note) VALUES ('native') RETURNING id, (SELECT max(id) FROM orders WHERE note = 'portable')});
	cmp_ok($native_first, '>', $portable_max, "PG $major: after the switch the first native id is above every portable id");
	is($node->safe_psql('native', "SELECT snowflake.snowflake_shard(max(id)) FROM orders WHERE note = 'native'"), '200',
		"PG $major: and comes from the server's own shards");
	events_work($node, 'native', "PG $major, portable to native", 200);
	# What the switch keeps: the IMMUTABLE functions (plain ones) and their helpers' schema; no other
	# function of the edition, nor its private schema.
	is($node->safe_psql('native', q{
		SELECT string_agg(p.proname, ' ' ORDER BY p.proname) || ' ' || bool_or(p.provolatile <> 'i' OR p.prosecdef)
		FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace}),
		'snowflake_compose snowflake_decode snowflake_from_text snowflake_id_interval snowflake_max_id snowflake_min_id '
		  . 'snowflake_partitions snowflake_seq snowflake_shard snowflake_timestamp snowflake_to_text ulid_to_uuid uuid_to_ulid false',
		"PG $major: the switch keeps the IMMUTABLE functions, plain ones, and drops every other function of the edition");
	is($node->safe_psql('native', q{SELECT string_agg(nspname, ' ' ORDER BY nspname) FROM pg_namespace WHERE nspname LIKE 'snowflake_id%'}),
		'snowflake_id_layout snowflake_id_private', "PG $major: and their helpers' schema, not the counters'");

	# The same switch in place, under pg_tle: the IMMUTABLE functions and their schema are taken out
	# of the extension before it is dropped (docs/managed.md).
	$node->safe_psql('postgres', 'CREATE DATABASE tlemove OWNER tle');
	$node->safe_psql('tlemove', 'CREATE EXTENSION pg_tle');
	$node->command_ok($psql_as->('tle', 'tlemove', '-f', "$dir/pg_tle.sql"), "PG $major: pg_tle.sql registered in another database");
	$as->('tle', 'tlemove', qq{
		CREATE EXTENSION snowflake_id_portable;
		SELECT snowflake_portable_configure(shards => '6');
		$events});
	$node->safe_psql('tlemove', q{
		CREATE SCHEMA snowflake;
		CREATE EXTENSION snowflake_id SCHEMA snowflake;
		SELECT snowflake.snowflake_id_advance(public.snowflake_portable_high_water());
		ALTER TABLE events ALTER COLUMN id SET DEFAULT snowflake.snowflake_next();
		DO $$
		DECLARE
			f regprocedure;
		BEGIN
			FOR f IN SELECT p.oid FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
			         JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid AND d.deptype = 'e'
			         WHERE e.extname = 'snowflake_id_portable' AND p.provolatile = 'i'
			           AND p.pronamespace <> 'snowflake_id_portable'::regnamespace LOOP
				EXECUTE format('ALTER EXTENSION snowflake_id_portable DROP FUNCTION %s', f);
			END LOOP;
		END $$;
		ALTER EXTENSION snowflake_id_portable DROP SCHEMA snowflake_id_layout;
		DROP EXTENSION snowflake_id_portable;});
	events_work($node, 'tlemove', "PG $major, pg_tle to native", 200);

	# Native to portable: native ids, restored without the extension.
	$node->safe_psql('postgres', 'CREATE DATABASE fromnative OWNER app');
	$node->safe_psql('fromnative', qq{
		CREATE EXTENSION snowflake_id;
		CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_next(), note text);
		ALTER TABLE orders OWNER TO app;
		INSERT INTO orders (note) SELECT 'native' FROM generate_series(1, 2000);});
	$dump = $node->basedir . '/fromnative.dump';
	$node->command_ok([ $node->installed_command('pg_dump'), '-Fc', '-f', $dump, '-d', $node->connstr('fromnative') ], "PG $major: pg_dump of the native database");
	my $list = $node->basedir . '/fromnative.list';
	my $entries = `'@{[ $node->installed_command('pg_restore') ]}' -l '$dump'`;
	PostgreSQL::Test::Utils::append_to_file($list, join "\n", grep { !/EXTENSION.* snowflake_id\b|snowflake_id_private/ } split /\n/, $entries);
	# The target's clock is a minute behind the source's: the native ids lie ahead of it.
	set_clock($node, '-60s');
	$node->safe_psql('postgres', 'CREATE DATABASE toportable OWNER app');
	$node->command_ok($psql_as->('app', 'toportable', '-1', '-f', "$dir/snowflake_id_portable.sql"), "PG $major: the portable script first");
	$node->command_ok([ $node->installed_command('pg_restore'), '--exit-on-error', '-L', $list, '-d', $node->connstr('toportable') . ' user=app', $dump ],
		"PG $major: then the native dump, without the extension, as the database's owner");
	$as->('app', 'toportable', qq{
		SELECT snowflake_portable_configure(shards => '300');
		SELECT snowflake_portable_advance(max(snowflake_timestamp(id))) FROM orders;});
	my ($portable_first, $native_max) = split /\|/, $as->('app', 'toportable', qq{
		INSERT INTO orders (note) VALUES ('portable') RETURNING id, (SELECT max(id) FROM orders WHERE note = 'native')});
	cmp_ok($portable_first, '>', $native_max, "PG $major: the first portable id is above every native id");
	$node->stop;
}

done_testing();
