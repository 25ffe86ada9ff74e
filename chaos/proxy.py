#!/usr/bin/python3
"""A TCP proxy on loopback whose faults the chaos harness controls: network partitions between a
primary and its standby, and between clients and a primary (issue 32, section 2).

One Proxy per link. It listens on 127.0.0.1 (an ephemeral port unless told) and forwards every
connection to its target: a TCP port on loopback, or a Unix socket's path (a PostgreSQL server's
`<socket dir>/.s.PGSQL.<port>`, so that servers need not listen on TCP themselves). A standby's
primary_conninfo, or a client's DSN, names `host=127.0.0.1 port=<proxy.port>`.

The two directions of a link: UP, from the side that connects (a standby's walreceiver, a client)
to the target (the primary); DOWN, from the target back (the WAL a standby receives, the results
a client reads).

Faults, callable from any thread. One thread per proxy owns every socket; a call hands it the
change and returns once the change is in force, between two of its steps: after `partition()`
returns, no byte crosses the link until `heal()`.

    partition()            no byte crosses, either way. Connections stay open and the bytes wait
                           in order, as TCP retransmits across a real partition (the proxy keeps
                           reading up to BUFFER_CAP per direction and connection, then the
                           senders' own buffers fill); an end (FIN) or reset from one side waits
                           with them. New connections are accepted and hang: the target is not
                           dialled until the heal.
    partition(reset=True)  the same, after resetting every open connection (RST to both ends).
    partition(refuse=True) new connections are reset as they arrive instead of hanging.
    heal()                 ends every fault (partition, holds, lags): the bytes held go on in
                           order, and the hanging connections are dialled.
    hold(d, seconds=None)  no byte crosses in direction d ("up", "down" or "both") until
                           release(d), or for `seconds`; the other direction flows.
    release(d)             ends a hold.
    lag(d, seconds)        every byte in direction d is delivered `seconds` after the proxy read
                           it (0 ends it): an asynchronous standby behind by that much.
    reset()                resets every open connection now; new ones go through.
    set_target(t)          new connections go to t (a failover moved the primary); open ones stay.
    stats()                a dict: bytes forwarded and held per direction, connections.
    close()                resets every connection, closes the listener, joins the thread.

A connection ends as its two ends end: an end (EOF) read from one side is passed on with
shutdown(SHUT_WR) once the bytes before it are delivered, so half-closed connections work; the
sockets close when both directions have ended. A reset or error read from one side resets both
ends once the bytes before it are delivered; an error writing to one side resets both at once. A
target that refuses the dial resets the client.

As a subprocess (the harness may run links in another process):

    proxy.py NAME=TARGET[@LISTEN_PORT] ...

TARGET is a port on 127.0.0.1, 127.0.0.1:PORT, or a Unix socket's path. It prints one JSON line,
{"NAME": listening port, ...}, then reads commands on stdin, one a line, and answers each with
one JSON line ({"ok": true, ...} or {"ok": false, "error": ...}):

    NAME|* partition [reset] [refuse] | heal | hold up|down|both [SECONDS] | release up|down|both
         | lag up|down|both SECONDS | reset | target TARGET | stats

It closes every link and exits at the end of its input or on SIGTERM.

In the chaos harness (in-process: harness.py imports proxy from its own directory), per lineage:

    repl = Proxy(f"{primary.dir}/.s.PGSQL.{primary.port}", name=f"{lineage}-repl")
    front = Proxy(f"{primary.dir}/.s.PGSQL.{primary.port}", name=f"{lineage}-clients")

A standby made with `pg_basebackup -R` (which connects directly) gets, appended to its
postgresql.auto.conf before it starts (the last line wins):
primary_conninfo = 'host=127.0.0.1 port=<repl.port> user=postgres application_name=<name>'.
Clients connect to host=127.0.0.1 port=<front.port>; the harness's own SQL stays on the Unix
sockets. When the primary changes (failover, restore), set_target() both to the new primary's
socket and reset() them. Every fault ends with heal(); close() them all at the end of the run.
"""

import collections
import errno
import json
import math
import selectors
import signal
import socket
import struct
import sys
import threading
import time
import traceback

