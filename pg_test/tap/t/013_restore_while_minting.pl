# A restore into a database that is minting (each major in $ENV{SFID_FAILOVER}).
#
# A transaction that changes a database's record of its id space (a restore loading the dumped
# rows) holds ids in that database back until it ends: what a call would read before the commit
# is the old record, and the new rows become visible a moment before the commit announces them.
# Here the "restore" brings a row whose id lies 3 s ahead of this server's clock, with a floor
# above it, and stays open until the test commits it: a session minting meanwhile waits for it,
# then for the floor, and mints above the restored id, after the commit. Left open longer than a
# call may wait (max_rewind_wait), the call refuses with 55P03, and mints above the restored id
# once the restore has committed. No check depends on how fast the machine is: the restore ends
# only when told to, and the one duration checked is a lower bound the server keeps.
#
# A floor raised without a new row (an UPDATE) is waited for, as a new row is; a restored floor
# past the horizon is refused, even beside the unknown one of the restore's CREATE EXTENSION.
#
# A data-only refresh from a dump of the same database loads a record row the database already
# has: it keeps one row with the later floor, where it used to fail with 23505 on the record and
# leave the older floor in force.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin . '/..';
use IPC::Run;
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeNode;

# As long as a call may wait for a restore: generous, so that the test's own steps between the
# call's start and the restore's commit fit however slow the machine is.
my $budget_s = 10;

