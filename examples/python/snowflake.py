"""Decode snowflake_id ids in Python, without a database round trip. No dependencies.

    from snowflake import decode
    decode(252969121090637507)     # the default layout and epoch
    # Decoded(ts=datetime(2026, 11, 30, 1, 28, 58, 407000, tzinfo=utc), shard=7, seq=195)
    decode(i, "twitter", datetime(2010, 11, 4, 1, 42, 54, 657000, tzinfo=timezone.utc))

An id is [0 sign][ticks since the epoch][shard][sequence]; the layout names the widths and the
tick (docs/reference.md, "Layouts"). `decode(id, layout, epoch)` gives what the server's
`snowflake_decode(id, layout, epoch)` gives: the start of the id's tick, its shard and sequence
(examples/python/test_clients.py checks this against a server for every preset). Pass the
server's own layout and epoch, from `SELECT layout, epoch FROM snowflake_layout()`, to decode the
ids it mints.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import NamedTuple

__all__ = ["Layout", "Decoded", "parse_layout", "decode", "DEFAULT_EPOCH", "PRESETS"]

# 2025-01-01 00:00:00 UTC: the extension's default `snowflake_id.epoch`.
DEFAULT_EPOCH = datetime(2025, 1, 1, tzinfo=timezone.utc)
_UNIX = datetime(1970, 1, 1, tzinfo=timezone.utc)
ID_BITS = 63


class Layout(NamedTuple):
    time_bits: int
    shard_bits: int
    seq_bits: int
    tick_ms: int = 1

    @property
    def max_shard(self) -> int:
        return (1 << self.shard_bits) - 1

    @property
    def max_seq(self) -> int:
        return (1 << self.seq_bits) - 1

    @property
    def max_id(self) -> int:
        return (1 << (self.time_bits + self.shard_bits + self.seq_bits)) - 1


# src/core/layout.rs, Widths::PRESETS.
PRESETS = {
    "default": Layout(41, 13, 9, 1),
    "twitter": Layout(41, 10, 12, 1),
    "sonyflake": Layout(39, 16, 8, 10),
    "javascript": Layout(41, 4, 8, 1),  # every id below 2**53
}


class Decoded(NamedTuple):
    ts: datetime  # the start of the id's tick, in UTC
    shard: int
    seq: int


def parse_layout(spec: str | Layout) -> Layout:
    """A preset name (any case) or 'TIME/SHARD/SEQ' with an optional '@Nms', as the setting
    `snowflake_id.layout` spells it; ValueError for anything the server would refuse."""
    if isinstance(spec, Layout):
        layout = spec
    else:
        text = spec.strip()
        if text.lower() in PRESETS:
            return PRESETS[text.lower()]
        bits, _, tick = text.partition("@")
        fields = [f.strip() for f in bits.split("/")]
        tick = tick.strip()
        if tick.endswith("ms"):
            tick = tick[:-2].rstrip()
        if len(fields) != 3 or not all(f.isascii() and f.isdigit() for f in fields) or (
            "@" in text and not (tick.isascii() and tick.isdigit())
        ):
            raise ValueError(f"not a snowflake layout: {spec!r}")
        layout = Layout(*(int(f) for f in fields), int(tick) if "@" in text else 1)
    t, s, q, tick_ms = layout
    if t + s + q > ID_BITS or not (1 <= t <= 63 and 0 <= s <= 16 and 1 <= q <= 31 and 1 <= tick_ms <= 1000):
        raise ValueError(f"layout out of bounds: {spec!r}")
    return layout


def _epoch_ms(epoch: datetime | int) -> int:
    """An epoch as Unix milliseconds: the server keeps the millisecond holding it."""
    if isinstance(epoch, int):
        return epoch
    if epoch.tzinfo is None:
        raise ValueError("epoch must be timezone-aware")
    return (epoch - _UNIX) // timedelta(milliseconds=1)


def decode(id: int, layout: str | Layout = "default", epoch: datetime | int = DEFAULT_EPOCH) -> Decoded:
    """The start of the id's tick, its shard and its sequence. The epoch is an aware datetime or
    Unix milliseconds. ValueError for an id outside the layout (negative, or above its max_id)."""
    lay = parse_layout(layout)
    if not 0 <= id <= lay.max_id:
        raise ValueError(f"id {id} is outside the layout {layout!r} (0 to {lay.max_id})")
    ticks = id >> (lay.shard_bits + lay.seq_bits)
    shard = (id >> lay.seq_bits) & lay.max_shard
    seq = id & lay.max_seq
    unix_ms = _epoch_ms(epoch) + ticks * lay.tick_ms
    return Decoded(_UNIX + timedelta(milliseconds=unix_ms), shard, seq)
