# The portable edition (sql/portable/snowflake_id_portable.sql), on every major in SFID_PORTABLE
# (default 14-18), as a non-superuser installs it with psql, on servers with no snowflake_id:
# - eight clients insert 20,000 rows each: no repeated id, and a call that starts after another
#   returned gets a larger id (snowflake_next() on 128 shards, uuidv7_next(), and one shard's
#   snowflake_next(7) and snowflake_next() sharing its generator); then, on the first major, for
#   20 s with a tick that holds what the clients mint in a millisecond, where jumps race calls,
#   and while the shards change five times;
# - the clock steps back by seconds (libfaketime, through a file the server reads its offset from):
#   the ids go on increasing;
# - ids returned by read-only SELECTs while another session holds the generator's unflushed WAL
#   record, then kill -9, and a restart with the clock a minute behind: none is issued again;
# - a streaming standby promoted with its clock a minute behind continues above every id the old
#   primary committed;
# - pg_dump / pg_restore into a new database, with the clock a minute behind: the configuration
#   travels, and the next ids are above the restored ones, with no manual step; a table whose
#   generated columns and expression index are made of the IMMUTABLE functions restores (pg_restore
#   runs with an empty search_path) and takes rows.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;
use SnowflakeNode;

my $script = "$ENV{TESTDIR}/portable/snowflake_id_portable.sql";
-e $script or BAIL_OUT("$script is missing: pg_test/tap.sh copies sql/portable");
# A node with no snowflake_id (its clock shifted by start_with_clock, SnowflakeNode.pm).
sub portable_node
{
	my ($name, $major, %params) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name, install_path => install_path($major));
	my @extra = $major >= 18 ? ('--no-data-checksums') : ();
	$node->init(extra => [ @extra, '-E', 'UTF8', '--locale=C' ], %params);
	# A WAL record waits in shared memory until a commit flushes it, or the WAL writer's next
	# round: ten seconds, so that the crash below finds unflushed records where there are any.
	$node->append_conf('postgresql.conf', "timezone = 'UTC'\nfsync = off\nmax_connections = 30\nwal_writer_delay = 10s\n");
	return $node;
}

# The portable script, installed by the role app into the database it owns.
sub install_portable
{
	my ($node, $db) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db OWNER app");
	$node->command_ok([ $node->installed_command('psql'), '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-1',
		'-d', $node->connstr($db) . ' user=app', '-f', $script ], "the script installs into $db as a non-superuser");
}

sub app_psql
{
	my ($node, $db, $sql) = @_;
	return $node->safe_psql($db, $sql, extra_params => [ '-U', 'app' ]);
}

# The pgbench command by which eight clients run SQL (a script's text, written to NAME.sql) in DB
# as app, with pgbench's RUN options (-t TRANSACTIONS or -T SECONDS).
sub eight_clients
{
	my ($node, $db, $name, $sql, @run) = @_;
	my $file = $node->basedir . "/$name.sql";
	open my $fh, '>', $file or die $!;
	print $fh $sql;
	close $fh;
	return [ $node->installed_command('pgbench'), '-n', '-c', 8, '-j', 8, @run, '-f', $file,
		'-h', $node->host, '-p', $node->port, '-U', 'app', $db ];
}

