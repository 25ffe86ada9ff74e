#!/usr/bin/python3
"""Tests of chaos/proxy.py: plain sockets against an echo server, no PostgreSQL (a few seconds);
and, when SFID_PROXY_PG_BIN names a PostgreSQL bin directory, a primary and a streaming standby
whose replication link crosses the proxy (run as the postgres user: PostgreSQL refuses root).

    python3 -m unittest discover -s chaos -p 'test_*.py'      (scripts/test.sh runs it)
    SFID_PROXY_PG_BIN=/path/to/pg15/bin python3 chaos/test_proxy.py -v PostgresThroughProxy

Timings are asserted from below only (a hold of 1 s delivers no sooner than 1 s later), never
from above: a slow machine waits longer, and the tests wait for what they expect with generous
deadlines.
"""

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxy  # noqa: E402

PATIENCE_S = 30.0  # how long a test waits for what must happen (a busy machine is slow)


def wait_until(predicate, what, timeout=PATIENCE_S):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def recv_exactly(sock, n, timeout=PATIENCE_S):
    sock.settimeout(timeout)
    out = bytearray()
    while len(out) < n:
        data = sock.recv(n - len(out))
        if not data:
            raise AssertionError(f"EOF after {len(out)} of {n} bytes")
        out += data
    return bytes(out)


def recv_all(sock, timeout=PATIENCE_S):
    sock.settimeout(timeout)
    out = bytearray()
    while True:
        data = sock.recv(65536)
        if not data:
            return bytes(out)
        out += data


def ended(sock, timeout=PATIENCE_S):
    """How the peer ended the connection: "reset" or "eof" (a timeout fails the test)."""
    sock.settimeout(timeout)
    try:
        while True:
            if not sock.recv(65536):
                return "eof"
    except ConnectionResetError:
        return "reset"


