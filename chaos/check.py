#!/usr/bin/python3
"""The checker of `make chaos`, independent of the extension and of the harness.

It reads only files: the acknowledged ids (acked/*.txt, one line per request, starting
`sent_at_ns acked_at_ns lineage kind id`, then the request's token, the server that acknowledged
it, the operation and the WAL insert position after it), the final contents of every lineage
(final/LINEAGE-KIND.txt: `id token server`, the server that minted the row), the clients' errors
(errors/*.txt: at_ns SQLSTATE message), the fault log (faults.jsonl) and topology.json. It decodes
snowflake ids itself from the layout's bit widths, and compares UUIDs as 128-bit numbers.

Every request carries a token no other request has, and every judgement is made per token, so
that two violations never cancel out (a lost row and a row minted again are two findings).

Safety (models: Jepsen's unique-ids checker, Maelstrom's unique-id workload, AtlasDB's timestamp
property):
- duplicates, fleet-wide, per kind: an id carried by two tokens (acknowledged or stored), and a
  token stored twice;
- order violations: an id not greater than one of its lineage (of its shard, for snowflake ids,
  which are strictly ordered per shard and k-sorted across shards) acknowledged before its
  request was sent;
- acknowledged rows missing from the final data, or stored with another id.

With synchronous replication every count must be 0. With asynchronous replication a row the
failover away from its primary lost is excused when the standby may not have had its commit: the
standby's WAL position, sampled before the kill, is at or below an upper bound of the commit's
position (the next statement's insert position on the same connection and server; none known,
no bound), and the request was sent before the failover. A failover whose standby position the
harness could not sample excuses nothing. A copy of an id is excused as re-minted only when the
copy before it was lost so excused and the new copy came from the standby that failover promoted,
in a request sent after the failover.

Liveness: after the nemesis the harness heals the fleet (topology.json: healed_ns, and each
lineage's clock debt: how far its primary's clock lay behind the ids it may hold). Every lineage
must acknowledge each kind of id, for a request sent after the heal, within its clock debt plus
LIVENESS_ALLOWANCE_S. Safety and liveness are reported apart; the run holds only with both, with
every error documented, and with no harness error.

Also reported: errors by SQLSTATE, and the longest stall after each kind of fault (from the fault
to the first acknowledgement, on the faulted lineage, of a request sent after it).

    check.py WORK_DIR REPORT_DIR       # exit 0 only when the run holds
"""

import array
import bisect
import collections
import glob
import json
import math
import os
import sys
import uuid

# See the module's docstring; the harness waits as long (chaos/harness.py).
LIVENESS_ALLOWANCE_S = 30.0

# Errors a client may see under these faults, and why (docs/reliability.md lists the same).
DOCUMENTED = {
    "connection": "the server was killed, stopped, paused past the connect timeout, or is restarting",
    "57P01": "terminating connection due to administrator command (a shutdown)",
    "57P02": "terminating connection because of crash of another server process",
    "57P03": "the database system is starting up, or in recovery",
    "25006": "a read-only transaction: the server was a standby when the statement began",
    "58000": "the clock stepped back further than snowflake_id.max_rewind_wait, or a restored database's floor lies further ahead of the clock than a call waits: the call refuses, and later calls mint again",
}

# Not faults: the harness's own records in faults.jsonl.
NOT_FAULTS = ("heal", "harness-error")
# Faults that promote a standby: a plain failover, and one whose standby was held back 1-3 s.
FAILOVERS = ("failover", "lagged_failover")

Ack = collections.namedtuple("Ack", "sent done lineage kind key token server op lsn source")
# The ids of one burst statement, which share every field but the id and its WAL position: `keys`
# and `lsns` are arrays, and the id at index k has the token `token.k` (as its line says). An
# hour's run acknowledges tens of millions of burst ids; one record each would not fit in memory.
Burst = collections.namedtuple("Burst", "sent done lineage kind token server op source keys lsns")
Row = collections.namedtuple("Row", "lineage kind key token server")