UP, DOWN = "up", "down"
DIRECTIONS = (UP, DOWN)
LOOPBACK = "127.0.0.1"
CHUNK = 65536
# What the proxy reads ahead per direction and connection before it stops reading (then the
# sender's socket buffer fills and the sender blocks, as it would behind a slow network).
BUFFER_CAP = 8 << 20
READ, WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


class ProxyClosed(RuntimeError):
    pass


def parse_target(target):
    """A target: an int (a port on 127.0.0.1), "127.0.0.1:PORT" or "localhost:PORT", a
    (host, port) pair, or a Unix socket's path. Loopback only."""
    if isinstance(target, int):
        return (socket.AF_INET, (LOOPBACK, target))
    if isinstance(target, tuple):
        host, port = target
    elif isinstance(target, str) and target.startswith("/"):
        return (socket.AF_UNIX, target)
    elif isinstance(target, str) and target.isdigit():
        return (socket.AF_INET, (LOOPBACK, int(target)))
    elif isinstance(target, str) and ":" in target:
        host, port = target.rsplit(":", 1)
    else:
        raise ValueError(f"not a target: {target!r}")
    if host == "localhost":
        host = LOOPBACK
    if not host.startswith("127."):
        raise ValueError(f"the proxy stays on loopback, not {host}")
    return (socket.AF_INET, (host, int(port)))


def _directions(direction):
    if direction == "both":
        return DIRECTIONS
    if direction in DIRECTIONS:
        return (direction,)
    raise ValueError(f"a direction is up, down or both, not {direction!r}")