class EchoServer:
    """Echoes every byte; on EOF from the client, ends its own side (a half-close answered)."""

    def __init__(self, path=None):
        if path:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind(path)
            self.address = path
        else:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.bind(("127.0.0.1", 0))
            self.address = self.sock.getsockname()[1]
        self.sock.listen(128)
        self.sock.settimeout(0.05)
        self.lock = threading.Lock()
        self.received = 0
        self.accepted = 0
        self.resets = 0
        self.stop = threading.Event()
        self.threads = []
        self.acceptor = threading.Thread(target=self.accept_loop, daemon=True)
        self.acceptor.start()

    def accept_loop(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.accepted += 1
            t = threading.Thread(target=self.serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def serve(self, conn):
        conn.settimeout(0.05)
        try:
            while not self.stop.is_set():
                try:
                    data = conn.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    conn.shutdown(socket.SHUT_WR)
                    return
                with self.lock:
                    self.received += len(data)
                conn.settimeout(PATIENCE_S)
                conn.sendall(data)
                conn.settimeout(0.05)
        except OSError:  # reset (or not connected any more, once reset)
            with self.lock:
                self.resets += 1
        finally:
            conn.close()

    def close(self):
        self.stop.set()
        self.acceptor.join()
        self.sock.close()
        for t in self.threads:
            t.join()


def proxy_threads():
    return [t for t in threading.enumerate() if t.name.startswith("proxy-")]


class ProxyTest(unittest.TestCase):
    def setUp(self):
        self.echo = EchoServer()
        self.proxy = proxy.Proxy(self.echo.address, name="test")
        self.socks = []

    def tearDown(self):
        for s in self.socks:
            s.close()
        self.proxy.close()
        self.echo.close()

    def connect(self, port=None):
        s = socket.create_connection(("127.0.0.1", port or self.proxy.port), timeout=PATIENCE_S)
        self.socks.append(s)
        return s

    def connect_and_end(self):
        """How a new connection ends, the proxy's reset possibly coming before connect() returns."""
        try:
            return ended(self.connect())
        except ConnectionResetError:
            return "reset"

    def test_forwards_both_ways(self):
        s = self.connect()
        msg = os.urandom(200_000)
        s.sendall(msg)
        self.assertEqual(recv_exactly(s, len(msg)), msg)
        st = self.proxy.stats()
        self.assertEqual((st["bytes_up"], st["bytes_down"]), (len(msg), len(msg)))
        self.assertEqual((st["accepted"], st["open"]), (1, 1))
        self.assertEqual(self.proxy.port, s.getpeername()[1])

    def test_half_close_passes_on(self):
        """A client that ends its side still reads all of the answer, then the target's end."""
        s = self.connect()
        msg = b"half-closed " * 1000
        s.sendall(msg)
        s.shutdown(socket.SHUT_WR)
        self.assertEqual(recv_all(s), msg)
        wait_until(lambda: self.proxy.stats()["closed"] == 1, "the connection to close")
        self.assertEqual(self.proxy.stats()["open"], 0)

    def test_partition_holds_bytes_and_heal_delivers_them_in_order(self):
        s = self.connect()
        s.sendall(b"a")
        self.assertEqual(recv_exactly(s, 1), b"a")
        self.proxy.partition()
        before = self.proxy.stats()
        sent = b"".join(f"message {i};".encode() for i in range(5000))
        for i in range(0, len(sent), 997):
            s.sendall(sent[i:i + 997])
        # The proxy has read every byte (so a working partition is all that stops them) ...
        wait_until(lambda: self.proxy.stats()["held_up"] == len(sent), "the proxy to read the bytes")
        time.sleep(0.2)
        # ... and none reached the target, nor came back.
        st = self.proxy.stats()
        self.assertEqual(st["bytes_up"], before["bytes_up"])
        self.assertEqual(self.echo.received, 1)
        self.assertTrue(st["partitioned"])
        # The connection is open on both sides throughout.
        self.assertEqual((st["open"], st["aborted"], st["reset"]), (1, 0, 0))
        self.proxy.heal()
        self.assertEqual(recv_exactly(s, len(sent)), sent)
        self.assertEqual(self.proxy.stats()["bytes_up"], 1 + len(sent))

    def test_partition_holds_the_target_side_too(self):
        """Bytes the target sends in a partition wait as well (an echo held in the DOWN
        direction: the client's request crossed before the partition)."""
        s = self.connect()
        s.sendall(b"x")
        self.assertEqual(recv_exactly(s, 1), b"x")
        self.proxy.hold("down")
        s.sendall(b"y" * 5000)
        wait_until(lambda: self.proxy.stats()["held_down"] == 5000, "the echo to reach the proxy")
        self.proxy.partition()
        self.proxy.release("down")  # the partition alone holds them now
        time.sleep(0.2)
        self.assertEqual(self.proxy.stats()["held_down"], 5000)
        self.proxy.heal()
        self.assertEqual(recv_exactly(s, 5000), b"y" * 5000)

    def test_new_connections_hang_in_a_partition_until_heal(self):
        self.proxy.partition()
        s = self.connect()
        s.sendall(b"hello")
        wait_until(lambda: self.proxy.stats()["held_up"] == 5, "the proxy to read the bytes")
        st = self.proxy.stats()
        self.assertEqual((st["hanging"], self.echo.accepted), (1, 0))
        self.proxy.heal()
        self.assertEqual(recv_exactly(s, 5), b"hello")
        self.assertEqual(self.echo.accepted, 1)

    def test_an_end_in_a_partition_waits_for_the_heal(self):
        s = self.connect()
        s.sendall(b"1")
        self.assertEqual(recv_exactly(s, 1), b"1")
        self.proxy.partition()
        s.sendall(b"2")
        s.shutdown(socket.SHUT_WR)
        wait_until(lambda: self.proxy.stats()["held_up"] == 1, "the proxy to read the byte")
        time.sleep(0.2)
        self.assertEqual(self.proxy.stats()["closed"], 0)
        self.proxy.heal()
        self.assertEqual(recv_all(s), b"2")

    def test_partition_reset_drops_connections_and_refuses_new_ones(self):
        s = self.connect()
        s.sendall(b"1")
        self.assertEqual(recv_exactly(s, 1), b"1")
        self.proxy.partition(reset=True, refuse=True)
        self.assertEqual(ended(s), "reset")
        wait_until(lambda: self.echo.resets == 1, "the target to see the reset")
        self.assertIn(self.connect_and_end(), ("reset", "eof"))
        st = self.proxy.stats()
        self.assertEqual((st["reset"], st["refused"], st["open"]), (1, 1, 0))
        self.proxy.heal()
        u = self.connect()
        u.sendall(b"back")
        self.assertEqual(recv_exactly(u, 4), b"back")

    def test_reset_drops_connections_and_lets_new_ones_through(self):
        s = self.connect()
        s.sendall(b"1")
        self.assertEqual(recv_exactly(s, 1), b"1")
        self.proxy.reset()
        self.assertEqual(ended(s), "reset")
        t = self.connect()
        t.sendall(b"2")
        self.assertEqual(recv_exactly(t, 1), b"2")

    def test_hold_delays_one_direction_by_the_time_asked(self):
        s = self.connect()
        s.sendall(b"0")
        self.assertEqual(recv_exactly(s, 1), b"0")
        held = time.monotonic()
        self.proxy.hold("down", 1.0)
        s.sendall(b"ping")
        # The other direction flows: the target has the bytes while their echo waits.
        wait_until(lambda: self.echo.received == 5, "the target to get the bytes")
        self.assertEqual(recv_exactly(s, 4), b"ping")
        self.assertGreaterEqual(time.monotonic() - held, 1.0)
        self.assertFalse(self.proxy.stats()["hold_down"])
        # Released: the next round trip has nothing to wait for.
        s.sendall(b"pong")
        self.assertEqual(recv_exactly(s, 4), b"pong")

    def test_lag_delays_every_byte(self):
        s = self.connect()
        self.proxy.lag("down", 0.3)
        for i in range(3):
            sent = time.monotonic()
            s.sendall(b"%d" % i)
            self.assertEqual(recv_exactly(s, 1), b"%d" % i)
            self.assertGreaterEqual(time.monotonic() - sent, 0.3)
        self.proxy.lag("down", 0)
        s.sendall(b"ok")
        self.assertEqual(recv_exactly(s, 2), b"ok")

    def test_a_slow_reader_gets_every_byte_in_order(self):
        """More than the proxy and the kernel buffer: the proxy stops reading when its buffer is
        full and sends in parts to a reader that does not keep up, losing and reordering nothing."""
        s = self.connect()
        msg = random.Random(7).randbytes(3 * proxy.BUFFER_CAP)
        sender = threading.Thread(target=lambda: (s.sendall(msg), s.shutdown(socket.SHUT_WR)))
        sender.start()
        wait_until(lambda: self.proxy.stats()["held_down"] >= proxy.BUFFER_CAP // 2, "the proxy's buffer to fill")
        time.sleep(0.5)  # the sender would go on filling it, but for the cap
        self.assertLessEqual(self.proxy.stats()["held_down"], proxy.BUFFER_CAP + proxy.CHUNK)
        got = bytearray()
        s.settimeout(PATIENCE_S)
        while True:
            data = s.recv(4096)
            if not data:
                break
            got += data
        sender.join()
        self.assertEqual(len(got), len(msg))
        self.assertTrue(got == msg)

    def test_many_connections_through_partitions(self):
        """Forty clients, each with its own bytes, while another thread partitions and heals the
        link over and over: every client gets back exactly what it sent."""
        n, size = 40, 100_000
        errors = []
        results = {}

        def client(i):
            try:
                s = socket.create_connection(("127.0.0.1", self.proxy.port), timeout=PATIENCE_S)
                try:
                    msg = random.Random(i).randbytes(size)
                    for j in range(0, size, 10_000):
                        s.sendall(msg[j:j + 10_000])
                    s.shutdown(socket.SHUT_WR)
                    results[i] = recv_all(s) == msg
                finally:
                    s.close()
            except Exception as e:
                errors.append(repr(e))

        stop = threading.Event()

        def flapper():
            while not stop.is_set():
                self.proxy.partition()
                time.sleep(0.01)
                self.proxy.heal()
                time.sleep(0.01)

        f = threading.Thread(target=flapper)
        f.start()
        clients = [threading.Thread(target=client, args=(i,)) for i in range(n)]
        for t in clients:
            t.start()
        for t in clients:
            t.join()
        stop.set()
        f.join()
        self.assertEqual(errors, [])
        self.assertEqual(results, {i: True for i in range(n)})
        wait_until(lambda: self.proxy.stats()["closed"] == n, "every connection to close")
        st = self.proxy.stats()
        self.assertEqual((st["bytes_up"], st["bytes_down"], st["aborted"]), (n * size, n * size, 0))

    def test_a_target_that_refuses_resets_the_client(self):
        dead = socket.socket()
        dead.bind(("127.0.0.1", 0))
        port = dead.getsockname()[1]
        dead.close()  # nothing listens there now
        self.proxy.set_target(port)
        self.assertEqual(self.connect_and_end(), "reset")
        self.assertEqual(self.proxy.stats()["dial_failed"], 1)

    def test_set_target_moves_new_connections(self):
        other = EchoServer()
        try:
            s = self.connect()
            s.sendall(b"1")
            recv_exactly(s, 1)
            self.proxy.set_target(other.address)
            t = self.connect()
            t.sendall(b"22")
            self.assertEqual(recv_exactly(t, 2), b"22")
            s.sendall(b"3")
            self.assertEqual(recv_exactly(s, 1), b"3")
            self.assertEqual((self.echo.received, other.received), (2, 2))
        finally:
            other.close()

    def test_unix_socket_target(self):
        d = tempfile.mkdtemp()
        other = EchoServer(path=os.path.join(d, ".s.PGSQL.5432"))
        try:
            with proxy.Proxy(other.address, name="unix") as p:
                s = self.connect(p.port)
                s.sendall(b"over a unix socket")
                self.assertEqual(recv_exactly(s, 18), b"over a unix socket")
        finally:
            other.close()
            shutil.rmtree(d)

    def test_only_loopback(self):
        with self.assertRaises(ValueError):
            proxy.Proxy(("10.0.0.1", 5432))
        self.assertEqual(self.proxy._listener.getsockname()[0], "127.0.0.1")

    def test_close_resets_connections_and_leaves_no_thread(self):
        p = proxy.Proxy(self.echo.address, name="closing")
        s = self.connect(p.port)
        s.sendall(b"1")
        recv_exactly(s, 1)
        p.partition()
        t = self.connect(p.port)  # one hanging too
        wait_until(lambda: p.stats()["hanging"] == 1, "the second connection to hang")
        self.assertIn("proxy-closing", [t.name for t in proxy_threads()])
        # close() waits for the proxy's thread, even when it is busy.
        busy = threading.Event()
        t_busy = threading.Thread(target=p._call, args=(lambda: (busy.set(), time.sleep(0.3)),))
        t_busy.start()
        busy.wait()
        p.close()
        t_busy.join()
        self.assertNotIn("proxy-closing", [t.name for t in proxy_threads()])
        self.assertEqual(ended(s), "reset")
        self.assertIn(ended(t), ("reset", "eof"))
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", p.port), timeout=PATIENCE_S).close()
        with self.assertRaises(proxy.ProxyClosed):
            p.heal()
        self.assertEqual(p.stats()["accepted"], 2)  # the last counts stay readable
        p.close()  # again: nothing to do

    def test_calls_from_many_threads(self):
        """Calls race with each other and with the traffic: each returns, none is lost."""
        s = self.connect()
        calls = [self.proxy.partition, self.proxy.heal, lambda: self.proxy.hold("up", 0.01),
                 lambda: self.proxy.lag("both", 0), self.proxy.stats]
        threads = [threading.Thread(target=lambda: [random.choice(calls)() for _ in range(50)]) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.proxy.heal()
        s.sendall(b"still here")
        self.assertEqual(recv_exactly(s, 10), b"still here")


class SubprocessTest(unittest.TestCase):
    def test_links_in_a_subprocess(self):
        echo = EchoServer()
        p = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "proxy.py"),
                              f"e={echo.address}", f"f={echo.address}"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            ports = json.loads(p.stdout.readline())

            def command(line):
                p.stdin.write(line + "\n")
                p.stdin.flush()
                return json.loads(p.stdout.readline())

            s = socket.create_connection(("127.0.0.1", ports["e"]), timeout=PATIENCE_S)
            s.sendall(b"1")
            self.assertEqual(recv_exactly(s, 1), b"1")
            self.assertEqual(command("e partition"), {"ok": True})
            s.sendall(b"22")
            wait_until(lambda: command("e stats")["stats"]["e"]["held_up"] == 2, "the proxy to read the bytes")
            self.assertEqual(echo.received, 1)
            self.assertEqual(command("* heal"), {"ok": True})
            self.assertEqual(recv_exactly(s, 2), b"22")
            self.assertFalse(command("e explode")["ok"])
            self.assertEqual(sorted(command("* stats")["stats"]), ["e", "f"])
            s.close()
            p.stdin.close()
            self.assertEqual(p.wait(timeout=PATIENCE_S), 0)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            echo.close()


@unittest.skipUnless(os.environ.get("SFID_PROXY_PG_BIN"), "SFID_PROXY_PG_BIN (a PostgreSQL bin directory) not set")
class PostgresThroughProxy(unittest.TestCase):
    """A primary and a streaming standby whose replication link crosses the proxy; clients reach
    the primary through a second one. Runs as the postgres user."""

    @classmethod
    def setUpClass(cls):
        cls.bin = os.environ["SFID_PROXY_PG_BIN"]
        cls.work = tempfile.mkdtemp(prefix="sfid-proxy-", dir=os.environ.get("SFID_PROXY_WORK"))
        port = int(os.environ.get("SFID_PROXY_PG_PORT", "5790"))
        cls.primary = cls.make_dir("primary", port)
        subprocess.run([cls.tool("initdb"), "-D", cls.primary["data"], "-U", "postgres", "--auth=trust", "-E",
                        "UTF8", "--locale=C", "--no-sync"], check=True, stdout=subprocess.DEVNULL)
        cls.conf(cls.primary, "wal_level = replica\nmax_wal_senders = 5\nwal_keep_size = '64MB'\n"
                              "synchronous_commit = local\n")
        cls.start(cls.primary)
        socket_path = os.path.join(cls.primary["dir"], f".s.PGSQL.{port}")
        cls.repl = proxy.Proxy(socket_path, name="replication")
        cls.clients = proxy.Proxy(socket_path, name="clients")
        cls.standby = cls.make_dir("standby", port + 1)
        subprocess.run([cls.tool("pg_basebackup"), "-h", cls.primary["dir"], "-p", str(port), "-U", "postgres",
                        "-D", cls.standby["data"], "-R", "-X", "stream", "-c", "fast", "--no-sync"],
                       check=True, stdout=subprocess.DEVNULL)
        # The replication link through the proxy: postgresql.auto.conf (where -R wrote the
        # direct one) is read last, and its last line wins.
        with open(os.path.join(cls.standby["data"], "postgresql.auto.conf"), "a") as f:
            f.write(f"primary_conninfo = 'host=127.0.0.1 port={cls.repl.port} user=postgres "
                    "application_name=standby'\n")
        cls.conf(cls.standby, "hot_standby = on\nwal_retrieve_retry_interval = '200ms'\n")
        cls.start(cls.standby)

    @classmethod
    def tearDownClass(cls):
        for server in (cls.standby, cls.primary):
            subprocess.run([cls.tool("pg_ctl"), "-D", server["data"], "-m", "immediate", "stop"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cls.repl.close()
        cls.clients.close()
        shutil.rmtree(cls.work, ignore_errors=True)

    def tearDown(self):
        # A failed test leaves no fault behind for the next one.
        self.repl.heal()
        self.clients.heal()

    @classmethod
    def tool(cls, name):
        return os.path.join(cls.bin, name)

    @classmethod
    def make_dir(cls, name, port):
        d = os.path.join(cls.work, name)
        os.makedirs(d)
        return {"name": name, "dir": d, "data": os.path.join(d, "data"), "port": port}

    @classmethod
    def conf(cls, server, extra):
        with open(os.path.join(server["data"], "postgresql.conf"), "a") as f:
            f.write(f"port = {server['port']}\nlisten_addresses = ''\nunix_socket_directories = '{server['dir']}'\n"
                    "fsync = off\nshared_buffers = '16MB'\nmax_connections = 20\n" + extra)

    @classmethod
    def start(cls, server):
        subprocess.run([cls.tool("pg_ctl"), "-D", server["data"], "-w", "-t", "120", "-l",
                        os.path.join(server["dir"], "server.log"), "start"], check=True, stdout=subprocess.DEVNULL)

    def sql(self, server, query, dsn=None):
        dsn = dsn or f"host={server['dir']} port={server['port']} dbname=postgres user=postgres"
        out = subprocess.run([self.tool("psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-c", query],
                             check=True, capture_output=True, text=True, env=dict(os.environ, PGCONNECT_TIMEOUT="5"))
        return out.stdout.strip()

    def lsn(self, server, query):
        return int(self.sql(server, f"SELECT ({query}) - '0/0'::pg_lsn"))

    def caught_up(self):
        target = self.lsn(self.primary, "pg_current_wal_flush_lsn()")
        wait_until(lambda: self.lsn(self.standby, "pg_last_wal_receive_lsn()") >= target,
                   "the standby to catch up", timeout=120)
        wait_until(lambda: self.sql(self.primary, "SELECT count(*) FROM pg_stat_replication "
                                                  f"WHERE flush_lsn >= '0/0'::pg_lsn + {target}") == "1",
                   "pg_stat_replication to show it", timeout=120)

    def test_a_partition_stops_the_standby_and_the_heal_catches_it_up(self):
        self.sql(self.primary, "CREATE TABLE IF NOT EXISTS t (i int)")
        self.caught_up()
        self.assertGreaterEqual(self.repl.stats()["open"], 1)  # the walreceiver came through the proxy
        self.repl.partition()
        # What crossed before the partition, and was still in a socket, is taken in first.
        time.sleep(1.0)
        flush = self.sql(self.primary, "SELECT flush_lsn FROM pg_stat_replication")
        received = self.lsn(self.standby, "pg_last_wal_receive_lsn()")
        rows = int(self.sql(self.standby, "SELECT count(*) FROM t"))
        for _ in range(20):
            self.sql(self.primary, "INSERT INTO t SELECT generate_series(1, 1000)")
            time.sleep(0.1)
        written = self.lsn(self.primary, "pg_current_wal_flush_lsn()")
        self.assertGreater(written, received)
        # The WAL sender kept sending (into the proxy), but nothing reached the standby: its
        # position and the one it reports stand still, and the rows are not there.
        self.assertEqual(self.lsn(self.standby, "pg_last_wal_receive_lsn()"), received)
        self.assertEqual(self.sql(self.primary, "SELECT flush_lsn FROM pg_stat_replication"), flush)
        self.assertEqual(int(self.sql(self.standby, "SELECT count(*) FROM t")), rows)
        self.assertGreater(self.repl.stats()["held_down"], 0)
        sent = self.sql(self.primary, "SELECT sent_lsn FROM pg_stat_replication")
        print(f"\npartition: standby received up to {received}, primary flushed {written} "
              f"(pg_stat_replication: sent {sent}, flush {flush}), {self.repl.stats()['held_down']} bytes held",
              file=sys.stderr)
        healed = time.monotonic()
        self.repl.heal()
        self.caught_up()
        print(f"heal: caught up in {time.monotonic() - healed:.2f} s", file=sys.stderr)
        self.assertEqual(int(self.sql(self.standby, "SELECT count(*) FROM t")), rows + 20_000)

    def test_a_partition_past_the_timeouts_then_a_reconnection(self):
        """A partition longer than wal_sender_timeout and wal_receiver_timeout: both ends give up
        on the connection (their ends wait in the proxy), the walreceiver's new connections hang
        in the partition, and after the heal the standby connects again and catches up."""
        self.sql(self.primary, "CREATE TABLE IF NOT EXISTS long (i int)")
        for server in (self.primary, self.standby):
            self.sql(server, "ALTER SYSTEM SET wal_sender_timeout = '1s'")
            self.sql(server, "ALTER SYSTEM SET wal_receiver_timeout = '1s'")
            self.sql(server, "SELECT pg_reload_conf()")
        try:
            self.caught_up()
            accepted = self.repl.stats()["accepted"]
            self.repl.partition()
            self.sql(self.primary, "INSERT INTO long SELECT generate_series(1, 1000)")
            # The primary's WAL sender times out and goes; the standby's next walreceiver hangs.
            wait_until(lambda: self.sql(self.primary, "SELECT count(*) FROM pg_stat_replication") == "0",
                       "the WAL sender to time out")
            wait_until(lambda: self.repl.stats()["hanging"] >= 1, "a new walreceiver connection to hang")
            self.assertEqual(self.sql(self.standby, "SELECT count(*) FROM long"), "0")
            self.repl.heal()
            self.caught_up()
            self.assertEqual(self.sql(self.standby, "SELECT count(*) FROM long"), "1000")
            self.assertGreater(self.repl.stats()["accepted"], accepted)
        finally:
            for server in (self.primary, self.standby):
                self.sql(server, "ALTER SYSTEM RESET wal_sender_timeout")
                self.sql(server, "ALTER SYSTEM RESET wal_receiver_timeout")
                self.sql(server, "SELECT pg_reload_conf()")

    def test_a_lag_keeps_the_standby_behind(self):
        self.sql(self.primary, "CREATE TABLE IF NOT EXISTS lagged (i int)")
        self.caught_up()
        self.repl.lag("down", 2.0)
        try:
            inserted = time.monotonic()
            self.sql(self.primary, "INSERT INTO lagged VALUES (1)")
            wait_until(lambda: self.sql(self.standby, "SELECT count(*) FROM lagged") == "1",
                       "the row to reach the standby", timeout=120)
            behind = time.monotonic() - inserted
            print(f"\nlag 2 s: the row reached the standby {behind:.2f} s after its insert", file=sys.stderr)
            self.assertGreaterEqual(behind, 2.0)
        finally:
            self.repl.heal()

    def test_clients_cut_off_from_the_primary(self):
        dsn = f"host=127.0.0.1 port={self.clients.port} dbname=postgres user=postgres"
        self.assertEqual(self.sql(None, "SELECT 1", dsn=dsn), "1")
        busy = subprocess.Popen([self.tool("psql"), "-X", "-d", dsn, "-c", "SELECT pg_sleep(600)"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: self.sql(self.primary, "SELECT count(*) FROM pg_stat_activity "
                                                      "WHERE query = 'SELECT pg_sleep(600)'") == "1",
                       "the long query to start")
            self.clients.partition(reset=True, refuse=True)
            # The open session is reset, long before its query would end ...
            self.assertNotEqual(busy.wait(timeout=PATIENCE_S), 0)
            self.assertIn("server closed the connection unexpectedly", busy.stderr.read())
        finally:
            if busy.poll() is None:
                busy.kill()
                busy.wait()
            busy.stderr.close()
        # ... and a new one is refused.
        with self.assertRaises(subprocess.CalledProcessError):
            self.sql(None, "SELECT 1", dsn=dsn)
        self.assertGreaterEqual(self.clients.stats()["refused"], 1)
        self.clients.heal()
        self.assertEqual(self.sql(None, "SELECT 1", dsn=dsn), "1")


if __name__ == "__main__":
    unittest.main()
