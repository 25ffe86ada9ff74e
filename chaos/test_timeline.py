#!/usr/bin/python3
"""Unit tests of chaos/timeline.py's data on a hand-made history: plain Python, no server, no
matplotlib (the picture itself is drawn by every `make chaos`).

    python3 -m unittest discover -s chaos -p 'test_*.py'      (scripts/test.sh runs it)
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import check  # noqa: E402
import timeline  # noqa: E402

S = 1_000_000_000


def ack(sent_s, done_s, lineage="a", n=0):
    return check.Ack(int(sent_s * S), int(done_s * S), lineage, "snowflake", n, f"t{n}", "a1", "insert", None, "x")


class Series(unittest.TestCase):
    def test_ids_errors_and_stalls_fall_in_their_seconds(self):
        acked = [ack(0.0, 0.1, n=1), ack(0.2, 0.35, n=2), ack(0.5, 2.7, n=3), ack(1.0, 1.05, "b", n=4)]
        errors = [(int(1.5 * S), "connection"), (int(1.6 * S), "58000"), (int(2.1 * S), "XX000")]
        data = timeline.series(acked, errors, [])
        self.assertEqual(data["seconds"], [0.0, 1.0, 2.0])
        self.assertEqual(data["ids"], {"a": [2, 0, 1], "b": [0, 1, 0]})
        self.assertEqual(data["errors"], {"connection": [0, 1, 0], "58000": [0, 1, 0], "other": [0, 0, 1]})
        # The slowest acknowledgement of each second, and nothing where a lineage acknowledged none.
        self.assertEqual([round(m) if m is not None else None for m in data["stall_ms"]["a"]], [150, None, 2200])
        self.assertEqual(data["stall_ms"]["b"][0], None)

    def test_faults_are_marked_where_they_began_and_over_what_they_lasted(self):
        faults = [{"at_ns": 3 * S, "kind": "pause", "lineage": "b", "seconds": 1.5},
                  {"at_ns": 1 * S, "kind": "power", "lineage": "a"},
                  {"at_ns": 5 * S, "kind": "heal", "lineage": None}]
        data = timeline.series([ack(0.0, 0.1)], [], faults)
        self.assertEqual(data["faults"], [(1.0, None, "power", "a"), (3.0, 4.5, "pause", "b"), (5.0, None, "heal", None)])
        self.assertEqual(len(data["seconds"]), 6, "the timeline reaches the last fault")

    def test_a_long_run_is_drawn_in_longer_bins(self):
        self.assertEqual((timeline.bin_for(100), timeline.bin_for(3600)), (1.0, 6.0))
        data = timeline.series([ack(0.0, 0.1), ack(4.0, 5.0), ack(6.0, 7.0)], [], [], bin_s=6.0)
        self.assertEqual((data["seconds"], data["ids"]["a"], data["bin_s"]), ([0.0, 6.0], [2, 1], 6.0))

    def test_an_empty_run_draws_nothing(self):
        self.assertEqual(timeline.series([], [], [])["seconds"], [])


if __name__ == "__main__":
    unittest.main()
