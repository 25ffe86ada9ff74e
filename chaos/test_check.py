#!/usr/bin/python3
"""Unit tests of chaos/check.py on hand-made histories: plain Python, no server.

    python3 -m unittest discover -s chaos -p 'test_*.py'      (scripts/test.sh runs it)
"""

import collections
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402

S = 1_000_000_000  # a second, in the harness's nanoseconds


class History:
    """A run in the making: acknowledged requests, final rows, faults."""

    def __init__(self, mode="sync"):
        self.mode = mode
        self.acked, self.rows, self.faults = [], [], []
        self.n = 0
        self.healed_ns, self.clock_debt_s = 100 * S, {"a": 0.0}

    def ack(self, at_s, key, server="a1", kind="snowflake", stored=True, lsn=None, client="c0", op="insert",
            lineage="a"):
        """A request sent at at_s, acknowledged 1 ms later; its row stored unless told."""
        self.n += 1
        token = f"{client}.{self.n}"
        sent = int(at_s * S)
        lsn_text = "-" if lsn is None else f"0/{lsn:X}"
        line = f"{sent} {sent + 1_000_000} {lineage} {kind} {key} {token} {server} {op} {lsn_text}"
        self.acked.append(check.parse_ack(line, client, self.n))
        if stored and op == "insert":
            self.store(key, token, server, kind=kind, lineage=lineage)
        return token

    def store(self, key, token, server, kind="snowflake", lineage="a"):
        self.rows.append(check.parse_row(lineage, kind, f"{key} {token} {server}"))

    def failover(self, at_s, server, promoted, standby_flush_lsn, lineage="a", kind="failover"):
        self.faults.append({"at_ns": int(at_s * S), "kind": kind, "lineage": lineage, "server": server,
                            "promoted": promoted,
                            "standby_flush_lsn": None if standby_flush_lsn is None else f"0/{standby_flush_lsn:X}",
                            "primary_flush_lsn": None, "replay_lag_ms": 0.0})

    def judge(self):
        topo = {"mode": self.mode, "seed": 0, "duration_s": 0, "sabotage": "", "lineages": {"a": "1-3"},
                "layout": "41/13/9", "stopped_ns": 200 * S, "healed_ns": self.healed_ns,
                "clock_debt_s": self.clock_debt_s, "liveness_allowance_s": 30.0}
        # After the heal, the lineage acknowledges both kinds at once unless a test says otherwise.
        return check.judge(topo, self.acked, self.rows, self.faults, collections.Counter())

    def recovered(self, after_heal_s=1.0, server="a2"):
        for kind, key in (("snowflake", 9_000_000 << 22), ("uuidv7", "01890000-0000-7000-8000-000000000000")):
            self.ack(self.healed_ns / S + after_heal_s, key, server=server, kind=kind, client=f"r{kind[0]}")


def sf(ms, seq=0, shard=1):
    """A snowflake id of the 41/13/9 layout."""
    return (ms << 22) | (shard << 9) | seq


class LossesAndDuplicates(unittest.TestCase):
    def test_clean_history_holds(self):
        h = History()
        for i in range(10):
            h.ack(1 + i, sf(1000 + i))
        h.recovered()
        r = h.judge()
        self.assertTrue(r["holds"], r)
        self.assertEqual((r["safety"], r["liveness"]), ("holds", "holds"))

    def test_lost_row_and_its_id_stored_again_are_both_reported(self):
        # The row of token A is gone and another request's row carries A's id: two findings. A
        # checker that compares ids only (acknowledged once, stored once) sees neither.
        h = History()
        h.ack(1, sf(1000), stored=False)
        other = h.ack(2, sf(1001), stored=False)
        h.store(sf(1000), other, "a1")
        h.recovered()
        r = h.judge()
        self.assertEqual(r["lost_acknowledged"], 2)  # A's row missing; `other` stored with A's id
        self.assertEqual(r["duplicates"]["snowflake"], 1)
        self.assertEqual(r["safety"], "VIOLATED")
        self.assertFalse(r["holds"])

    def test_lost_row_and_a_re_mint_of_another_row_never_cancel(self):
        # Asynchronous: a loss the failover excuses, and, unrelated, one id minted twice by the
        # promoted server. The excused loss must not pay for the duplicate.
        h = History("async")
        h.ack(1, sf(1000), stored=False, lsn=0x500)  # lost in the failover, not minted again
        h.failover(2, "a1", "a2", standby_flush_lsn=0x100)
        h.ack(3, sf(2000), server="a2", lsn=0x600)
        h.ack(4, sf(2000), server="a2", lsn=0x700)
        h.recovered()
        r = h.judge()
        self.assertEqual(r["lost_acknowledged"], 1)
        self.assertEqual(r["lost_unexplained"], 0)
        self.assertEqual(r["re_minted"], 0)
        self.assertEqual(r["duplicates"]["snowflake"], 1)
        self.assertFalse(r["holds"])

    def test_token_stored_twice_is_a_duplicate(self):
        h = History()
        t = h.ack(1, sf(1000))
        h.store(sf(1000), t, "a1")
        h.recovered()
        r = h.judge()
        self.assertEqual(r["duplicates_stored"], 1)
        self.assertFalse(r["holds"])

    def test_sync_mode_excuses_no_loss(self):
        h = History("sync")
        h.ack(1, sf(1000), stored=False, lsn=0x500)
        h.failover(2, "a1", "a2", standby_flush_lsn=0x100)
        h.recovered()
        r = h.judge()
        self.assertEqual(r["lost_unexplained"], 1)
        self.assertFalse(r["holds"])


