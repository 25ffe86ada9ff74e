# One database's load does not spend another's capacity (PostgreSQL $ENV{SFID_SHARE}, default 15).
# A server whose layout holds 64 ids a millisecond a shard, so that any machine floods shard 5 from
# eight sessions of one database, each alternating between shards 5 and 6 (one session's share of
# the lead's last tick is one over every generator), and with few enough backends (max_connections
# 20, few workers) for that last tick never to fill (crate::core::share). Beside the flood, one
# session in another database and one in the flooding database each mint one id every 5 ms on
# shard 5: each finds its word in the lead's last tick, within its own share. None fails, and their
# calls take no longer than a control's: a third session, in the same run and under the same load,
# minting on shard 7, which nobody floods. Comparing with a control that shares the machine's load,
# not with a fixed figure, keeps the test independent of the machine's speed. The shard's statistics
# show that the flood held it at its lead and waited for the clock, so that the checks can fail
# (without the share, the two sessions wait with the flood: 343 of 400 calls over 1 ms, in a run
# with it off).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin . '/..';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use SnowflakeNode;

my $major = $ENV{SFID_SHARE} // 15;
# 6 sequence bits: 64 ids a tick, half a tick (32) beyond the backends' (about 24) light shares.
# A lead of 20 ms, of which the last tick is the reserve.
my $node = sfid_node("share$major", $major, join("\n",
	"snowflake_id.layout = '41/13/6'", "snowflake_id.max_lead = '20ms'", "snowflake_id.shards = '0-127'",
	"max_connections = 20", "max_worker_processes = 2", "autovacuum_max_workers = 1", "max_wal_senders = 0",
	"wal_level = minimal"));
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE flood; CREATE DATABASE modest;');
$node->safe_psql($_, 'CREATE EXTENSION snowflake_id') for ('flood', 'modest');
# probe(shard, calls): one id every 5 ms; "errors|median call ms|calls over 1 ms|calls".
my $probe = q{
CREATE FUNCTION probe(shard int, calls int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; took float8[] := '{}'; errs int := 0;
BEGIN
  FOR i IN 1 .. calls LOOP
    t0 := clock_timestamp();
    BEGIN
      PERFORM snowflake_next(shard);
    EXCEPTION WHEN OTHERS THEN errs := errs + 1;
    END;
    took := took || extract(epoch FROM clock_timestamp() - t0) * 1000;
    PERFORM pg_sleep(0.005);
  END LOOP;
  RETURN errs || '|' || (SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY t)::numeric, 3) FROM unnest(took) t)
    || '|' || (SELECT count(*) FROM unnest(took) t WHERE t >= 1) || '|' || calls;
END $$;};
$node->safe_psql($_, $probe) for ('flood', 'modest');

# Eight clients of the flooding database mint on shards 5 and 6 in turn as fast as they can, far
# past 64 a ms each, until both probes are done.
my $file = "$PostgreSQL::Test::Utils::tmp_check/flood.sql";
PostgreSQL::Test::Utils::append_to_file($file, "SELECT count(snowflake_next(5 + g % 2)) FROM generate_series(1, 2000) g;\n");
my ($out, $err) = ('', '');
my $flood = IPC::Run::start(
	[ install_path($major) . '/bin/pgbench', '-n', '-c', 8, '-j', 8, '-T', 600, '-f', $file,
	  '-h', $node->host, '-p', $node->port, 'flood' ],
	'>', \$out, '2>', \$err);
# The three probes run side by side, while the flood runs: the control on shard 7, nobody's flood.
my $own = $node->background_psql('flood');
$own->query_until(qr/started/, "\\echo started\nSELECT probe(5, 400) AS own;\n");
my $control = $node->background_psql('modest');
$control->query_until(qr/started/, "\\echo started\nSELECT probe(7, 400) AS control;\n");
my ($errors, $median, $slow, $calls) = split /\|/, $node->safe_psql('modest', 'SELECT probe(5, 400)');
my ($own_errors, $own_median, $own_slow) = $own->query_safe('SELECT 1') =~ /^(\d+)\|([0-9.]+)\|(\d+)\|/m;
my ($control_errors, $control_median, $control_slow) =
  $control->query_safe('SELECT 1') =~ /^(\d+)\|([0-9.]+)\|(\d+)\|/m;
$own->quit;
$control->quit;
my $flood_err = $err;
$flood->kill_kill;
diag("control on an unflooded shard: errors $control_errors, median $control_median ms, $control_slow over 1 ms; "
	  . "beside the flood, another database: errors $errors, median $median ms, $slow of $calls calls over 1 ms; "
	  . "the flooding database's own session: errors $own_errors, median $own_median ms, $own_slow over 1 ms");

# The flood held the shard at its lead, and its calls waited for the clock: otherwise nothing
# below could fail.
my ($waits, $ahead) = split /\|/, $node->safe_psql('modest', 'SELECT waits, max_ahead_ms FROM snowflake_id_stats WHERE shard = 5');
cmp_ok($waits, '>', $calls, "the flood's calls waited for the clock ($waits times)");
cmp_ok($ahead, '>=', 19, "the flood held shard 5 at its lead ($ahead ms ahead)");
cmp_ok($ahead, '<=', 20, 'and no id ran further ahead than the 20 ms lead');
is($control_errors, '0', 'the control never fails');
for my $p ([ 'another database', $errors, $median, $slow ], [ "the flooding database's own session", $own_errors, $own_median, $own_slow ])
{
	my ($who, $e, $med, $sl) = @$p;
	is($e, '0', "$who: its calls beside the flood never fail");
	cmp_ok($sl, '<=', $control_slow + $calls / 10,
		"$who: its calls do not wait for the flood ($sl of $calls over 1 ms, the control $control_slow)");
	cmp_ok($med, '<', $control_median + 0.5, "$who: its median call costs what the control's does");
}
is($flood_err, '', 'the flood ran without an error');

$node->stop;
done_testing();
