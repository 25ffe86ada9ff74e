#!/usr/bin/python3
"""`make chaos`: a Jepsen-style run of snowflake_id under combined faults.

Three lineages (primaries owning disjoint shard sets), each with a streaming standby, all under
libfaketime with a time file per server, each data directory on a LazyFS mount of its own (a
power loss drops every write not fsynced). Clients insert through every primary, each row tagged
with a token of the client's own, ask for ids alone and in bursts of thousands, and write each
acknowledged id to acked/; a seeded nemesis kills, cuts the power, restarts, crashes standbys,
fails over (some with the standby's WAL held back), steps clocks, pauses, changes shard lists,
partitions the network (chaos/proxy.py), migrates by dump and restore, and sometimes runs two
faults at once. Then the harness heals the fleet and waits, within a bound the faults set, for
every lineage to acknowledge again; the final contents of every lineage are written to final/.
The verdict is chaos/check.py's, which shares no code with this file.

Runs as the postgres user (PostgreSQL refuses root). Everything lives under WORK.

    harness.py --work DIR --bin PG_BIN --lazyfs LAZYFS_BIN --seed N --duration S --mode sync|async
               [--base-port P]
"""

import argparse
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import threading
import time

import psycopg2
import psycopg2.extensions

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxy as netproxy  # noqa: E402  (chaos/proxy.py, installed beside this file)

FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
# Each lineage owns a disjoint shard set, which a promoted standby or a restored server keeps.
LINEAGES = {"a": "1-3", "b": "4-6", "c": "7-9"}
DB = "chaos"
# After the heal, a lineage must acknowledge again within its clock debt (how far its primary's
# clock lies behind the ids it minted: the refusals wait for the clock) plus this allowance for
# reconnecting. The checker allows the same (chaos/check.py, LIVENESS_ALLOWANCE_S).
LIVENESS_ALLOWANCE_S = 30.0


def now_ns():
    """Every time the harness records: one monotonic clock, never stepped (the servers' clocks
    are the faked ones)."""
    return time.monotonic_ns()


