# Failover (each major in $ENV{SFID_FAILOVER}, default 15): a primary under load, a streaming
# standby whose clock runs 2 s behind, the primary killed with -9 and the standby promoted with
# pg_ctl promote. On 15+ nothing else: every id minted after the promotion is above every id in
# the replicated tables (snowflake shards and UUIDv7, including a table without an index), and
# the promoted standby's reservation, replayed from the WAL, is checked on its own too. On 14,
# which has no custom WAL records, the one manual step docs/operations.md gives (a
# snowflake_id_advance before the promoted standby takes writes) and the same checks after it.
# Then, on 15+, a standby that cannot write a replayed reservation stops recovery, and so does one
# whose reservation file belongs to another layout than its settings (14 replays no reservation).
# On every major, a primary's own crash recovery with such a file starts, and refuses to mint
# until its layout is back.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin . '/..';
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeNode;

my @majors = split ' ', ($ENV{SFID_FAILOVER} // '15');

for my $major (@majors)
{
	# The reservation's WAL records: custom WAL resource managers exist on 15+.
	my $wal = $major >= 15;
	my $primary = sfid_node("primary$major", $major, "snowflake_id.max_rewind_wait = '5s'", allows_streaming => 1);
	$primary->start;
	$primary->safe_psql('postgres', q{
		CREATE EXTENSION snowflake_id;
		CREATE TABLE sf (id bigint PRIMARY KEY DEFAULT snowflake_next(1), batch int NOT NULL DEFAULT 0);
		CREATE TABLE sf_noindex (id bigint DEFAULT snowflake_next(2), batch int NOT NULL DEFAULT 0);
		CREATE TABLE un (id uuid PRIMARY KEY DEFAULT uuidv7_next(), batch int NOT NULL DEFAULT 0);
	});
	$primary->backup('base');
	my $standby = PostgreSQL::Test::Cluster->new("standby$major", install_path => install_path($major));
	$standby->init_from_backup($primary, 'base', has_streaming => 1);
	# The standby's clock runs 2 s behind the primary's.
	$standby->append_conf('postgresql.conf', "snowflake_id.debug_clock_offset = '-2s'");
	$standby->start;

	# Load: two clients inserting into every table, until the primary dies under them.
	my $script = "$PostgreSQL::Test::Utils::tmp_check/load$major.sql";
	PostgreSQL::Test::Utils::append_to_file($script, join("\n",
		'INSERT INTO sf DEFAULT VALUES;',
		'INSERT INTO sf_noindex DEFAULT VALUES;',
		'INSERT INTO un DEFAULT VALUES;', ''));
	my ($out, $err) = ('', '');
	my $load = IPC::Run::start(
		[ install_path($major) . '/bin/pgbench', '-n', '-c', '2', '-T', '30', '-f', $script,
		  '-h', $primary->host, '-p', $primary->port, 'postgres' ],
		'>', \$out, '2>', \$err);
	sleep 3;
	$primary->kill9;
	eval { $load->finish };

	$standby->promote;
	my $replicated = $standby->safe_psql('postgres',
		'SELECT (SELECT count(*) FROM sf) || \' \' || (SELECT count(*) FROM sf_noindex) || \' \' || (SELECT count(*) FROM un)');
	my ($n_sf, $n_noidx, $n_un) = split ' ', $replicated;
	cmp_ok($n_sf, '>', 100, "PostgreSQL $major: the standby replayed rows made under load ($replicated)");
	# Before anything is minted there: on 15+ the standby replayed the primary's reservations from
	# the WAL into its memory and its own file. On 14 it has only its own clock and the file the
	# base backup copied, so it takes the manual step: the old primary's clock ran with the real
	# one, and its ids at most 1 s (uuidv7_max_lead) ahead of it, so now() plus 2 s covers them.
	# The standby's clock, 2 s behind, then waits about 4 s (max_rewind_wait is 5 s here).
	if (!$wal)
	{
		is($standby->safe_psql('postgres', q{SELECT snowflake_id_advance(now() + interval '2 s') IS NOT NULL}),
			't', "PostgreSQL $major: the manual step on 14: snowflake_id_advance on the promoted standby");
	}
	is( $standby->safe_psql('postgres', q{
			SELECT r.reserved_until > (SELECT max(snowflake_timestamp(id)) FROM sf)
			   AND r.reserved_until > (SELECT max(snowflake_timestamp(id)) FROM sf_noindex)
			   AND r.reserved_until > (SELECT uuidv7_timestamp(id) FROM un ORDER BY id DESC LIMIT 1)
			   AND r.writes > 0
			FROM snowflake_id_reservation() r}),
		't', "PostgreSQL $major: the promoted standby holds a reservation above every replicated id"
		  . ($wal ? '' : ' (after the advance)'));

	$standby->safe_psql('postgres', q{
		INSERT INTO sf (batch) SELECT 1 FROM generate_series(1, 2000);
		INSERT INTO sf_noindex (batch) SELECT 1 FROM generate_series(1, 2000);
		INSERT INTO un (batch) SELECT 1 FROM generate_series(1, 2000);
	});
	for my $t (qw(sf sf_noindex un))
	{
		is( $standby->safe_psql('postgres', qq{
				SELECT count(*) FILTER (WHERE batch = 1) || ' '
				       || ((SELECT id FROM $t WHERE batch = 1 ORDER BY id LIMIT 1)
				           > (SELECT id FROM $t WHERE batch = 0 ORDER BY id DESC LIMIT 1))
				FROM $t}),
			'2000 true', "PostgreSQL $major: after promotion every new id in $t is above every replicated one");
	}

	SKIP:
	{
		skip "PostgreSQL $major has no custom WAL records: a standby replays no reservation", 6 unless $wal;

		# A replayed reservation that cannot be written to the standby's file stops recovery (FATAL),
		# so that no restartpoint can pass a reservation no durable place holds (0.2.0 logged a
		# WARNING and went on). Started again once the file can be written, it replays the record
		# again and follows its primary.
		$standby->backup('base2');
		my $standby2 = PostgreSQL::Test::Cluster->new("standby2_$major", install_path => install_path($major));
		$standby2->init_from_backup($standby, 'base2', has_streaming => 1);
		# The file cannot be opened for writing, so it would be replaced through the temporary file,
		# and a directory stands in the way of that.
		my $state = $standby2->data_dir . '/snowflake_id.state';
		my $blocker = "$state.tmp";
		chmod 0400, $state or die "chmod $state: $!";
		mkdir $blocker or die "mkdir $blocker: $!";
		$standby2->start;
		$standby->safe_psql('postgres', 'SELECT snowflake_id_advance(clock_timestamp() + interval \'1 s\')');
		$standby->safe_psql('postgres', 'INSERT INTO sf (batch) SELECT 2 FROM generate_series(1, 2000)');
		my $stopped = 0;
		for (1 .. 300)
		{
			if (!-f $standby2->data_dir . '/postmaster.pid') { $stopped = 1; last; }
			select(undef, undef, undef, 0.1);
		}
		ok($stopped, "PostgreSQL $major: a standby that cannot write a replayed reservation stops");
		like(slurp_file($standby2->logfile), qr/FATAL:\s+could not write the snowflake_id reservation file/,
			"PostgreSQL $major: it says why, with FATAL");
		rmdir $blocker or die "rmdir $blocker: $!";
		chmod 0600, $state or die "chmod $state: $!";
		$standby2->_update_pid(0);
		$standby2->start;
		$standby->wait_for_catchup($standby2);
		is( $standby2->safe_psql('postgres', q{
				SELECT (SELECT reserved_until FROM snowflake_id_reservation()) > (SELECT max(snowflake_timestamp(id)) FROM sf)}),
			't', "PostgreSQL $major: started again, it replayed the reservation above every id");
		$standby2->stop;

		# So does one whose reservation file belongs to another layout than its settings (a standby
		# set up with another snowflake_id.layout): the file is never replaced, so the replayed
		# reservation cannot be kept, and a restartpoint must not pass it (0.3.0 skipped it). Given
		# the primary's layout and started again, it follows.
		$standby->backup('base3');
		my $standby3 = PostgreSQL::Test::Cluster->new("standby3_$major", install_path => install_path($major));
		$standby3->init_from_backup($standby, 'base3', has_streaming => 1);
		$standby3->append_conf('postgresql.conf', "snowflake_id.layout = 'twitter'");
		$standby3->start;
		$standby->safe_psql('postgres', 'SELECT snowflake_id_advance(clock_timestamp() + interval \'1 s\')');
		$standby->safe_psql('postgres', 'INSERT INTO sf (batch) SELECT 3 FROM generate_series(1, 2000)');
		$stopped = 0;
		for (1 .. 300)
		{
			if (!-f $standby3->data_dir . '/postmaster.pid') { $stopped = 1; last; }
			select(undef, undef, undef, 0.1);
		}
		ok($stopped, "PostgreSQL $major: a standby whose reservation file belongs to another layout stops at a replayed reservation");
		like(slurp_file($standby3->logfile), qr/FATAL:\s+cannot keep a replayed snowflake_id reservation/,
			"PostgreSQL $major: it says why, with FATAL");
		$standby3->adjust_conf('postgresql.conf', 'snowflake_id.layout', undef);
		$standby3->_update_pid(0);
		$standby3->start;
		$standby->wait_for_catchup($standby3);
		is( $standby3->safe_psql('postgres', q{
				SELECT (SELECT reserved_until FROM snowflake_id_reservation()) > (SELECT max(snowflake_timestamp(id)) FROM sf)}),
			't', "PostgreSQL $major: with the primary's layout, it replayed the reservation above every id");
		$standby3->stop;
	}

	# A primary's own crash recovery, its layout changed meanwhile, passes such records: the file,
	# written before each, holds them. It starts, and refuses to mint until the layout is back.
	$standby->safe_psql('postgres', 'CHECKPOINT');
	$standby->safe_psql('postgres', 'SELECT snowflake_id_advance(clock_timestamp() + interval \'1 s\')');
	$standby->safe_psql('postgres', 'INSERT INTO sf (batch) SELECT 4 FROM generate_series(1, 100)');
	$standby->append_conf('postgresql.conf', "snowflake_id.layout = 'twitter'");
	$standby->stop('immediate');
	ok($standby->start(fail_ok => 1),
		"PostgreSQL $major: a primary whose layout changed before a crash recovers (its file holds its records)");
	my ($rc, $out, $err) = $standby->psql('postgres', 'SELECT snowflake_next(1)');
	like($err, qr/belong(s)? to another (layout|id space)/, "PostgreSQL $major: and refuses to mint until the layout is back");
	$standby->adjust_conf('postgresql.conf', 'snowflake_id.layout', undef);
	$standby->restart;
	is($standby->safe_psql('postgres', q{
			INSERT INTO sf (batch) VALUES (5);
			SELECT (SELECT id FROM sf WHERE batch = 5) > (SELECT max(id) FROM sf WHERE batch <> 5)}),
		't', "PostgreSQL $major: with its layout back, it mints above every id");
	$standby->stop;
}

done_testing();
