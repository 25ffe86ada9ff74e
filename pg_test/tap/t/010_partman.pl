# pg_partman 5.1 partitions a snowflake-keyed table into UTC days through its integer interval, on
# every major in SFID_PARTMAN (default 15 and 18), with pg_partman built from the vendored source
# (pg_test/tap.sh; skipped with a message where the tarball is missing). The interval is
# snowflake_id_interval('1 day', layout) and the start snowflake_min_id() of a UTC midnight, as in
# docs/partitioning.md:
# - create_parent makes the start day's partition and premake more, each exactly the ids of a UTC
#   day, the same bounds as snowflake_partitions() gives;
# - rows backfilled on a shard no server mints for, over the past days, land in their day's
#   partition; run_maintenance then makes premake days ahead of the newest row, so rows minted now
#   land in today's partition, and the default partition stays empty;
# - retention by two days' ids drops the partitions whose ids all lie more than two days below the
#   newest row, and the rows in them only;
# - rows past premake (after a quiet spell) go to the default partition, and the documented
#   remedy, partition_data_proc and then maintenance, moves them into their day's partition.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin . '/..';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeNode;

if (($ENV{SFID_PG_PARTMAN} // '') ne 'yes')
{
	plan skip_all => "pg_partman was not built ($ENV{SFID_PG_PARTMAN}): the vendored tarball is missing"
	  if ($ENV{SFID_PG_PARTMAN} // '') eq 'no';
	BAIL_OUT('pg_partman failed to build');
}

for my $major (split ' ', $ENV{SFID_PARTMAN} // '15 18')
{
	# Every expectation counts UTC days from now(), computed again in each statement: keep each
	# major's run clear of a UTC midnight, with five minutes' margin for a slow run (a run takes
	# seconds; one that crossed midnight would shift every day offset after it).
	my $to_midnight = 86400 - time() % 86400;
	sleep($to_midnight + 1) if $to_midnight < 300;
	my $node = sfid_node("partman_$major", $major, "snowflake_id.shards = '0-127'\nmax_connections = 20");
	$node->start;
	$node->safe_psql('postgres', q{
		CREATE EXTENSION snowflake_id;
		CREATE SCHEMA partman;
		CREATE EXTENSION pg_partman SCHEMA partman;
		CREATE TABLE events (id bigint NOT NULL DEFAULT snowflake_next(), payload text) PARTITION BY RANGE (id);
		SELECT partman.create_parent(
		    p_parent_table    => 'public.events',
		    p_control         => 'id',
		    p_interval        => snowflake_id_interval('1 day', 'default')::text,
		    p_premake         => 2,
		    p_start_partition => snowflake_min_id(date_trunc('day', now() - interval '72 hours', 'UTC'), 'default', '2025-01-01 00:00+00')::text);
	});
	# Each child's bounds, its UTC day (the day snowflake_partitions() gives these very bounds for)
	# and that day counted from today.
	my $children = q{
		SELECT c.relname, b.lo, b.hi, p.starts AS utc_day, p.starts::date - (now() AT TIME ZONE 'UTC')::date AS day
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid,
		     LATERAL (SELECT m[1]::bigint AS lo, m[2]::bigint AS hi
		              FROM regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''?(\d+)''?\) TO \(''?(\d+)''?\)') m) b
		     LEFT JOIN LATERAL (SELECT * FROM snowflake_partitions(snowflake_timestamp(b.lo, 'default', '2025-01-01 00:00+00'),
		                                                           snowflake_timestamp(b.lo, 'default', '2025-01-01 00:00+00'), '1 day', 'default', '2025-01-01 00:00+00')
		                        WHERE lower_id = b.lo AND upper_id = b.hi) p ON true
		WHERE i.inhparent = 'events'::regclass AND c.relname <> 'events_default'};
	my $days = "SELECT count(*), count(utc_day), string_agg(day::text, ' ' ORDER BY day) FROM ($children) x";
	is($node->safe_psql('postgres', $days), '3|3|-3 -2 -1',
		"PG $major: create_parent makes the start day and premake 2 more, each exactly a UTC day's ids");
	$node->safe_psql('postgres', q{
		INSERT INTO events (id, payload)
		SELECT snowflake_compose(date_trunc('day', now(), 'UTC') - g * interval '1 hour', 8191, 0, 'default', '2025-01-01 00:00+00'), 'backfill'
		FROM generate_series(1, 71) g;
		CALL partman.run_maintenance_proc();
		INSERT INTO events (payload) SELECT 'now' FROM generate_series(1, 1000);
	});
	is($node->safe_psql('postgres', $days), '5|5|-3 -2 -1 0 1',
		"PG $major: run_maintenance makes premake days ahead of the newest (backfilled) row");
	my $placed = q{
		SELECT count(*), count(*) FILTER (WHERE date_trunc('day', snowflake_timestamp(e.id), 'UTC') = x.utc_day)
		FROM events e JOIN (} . $children . q{) x ON x.relname = e.tableoid::regclass::text};
	is($node->safe_psql('postgres', $placed), '1071|1071',
		"PG $major: every row lands in the partition of its UTC day, minted now or backfilled");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM events_default'), '0', "PG $major: the default partition stays empty");
	# Retention of two days' ids drops the partitions that end more than two days below the newest
	# row: the one of three days back. Maintenance makes the day after tomorrow.
	$node->safe_psql('postgres', q{
		UPDATE partman.part_config SET retention = snowflake_id_interval('2 days', 'default')::text, retention_keep_table = false
		WHERE parent_table = 'public.events';
		CALL partman.run_maintenance_proc();
	});
	is($node->safe_psql('postgres', $days), '5|5|-2 -1 0 1 2',
		"PG $major: retention by days drops the partition of three days back, premake keeps two days ahead");
	is($node->safe_psql('postgres', qq{SELECT count(*) FILTER (WHERE payload = 'now'), count(*) FROM events}),
		'1000|1048', "PG $major: only the 23 backfilled rows of the dropped day went with it");
	is($node->safe_psql('postgres', $placed . ' UNION ALL SELECT count(*), 0 FROM events_default'), "1048|1048\n0|0",
		"PG $major: after maintenance every row is still in its day's partition, none in the default");
	# After a quiet spell longer than premake, rows land in the default partition, and maintenance
	# makes none for them. The remedy of docs/partitioning.md: partition_data_proc makes their
	# partition and moves them (a partition made first would be refused over them), then
	# maintenance runs again. Retention is off here, so that the newest row's move keeps today.
	$node->safe_psql('postgres', q{
		UPDATE partman.part_config SET retention = NULL WHERE parent_table = 'public.events';
		INSERT INTO events (id, payload)
		SELECT snowflake_compose(date_trunc('day', now(), 'UTC') + interval '5 days' + g * interval '1 hour', 8191, 0, 'default', '2025-01-01 00:00+00'), 'late'
		FROM generate_series(0, 9) g;
	});
	is($node->safe_psql('postgres', 'SELECT count(*) FROM ONLY events_default'), '10',
		"PG $major: rows past premake after a quiet spell land in the default partition");
	$node->safe_psql('postgres', q{
		CALL partman.partition_data_proc('public.events');
		VACUUM ANALYZE events;
		CALL partman.run_maintenance_proc();
	});
	is($node->safe_psql('postgres', $placed . ' UNION ALL SELECT count(*), 0 FROM events_default'), "1058|1058\n0|0",
		"PG $major: partition_data_proc makes their day's partition and moves them; maintenance runs again");
	$node->stop;
}

done_testing();
