// Decode snowflake_id ids in JavaScript with BigInt, without a database round trip. No dependencies.
//
//   import { decode } from './snowflake.js';
//   decode('252969121090637507');   // the id as node-postgres returns it: a string
//   // { ms: 1796002138407n, date: 2026-11-30T01:28:58.407Z, shard: 7, seq: 195 }
//   decode(id, 'twitter', new Date('2010-11-04T01:42:54.657Z'));
//
// An id is [0 sign][ticks since the epoch][shard][sequence]; the layout names the widths and the
// tick (docs/reference.md, "Layouts"). decode(id, layout, epoch) gives what the server's
// snowflake_decode(id, layout, epoch) gives: the start of the id's tick (as Unix milliseconds and
// a Date), its shard and its sequence; clients.test.js checks this against a server for every
// preset. Keep ids as strings or BigInt: a Number holds integers exactly only up to 2^53 - 1, and
// the ids of every layout but `javascript` go past it.

export const DEFAULT_EPOCH = new Date('2025-01-01T00:00:00Z');

// src/core/layout.rs, Widths::PRESETS.
export const PRESETS = Object.freeze({
  default: { timeBits: 41, shardBits: 13, seqBits: 9, tickMs: 1 },
  twitter: { timeBits: 41, shardBits: 10, seqBits: 12, tickMs: 1 },
  sonyflake: { timeBits: 39, shardBits: 16, seqBits: 8, tickMs: 10 },
  javascript: { timeBits: 41, shardBits: 4, seqBits: 8, tickMs: 1 }, // every id below 2^53
});

const DIGITS = /^[0-9]+$/;

// A preset name (any case) or 'TIME/SHARD/SEQ' with an optional '@Nms', as the setting
// snowflake_id.layout spells it. Throws a RangeError for anything the server would refuse.
export function parseLayout(spec) {
  if (typeof spec === 'object') return check(spec, spec);
  const text = spec.trim();
  if (Object.hasOwn(PRESETS, text.toLowerCase())) return PRESETS[text.toLowerCase()];
  const at = text.indexOf('@');
  const bits = (at < 0 ? text : text.slice(0, at)).split('/').map((f) => f.trim());
  let tick = at < 0 ? '1' : text.slice(at + 1).trim();
  if (tick.endsWith('ms')) tick = tick.slice(0, -2).trimEnd();
  if (bits.length !== 3 || !bits.every((f) => DIGITS.test(f)) || !DIGITS.test(tick)) {
    throw new RangeError(`not a snowflake layout: ${JSON.stringify(spec)}`);
  }
  const [timeBits, shardBits, seqBits] = bits.map(Number);
  return check({ timeBits, shardBits, seqBits, tickMs: Number(tick) }, spec);
}

function check(l, spec) {
  const { timeBits: t, shardBits: s, seqBits: q, tickMs } = l;
  const within = (v, lo, hi) => Number.isInteger(v) && v >= lo && v <= hi;
  if (t + s + q > 63 || !within(t, 1, 63) || !within(s, 0, 16) || !within(q, 1, 31) || !within(tickMs, 1, 1000)) {
    throw new RangeError(`layout out of bounds: ${JSON.stringify(spec)}`);
  }
  return l;
}

// The largest id of a layout, as a BigInt.
export function maxId(layout) {
  const l = parseLayout(layout);
  return (1n << BigInt(l.timeBits + l.shardBits + l.seqBits)) - 1n;
}

// id: a string of digits (node-postgres's int8) or a BigInt; epoch: a Date, or Unix milliseconds
// (a BigInt or a Number). Returns { ms, date, shard, seq }: ms is the start of the id's tick in
// Unix milliseconds (a BigInt), date the same as a Date. Throws a RangeError for an id outside the
// layout (negative, or above its largest id).
export function decode(id, layout = 'default', epoch = DEFAULT_EPOCH) {
  const l = parseLayout(layout);
  const big = BigInt(id);
  if (big < 0n || big > maxId(l)) throw new RangeError(`id ${id} is outside the layout ${JSON.stringify(layout)}`);
  const shardBits = BigInt(l.shardBits), seqBits = BigInt(l.seqBits);
  const ticks = big >> (shardBits + seqBits);
  const shard = Number((big >> seqBits) & ((1n << shardBits) - 1n));
  const seq = Number(big & ((1n << seqBits) - 1n));
  const epochMs = epoch instanceof Date ? BigInt(epoch.getTime()) : BigInt(epoch);
  const ms = epochMs + ticks * BigInt(l.tickMs);
  return { ms, date: new Date(Number(ms)), shard, seq };
}
