# A fleet (each major in $ENV{SFID_FLEET}, default 18): three independent servers with identical
# migrations and DEFAULT snowflake_next(), each told its own shards in its configuration, loaded
# concurrently by several clients, and merged into a fourth by built-in logical replication.
# Then the fleet check: a healthy fleet, a clone made with pg_basebackup and promoted (reported
# before it mints), and a server whose clock runs 300 ms ahead through libfaketime.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin . '/..';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeNode;

# A libpq connection string for a node, with nothing that needs quoting in SQL.
sub dsn { my ($n) = @_; return 'host=' . $n->host . ' port=' . $n->port . ' dbname=postgres'; }

# The migration every server runs, unchanged: no shard in it.
my $migration = q{
	CREATE EXTENSION snowflake_id;
	CREATE TABLE orders (
		id         bigint PRIMARY KEY DEFAULT snowflake_next(),
		server     text NOT NULL,
		created_at timestamptz NOT NULL DEFAULT clock_timestamp()
	);
};

for my $major (split ' ', ($ENV{SFID_FLEET} // '18'))
{
	my %shards = (a => '0-7', b => '8-15', c => '16-23');
	my %node;
	for my $s (sort keys %shards)
	{
		$node{$s} = sfid_node("fleet_$s$major", $major, "snowflake_id.shards = '$shards{$s}'\nmax_connections = 40", allows_streaming => 'logical');
		$node{$s}->start;
		$node{$s}->safe_psql('postgres', $migration . 'CREATE PUBLICATION fleet FOR TABLE orders;');
	}
	# The merge target runs the same migration, and owns shards of its own.
	my $merge = sfid_node("fleet_merge$major", $major, "snowflake_id.shards = '100-107'");
	$merge->start;
	$merge->safe_psql('postgres', $migration);
	for my $s (sort keys %shards)
	{
		my $conn = dsn($node{$s});
		$merge->safe_psql('postgres', "CREATE SUBSCRIPTION sub_$s CONNECTION '$conn' PUBLICATION fleet");
	}

	# Load: on each server at once, single rows from two clients and 1,000-row statements from a third.
	my @load = map { start_insert_load($node{$_}, $major, "$_$major", 'orders', 'server', $_, 6) } sort keys %shards;
	finish_loads(@load);

	my $total = 0;
	for my $s (sort keys %shards)
	{
		$node{$s}->wait_for_catchup("sub_$s");
		$total += $node{$s}->safe_psql('postgres', 'SELECT count(*) FROM orders');
	}
	cmp_ok($total, '>', 50_000, "PostgreSQL $major: the three servers minted $total ids under load");
	is($merge->safe_psql('postgres', 'SELECT count(*) || \' \' || count(DISTINCT id) FROM orders'), "$total $total",
		"PostgreSQL $major: the merged table holds every row, with no primary-key conflict");
	unlike(slurp_file($merge->logfile), qr/duplicate key value/, "PostgreSQL $major: no subscription hit a duplicate key");
	is($merge->safe_psql('postgres', q{
			SELECT count(*) FROM orders
			WHERE NOT (server = 'a' AND snowflake_shard(id) BETWEEN 0 AND 7
			        OR server = 'b' AND snowflake_shard(id) BETWEEN 8 AND 15
			        OR server = 'c' AND snowflake_shard(id) BETWEEN 16 AND 23)}),
		'0', "PostgreSQL $major: every id decodes to a shard of the server that minted it");
	is($merge->safe_psql('postgres', q{SELECT count(DISTINCT snowflake_shard(id)) > 3 FROM orders}), 't',
		"PostgreSQL $major: the bulk loads spread over more than one shard per server");

	# The fleet check from server a: a healthy fleet gives only ok rows, and measures the skew.
	my @peers = map { dsn($node{$_}) } qw(b c);
	my $peers = "ARRAY['" . join("', '", @peers) . "']";
	my $check = "SELECT peer, \"check\", ok, detail FROM snowflake_fleet_check($peers)";
	my $rows = $node{a}->safe_psql('postgres', $check);
	note("the fleet check of a healthy fleet:\n$rows");
	is($node{a}->safe_psql('postgres', "SELECT count(*) FILTER (WHERE NOT ok) || ' of ' || count(*) FROM snowflake_fleet_check($peers)"),
		'0 of 24', "PostgreSQL $major: a healthy fleet: only ok rows, 8 checks for each of 3 servers") or diag($rows);
	my $skew_us = $node{a}->safe_psql('postgres', qq{
		SELECT max(abs((figures->>'offset_us')::bigint) + (figures->>'error_us')::bigint)
		FROM snowflake_fleet_check($peers) WHERE "check" = 'clock skew' AND figures ? 'error_us'});
	cmp_ok($skew_us, '<', 50_000, "PostgreSQL $major: the measured skew between the servers: at most $skew_us us");

	# Cross-server order: two rows minted on different servers more than the skew, the lead (5 ms)
	# and a tick apart in time are in id order.
	my $bound_ms = int($skew_us / 1000) + 5 + 1;
	$merge->safe_psql('postgres', 'CREATE TABLE pairs AS SELECT 1 + floor(random() * (SELECT count(*) FROM orders))::int AS x, 1 + floor(random() * (SELECT count(*) FROM orders))::int AS y FROM generate_series(1, 20000)');
	is($merge->safe_psql('postgres', qq{
			WITH r AS (SELECT id, server, created_at, row_number() OVER () AS n FROM orders),
			     p AS (SELECT * FROM pairs)
			SELECT count(*) FROM p JOIN r a ON a.n = p.x JOIN r b ON b.n = p.y
			WHERE a.server <> b.server AND a.created_at < b.created_at - interval '$bound_ms ms' AND a.id > b.id}),
		'0', "PostgreSQL $major: rows from different servers more than $bound_ms ms apart are in id order");

	# A clone: a base backup of server a, started as a standby (no finding), then promoted, with its
	# configuration unchanged. The check reports it before it mints a single id.
	$node{a}->backup("clone_base$major");
	my $clone = PostgreSQL::Test::Cluster->new("fleet_clone$major", install_path => install_path($major));
	$clone->init_from_backup($node{a}, "clone_base$major", has_streaming => 1);
	$clone->start;
	my $with_clone = "ARRAY['" . join("', '", @peers, dsn($clone)) . "']";
	is($node{a}->safe_psql('postgres', "SELECT count(*) FILTER (WHERE NOT ok) FROM snowflake_fleet_check($with_clone)"),
		'0', "PostgreSQL $major: a streaming standby of server a is no finding");
	$clone->promote;
	my $findings = join ' ', sort map { my ($p, $c) = split /\|/; ($p eq '(this server)' ? 'a' : 'clone') . ":$c" }
		split /\n/, $node{a}->safe_psql('postgres', "SELECT peer, \"check\" FROM snowflake_fleet_check($with_clone) WHERE NOT ok");
	is($findings, 'a:clone a:shards clone:clone clone:shards',
		"PostgreSQL $major: the promoted clone: the same system identifier and overlapping shards, on both sides, nothing else");
	like($node{a}->safe_psql('postgres', "SELECT detail FROM snowflake_fleet_check($with_clone) WHERE \"check\" = 'clone' AND peer <> '(this server)' AND NOT ok"),
		qr/system identifier \d+ on timeline 2, also that of \(this server\) on timeline 1/, "PostgreSQL $major: the clone finding names the system identifier and the timelines");
	is($clone->safe_psql('postgres', 'SELECT count(*) FROM snowflake_id_stats WHERE generator = \'snowflake\''), '0',
		"PostgreSQL $major: the clone minted nothing before it was reported");
	$clone->stop;

	# Skew: a server whose clock runs 300 ms ahead (libfaketime on its postmaster).
	my $faketime = (grep { -e $_ } map { "$_/faketime/libfaketime.so.1" } qw(/usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib))[0];
	SKIP:
	{
		skip 'libfaketime is not installed (scripts/setup.sh installs it)', 3 unless $faketime;
		my $ahead = sfid_node("fleet_ahead$major", $major, "snowflake_id.shards = '32-39'");
		{
			local $ENV{LD_PRELOAD} = $faketime;
			local $ENV{FAKETIME} = '+0.3';
			$ahead->start;
		}
		$ahead->safe_psql('postgres', 'CREATE EXTENSION snowflake_id');
		my $with_ahead = "ARRAY['" . join("', '", @peers, dsn($ahead)) . "']";
		my ($off, $err, $ok) = split /\|/, $node{a}->safe_psql('postgres', qq{
			SELECT figures->>'offset_us', figures->>'error_us', ok FROM snowflake_fleet_check($with_ahead)
			WHERE "check" = 'clock skew' AND peer <> '(this server)' ORDER BY abs((figures->>'offset_us')::bigint) DESC LIMIT 1});
		is($ok, 'f', "PostgreSQL $major: the server 300 ms ahead is a finding (measured ${off} us, error bound ${err} us)");
		cmp_ok(abs($off - 300_000), '<=', $err + 1000, "PostgreSQL $major: the measured offset is 300 ms to within its error bound (and 1 ms of libfaketime)");
		is($node{a}->safe_psql('postgres', "SELECT count(*) FILTER (WHERE NOT ok) FROM snowflake_fleet_check($with_ahead, max_skew => '400 ms')"),
			'0', "PostgreSQL $major: with a 400 ms threshold the same fleet passes");
		$ahead->stop;
	}

	# An unreachable peer is a finding, reported within the timeout: a socket that does not exist, and
	# an address nothing answers from (a black hole, or an unreachable network where there is none).
	for my $peer ('host=/nonexistent port=1 dbname=x', 'hostaddr=10.255.255.1 port=5432 dbname=x')
	{
		my $t0 = time;
		is($node{a}->safe_psql('postgres', "SELECT ok || ' ' || \"check\" FROM snowflake_fleet_check(ARRAY['$peer'], timeout => '2 s') WHERE peer <> '(this server)'"),
			'false reachable', "PostgreSQL $major: an unreachable peer ($peer): one finding, \"reachable\"");
		cmp_ok(time - $t0, '<=', 4, "PostgreSQL $major: within the timeout");
	}
	is($node{a}->psql('postgres', "SELECT * FROM snowflake_fleet_check(NULL)"), 3, "PostgreSQL $major: NULL peers: an error, never an empty result");

	# A peer's own functions and operators never run in the check: it asks under search_path =
	# pg_catalog. An operator a role created on peer b, matching better than the built-in one the
	# clock query uses, would fail the query if it ran.
	$node{b}->safe_psql('postgres', q{
		CREATE FUNCTION public.evil_mul(numeric, integer) RETURNS numeric LANGUAGE sql AS 'SELECT 1 / 0';
		CREATE OPERATOR public.* (leftarg = numeric, rightarg = integer, function = public.evil_mul);
		ALTER DATABASE postgres SET search_path = public, pg_catalog;
	});
	is($node{a}->safe_psql('postgres', "SELECT count(*) FILTER (WHERE NOT ok) FROM snowflake_fleet_check($peers)"),
		'0', "PostgreSQL $major: a peer's operator ahead of pg_catalog on its search_path does not run");
	$node{b}->safe_psql('postgres', 'ALTER DATABASE postgres RESET search_path');

	# A role granted the check cannot borrow the server's identity: without a password of its own in
	# the string, it is refused before any connection (2F003; t/006_fleet_security.pl has the rest).
	$node{a}->safe_psql('postgres', q{
		CREATE ROLE monitor LOGIN IN ROLE pg_monitor;
		GRANT EXECUTE ON FUNCTION snowflake_fleet_check(text[], interval, interval) TO monitor;
	});
	my ($mrc, $mout, $merr) = $node{a}->psql('postgres', "\\set VERBOSITY verbose\nSET ROLE monitor; SELECT * FROM snowflake_fleet_check($peers)");
	like($merr, qr/ERROR:\s+2F003: password is required/, "PostgreSQL $major: a non-superuser without a password of its own is refused before connecting");

	$node{$_}->stop for sort keys %node;
	$merge->stop;
}

done_testing();
