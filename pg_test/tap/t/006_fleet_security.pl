# The fleet check against a role that is not a superuser, and against a hostile peer (each major
# in $ENV{SFID_FLEET}, default 18).
# 1. A grantee of snowflake_fleet_check (a pg_monitor member) may not borrow the server's
#    credentials: a passfile the server can read, holding a superuser's password, is refused
#    before any connection (42501), as is a string with no password (2F003); with its own
#    password it reaches a peer that asks for it. snowflake_id.fleet_connections = off refuses
#    every connection, a superuser's too (55000).
# 2. A fake peer that answers the first query with endless 1 MiB rows, or with one row that
#    announces a gigabyte and streams it, is dropped: the checking backend's peak memory stays
#    within 8 MiB of what it was (0.2.0 held 400 MiB here before the timeout), and the check
#    reports the peer as not reached.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin . '/..';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IO::Socket::UNIX;
use POSIX ();
use Socket qw(SOCK_STREAM);
use SnowflakeNode;

# The node of the major under test, and what the grantee is given.
my ($node, $peer, $passfile, $tmp);
# What the grantee gets for a list of peers: the error's SQLSTATE, or the reachability rows.
sub check_as_monitor
{
	my ($conninfo) = @_;
	my ($rc, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT \"check\" || ':' || ok FROM snowflake_fleet_check(ARRAY[\$\$$conninfo\$\$]) WHERE peer <> '(this server)' ORDER BY 1",
		extra_params => [ '-U', 'regress_monitor' ]);
	return $err =~ /ERROR:\s+(\w{5}):/ ? "error $1" : $out;
}

# A hostile peer: a Unix socket that speaks just enough of the protocol to accept a connection,
# then answers the first query with FLOOD (rows of 1 MiB, or one row announced as 1 GiB).
my $sockdir = PostgreSQL::Test::Utils::tempdir_short;
sub fake_peer
{
	my ($port, $flood) = @_;
	my $path = "$sockdir/.s.PGSQL.$port";
	my $listen = IO::Socket::UNIX->new(Type => SOCK_STREAM, Local => $path, Listen => 1) or die "listen: $!";
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		$SIG{PIPE} = 'IGNORE';
		# POSIX::_exit, never exit: a forked copy of the test must not run its END blocks, which
		# would stop the nodes.
		my $c = $listen->accept or POSIX::_exit(0);
		my $msg = sub { my ($type, $body) = @_; return $type . pack('N', 4 + length $body) . $body; };
		sysread($c, my $startup, 65536);
		syswrite($c, $msg->('R', pack('N', 0)) . $msg->('S', "server_version\x0018.0\x00")
			. $msg->('K', pack('NN', 1, 2)) . $msg->('Z', 'I'));
		sysread($c, my $query, 65536);
		syswrite($c, $msg->('1', '') . $msg->('2', '')
			. $msg->('T', pack('n', 1) . "v\x00" . pack('NnNnNn', 0, 0, 25, -1, -1, 0)));
		my $mib = 'x' x (1 << 20);
		if ($flood eq 'rows')
		{
			my $row = $msg->('D', pack('nN', 1, length $mib) . $mib);
			for (1 .. 400) { defined syswrite($c, $row) or last; }
		}
		else
		{
			my $len = 1 << 30;
			syswrite($c, 'D' . pack('N', 4 + 2 + 4 + $len) . pack('nN', 1, $len));
			for (1 .. 400) { defined syswrite($c, $mib) or last; }
		}
		sleep 10;
		POSIX::_exit(0);
	}
	close $listen;
	return $pid;
}

my $port = 40000 + ($$ % 1000);

