# Synchronous replication covers the ids handed out before any commit (PostgreSQL 15+, each major
# in $ENV{SFID_FAILOVER}; on 14, which has no WAL record of the reservation to wait for, only that
# ids keep coming while the synchronous standby receives nothing, as docs/operations.md says, and
# the rest is skipped: a promoted standby there takes snowflake_id_advance, t/002). An autocommit
# SELECT snowflake_next() has no transaction id and never waits for a standby, so the reservation
# itself must: where synchronous_standby_names names the standby, no id is handed out past a
# reservation the standby has flushed.
#
# The standby's walreceiver is frozen (SIGSTOP): a call that takes ids past the reservation in
# force waits for it, seen as IPC/SyncRep in pg_stat_activity, and a cancel ends the wait with
# nothing handed out; so does emptying synchronous_standby_names and reloading, as for a commit
# (the server's copy of the setting decides, not the waiting backend's). Frozen again while a
# client keeps taking ids, each call with a statement_timeout of 300 ms, for 2 s (four
# reservations ahead: 0.5 s each):
# - every id the client holds lies below the reservation the frozen standby has replayed;
# - the primary and the frozen walreceiver are killed (-9) at once, the standby promoted with its
#   clock 5 s behind: every id it mints is above every id the client held, and none repeats one.
#
# A slow standby: another synchronous standby reaches its primary through a relay that holds back
# what the standby sends (its flush acknowledgements) by 0.7 s, then 1.5 s, longer than a plain
# renewal reaches (0.5 s). A client takes ids for 6 s: every call returns, none waits longer than
# a few times the lag, and the statement never runs into its timeout.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin . '/..';
use IPC::Run;
use IO::Select;
use IO::Socket::UNIX;
use POSIX ();
use Socket qw(SOCK_STREAM);
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

	# Still frozen: a call waits again, and emptying synchronous_standby_names lets it go on, as a
	# commit would be, though its backend read the setting before the reload.
	my ($rout, $rerr) = ('', '');
	my $paced = 'SELECT count(*) FROM (SELECT snowflake_next(), pg_sleep(0.02) FROM generate_series(1, 150)) s';
	my $released = IPC::Run::start(
		[ install_path($major) . '/bin/psql', '-X', '-A', '-t', '-d', $primary->connstr('postgres'), '-c', $paced ],
		'>', \$rout, '2>', \$rerr);
	my $active = qq{SELECT count(*) FROM pg_stat_activity WHERE query = '$paced'};
	$waits = 0;
	for (1 .. 300)
	{
		$waits = $primary->safe_psql('postgres', "$active AND wait_event_type = 'IPC' AND wait_event = 'SyncRep'");
		last if $waits;
		sleep 0.1;
	}
	is($waits, '1', "PostgreSQL $major: frozen again, a call waits for the standby");
	$primary->safe_psql('postgres', "ALTER SYSTEM SET synchronous_standby_names = ''");
	$primary->reload;
	my $left = 1;
	for (1 .. 300)
	{
		$left = $primary->safe_psql('postgres', $active);
		last unless $left;
		sleep 0.1;
	}
	is($left, '0', "PostgreSQL $major: emptying synchronous_standby_names lets the waiting call go on");
	$primary->safe_psql('postgres', qq{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query = '$paced'}) if $left;
	eval { $released->finish };
	is($rout, "150\n", "PostgreSQL $major: and it takes every id it asked for") or diag($rerr);
	$primary->safe_psql('postgres', "ALTER SYSTEM SET synchronous_standby_names = '$standby_name'");
	$primary->reload;

	kill 'CONT', $receiver;
	$primary->poll_query_until('postgres',
		"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = '$standby_name'")
	  or BAIL_OUT("the standby did not become synchronous again");
	# One session, connected already, takes ids before and right after the freeze: what is left
	# of the last renewal does not depend on how long a new connection takes on a busy machine.
	$receiver = $standby->safe_psql('postgres', 'SELECT pid FROM pg_stat_wal_receiver');
	my ($sin, $sout, $serr) = ('', '', '');
	my $session = IPC::Run::start(
		[ install_path($major) . '/bin/psql', '-X', '-q', '-A', '-t', '-v', 'VERBOSITY=verbose', '-d',
		  $primary->connstr('postgres') ],
		'<', \$sin, '>', \$sout, '2>', \$serr, IPC::Run::timeout(60));
	my $ask = sub {
		($sout, $serr) = ('', '');
		$sin .= "$_[0];\n";
		$session->pump until $sout =~ /\n/ || $serr =~ /ERROR/;
		chomp(my $r = $sout);
		return $r;
	};
	is($ask->('SELECT count(DISTINCT snowflake_next()) FROM generate_series(1, 1000)'),
		'1000', "PostgreSQL $major: once the standby receives again, ids flow");
	$ask->(q{SELECT set_config('statement_timeout', '300', false)});

	# Frozen again, while a client keeps taking ids: autocommit calls, the first in that session,
	# then each its own connection and statement with a timeout of 300 ms, for 2 s (four
	# reservations' worth).
	kill 'STOP', $receiver or die "SIGSTOP $receiver: $!";
	my (@held, @outcomes);
	my $first = $ask->('SELECT snowflake_next()');
	if ($first =~ /^\d+$/) { push @held, $first; push @outcomes, 'id'; }
	else { push @outcomes, ($serr =~ /ERROR:\s+([0-9A-Z]{5}):/ ? $1 : 'error'); }
	$sin .= "\\q\n";
	$session->finish;
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

	slow_standby($major);
}

