"""Python clients against a real server with snowflake_id: Django and SQLAlchemy models whose key is
DEFAULT snowflake_next(), psycopg 3 reading the ids, and the decoder of snowflake.py against the
server's snowflake_decode(id, layout, epoch) for every preset.

The server is the one the standard libpq variables name (PGHOST, PGPORT, PGUSER, PGDATABASE); its
database must have the extension, and the server `snowflake_id.shards` set. examples/test.sh
starts one and runs this file:

    python test_clients.py        # from examples/python, in a venv of requirements.txt
"""

import json
import os
import random
import unittest
from datetime import datetime, timedelta, timezone

import psycopg

from snowflake import DEFAULT_EPOCH, PRESETS, decode, parse_layout

UTC = timezone.utc
# Twitter's epoch, as an arbitrary one with milliseconds of its own.
OTHER_EPOCH = datetime(2010, 11, 4, 1, 42, 54, 657000, tzinfo=UTC)
# Every preset, and custom spellings: Sonyflake's widths written out, no shard field at all, and
# a tick of 4 ms.
LAYOUTS = [*PRESETS, "39/16/8@10ms", "44/0/19", " 40/8/15 @ 4ms "]
ROWS = 100  # rows each ORM inserts: half one at a time, half in one batch


def connect():
    return psycopg.connect(autocommit=True)


def server_layout(conn):
    """The server's layout and epoch: what an application decodes the ids it mints with."""
    return conn.execute("SELECT layout, epoch FROM snowflake_layout()").fetchone()


class ServerIds:
    """Checks shared by the ORM tests: ids as the application got them back."""

    def check_ids(self, made, table):
        """made: (id, note) of each row, in the order the application inserted them."""
        ids = [i for i, _ in made]
        self.assertEqual(len(ids), ROWS)
        self.assertTrue(all(type(i) is int for i in ids), "ids must reach Python as int")
        self.assertEqual(len(set(ids)), ROWS, "ids must be unique")
        # One connection inserted them in this order: the ids of one backend increase.
        self.assertEqual(ids, sorted(ids), "ids must increase in insertion order")
        self.assertTrue(all(i > 2**53 for i in ids), "the default layout's ids are past 2^53 (JavaScript's limit)")
        with connect() as conn:
            layout, epoch = server_layout(conn)
            rows = conn.execute(
                f"SELECT t.id, t.note, d.ts, d.shard, d.seq FROM {table} t, snowflake_decode(t.id) d ORDER BY t.id"
            ).fetchall()
            now = conn.execute("SELECT now()").fetchone()[0]
        # Each object got its own row's id, not a neighbour's.
        self.assertEqual([tuple(r[:2]) for r in rows], made, "the table holds the ids the ORM gave each object")
        for id_, _, ts, shard, seq in rows:
            self.assertEqual(decode(id_, layout, epoch), (ts, shard, seq), f"id {id_}")
            self.assertTrue(0 <= shard <= 127, "snowflake_id.shards = '0-127'")
            self.assertLess(abs(now - ts), timedelta(minutes=5), "an id minted now decodes to now")

    def assert_default(self, table):
        with connect() as conn:
            default = conn.execute(
                "SELECT column_default FROM information_schema.columns WHERE table_name = %s AND column_name = 'id'",
                (table,),
            ).fetchone()[0]
        self.assertEqual(default, "snowflake_next()")


