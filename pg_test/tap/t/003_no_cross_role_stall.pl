# No role's data or calls delay another role's ids (PostgreSQL $ENV{SFID_SCAN}, default 15), as
# the 0.2.0 review reproduced it: in one database a plain role stores ids 30 s ahead of the clock
# (within the 60 s a call may wait here), keeps another of its tables locked, and
# calls the record's trigger function in a loop; another role's single id in another database,
# and after a restart, must stay with the clock. (0.2.0's first-mint scan raised every generator
# of the server to the stored id, rescanned in every new session while the table was locked, and
# the direct calls made every backend re-check: one snowflake_next() waited 12.9 s.)
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin . '/..';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;
use SnowflakeNode;

my $major = $ENV{SFID_SCAN} // 15;
# A wait of a minute allowed: 0.2.0 followed stored ids that far, and the ids planted 30 s ahead
# leave any machine time to run the test before the clock reaches them.
my $node = sfid_node("no_stall$major", $major, "snowflake_id.max_rewind_wait = '60s'");
$node->start;
$node->safe_psql('postgres', q{
	CREATE ROLE regress_alice LOGIN;
	CREATE ROLE regress_bob LOGIN;
	CREATE DATABASE alice_db OWNER regress_alice;
	CREATE DATABASE bob_db OWNER regress_bob;
});
$node->safe_psql($_, 'CREATE EXTENSION snowflake_id') for ('alice_db', 'bob_db');
$node->safe_psql('bob_db', 'CREATE TABLE bob_ids (id bigint PRIMARY KEY DEFAULT snowflake_next(2), u uuid DEFAULT uuidv7_next())',
	extra_params => [ '-U', 'regress_bob' ]);

# Alice's plant: ids 30 s ahead, a table held locked, and a direct call of the trigger function.
sub plant
{
	return $node->safe_psql('alice_db', q{
		CREATE TABLE IF NOT EXISTS planted (id bigint PRIMARY KEY DEFAULT snowflake_next(1), u uuid DEFAULT uuidv7_next());
		CREATE TABLE IF NOT EXISTS held (id bigint PRIMARY KEY DEFAULT snowflake_next(1));
		INSERT INTO planted VALUES (snowflake_min_id(clock_timestamp() + interval '30 s'),
		                            uuidv7_min_id(clock_timestamp() + interval '30 s'))
		RETURNING snowflake_timestamp(id)}, extra_params => [ '-U', 'regress_alice' ]);
}
my $planted = plant();
my $holder = $node->background_psql('alice_db', extra_params => [ '-U', 'regress_alice' ]);
$holder->query_safe('BEGIN; LOCK TABLE held IN ACCESS EXCLUSIVE MODE');
my ($rc, $out, $err) = $node->psql('alice_db', 'SELECT snowflake_id_space_changed()', extra_params => [ '-U', 'regress_alice' ]);
like($err, qr/permission denied|can only be called as a trigger/, 'the trigger function cannot be called directly');

# Bob, in another database, twice: in a session started now, and after a restart.
sub bob_mints_with_the_clock
{
	my ($what) = @_;
	my $row = $node->safe_psql('bob_db', qq{
		SELECT clock_timestamp() AS before \\gset
		INSERT INTO bob_ids DEFAULT VALUES
		RETURNING snowflake_timestamp(id) < '$planted'::timestamptz,
		          uuid_extract_timestamp(u) < '$planted'::timestamptz,
		          round(extract(epoch FROM clock_timestamp() - :'before') * 1000)},
		extra_params => [ '-U', 'regress_bob' ]);
	my ($sf, $u7, $ms) = split /\|/, $row;
	diag("$what: bob's insert took $ms ms");
	is("$sf|$u7", 't|t', "$what: another role's ids, in another database, are not raised to a plain role's stored ids");
}
# Alice mints in her own database first, in a new session (0.2.0 scanned her tables then, and
# raised every generator of the server): her ids stay with the clock, and so do Bob's.
sub alice_mints_with_the_clock
{
	my ($what) = @_;
	is($node->safe_psql('alice_db', "SELECT snowflake_timestamp(snowflake_next(3)) < '$planted'::timestamptz",
			extra_params => [ '-U', 'regress_alice' ]),
		't', "$what: her own database mints with the clock, one of her tables locked by herself");
}
alice_mints_with_the_clock('a new session');
bob_mints_with_the_clock('a new session');
$holder->quit;

$node->restart;
$planted = plant();
$holder = $node->background_psql('alice_db', extra_params => [ '-U', 'regress_alice' ]);
$holder->query_safe('BEGIN; LOCK TABLE held IN ACCESS EXCLUSIVE MODE');
alice_mints_with_the_clock('the first id after a restart');
bob_mints_with_the_clock('the first id after a restart');
$holder->quit;

