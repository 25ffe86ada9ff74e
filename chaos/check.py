#!/usr/bin/python3
"""The checker of `make chaos`, independent of the extension and of the harness.

It reads only files: the acknowledged ids (acked/*.txt, one line per id: sent_at_ns acked_at_ns
lineage kind id), the final contents of every lineage (final/LINEAGE-KIND.txt), the clients'
errors (errors/*.txt: at_ns SQLSTATE message) and the fault log (faults.jsonl). It decodes
snowflake ids itself from the layout's bit widths, and compares UUIDs as 128-bit numbers.

What it counts (models: Jepsen's unique-ids checker, Maelstrom's unique-id workload, AtlasDB's
timestamp property):
- duplicates, fleet-wide, per kind: an id acknowledged twice, or stored twice in the final data;
- order violations: an id not greater than one of its lineage (of its shard, for snowflake ids,
  which are strictly ordered per shard and k-sorted across shards) acknowledged before its
  request was sent;
- acknowledged rows missing from the final data;
- errors by SQLSTATE, each of which must be in DOCUMENTED;
- the longest stall after each kind of fault: from the fault to the first acknowledgement, on
  the faulted lineage, of a request sent after it.

With synchronous replication every count must be 0. With asynchronous replication, an
acknowledged row lost in a failover is counted, and explained if it was acknowledged by the
primary failed away from, within the standby's replay lag (sampled before the kill) plus
LOST_MARGIN_MS; an id minted again after its row was lost is reported as re-minted. Every other
violation fails the run, and so does a lineage that never acknowledged a kind of id again after
its last fault.

    check.py WORK_DIR REPORT_DIR       # exit 0 only when the run holds
"""

import bisect
import collections
import glob
import json
import os
import sys
import uuid

# A lost row counts as lost in a failover if it was acknowledged at most this long, beyond the
# standby's replay lag sampled just before the kill, before the failover.
LOST_MARGIN_MS = 5000

# Errors a client may see under these faults, and why (docs/reliability.md lists the same).
DOCUMENTED = {
    "connection": "the server was killed, stopped, paused past the connect timeout, or is restarting",
    "57P01": "terminating connection due to administrator command (a shutdown)",
    "57P02": "terminating connection because of crash of another server process",
    "57P03": "the database system is starting up, or in recovery",
    "25006": "a read-only transaction: the server was a standby when the statement began",
    "58000": "the clock stepped back further than snowflake_id.max_rewind_wait, or a restored database's floor lies further ahead of the clock than a call waits: the call refuses, and later calls mint again",
}


def read_lines(pattern):
    """Whole lines only: a line without its newline was cut by the harness's end."""
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            for line in f:
                if line.endswith("\n") and line.strip():
                    yield line[:-1]


def id_key(kind, text):
    """An id as an integer that orders as the id does."""
    return int(text) if kind == "snowflake" else uuid.UUID(text).int


def group_of(kind, lineage, key, layout):
    """The order group: a lineage's shard for snowflake ids, the lineage for UUIDv7."""
    if kind == "snowflake":
        _, shard_bits, seq_bits = layout
        return (lineage, kind, (key >> seq_bits) & ((1 << shard_bits) - 1))
    return (lineage, kind)


