//! The id space a database was minted in, and the floor its stored ids set for new ones.
//!
//! A database carries a record of the layout and epoch its snowflake ids were made under (the
//! extension's `snowflake_id_space` table, dumped with the data and kept by `pg_upgrade`). A
//! server with another layout or epoch would mint ids from another space into the same tables:
//! smaller than the stored ones, or colliding with them. [`judge`] compares the record with the
//! server's layout.
//!
//! The rows themselves say how far the id space has gone: the largest stored id of each column
//! a generator fills. [`snowflake_floor`] and [`uuidv7_floor`] turn one into the first generator
//! word above it, which the server raises its generators to before the first id it mints for
//! that database, whatever its clock and reservation file say.

use std::fmt;

use super::layout::{Layout, Widths};
use super::monotonic::{catch_up_budget_ns, ClockPolicy};
use super::time::{self, NS_PER_MS};

/// How far ahead of the clock a stored id may lie and still raise the generators: as far as a
/// call may wait for the clock to catch up with a generator that runs ahead
/// ([`catch_up_budget_ns`], 2 s with the default settings). A stored id further ahead (a clock
/// far ahead where it was minted, a value someone wrote by hand) is not followed: following it
/// would make every call on the server refuse until the clock got there, and any role that can
/// create a table could store one.
pub fn horizon_ms(policy: &ClockPolicy) -> i64 {
    i64::try_from(catch_up_budget_ns(policy) / NS_PER_MS as u64).unwrap_or(i64::MAX)
}

/// How many index entries below the bound are looked at for a version 7 UUID, from the largest
/// down: random (v4) UUIDs in the same column lie below the bound once in about 160, spread over
/// every time since 1970, so one among the largest entries is rare, and a thousand never are.
pub const UUIDV7_MAX_STEPS: usize = 1000;

/// One row of the record: a layout's canonical text and its epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    pub layout: String,
    pub epoch_unix_ms: i64,
}

/// The record names an id space other than the server's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub recorded: Recorded,
    pub server_layout: String,
    pub server_epoch_unix_ms: i64,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "this database's snowflake ids were minted with snowflake_id.layout = '{}' and snowflake_id.epoch = '{}', but this server runs with snowflake_id.layout = '{}' and snowflake_id.epoch = '{}'",
            self.recorded.layout,
            time::format_unix_ms(self.recorded.epoch_unix_ms),
            self.server_layout,
            time::format_unix_ms(self.server_epoch_unix_ms),
        )
    }
}

/// Whether every recorded row names the server's id space. A layout is compared by its widths
/// and tick (so `default` and `41/13/9` are the same space), the epoch to the millisecond. An
/// empty record (a database from before the record existed) names no space and passes. A
/// recorded layout that no longer parses is a mismatch: nothing says its ids fit the server's.
///
/// # Errors
/// The first row that differs.
pub fn judge(recorded: &[Recorded], server: &Layout) -> Result<(), Mismatch> {
    let same = |r: &Recorded| {
        Widths::parse(&r.layout).is_ok_and(|w| w == server.widths()) && r.epoch_unix_ms == server.epoch_unix_ms()
    };
    match recorded.iter().find(|r| !same(r)) {
        None => Ok(()),
        Some(r) => Err(Mismatch {
            recorded: r.clone(),
            server_layout: server.widths().to_string(),
            server_epoch_unix_ms: server.epoch_unix_ms(),
        }),
    }
}

/// The first word, on every shard of `layout`, above the stored snowflake id `max_id`: the
/// first word of the tick after the id's. `None` for a value that is not an id of the layout
/// (negative, or beyond its last id), which no generator of this layout could repeat.
pub fn snowflake_floor(layout: &Layout, max_id: i64) -> Option<u64> {
    let parts = layout.decompose(max_id).ok()?;
    // ticks <= max_ticks < 2^63, so the next tick and the shift stay inside a u64; a tick past
    // the layout's last is the generator's exhausted word, which refuses as time running out.
    Some((parts.ticks + 1) << layout.widths().seq_bits)
}

/// The first UUIDv7 generator word (`unix_ms << 12 | fraction`) above the stored UUID `max`:
/// its time and sub-millisecond fraction (`rand_a`, as this extension and PostgreSQL 18 write
/// it), plus one. `None` unless it is an RFC 9562 version 7 UUID.
pub fn uuidv7_floor(max: &[u8; 16]) -> Option<u64> {
    if super::uuidv7::version(max) != Some(7) {
        return None;
    }
    let hi = u64::from_be_bytes([max[0], max[1], max[2], max[3], max[4], max[5], max[6], max[7]]);
    let word = ((hi >> 16) << super::uuidv7::FRACTION_BITS) | (hi & 0x0fff);
    Some(word + 1)
}

/// The snowflake id below which the largest stored id is searched: the first of the tick holding
/// `horizon_ms` after `now_unix_ms`. `None` when that lies past the layout's last tick (every id
/// is below it).
pub fn snowflake_search_bound(layout: &Layout, now_unix_ms: i64, horizon_ms: i64) -> Option<i64> {
    layout.min_id_at(now_unix_ms.saturating_add(horizon_ms)).ok()
}