for my $major (split ' ', ($ENV{SFID_FAILOVER} // '15'))
{
	my $bin = install_path($major) . '/bin';
	my $node = sfid_node("restoring$major", $major,
		"snowflake_id.shards = '0-127'\nsnowflake_id.max_rewind_wait = '${budget_s}s'\ntrack_commit_timestamp = on");
	$node->start;
	$node->safe_psql('postgres', 'CREATE DATABASE app');
	$node->safe_psql('app', 'CREATE EXTENSION snowflake_id; CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(1), src text)');
	# A floor the database knows, as one that ran a while has (a new record's is unknown until an
	# id waits out the horizon): the waits below are then for the restore and its floor only.
	$node->safe_psql('app', q{
		UPDATE snowflake_id_private.snowflake_id_space SET minted_before = clock_timestamp() + interval '1 s';
		INSERT INTO t (src) VALUES ('before')});

	# The "restore", in a session the test drives: an id 3 s ahead of the clock and a record row
	# whose floor lies above it, in one transaction that stays open until restore_commit.
	my $restore_start = sub {
		my ($in, $out, $err) = ('', '', '');
		my $h = IPC::Run::start([ "$bin/psql", '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('app') ],
			'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
		$in .= q{
			BEGIN;
			INSERT INTO t (id, src) VALUES (snowflake_min_id(clock_timestamp() + interval '3 s'), 'restored');
			INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, recorded_at, minted_before)
			SELECT layout, epoch, clock_timestamp() - interval '1 day', clock_timestamp() + interval '3.01 s' FROM snowflake_layout();
			\echo loaded
		};
		$h->pump until $out =~ /loaded/ || $err ne '';
		BAIL_OUT("the restore failed: $err") if $err ne '';
		return { h => $h, in => \$in, err => \$err };
	};
	my $restore_commit = sub {
		my ($r) = @_;
		${ $r->{in} } .= "COMMIT;\n\\q\n";
		$r->{h}->finish;
		is(${ $r->{err} }, '', "PostgreSQL $major: the restore committed");
	};
	my $above_restored = sub {
		my ($src) = @_;
		return $node->safe_psql('app',
			qq{SELECT min(id) FILTER (WHERE src = '$src') > max(id) FILTER (WHERE src = 'restored') FROM t});
	};

	# A call while the restore is open: it waits (wait_event Extension) until the restore commits.
	my $r = $restore_start->();
	my ($cout, $cerr) = ('', '');
	my $call = IPC::Run::start(
		[ "$bin/psql", '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('app'), '-c',
		  q{INSERT INTO t (src) VALUES ('during') RETURNING id} ],
		'>', \$cout, '2>', \$cerr, IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	my $waiting = 'f';
	while (1)
	{
		$waiting = $node->safe_psql('postgres', q{
			SELECT count(*) = 1 FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND wait_event_type = 'Extension' AND query LIKE 'INSERT INTO t (src) VALUES (''during'')%'});
		$call->pump_nb;
		last if $waiting eq 't' || !$call->pumpable;
		usleep(50_000);
	}
	is($waiting, 't', "PostgreSQL $major: a call while the restore is open waits for it");
	$restore_commit->($r);
	my $ok = eval { $call->finish; 1 } && $call->result == 0;
	ok($ok, "PostgreSQL $major: the call succeeds once the restore has committed") or diag($cerr);
	is($above_restored->('during'), 't', "PostgreSQL $major: and mints above the restored id");
	is($node->safe_psql('app', q{
			SELECT snowflake_timestamp(d.id) >= date_trunc('milliseconds', pg_xact_commit_timestamp(r.xmin))
			FROM t d, t r WHERE d.src = 'during' AND r.src = 'restored'}),
		't', "PostgreSQL $major: after the restore's commit");

	# A restore open longer than a call may wait: the call refuses, having waited the budget.
	$r = $restore_start->();
	my $started = time();
	my ($rc, $id, $err) = $node->psql('app', q{INSERT INTO t (src) VALUES ('refused') RETURNING id},
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	my $took = time() - $started;
	like($err, qr/55P03: transaction \d+ is changing this database's record of its id space/,
		"PostgreSQL $major: a restore open longer than a call may wait makes it refuse with 55P03");
	cmp_ok($took, '>=', $budget_s, "PostgreSQL $major: after waiting max_rewind_wait (" . sprintf('%.2f s', $took) . ')');
	$restore_commit->($r);
	$node->safe_psql('app', q{INSERT INTO t (src) VALUES ('after')});
	is($above_restored->('after'), 't', "PostgreSQL $major: once it committed, ids mint above the restored one");

	# A change that keeps the record's layouts, epochs and record times (a floor raised by an
	# UPDATE, as the merge of a row loaded again does) is waited for too: the row version changed.
	# The next id lies at or past the raised floor, not at this server's clock below it.
	$node->safe_psql('app',
		q{UPDATE snowflake_id_private.snowflake_id_space SET minted_before = clock_timestamp() + interval '2 s'});
	my $floor = $node->safe_psql('app', 'SELECT max(minted_before) FROM snowflake_id_private.snowflake_id_space');
	is($node->safe_psql('app', qq{SELECT snowflake_timestamp(snowflake_next(1)) >= '$floor'::timestamptz}),
		't', "PostgreSQL $major: a floor raised in place of the same rows is waited for");

	# A data-only refresh: staging was restored from a full dump of app; app mints on, and a
	# data-only dump of it is loaded into staging again.
	my $full = "$PostgreSQL::Test::Utils::tmp_check/app_full$major.dump";
	my $data = "$PostgreSQL::Test::Utils::tmp_check/app_data$major.dump";
	command_ok([ "$bin/pg_dump", '-Fc', '-f', $full, '-d', $node->connstr('app') ], "PostgreSQL $major: a full dump of app");
	$node->safe_psql('postgres', 'CREATE DATABASE staging');
	command_ok([ "$bin/pg_restore", '--exit-on-error', '-d', $node->connstr('staging'), $full ], "PostgreSQL $major: restored as staging");
	my $app_times = $node->safe_psql('app', q{SELECT string_agg(quote_literal(recorded_at::text), ',') FROM snowflake_id_private.snowflake_id_space});
	my $rows = q{SELECT string_agg(recorded_at || ' ' || minted_before, ', ' ORDER BY recorded_at) FROM snowflake_id_private.snowflake_id_space}
	  . " WHERE recorded_at::text IN ($app_times)";
	my $staging_before = $node->safe_psql('staging', $rows);
	# Past app's floor as dumped (however far the reservation runs ahead), so that the ids minted
	# next move it on.
	$node->safe_psql('app', q{
		SELECT pg_sleep(extract(epoch FROM max(minted_before) - clock_timestamp()) + 0.1) FROM snowflake_id_private.snowflake_id_space;
		INSERT INTO t (src) SELECT 'later' FROM generate_series(1, 100)});
	command_ok([ "$bin/pg_dump", '-Fc', '--data-only', '-f', $data, '-d', $node->connstr('app') ], "PostgreSQL $major: a data-only dump of app");
	my $app_rows = $node->safe_psql('app', $rows);
	isnt($app_rows, $staging_before, "PostgreSQL $major: app's floor moved on since staging was restored");
	$node->safe_psql('staging', 'TRUNCATE t');
	command_ok([ "$bin/pg_restore", '--exit-on-error', '--data-only', '-d', $node->connstr('staging'), $data ],
		"PostgreSQL $major: the data-only refresh loads without an error");
	is($node->safe_psql('staging', $rows), $app_rows,
		"PostgreSQL $major: app's rows in staging now carry app's later floors, once each");

	# A dump whose floor lies further ahead than a call may wait, restored into a new database:
	# its record holds the dumped floor beside the unknown one CREATE EXTENSION writes, and the
	# first id refuses (58000) rather than wait out the horizon for the unknown one and mint below
	# the dumped floor.
	$node->safe_psql('app',
		q{UPDATE snowflake_id_private.snowflake_id_space SET minted_before = clock_timestamp() + interval '60 s'});
	my $far = "$PostgreSQL::Test::Utils::tmp_check/app_far$major.dump";
	command_ok([ "$bin/pg_dump", '-Fc', '-f', $far, '-d', $node->connstr('app') ], "PostgreSQL $major: a dump with a floor 60 s ahead");
	$node->safe_psql('postgres', 'CREATE DATABASE far');
	command_ok([ "$bin/pg_restore", '--exit-on-error', '-d', $node->connstr('far'), $far ], "PostgreSQL $major: restored as far");
	my ($far_rc, $far_out, $far_err) = $node->psql('far', 'SELECT snowflake_next(1)', extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($far_err, qr/58000: this database holds ids minted until/,
		"PostgreSQL $major: its first id refuses with 58000, not minted below the restored floor");
	$node->stop;
}

done_testing();