def ids_of(a):
    """(token, key, lsn) of every id an acknowledgement carries."""
    if isinstance(a, Burst):
        return ((f"{a.token}.{k}", key, a.lsns[k]) for k, key in enumerate(a.keys))
    return ((a.token, a.key, a.lsn),)


def keys_of(a):
    return a.keys if isinstance(a, Burst) else (a.key,)


def id_count(a):
    return len(a.keys) if isinstance(a, Burst) else 1


def read_lines(pattern):
    """Whole lines only: a line without its newline was cut by the harness's end."""
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            for line in f:
                if line.endswith("\n") and line.strip():
                    yield path, line[:-1]


def id_key(kind, text):
    """An id as an integer that orders as the id does."""
    return int(text) if kind == "snowflake" else uuid.UUID(text).int


def parse_lsn(text):
    """A WAL position 'X/Y' as an integer; None for none."""
    if text in (None, "", "-", "None"):
        return None
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def parse_ack(line, source, n):
    """One acknowledged-id line; None for one that is not whole."""
    parts = line.split()
    if len(parts) < 5:
        return None
    sent, done, lineage, kind, text = parts[:5]
    token = parts[5] if len(parts) > 5 else f"?{source}:{n}"
    server = parts[6] if len(parts) > 6 else "?"
    op = parts[7] if len(parts) > 7 else "insert"
    lsn = parse_lsn(parts[8]) if len(parts) > 8 else None
    return Ack(int(sent), int(done), sys.intern(lineage), sys.intern(kind), id_key(kind, text), token,
               sys.intern(server), sys.intern(op), lsn, source)


def parse_row(lineage, kind, line):
    parts = line.split()
    return Row(lineage, kind, id_key(kind, parts[0]), parts[1] if len(parts) > 1 else None,
               parts[2] if len(parts) > 2 else "?")


def shard_of(kind, key, layout):
    """A snowflake id's shard; None for a UUIDv7."""
    if kind == "snowflake":
        _, shard_bits, seq_bits = layout
        return (key >> seq_bits) & ((1 << shard_bits) - 1)
    return None


def group_of(kind, lineage, key, layout):
    """The order group: a lineage's shard for snowflake ids, the lineage for UUIDv7."""
    shard = shard_of(kind, key, layout)
    return (lineage, kind) if shard is None else (lineage, kind, shard)


def commit_bounds(acked):
    """Per acknowledged INSERT, an upper bound of the WAL position of its commit record: the next
    insert position the same client saw on the same server (the commit lies before it); math.inf
    where none is known. An id asked for alone (a SELECT, each id of a burst) is bounded by its
    own position, the reservation having been logged before the id was handed out
    (may_be_unreplicated)."""
    bound = {}
    by_source = collections.defaultdict(list)
    for a in acked:
        by_source[a.source].append(a)
    for seq in by_source.values():
        seq.sort(key=lambda a: a.sent)
        for i, a in enumerate(seq):
            if a.op != "insert":
                continue
            bound[a.token] = math.inf
            for j in range(i + 1, len(seq)):  # the next one, nearly always
                b = seq[j]
                if b.server == a.server and (isinstance(b, Burst) or b.lsn is not None):
                    bound[a.token] = b.lsns[0] if isinstance(b, Burst) else b.lsn
                    break
    return bound


