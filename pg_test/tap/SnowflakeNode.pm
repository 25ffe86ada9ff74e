# Shared setup for the multi-node tests: a PostgreSQL::Test::Cluster of a given major version,
# with snowflake_id preloaded. The install prefix of each major comes from $ENV{SFID_PGnn}
# (set by pg_test/tap.sh).
package SnowflakeNode;

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Exporter 'import';

our @EXPORT = qw(sfid_node install_path start_insert_load finish_loads);

sub install_path
{
	my ($major) = @_;
	my $path = $ENV{"SFID_PG$major"}
	  or BAIL_OUT("SFID_PG$major is not set: pg_test/tap.sh sets it");
	return $path;
}

# sfid_node(NAME, MAJOR, CONF_LINES, %init_params): initialised, configured, not started.
# Data checksums are off on every major (18's initdb turns them on by default, and pg_upgrade
# needs both sides to agree).
sub sfid_node
{
	my ($name, $major, $conf, %params) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name, install_path => install_path($major));
	my @extra = $major >= 18 ? ('--no-data-checksums') : ();
	$node->init(extra => [ @extra, '-E', 'UTF8', '--locale=C' ], %params);
	$node->append_conf('postgresql.conf', join("\n",
		"shared_preload_libraries = 'snowflake_id'",
		"timezone = 'UTC'",
		"fsync = off",
		$conf // ''));
	return $node;
}

# start_insert_load(NODE, MAJOR, NAME, TABLE, COLUMN, VALUE, SECONDS): inserts into TABLE
# through NODE for SECONDS, in the background, as a fleet's clients do: two pgbench clients
# inserting one row (COLUMN = VALUE) per transaction, and one inserting 1,000 rows per statement
# (faster than one shard's 512 ids a millisecond). Returns the loads, for finish_loads.
sub start_insert_load
{
	my ($node, $major, $name, $table, $column, $value, $seconds) = @_;
	my @loads;
	my $dir = $PostgreSQL::Test::Utils::tmp_check;
	my %sql = (
		single => "INSERT INTO $table ($column) VALUES ('$value');\n",
		bulk => "INSERT INTO $table ($column) SELECT '$value' FROM generate_series(1, 1000);\n");
	for my $kind ('single', 'bulk')
	{
		my $file = "$dir/load_${name}_$kind.sql";
		PostgreSQL::Test::Utils::append_to_file($file, $sql{$kind});
		my $clients = $kind eq 'single' ? 2 : 1;
		my ($out, $err) = ('', '');
		my $h = IPC::Run::start(
			[ install_path($major) . '/bin/pgbench', '-n', '-c', $clients, '-j', $clients, '-T', $seconds,
			  '-f', $file, '-h', $node->host, '-p', $node->port, 'postgres' ],
			'>', \$out, '2>', \$err);
		push @loads, [ $h, \$err, "$name ($kind rows)" ];
	}
	return @loads;
}

# finish_loads(LOADS): waits for every load; one test each, that it ended without an error.
sub finish_loads
{
	for my $l (@_)
	{
		my ($h, $err, $what) = @$l;
		ok(eval { $h->finish; 1 } && $h->result == 0, "inserts through $what finished without an error") or diag($$err);
	}
}

1;