class DjangoTests(ServerIds, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import django
        from django.conf import settings

        if not settings.configured:
            settings.configure(
                DATABASES={
                    "default": {
                        "ENGINE": "django.db.backends.postgresql",  # psycopg 3
                        "NAME": os.environ.get("PGDATABASE", "postgres"),
                        "USER": os.environ.get("PGUSER", ""),
                        "HOST": os.environ.get("PGHOST", ""),
                        "PORT": os.environ.get("PGPORT", ""),
                    }
                },
                INSTALLED_APPS=[],
                USE_TZ=True,
            )
            django.setup()
        from django.db import connection, models
        from django.db.models import Func

        # The model: the database mints the key (Django >= 5.0's db_default), so every insert,
        # Django's or anyone's, gets a snowflake id, and Django reads it back with RETURNING.
        class Order(models.Model):
            id = models.BigIntegerField(
                primary_key=True,
                db_default=Func(function="snowflake_next", output_field=models.BigIntegerField()),
            )
            note = models.TextField(default="")

            class Meta:
                app_label = "shop"
                db_table = "django_order"

        cls.Order = Order
        with connection.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS django_order")
        with connection.schema_editor() as editor:  # what `manage.py migrate` runs
            editor.create_model(Order)

    def test_db_default_in_the_schema(self):
        self.assert_default("django_order")

    def test_inserts_read_back_ids(self):
        import django

        Order = self.Order
        made = []
        for n in range(ROWS // 2):
            o = Order.objects.create(note=f"one {n}")  # INSERT ... RETURNING id
            made.append((o.id, o.note))
        bulk = Order.objects.bulk_create([Order(note=f"bulk {n}") for n in range(ROWS // 2)])  # one INSERT
        if django.VERSION < (6, 0):
            # Django 5.x's bulk_create() does not fill in a primary key the database made (fixed in
            # 6.0, ticket #36260): read the ids back.
            self.assertFalse(any(type(o.id) is int for o in bulk))
            rows = Order.objects.filter(note__startswith="bulk ").values_list("id", "note")
            got = {note: id_ for id_, note in rows}
            made += [(got[o.note], o.note) for o in bulk]
        else:
            made += [(o.id, o.note) for o in bulk]
        self.check_ids(made, "django_order")
        self.assertEqual(Order.objects.get(id=made[0][0]).note, "one 0")


class SQLAlchemyTests(ServerIds, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from sqlalchemy import BigInteger, Text, create_engine, event, func, text
        from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

        class Base(DeclarativeBase):
            pass

        # server_default: the DDL says DEFAULT snowflake_next(), and the ORM fetches the key the
        # database made with RETURNING. autoincrement=False: the key is not a SERIAL.
        class Order(Base):
            __tablename__ = "sqlalchemy_order"
            id: Mapped[int] = mapped_column(
                BigInteger, primary_key=True, autoincrement=False, server_default=text("snowflake_next()")
            )
            note: Mapped[str] = mapped_column(Text, default="")

        # SQLAlchemy >= 2.1: monotonic=True says the ids of one INSERT increase in the order of its
        # rows, as one backend's do, so a flush of many objects is one INSERT ... RETURNING whose
        # rows SQLAlchemy matches to the objects by sorting them.
        class BatchedOrder(Base):
            __tablename__ = "sqlalchemy_order_batched"
            id: Mapped[int] = mapped_column(
                BigInteger, primary_key=True, server_default=func.snowflake_next(monotonic=True)
            )
            note: Mapped[str] = mapped_column(Text, default="")

        # An empty URL: psycopg (libpq) takes the server from the PG* variables.
        cls.engine = create_engine("postgresql+psycopg://")
        Base.metadata.drop_all(cls.engine)
        Base.metadata.create_all(cls.engine)
        cls.Order, cls.BatchedOrder = Order, BatchedOrder
        cls.inserts = 0

        @event.listens_for(cls.engine, "before_cursor_execute")
        def count(conn, cursor, statement, parameters, context, executemany):
            if statement.startswith("INSERT"):
                cls.inserts += 1

    @classmethod
    def tearDownClass(cls):
        cls.engine.dispose()

    def insert(self, model):
        """Rows one flush at a time, then many in one flush; the INSERTs the batch took."""
        from sqlalchemy.orm import Session

        with Session(self.engine) as session:
            made = []
            for n in range(ROWS // 2):
                o = model(note=f"one {n}")
                session.add(o)
                session.flush()  # INSERT ... RETURNING id
                made.append((o.id, o.note))
            many = [model(note=f"bulk {n}") for n in range(ROWS // 2)]
            session.add_all(many)
            before = self.inserts
            session.flush()
            statements = self.inserts - before
            made += [(o.id, o.note) for o in many]
            session.commit()
            self.assertEqual(session.get(model, made[0][0]).note, "one 0")
        return made, statements

    def test_server_default_in_the_schema(self):
        self.assert_default("sqlalchemy_order")
        self.assert_default("sqlalchemy_order_batched")

    def test_inserts_read_back_ids(self):
        made, statements = self.insert(self.Order)
        self.check_ids(made, "sqlalchemy_order")
        self.assertEqual(statements, ROWS // 2, "text(): one INSERT per object")

    def test_monotonic_batch(self):
        made, statements = self.insert(self.BatchedOrder)
        self.check_ids(made, "sqlalchemy_order_batched")
        self.assertEqual(statements, 1, "monotonic=True: one INSERT for the batch")


class DecoderTests(unittest.TestCase):
    """snowflake.decode against the server's snowflake_decode(id, layout, epoch), for ids the
    server composes (snowflake_compose) over a spread of times, shards and positions, and for
    arbitrary ids of each layout."""

    @classmethod
    def setUpClass(cls):
        cls.conn = connect()

    @classmethod
    def tearDownClass(cls):
        cls.conn.close()

    def check_layout(self, spec):
        for epoch in (DEFAULT_EPOCH, OTHER_EPOCH):
            with self.subTest(layout=spec, epoch=epoch):
                self.check(spec, epoch)

    def check(self, spec, epoch):
        conn = self.conn
        lay = parse_layout(spec)
        row = conn.execute(
            "SELECT time_bits, shard_bits, seq_bits, tick_ms, epoch, last_timestamp FROM snowflake_layout(%s, %s)",
            (spec, epoch),
        ).fetchone()
        self.assertEqual(tuple(row[:4]), tuple(lay), "the layout's widths and tick")
        self.assertEqual(row[4], epoch)
        last = row[5]
        tick = timedelta(milliseconds=lay.tick_ms)
        rng = random.Random(f"{spec}/{epoch}")
        us = timedelta(microseconds=1)

        def rand_time():
            return epoch + rng.randrange((last - epoch) // us) * us

        edge_times = [epoch, epoch + us, epoch + tick - us, epoch + tick, last]
        cases = []
        for t in edge_times + [rand_time() for _ in range(6)]:
            for s in (0, lay.max_shard, rng.randint(0, lay.max_shard)):
                for q in (0, lay.max_seq, rng.randint(0, lay.max_seq)):
                    cases.append((t, s, q))
        cases += [(rand_time(), rng.randint(0, lay.max_shard), rng.randint(0, lay.max_seq)) for _ in range(100)]

        rows = conn.execute(
            """SELECT c.id, d.ts, d.shard, d.seq,
                      snowflake_timestamp(c.id, %(l)s, %(e)s), snowflake_shard(c.id, %(l)s),
                      snowflake_seq(c.id, %(l)s)
               FROM (SELECT o, snowflake_compose(t, s, q, %(l)s, %(e)s) AS id
                     FROM unnest(%(t)s::timestamptz[], %(s)s::int[], %(q)s::int[])
                          WITH ORDINALITY AS u(t, s, q, o)) c,
                    LATERAL snowflake_decode(c.id, %(l)s, %(e)s) d
               ORDER BY c.o""",
            {"l": spec, "e": epoch, "t": [t for t, _, _ in cases], "s": [s for _, s, _ in cases],
             "q": [q for _, _, q in cases]},
        ).fetchall()
        self.assertEqual(len(rows), len(cases))
        for (t, s, q), (id_, ts, shard, seq, ts1, shard1, seq1) in zip(cases, rows):
            self.assertEqual((ts1, shard1, seq1), (ts, shard, seq), "decode and the single readers agree")
            self.assertEqual(decode(id_, spec, epoch), (ts, shard, seq), f"id {id_} ({t}, {s}, {q})")
            self.assertEqual((shard, seq), (s, q))
            self.assertTrue(ts <= t < ts + tick, f"{t} is in the tick starting {ts}")

        # Arbitrary ids of the layout, whatever made them: every bit pattern up to its largest id.
        ids = [0, 1, lay.max_id] + [rng.randrange(lay.max_id + 1) for _ in range(200)]
        rows = conn.execute(
            "SELECT d.ts, d.shard, d.seq FROM unnest(%s::bigint[]) WITH ORDINALITY u(id, o), "
            "snowflake_decode(u.id, %s, %s) d ORDER BY u.o",
            (ids, spec, epoch),
        ).fetchall()
        for id_, row in zip(ids, rows, strict=True):
            self.assertEqual(decode(id_, spec, epoch), tuple(row), f"id {id_}")

    def test_outside_the_layout_is_refused_by_both(self):
        epoch = DEFAULT_EPOCH
        for id_ in (-1, 2**53):  # 2^53 is past the javascript preset's largest id
            with self.subTest(id=id_):
                with self.assertRaises(ValueError):
                    decode(id_, "javascript", epoch)
                with self.assertRaises(psycopg.Error):
                    self.conn.execute("SELECT * FROM snowflake_decode(%s, 'javascript', %s)", (id_, epoch))

    def test_server_layout(self):
        # What the ORM tests decode with: the server's own layout and epoch.
        layout, epoch = server_layout(self.conn)
        self.assertEqual(parse_layout(layout), PRESETS["default"])
        self.assertEqual(epoch, DEFAULT_EPOCH)


for _spec in LAYOUTS:
    _name = "test_" + "".join(c if c.isalnum() else "_" for c in _spec.strip())
    setattr(DecoderTests, _name, lambda self, spec=_spec: self.check_layout(spec))


class JsonTests(unittest.TestCase):
    """Python's json keeps every id; a parser that reads numbers as doubles (JavaScript's) does
    not, and a string is safe everywhere."""

    def test_json(self):
        id_ = 252969121090637507
        self.assertEqual(json.loads(json.dumps({"id": id_}))["id"], id_)
        as_double = json.loads(json.dumps({"id": id_}), parse_int=float)["id"]  # what JSON.parse does
        self.assertEqual(int(as_double), 252969121090637504)
        self.assertNotEqual(int(as_double), id_)
        self.assertEqual(int(json.loads(json.dumps({"id": str(id_)}))["id"]), id_)


class Tally(unittest.TextTestResult):
    """Counts tests, not failures: a test whose subTests fail is one failed test, as in node's
    runner; an error in setUpClass is one too."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ran, self.bad = set(), set()

    def startTest(self, test):
        super().startTest(test)
        self.ran.add(test.id())

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.bad.add(test.id())

    def addError(self, test, err):
        super().addError(test, err)
        self.bad.add(test.id())

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self.bad.add(test.id())


if __name__ == "__main__":
    runner = unittest.TextTestRunner(verbosity=2, resultclass=Tally)
    result = unittest.main(testRunner=runner, exit=False).result
    skipped = {t.id() for t, _ in result.skipped}
    print(f"python: {len(result.ran - result.bad - skipped)} passed, {len(result.bad)} failed")
    raise SystemExit(1 if result.bad or not result.ran else 0)