def judge(topo, acked, rows, faults, errors):
    """The report of a run. acked: Ack records; rows: Row records of the final data; faults: the
    fault log's records; errors: a Counter of SQLSTATEs."""
    layout = tuple(int(x) for x in topo["layout"].split("/"))
    mode = topo["mode"]
    failover_of = {f["server"]: f for f in faults if f["kind"] in FAILOVERS}
    standby_lsn = {server: parse_lsn(f.get("standby_flush_lsn")) for server, f in failover_of.items()}

    # --- losses, per token -----------------------------------------------------------------
    stored = collections.defaultdict(list)  # (kind, token) -> rows
    for r in rows:
        stored[(r.kind, r.token)].append(r)
    bounds = commit_bounds(acked)

    def failover_before(a):
        """The failover away from a's server, where one may have lost a's ids: a was sent before
        it, in async mode, and the standby's position was sampled before the kill."""
        f = failover_of.get(a.server) if mode == "async" else None
        if f is None or a.sent >= f["at_ns"] or standby_lsn[a.server] is None:
            return None
        return f

    def may_be_unreplicated(a, token, lsn):
        """The failover away from a's server may have lost what made the id durable: a was sent
        before that failover, and its standby's position sampled before the kill lies below the
        id's bound (an INSERT's commit, commit_bounds; an id asked for alone, its own position).
        Without a sample nothing bounds the loss, and nothing is excused."""
        f = failover_before(a)
        if f is None:
            return None
        bound = bounds.get(token, math.inf) if a.op == "insert" else (math.inf if lsn is None else lsn)
        return f if bound > standby_lsn[a.server] else None

    lost, changed = [], 0
    excused_copy = {}  # token -> the failover that excuses its loss
    for a in acked:
        if a.op != "insert":
            if failover_before(a) is not None:
                for token, _, lsn in ids_of(a):
                    f = may_be_unreplicated(a, token, lsn)
                    if f is not None:
                        excused_copy[token] = f
            continue
        kept = stored.get((a.kind, a.token), [])
        if kept and all(r.key == a.key for r in kept):
            continue
        if kept:
            changed += 1  # stored, but with another id: never excused
        f = may_be_unreplicated(a, a.token, a.lsn) if not kept else None
        if f is not None:
            excused_copy[a.token] = f
        lost.append({"lineage": a.lineage, "kind": a.kind, "token": a.token, "server": a.server,
                     "acked_at_ns": a.done, "changed": bool(kept),
                     "ms_before_failover": (failover_of[a.server]["at_ns"] - a.done) / 1e6
                     if a.server in failover_of else None,
                     "explained": f is not None})

    # --- duplicates, per id over tokens ----------------------------------------------------
    # First the ids seen more than once (acknowledged, or stored under a token that was not
    # acknowledged with that id), by one set of keys per kind; then, for those ids only, every
    # copy: a token, acknowledged or stored or both, with when it was sent (a row stored without
    # an acknowledgement sorts last) and the server that minted it.
    seen = collections.defaultdict(set)
    again = set()  # (kind, key)
    for a in acked:
        kind_seen = seen[a.kind]
        for key in keys_of(a):
            if key in kind_seen:
                again.add((a.kind, key))
            else:
                kind_seen.add(key)
    for r in rows:
        if r.key in seen[r.kind]:
            again.add((r.kind, r.key))
        seen[r.kind].add(r.key)
    seen.clear()
    copies = collections.defaultdict(dict)  # (kind, key) -> token -> (sent, server, lineage)
    stored_twice = collections.Counter()
    if again:
        for a in acked:
            if any((a.kind, k) in again for k in keys_of(a)):
                for token, key, _ in ids_of(a):
                    if (a.kind, key) in again:
                        copies[(a.kind, key)][token] = (a.sent, a.server, a.lineage)
    for (kind, token), kept in stored.items():
        if len(kept) > 1:
            stored_twice[kind] += len(kept) - 1
        for r in kept:
            if (kind, r.key) in again:
                copies[(kind, r.key)].setdefault(token, (math.inf, r.server, r.lineage))
    duplicates = collections.Counter()
    re_minted = collections.Counter()
    duplicate_examples = []
    for (kind, key), by_token in copies.items():
        if len(by_token) < 2:
            continue
        ordered = sorted(by_token.items(), key=lambda t: (t[1][0], t[0]))
        for (old_token, (_, _, old_lineage)), (new_token, (new_sent, new_server, new_lineage)) in zip(ordered, ordered[1:]):
            f = excused_copy.get(old_token)
            if (f is not None and new_server == f.get("promoted") and new_lineage == old_lineage
                    and f["at_ns"] <= new_sent):
                re_minted[kind] += 1
            else:
                duplicates[kind] += 1
                if len(duplicate_examples) < 10:
                    duplicate_examples.append({"kind": kind, "id": str(key), "tokens": [old_token, new_token]})
    acked_twice = sum(1 for by_token in copies.values() if sum(1 for t in by_token.values() if t[0] != math.inf) > 1)

    # --- order: requests by send time against acknowledgements by acknowledgement time --------
    # Copies whose loss (or re-mint) a failover excuses are left out in asynchronous mode.
    excused_bases = {t.rsplit(".", 1)[0] for t in excused_copy}

    def kept_ids(a):
        """(token or None, key) of a's ids that no failover excuses (the token only where some
        id of a burst is excused: building it for every burst id costs memory and time)."""
        if isinstance(a, Burst):
            if a.token in excused_bases:
                return [(t, k) for t, k, _ in ids_of(a) if t not in excused_copy]
            return ((None, k) for k in a.keys)
        return () if a.token in excused_copy else ((a.token, a.key),)

    # A burst stays while some id of it is not excused (for the stalls below as for the order).
    kept = [a for a in acked
            if (any(True for _ in kept_ids(a)) if isinstance(a, Burst) else a.token not in excused_copy)]
    by_done = sorted(kept, key=lambda a: a.done)
    by_sent = sorted(kept, key=lambda a: a.sent)
    # The highest id acknowledged so far, per order group (group_of): per lineage and kind, by
    # shard (None for UUIDv7s).
    highest = collections.defaultdict(dict)
    order_violations, examples = 0, []
    i = 0
    for a in by_sent:
        while i < len(by_done) and by_done[i].done < a.sent:
            d = by_done[i]
            high = highest[(d.lineage, d.kind)]
            for _, key in kept_ids(d):
                shard = shard_of(d.kind, key, layout)
                top = high.get(shard)
                if top is None or key > top:
                    high[shard] = key
            i += 1
        high = highest[(a.lineage, a.kind)]
        for k, (token, key) in enumerate(kept_ids(a)):
            top = high.get(shard_of(a.kind, key, layout))
            if top is not None and key <= top:
                order_violations += 1
                if len(examples) < 10:
                    g = group_of(a.kind, a.lineage, key, layout)
                    examples.append({"group": list(map(str, g)), "id": str(key), "earlier_acked": str(top),
                                     "sent_at_ns": a.sent, "token": token or f"{a.token}.{k}"})

    # --- stalls after each fault -----------------------------------------------------------
    # The first acknowledgement, on the faulted lineage, of a request sent after it (per lineage,
    # requests by send time and the earliest acknowledgement from each on). A fault after which
    # the lineage never acknowledged again stalls to the run's end.
    sent_times, earliest_done = {}, {}
    for lineage in {a.lineage for a in kept}:
        acks = sorted((a.sent, a.done) for a in kept if a.lineage == lineage)
        sent_times[lineage] = [x[0] for x in acks]
        suffix, best = [0] * len(acks), None
        for j in range(len(acks) - 1, -1, -1):
            best = acks[j][1] if best is None else min(best, acks[j][1])
            suffix[j] = best
        earliest_done[lineage] = suffix
    real_faults = [f for f in faults if f["kind"] not in NOT_FAULTS]
    max_stall = collections.defaultdict(float)
    for f in real_faults:
        times = sent_times.get(f["lineage"], [])
        j = bisect.bisect_left(times, f["at_ns"])
        back = earliest_done[f["lineage"]][j] if j < len(times) else topo["stopped_ns"]
        max_stall[f["kind"]] = max(max_stall[f["kind"]], (back - f["at_ns"]) / 1e6)

    # --- liveness: every lineage acknowledges again after the heal, within its bound ----------
    healed = topo.get("healed_ns")
    if healed is None:  # a harness before the heal: after the lineage's last fault
        last = {}
        for f in real_faults:
            last[f["lineage"]] = max(last.get(f["lineage"], 0), f["at_ns"])
    debt = topo.get("clock_debt_s", {})
    allowance = topo.get("liveness_allowance_s", LIVENESS_ALLOWANCE_S)
    recovery_ms, bound_ms, unrecovered = {}, {}, []
    for lineage in sorted(topo["lineages"]):
        since = healed if healed is not None else last.get(lineage, 0)
        bound_ms[lineage] = round((debt.get(lineage, 0.0) + allowance) * 1000, 1)
        for kind in ("snowflake", "uuidv7"):
            first = min((a.done for a in acked if a.lineage == lineage and a.kind == kind and a.sent >= since),
                        default=None)
            name = f"{lineage}/{kind}"
            recovery_ms[name] = None if first is None else round((first - since) / 1e6, 1)
            if first is None or (healed is not None and recovery_ms[name] > bound_ms[lineage]):
                unrecovered.append(name)

    by_kind = collections.Counter()
    for a in acked:
        by_kind[a.kind] += id_count(a)
    fault_counts = collections.Counter(f["kind"] for f in real_faults)
    harness_errors = sum(1 for f in faults if f["kind"] == "harness-error")
    undocumented = {k: n for k, n in errors.items() if k not in DOCUMENTED}
    lost_unexplained = sum(1 for l in lost if not l["explained"])
    safety = not (sum(duplicates.values()) or sum(stored_twice.values()) or order_violations
                  or lost_unexplained or changed)
    liveness = not unrecovered
    failovers = [f for f in faults if f["kind"] in FAILOVERS]

    def lag_bytes(f):
        p, s = parse_lsn(f.get("primary_flush_lsn")), parse_lsn(f.get("standby_flush_lsn"))
        return None if p is None or s is None else p - s

    report = {
        "mode": mode, "seed": topo["seed"], "duration_s": topo["duration_s"], "sabotage": topo["sabotage"],
        "acknowledged": sum(by_kind.values()),
        "acknowledged_by_kind": dict(by_kind),
        "duplicates": {kind: duplicates[kind] + stored_twice[kind] for kind in ("snowflake", "uuidv7")},
        "duplicates_stored": sum(stored_twice.values()),
        "duplicates_acknowledged": acked_twice,
        "duplicate_examples": duplicate_examples,
        "order_violations": order_violations,
        "order_violation_examples": examples,
        "lost_acknowledged": len(lost),
        "lost_changed": changed,
        "re_minted": sum(re_minted.values()),
        "lost_max_ms_before_failover": max((l["ms_before_failover"] or 0 for l in lost), default=0),
        "lost_unexplained": lost_unexplained,
        "lost_examples": lost[:10],
        "unrecovered": unrecovered,
        "recovery_after_heal_ms": recovery_ms,
        "liveness_bound_ms": bound_ms,
        "failover_replay_lag_ms": [f.get("replay_lag_ms") for f in failovers],
        "failover_lag_bytes": [lag_bytes(f) for f in failovers],
        "faults": dict(fault_counts),
        "overlapping_faults": sum(1 for f in real_faults if f.get("overlap_with")),
        "harness_errors": harness_errors,
        "errors": dict(errors),
        "undocumented_errors": undocumented,
        "max_stall_ms": {k: round(v, 1) for k, v in sorted(max_stall.items())},
        "safety": "holds" if safety else "VIOLATED",
        "liveness": "holds" if liveness else "VIOLATED",
    }
    report["holds"] = safety and liveness and not undocumented and not harness_errors and report["acknowledged"] > 0
    return report


