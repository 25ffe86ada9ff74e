// node-postgres and JSON against a real server with snowflake_id, and the BigInt decoder of
// snowflake.js against the server's snowflake_decode(id, layout, epoch) for every preset.
//
// The server is the one the standard libpq variables name (PGHOST, PGPORT, PGUSER, PGDATABASE);
// its database must have the extension, and the server `snowflake_id.shards` set.
// examples/test.sh starts one and runs this file:
//
//   npm ci && node --test          # from examples/node
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';

import { DEFAULT_EPOCH, PRESETS, decode, maxId, parseLayout } from './snowflake.js';

// Twitter's epoch, as an arbitrary one with milliseconds of its own.
const OTHER_EPOCH = new Date('2010-11-04T01:42:54.657Z');
// Every preset, and custom spellings: Sonyflake's widths written out, no shard field at all, and a
// tick of 4 ms.
const LAYOUTS = [...Object.keys(PRESETS), '39/16/8@10ms', '44/0/19', ' 40/8/15 @ 4ms '];

let client;
before(async () => {
  client = new pg.Client(); // the PG* variables
  await client.connect();
});
after(() => client?.end());

const one = async (sql, params) => (await client.query(sql, params)).rows[0];

test('node-postgres returns bigint (int8) as a string, which BigInt reads exactly', async () => {
  const { id } = await one('SELECT snowflake_next() AS id');
  assert.equal(typeof id, 'string');
  assert.match(id, /^[0-9]+$/);
  assert.equal(BigInt(id).toString(), id);
  // As a Number it is past 2^53 - 1: not an integer JavaScript holds exactly.
  assert.equal(Number.isSafeInteger(Number(id)), false);
  // A string or a BigInt goes back to the server unchanged.
  const back = await one('SELECT $1::bigint::text AS s, $2::bigint::text AS b', [id, BigInt(id)]);
  assert.deepEqual([back.s, back.b], [id, id]);
});

test('JSON: an id as a string survives, as a bare number it is corrupted', async (t) => {
  // The documented example: JSON.parse reads the number as a double.
  assert.equal(String(JSON.parse('{"id": 252969121090637507}').id), '252969121090637500');

  // An odd id (position 1): past 2^53 no odd integer is a double.
  const { id } = await one("SELECT snowflake_compose(now(), 1, 1, 'default', '2025-01-01+00')::text AS id");
  // The server builds the JSON; node-postgres parses json columns with JSON.parse.
  const r = await one(
    `SELECT json_build_object('id', $1::bigint) AS number, jsonb_build_object('id', $1::bigint) AS bnumber,
            json_build_object('id', $1::bigint::text) AS string`,
    [id],
  );
  t.diagnostic(`id ${id}: as a JSON number it came back as ${r.number.id}`);
  for (const got of [r.number.id, r.bnumber.id]) {
    assert.equal(typeof got, 'number');
    assert.notEqual(BigInt(got), BigInt(id), 'JSON.parse of the bare number changed the id');
  }
  assert.equal(r.string.id, id);
  // The same in the application's own JSON.
  assert.equal(JSON.parse(JSON.stringify({ id })).id, id);
  assert.throws(() => JSON.stringify({ id: BigInt(id) }), TypeError, 'JSON.stringify refuses a BigInt');
  assert.equal(JSON.parse(JSON.stringify({ id: BigInt(id).toString() })).id, id);
});

// YYYY-MM-DDTHH:MM:SS.ffffffZ of Unix microseconds (a BigInt).
function isoUs(us) {
  const ms = us / 1000n;
  const iso = new Date(Number(ms)).toISOString();
  return `${iso.slice(0, -1)}${String(us % 1000n).padStart(3, '0')}Z`;
}

// A small seeded generator (LCG), so that a failure can be run again.
function rng(seedText) {
  let x = [...seedText].reduce((h, c) => (h * 31n + BigInt(c.charCodeAt(0))) % (1n << 64n), 7n);
  return (n) => {
    x = (x * 6364136223846793005n + 1442695040888963407n) % (1n << 64n);
    return (x >> 11n) % BigInt(n);
  };
}

