# Shared setup for the multi-node tests: a PostgreSQL::Test::Cluster of a given major version,
# with snowflake_id preloaded. The install prefix of each major comes from $ENV{SFID_PGnn}
# (set by pg_test/tap.sh).
package SnowflakeNode;

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Exporter 'import';

our @EXPORT = qw(sfid_node install_path);

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

1;
