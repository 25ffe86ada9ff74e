# One database's load does not spend another's capacity (PostgreSQL $ENV{SFID_SHARE}, default 15).
# A server whose layout holds 4 ids a millisecond a shard, so that any machine floods shard 5 from
# one database. Beside the flood, one session in another database and one in the flooding database
# itself each mint one id every 5 ms. The other database's calls find their word in the last tick
# of the lead, kept for databases that mint little (crate::core::share): none fails, and its calls
# take no longer than the machine's (its median is compared with the same session's calls on an
# idle shard). The flooding database's own session shares its database's quota, and waits for the
# clock like the flood: it shows that the flood fills the lead, so that the first check can fail
# (without the share, the other database waits as this one does).
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
# 2 sequence bits: 4 ids a tick. A lead of 20 ms, of which the last tick is the reserve.
my $node = sfid_node("share$major", $major, join("\n",
	"snowflake_id.layout = '41/13/2'", "snowflake_id.max_lead = '20ms'", "snowflake_id.shards = '0-127'",
	"max_connections = 30"));
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

# The same session, alone on an idle shard first: what a call costs on this machine.
my ($idle_errors, $idle_median) = split /\|/, $node->safe_psql('modest', 'SELECT probe(6, 200)');

# Four clients of the flooding database mint on shard 5 as fast as they can, far past 4 a ms, until
# both probes are done.
my $file = "$PostgreSQL::Test::Utils::tmp_check/flood.sql";
PostgreSQL::Test::Utils::append_to_file($file, "SELECT count(snowflake_next(5)) FROM generate_series(1, 2000);\n");
my ($out, $err) = ('', '');
my $flood = IPC::Run::start(
	[ install_path($major) . '/bin/pgbench', '-n', '-c', 4, '-j', 4, '-T', 600, '-f', $file,
	  '-h', $node->host, '-p', $node->port, 'flood' ],
	'>', \$out, '2>', \$err);
# The two probes run side by side, while the flood runs.
my $own = $node->background_psql('flood');
$own->query_until(qr/started/, "\\echo started\nSELECT probe(5, 400) AS own;\n");
my ($errors, $median, $slow, $calls) = split /\|/, $node->safe_psql('modest', 'SELECT probe(5, 400)');
my ($own_errors, $own_median, $own_slow) = $own->query_safe('SELECT 1') =~ /^(\d+)\|([0-9.]+)\|(\d+)\|/m;
$own->quit;
my $flood_err = $err;
$flood->kill_kill;
diag("idle shard: median $idle_median ms; beside the flood, another database: errors $errors, median $median ms, "
	  . "$slow of $calls calls over 1 ms; the flooding database's own session: median $own_median ms, $own_slow over 1 ms");

# The flood filled the lead: the flooding database's own session waited for the clock on most
# calls (a tick is 1 ms). Otherwise nothing below could fail.
cmp_ok($own_slow, '>', $calls / 2, 'the flood holds shard 5 at its lead: its own database waits on most calls');
is($errors, '0', "another database's calls beside the flood never fail");
cmp_ok($slow, '<', $calls / 10, "another database's calls do not wait for the flood ($slow of $calls over 1 ms)");
cmp_ok($median, '<', $idle_median + 0.5, "another database's median call costs what an idle shard's does");
# The shard ran no further ahead than its lead, whoever minted.
cmp_ok($node->safe_psql('modest', 'SELECT max_ahead_ms FROM snowflake_id_stats WHERE shard = 5'), '<=', 20,
	'no id of shard 5 ran further ahead than the 20 ms lead');
is($flood_err, '', 'the flood ran without an error');

$node->stop;
done_testing();