def load(work):
    """The run's files, as judge() takes them."""
    with open(os.path.join(work, "topology.json")) as f:
        topo = json.load(f)
    acked = []
    sources = {}
    last = None  # the burst being read, and its first line's first fields
    # A line cut by the harness's own end is never read (read_lines), so never acknowledged.
    for n, (path, line) in enumerate(read_lines(os.path.join(work, "acked", "*.txt"))):
        if path not in sources:
            sources[path], last = sys.intern(os.path.basename(path)), None
        parts = line.split()
        if len(parts) >= 9 and parts[7] == "burst" and parts[3] == "snowflake" and parts[8] not in ("-", "None"):
            # One record per burst statement: its ids' lines follow one another, from one server,
            # with one send and acknowledgement time and tokens `base.0`, `base.1`, ...
            base, _, k = parts[5].rpartition(".")
            if (last is not None and last[1] == parts[:3] and last[0].token == base
                    and last[0].server == parts[6] and k == str(len(last[0].keys))):
                last[0].keys.append(int(parts[4]))
                last[0].lsns.append(parse_lsn(parts[8]))
                continue
            if base and k == "0":
                b = Burst(int(parts[0]), int(parts[1]), sys.intern(parts[2]), sys.intern(parts[3]), base,
                          sys.intern(parts[6]), sys.intern(parts[7]), sources[path],
                          array.array("q", [int(parts[4])]), array.array("Q", [parse_lsn(parts[8])]))
                acked.append(b)
                last = (b, parts[:3])
                continue
        last = None
        a = parse_ack(line, sources[path], n)
        if a is not None:
            acked.append(a)
    rows = []
    for path in glob.glob(os.path.join(work, "final", "*.txt")):
        lineage, kind = os.path.basename(path)[:-4].split("-")
        rows.extend(parse_row(lineage, kind, line) for _, line in read_lines(path))
    faults = [json.loads(l) for _, l in read_lines(os.path.join(work, "faults.jsonl"))]
    errors = collections.Counter(l.split()[1] for _, l in read_lines(os.path.join(work, "errors", "*.txt")))
    return topo, acked, rows, faults, errors