# slow_standby(MAJOR): a synchronous standby whose flush acknowledgements reach the primary 0.7 s,
# then 1.5 s, after it sent them (through delay_relay). The primary may wait up to 3 s for a clock
# (max_rewind_wait), so a reservation may reach that far ahead of it.
sub slow_standby
{
	my ($major) = @_;
	my $name = "slow_standby$major";
	my $primary = sfid_node("slow_primary$major", $major,
		"snowflake_id.shards = '0-127'\nsnowflake_id.max_rewind_wait = '3s'", allows_streaming => 1);
	$primary->start;
	$primary->safe_psql('postgres', q{
		CREATE EXTENSION snowflake_id;
		-- Takes ids, one every 5 ms, for SECONDS: how many, the longest call (ms), and whether each
		-- id was greater than the one before.
		CREATE FUNCTION paced(seconds float8, OUT calls int, OUT max_ms int, OUT increasing bool)
		LANGUAGE plpgsql AS $$
		DECLARE
			stop timestamptz := clock_timestamp() + make_interval(secs => seconds);
			t timestamptz;
			id bigint;
			prev bigint := 0;
		BEGIN
			calls := 0; max_ms := 0; increasing := true;
			WHILE clock_timestamp() < stop LOOP
				t := clock_timestamp();
				id := snowflake_next();
				max_ms := greatest(max_ms, ceil(extract(epoch FROM clock_timestamp() - t) * 1000)::int);
				increasing := increasing AND id > prev;
				prev := id;
				calls := calls + 1;
				PERFORM pg_sleep(0.005);
			END LOOP;
		END $$});
	$primary->backup('slow_base');
	my $standby = PostgreSQL::Test::Cluster->new($name, install_path => install_path($major));
	$standby->init_from_backup($primary, 'slow_base', has_streaming => 1);
	my $relay_dir = PostgreSQL::Test::Utils::tempdir_short();
	my $delay_file = "$relay_dir/delay";
	PostgreSQL::Test::Utils::append_to_file($delay_file, '0');
	my $relay = delay_relay("$relay_dir/.s.PGSQL.5999", $primary->host . '/.s.PGSQL.' . $primary->port, $delay_file);
	$standby->append_conf('postgresql.conf', "primary_conninfo = 'host=$relay_dir port=5999 dbname=postgres'\nsynchronous_standby_names = ''");
	$standby->start;
	$primary->safe_psql('postgres', "ALTER SYSTEM SET synchronous_standby_names = '$name'");
	$primary->reload;
	$primary->poll_query_until('postgres',
		"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = '$name'")
	  or BAIL_OUT("the slow standby did not become synchronous");

	for my $lag (0.7, 1.5)
	{
		open(my $fh, '>', $delay_file) or die "$delay_file: $!";
		print $fh $lag;
		close $fh;
		my ($rc, $out, $err) = $primary->psql('postgres', q{
			SET statement_timeout = '20s';
			SELECT calls, max_ms, increasing FROM paced(6)});
		my ($calls, $max_ms, $increasing) = split /\|/, $out // '';
		diag("PostgreSQL $major, acknowledgements $lag s late: " . ($rc == 0 ? "$calls calls, the longest $max_ms ms" : $err));
		is($rc, 0, "PostgreSQL $major: a standby $lag s late never stops the ids until the statement's timeout")
		  or next;
		cmp_ok($calls, '>', 100, "PostgreSQL $major: ids keep coming with the standby $lag s late");
		cmp_ok($max_ms, '<', 4000 * $lag + 1000, "PostgreSQL $major: no call waits longer than a few times the lag");
		is($increasing, 't', "PostgreSQL $major: every id greater than the one before");
	}
	kill 'KILL', $relay;
	waitpid($relay, 0);
	$standby->stop('immediate');
	$primary->stop('immediate');
	return;
}