class Server:
    """One PostgreSQL server under libfaketime; its clock is `offset` seconds off the real one."""

    counter = 0

    def __init__(self, h, lineage, lazy=True, mount=True):
        Server.counter += 1
        self.h, self.lineage = h, lineage
        self.name = f"{lineage}{Server.counter}"
        self.port = h.args.base_port + Server.counter
        self.dir = os.path.join(h.work, "servers", self.name)
        self.data = os.path.join(self.dir, "data")
        self.timefile = os.path.join(self.dir, "faketime")
        self.log = os.path.join(self.dir, "server.log")
        self.offset = 0.0
        self.proc = None
        self.paused = False
        self.lazyfs = None
        self.lazy = lazy and bool(h.lazyfs)
        h.servers.append(self)
        os.makedirs(self.dir, exist_ok=True)
        self.disk = os.path.join(self.dir, "disk")
        self.set_offset(0.0)
        if mount:
            self.mount()

    # --- the disk: LazyFS, whose page cache a power loss drops --------------------------------
    def mount(self):
        """The data directory, a LazyFS mount over `disk/`: written data stays in LazyFS's cache
        until fsynced, and `lazyfs::clear-cache` drops whatever was not (a power loss). Every
        open bypasses the kernel's page cache (build_lazyfs in scripts/lib.sh), which otherwise
        serves a reader zeros where another process wrote and flushed (a WAL sender, a standby's
        startup process)."""
        if not self.lazy:
            os.makedirs(self.data, mode=0o700, exist_ok=True)
            return
        os.makedirs(self.disk, exist_ok=True)
        os.chmod(self.disk, 0o700)  # the mount's root: PostgreSQL asks 0700 of a data directory
        os.makedirs(self.data)
        self.fifo = os.path.join(self.dir, "lazyfs.fifo")
        done = os.path.join(self.dir, "lazyfs.done.fifo")
        config = os.path.join(self.dir, "lazyfs.toml")
        with open(config, "w") as f:
            f.write(f'[faults]\nfifo_path="{self.fifo}"\nfifo_path_completed="{done}"\n'
                    '[cache]\napply_eviction=true\n[cache.simple]\ncustom_size="256mb"\nblocks_per_page=1\n'
                    '[filesystem]\nlog_all_operations=false\nlogfile=""\n')
        os.mkfifo(self.fifo)
        os.mkfifo(done)
        # LazyFS opens the notifier for writing at start, which waits for a reader: this one, open
        # as long as the mount.
        self.done_fd = os.open(done, os.O_RDONLY | os.O_NONBLOCK)
        self.lazyfs = subprocess.Popen([self.h.lazyfs, self.data, "--config-path", config, "-f",
                                        "-o", "modules=subdir", "-o", f"subdir={self.disk}"],
                                       stdout=open(os.path.join(self.dir, "lazyfs.log"), "a"),
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + 30
        while not os.path.ismount(self.data):
            if self.lazyfs.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"LazyFS did not mount {self.data}; see {self.dir}/lazyfs.log")
            time.sleep(0.02)

    def lose_power(self):
        """Every process dies at once, then the writes not fsynced are gone; the disk keeps the
        rest. The server stays down: the caller restarts it."""
        self.kill9()
        while True:  # notices of earlier clears, if any were left
            try:
                if not os.read(self.done_fd, 4096):
                    break
            except BlockingIOError:
                break
        fd = os.open(self.fifo, os.O_WRONLY)  # LazyFS holds it open: never waits
        try:
            os.write(fd, b"lazyfs::clear-cache\n")
        finally:
            os.close(fd)
        got = b""
        deadline = time.time() + 60
        while b"finished::clear-cache" not in got:
            left = deadline - time.time()
            if left <= 0:
                raise RuntimeError(f"LazyFS did not clear {self.name}'s cache; see {self.dir}/lazyfs.log")
            ready, _, _ = select.select([self.done_fd], [], [], left)
            if ready:
                try:
                    got += os.read(self.done_fd, 4096)
                except BlockingIOError:
                    pass

    def destroy(self):
        """Retired or rebuilt: the server stops, its disk goes; its log stays."""
        if self.proc is not None and self.proc.poll() is None:
            self.kill9()
        self.unmount()
        for d in (self.data, self.disk, os.path.join(self.dir, "wal")):
            shutil.rmtree(d, ignore_errors=True)

    def unmount(self):
        if self.lazyfs is None:
            return
        subprocess.run(["fusermount3", "-u", "-z", self.data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            self.lazyfs.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.lazyfs.kill()
            self.lazyfs.wait()
        os.close(self.done_fd)
        self.lazyfs = None

    def set_offset(self, offset):
        # Under a lock: two faults at once (a clock step during a failover) may both move it.
        with self.h.clock_lock:
            self.offset = offset
            tmp = self.timefile + ".tmp"
            with open(tmp, "w") as f:
                f.write(f"{offset:+.3f}\n")
            os.rename(tmp, self.timefile)

    def step_offset(self, step):
        with self.h.clock_lock:
            self.set_offset(self.offset + step)

    def append_conf(self, text, data=None, file="postgresql.conf"):
        """Settings for postgresql.conf, fsynced: PostgreSQL never syncs the file, and a power
        loss would take the harness's settings (shared_preload_libraries among them) with it."""
        with open(os.path.join(data or self.data, file), "a") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())

    def conf(self, extra="", data=None):
        self.append_conf(
            f"port = {self.port}\nlisten_addresses = ''\nunix_socket_directories = '{self.dir}'\n"
            f"shared_preload_libraries = 'snowflake_id'\nsnowflake_id.shards = '{LINEAGES[self.lineage]}'\n"
            "snowflake_id.max_rewind_wait = '3s'\nfsync = on\nsynchronous_commit = on\n"
            "wal_level = replica\nmax_wal_senders = 5\nhot_standby = on\nwal_keep_size = '256MB'\n"
            "max_connections = 30\nshared_buffers = '32MB'\ncheckpoint_timeout = '30s'\n"
            # A standby reconnects within 200 ms: the stalls measured are the ids', not the
            # default 5 s between a walreceiver's attempts.
            "wal_retrieve_retry_interval = '200ms'\n"
            # The WAL writer flushes at most every 10 s: an id handed out by a transaction that
            # writes nothing (SELECT snowflake_next()) is durable by the extension's own flush of
            # its reservation, not by the WAL writer's flush a few milliseconds later.
            "wal_writer_delay = '10s'\n"
            f"cluster_name = '{self.name}'\nlog_line_prefix = '%m [%p] '\n" + extra, data
        )

    def start(self):
        env = dict(os.environ, LD_PRELOAD=FAKETIME_LIB, FAKETIME_TIMESTAMP_FILE=self.timefile,
                   FAKETIME_NO_CACHE="1", DONT_FAKE_MONOTONIC="1")
        env.pop("FAKETIME", None)
        logf = open(self.log, "a")
        self.proc = subprocess.Popen([os.path.join(self.h.bin, "postgres"), "-D", self.data], env=env,
                                     stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.paused = False
        started = time.time()
        deadline = started + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start; see {self.log}")
            try:
                psycopg2.connect(self.dsn("postgres"), connect_timeout=2).close()
                # A decaying maximum: starts on LazyFS take from one second to more than ten (a
                # power loss's recovery), and a step meant to outlast the outage must not fall short.
                self.h.start_s = max(0.8 * self.h.start_s, time.time() - started)
                return
            except psycopg2.OperationalError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start; see {self.log}")

    def dsn(self, db=DB):
        return f"host={self.dir} port={self.port} dbname={db} user=postgres"

    def pids(self):
        """The postmaster and its children."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        kids = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout.split()
        return [self.proc.pid] + [int(k) for k in kids]

    def child(self, title):
        """The pid of the server's child whose process title names it (walreceiver, ...)."""
        for pid in self.pids()[1:]:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if f"postgres: {self.name}: {title}".encode() in f.read():
                        return pid
            except OSError:
                pass
        return None

    def kill9(self):
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            self.proc.wait()
        # A child the postmaster forked after the list above was taken outlived it, attached to the
        # shared memory, and a restart refused ("pre-existing shared memory block is still in
        # use"); before it sets its process title it is named as the postmaster is. Every process
        # of the server, by either name, is killed until none is left.
        for _ in range(200):
            left = subprocess.run(["pgrep", "-f", f"postgres: {self.name}: |{self.h.bin}/postgres -D {self.data}$"],
                                  capture_output=True, text=True).stdout.split()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        self.paused = False

    def pg_ctl(self, *args):
        subprocess.run([os.path.join(self.h.bin, "pg_ctl"), "-D", self.data, "-w", "-t", "120", *args],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop_immediate(self):
        self.pg_ctl("-m", "immediate", "stop")
        self.proc.wait()

    def signal_all(self, sig):
        for pid in self.pids():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def sql(self, query, db=DB):
        c = psycopg2.connect(self.dsn(db), connect_timeout=5)
        c.autocommit = True
        try:
            with c.cursor() as cur:
                cur.execute(query)
                return cur.fetchall() if cur.description else None
        finally:
            c.close()


class Lineage:
    def __init__(self, name):
        self.name = name
        self.primary = None
        self.standby = None
        self.lock = threading.Lock()
        self.paused_clients = threading.Event()  # set while a migration moves the lineage
        self.active = 0  # clients inside a statement (under `lock`)
        # The latest real time plus clock offset at which its primary could mint: how far ahead
        # of the current primary's clock the ids may lie (see Harness.mark_peak).
        self.peak = 0.0
        self.last_acked_sent = {}  # kind -> the latest send time of an acknowledged request
        # The links the partitions cut (chaos/proxy.py), where the run has them: the standby's
        # replication connection and the clients' connections, each through a proxy on loopback
        # to the current primary's socket. The harness's own SQL goes to the sockets directly.
        self.repl = self.front = None

    def point(self, primary, links=("repl", "front")):
        """The named links go to `primary` from now on; their open connections are reset."""
        for name in links:
            link = getattr(self, name)
            if link is not None:
                link.set_target(f"{primary.dir}/.s.PGSQL.{primary.port}")
                link.reset()


class Harness:
    def __init__(self, args):
        self.args = args
        self.work, self.bin, self.mode = args.work, args.bin, args.mode
        self.kinds = [("kill9", 3), ("immediate", 2), ("failover", 2), ("clock", 4), ("pause", 2), ("restore", 1),
                      ("power", 3), ("standby_crash", 2), ("lagged_failover", 2), ("shards", 1), ("partition", 3)]
        if args.sabotage == "no-sync":
            self.kinds = [("power", 6), ("clock", 2)]
        elif args.sabotage == "no-reservation":
            self.kinds = [("kill9", 6), ("immediate", 2), ("clock", 2)]
        elif args.sabotage == "no-replay":
            self.kinds = [("failover", 6), ("clock", 2)]
        # Two faults at once, in a run that is not sabotaged (whose few faults must each expose
        # the build): a clock step or a pause on the same lineage during another fault, or the
        # power lost by a promoted primary just after its clients came over.
        self.overlap_p = 0.0 if args.sabotage else 0.3
        # Clients and standbys reach their primary through a proxy where the run partitions them.
        self.proxies = any(k == "partition" for k, _ in self.kinds)
        self.clock_lock = threading.RLock()
        # LazyFS only where the power can go: its FUSE round trips make starts, promotions and
        # rebuilt standbys take seconds longer, and a sabotaged run without power loss needs its
        # few faults to come quickly.
        self.lazyfs = args.lazyfs if any(k == "power" for k, _ in self.kinds) else ""
        self.rng = random.Random(args.seed)
        self.stop = threading.Event()
        self.lineages = {n: Lineage(n) for n in LINEAGES}
        self.faults = open(os.path.join(self.work, "faults.jsonl"), "a")
        self.retired = []
        self.servers = []  # every server ever made, so that every mount goes at the end
        # The no-sync sabotage runs primaries alone: nothing but the WAL writer flushes their WAL.
        self.with_standbys = args.sabotage != "no-sync"
        # How long the last start and promotion took: a clock step back meant to leave a server
        # behind its last ids must outlast the outage.
        self.start_s, self.promote_s = 1.0, 1.0
        # How often a restart or promotion comes back with its clock behind the lineage's last ids:
        # half the time, and always in a sabotaged run, whose few faults must expose the build.
        self.back_p = 1.0 if args.sabotage else 0.5

    # --- topology ---------------------------------------------------------------------------
    def initdb(self, server):
        """A new cluster for a server made with mount=False: on LazyFS, written under the mount
        before it is mounted, so that it is on the disk already (initdb's thousand fsyncs through
        FUSE take seconds), then mounted."""
        target = server.disk if server.lazy else server.data
        subprocess.run([os.path.join(self.bin, "initdb"), "-D", target, "-U", "postgres", "--auth=trust",
                        "-E", "UTF8", "--locale=C", "--no-sync"], check=True, stdout=subprocess.DEVNULL)
        server.conf(data=target)
        server.mount()

    def make_standby(self, lineage, primary=None):
        primary = primary or lineage.primary
        # Copied under the mount before it is mounted, as initdb's cluster (Harness.initdb).
        standby = Server(self, lineage.name, mount=False)
        target = standby.disk if standby.lazy else standby.data
        subprocess.run([os.path.join(self.bin, "pg_basebackup"), "-h", primary.dir, "-p", str(primary.port), "-U",
                        "postgres", "-D", target, "-R", "-X", "stream", "-c", "fast", "--no-sync",
                        f"--dbname=application_name={standby.name}"], check=True, stdout=subprocess.DEVNULL)
        standby.append_conf(f"port = {standby.port}\nunix_socket_directories = '{standby.dir}'\n"
                            f"cluster_name = '{standby.name}'\n", data=target)
        if lineage.repl is not None:
            # Through the lineage's replication link (pg_basebackup -R wrote a direct one to
            # postgresql.auto.conf, read after postgresql.conf: the last line there wins).
            lineage.point(primary, links=("repl",))
            standby.append_conf(f"primary_conninfo = 'host=127.0.0.1 port={lineage.repl.port} user=postgres "
                                f"application_name={standby.name}'\n", data=target, file="postgresql.auto.conf")
        standby.mount()
        standby.shards = getattr(primary, "shards", LINEAGES[lineage.name])  # pg_basebackup copied its line
        standby.set_offset(primary.offset)
        standby.start()
        lineage.standby = standby
        # Synchronous from the moment the primary has a standby (a promoted standby keeps the
        # setting, and its commits wait until its own standby is rebuilt).
        if self.mode == "sync":
            for server in (primary, standby):
                server.sql("ALTER SYSTEM SET synchronous_standby_names = '*'", db="postgres")
                server.sql("SELECT pg_reload_conf()", db="postgres")

    def setup(self):
        for name, lineage in self.lineages.items():
            primary = Server(self, name, mount=False)
            self.initdb(primary)
            primary.start()
            primary.sql(f"CREATE DATABASE {DB}", db="postgres")
            primary.sql("CREATE EXTENSION snowflake_id;"
                        # token: the client's own tag of the request; srv: the server that minted the id.
                        "CREATE TABLE sf (id bigint NOT NULL DEFAULT snowflake_next(), sent timestamptz, token text,"
                        " srv text DEFAULT current_setting('cluster_name'));"
                        "CREATE TABLE uu (id uuid NOT NULL DEFAULT uuidv7_next(), sent timestamptz, token text,"
                        " srv text DEFAULT current_setting('cluster_name'));")
            lineage.primary = primary
            if self.proxies:
                socket_path = f"{primary.dir}/.s.PGSQL.{primary.port}"
                lineage.repl = netproxy.Proxy(socket_path, name=f"{name}-repl")
                lineage.front = netproxy.Proxy(socket_path, name=f"{name}-clients")
            if self.with_standbys:
                self.make_standby(lineage)

    # --- clients ----------------------------------------------------------------------------
    def client(self, lineage, kind, index, op):
        """Inserts rows (op "insert"), or asks for ids alone (op "select": `SELECT
        snowflake_next()`, whose transaction writes nothing of its own, so that its commit flushes
        no WAL: the id is durable only by the reservation's own flush), or asks for thousands at
        once (op "burst", snowflake ids: `SELECT snowflake_next(n) FROM generate_series(1, N)`,
        N 1,000-5,000). Two burst clients of a lineage name its first shard, which the shard-list
        changes always keep, and start together on the lineage's own fraction of every second, so
        that together they ask that shard for more than its 512 ids per tick (one statement alone
        may not, under the run's load); the third calls `snowflake_next()`, which spreads over the
        server's current shards, every 0.5-1.5 s.
        Every id of a burst is acknowledged, and never stored, under a token of its own."""
        table = "sf" if kind == "snowflake" else "uu"
        function = "snowflake_next()" if kind == "snowflake" else "uuidv7_next()"
        pinned = op == "burst" and index % 3 != 2
        if pinned:
            function = f"snowflake_next({LINEAGES[lineage.name].split('-')[0]})"
        offset = sorted(LINEAGES).index(lineage.name) / len(LINEAGES)
        pace = random.Random(f"{self.args.seed}-{lineage.name}-{kind}-{index}")
        # Line-buffered: a line is whole on disk, or absent, whenever the harness stops.
        acked = open(os.path.join(self.work, "acked", f"{lineage.name}-{kind}-{index}.txt"), "a", buffering=1)
        errors = open(os.path.join(self.work, "errors", f"{lineage.name}-{kind}-{index}.txt"), "a", buffering=1)
        conn, conn_server, conn_name = None, None, None
        # Every request carries a token no other request has, acknowledged or not, so that the
        # checker judges each write by itself (a lost row and a re-minted one never cancel out).
        prefix, n = f"{lineage.name}{kind[0]}{op[0]}{index}", 0
        while not self.stop.is_set():
            with lineage.lock:
                paused = lineage.paused_clients.is_set()
                if not paused:
                    lineage.active += 1
                    server = lineage.primary
            if paused:
                if conn is not None:
                    conn.close()
                    conn = None
                time.sleep(0.05)
                continue
            try:
                if conn is None or conn_server is not server:
                    if conn is not None:
                        conn.close()
                    if lineage.front is not None:
                        conn = psycopg2.connect(f"host=127.0.0.1 port={lineage.front.port} dbname={DB} user=postgres",
                                                connect_timeout=3)
                    else:
                        conn = psycopg2.connect(server.dsn(), connect_timeout=3)
                    conn.autocommit = True
                    conn_server = server
                    # The server the connection reached, which the acknowledgements name (through
                    # the proxy it may already be the next primary).
                    with conn.cursor() as cur:
                        cur.execute("SELECT current_setting('cluster_name')")
                        (conn_name,), = cur.fetchall()
                    # No statement_timeout: a cancelled wait for the synchronous standby returns
                    # success for a commit the standby may not have, which is no acknowledgement.
                n += 1
                token = f"{prefix}.{n}"
                sent = now_ns()
                with conn.cursor() as cur:
                    # The WAL position after the row's insert: the next statement's bounds this
                    # one's commit record from above (the checker's loss window in a failover).
                    if op == "insert":
                        cur.execute(f"INSERT INTO {table} (sent, token) VALUES (now(), %s) "
                                    "RETURNING id, pg_current_wal_insert_lsn()", (token,))
                    elif op == "burst":
                        # Each row's insert position, after its id (the function is evaluated
                        # per row): past the record of the reservation it was minted under.
                        cur.execute(f"SELECT {function}, pg_current_wal_insert_lsn() "
                                    "FROM generate_series(1, %s)", (pace.randint(1000, 5000),))
                    else:
                        # The insert position after the id: past its reservation's record.
                        cur.execute(f"SELECT {function}, pg_current_wal_insert_lsn()")
                    got = cur.fetchall()
                done = now_ns()
                if op == "burst":
                    head = f"{sent} {done} {lineage.name} {kind}"
                    acked.write("".join(f"{head} {value} {token}.{k} {conn_name} {op} {lsn}\n"
                                        for k, (value, lsn) in enumerate(got)))
                else:
                    (value, lsn), = got
                    acked.write(f"{sent} {done} {lineage.name} {kind} {value} {token} {conn_name} {op} {lsn}\n")
                lineage.last_acked_sent[kind] = max(lineage.last_acked_sent.get(kind, 0), sent)
            except psycopg2.Error as e:
                lost = isinstance(e, (psycopg2.OperationalError, psycopg2.InterfaceError)) or "server closed" in str(e)
                code = e.pgcode or ("connection" if lost else "client")
                errors.write(f"{now_ns()} {code} {str(e).strip().splitlines()[0] if str(e).strip() else ''}\n")
                try:
                    if conn is not None:
                        conn.close()
                except psycopg2.Error:
                    pass
                conn = None
                time.sleep(0.05)
            finally:
                with lineage.lock:
                    lineage.active -= 1
            if pinned:  # the start of the lineage's fraction of the next second
                self.stop.wait(1.0 - (time.monotonic() - offset) % 1.0)
            elif op == "burst":
                self.stop.wait(pace.uniform(0.5, 1.5))
        acked.close()
        errors.close()

    # --- nemesis ----------------------------------------------------------------------------
    def log_fault(self, kind, lineage, server, at_ns=None, **detail):
        """A fault, at the moment it took effect (a kill once the server is gone)."""
        self.faults.write(json.dumps({"at_ns": at_ns or now_ns(), "kind": kind, "lineage": lineage,
                                      "server": server, **detail}) + "\n")
        self.faults.flush()

    def mark_peak(self, lineage):
        """Called before the lineage's primary or its clock changes: the ids minted so far carry
        times up to now on its clock (a paused or dead primary mints none, so this over-counts,
        never under-counts)."""
        lineage.peak = max(lineage.peak, time.time() + lineage.primary.offset)

    def clock_debt(self, lineage):
        """How far the lineage's primary's clock lies behind the latest ids it may hold."""
        self.mark_peak(lineage)
        return max(0.0, lineage.peak - (time.time() + lineage.primary.offset))

    def step_back(self, max_s=2.0):
        return round(self.rng.uniform(0.001, max_s), 3)

    def behind_last_ids(self, outage_s):
        """A step back that leaves a restarted or promoted server's clock up to 2 s behind the
        last ids of its lineage when it mints again: the outage (as long as the last one took)
        plus up to 2 s. Without it, the time a restart takes hides the step."""
        return round(outage_s + self.step_back(), 3)

    def fault(self, kind, lineage, first=False):
        """One fault on the lineage, and sometimes (overlap_p) a second one at once: a clock step
        or a pause of the same lineage's primary or standby while the first runs, or, after a
        failover, a power loss of the promoted primary as its clients come over. The second
        fault's draws are made here, before it starts, so that the seed still fixes them."""
        companion = None
        if self.overlap_p and kind in ("kill9", "immediate", "power", "failover", "lagged_failover",
                                       "standby_crash", "clock", "partition"):
            # The first failovers of a run always overlap, so that CI's short run sees both.
            if (first and kind in ("failover", "lagged_failover")) or self.rng.random() < self.overlap_p:
                if kind == "failover" and self.lazyfs and (first or self.rng.random() < 0.5):
                    companion = ("power_after_failover", self.rng.uniform(0.2, 1.0), None)
                else:
                    # A pause only where the fault itself asks nothing of the paused server (the
                    # failovers sample both servers' WAL positions, a standby crash checkpoints).
                    calm = kind in ("kill9", "immediate", "power", "clock", "partition")
                    second = "pause" if kind == "clock" else self.rng.choice(["clock", "pause"] if calm else ["clock"])
                    companion = (second, self.rng.uniform(0.0, 1.0), self.rng.random())
        if companion is not None and companion[0] != "power_after_failover":
            name, delay, pick = companion
            p, s = lineage.primary, lineage.standby
            targets = [x for x in (p, s) if x is not None]
            target = targets[int(pick * len(targets))]
            if name == "clock":
                arg = round(self.rng.uniform(0.001, 2.0), 3) * self.rng.choice([-1, 1])
            else:
                arg = round(self.rng.uniform(1, 3), 1)
            t = threading.Thread(target=self.companion, args=(name, lineage, target, delay, arg, kind), daemon=True)
            t.start()
            try:
                self.fault_alone(kind, lineage)
            finally:
                t.join()
            return
        self.fault_alone(kind, lineage, power_after=companion[1] if companion else None)

    def companion(self, name, lineage, target, delay, arg, during):
        """The second of two faults at once (see fault)."""
        time.sleep(delay)
        if name == "clock":
            self.mark_peak(lineage)
            self.log_fault("clock", lineage.name, target.name, step_s=arg, overlap_with=during)
            target.step_offset(arg)
        else:
            self.log_fault("pause", lineage.name, target.name, seconds=arg, overlap_with=during)
            target.signal_all(signal.SIGSTOP)
            time.sleep(arg)
            target.signal_all(signal.SIGCONT)

    def fault_alone(self, kind, lineage, power_after=None):
        p, s = lineage.primary, lineage.standby
        self.mark_peak(lineage)
        if kind == "kill9":
            back = self.behind_last_ids(self.start_s) if self.rng.random() < self.back_p else 0.0
            p.kill9()
            self.log_fault(kind, lineage.name, p.name, clock_back_s=back)
            p.step_offset(-back)
            p.start()
        elif kind == "power":
            # A power loss: the primary (two in three) or the standby dies with every write it did
            # not fsync, and restarts; half the time a primary's clock comes back behind its own
            # last ids, as after a kill.
            target = p if s is None or self.rng.random() < 2 / 3 else s
            back = self.behind_last_ids(self.start_s) if target is p and self.rng.random() < self.back_p else 0.0
            target.lose_power()
            self.log_fault(kind, lineage.name, target.name, role="primary" if target is p else "standby",
                           clock_back_s=back)
            target.step_offset(-back)
            target.start()
        elif kind == "standby_crash":
            self.standby_crash(lineage)
        elif kind == "immediate":
            p.stop_immediate()
            self.log_fault(kind, lineage.name, p.name)
            p.start()
        elif kind in ("failover", "lagged_failover"):
            self.failover(lineage, lagged=kind == "lagged_failover", power_after=power_after)
        elif kind == "clock":
            target = self.rng.choice([x for x in (p, s) if x is not None])
            self.mark_peak(lineage)
            step = round(self.rng.uniform(0.001, 2.0), 3) * self.rng.choice([-1, 1])
            self.log_fault(kind, lineage.name, target.name, step_s=step)
            target.step_offset(step)
        elif kind == "pause":
            target = self.rng.choice([x for x in (p, s) if x is not None])
            seconds = round(self.rng.uniform(1, 5), 1)
            self.log_fault(kind, lineage.name, target.name, seconds=seconds)
            target.signal_all(signal.SIGSTOP)
            time.sleep(seconds)
            target.signal_all(signal.SIGCONT)
        elif kind == "shards":
            self.change_shards(lineage)
        elif kind == "partition":
            self.partition(lineage)
        elif kind == "restore":
            self.migrate(lineage)

    def standby_crash(self, lineage):
        """The standby dies under load, by SIGKILL or (on LazyFS, half the time) a power loss,
        and restarts: it replays from its last restartpoint, reservations included. Half the time
        a restartpoint is made first (a checkpoint on the primary, replayed, then CHECKPOINT on
        the standby), so that the replay starts just behind the crash with the reservations
        logged since; half the time the lineage then fails over to it at once, so that the
        promoted server mints from what that replay rebuilt."""
        p, s = lineage.primary, lineage.standby
        power = bool(s.lazy) and self.rng.random() < 0.5
        restartpoint = self.rng.random() < 0.5
        then_failover = self.rng.random() < 0.5
        under_load = round(self.rng.uniform(0.2, 1.0), 3)
        if restartpoint:
            p.sql("CHECKPOINT", db="postgres")
            (redo,), = p.sql("SELECT checkpoint_lsn FROM pg_control_checkpoint()", db="postgres")
            deadline = time.time() + 10
            while time.time() < deadline:
                (replayed,), = s.sql(f"SELECT pg_last_wal_replay_lsn() >= '{redo}'::pg_lsn", db="postgres")
                if replayed:
                    break
                time.sleep(0.05)
            s.sql("CHECKPOINT", db="postgres")  # a restartpoint at the replayed checkpoint
            time.sleep(under_load)
        if power:
            s.lose_power()
        else:
            s.kill9()
        self.log_fault("standby_crash", lineage.name, s.name, how="power" if power else "kill9",
                       after_restartpoint=restartpoint)
        s.start()
        if then_failover:
            time.sleep(under_load)
            self.failover(lineage, lagged=False, after="standby_crash")

    def failover(self, lineage, lagged=False, power_after=None, after=None):
        """The primary dies and its standby is promoted. Lagged (`lagged_failover`): the WAL the
        standby would receive is held in the lineage's replication link for 1-3 s before the kill
        while the clients go on, and dropped with the kill (the link's connections reset), so
        that the WAL of that span never reaches it. Without a link the standby's walreceiver is
        stopped (SIGSTOP) instead, which holds back only what its socket's buffer cannot take:
        continued after the kill, it still reads and keeps what the primary had sent. In async mode the promoted server then mints again
        ids the old one acknowledged (its clock is set inside the lost span), which the checker
        must excuse by the WAL window and nothing else. In sync mode commits and renewals wait
        for the stopped standby, and nothing acknowledged may be lost or minted again."""
        p, s = lineage.primary, lineage.standby
        kind = "lagged_failover" if lagged else "failover"
        hold = held_by = None
        receiver = s.child("walreceiver") if lagged and lineage.repl is None else None
        if lagged and (lineage.repl is not None or receiver is not None):
            hold = round(self.rng.uniform(1.0, 3.0), 1)
            if lineage.repl is not None:
                held_by = "link"
                lineage.repl.hold("down")
            else:
                held_by = "sigstop"
                os.kill(receiver, signal.SIGSTOP)
            time.sleep(hold)
        # Up to 2 s behind the old primary's last ids as the clients come over (lagged: inside
        # the span the standby never received): set once the promotion and the new standby are
        # done (no client reaches the promoted server before; with synchronous replication its
        # first ids wait for that standby anyway), so that however long they took, its first
        # ids see a clock behind the old primary's last ones.
        if hold is not None:
            back = round(self.rng.uniform(0.001, hold), 3)
        else:
            back = self.step_back() if self.rng.random() < self.back_p else 0.0
        # How far the standby was behind as the primary died: the window in which an
        # acknowledged commit can be lost with asynchronous replication. The standby's
        # position only grows, so the one sampled before the kill is a lower bound of what it
        # keeps; the checker excuses a lost row only if its commit may lie past it.
        lag = primary_flush = standby_flush = None
        try:
            lag, primary_flush = p.sql("SELECT extract(epoch FROM max(replay_lag)) * 1000, "
                                       "pg_current_wal_flush_lsn() FROM pg_stat_replication", db="postgres")[0]
        except psycopg2.Error:
            pass
        try:
            standby_flush = s.sql("SELECT pg_last_wal_receive_lsn()", db="postgres")[0][0]
        except psycopg2.Error:
            pass
        self.mark_peak(lineage)
        p.kill9()
        killed = time.time()
        if held_by == "link":  # what the link held dies with the primary's connection
            lineage.repl.reset()
            lineage.repl.release("down")
        elif receiver is not None:
            try:
                os.kill(receiver, signal.SIGCONT)
            except ProcessLookupError:
                pass
        detail = {"held_s": hold, "held_by": held_by} if lagged else {}
        if after:
            detail["after"] = after
        self.log_fault(kind, lineage.name, p.name, promoted=s.name, standby_clock_back_s=back,
                       replay_lag_ms=float(lag) if lag is not None else None,
                       primary_flush_lsn=primary_flush, standby_flush_lsn=standby_flush, **detail)
        promoting = time.time()
        s.pg_ctl("promote")
        self.promote_s = max(0.8 * self.promote_s, time.time() - promoting)
        # The old primary is rebuilt as the new one's standby, as an operator would, before
        # the clients move over.
        p.destroy()
        self.retired.append(p)
        with lineage.lock:
            lineage.standby = None
        self.make_standby(lineage, primary=s)
        if back:
            for server in (s, lineage.standby):
                server.set_offset(p.offset - (time.time() - killed) - back)
        with lineage.lock:
            lineage.primary = s
            lineage.point(s, links=("front",))
        if power_after is not None:
            # The second fault: the promoted primary loses its power just after its clients came
            # over, with its first reservations (and in async mode nothing else) durable.
            time.sleep(power_after)
            self.mark_peak(lineage)
            s.lose_power()
            self.log_fault("power", lineage.name, s.name, role="primary", clock_back_s=0.0, overlap_with=kind)
            s.start()

    def partition(self, lineage):
        """A network partition of 1-5 s through the lineage's proxies: between the primary and
        its standby (the WAL stops; with synchronous replication commits and renewals wait), or
        between the clients and the primary (statements in flight hang, new connections time out).
        One in three resets the open connections as it begins."""
        link = self.rng.choice(["replication", "clients"])
        seconds = round(self.rng.uniform(1, 5), 1)
        reset = self.rng.random() < 1 / 3
        proxy = lineage.repl if link == "replication" else lineage.front
        self.log_fault("partition", lineage.name, lineage.primary.name, link=link, seconds=seconds, reset=reset)
        proxy.partition(reset=reset)
        try:
            time.sleep(seconds)
        finally:
            proxy.heal()

    def change_shards(self, lineage):
        """A SIGHUP that changes the shard list of the primary and of its standby, as an operator
        changes a fleet's, within the lineage's own (disjoint) set and always keeping the first
        shard (the burst client's): the generators of the shards dropped stop, those added go on
        from their own words, and a standby promoted later mints from its new list."""
        p, s = lineage.primary, lineage.standby
        lo, hi = (int(x) for x in LINEAGES[lineage.name].split("-"))
        choices = [f"{lo}", f"{lo}-{lo + 1}", f"{lo},{hi}", f"{lo}-{hi}"]
        shards = self.rng.choice([c for c in choices if c != getattr(p, "shards", LINEAGES[lineage.name])])
        for server in (p, s):
            if server is not None:
                server.append_conf(f"snowflake_id.shards = '{shards}'\n")
                server.sql("SELECT pg_reload_conf()", db="postgres")
                server.shards = shards
        self.log_fault("shards", lineage.name, p.name, shards=shards, standby=s.name if s else None)

    def migrate(self, lineage):
        """Dump the lineage's database and restore it into a fresh server whose clock is behind;
        retire the old primary and standby, as an operator would."""
        old_p, old_s = lineage.primary, lineage.standby
        # Mostly up to 2 s behind; one restore in three onto a clock 5-30 s behind, further than
        # a call waits for the database's floor: its ids refuse (58000) until the clock is near.
        back = self.step_back() if self.rng.random() < 2 / 3 else round(self.rng.uniform(5, 30), 3)
        migrating = time.time()
        # The clients stop: none is inside a statement once `active` is 0 (a statement that waits
        # for the clock may take seconds, and must not commit after the dump's snapshot).
        with lineage.lock:
            lineage.paused_clients.set()
        deadline = time.time() + 60
        while True:
            with lineage.lock:
                if lineage.active == 0:
                    break
            if time.time() > deadline:
                raise RuntimeError(f"lineage {lineage.name}'s clients did not stop for the migration")
            time.sleep(0.01)
        self.mark_peak(lineage)
        self.log_fault("restore", lineage.name, old_p.name, clock_back_s=back)
        dump = os.path.join(self.work, f"dump-{old_p.name}")
        subprocess.run([os.path.join(self.bin, "pg_dump"), "-Fc", "-f", dump, old_p.dsn()], check=True)
        new = Server(self, lineage.name, mount=False)
        self.initdb(new)
        new.set_offset(old_p.offset)
        new.start()
        new.sql(f"CREATE DATABASE {DB}", db="postgres")
        subprocess.run([os.path.join(self.bin, "pg_restore"), "-d", new.dsn(), "--exit-on-error", dump], check=True)
        with lineage.lock:
            lineage.primary, lineage.standby = new, None
            lineage.point(new, links=("front",))  # the clients are stopped until the end
        for old in (old_p, old_s):
            if old is not None:
                old.destroy()
                self.retired.append(old)
        # A standby for the new primary; with synchronous replication commits wait for it.
        if self.with_standbys:
            self.make_standby(lineage)
        # The restored fleet's clocks, as the clients come back, read `back` before the last ids,
        # however long the migration took. (The seed-7 hour run, with clocks 17-36 s behind,
        # found 0.3.0's first build minting below a floor it did not wait for.)
        behind = old_p.offset - (time.time() - migrating) - back
        for server in (new, lineage.standby):
            if server is not None:
                server.set_offset(behind)
        lineage.paused_clients.clear()

    def nemesis(self):
        kinds = self.kinds
        population = [k for k, w in kinds for _ in range(w)]
        # Every kind once, in a seeded order, before the weighted draws: a short run (CI's 100 s)
        # sees each of them, power loss included, however few faults the machine's speed allows.
        first = [k for k, _ in kinds]
        self.rng.shuffle(first)
        # The restore last: on LazyFS a migration takes most of a minute, and the faults after it
        # would not fit in CI's 100 s (a failover's rebuilt standby takes half that).
        first.sort(key=lambda k: k == "restore")
        end = time.time() + self.args.duration
        while time.time() < end and not self.stop.is_set():
            time.sleep(self.rng.uniform(1.0, 3.0))
            in_first = bool(first)
            kind = first.pop(0) if first else self.rng.choice(population)
            lineage = self.lineages[self.rng.choice(sorted(self.lineages))]
            try:
                self.fault(kind, lineage, first=in_first)
            except Exception as e:  # a fault that could not be applied is a harness error: stop
                self.log_fault("harness-error", lineage.name, "", error=repr(e))
                raise

    # --- the end ----------------------------------------------------------------------------
    def heal(self):
        """Every server runs again (a pause ends; a fault's restart is done before the nemesis
        goes on), and the clients keep inserting until every lineage acknowledged both kinds of
        id again, sent after the heal, or its bound passed: its clock debt (a restore onto a
        clock far behind refuses until the clock catches up) plus LIVENESS_ALLOWANCE_S."""
        for lineage in self.lineages.values():
            for server in (lineage.primary, lineage.standby):
                if server is not None:
                    server.signal_all(signal.SIGCONT)
            for link in (lineage.repl, lineage.front):
                if link is not None:
                    link.heal()
        self.healed_ns = now_ns()
        self.clock_debt_s = {n: round(self.clock_debt(l), 3) for n, l in self.lineages.items()}
        self.log_fault("heal", "", "", clock_debt_s=self.clock_debt_s)
        deadline = time.monotonic() + max(self.clock_debt_s.values()) + LIVENESS_ALLOWANCE_S + 1
        while time.monotonic() < deadline:
            if all(l.last_acked_sent.get(k, 0) >= self.healed_ns
                   for l in self.lineages.values() for k in ("snowflake", "uuidv7")):
                break
            time.sleep(0.1)
        time.sleep(0.5)  # a little more history after the last lineage came back

    def collect(self):
        os.makedirs(os.path.join(self.work, "final"), exist_ok=True)
        for lineage in self.lineages.values():
            p = lineage.primary
            for table, kind in (("sf", "snowflake"), ("uu", "uuidv7")):
                rows = p.sql(f"SELECT id::text, token, srv FROM {table}")
                with open(os.path.join(self.work, "final", f"{lineage.name}-{kind}.txt"), "w") as f:
                    f.writelines(f"{r[0]} {r[1]} {r[2]}\n" for r in rows)
        servers = [s for l in self.lineages.values() for s in (l.primary, l.standby) if s is not None]
        with open(os.path.join(self.work, "topology.json"), "w") as f:
            json.dump({"mode": self.mode, "seed": self.args.seed, "duration_s": self.args.duration,
                       "sabotage": self.args.sabotage, "lineages": LINEAGES, "layout": "41/13/9",
                       "stopped_ns": self.stopped_ns, "healed_ns": self.healed_ns,
                       "clock_debt_s": self.clock_debt_s, "liveness_allowance_s": LIVENESS_ALLOWANCE_S,
                       "final_primaries": {n: l.primary.name for n, l in self.lineages.items()}}, f)
        for s in servers + self.retired:
            s.destroy()

    def run(self):
        try:
            self.run_clients_and_nemesis()
        finally:
            for s in self.servers:  # no mount outlives the run, whatever failed
                try:
                    s.destroy()
                except Exception:
                    pass
            for lineage in self.lineages.values():
                for link in (lineage.repl, lineage.front):
                    if link is not None:
                        link.close()

    def run_clients_and_nemesis(self):
        for d in ("acked", "errors", "servers"):
            os.makedirs(os.path.join(self.work, d), exist_ok=True)
        self.setup()
        # Per lineage and kind, two clients insert and one asks for ids alone; with the no-sync
        # sabotage all of them ask alone, since a commit's flush would make the reservation durable
        # too (it lies before the commit record in the WAL).
        ops = ("select", "select") if self.args.sabotage == "no-sync" else ("insert", "insert", "select")
        clients = [threading.Thread(target=self.client, args=(l, k, i, op), daemon=True)
                   for l in self.lineages.values() for k in ("snowflake", "uuidv7") for i, op in enumerate(ops)]
        # Three burst clients per lineage (see client), at indexes 3, 4 and 5: two on one shard. Not
        # in a sabotaged run: on 2 cores their load leaves its 40 s too few faults.
        if not self.args.sabotage:
            clients += [threading.Thread(target=self.client, args=(l, "snowflake", 3 + i, "burst"), daemon=True)
                        for l in self.lineages.values() for i in range(3)]
        for t in clients:
            t.start()
        time.sleep(1)
        try:
            self.nemesis()
        finally:
            self.heal()
            self.stop.set()
            self.stopped_ns = now_ns()
            for t in clients:
                t.join(timeout=30)
            self.collect()


def main():
    # A SIGTERM ends the run through its `finally`s: no server or mount outlives the harness.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--lazyfs", required=True, help="LazyFS's binary (scripts/lib.sh, build_lazyfs)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=120)
    ap.add_argument("--mode", choices=("sync", "async"), default="sync")
    ap.add_argument("--sabotage", default="")
    ap.add_argument("--base-port", type=int, default=5600, help="servers listen on the ports after it")
    Harness(ap.parse_args()).run()


if __name__ == "__main__":
    main()