# A floor in Alice's database's record (a superuser's restore adds one; 10 s ahead here): only
# Alice's database waits for it. Bob's ids stay with the clock (0.2.0's successor raised every
# generator of the server to a record's floor, and made Bob wait too).
my $floor = $node->safe_psql('alice_db', q{
	INSERT INTO snowflake_id_private.snowflake_id_space (layout, epoch, minted_before)
	SELECT layout, epoch, clock_timestamp() + interval '10 s' FROM snowflake_layout() RETURNING minted_before});
# Alice's first id after the record changed waits for the floor, in the background.
my $alice = $node->background_psql('alice_db', extra_params => [ '-U', 'regress_alice' ]);
$alice->query_until(qr/started/, "\\echo started\nSELECT snowflake_timestamp(snowflake_next(3)) >= '$floor'::timestamptz AS after;\n");
is($node->safe_psql('bob_db', "SELECT snowflake_timestamp(snowflake_next(2)) < '$floor'::timestamptz",
		extra_params => [ '-U', 'regress_bob' ]),
	't', "a floor in another database's record does not move Bob's ids");
like($alice->query_safe('SELECT 1'), qr/1/, "Alice's session came back");
is($node->safe_psql('alice_db', "SELECT snowflake_timestamp(snowflake_next(3)) >= '$floor'::timestamptz",
		extra_params => [ '-U', 'regress_alice' ]),
	't', "Alice's database mints after its floor");
$alice->quit;

# The record's lock queue (reviews of 0.3.0). A role that can name a table can lock it: a PREPARE
# locks before privileges are checked, and CREATE RULE asks for ACCESS EXCLUSIVE before it checks
# ownership; held and queued, they would hold up every new session's first id. The record lives in
# a schema PUBLIC may not use, so a plain role cannot name it: its PREPARE and CREATE RULE fail
# before any lock.
($rc, $out, $err) = $node->psql('bob_db', 'SELECT count(*) FROM snowflake_id_private.snowflake_id_space', extra_params => [ '-U', 'regress_alice' ]);
like($err, qr/permission denied for schema/, 'a plain role cannot name the record');
($rc, $out, $err) = $node->psql('bob_db', 'BEGIN; PREPARE p AS SELECT FROM snowflake_id_private.snowflake_id_space', extra_params => [ '-U', 'regress_alice' ]);
like($err, qr/permission denied for schema/, 'nor lock it with a PREPARE');
$node->safe_psql('postgres', "ALTER SYSTEM SET snowflake_id.max_rewind_wait = '2s'");
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
$node->safe_psql('postgres', 'CREATE ROLE regress_carol LOGIN');
my ($holder_q, $rule_q);
# $who holds the record's lock, and queues a CREATE RULE behind it as far as it can.
sub queue_behind_the_record
{
	my ($who) = @_;
	$holder_q = $node->background_psql('bob_db', extra_params => [ '-U', $who ], on_error_stop => 0);
	$holder_q->query_safe('BEGIN');
	$holder_q->query('SELECT FROM snowflake_id_private.snowflake_id_space LIMIT 0');
	$rule_q = $node->background_psql('bob_db', extra_params => [ '-U', $who ], on_error_stop => 0);
	$rule_q->query_until(qr/queued/, "\\echo queued\nCREATE RULE r AS ON INSERT TO snowflake_id_private.snowflake_id_space DO INSTEAD NOTHING;\n\\echo done\n");
}
sub rule_waits
{
	return $node->poll_query_until('bob_db', q{SELECT count(*) > 0 FROM pg_locks WHERE NOT granted AND mode = 'AccessExclusiveLock'});
}
sub release_the_record
{
	$holder_q->query('ROLLBACK');
	$holder_q->quit;
	$rule_q->quit;
}
sub first_id
{
	my ($who) = @_;
	my $t0 = time;
	my ($rc, $out, $err) = $node->psql('bob_db', 'SELECT snowflake_next(2) > 0',
		extra_params => [ '-U', $who, '-v', 'VERBOSITY=verbose' ], timeout => 60);
	return ($out, $err, time - $t0);
}
# A record change (a superuser's) makes every remembered check stale: the next first id must
# read the record.
$node->safe_psql('bob_db', 'UPDATE snowflake_id_private.snowflake_id_space SET recorded_at = recorded_at');
queue_behind_the_record('regress_alice');
like($rule_q->query('SELECT 1'), qr/1/, "a plain role's CREATE RULE on the record fails at once, without queueing");
my ($got, $why, $took) = first_id('regress_carol');
is($got, 't', "a plain role holding what it can and queueing what it can: another role's first id mints ($took s) $why");
release_the_record();