def main(work, out):
    topo = json.load(open(os.path.join(work, "topology.json")))
    layout = tuple(int(x) for x in topo["layout"].split("/"))
    mode = topo["mode"]
    acked = []
    for line in read_lines(os.path.join(work, "acked", "*.txt")):
        parts = line.split()
        if len(parts) != 5:
            continue  # a line cut by the harness's own end: never an acknowledgement
        sent, done, lineage, kind, text = parts
        acked.append((int(sent), int(done), sys.intern(lineage), sys.intern(kind), id_key(kind, text)))
    final = collections.Counter()
    for path in glob.glob(os.path.join(work, "final", "*.txt")):
        lineage, kind = os.path.basename(path)[:-4].split("-")
        for line in read_lines(path):
            final[(kind, id_key(kind, line))] += 1
    faults = [json.loads(l) for l in read_lines(os.path.join(work, "faults.jsonl"))]
    errors = collections.Counter(l.split()[1] for l in read_lines(os.path.join(work, "errors", "*.txt")))

    # Acknowledged rows missing from the final data (with multiplicity).
    acked_count = collections.Counter((a[3], a[4]) for a in acked)
    lost_keys = {k: n - final.get(k, 0) for k, n in acked_count.items() if n > final.get(k, 0)}
    # The events that change a lineage's primary: a row acknowledged by a primary can only be
    # lost in the failover away from it, within the standby's replay lag then (plus a margin for
    # a lag sampled before the kill). A row lost in a crash restart, a restore, or long before a
    # failover is a violation in either mode.
    changes = collections.defaultdict(list)
    for f in faults:
        if f["kind"] in ("failover", "restore"):
            changes[f["lineage"]].append(f)
    lost = []
    remaining = dict(lost_keys)
    for a in sorted(acked, key=lambda a: a[1]):  # the earliest acknowledgements are the lost ones
        k = (a[3], a[4])
        if remaining.get(k, 0) > 0:
            remaining[k] -= 1
            nxt = next((f for f in changes[a[2]] if f["at_ns"] >= a[1]), None)
            before = (nxt["at_ns"] - a[1]) / 1e6 if nxt and nxt["kind"] == "failover" else None
            window = (nxt.get("replay_lag_ms") or 0) + LOST_MARGIN_MS if before is not None else 0
            lost.append({"lineage": a[2], "kind": a[3], "acked_at_ns": a[1], "ms_before_failover": before,
                         "explained": before is not None and before <= window,
                         "re_minted": final.get(k, 0) > 0})
    # Duplicates: an id stored twice anywhere, or acknowledged twice (a lost row's id minted
    # again counts under re-minted instead, in asynchronous mode only).
    stored_twice, acked_twice = collections.Counter(), collections.Counter()
    for counts, extra in ((final, stored_twice), (acked_count, acked_twice)):
        for (kind, _), n in counts.items():
            if n > 1:
                extra[kind] += n - 1
    re_minted = collections.Counter(l["kind"] for l in lost if l["re_minted"])
    duplicates = {
        kind: stored_twice[kind] + acked_twice[kind] - (re_minted[kind] if mode == "async" else 0)
        for kind in ("snowflake", "uuidv7")
    }
    dup_final, dup_acked, explained = (sum(c.values()) for c in (stored_twice, acked_twice, re_minted))

    # Order: sweep the requests by send time against the acknowledgements by acknowledgement time.
    # Lost rows are left out in asynchronous mode (their own count covers them).
    lost_left = dict(lost_keys) if mode == "async" else {}
    kept = []
    for a in sorted(acked, key=lambda a: a[1]):
        k = (a[3], a[4])
        if lost_left.get(k, 0) > 0:
            lost_left[k] -= 1
            continue
        kept.append(a)
    by_done = sorted(kept, key=lambda a: a[1])
    by_sent = sorted(kept, key=lambda a: a[0])
    highest = {}
    order_violations, examples = 0, []
    i = 0
    for a in by_sent:
        while i < len(by_done) and by_done[i][1] < a[0]:
            d = by_done[i]
            g = group_of(d[3], d[2], d[4], layout)
            highest[g] = max(highest.get(g, d[4]), d[4])
            i += 1
        g = group_of(a[3], a[2], a[4], layout)
        if g in highest and a[4] <= highest[g]:
            order_violations += 1
            if len(examples) < 10:
                examples.append({"group": list(map(str, g)), "id": str(a[4]), "earlier_acked": str(highest[g]),
                                 "sent_at_ns": a[0]})

    # Stalls after each fault: the first acknowledgement, on the faulted lineage, of a request
    # sent after it (per lineage, requests by send time and the earliest acknowledgement from each
    # on). A fault after which the lineage never acknowledged again stalls to the run's end, and
    # fails the run: every lineage and kind must acknowledge after its lineage's last fault.
    sent_times, earliest_done = {}, {}
    for lineage in {a[2] for a in kept}:
        acks = sorted((a[0], a[1]) for a in kept if a[2] == lineage)
        sent_times[lineage] = [x[0] for x in acks]
        suffix, best = [0] * len(acks), None
        for i in range(len(acks) - 1, -1, -1):
            best = acks[i][1] if best is None else min(best, acks[i][1])
            suffix[i] = best
        earliest_done[lineage] = suffix
    max_stall = collections.defaultdict(float)
    for f in faults:
        times = sent_times.get(f["lineage"], [])
        i = bisect.bisect_left(times, f["at_ns"])
        back = earliest_done[f["lineage"]][i] if i < len(times) else topo["stopped_ns"]
        max_stall[f["kind"]] = max(max_stall[f["kind"]], (back - f["at_ns"]) / 1e6)
    last_fault = {}
    for f in faults:
        last_fault[f["lineage"]] = max(last_fault.get(f["lineage"], 0), f["at_ns"])
    unrecovered = sorted(
        f"{lineage}/{kind}"
        for lineage in topo["lineages"]
        for kind in ("snowflake", "uuidv7")
        if not any(a[2] == lineage and a[3] == kind and a[0] >= last_fault.get(lineage, 0) for a in kept)
    )
    fault_counts = collections.Counter(f["kind"] for f in faults)
    undocumented = {k: n for k, n in errors.items() if k not in DOCUMENTED}
    harness_errors = fault_counts.pop("harness-error", 0)

    report = {
        "mode": mode, "seed": topo["seed"], "duration_s": topo["duration_s"], "sabotage": topo["sabotage"],
        "acknowledged": len(acked),
        "acknowledged_by_kind": dict(collections.Counter(a[3] for a in acked)),
        "duplicates": duplicates,
        "duplicates_stored": dup_final,
        "duplicates_acknowledged": dup_acked,
        "order_violations": order_violations,
        "order_violation_examples": examples,
        "lost_acknowledged": len(lost),
        "re_minted": explained,
        "lost_max_ms_before_failover": max((l["ms_before_failover"] or 0 for l in lost), default=0),
        "lost_unexplained": sum(1 for l in lost if not l["explained"]),
        "unrecovered": unrecovered,
        "failover_replay_lag_ms": [f.get("replay_lag_ms") for f in faults if f["kind"] == "failover"],
        "faults": dict(fault_counts),
        "harness_errors": harness_errors,
        "errors": dict(errors),
        "undocumented_errors": undocumented,
        "max_stall_ms": {k: round(v, 1) for k, v in sorted(max_stall.items())},
    }
    if mode == "sync":
        holds = not (sum(duplicates.values()) or dup_final or order_violations or lost)
    else:
        holds = not (sum(duplicates.values()) or dup_final or order_violations or report["lost_unexplained"])
    holds = holds and not unrecovered
    holds = holds and not undocumented and not harness_errors and len(acked) > 0
    report["holds"] = holds
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(markdown(report))
    print(markdown(report))
    return 0 if holds else 1