# delay_relay(LISTEN, TARGET, DELAY_FILE): a process that accepts connections on the Unix socket
# LISTEN and relays each to the socket TARGET, holding back what the connecting side sends by the
# seconds DELAY_FILE holds (read at each chunk), in order; what TARGET sends passes at once.
# Returns its pid (end it with SIGKILL).
sub delay_relay
{
	my ($listen, $target, $delay_file) = @_;
	my $listener = IO::Socket::UNIX->new(Type => SOCK_STREAM, Local => $listen, Listen => 8)
	  or die "listen on $listen: $!";
	my $pid = fork() // die "fork: $!";
	if ($pid)
	{
		close $listener;
		return $pid;
	}
	# The child never returns into the test (its END blocks would stop the nodes).
	eval {
		my $select = IO::Select->new($listener);
		my (%peer, %held, @queue);
		my $last_due = 0;
		my $send = sub {
			my ($to, $bytes) = @_;
			while (length $bytes && defined fileno($to))
			{
				my $n = syswrite($to, $bytes);
				last unless $n;
				substr($bytes, 0, $n) = '';
			}
		};
		my $delay = sub {
			open(my $fh, '<', $delay_file) or return 0;
			my $d = <$fh> // 0;
			return $d + 0;
		};
		while (1)
		{
			while (@queue && $queue[0][0] <= time())
			{
				my (undef, $to, $bytes) = @{ shift @queue };
				$send->($to, $bytes);
			}
			my $wait = @queue ? $queue[0][0] - time() : 1;
			for my $s ($select->can_read($wait < 0 ? 0 : $wait))
			{
				if ($s == $listener)
				{
					my $c = $listener->accept or next;
					my $u = IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => $target);
					if (!$u) { close $c; next; }
					$peer{"$c"} = $u;
					$peer{"$u"} = $c;
					$held{"$c"} = 1;
					$select->add($c, $u);
					next;
				}
				my $n = sysread($s, my $buf, 65536);
				if (!$n)
				{
					for my $h ($s, $peer{"$s"})
					{
						next unless $h;
						$select->remove($h);
						delete $peer{"$h"};
						delete $held{"$h"};
						close $h;
					}
					next;
				}
				if ($held{"$s"})
				{
					my $due = time() + $delay->();
					$due = $last_due if $due < $last_due;
					$last_due = $due;
					push @queue, [ $due, $peer{"$s"}, $buf ];
				}
				else
				{
					$send->($peer{"$s"}, $buf);
				}
			}
		}
	};
	POSIX::_exit(0);
}

done_testing();