# The same queue on a catalog any role may name, which the extension's first id read in an earlier
# build of 0.3.0 (it found its record through pg_extension and pg_depend) without a bound.
# It now finds the record through the system caches, as any statement finds a table.
$node->safe_psql('bob_db', 'UPDATE snowflake_id_private.snowflake_id_space SET recorded_at = recorded_at');
$holder_q = $node->background_psql('bob_db', extra_params => [ '-U', 'regress_alice' ], on_error_stop => 0);
$holder_q->query_safe('BEGIN');
$holder_q->query_safe('SELECT FROM pg_catalog.pg_extension LIMIT 0');
$rule_q = $node->background_psql('bob_db', extra_params => [ '-U', 'regress_alice' ], on_error_stop => 0);
$rule_q->query_until(qr/queued/, "\\echo queued\nCREATE RULE r AS ON INSERT TO pg_catalog.pg_extension DO INSTEAD NOTHING;\n");
rule_waits() or die 'the CREATE RULE on pg_extension never queued';
($got, $why, $took) = first_id('regress_carol');
is($got, 't', "a plain role's lock queue on pg_extension: another role's first id mints ($took s) $why");
release_the_record();

# The database's owner (and superusers, and pg_read_all_data) can name the record, and so hold its
# queue, in that database only. A new session then uses the last good check another backend left
# in shared memory; without one (a record changed since), it fails after max_rewind_wait with
# 55P03 instead of waiting for as long as the locks last.
$node->safe_psql('bob_db', 'UPDATE snowflake_id_private.snowflake_id_space SET recorded_at = recorded_at');
queue_behind_the_record('regress_bob');
rule_waits() or die 'the CREATE RULE never queued';
($got, $why, $took) = first_id('regress_carol');
like($why, qr/55P03/, "the owner's lock queue, no good check since the record changed: a new session's first id fails with 55P03");
cmp_ok($took, '<', 30, "and does not wait for the locks ($took s)");
release_the_record();
is($node->safe_psql('bob_db', 'SELECT snowflake_next(2) > 0', extra_params => [ '-U', 'regress_carol' ]), 't',
	'the lock released, the next session mints (and leaves its check)');
queue_behind_the_record('regress_bob');
rule_waits() or die 'the CREATE RULE never queued';
($got, $why, $took) = first_id('regress_carol');
is($got, 't', "with a good check left since the record last changed, a new session mints at once ($took s): $why");
release_the_record();

# The record by OID (issue 31). A role that cannot name the record still locks it ROW EXCLUSIVE
# through nextval() of its OID, to the end of its transaction: nothing an id call takes conflicts
# with that. After a record change (a floor in the past: every backend reads the record again), a
# new session's first id reads the record and writes its floor in place past its id, at once.
$node->safe_psql('bob_db', q{UPDATE snowflake_id_private.snowflake_id_space SET minted_before = '2025-01-02+00'});
my $record = $node->safe_psql('bob_db', q{SELECT 'snowflake_id_private.snowflake_id_space'::regclass::oid});
my $pinner = $node->background_psql('bob_db', extra_params => [ '-U', 'regress_alice' ], on_error_stop => 0);
$pinner->query_safe('BEGIN');
$pinner->query_safe('SAVEPOINT s');
$pinner->query("SELECT nextval($record)");
$pinner->{stderr} = '';
$pinner->query_safe('ROLLBACK TO s');
is($node->safe_psql('bob_db', "SELECT count(*) FROM pg_locks WHERE relation = $record AND mode = 'RowExclusiveLock' AND granted"),
	'1', 'a plain role holds ROW EXCLUSIVE on the record after a rolled-back nextval() of its OID');
($got, $why, $took) = first_id('regress_carol');
is("$got|" . ($why =~ /WARNING/ ? 'warned' : 'quiet'), 't|quiet', "meanwhile another role's first id mints, with no warning ($took s)");
is($node->safe_psql('bob_db', q{SELECT bool_and(minted_before > '2025-01-02+00') FROM snowflake_id_private.snowflake_id_space}),
	't', 'and its database\'s floor was written in place past the id, beside that lock');
$pinner->quit;

