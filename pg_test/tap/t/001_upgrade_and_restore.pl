# Major upgrades and dump/restore keep the id space: from each old major in $ENV{SFID_FROM}
# (default "15 17") to $ENV{SFID_TO} (default 18), by pg_upgrade and by pg_dump/pg_restore.
# Tables use the extension's functions in defaults (snowflake_next, uuidv7, uuidv7_next), an
# expression index and a view. On the new server, whose clock runs 10 s behind the old one's
# newest id, the old defaults still mint, and every new id is above every old one.
# Then the recorded id space: a dump made under epoch 2020-01-01 restored into a server at the
# default epoch, or with another layout, refuses to mint (55000) rather than mix two id spaces.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin . '/..';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeNode;

my @from = split ' ', ($ENV{SFID_FROM} // '15 17');
my $to = $ENV{SFID_TO} // 18;
# The new servers' clock runs 10 s behind the old servers'; calls may wait that long for it.
my $behind = "snowflake_id.debug_clock_offset = '-10s'\nsnowflake_id.max_rewind_wait = '15s'";

my $schema = q{
CREATE EXTENSION snowflake_id;
CREATE TABLE sf (id bigint PRIMARY KEY DEFAULT snowflake_next(1), batch int NOT NULL DEFAULT 0);
CREATE TABLE u7 (id uuid PRIMARY KEY DEFAULT uuidv7(), batch int NOT NULL DEFAULT 0);
CREATE TABLE un (id uuid PRIMARY KEY DEFAULT uuidv7_next(), batch int NOT NULL DEFAULT 0);
CREATE INDEX u7_time ON u7 (uuidv7_timestamp(id));
CREATE INDEX un_version ON un (uuid_extract_version(id));
CREATE VIEW sf_times AS SELECT id, snowflake_timestamp(id) AS ts, snowflake_shard(id) AS shard FROM sf;
CREATE VIEW u7_times AS SELECT id, uuid_extract_timestamp(id) AS ts FROM u7;
INSERT INTO sf (batch) SELECT 0 FROM generate_series(1, 2000);
INSERT INTO u7 (batch) SELECT 0 FROM generate_series(1, 2000);
INSERT INTO un (batch) SELECT 0 FROM generate_series(1, 2000);
};

# After the move: the defaults mint (batch 1), above every old id, and the index and views work.
sub check_moved
{
	my ($node, $db, $what) = @_;
	$node->safe_psql($db, q{
		INSERT INTO sf (batch) SELECT 1 FROM generate_series(1, 500);
		INSERT INTO u7 (batch) SELECT 1 FROM generate_series(1, 500);
		INSERT INTO un (batch) SELECT 1 FROM generate_series(1, 500);
	});
	for my $t (qw(sf u7 un))
	{
		is( $node->safe_psql($db, qq{
				SELECT count(*) FILTER (WHERE batch = 0) || ' ' || count(*) FILTER (WHERE batch = 1) || ' '
				       || ((SELECT id FROM $t WHERE batch = 1 ORDER BY id LIMIT 1)
				           > (SELECT id FROM $t WHERE batch = 0 ORDER BY id DESC LIMIT 1))
				FROM $t}),
			'2000 500 true', "$what: $t mints with its old default, every new id above every old one");
	}
	is($node->safe_psql($db, q{
			SELECT (SELECT count(*) FROM sf_times WHERE ts IS NOT NULL AND shard = 1)
			     + (SELECT count(*) FROM u7_times WHERE ts IS NOT NULL)}),
		'5000', "$what: the views read every row");
	is($node->safe_psql($db, q{
			SET enable_seqscan = off;
			SELECT count(*) FROM u7 WHERE uuidv7_timestamp(id) > '2000-01-01'}),
		'2500', "$what: the expression index answers");
	is($node->safe_psql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'}),
		$node->safe_psql('postgres', q{SELECT default_version FROM pg_available_extensions WHERE name = 'snowflake_id'}),
		"$what: the extension is at the installed version");
}

my $tmp = PostgreSQL::Test::Utils::tempdir;

for my $old_major (@from)
{
	my $old = sfid_node("old$old_major", $old_major);
	$old->start;
	$old->safe_psql('postgres', 'CREATE DATABASE app');
	$old->safe_psql('app', $schema);
	is( $old->safe_psql('app', q{
			SELECT p.pronamespace::regnamespace FROM pg_attrdef d JOIN pg_proc p
			  ON p.oid = (regexp_match(d.adbin::text, ':funcid (\d+)'))[1]::oid
			WHERE d.adrelid = 'u7'::regclass}),
		'public', "PostgreSQL $old_major: DEFAULT uuidv7() is the extension's function");

	# Dump and restore, with the new version's pg_dump, as a DBA moving to a new server does.
	my $dump = "$tmp/app$old_major.dump";
	my $new_bin = install_path($to) . '/bin';
	command_ok([ "$new_bin/pg_dump", '-Fc', '-f', $dump, '-d', $old->connstr('app') ],
		"PostgreSQL $old_major: pg_dump");
	my $restored = sfid_node("restored${old_major}to$to", $to, $behind);
	$restored->start;
	$restored->safe_psql('postgres', 'CREATE DATABASE app');
	command_ok([ "$new_bin/pg_restore", '--exit-on-error', '-d', $restored->connstr('app'), $dump ],
		"pg_restore of a PostgreSQL $old_major dump into $to");
	check_moved($restored, 'app', "restored $old_major -> $to");
	$restored->stop;

	# pg_upgrade. Run from a directory the test owns: it writes its logs there.
	$old->stop;
	my $upgraded = sfid_node("upgraded${old_major}to$to", $to, $behind);
	chdir $tmp;
	command_ok(
		[
			"$new_bin/pg_upgrade", '--no-sync',
			'-d', $old->data_dir, '-D', $upgraded->data_dir,
			'-b', install_path($old_major) . '/bin', '-B', $new_bin,
			'-s', $upgraded->host, '-p', $old->port, '-P', $upgraded->port
		],
		"pg_upgrade $old_major -> $to");
	$upgraded->start;
	check_moved($upgraded, 'app', "pg_upgrade $old_major -> $to");
	$upgraded->stop;
}

# The recorded id space. A database minted under epoch 2020-01-01 ...
my $src = sfid_node('epoch2020', $from[0], "snowflake_id.epoch = '2020-01-01'");
$src->start;
$src->safe_psql('postgres', 'CREATE DATABASE app');
$src->safe_psql('app', $schema);
my $src_max = $src->safe_psql('app', 'SELECT max(id) FROM sf');
my $dump = "$tmp/epoch2020.dump";
my $new_bin = install_path($to) . '/bin';
command_ok([ "$new_bin/pg_dump", '-Fc', '-f', $dump, '-d', $src->connstr('app') ], 'pg_dump under epoch 2020-01-01');
$src->stop;

# ... restored into a server at the default epoch, and into one with another layout.
for my $case ([ 'default epoch', '' ], [ 'twitter layout', "snowflake_id.layout = 'twitter'\nsnowflake_id.epoch = '2020-01-01'" ])
{
	my ($label, $conf) = @$case;
	(my $name = "space_$label") =~ s/ /_/g;
	my $node = sfid_node($name, $to, $conf);
	$node->start;
	$node->safe_psql('postgres', 'CREATE DATABASE app');
	command_ok([ "$new_bin/pg_restore", '--exit-on-error', '-d', $node->connstr('app'), $dump ],
		"the epoch-2020 dump restores into a server with the $label");
	my ($rc, $out, $err) = $node->psql('app',
		"\\set VERBOSITY verbose\nINSERT INTO sf (batch) VALUES (1)");
	like($err, qr/ERROR:\s+55000: this database's snowflake ids belong to another id space/,
		"$label: the first snowflake id is refused with 55000");
	like($err, qr/snowflake_id\.epoch = '2020-01-01 00:00:00(\.000)?\+00'/, "$label: the hint names the recorded epoch");
	is($node->safe_psql('app', "SELECT count(*) FILTER (WHERE batch = 1) || ' ' || max(id) FROM sf"),
		"0 $src_max", "$label: no id was minted, smaller or not");
	is($node->safe_psql('app', "INSERT INTO un (batch) VALUES (1) RETURNING uuid_extract_version(id)"),
		'7', "$label: UUIDv7, which no setting shapes, still mints");
	# A new session refuses as well (each session checks before its first id).
	($rc, $out, $err) = $node->psql('app', 'SELECT snowflake_next(1)');
	like($err, qr/another id space/, "$label: a new session refuses too");
	$node->stop;
}

done_testing();