def main(work, out):
    report = judge(*load(work))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(markdown(report))
    print(markdown(report))
    return 0 if report["holds"] else 1


def markdown(r):
    rows = [
        ("verdict", "holds" if r["holds"] else "**VIOLATED**"),
        ("safety / liveness", f"{r['safety']} / {r['liveness']}"),
        ("mode / seed / duration", f"{r['mode']} / {r['seed']} / {r['duration_s']} s"),
        ("sabotage", r["sabotage"] or "none"),
        ("ids acknowledged", f"{r['acknowledged']} ({', '.join(f'{k} {v}' for k, v in sorted(r['acknowledged_by_kind'].items()))})"),
        ("duplicates", ", ".join(f"{k} {v}" for k, v in sorted(r["duplicates"].items()))),
        ("order violations", r["order_violations"]),
        ("acknowledged rows lost", r["lost_acknowledged"]),
        ("of them, id minted again", r["re_minted"]),
        ("lost rows: longest time from acknowledgement to failover (ms)", round(r["lost_max_ms_before_failover"], 1)),
        ("lost rows not explained by a failover (standby's WAL position)", r["lost_unexplained"]),
        ("lineages that did not acknowledge within their bound after the heal", ", ".join(r["unrecovered"]) or "none"),
        ("first acknowledgement after the heal (ms; bound per lineage)", ", ".join(f"{k} {'never' if v is None else v}" for k, v in r["recovery_after_heal_ms"].items()) + " (" + ", ".join(f"{k} {v}" for k, v in r["liveness_bound_ms"].items()) + ")"),
        ("standbys' replay lag at each failover (ms)", ", ".join("?" if v is None else f"{v:.0f}" for v in r["failover_replay_lag_ms"]) or "no failover"),
        ("standbys' WAL behind the primary at each failover (bytes)", ", ".join("?" if v is None else str(v) for v in r["failover_lag_bytes"]) or "no failover"),
        ("faults", ", ".join(f"{k} {v}" for k, v in sorted(r["faults"].items()))
         + f" ({r.get('overlapping_faults', 0)} of them during another)"),
        ("errors by SQLSTATE", ", ".join(f"{k} {v}" for k, v in sorted(r["errors"].items())) or "none"),
        ("longest stall after each fault (ms)", ", ".join(f"{k} {v}" for k, v in r["max_stall_ms"].items())),
    ]
    return "# make chaos\n\n| | |\n|---|---|\n" + "".join(f"| {a} | {b} |\n" for a, b in rows)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