# A conversion never waits for a plain role's lock while it holds a table's ACCESS EXCLUSIVE lock
# (issue 31). nextval(oid) locks any relation ROW EXCLUSIVE before it checks anything, and keeps
# that lock to the end of the transaction even when it fails in a savepoint that is rolled back:
# a role with no privilege at all holds it on an identity's sequence, a partition, or a serial's
# sequence the conversion drops. Waiting for it with the table locked stalled every reader and
# writer of the table for as long as that role liked; the conversion must fail with 55P03 after
# its short bound instead, and the table's readers go on.
$node->safe_psql('postgres', 'CREATE DATABASE conv_db');
$node->safe_psql('postgres', 'CREATE ROLE regress_dave LOGIN');
$node->safe_psql('postgres', "ALTER SYSTEM SET snowflake_id.shards = '0-7'");
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
$node->safe_psql('conv_db', q{
	CREATE EXTENSION snowflake_id;
	CREATE TABLE conv_identity (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY);
	CREATE TABLE conv_parted (id bigserial, r int) PARTITION BY LIST (r);
	CREATE TABLE conv_parted_1 PARTITION OF conv_parted FOR VALUES IN (1);
	CREATE TABLE conv_serial (id bigserial PRIMARY KEY);
	INSERT INTO conv_identity DEFAULT VALUES;
	INSERT INTO conv_parted (r) VALUES (1);
	INSERT INTO conv_serial DEFAULT VALUES;
});
# Polls (every 0.1 s, for at most $secs) until $sql is true; returns how long it took, or undef.
sub within
{
	my ($secs, $sql) = @_;
	my $t0 = Time::HiRes::time();
	while (Time::HiRes::time() - $t0 < $secs)
	{
		return Time::HiRes::time() - $t0 if $node->safe_psql('conv_db', $sql) eq 't';
		Time::HiRes::sleep(0.1);
	}
	return undef;
}
for my $case (
	[ 'an identity sequence', 'conv_identity_id_seq', 'conv_identity', q{snowflake_convert('conv_identity', 'id')} ],
	[ 'a partition', 'conv_parted_1', 'conv_parted', q{snowflake_convert('conv_parted', 'id')} ],
	[ 'a serial sequence it drops', 'conv_serial_id_seq', 'conv_serial',
		q{snowflake_convert('conv_serial', 'id', drop_sequence => true)} ])
{
	my ($what, $held, $table, $convert) = @$case;
	my $oid = $node->safe_psql('conv_db', "SELECT '$held'::regclass::oid");
	my $holder = $node->background_psql('conv_db', extra_params => [ '-U', 'regress_dave' ], on_error_stop => 0);
	$holder->query_safe('BEGIN');
	$holder->query_safe('SAVEPOINT s');
	$holder->query("SELECT nextval($oid)");
	$holder->{stderr} = '';
	$holder->query_safe('ROLLBACK TO s');
	is($node->safe_psql('conv_db', "SELECT count(*) FROM pg_locks WHERE relation = $oid AND mode = 'RowExclusiveLock' AND granted"),
		'1', "$what: a role with no privilege holds ROW EXCLUSIVE on it after a rolled-back nextval()");
	# A superuser converts the table, in the background.
	my $conv = $node->background_psql('conv_db', on_error_stop => 0, timeout => 120);
	my $pid = $conv->query_safe('SELECT pg_backend_pid()');
	my $started = Time::HiRes::time();
	$conv->query_until(qr/started/, "\\echo started\nSELECT count(*) FROM $convert;\n");
	# Once it holds the table's lock (or is done), a reader of the table must not wait for the role.
	defined within(30, "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $pid AND state = 'active')
	                      OR EXISTS (SELECT FROM pg_locks WHERE pid = $pid AND relation = '$table'::regclass
	                                 AND mode = 'AccessExclusiveLock' AND granted)")
	  or die "$what: the conversion neither locked $table nor ended";
	my $t0 = Time::HiRes::time();
	my ($rc, $out, $err) = $node->psql('conv_db', "SELECT count(*) FROM $table", timeout => 30, timed_out => \my $timed_out);
	my $read = sprintf('%.1f', Time::HiRes::time() - $t0);
	ok(!$timed_out && $rc == 0, "$what: a reader of $table meanwhile is not held up by the role's lock ($read s)");
	my $ended = within(30, "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $pid AND state = 'active')");
	ok(defined $ended, "$what: the conversion ends while the role still holds its lock ("
		. (defined $ended ? sprintf('%.1f', Time::HiRes::time() - $started) : 'not in 30') . ' s)');
	$holder->quit;
	$conv->{stderr} = '';
	my ($state) = $conv->query('\echo :LAST_ERROR_SQLSTATE');
	is($state, '55P03', "$what: the conversion fails with 55P03 (lock_not_available)");
	like($conv->{stderr}, qr/$held/, "$what: its message names $held");
	$conv->quit;
	is($node->safe_psql('conv_db', "SELECT pg_get_expr(adbin, adrelid) LIKE '%snowflake_next()' FROM pg_attrdef
	                                 WHERE adrelid = '$table'::regclass"),
		$what eq 'an identity sequence' ? '' : 'f', "$what: nothing was converted");
}

$node->stop;
done_testing();