class AsyncFailoverWindow(unittest.TestCase):
    def history(self, standby_flush_lsn, re_minted_by="a2"):
        """Token A (insert position 0x100) is acknowledged by a1, then the same client's next
        statement on a1 (0x200, which bounds A's commit); a1 fails over to a2; both rows are gone
        and a re_minted_by server mints A's id again, after the failover."""
        h = History("async")
        h.ack(1, sf(1000), stored=False, lsn=0x100)
        h.ack(1.5, sf(1001), stored=False, lsn=0x200)
        h.failover(2, "a1", "a2", standby_flush_lsn=standby_flush_lsn)
        h.ack(3, sf(1000), server=re_minted_by, lsn=0x300, client="c1")
        h.recovered()
        return h.judge()

    def test_re_mint_inside_the_lsn_window_is_excused(self):
        r = self.history(standby_flush_lsn=0x150)  # the standby may not have had A's commit
        self.assertEqual((r["lost_acknowledged"], r["lost_unexplained"], r["re_minted"]), (2, 0, 1))
        self.assertEqual(r["duplicates"]["snowflake"], 0)
        self.assertEqual(r["order_violations"], 0)
        self.assertTrue(r["holds"], r)

    def test_a_failover_without_a_standby_sample_excuses_nothing(self):
        # The harness could not read the standby's position before the kill: no loss is bounded.
        r = self.history(standby_flush_lsn=None)
        self.assertEqual((r["lost_acknowledged"], r["lost_unexplained"], r["re_minted"]), (2, 2, 0))
        self.assertEqual(r["duplicates"]["snowflake"], 1)
        self.assertEqual(r["safety"], "VIOLATED")

    def test_re_mint_outside_the_lsn_window_is_a_violation(self):
        r = self.history(standby_flush_lsn=0x200)  # the standby had everything up to A's commit
        self.assertEqual((r["lost_acknowledged"], r["lost_unexplained"]), (2, 1))
        self.assertEqual(r["re_minted"], 0)
        self.assertEqual(r["duplicates"]["snowflake"], 1)
        self.assertEqual(r["safety"], "VIOLATED")
        self.assertFalse(r["holds"])

    def test_re_mint_by_another_server_than_the_promoted_one_is_a_violation(self):
        r = self.history(standby_flush_lsn=0x150, re_minted_by="a1")
        self.assertEqual(r["lost_unexplained"], 0)
        self.assertEqual(r["duplicates"]["snowflake"], 1)
        self.assertFalse(r["holds"])

    def test_a_request_sent_after_the_failover_is_never_excused(self):
        # The fault log says a1 was gone at 2 s; an acknowledgement from a1 of a request sent
        # later contradicts it, and no failover excuses its loss.
        h = History("async")
        h.ack(1, sf(1000), stored=False, lsn=0x100)
        h.ack(2.5, sf(1001), stored=False, lsn=0x200)
        h.failover(2, "a1", "a2", standby_flush_lsn=0x50)
        h.recovered()
        r = h.judge()
        self.assertEqual((r["lost_acknowledged"], r["lost_unexplained"]), (2, 1))
        self.assertFalse(r["holds"])

    def test_a_copy_sent_before_the_failover_is_no_re_mint(self):
        # The promoted server's copy was asked for before the failover that would excuse it.
        h = History("async")
        h.ack(1, sf(1000), stored=False, lsn=0x100)
        h.ack(1.5, sf(1001), stored=False, lsn=0x200)
        h.ack(1.7, sf(1000), server="a2", lsn=0x300, client="c1")
        h.failover(2, "a1", "a2", standby_flush_lsn=0x150)
        h.recovered()
        r = h.judge()
        self.assertEqual(r["re_minted"], 0)
        self.assertEqual(r["duplicates"]["snowflake"], 1)
        self.assertFalse(r["holds"])

    def test_last_statement_before_the_kill_has_no_bound(self):
        # No later statement on a1: A's commit may lie anywhere before the kill.
        h = History("async")
        h.ack(1, sf(1000), stored=False, lsn=0x100)
        h.failover(2, "a1", "a2", standby_flush_lsn=0x10000)
        h.recovered()
        r = h.judge()
        self.assertEqual((r["lost_acknowledged"], r["lost_unexplained"]), (1, 0))