# Calls that started after another returned and got a smaller id (t0 and t1 bracket the call).
sub order_violations
{
	my ($node, $db, $table, $where) = @_;
	return $node->safe_psql($db, qq{
		SELECT count(*) FROM (
			SELECT t0, min(t1) OVER (ORDER BY id DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS later_ended
			FROM $table $where) x
		WHERE later_ended < t0});
}

for my $major (split ' ', $ENV{SFID_PORTABLE} // '14 15 16 17 18')
{
	my $node = portable_node("portable_$major", $major, allows_streaming => 1);
	start_with_clock($node);
	$node->safe_psql('postgres', 'CREATE ROLE app LOGIN');

	# Concurrency: eight clients, 20,000 transactions each.
	install_portable($node, 'appdb');
	app_psql($node, 'appdb', qq{
		SELECT snowflake_portable_configure(shards => '0-127');
		CREATE TABLE flakes (id bigint PRIMARY KEY, t0 timestamptz, t1 timestamptz);
		CREATE TABLE uuids (id uuid PRIMARY KEY, t0 timestamptz, t1 timestamptz);});
	# t0 and t1 bracket the call: a SELECT list is evaluated left to right.
	my $load = "INSERT INTO flakes (t0, id, t1) SELECT clock_timestamp(), snowflake_next(), clock_timestamp();\n"
	  . "INSERT INTO uuids (t0, id, t1) SELECT clock_timestamp(), uuidv7_next(), clock_timestamp();\n";
	$node->command_ok(eight_clients($node, 'appdb', 'load', $load, '-t', 20000), "PG $major: eight clients insert 20,000 rows each");
	is($node->safe_psql('appdb', 'SELECT count(*), count(DISTINCT id) FROM flakes'), '160000|160000',
		"PG $major: 160,000 snowflake ids, none repeated");
	is($node->safe_psql('appdb', 'SELECT count(*), count(DISTINCT id) FROM uuids'), '160000|160000',
		"PG $major: 160,000 UUIDv7s, none repeated");
	is(order_violations($node, 'appdb', 'flakes', ''), '0', "PG $major: snowflake_next() increases across sessions");
	is(order_violations($node, 'appdb', 'uuids', ''), '0', "PG $major: uuidv7_next() increases across sessions");
	is($node->safe_psql('appdb', 'SELECT count(*) FROM flakes WHERE snowflake_shard(id) NOT BETWEEN 0 AND 127'),
		'0', "PG $major: the ids come from the owned shards 0-127");
	is($node->safe_psql('appdb', q{SELECT count(*) FROM uuids WHERE substr(id::text, 15, 1) <> '7' OR substr(id::text, 20, 1) NOT IN ('8', '9', 'a', 'b')}),
		'0', "PG $major: every UUID is version 7, variant RFC 9562");

	# One owned shard: snowflake_next(7) and snowflake_next() share its generator.
	install_portable($node, 'onedb');
	app_psql($node, 'onedb', qq{
		SELECT snowflake_portable_configure(shards => '7');
		CREATE TABLE flakes (id bigint PRIMARY KEY, t0 timestamptz, t1 timestamptz);});
	my $mixed = "INSERT INTO flakes (t0, id, t1) SELECT clock_timestamp(), snowflake_next(7), clock_timestamp();\n"
	  . "INSERT INTO flakes (t0, id, t1) SELECT clock_timestamp(), snowflake_next(), clock_timestamp();\n";
	$node->command_ok(eight_clients($node, 'onedb', 'mixed', $mixed, '-t', 2000), "PG $major: eight clients mint for one shard both ways");
	is($node->safe_psql('onedb', 'SELECT count(DISTINCT id), count(*) FILTER (WHERE snowflake_shard(id) <> 7), '
		  . (order_violations($node, 'onedb', 'flakes', '') eq '0' ? "'ordered'" : "'unordered'") . ' FROM flakes'),
		'32000|0|ordered', "PG $major: shard 7's 32,000 ids, none repeated, in call order");

	# No role can stall the calls. A role with nothing but CONNECT holds ROW EXCLUSIVE on every
	# relation of the portable edition: nextval() of a relation's OID locks it before it checks
	# anything, and keeps the lock to the end of the transaction when the error is rolled back to a
	# savepoint. The app's calls that must jump (the generators behind the clock), its configure()
	# and its advance() then never wait for a lock: lock_timeout would cancel them.
	$node->safe_psql('postgres', 'CREATE ROLE mallory LOGIN');
	my @private = split ' ', $node->safe_psql('onedb',
		q{SELECT string_agg(c.oid::text, ' ') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'snowflake_id_portable'});
	my $mallory = $node->background_psql('onedb', extra_params => [ '-U', 'mallory' ], on_error_stop => 0);
	$mallory->query_safe('BEGIN');
	$mallory->query("SAVEPOINT s; SELECT nextval(${_}::regclass); ROLLBACK TO s;") for @private;
	is($node->safe_psql('onedb', q{SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			WHERE a.usename = 'mallory' AND l.mode = 'RowExclusiveLock' AND l.granted
			  AND l.relation IN (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'snowflake_id_portable')}),
		scalar(@private), "PG $major: a role with only CONNECT holds ROW EXCLUSIVE on all " . scalar(@private) . " relations of the portable edition");
	my $gen = "SELECT pg_sequence_last_value('snowflake_id_portable.gen')";
	my $gen_before = $node->safe_psql('onedb', $gen);
	my ($rc, $out, $err) = $node->psql('onedb', q{
		SET lock_timeout = '2s';
		SELECT pg_sleep(0.02);
		SELECT snowflake_next() > 0, uuidv7_next() IS NOT NULL, snowflake_next(7) > 0;
		SELECT shards FROM snowflake_portable_configure(shards => '7');
		SELECT snowflake_portable_advance(clock_timestamp()) IS NOT NULL;
		SELECT pg_sleep(0.02);
		SELECT snowflake_next() > 0;}, extra_params => [ '-U', 'app' ]);
	is("$out$err", "\nt|t|t\n7\nt\n\nt", "PG $major: the calls jump, configure and advance without waiting for that role's locks");
	cmp_ok($node->safe_psql('onedb', $gen), '>', $gen_before, "PG $major: (the generators were moved meanwhile: the calls jumped)");
	# Behind that role's lock, maintenance that asks for a stronger one queues; a jump does not join
	# the queue behind it, and gives up after a second (55P03) instead of waiting as long as both.
	my $vacuum = $node->background_psql('onedb', on_error_stop => 0);
	$vacuum->query_until(qr/queued/, "\\echo queued\nVACUUM FULL snowflake_id_portable.state;\n\\echo vacuumed\n");
	$node->poll_query_until('onedb', q{SELECT count(*) > 0 FROM pg_locks WHERE NOT granted AND mode = 'AccessExclusiveLock'})
	  or die 'the VACUUM FULL never queued';
	my $t0 = time;
	($rc, $out, $err) = $node->psql('onedb', 'SELECT pg_sleep(0.02); SELECT snowflake_next();',
		extra_params => [ '-U', 'app', '-v', 'VERBOSITY=verbose' ], timeout => 120);
	my $took = time - $t0;
	like($err, qr/55P03: could not lock the snowflake_id portable configuration/,
		"PG $major: with maintenance queued behind that lock, a jump fails with 55P03 rather than queue ($took s)");
	cmp_ok($took, '<', 60, "PG $major: (and does not wait for the locks)");
	$mallory->query('ROLLBACK');
	$mallory->quit;
	$vacuum->query_until(qr/vacuumed/, '');
	$vacuum->quit;
	is(app_psql($node, 'onedb', 'SELECT pg_sleep(0.02); SELECT snowflake_next() > 0'), "\nt", "PG $major: the lock gone, the jump goes on");
	# The same role on every index of the edition, with a REINDEX of each table queued behind it
	# (each holds its table's SHARE lock while it waits for an index's ACCESS EXCLUSIVE). A new
	# session plans the jump's query afresh, and no lock it takes waits in those queues.
	my @indexes = split ' ', $node->safe_psql('onedb',
		q{SELECT string_agg(c.oid::text, ' ') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'snowflake_id_portable' AND c.relkind = 'i'});
	$mallory = $node->background_psql('onedb', extra_params => [ '-U', 'mallory' ], on_error_stop => 0);
	$mallory->query_safe('BEGIN');
	$mallory->query("SAVEPOINT s; SELECT nextval(${_}::regclass); ROLLBACK TO s;") for @indexes;
	my @reindexes;
	for my $table ('state', 'config')
	{
		my $r = $node->background_psql('onedb', on_error_stop => 0);
		# (A lock_timeout, so that no wait among the sessions below outlasts the test.)
		$r->query_until(qr/started/,
			"SET lock_timeout = '20s';\n\\echo started\nREINDEX TABLE snowflake_id_portable.$table;\n\\echo reindexed\n");
		push @reindexes, $r;
	}
	$node->poll_query_until('onedb', q{SELECT count(*) > 0 FROM pg_locks WHERE NOT granted AND mode = 'AccessExclusiveLock'})
	  or die 'no REINDEX queued';
	# Meanwhile the app's configure() waits too, for the configuration's index, and must not hold
	# the jumps' lock while it waits.
	my $cfg = $node->background_psql('onedb', extra_params => [ '-U', 'app' ], on_error_stop => 0);
	$cfg->query_until(qr/started/, "SET lock_timeout = '20s';\n\\echo started\nSELECT snowflake_portable_configure(shards => '7');\n");
	# (It gives up after a second: if it did before this saw it wait, the check below proves less.)
	$node->poll_query_until('onedb', q{SELECT count(*) > 0 FROM pg_stat_activity WHERE query LIKE 'SELECT snowflake_portable_configure%'
	                                     AND (wait_event_type = 'Lock' OR state <> 'active')})
	  or die 'configure() neither waited nor ended';
	($rc, $out, $err) = $node->psql('onedb', q{SET lock_timeout = '3s'; SELECT pg_sleep(0.02); SELECT snowflake_next() > 0, uuidv7_next() IS NOT NULL;},
		extra_params => [ '-U', 'app' ]);
	is("$out$err", "\nt|t", "PG $major: with REINDEXes queued behind that role's locks on the indexes, and a configure() waiting, a new session's calls jump");
	$mallory->query('ROLLBACK');
	$mallory->quit;
	# quit waits for psql to run what it was given, the REINDEX included. (Not a wait for its
	# "reindexed": a REINDEX that did not have to queue printed it with "started", which
	# query_until consumed.)
	$_->quit for @reindexes;
	$cfg->quit;
	# The jumps still exclude each other, and configure(): while the app's own configure() is open,
	# a call that jumps waits for it (here until lock_timeout).
	my $configuring = $node->background_psql('onedb', extra_params => [ '-U', 'app' ]);
	$configuring->query_safe(q{BEGIN; SELECT snowflake_portable_configure(shards => '7')});
	($rc, $out, $err) = $node->psql('onedb', q{SET lock_timeout = '1s'; SELECT snowflake_next()}, extra_params => [ '-U', 'app' ]);
	like($err, qr/canceling statement due to lock timeout/, "PG $major: a call waits for an open configure() (the jumps' row lock)");
	# A caller's own shorter lock_timeout holds in the jump (which bounds its waits to a second).
	my $t1 = Time::HiRes::time();
	($rc, $out, $err) = $node->psql('onedb', q{SET lock_timeout = '100ms'; SELECT snowflake_next()}, extra_params => [ '-U', 'app' ]);
	my $waited = Time::HiRes::time() - $t1;
	ok($err =~ /lock timeout/ && $waited < 0.8, sprintf("PG $major: a caller's lock_timeout of 100 ms holds in the jump (%.2f s)", $waited));
	$configuring->query_safe('COMMIT');
	$configuring->quit;

	# A jump racing the calls that take words while it moves the generator (the sequence lock's
	# case): the generator must sit at the clock with full ticks, so the layout's tick holds about
	# what these clients mint in a millisecond, measured first. Once per run, on its first major.
	if ($major eq (split ' ', $ENV{SFID_PORTABLE} // '14')[0])
	{
		my ($out) = PostgreSQL::Test::Utils::run_command(eight_clients($node, 'appdb', 'load', $load, '-T', 3));
		my ($tps) = $out =~ /tps = ([0-9.]+)/;
		my $bits = 1;
		$bits++ while $bits < 9 && (1 << $bits) < 4 * $tps / 1000;    # twice the two ids a transaction
		install_portable($node, 'racedb');
		app_psql($node, 'racedb', qq{
			SELECT snowflake_portable_configure(layout => '41/13/$bits', shards => '7');
			CREATE UNLOGGED TABLE t (id bigint, t0 timestamptz, t1 timestamptz);});
		my $race = "INSERT INTO t (t0, id, t1) SELECT clock_timestamp(), snowflake_next(), clock_timestamp();\n";
		$node->command_ok(eight_clients($node, 'racedb', 'race', $race, '-T', 20),
			"PG $major: eight clients mint for 20 s, $bits sequence bits a tick");
		is($node->safe_psql('racedb', 'SELECT count(*) - count(DISTINCT id) FROM t') . ' ' . order_violations($node, 'racedb', 't', ''),
			'0 0', "PG $major: at the tick's capacity, where jumps race the calls, no id repeats or goes back");

		# The shards change five times while four sessions mint (a call that began under the old
		# configuration gets 40001, and retries).
		app_psql($node, 'racedb', 'TRUNCATE t');
		my @minters = map { $node->background_psql('racedb', extra_params => [ '-U', 'app' ]) } 1 .. 4;
		$_->query_until(qr/started/, q{
			\echo started
			DO $$ BEGIN FOR i IN 1 .. 4000 LOOP
				BEGIN
					INSERT INTO t (t0, id, t1) SELECT clock_timestamp(), snowflake_next(), clock_timestamp();
				EXCEPTION WHEN serialization_failure THEN NULL;
				END;
			END LOOP; END $$;
		}) for @minters;
		app_psql($node, 'racedb', "SELECT snowflake_portable_configure(shards => '$_'); SELECT pg_sleep(0.2);") for ('7-8', '7', '7-9,20', '8', '7');
		$_->query_safe('SELECT 1') for @minters;
		$_->quit for @minters;
		is($node->safe_psql('racedb', 'SELECT count(DISTINCT snowflake_shard(id)) > 1, count(*) - count(DISTINCT id) FROM t') . ' '
			  . order_violations($node, 'racedb', 't', ''),
			't|0 0', "PG $major: across five changes of shards under load (ids from several), no id repeats or goes back");
		# A change rolled back takes back nothing minted: no id is minted in its transaction.
		($rc, $out, $err) = $node->psql('racedb', qq{
			BEGIN; SELECT snowflake_portable_configure(shards => '9'); SELECT snowflake_next(); ROLLBACK;},
			extra_params => [ '-U', 'app' ]);
		like($err, qr/cannot mint ids in the transaction that changed the portable configuration/,
			"PG $major: the transaction that changes the shards mints nothing (55000), so its rollback takes back no id");
	}

	# The clock steps back five seconds while the server runs.
	# (Ids minted just before the step: the step takes the clock back behind them.)
	my $before = app_psql($node, 'appdb', qq{
		CREATE TABLE before_step AS SELECT snowflake_next() AS id, uuidv7_next() AS u FROM generate_series(1, 1000);
		SELECT max(id) FROM before_step});
	set_clock($node, '-5s');
	my ($after, $uuid_ok) = split /\|/, app_psql($node, 'appdb', qq{
		SELECT min(id), bool_and(u > (SELECT u FROM before_step ORDER BY u DESC LIMIT 1)) FROM (SELECT snowflake_next() AS id, uuidv7_next() AS u FROM generate_series(1, 1000)) x});
	cmp_ok($after, '>', $before, "PG $major: with the clock 5 s back, the next ids are above every earlier one");
	is($uuid_ok, 't', "PG $major: and so are the next UUIDv7s");
	set_clock($node, '+0');

	# Read-only SELECTs take ids covered by a WAL record that a session which has not committed
	# wrote; then the server is killed (kill -9) and restarts a minute behind. (The generator is
	# first moved ahead of the clock, so that the SELECTs take words without a jump.)
	app_psql($node, 'appdb', "SELECT snowflake_portable_advance(now() + interval '2 minutes')");
	# Ahead of the clock, consecutive ids fill a tick's shards in order, 512 each.
	is(app_psql($node, 'appdb', 'SELECT string_agg(s::text, \',\' ORDER BY s) || \' \' || count(DISTINCT t) FROM (SELECT snowflake_shard(id) s, count(*) n, min(snowflake_timestamp(id)) t FROM (SELECT snowflake_next() id FROM generate_series(1, 1100)) x GROUP BY 1) y'),
		'0,1,2 1', "PG $major: 1,100 ids minted ahead of the clock fill shards 0, 1 and 2 of one tick");
	my $holder = $node->background_psql('appdb', extra_params => [ '-U', 'app' ]);
	$holder->query_safe('BEGIN');
	$holder->query_safe(q{DO $$ BEGIN LOOP PERFORM snowflake_next(); EXIT WHEN (SELECT log_cnt FROM snowflake_id_portable.owned_words) = 32; END LOOP; END $$});
	my @returned = map { app_psql($node, 'appdb', 'SELECT snowflake_next()') } 1 .. 20;
	my $max_returned = (sort { $a <=> $b } @returned)[-1];
	$node->kill9;
	eval { $holder->quit };
	set_clock($node, '-60s', 0);
	# The backends exit once they notice the postmaster is gone.
	my $started;
	for (1 .. 30)
	{
		sleep 1;
		$node->{_pid} = undef;    # a failed start reads the dead postmaster's pid file
		last if ($started = start_with_clock($node, fail_ok => 1));
	}
	ok($started, "PG $major: the server restarts after kill -9, a minute behind");
	my $next = app_psql($node, 'appdb', 'SELECT min(id) FROM (SELECT snowflake_next() AS id FROM generate_series(1, 100)) x');
	cmp_ok($next, '>', $max_returned,
		"PG $major: after kill -9 and a restart a minute behind, no id returned by a read-only SELECT is issued again");

	# A streaming standby promoted a minute behind.
	set_clock($node, '+0');
	$node->backup('base');
	my $standby = PostgreSQL::Test::Cluster->new("portable_standby_$major", install_path => install_path($major));
	$standby->init_from_backup($node, 'base', has_streaming => 1);
	start_with_clock($standby);
	app_psql($node, 'appdb', 'INSERT INTO flakes (id) SELECT snowflake_next() FROM generate_series(1, 5000)');
	my $committed = app_psql($node, 'appdb', 'SELECT max(id) FROM flakes');
	$node->wait_for_catchup($standby, 'replay', $node->lsn('flush'));
	$node->stop('immediate');
	set_clock($standby, '-60s');
	$standby->promote;
	my $promoted = app_psql($standby, 'appdb', 'SELECT min(id) FROM (SELECT snowflake_next() AS id FROM generate_series(1, 100)) x');
	cmp_ok($promoted, '>', $committed, "PG $major: the standby promoted a minute behind continues above the old primary's ids");
	$standby->stop;

	# pg_dump / pg_restore into a new database, the clock a minute behind.
	set_clock($node, '+0');
	start_with_clock($node);
	app_psql($node, 'appdb', q{
		CREATE TABLE events (
			id bigint PRIMARY KEY DEFAULT snowflake_next(),
			shard int GENERATED ALWAYS AS (snowflake_shard(id, 'default')) STORED,
			made_at timestamptz GENERATED ALWAYS AS (snowflake_timestamp(id, 'default', '2025-01-01 00:00+00')) STORED,
			CHECK (snowflake_seq(id, 'default') >= 0));
		CREATE INDEX events_second ON events (date_trunc('second', snowflake_timestamp(id, 'default', '2025-01-01 00:00+00') AT TIME ZONE 'UTC'));
		INSERT INTO events DEFAULT VALUES;});
	my $dump = $node->basedir . '/appdb.dump';
	$node->command_ok([ $node->installed_command('pg_dump'), '-Fc', '-f', $dump, '-d', $node->connstr('appdb') . ' user=app' ],
		"PG $major: pg_dump of the database, as its owner");
	my $dumped = app_psql($node, 'appdb', 'SELECT max(id) FROM flakes');
	$node->safe_psql('postgres', 'CREATE DATABASE restored OWNER app');
	set_clock($node, '-60s');
	$node->command_ok([ $node->installed_command('pg_restore'), '--exit-on-error', '-d', $node->connstr('restored') . ' user=app', $dump ],
		"PG $major: pg_restore into a new database, as its owner");
	my ($first, $shards) = split /\|/, app_psql($node, 'restored', qq{
		SELECT min(id), min(snowflake_shard(id)) >= 0 AND max(snowflake_shard(id)) <= 127
		FROM (SELECT snowflake_next() AS id FROM generate_series(1, 2000)) x});
	cmp_ok($first, '>', $dumped, "PG $major: the restored database's next ids are above the restored ones, with no manual step");
	is($shards, 't', "PG $major: the restored database keeps its shards (0-127)");
	is(app_psql($node, 'restored', q{
		INSERT INTO events DEFAULT VALUES;
		SELECT count(*) FILTER (WHERE shard = snowflake_shard(id) AND made_at = snowflake_timestamp(id)) FROM events}),
		'2', "PG $major: the table over the IMMUTABLE functions, its expression index included, restores and takes rows");
	$node->stop;
}

done_testing();