def markdown(r):
    rows = [
        ("verdict", "holds" if r["holds"] else "**VIOLATED**"),
        ("mode / seed / duration", f"{r['mode']} / {r['seed']} / {r['duration_s']} s"),
        ("sabotage", r["sabotage"] or "none"),
        ("ids acknowledged", f"{r['acknowledged']} ({', '.join(f'{k} {v}' for k, v in sorted(r['acknowledged_by_kind'].items()))})"),
        ("duplicates", ", ".join(f"{k} {v}" for k, v in sorted(r["duplicates"].items()))),
        ("order violations", r["order_violations"]),
        ("acknowledged rows lost", r["lost_acknowledged"]),
        ("of them, id minted again", r["re_minted"]),
        ("lost rows: longest time from acknowledgement to failover (ms)", round(r["lost_max_ms_before_failover"], 1)),
        ("lost rows not explained by a failover's replay lag", r["lost_unexplained"]),
        ("lineages that never acknowledged after their last fault", ", ".join(r["unrecovered"]) or "none"),
        ("standbys' replay lag at each failover (ms)", ", ".join("?" if v is None else f"{v:.0f}" for v in r["failover_replay_lag_ms"]) or "no failover"),
        ("faults", ", ".join(f"{k} {v}" for k, v in sorted(r["faults"].items()))),
        ("errors by SQLSTATE", ", ".join(f"{k} {v}" for k, v in sorted(r["errors"].items())) or "none"),
        ("longest stall after each fault (ms)", ", ".join(f"{k} {v}" for k, v in r["max_stall_ms"].items())),
    ]
    return "# make chaos\n\n| | |\n|---|---|\n" + "".join(f"| {a} | {b} |\n" for a, b in rows)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
