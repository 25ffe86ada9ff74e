#!/usr/bin/python3
"""`make chaos`'s picture of a run, read at a glance: target/chaos/timeline.png.

Three panels over the run's seconds, as Jepsen's rate and latency plots do: ids acknowledged per
second by each lineage, client errors per second by class, and the slowest request acknowledged
in each second (its stall: from the request's sending to its acknowledgement). Every fault of
faults.jsonl is marked where it began, as a line, or as a band over the seconds it lasted where it
says so (`seconds`); the heal is a dashed line. The verdict is chaos/check.py's, never this
picture's; this module reads the same files through check.py's parsers and judges nothing.

    timeline.py WORK_DIR OUT.png
"""

import collections
import json
import math
import os
import sys

import check

# Error classes drawn apart: the ones a reader asks about first.
ERROR_CLASSES = ("connection", "58000", "57P03", "other")


def error_class(sqlstate):
    return sqlstate if sqlstate in ERROR_CLASSES else "other"


def load_errors(work):
    """(at_ns, SQLSTATE) of every client error (errors/*.txt: at_ns SQLSTATE message)."""
    out = []
    for _, line in check.read_lines(os.path.join(work, "errors", "*.txt")):
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit():
            out.append((int(parts[0]), parts[1]))
    return out


def series(acked, errors, faults, bin_s=1.0):
    """The timeline's data, in seconds from the run's first event.

    acked: check.Ack records; errors: (at_ns, SQLSTATE or `connection`); faults: faults.jsonl's records. Returns a
    dict: `seconds` (the bins' starts), `ids` {lineage: [ids acknowledged in each bin]}, `errors`
    {class: [errors in each bin]}, `stall_ms` {lineage: [the slowest acknowledgement of the bin,
    or None where the lineage acknowledged nothing]}, and `faults` [(start_s, end_s or None, kind,
    lineage)], the heal and the harness's own errors included as kinds of their own."""
    starts = [a.sent for a in acked] + [e[0] for e in errors] + [f["at_ns"] for f in faults]
    if not starts:
        return {"seconds": [], "ids": {}, "errors": {}, "stall_ms": {}, "faults": []}
    t0 = min(starts)
    ends = [a.done for a in acked] + [e[0] for e in errors] + [f["at_ns"] for f in faults]
    width = int(bin_s * 1e9)
    n = (max(ends) - t0) // width + 1

    def at(ns):
        return (ns - t0) // width

    ids = collections.defaultdict(lambda: [0] * n)
    stall = collections.defaultdict(lambda: [None] * n)
    for a in acked:
        b = at(a.done)
        ids[a.lineage][b] += check.id_count(a)
        ms = (a.done - a.sent) / 1e6
        if stall[a.lineage][b] is None or ms > stall[a.lineage][b]:
            stall[a.lineage][b] = ms
    errs = collections.defaultdict(lambda: [0] * n)
    for at_ns, sqlstate in errors:
        errs[error_class(sqlstate)][at(at_ns)] += 1
    marks = []
    for f in faults:
        start = (f["at_ns"] - t0) / 1e9
        seconds = f.get("seconds")
        end = start + float(seconds) if isinstance(seconds, (int, float)) and seconds > 0 else None
        marks.append((start, end, f["kind"], f.get("lineage")))
    return {
        "seconds": [i * bin_s for i in range(n)],
        "ids": dict(sorted(ids.items())),
        "errors": {c: errs[c] for c in ERROR_CLASSES if c in errs},
        "stall_ms": dict(sorted(stall.items())),
        "faults": sorted(marks, key=lambda m: m[0]),
        "bin_s": bin_s,
    }


def bin_for(duration_s):
    """A bin of a second, or longer for a long run so that the picture has at most about 600
    bins (an hour: 6 s), which its width can show apart."""
    return float(max(1, math.ceil(float(duration_s or 0) / 600)))


def draw(data, title, out_png):
    """The three panels of `data` (series()) into out_png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rate, errs, stall) = plt.subplots(3, 1, sharex=True, figsize=(13, 8.5),
                                            gridspec_kw={"height_ratios": [3, 1.4, 2]})
    x, width = data["seconds"], data.get("bin_s", 1.0)
    per = f"{width:g} s" if width != 1 else "s"
    for lineage, counts in data["ids"].items():
        rate.plot(x, [c / width for c in counts], lw=0.9, label=f"lineage {lineage}")
    rate.set_ylabel(f"ids acknowledged / s\n(mean over {per})" if width != 1 else "ids acknowledged / s")
    rate.legend(loc="upper right", fontsize=8)
    bottom = [0] * len(x)
    for cls, counts in data["errors"].items():
        errs.bar(x, counts, width=width, bottom=bottom, align="edge", label=cls)
        bottom = [b + c for b, c in zip(bottom, counts)]
    errs.set_ylabel(f"client errors / {per}")
    if data["errors"]:
        errs.legend(loc="upper right", fontsize=8)
    for lineage, ms in data["stall_ms"].items():
        stall.plot(x, [m if m is not None else float("nan") for m in ms], lw=0.9, label=f"lineage {lineage}")
    stall.set_yscale("log")
    stall.set_ylabel(f"slowest acknowledgement\nof each {per} (ms)" if width != 1 else "slowest acknowledgement (ms)")
    stall.set_xlabel("seconds since the run began")
    kinds = sorted({k for _, _, k, _ in data["faults"] if k not in check.NOT_FAULTS})
    # Not tab10, whose first colours the lineages take.
    colours = {k: plt.get_cmap("tab20b")((3 * i) % 20) for i, k in enumerate(kinds)}
    seen = set()
    for start, end, kind, lineage in data["faults"]:
        for ax in (rate, errs, stall):
            if kind == "heal":
                ax.axvline(start, color="black", ls="--", lw=1.2)
            elif kind in colours:
                if end is not None:
                    ax.axvspan(start, end, color=colours[kind], alpha=0.15, lw=0)
                ax.axvline(start, color=colours[kind], lw=0.8, alpha=0.8)
        if kind in colours and kind not in seen:
            seen.add(kind)
            rate.plot([], [], color=colours[kind], lw=2, label=kind)
        if kind in colours:
            rate.annotate(lineage or "", (start, 1.0), xycoords=("data", "axes fraction"), fontsize=6,
                          color=colours[kind], ha="left", va="top")
    rate.plot([], [], color="black", ls="--", lw=1.2, label="heal")
    rate.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)


def main(work, out_png):
    topo, acked, _, faults, _ = check.load(work)
    data = series(acked, load_errors(work), faults, bin_s=bin_for(topo.get("duration_s")))
    report = {}
    if os.path.exists(os.path.join(work, "report.json")):
        with open(os.path.join(work, "report.json")) as f:
            report = json.load(f)
    verdict = "holds" if report.get("holds") else "VIOLATED" if report else "not judged"
    title = (f"make chaos: seed {topo.get('seed')}, {topo.get('mode')} mode, {topo.get('duration_s')} s"
             f"{', SABOTAGE=' + topo['sabotage'] if topo.get('sabotage') else ''}: {sum(map(check.id_count, acked)):,} ids acknowledged, "
             f"{sum(1 for f in faults if f['kind'] not in check.NOT_FAULTS)} faults; check.py: {verdict}")
    draw(data, title, out_png)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
