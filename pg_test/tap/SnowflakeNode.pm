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

our @EXPORT = qw(sfid_node install_path start_insert_load finish_loads start_with_clock set_clock clock_file);

# How long the test took, as a line pg_test/tap.sh and scripts/test.sh gather into their time
# summaries (a diag: PostgreSQL::Test::Utils sends STDERR itself to the test's log).
my $started = time;
END { Test::More->builder->diag(sprintf('time: TAP %s: %ds', ($0 =~ s{.*/}{}r), time - $started)); }

# A test ended by a signal (make test's exit sends SIGTERM to the TAP job; Ctrl-C) dies instead,
# so that PostgreSQL::Test::Cluster's END block stops its servers: the PostgreSQL 15 framework the
# tests use leaves SIGTERM at Perl's default, which skips END blocks (16's sets this handler).
$SIG{$_} = sub { die "death by signal $_[0]\n" } for qw(TERM INT HUP);

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

# libfaketime, which shifts a server's clock from outside.
my $faketime = (grep { -e $_ } map { "$_/faketime/libfaketime.so.1" } qw(/usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib))[0];

# The file a node started by start_with_clock reads its clock's offset from.
sub clock_file { my ($node) = @_; return $node->basedir . '/clock_offset'; }

# start_with_clock(NODE, %start_params): starts NODE under libfaketime, its clock the real one
# shifted by what its clock file says ('+0' at first). Returns what $node->start returns.
sub start_with_clock
{
	my ($node, %params) = @_;
	$faketime or BAIL_OUT('libfaketime is not installed (scripts/setup.sh installs it)');
	my $file = clock_file($node);
	PostgreSQL::Test::Utils::append_to_file($file, "+0\n") unless -e $file;
	local $ENV{LD_PRELOAD} = $faketime;
	local $ENV{FAKETIME_TIMESTAMP_FILE} = $file;
	local $ENV{FAKETIME_CACHE_DURATION} = 1;
	return $node->start(%params);
}

# set_clock(NODE, OFFSET): shifts the clock of a node started by start_with_clock ('-60s', '+0');
# with a third argument false, only writes the file (for a node that is not running).
sub set_clock
{
	my ($node, $offset, $wait) = @_;
	open my $fh, '>', clock_file($node) or die $!;
	print $fh "$offset\n";
	close $fh;
	# Each process reads the file again within a second.
	sleep 2 if $wait // 1;
	return;
}

1;
