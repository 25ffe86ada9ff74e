# Citus (each major in $ENV{SFID_CITUS_MAJORS}, default 18: the fleet majors Citus 14.0.1
# supports, 16 to 18): a coordinator and two workers with
# shared_preload_libraries = 'citus,snowflake_id', each node group owning its own shards. A
# distributed table keyed by DEFAULT snowflake_next() takes inserts through every node at once:
# no duplicate, every id names the node that minted it, and time ranges from snowflake_min_id()
# are correct and served by each shard's primary-key index. Skips where Citus was not built
# (pg_test/tap.sh builds it from the vendored tarball when there is one).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin . '/..';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeNode;

my $citus = $ENV{SFID_CITUS} // 'no';
plan skip_all => 'Citus is not available: no Citus source tarball (CITUS_TARBALL, or ../shared/vendor/citus-14.0.1.tar.gz)'
  if $citus eq 'no';
BAIL_OUT('the Citus tarball is there but Citus did not build (see pg_test/tap.sh\'s output)') if $citus ne 'yes';

for my $major (split ' ', ($ENV{SFID_CITUS_MAJORS} // '18'))
{
	# One node group, one shard set: the coordinator's group and each worker's.
	my %shards = (coord => '0-7', w1 => '8-15', w2 => '16-23');
	my %node;
	for my $n (qw(coord w1 w2))
	{
		$node{$n} = sfid_node("citus_$n$major", $major, join("\n",
			"shared_preload_libraries = 'citus,snowflake_id'",    # Citus first, as it requires
			"snowflake_id.shards = '$shards{$n}'",
			'max_connections = 60', 'max_worker_processes = 16', 'citus.shard_count = 8'));
		# The nodes listen on Unix sockets only: Citus connects to a node itself (shard moves) there.
		$node{$n}->append_conf('postgresql.conf', "citus.local_hostname = '" . $node{$n}->host . "'");
		$node{$n}->start;
		$node{$n}->safe_psql('postgres', 'CREATE EXTENSION citus; CREATE EXTENSION snowflake_id;');
	}
	my $coord = $node{coord};
	$coord->safe_psql('postgres', "SELECT citus_set_coordinator_host('" . $coord->host . "', " . $coord->port . ')');
	for my $w (qw(w1 w2))
	{
		$coord->safe_psql('postgres', "SELECT citus_add_node('" . $node{$w}->host . "', " . $node{$w}->port . ')');
	}
	$coord->safe_psql('postgres', q{
		CREATE TABLE events (
			id         bigint PRIMARY KEY DEFAULT snowflake_next(),
			node       text NOT NULL,
			created_at timestamptz NOT NULL DEFAULT clock_timestamp()
		);
		SELECT create_distributed_table('events', 'id');
	});
	is($coord->safe_psql('postgres', 'SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = \'events\'::regclass'), '8',
		"PostgreSQL $major: events is distributed over 8 Citus shards");

	# Inserts through every node at once: single rows from two clients, 1,000-row statements from a third.
	my @load = map { start_insert_load($node{$_}, $major, "$_$major", 'events', 'node', $_, 5) } qw(coord w1 w2);
	finish_loads(@load);

	my ($rows, $distinct) = split /\|/, $coord->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id) FROM events');
	cmp_ok($rows, '>', 10_000, "PostgreSQL $major: $rows rows through the three nodes");
	is($distinct, $rows, "PostgreSQL $major: 0 duplicate ids");
	is($coord->safe_psql('postgres', q{
			SELECT count(*) FROM events
			WHERE NOT (node = 'coord' AND snowflake_shard(id) BETWEEN 0 AND 7
			        OR node = 'w1' AND snowflake_shard(id) BETWEEN 8 AND 15
			        OR node = 'w2' AND snowflake_shard(id) BETWEEN 16 AND 23)}),
		'0', "PostgreSQL $major: every id decodes to a shard of the node that minted it");
	is($coord->safe_psql('postgres', 'SELECT count(DISTINCT node) FROM events'), '3', "PostgreSQL $major: rows came through all three nodes");

	# Time ranges: the rows from snowflake_min_id(t) on are exactly those minted from t's millisecond
	# on, on every node, and each shard's query reads its primary key's index.
	my $t = $coord->safe_psql('postgres', 'SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY snowflake_timestamp(id)) FROM events');
	is($coord->safe_psql('postgres', qq{
			SELECT (SELECT count(*) FROM events WHERE id >= snowflake_min_id('$t'))
			     = (SELECT count(*) FROM events WHERE snowflake_timestamp(id) >= '$t')}),
		't', "PostgreSQL $major: id >= snowflake_min_id('$t') holds exactly the rows minted from then on");
	is($coord->safe_psql('postgres', qq{
			SELECT count(*) FROM events WHERE id BETWEEN snowflake_min_id('$t') AND snowflake_max_id('$t')
			AND snowflake_timestamp(id) <> '$t'}),
		'0', "PostgreSQL $major: a millisecond's range holds only that millisecond");
	my $plan = $coord->safe_psql('postgres', qq{
		SET citus.explain_all_tasks = on;
		EXPLAIN (COSTS OFF) SELECT count(*) FROM events WHERE id >= snowflake_min_id('$t')});
	my $tasks = () = $plan =~ /Task/g;
	my $index_scans = () = $plan =~ /Index (?:Only )?Scan (?:using|on) events_pkey_\d+/g;
	cmp_ok($index_scans, '>=', 8, "PostgreSQL $major: every shard's task scans its primary-key index ($index_scans index scans)") or diag($plan);

	# A Citus shard moved to the other worker: its rows keep their ids (the snowflake shard says which
	# node minted a row, not where it lives), and every node keeps minting its own.
	my ($host, $p1, $p2) = ($node{w1}->host, $node{w1}->port, $node{w2}->port);
	my $moved = $coord->safe_psql('postgres', qq{
		SELECT shardid FROM pg_dist_shard_placement
		WHERE shardid IN (SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'events'::regclass) AND nodeport = $p1
		ORDER BY shardid LIMIT 1});
	$coord->safe_psql('postgres',
		"SELECT citus_move_shard_placement($moved, '$host', $p1, '$host', $p2, shard_transfer_mode => 'block_writes')");
	for my $n (qw(coord w1 w2))
	{
		$node{$n}->safe_psql('postgres', "INSERT INTO events (node) SELECT '$n' FROM generate_series(1, 2000)");
	}
	is($coord->safe_psql('postgres', qq{
			SELECT (count(*) = count(DISTINCT id))::text || ' ' || (count(*) - $rows)::text || ' '
			       || count(*) FILTER (WHERE NOT (node = 'coord' AND snowflake_shard(id) BETWEEN 0 AND 7
			                                   OR node = 'w1' AND snowflake_shard(id) BETWEEN 8 AND 15
			                                   OR node = 'w2' AND snowflake_shard(id) BETWEEN 16 AND 23))
			FROM events}),
		'true 6000 0', "PostgreSQL $major: after moving Citus shard $moved to the other worker: 6,000 more rows, no duplicate, every id still names its node");

	# A fleet check from the coordinator over the workers: one node group, one shard set.
	my $peers = "ARRAY['" . join("', '", map { 'host=' . $node{$_}->host . ' port=' . $node{$_}->port . ' dbname=postgres' } qw(w1 w2)) . "']";
	is($coord->safe_psql('postgres', "SELECT count(*) FILTER (WHERE NOT ok) FROM snowflake_fleet_check($peers)"),
		'0', "PostgreSQL $major: the fleet check of the coordinator and the workers finds nothing");

	for my $n (qw(coord w1 w2)) { $node{$n}->stop; }
}

done_testing();