for my $major (split ' ', ($ENV{SFID_FLEET} // '18'))
{
	$node = sfid_node("fleet_security$major", $major, "snowflake_id.shards = '0-7'");
	# A superuser whose password the server's user keeps in a file, and that logs in with it.
	$node->append_conf('pg_hba.conf', '');
	my $hba = $node->data_dir . '/pg_hba.conf';
	my $rules = slurp_file($hba);
	open(my $fh, '>', $hba) or die;
	print $fh "local all regress_admin scram-sha-256\nlocal all regress_monitor_peer scram-sha-256\n$rules";
	close $fh;
	$node->start;
	$node->safe_psql('postgres', q{
		CREATE EXTENSION snowflake_id;
		SET password_encryption = 'scram-sha-256';
		CREATE ROLE regress_admin SUPERUSER LOGIN PASSWORD 'admin-secret';
		CREATE ROLE regress_monitor_peer LOGIN PASSWORD 'peer-secret';
		CREATE ROLE regress_monitor LOGIN IN ROLE pg_monitor;
		GRANT EXECUTE ON FUNCTION snowflake_fleet_check(text[], interval, interval) TO regress_monitor;
	});
	$tmp = PostgreSQL::Test::Utils::tempdir;
	$passfile = "$tmp/pgpass";
	append_to_file($passfile, "*:*:*:regress_admin:admin-secret\n");
	chmod 0600, $passfile;
	$peer = 'host=' . $node->host . ' port=' . $node->port . ' dbname=postgres';

	is(check_as_monitor("$peer user=regress_admin passfile=$passfile"), 'error 42501',
		"PostgreSQL $major: a grantee cannot borrow a password from a file the server reads (passfile)");
	is(check_as_monitor("$peer user=regress_admin password=x passfile=$passfile"), 'error 42501',
		"PostgreSQL $major: passfile is refused even beside a password");
	is(check_as_monitor("$peer user=regress_admin"), 'error 2F003', "PostgreSQL $major: a grantee must bring a password");
	for my $keyword ('service=x', "servicefile=$tmp/none", "sslkey=$tmp/none", "sslcert=$tmp/none",
		"sslrootcert=$tmp/none", "sslcrl=$tmp/none")
	{
		# (A libpq that does not know a keyword refuses the string itself: 22023.)
		like(check_as_monitor("$peer user=regress_admin password=x $keyword"), qr/^error (42501|22023)$/,
			"PostgreSQL $major: a grantee may not use $keyword");
	}
	like(check_as_monitor("$peer user=regress_monitor_peer password=peer-secret"), qr/reachable:t/,
		"PostgreSQL $major: with a password of its own, which the peer asks for, a grantee reaches the peer");
	like(check_as_monitor("$peer user=regress_monitor_peer password=wrong"), qr/reachable:f/,
		"PostgreSQL $major: a wrong password reaches nobody");
	# Trust authentication never asked for the password: refused after connecting, or by require_auth.
	like(check_as_monitor("$peer user=postgres password=x"), qr/reachable:f/,
		"PostgreSQL $major: a peer that does not ask for the password is not reached");
	is( $node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'snowflake_id fleet check'"),
		'0', "PostgreSQL $major: no connection is left open");

	# A superuser may use the server's files; the server's switch stops everyone.
	like($node->safe_psql('postgres', "SELECT string_agg(\"check\" || ':' || ok, ' ') FROM snowflake_fleet_check(ARRAY[\$\$$peer user=regress_admin passfile=$passfile\$\$]) WHERE peer <> '(this server)'"),
		qr/reachable:t/, "PostgreSQL $major: a superuser may connect with the server's passfile");
	$node->append_conf('postgresql.conf', 'snowflake_id.fleet_connections = off');
	$node->reload;
	my ($rc, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\nSELECT * FROM snowflake_fleet_check(ARRAY[\$\$$peer\$\$])");
	like($err, qr/ERROR:\s+55000: snowflake_fleet_check cannot connect/, "PostgreSQL $major: fleet_connections = off refuses a superuser too");
	$node->append_conf('postgresql.conf', 'snowflake_id.fleet_connections = on');
	$node->reload;

	for my $flood ('rows', 'announced')
	{
		$port++;
		my $pid = fake_peer($port, $flood);
		my $session = $node->background_psql('postgres');
		my $backend = $session->query_safe('SELECT pg_backend_pid()');
		my $peak = sub { my ($kb) = slurp_file("/proc/$backend/status") =~ /VmHWM:\s+(\d+) kB/; return $kb; };
		# libpq and the libraries it needs are loaded by the first check: load them before measuring.
		$session->query_safe("SELECT count(*) FROM snowflake_fleet_check(ARRAY['host=/nonexistent port=1'])");
		my $before = $peak->();
		my $rows = $session->query_safe(
			"SELECT string_agg(\"check\" || ':' || ok || ':' || detail, ' ') FROM snowflake_fleet_check(ARRAY['host=$sockdir port=$port'], timeout => '20 s') WHERE peer <> '(this server)'");
		diag("$flood: $rows");
		my $grew_mib = ($peak->() - $before) / 1024;
		ok($grew_mib < 8, "PostgreSQL $major: a peer flooding the answer ($flood) leaves the backend's peak memory within 8 MiB (it grew $grew_mib MiB)");
		like($rows, qr/reachable:f/, "PostgreSQL $major: the flooding peer ($flood) is reported as not reached");
		$session->quit;
		kill 'KILL', $pid;
		waitpid($pid, 0);
	}

	$node->stop;
}

done_testing();