def _reset(sock):
    """Close with an RST, not a FIN: the peer sees a connection reset."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


class _Pipe:
    """One direction of a connection: the bytes read and not yet delivered, and its end."""

    __slots__ = ("chunks", "size", "end_at", "error", "shut")

    def __init__(self):
        self.chunks = collections.deque()  # [time read, bytes], oldest first
        self.size = 0
        self.end_at = None  # when the source's end (EOF, or an error) was read
        self.error = False  # the end was a reset or an error
        self.shut = False  # the end was passed on


class _Conn:
    __slots__ = ("id", "client", "server", "state", "pipes")

    def __init__(self, cid, client):
        self.id = cid
        self.client = client
        self.server = None
        self.state = "pending"  # pending (accepted in a partition, not dialled), connecting, open
        self.pipes = {UP: _Pipe(), DOWN: _Pipe()}

    def src(self, d):
        return self.client if d == UP else self.server

    def dst(self, d):
        return self.server if d == UP else self.client


class Proxy:
    """One link: listens on 127.0.0.1:`port` (0: any free port, then `self.port`), forwards to
    `target` (see parse_target)."""

    def __init__(self, target, port=0, name="proxy"):
        self.name = name
        self._target = parse_target(target)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((LOOPBACK, port))
            self._listener.listen(128)
            self._listener.setblocking(False)
        except OSError:
            self._listener.close()
            raise
        self.port = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, READ, "listener")
        self._sel.register(self._wake_r, READ, "wake")
        self._masks = {}  # socket -> the events it is registered for
        self._conns = {}  # id -> _Conn
        self._next_id = 0
        # The faults: read and written by the proxy's thread only (a call hands it the change).
        self._partitioned = False
        self._refuse = False
        self._held = {UP: None, DOWN: None}  # None, or when the hold ends (math.inf: at release)
        self._lag = {UP: 0.0, DOWN: 0.0}
        self._counts = collections.Counter()
        self._final_stats = None
        # Calls waiting for the thread, and whether the proxy is closed: under _lock.
        self._lock = threading.Lock()
        self._calls = collections.deque()
        self._closed = False
        self._error = None
        self._thread = threading.Thread(target=self._run, name=f"proxy-{name}", daemon=True)
        self._thread.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<Proxy {self.name} 127.0.0.1:{self.port} -> {self._target[1]}>"

    # --- the calls ------------------------------------------------------------------------------
    def partition(self, reset=False, refuse=False):
        def apply():
            self._partitioned = True
            self._refuse = refuse
            if reset:
                self._reset_all()
        self._call(apply)

    def heal(self):
        def apply():
            self._partitioned = False
            self._refuse = False
            self._held = {UP: None, DOWN: None}
            self._lag = {UP: 0.0, DOWN: 0.0}
            for c in list(self._conns.values()):
                if c.state == "pending":
                    self._dial(c)
        self._call(apply)

    def hold(self, direction, seconds=None):
        dirs = _directions(direction)

        def apply():
            until = math.inf if seconds is None else time.monotonic() + seconds
            for d in dirs:
                self._held[d] = until
        self._call(apply)

    def release(self, direction="both"):
        dirs = _directions(direction)

        def apply():
            for d in dirs:
                self._held[d] = None
        self._call(apply)

    def lag(self, direction, seconds):
        dirs = _directions(direction)
        if seconds < 0:
            raise ValueError("a lag is not negative")

        def apply():
            for d in dirs:
                self._lag[d] = float(seconds)
        self._call(apply)

    def reset(self):
        self._call(self._reset_all)

    def set_target(self, target):
        parsed = parse_target(target)

        def apply():
            self._target = parsed
        self._call(apply)

    def stats(self):
        """Bytes forwarded (delivered to the other side) and held (read, not yet delivered) per
        direction; connections accepted, open, hanging (accepted in a partition), and how many
        ended by an end from both sides (closed), by a reset or error (aborted), by the proxy's
        reset (reset), refused in a partition (refused), or as the target refused (dial_failed)."""
        try:
            return self._call(self._stats)
        except ProxyClosed:
            return dict(self._final_stats or {})

    def close(self):
        """Resets every connection, closes the listener and joins the proxy's thread. Idempotent."""
        with self._lock:
            first = not self._closed
            self._closed = True
        if first:
            self._wake()
        if threading.current_thread() is not self._thread:
            self._thread.join()
            try:
                self._wake_w.close()
            except OSError:
                pass

    # --- handing a call to the thread -----------------------------------------------------------
    def _call(self, fn):
        if threading.current_thread() is self._thread:
            return fn()
        done, box = threading.Event(), {}
        with self._lock:
            if self._closed:
                raise ProxyClosed(f"proxy {self.name} is closed")
            self._calls.append((fn, box, done))
        self._wake()
        while not done.wait(0.2):
            if not self._thread.is_alive():
                with self._lock:
                    if (fn, box, done) in self._calls:
                        self._calls.remove((fn, box, done))
                raise ProxyClosed(f"proxy {self.name} stopped: {self._error!r}")
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def _wake(self):
        try:
            self._wake_w.send(b"x")
        except OSError:  # full (a wake is pending anyway) or closed
            pass

    def _run_calls(self):
        """The calls handed over so far; False once the proxy is closed."""
        while True:
            with self._lock:
                if not self._calls:
                    return not self._closed
                fn, box, done = self._calls.popleft()
            try:
                box["value"] = fn()
            except Exception as e:
                box["error"] = e
            done.set()

    # --- the thread -----------------------------------------------------------------------------
    def _run(self):
        try:
            while self._run_calls():
                now = time.monotonic()
                for d in DIRECTIONS:
                    if self._held[d] is not None and self._held[d] <= now:
                        self._held[d] = None
                timeout = self._arm(now)
                for key, mask in self._sel.select(timeout):
                    if key.data == "wake":
                        try:
                            while self._wake_r.recv(4096):
                                pass
                        except OSError:
                            pass
                    elif key.data == "listener":
                        self._accept()
                    else:
                        self._event(key.data, key.fileobj, mask)
                self._settle()
        except BaseException as e:
            self._error = e
            print(f"proxy {self.name}: {e!r}", file=sys.stderr)
            traceback.print_exc()
        finally:
            self._stop()

    def _stop(self):
        with self._lock:
            self._closed = True
            calls, self._calls = list(self._calls), collections.deque()
        for c in list(self._conns.values()):
            self._drop(c, reset=True)
        self._final_stats = self._stats()
        for _, box, done in calls:
            box["error"] = ProxyClosed(f"proxy {self.name} is closed")
            done.set()
        self._sel.close()
        self._listener.close()
        self._wake_r.close()

    def _blocked(self, d):
        return self._partitioned or self._held[d] is not None

    def _arm(self, now):
        """Registers each socket for what the proxy wants of it now; returns how long the select
        may wait (until a hold ends or a lagging byte is due)."""
        timeout = 1.0
        for d in DIRECTIONS:
            if self._held[d] is not None:
                timeout = min(timeout, self._held[d] - now)
        want = {}
        for c in self._conns.values():
            masks = {c.client: 0}
            if c.server is not None:
                masks[c.server] = WRITE if c.state == "connecting" else 0
            for d in DIRECTIONS:
                p, src, dst = c.pipes[d], c.src(d), c.dst(d)
                if (src is not None and (c.state == "open" or d == UP) and p.end_at is None
                        and p.size < BUFFER_CAP):
                    masks[src] |= READ
                if c.state != "open" or self._blocked(d):
                    continue
                if p.chunks:
                    due = p.chunks[0][0] + self._lag[d]
                    if due <= now:
                        masks[dst] |= WRITE
                    else:
                        timeout = min(timeout, due - now)
                elif p.end_at is not None and not p.shut:
                    timeout = min(timeout, p.end_at + self._lag[d] - now)
            for s, m in masks.items():
                if m:
                    want[s] = (m, c)
        for s in list(self._masks):
            if s not in want:
                self._sel.unregister(s)
                del self._masks[s]
        for s, (m, c) in want.items():
            old = self._masks.get(s)
            if old is None:
                self._sel.register(s, m, c)
            elif old != m:
                self._sel.modify(s, m, c)
            self._masks[s] = m
        return max(0.0, timeout)

    def _accept(self):
        while True:
            try:
                s, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # out of descriptors, say: the client waits in the backlog
                print(f"proxy {self.name}: accept: {e!r}", file=sys.stderr)
                return
            self._counts["accepted"] += 1
            if self._partitioned and self._refuse:
                self._counts["refused"] += 1
                _reset(s)
                continue
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._next_id += 1
            c = _Conn(self._next_id, s)
            self._conns[c.id] = c
            if not self._partitioned:
                self._dial(c)

    def _dial(self, c):
        family, address = self._target
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setblocking(False)
        if family == socket.AF_INET:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.server = s
        try:
            err = s.connect_ex(address)
        except OSError as e:
            err = e.errno
        if err == 0:
            c.state = "open"
        elif err == errno.EINPROGRESS and family == socket.AF_INET:
            c.state = "connecting"
        else:  # refused, no such socket, or a Unix socket's backlog full
            self._counts["dial_failed"] += 1
            self._drop(c, reset=True)

    def _event(self, c, s, mask):
        if self._conns.get(c.id) is not c:
            return  # dropped earlier in this round
        try:
            if c.state == "connecting" and s is c.server:
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    self._counts["dial_failed"] += 1
                    self._drop(c, reset=True)
                else:
                    c.state = "open"
                return
            # An error or hang-up is reported as both events: act only on the one asked for.
            wanted = self._masks.get(s, 0)
            if mask & wanted & READ:
                self._recv(c, s)
            if self._conns.get(c.id) is c and mask & wanted & WRITE:
                self._send(c, s)
        except OSError:
            self._counts["aborted"] += 1
            self._drop(c, reset=True)

    def _recv(self, c, s):
        d = UP if s is c.client else DOWN
        p = c.pipes[d]
        try:
            data = s.recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = None
        if data:
            p.chunks.append([time.monotonic(), data])
            p.size += len(data)
            return
        if c.state == "pending" and (data is None or not p.size):
            # Gave up, having sent nothing, while it hung in a partition: the target never knew.
            # (What a client sent before its end is delivered at the heal, end included.)
            self._counts["closed"] += 1
            self._drop(c, reset=data is None)
            return
        p.end_at = time.monotonic()
        p.error = data is None

    def _send(self, c, s):
        d = UP if s is c.server else DOWN
        p = c.pipes[d]
        if self._blocked(d):
            return
        now = time.monotonic()
        while p.chunks:
            chunk = p.chunks[0]
            if chunk[0] + self._lag[d] > now:
                return
            try:
                n = s.send(chunk[1])
            except (BlockingIOError, InterruptedError):
                return
            p.size -= n
            self._counts[f"bytes_{d}"] += n
            if n < len(chunk[1]):
                chunk[1] = chunk[1][n:]
                return
            p.chunks.popleft()

    def _settle(self):
        """Passes on the ends whose bytes are all delivered; closes the connections that ended
        both ways."""
        now = time.monotonic()
        for c in list(self._conns.values()):
            if c.state != "open":
                continue
            for d in DIRECTIONS:
                p = c.pipes[d]
                if (p.end_at is None or p.shut or p.chunks or self._blocked(d)
                        or p.end_at + self._lag[d] > now):
                    continue
                if p.error:
                    self._counts["aborted"] += 1
                    self._drop(c, reset=True)
                    break
                try:
                    c.dst(d).shutdown(socket.SHUT_WR)
                except OSError:
                    self._counts["aborted"] += 1
                    self._drop(c, reset=True)
                    break
                p.shut = True
            else:
                if c.pipes[UP].shut and c.pipes[DOWN].shut:
                    self._counts["closed"] += 1
                    self._drop(c, reset=False)

    def _drop(self, c, reset):
        for s in (c.client, c.server):
            if s is None:
                continue
            if s in self._masks:
                self._sel.unregister(s)
                del self._masks[s]
            if reset:
                _reset(s)
            else:
                s.close()
        self._conns.pop(c.id, None)

    def _reset_all(self):
        for c in list(self._conns.values()):
            self._counts["reset"] += 1
            self._drop(c, reset=True)

    def _stats(self):
        st = {k: self._counts[k] for k in ("accepted", "closed", "aborted", "reset", "refused", "dial_failed")}
        for d in DIRECTIONS:
            st[f"bytes_{d}"] = self._counts[f"bytes_{d}"]
            st[f"held_{d}"] = sum(c.pipes[d].size for c in self._conns.values())
            st[f"hold_{d}"] = self._held[d] is not None
            st[f"lag_{d}"] = self._lag[d]
        st["open"] = sum(1 for c in self._conns.values() if c.state != "pending")
        st["hanging"] = sum(1 for c in self._conns.values() if c.state == "pending")
        st["partitioned"] = self._partitioned
        return st