class LaggedFailoverAndBursts(unittest.TestCase):
    def test_burst_ids_are_judged_each_by_its_own_position(self):
        # A burst of three ids on a1 (insert positions 0x100, 0x200, 0x300: each row's position
        # after its id), a failover whose standby was held back at 0x250, and the promoted a2
        # minting the three ids again. The first two were covered by WAL the standby had: their
        # copies are duplicates; the third one's reservation may have been lost: a re-mint.
        h = History("async")
        for k, lsn in enumerate((0x100, 0x200, 0x300)):
            h.ack(1, sf(1000, seq=k), op="burst", lsn=lsn, client="b0")
        h.failover(2, "a1", "a2", standby_flush_lsn=0x250, kind="lagged_failover")
        for k in range(3):
            h.ack(3, sf(1000, seq=k), server="a2", op="select", lsn=0x400, client="c1")
        h.recovered()
        r = h.judge()
        self.assertEqual(r["re_minted"], 1)
        self.assertEqual(r["duplicates"]["snowflake"], 2)
        self.assertEqual(r["lost_acknowledged"], 0)  # a burst's ids are never stored
        self.assertEqual(r["faults"], {"lagged_failover": 1})
        self.assertFalse(r["holds"])

    def test_lagged_failover_excuses_as_a_failover_does(self):
        h = History("async")
        h.ack(1, sf(1000), op="select", lsn=0x300)
        h.failover(2, "a1", "a2", standby_flush_lsn=0x250, kind="lagged_failover")
        h.ack(3, sf(1000), server="a2", op="select", lsn=0x400, client="c1")
        h.recovered()
        r = h.judge()
        self.assertEqual((r["re_minted"], r["duplicates"]["snowflake"]), (1, 0))
        self.assertTrue(r["holds"], r)


class Liveness(unittest.TestCase):
    def test_stall_within_the_bound_is_no_liveness_failure(self):
        # A restore onto a clock 15.5 s behind: the lineage refuses until its clock catches up,
        # and acknowledges 20 s after the heal, within 15.5 s + the allowance.
        h = History()
        h.ack(1, sf(1000))
        h.clock_debt_s = {"a": 15.5}
        h.recovered(after_heal_s=20)
        r = h.judge()
        self.assertEqual(r["liveness"], "holds")
        self.assertEqual(r["unrecovered"], [])
        self.assertTrue(r["holds"], r)

    def test_stall_past_the_bound_fails_liveness_only(self):
        h = History()
        h.ack(1, sf(1000))
        h.clock_debt_s = {"a": 15.5}
        h.recovered(after_heal_s=15.5 + 30 + 1)
        r = h.judge()
        self.assertEqual((r["safety"], r["liveness"]), ("holds", "VIOLATED"))
        self.assertEqual(r["unrecovered"], ["a/snowflake", "a/uuidv7"])
        self.assertFalse(r["holds"])

    def test_no_acknowledgement_after_the_heal_fails_liveness(self):
        h = History()
        h.ack(1, sf(1000))
        r = h.judge()
        self.assertEqual(r["liveness"], "VIOLATED")