/// The UUID below which the largest stored UUIDv7 is searched: the first of the millisecond
/// `horizon_ms` after `now_unix_ms`. A column filled by `uuidv7()` may also hold random (v4)
/// UUIDs, which spread over the whole space and which an index cannot tell apart from v7 ones:
/// the search steps down past them (see [`UUIDV7_MAX_STEPS`]), and [`uuidv7_floor`] takes only
/// a version 7 one.
pub fn uuidv7_search_bound(now_unix_ms: i64, horizon_ms: i64) -> [u8; 16] {
    let ms = now_unix_ms.saturating_add(horizon_ms).clamp(0, super::uuidv7::MAX_UNIX_MS as i64) as u64;
    super::uuidv7::encode(ms << super::uuidv7::FRACTION_BITS, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::layout::DEFAULT_EPOCH_UNIX_MS;
    use crate::core::uuidv7;

    fn rec(layout: &str, epoch: i64) -> Recorded {
        Recorded { layout: layout.to_owned(), epoch_unix_ms: epoch }
    }

    #[test]
    fn the_same_space_passes_whatever_the_spelling() {
        let l = Layout::DEFAULT;
        assert_eq!(judge(&[], &l), Ok(()));
        assert_eq!(judge(&[rec("41/13/9", DEFAULT_EPOCH_UNIX_MS), rec("default", DEFAULT_EPOCH_UNIX_MS)], &l), Ok(()));
    }

    #[test]
    fn another_epoch_or_layout_is_a_mismatch_naming_both() {
        let l = Layout::DEFAULT;
        let e2020 = 1_577_836_800_000;
        let m = judge(&[rec("41/13/9", DEFAULT_EPOCH_UNIX_MS), rec("41/13/9", e2020)], &l).unwrap_err();
        assert_eq!(m.recorded.epoch_unix_ms, e2020);
        let text = m.to_string();
        assert!(text.contains("snowflake_id.layout = '41/13/9'") && text.contains("2020-01-01"), "{text}");
        assert!(judge(&[rec("twitter", DEFAULT_EPOCH_UNIX_MS)], &l).is_err());
        assert!(judge(&[rec("41/13/9@2ms", DEFAULT_EPOCH_UNIX_MS)], &l).is_err());
        assert!(judge(&[rec("garbage", DEFAULT_EPOCH_UNIX_MS)], &l).is_err(), "an unreadable record is no proof");
    }

    #[test]
    fn the_snowflake_floor_is_the_next_tick_on_every_shard() {
        let l = Layout::DEFAULT;
        let id = l.compose(crate::core::layout::Parts { ticks: 1000, shard: 8191, seq: 511 });
        let floor = snowflake_floor(&l, id).unwrap();
        let tl = l.timeline();
        for shard in [0, 1, 8191] {
            assert!(l.id_from_word(floor, shard) > id);
        }
        assert_eq!(tl.word_unix_ms(floor), l.tick_start_unix_ms(1001));
        assert_eq!(snowflake_floor(&l, -1), None);
        assert_eq!(snowflake_floor(&l, 0), Some(1 << 9));
    }

    #[test]
    fn the_uuidv7_floor_is_just_above_the_stored_one() {
        let word = 1_700_000_000_000u64 << 12 | 0xabc;
        let u = uuidv7::encode(word, u64::MAX);
        assert_eq!(uuidv7_floor(&u), Some(word + 1));
        assert!(uuidv7::encode(word + 1, 0) > u, "the next word sorts above every v7 of the stored word");
        let mut v4 = u;
        v4[6] = 0x40 | (v4[6] & 0x0f);
        assert_eq!(uuidv7_floor(&v4), None);
    }

    #[test]
    fn the_search_bounds_lie_the_horizon_ahead() {
        let h = horizon_ms(&ClockPolicy { max_lead_ms: 5, max_wait_ms: 1000 });
        assert_eq!(h, 2000, "the default settings wait up to 2 s for a generator ahead");
        assert_eq!(horizon_ms(&ClockPolicy { max_lead_ms: 5, max_wait_ms: 15_000 }), 16_000);
        let now = 1_780_000_000_000; // 2026, after the default epoch
        let b = uuidv7_search_bound(now, h);
        assert_eq!(uuidv7::extract_unix_us(&b), Some((now + h) * 1000));
        assert!(uuidv7::encode(((now + h) as u64 - 1) << 12 | 0xfff, u64::MAX) < b);
        let l = Layout::DEFAULT;
        let sb = snowflake_search_bound(&l, now, h).unwrap();
        assert_eq!(sb, l.min_id_at(now + h).unwrap());
        assert!(l.max_id_at(now + h - 1).unwrap() < sb);
        assert_eq!(snowflake_search_bound(&l, i64::MAX - 10, h), None, "past the layout: no bound");
    }
}