async function checkLayout(spec, epoch) {
  const l = parseLayout(spec);
  const info = await one(
    `SELECT time_bits, shard_bits, seq_bits, tick_ms, epoch,
            (extract(epoch FROM last_timestamp) * 1e6)::bigint::text AS last_us
     FROM snowflake_layout($1, $2)`,
    [spec, epoch],
  );
  assert.deepEqual(
    [info.time_bits, info.shard_bits, info.seq_bits, info.tick_ms],
    [l.timeBits, l.shardBits, l.seqBits, l.tickMs],
  );
  assert.equal(info.epoch.getTime(), epoch.getTime());
  const maxShard = 2 ** l.shardBits - 1, maxSeq = 2 ** l.seqBits - 1;
  const epochUs = BigInt(epoch.getTime()) * 1000n, lastUs = BigInt(info.last_us), tickUs = BigInt(l.tickMs) * 1000n;
  const rand = rng(`${spec}/${epoch.toISOString()}`);
  const randUs = () => epochUs + rand(lastUs - epochUs);

  const cases = [];
  const edges = [epochUs, epochUs + 1n, epochUs + tickUs - 1n, epochUs + tickUs, lastUs];
  for (const us of [...edges, ...Array.from({ length: 6 }, randUs)]) {
    for (const s of [0, maxShard, Number(rand(maxShard + 1))]) {
      for (const q of [0, maxSeq, Number(rand(maxSeq + 1))]) cases.push([us, s, q]);
    }
  }
  for (let i = 0; i < 100; i++) cases.push([randUs(), Number(rand(maxShard + 1)), Number(rand(maxSeq + 1))]);

  const { rows } = await client.query(
    `SELECT c.id::text, (extract(epoch FROM d.ts) * 1e6)::bigint::text AS ts_us, d.shard, d.seq
     FROM (SELECT o, snowflake_compose(t, s, q, $4, $5) AS id
           FROM unnest($1::timestamptz[], $2::int[], $3::int[]) WITH ORDINALITY AS u(t, s, q, o)) c,
          LATERAL snowflake_decode(c.id, $4, $5) d
     ORDER BY c.o`,
    [cases.map((c) => isoUs(c[0])), cases.map((c) => c[1]), cases.map((c) => c[2]), spec, epoch],
  );
  assert.equal(rows.length, cases.length);
  rows.forEach((r, i) => {
    const [us, s, q] = cases[i];
    const d = decode(r.id, spec, epoch);
    assert.deepEqual([d.ms * 1000n, d.shard, d.seq], [BigInt(r.ts_us), r.shard, r.seq], `id ${r.id}`);
    assert.deepEqual([d.shard, d.seq], [s, q]);
    assert.ok(d.ms * 1000n <= us && us < d.ms * 1000n + tickUs, `${isoUs(us)} is in the tick of id ${r.id}`);
  });

  // Arbitrary ids of the layout, whatever made them: every bit pattern up to its largest id.
  const top = maxId(l);
  const ids = [0n, 1n, top, ...Array.from({ length: 200 }, () => rand(top + 1n))];
  const res = await client.query(
    `SELECT (extract(epoch FROM d.ts) * 1e6)::bigint::text AS ts_us, d.shard, d.seq
     FROM unnest($1::bigint[]) WITH ORDINALITY u(id, o), snowflake_decode(u.id, $2, $3) d ORDER BY u.o`,
    [ids.map(String), spec, epoch],
  );
  assert.equal(res.rows.length, ids.length);
  res.rows.forEach((r, i) => {
    const d = decode(ids[i], spec, epoch);
    assert.deepEqual([d.ms * 1000n, d.shard, d.seq], [BigInt(r.ts_us), r.shard, r.seq], `id ${ids[i]}`);
  });
}

for (const spec of LAYOUTS) {
  test(`the BigInt decoder agrees with snowflake_decode(id, '${spec}', epoch)`, async () => {
    for (const epoch of [DEFAULT_EPOCH, OTHER_EPOCH]) await checkLayout(spec, epoch);
  });
}

test('ids outside the layout: refused by the decoder and by the server', async () => {
  for (const id of [-1n, 2n ** 53n]) {
    assert.throws(() => decode(id, 'javascript'), RangeError);
    await assert.rejects(client.query("SELECT * FROM snowflake_decode($1, 'javascript', '2025-01-01+00')", [`${id}`]));
  }
});

test("the javascript preset's ids are safe Numbers for the layout's whole life", async () => {
  for (const epoch of [DEFAULT_EPOCH, OTHER_EPOCH]) {
    const r = await one(
      `SELECT l.last_timestamp, snowflake_max_id(l.last_timestamp, 'javascript', l.epoch)::text AS largest,
              l.lifetime_years, l.max_shard, l.ids_per_ms
       FROM snowflake_layout('javascript', $1) l`,
      [epoch],
    );
    const largest = BigInt(r.largest);
    assert.equal(largest, maxId('javascript'));
    assert.equal(largest, 2n ** 53n - 1n);
    assert.ok(largest <= BigInt(Number.MAX_SAFE_INTEGER));
    assert.ok(Number.isSafeInteger(Number(r.largest)));
    assert.equal(String(JSON.parse(`{"id": ${r.largest}}`).id), r.largest, 'survives JSON as a bare number');
    // The trade: 16 shards, 256 ids per millisecond per shard, about 69.7 years.
    assert.deepEqual([r.max_shard, Number(r.ids_per_ms), Math.round(r.lifetime_years * 10) / 10], [15, 256, 69.7]);
    // The last tick is the one the layout ends in: the id of a later time is refused.
    await assert.rejects(
      client.query("SELECT snowflake_max_id($1::timestamptz + interval '1 ms', 'javascript', $2)", [
        r.last_timestamp,
        epoch,
      ]),
    );
  }
});