class Files(unittest.TestCase):
    def test_lines_keep_their_first_five_fields_and_main_writes_the_report(self):
        work = tempfile.mkdtemp()
        try:
            for d in ("acked", "final", "errors"):
                os.makedirs(os.path.join(work, d))
            with open(os.path.join(work, "acked", "a-snowflake-0.txt"), "w") as f:
                f.write(f"{S} {S + 1} a snowflake {sf(1000)} as0.1 a1 insert 0/100\n")
                f.write(f"{101 * S} {101 * S + 1} a snowflake {sf(1001)} as0.2 a1 insert 0/200\n")
                f.write(f"{102 * S} {102 * S + 1} a snowfl")  # cut by the harness's end
            with open(os.path.join(work, "acked", "a-uuidv7-0.txt"), "w") as f:
                f.write(f"{101 * S} {101 * S + 1} a uuidv7 01890000-0000-7000-8000-000000000000 au0.1 a1 insert 0/300\n")
            with open(os.path.join(work, "final", "a-snowflake.txt"), "w") as f:
                f.write(f"{sf(1000)} as0.1 a1\n{sf(1001)} as0.2 a1\n")
            with open(os.path.join(work, "final", "a-uuidv7.txt"), "w") as f:
                f.write("01890000-0000-7000-8000-000000000000 au0.1 a1\n")
            with open(os.path.join(work, "errors", "a-snowflake-0.txt"), "w") as f:
                f.write(f"{S} connection server closed the connection\n")
            with open(os.path.join(work, "faults.jsonl"), "w") as f:
                f.write(json.dumps({"at_ns": 50 * S, "kind": "kill9", "lineage": "a", "server": "a1"}) + "\n")
                f.write(json.dumps({"at_ns": 100 * S, "kind": "heal", "lineage": "", "server": ""}) + "\n")
            with open(os.path.join(work, "topology.json"), "w") as f:
                json.dump({"mode": "sync", "seed": 1, "duration_s": 1, "sabotage": "", "lineages": {"a": "1-3"},
                           "layout": "41/13/9", "stopped_ns": 103 * S, "healed_ns": 100 * S,
                           "clock_debt_s": {"a": 0}, "liveness_allowance_s": 30.0}, f)
            with open(os.devnull, "w") as null:
                stdout, sys.stdout = sys.stdout, null
                try:
                    rc = check.main(work, work)
                finally:
                    sys.stdout = stdout
            with open(os.path.join(work, "report.json")) as f:
                r = json.load(f)
            self.assertEqual(rc, 0, r)
            self.assertEqual(r["acknowledged"], 3)
            self.assertEqual(r["faults"], {"kill9": 1})  # the heal is no fault
        finally:
            shutil.rmtree(work)

    def test_a_burst_is_read_as_one_record_and_each_of_its_ids_judged(self):
        work = tempfile.mkdtemp()
        try:
            for d in ("acked", "final", "errors"):
                os.makedirs(os.path.join(work, d))
            with open(os.path.join(work, "acked", "a-snowflake-3.txt"), "w") as f:
                for k in range(3):  # one statement, three ids
                    f.write(f"{S} {S + 9} a snowflake {sf(2000, seq=k)} asb3.1.{k} a1 burst 0/4{k}0\n")
                # the next one: its first id repeats one of the first statement's, below its last
                f.write(f"{2 * S} {2 * S + 9} a snowflake {sf(2000, seq=1)} asb3.2.0 a1 burst 0/500\n")
                f.write(f"{2 * S} {2 * S + 9} a snowflake {sf(2001)} asb3.2.1 a1 burst 0/510\n")
            with open(os.path.join(work, "faults.jsonl"), "w") as f:
                f.write(json.dumps({"at_ns": 100 * S, "kind": "heal", "lineage": "", "server": ""}) + "\n")
            topo = {"mode": "sync", "seed": 1, "duration_s": 1, "sabotage": "", "lineages": {"a": "1-3"},
                    "layout": "41/13/9", "stopped_ns": 103 * S, "healed_ns": 100 * S, "clock_debt_s": {"a": 0}}
            with open(os.path.join(work, "topology.json"), "w") as f:
                json.dump(topo, f)
            topo, acked, rows, faults, errors = check.load(work)
            self.assertEqual([len(a.keys) for a in acked], [3, 2])
            r = check.judge(topo, acked, rows, faults, errors)
            self.assertEqual(r["acknowledged"], 5)
            self.assertEqual(r["duplicates"]["snowflake"], 1)
            self.assertEqual(r["duplicate_examples"][0]["tokens"], ["asb3.1.1", "asb3.2.0"])
            self.assertEqual(r["order_violations"], 1)
            self.assertEqual(r["order_violation_examples"][0]["token"], "asb3.2.0")
        finally:
            shutil.rmtree(work)


if __name__ == "__main__":
    unittest.main()
