# Synchronous replication covers the ids handed out before any commit (PostgreSQL 15+, each major
# in $ENV{SFID_FAILOVER}; on 14, which has no WAL record of the reservation to wait for, only that
# ids keep coming while the synchronous standby receives nothing, as docs/operations.md says, and
# the rest is skipped: a promoted standby there takes snowflake_id_advance, t/002). An autocommit SELECT snowflake_next() has no transaction id and never
# waits for a standby, so the reservation itself must: where synchronous_standby_names names the
# standby, no id is handed out past a reservation the standby has flushed.
#
# The standby's walreceiver is frozen (SIGSTOP): a call that takes ids past the reservation in
# force waits for it, seen as IPC/SyncRep in pg_stat_activity, and a cancel ends the wait with
# nothing handed out. Frozen again while a client keeps taking ids, each call with a
# statement_timeout of 300 ms, for 2 s (four reservations ahead: 0.5 s each):
# - every id the client holds lies below the reservation the frozen standby has replayed;
# - the primary and the frozen walreceiver are killed (-9) at once, the standby promoted with its
#   clock 5 s behind: every id it mints is above every id the client held, and none repeats one.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin . '/..';
use IPC::Run;
use Time::HiRes qw(time sleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeNode;

for my $major (split ' ', ($ENV{SFID_FAILOVER} // '15'))
{
	my $standby_name = "sync_standby$major";
	my $primary = sfid_node("sync_primary$major", $major, "snowflake_id.shards = '0-127'", allows_streaming => 1);
	$primary->start;
	$primary->safe_psql('postgres', 'CREATE EXTENSION snowflake_id');
	$primary->backup('base');
	my $standby = PostgreSQL::Test::Cluster->new($standby_name, install_path => install_path($major));
	$standby->init_from_backup($primary, 'base', has_streaming => 1);
	# Its clock 5 s behind once promoted; it names no synchronous standby of its own then.
	$standby->append_conf('postgresql.conf', "snowflake_id.debug_clock_offset = '-5s'\nsnowflake_id.max_rewind_wait = '10s'\nsynchronous_standby_names = ''");
	$standby->start;
	$primary->safe_psql('postgres', "ALTER SYSTEM SET synchronous_standby_names = '$standby_name'");
	$primary->reload;
	$primary->poll_query_until('postgres',
		"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = '$standby_name'")
	  or BAIL_OUT("the standby did not become synchronous");
	is($primary->safe_psql('postgres', 'SELECT count(DISTINCT snowflake_next()) FROM generate_series(1, 1000)'),
		'1000', "PostgreSQL $major: ids mint while the synchronous standby answers");

	my $receiver = $standby->safe_psql('postgres', 'SELECT pid FROM pg_stat_wal_receiver');

	if ($major < 15)
	{
		# 14: nothing to wait for. With the standby receiving nothing, a call that takes ids for
		# more than 2 s (several renewals: 15+ would wait at the first) ends with all of them.
		kill 'STOP', $receiver or die "SIGSTOP $receiver: $!";
		my ($rc, $out, $err) = $primary->psql('postgres', q{
			SET statement_timeout = '60s';
			SELECT count(DISTINCT id) FROM (SELECT snowflake_next(1) AS id, pg_sleep(0.001) FROM generate_series(1, 2000)) s});
		is($out, '2000', "PostgreSQL $major: no WAL record to wait for: ids keep coming while the synchronous standby receives nothing")
		  or diag($err);
		kill 'CONT', $receiver;
		SKIP:
		{
			skip "PostgreSQL $major has no custom WAL records: the reservation is not replicated, nothing waits for the standby", 10;
		}
		$primary->stop;
		$standby->stop;
		next;
	}

	# The standby stops receiving. A call that takes ids until the reservation in force runs out
	# then waits for the standby, as a commit does, and a cancel ends the wait with nothing handed
	# out. Then the standby receives again, and ids flow.
	kill 'STOP', $receiver or die "SIGSTOP $receiver: $!";
	my ($wout, $werr) = ('', '');
	my $waiter = IPC::Run::start(
		[ install_path($major) . '/bin/psql', '-X', '-A', '-t', '-d', $primary->connstr('postgres'),
		  '-c', 'SELECT count(snowflake_next()) FROM generate_series(1, 20000000)' ],
		'>', \$wout, '2>', \$werr);
	my $waits = 0;
	for (1 .. 300)
	{
		$waits = $primary->safe_psql('postgres', q{
			SELECT count(*) FROM pg_stat_activity
			WHERE query LIKE 'SELECT count(snowflake_next())%' AND wait_event_type = 'IPC' AND wait_event = 'SyncRep'});
		last if $waits;
		sleep 0.1;
	}
	is($waits, '1', "PostgreSQL $major: past the reservation in force, a call waits for the standby as IPC/SyncRep");
	$primary->safe_psql('postgres', q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE 'SELECT count(snowflake_next())%'});
	eval { $waiter->finish };
	like($werr, qr/canceling statement due to user request/, "PostgreSQL $major: a cancel ends the wait");
	is($wout, '', "PostgreSQL $major: and hands out no id");
	kill 'CONT', $receiver;
	is($primary->safe_psql('postgres', 'SELECT count(DISTINCT snowflake_next()) FROM generate_series(1, 1000)'),
		'1000', "PostgreSQL $major: once the standby receives again, ids flow");

	# Frozen again, while a client keeps taking ids: autocommit calls, each its own connection and
	# statement with a timeout of 300 ms, for 2 s (four reservations' worth).
	$receiver = $standby->safe_psql('postgres', 'SELECT pid FROM pg_stat_wal_receiver');
	kill 'STOP', $receiver or die "SIGSTOP $receiver: $!";
	my (@held, @outcomes);
	my $until = time() + 2;
	while (time() < $until)
	{
		local $ENV{PGOPTIONS} = '-c statement_timeout=300';
		my ($rc, $out, $err) = $primary->psql('postgres', 'SELECT snowflake_next()',
			extra_params => [ '-v', 'VERBOSITY=verbose' ], on_error_stop => 1);
		if ($rc == 0) { push @held, $out; push @outcomes, 'id'; }
		else { push @outcomes, ($err =~ /ERROR:\s+([0-9A-Z]{5}):/ ? $1 : 'error'); }
	}
	my $timeouts = grep { $_ eq '57014' } @outcomes;
	my $other = grep { $_ ne 'id' && $_ ne '57014' } @outcomes;
	cmp_ok(scalar(@held), '>', 0, "PostgreSQL $major: ids keep coming from the reservation in force (" . scalar(@held) . ')');
	cmp_ok($timeouts, '>', 0, "PostgreSQL $major: then the calls that need a renewal wait, and time out ($timeouts)");
	is($other, 0, "PostgreSQL $major: no call failed any other way");
	my $max_held = (sort { $a <=> $b } @held)[-1];
	is( $standby->safe_psql('postgres', qq{
			SELECT snowflake_timestamp($max_held) < reserved_until FROM snowflake_id_reservation()}),
		't', "PostgreSQL $major: every id handed out lies below the reservation the frozen standby replayed");

	# At once, the primary dies, and so does the frozen walreceiver (let go on, it would read what
	# the dead primary left in its socket, which a partition would not deliver), which stops the
	# standby (the tests' restart_after_crash is off). Started again, the standby has only what it
	# flushed before; its clock 5 s behind, it is promoted and mints.
	$primary->kill9;
	kill 'KILL', $receiver;
	for (1 .. 300) { last unless -f $standby->data_dir . '/postmaster.pid'; sleep 0.1; }
	$standby->_update_pid(0);
	$standby->start;
	$standby->promote;
	my $after = $standby->safe_psql('postgres', q{
		CREATE TABLE minted AS SELECT snowflake_next() AS id FROM generate_series(1, 5000);
		SELECT min(id) FROM minted});
	cmp_ok($after, '>', $max_held, "PostgreSQL $major: the promoted standby mints above every id handed out");
	my $held = join(',', @held);
	is($standby->safe_psql('postgres', "SELECT count(*) FROM minted WHERE id IN ($held)"),
		'0', "PostgreSQL $major: and repeats none");
	$standby->stop;
}

done_testing();
