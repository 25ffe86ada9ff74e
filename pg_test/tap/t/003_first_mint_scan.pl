# The cost of the first mint in a database after a start: it reads the largest stored id of
# every column a generator fills, through its index. 1,000 tables (half snowflake, half UUIDv7
# keys) with 1,000 rows each. Prints the first session's first insert against a later
# session's, with the same statement. Then the last table gets a row 1.5 s ahead of the clock,
# which the first id after the next start must pass: the scan reached the last table.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin . '/..';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use SnowflakeNode;

my $major = $ENV{SFID_SCAN} // 15;
my $tables = 1000;
my $node = sfid_node("scan$major", $major, "max_locks_per_transaction = 256");
$node->start;
$node->safe_psql('postgres', qq{
	CREATE EXTENSION snowflake_id;
	DO \$\$
	BEGIN
		FOR i IN 1..$tables LOOP
			IF i % 2 = 0 THEN
				EXECUTE format('CREATE TABLE t%s (id bigint PRIMARY KEY DEFAULT snowflake_next(1), v int)', i);
			ELSE
				EXECUTE format('CREATE TABLE t%s (id uuid PRIMARY KEY DEFAULT uuidv7_next(), v int)', i);
			END IF;
			EXECUTE format('INSERT INTO t%s (v) SELECT g FROM generate_series(1, 1000) g', i);
		END LOOP;
	END \$\$;
	CREATE TABLE probe (id bigint PRIMARY KEY DEFAULT snowflake_next(2), v int);
});
$node->restart;

sub timed_insert
{
	my $t0 = time;
	$node->safe_psql('postgres', 'INSERT INTO probe (v) VALUES (1)');
	return (time - $t0) * 1000;
}
my $first = timed_insert();
my $later = timed_insert();
my $scan_ms = $first - $later;
diag(sprintf('first insert after a start: %.0f ms; a later session: %.0f ms; the scan of %d tables: about %.0f ms (%.0f us a table)',
	$first, $later, $tables, $scan_ms, $scan_ms * 1000 / $tables));
ok($first < 30_000, 'the first mint with 1,000 tables finishes in well under 30 s');

# A row from 1.5 s ahead in the last table, as a restore from a server whose clock ran ahead
# leaves it; the restart forgets everything but the reservation file, which lies below it.
$node->safe_psql('postgres', "INSERT INTO t$tables (id, v) VALUES (snowflake_min_id(clock_timestamp() + interval '1500 ms'), -1)");
$node->restart;
timed_insert();
is( $node->safe_psql('postgres', "SELECT (SELECT max(id) FROM probe) > (SELECT id FROM t$tables WHERE v = -1)"),
	't', 'the first id after a start is above a stored id ahead of the clock in the last of 1,000 tables');
$node->stop;

done_testing();