# --- as a subprocess ------------------------------------------------------------------------------
def _command(proxies, line):
    words = line.split()
    if len(words) < 2:
        raise ValueError("a command is: NAME|* VERB [ARGS]")
    name, verb, args = words[0], words[1], words[2:]
    if name == "*":
        targets = list(proxies.values())
    elif name in proxies:
        targets = [proxies[name]]
    else:
        raise ValueError(f"no link {name!r}")
    out = {}
    for p in targets:
        if verb == "partition":
            bad = set(args) - {"reset", "refuse"}
            if bad:
                raise ValueError(f"partition takes reset and refuse, not {sorted(bad)}")
            p.partition(reset="reset" in args, refuse="refuse" in args)
        elif verb == "heal" and not args:
            p.heal()
        elif verb == "hold" and len(args) in (1, 2):
            p.hold(args[0], float(args[1]) if len(args) == 2 else None)
        elif verb == "release" and len(args) == 1:
            p.release(args[0])
        elif verb == "lag" and len(args) == 2:
            p.lag(args[0], float(args[1]))
        elif verb == "reset" and not args:
            p.reset()
        elif verb == "target" and len(args) == 1:
            p.set_target(args[0])
        elif verb == "stats" and not args:
            out[p.name] = p.stats()
        else:
            raise ValueError(f"not a command: {line.strip()!r}")
    return {"ok": True, **({"stats": out} if out else {})}


def main(argv):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    proxies = {}
    try:
        for spec in argv:
            name, _, rest = spec.partition("=")
            target, _, port = rest.partition("@")
            if not name or not target:
                raise ValueError(f"a link is NAME=TARGET[@LISTEN_PORT], not {spec!r}")
            proxies[name] = Proxy(target, int(port or 0), name=name)
        print(json.dumps({n: p.port for n, p in proxies.items()}), flush=True)
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                answer = _command(proxies, line)
            except (ValueError, ProxyClosed) as e:
                answer = {"ok": False, "error": str(e)}
            print(json.dumps(answer), flush=True)
    finally:
        for p in proxies.values():
            p.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
