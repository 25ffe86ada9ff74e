# A database whose floor was never written carries "unknown", never "nothing minted" (each major in
# $ENV{SFID_FAILOVER}). The record's row starts unknown ('infinity'); the first id past the floor
# writes a real one in place. Where that write fails (here a superuser's open transaction holds a
# SHARE lock on the record, as maintenance might; elsewhere a minor release without the in-place
# API), the ids are issued anyway with one WARNING, and the dump carries 'infinity'. (A record
# CREATE EXTENSION made on this server in this run is not waited for: only this server's ids can
# be in its database.) Restored at
# once onto a server whose clock is 3 s behind, the first id waits out the horizon (about 5 s with
# max_rewind_wait = 5s) and every new id is above every dumped one. (Before 0.4.0 the row started at '-infinity', "nothing minted",
# and the restored database minted below the dumped ids.)
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin . '/..';
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeNode;

for my $major (split ' ', ($ENV{SFID_FAILOVER} // '15'))
{
	my $bin = install_path($major) . '/bin';
	my $src = sfid_node("floor_src$major", $major, "snowflake_id.shards = '0-127'");
	$src->start;
	# The server the dump is restored onto, ready before the first id, its clock 3 s behind: the
	# dump and restore take less than that, so the restored database's clock reads before its
	# newest ids, within the horizon (max_rewind_wait 5 s).
	my $dst = sfid_node("floor_dst$major", $major,
		"snowflake_id.shards = '0-127'\nsnowflake_id.debug_clock_offset = '-3s'\nsnowflake_id.max_rewind_wait = '5s'");
	$dst->start;
	$dst->safe_psql('postgres', 'CREATE DATABASE app');
	$src->safe_psql('postgres', 'CREATE DATABASE app');
	$src->safe_psql('app', 'CREATE EXTENSION snowflake_id; CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(1), b int)');
	is($src->safe_psql('app', 'SELECT minted_before FROM snowflake_id_private.snowflake_id_space'),
		'infinity', "PostgreSQL $major: CREATE EXTENSION records the floor as unknown");

	# A superuser holds the record locked, as a maintenance transaction might, for 20 s.
	my ($lout, $lerr) = ('', '');
	my $locker = IPC::Run::start(
		[ "$bin/psql", '-X', '-d', $src->connstr('app'), '-c',
		  'BEGIN; LOCK TABLE snowflake_id_private.snowflake_id_space IN SHARE MODE; SELECT pg_sleep(20); COMMIT;' ],
		'>', \$lout, '2>', \$lerr);
	$src->poll_query_until('app', q{
		SELECT count(*) = 1 FROM pg_locks WHERE relation = 'snowflake_id_private.snowflake_id_space'::regclass AND mode = 'ShareLock' AND granted})
	  or BAIL_OUT('the lock was not taken');
	# The database's first id waits for no floor: its record was made on this server, in this run
	# (the horizon, 2.25 s here, would outlast the statement's 1 s).
	my ($rc, $out, $err) = $src->psql('app',
		"SET statement_timeout = '1s'; INSERT INTO t (b) SELECT 0 FROM generate_series(1, 2000)");
	is($rc, 0, "PostgreSQL $major: a new database's first ids wait for nothing, and are issued while the floor cannot be written");
	like($err, qr/WARNING:.*minted_before\) was not advanced/, "PostgreSQL $major: with a WARNING that the floor was not written");
	my $dump = "$PostgreSQL::Test::Utils::tmp_check/floor$major.dump";
	command_ok([ "$bin/pg_dump", '-Fc', '-f', $dump, '-d', $src->connstr('app') ], "PostgreSQL $major: pg_dump meanwhile");
	command_ok([ "$bin/pg_restore", '--exit-on-error', '-d', $dst->connstr('app'), $dump ],
		"PostgreSQL $major: pg_restore onto a server 3 s behind");
	my $max_old = $src->safe_psql('app', 'SELECT max(id) FROM t');
	$src->safe_psql('app', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'BEGIN; LOCK TABLE%'});
	eval { $locker->finish };
	$src->stop;
	is($dst->safe_psql('app', q{SELECT minted_before FROM snowflake_id_private.snowflake_id_space ORDER BY recorded_at LIMIT 1}),
		'infinity', "PostgreSQL $major: the dumped row says unknown");
	is( $dst->safe_psql('app', qq{
			INSERT INTO t (b) SELECT 1 FROM generate_series(1, 2000);
			SELECT count(*) FILTER (WHERE id > $max_old) FROM t WHERE b = 1}),
		'2000', "PostgreSQL $major: every id minted after the restore is above every dumped id");
	$dst->stop;
}

done_testing();
