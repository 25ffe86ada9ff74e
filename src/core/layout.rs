//! The bit layout of a snowflake id, as one value.
//!
//! An id is a non-negative `i64`. Bit 63, the sign bit, is never set. Below it, from the top down:
//!
//! ```text
//!  63  62 ............................ shard_bits+seq_bits ........ seq_bits ......... 0
//! [ 0 ][ ticks since the epoch (time_bits) ][ shard (shard_bits) ][ sequence (seq_bits) ]
//! ```
//!
//! A *tick* is `tick_ms` milliseconds (1 for the default and Twitter layouts, 10 for Sonyflake).
//! Because the tick count sits in the high bits, comparing two ids compares their creation ticks
//! first: `ORDER BY id` is `ORDER BY created_at` at tick granularity.
//!
//! Everything here is pure: no clock, no PostgreSQL. The server picks one [`Layout`] at start
//! (see `snowflake_id.layout` and `snowflake_id.epoch`) and keeps it until it stops.

use std::fmt;

use super::monotonic::Timeline;
use super::time;

/// Bits an id may use: 64 minus the sign bit.
pub const ID_BITS: u32 = 63;

/// 2025-01-01 00:00:00 UTC in Unix milliseconds: the default epoch.
pub const DEFAULT_EPOCH_UNIX_MS: i64 = 1_735_689_600_000;

/// Shared memory keeps a 128-byte slot per shard (its state word and statistics), so the shard
/// field is capped at 2^16 shards (8 MiB). Sonyflake's 16 bits is the widest preset.
pub const MAX_SHARD_BITS: u32 = 16;

/// The sequence is reported as an SQL `int`, so it has at most 31 bits.
pub const MAX_SEQ_BITS: u32 = 31;

/// Ticks longer than a second make ids too coarse to sort rows by creation.
pub const MAX_TICK_MS: u32 = 1000;

/// How a layout spends the 63 bits, and how long a tick is. The epoch is separate because it is
/// a separate setting; [`Layout`] joins the two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Widths {
    pub time_bits: u32,
    pub shard_bits: u32,
    pub seq_bits: u32,
    pub tick_ms: u32,
}

impl Widths {
    /// 41 | 13 | 9 with 1 ms ticks: 8192 shards, 512 ids per ms per shard, ~69.7 years.
    pub const DEFAULT: Widths = Widths { time_bits: 41, shard_bits: 13, seq_bits: 9, tick_ms: 1 };
    /// Twitter's 2010 snowflake: 41 | 10 | 12, 1 ms ticks.
    pub const TWITTER: Widths = Widths { time_bits: 41, shard_bits: 10, seq_bits: 12, tick_ms: 1 };
    /// Sony's sonyflake: 39 | 16 | 8, 10 ms ticks.
    pub const SONYFLAKE: Widths = Widths { time_bits: 39, shard_bits: 16, seq_bits: 8, tick_ms: 10 };

    /// The named presets, in the order the documentation lists them.
    pub const PRESETS: [(&'static str, Widths); 3] =
        [("default", Self::DEFAULT), ("twitter", Self::TWITTER), ("sonyflake", Self::SONYFLAKE)];

    /// Parses a layout setting: a preset name (`default`, `twitter`, `sonyflake`, any case), or
    /// custom widths `TIME/SHARD/SEQ`, optionally followed by a tick length `@Nms`
    /// (for example `39/16/8@10ms`). Surrounding blanks are ignored.
    ///
    /// # Errors
    /// [`LayoutError`] when the text is neither a preset nor well-formed widths, or when the
    /// widths are out of bounds (see [`Widths::validate`]).
    pub fn parse(spec: &str) -> Result<Widths, LayoutError> {
        let spec = spec.trim();
        if let Some((_, w)) = Self::PRESETS.iter().find(|(name, _)| name.eq_ignore_ascii_case(spec)) {
            return Ok(*w);
        }
        let syntax = || LayoutError::Syntax(spec.to_owned());
        let (bits, tick) = match spec.split_once('@') {
            Some((bits, tick)) => (bits, Some(tick.trim())),
            None => (spec, None),
        };
        let fields: Vec<&str> = bits.split('/').map(str::trim).collect();
        let [t, s, q] = fields.as_slice() else {
            return Err(syntax());
        };
        let num = |f: &str| f.parse::<u32>().map_err(|_| syntax());
        let tick_ms = match tick {
            None => 1,
            Some(t) => num(t.strip_suffix("ms").map_or(t, str::trim_end))?,
        };
        let w = Widths { time_bits: num(t)?, shard_bits: num(s)?, seq_bits: num(q)?, tick_ms };
        w.validate()?;
        Ok(w)
    }

    /// Checks the bounds every layout must meet.
    ///
    /// # Errors
    /// - [`LayoutError::TooWide`] when the three fields need more than 63 bits;
    /// - [`LayoutError::FieldOutOfRange`] when a field is outside its own bounds.
    pub fn validate(&self) -> Result<(), LayoutError> {
        let total = u64::from(self.time_bits) + u64::from(self.shard_bits) + u64::from(self.seq_bits);
        if total > u64::from(ID_BITS) {
            return Err(LayoutError::TooWide { widths: *self, total });
        }
        let field = |name: &'static str, value: u32, min: u32, max: u32| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(LayoutError::FieldOutOfRange { field: name, value, min, max })
            }
        };
        field("time", self.time_bits, 1, ID_BITS)?;
        field("shard", self.shard_bits, 0, MAX_SHARD_BITS)?;
        field("sequence", self.seq_bits, 1, MAX_SEQ_BITS)?;
        field("tick", self.tick_ms, 1, MAX_TICK_MS)
    }
}

/// The canonical spelling, which [`Widths::parse`] reads back: `41/13/9`, or `39/16/8@10ms`.
impl fmt::Display for Widths {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.time_bits, self.shard_bits, self.seq_bits)?;
        if self.tick_ms != 1 {
            write!(f, "@{}ms", self.tick_ms)?;
        }
        Ok(())
    }
}

/// The active layout: field widths, tick length and epoch, validated together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    widths: Widths,
    epoch_unix_ms: i64,
    /// Unix milliseconds of the start of the last tick the time field can hold.
    last_tick_unix_ms: i64,
}

/// The three fields of an id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    pub ticks: u64,
    pub shard: u32,
    pub seq: u32,
}

impl Layout {
    /// The default layout and epoch.
    pub const DEFAULT: Layout = Layout {
        widths: Widths::DEFAULT,
        epoch_unix_ms: DEFAULT_EPOCH_UNIX_MS,
        last_tick_unix_ms: DEFAULT_EPOCH_UNIX_MS + (1 << 41) - 1,
    };

    /// Joins widths and an epoch. The widths must already be valid ([`Widths::parse`] and
    /// [`Widths::validate`] make sure); this checks only what depends on the epoch.
    ///
    /// # Errors
    /// - [`LayoutError::EpochBefore1970`] for an epoch before the Unix epoch;
    /// - [`LayoutError::OutlivesTime`] when the last tick lies beyond what an `i64` of Unix
    ///   milliseconds can hold (only absurdly wide time fields get there).
    pub const fn new(widths: Widths, epoch_unix_ms: i64) -> Result<Layout, LayoutError> {
        if epoch_unix_ms < 0 {
            return Err(LayoutError::EpochBefore1970 { epoch_unix_ms });
        }
        let max_ticks = (1u64 << widths.time_bits) - 1;
        // (2^63 - 1) fits an i128 comfortably; compute there so no width can overflow.
        let last = epoch_unix_ms as i128 + max_ticks as i128 * widths.tick_ms as i128;
        if last > i64::MAX as i128 {
            return Err(LayoutError::OutlivesTime);
        }
        Ok(Layout { widths, epoch_unix_ms, last_tick_unix_ms: last as i64 })
    }

    /// Refuses an epoch later than `now_unix_ms`: ids would need negative tick counts until
    /// the epoch arrives.
    ///
    /// # Errors
    /// [`LayoutError::EpochInFuture`].
    pub fn check_epoch_not_in_future(&self, now_unix_ms: i64) -> Result<(), LayoutError> {
        if self.epoch_unix_ms > now_unix_ms {
            return Err(LayoutError::EpochInFuture { epoch_unix_ms: self.epoch_unix_ms, now_unix_ms });
        }
        Ok(())
    }

    pub const fn widths(&self) -> Widths {
        self.widths
    }
    pub const fn epoch_unix_ms(&self) -> i64 {
        self.epoch_unix_ms
    }
    pub const fn tick_ms(&self) -> u32 {
        self.widths.tick_ms
    }
    /// Bits an id actually uses (63 for every preset).
    pub const fn total_bits(&self) -> u32 {
        self.widths.time_bits + self.widths.shard_bits + self.widths.seq_bits
    }
    pub const fn max_shard(&self) -> u32 {
        ((1u64 << self.widths.shard_bits) - 1) as u32
    }
    pub const fn shard_count(&self) -> usize {
        1usize << self.widths.shard_bits
    }
    pub const fn max_seq(&self) -> u32 {
        ((1u64 << self.widths.seq_bits) - 1) as u32
    }
    pub const fn max_ticks(&self) -> u64 {
        (1u64 << self.widths.time_bits) - 1
    }
    /// The largest id this layout can produce.
    pub const fn max_id(&self) -> i64 {
        ((1u128 << self.total_bits()) - 1) as i64
    }
    /// Ids one shard can mint per millisecond (fractional for ticks longer than 1 ms).
    pub fn ids_per_ms(&self) -> f64 {
        f64::from(self.max_seq() + 1) / f64::from(self.widths.tick_ms)
    }
    /// Ids one shard can mint per second.
    pub const fn ids_per_second(&self) -> u64 {
        (self.max_seq() as u64 + 1) * 1000 / self.widths.tick_ms as u64
    }
    /// The last Unix millisecond the layout can represent (the end of its last tick).
    pub const fn last_unix_ms(&self) -> i64 {
        self.last_tick_unix_ms + self.widths.tick_ms as i64 - 1
    }
    /// How long the layout lasts from its epoch, in Julian years.
    pub fn lifetime_years(&self) -> f64 {
        (self.max_ticks() as f64 + 1.0) * f64::from(self.widths.tick_ms) / time::MS_PER_JULIAN_YEAR
    }

    /// Checks a shard number against the layout.
    ///
    /// # Errors
    /// [`IdError::ShardOutOfRange`] for a negative shard or one above [`Layout::max_shard`].
    pub fn shard(&self, shard: i64) -> Result<u32, IdError> {
        match u32::try_from(shard) {
            Ok(s) if s <= self.max_shard() => Ok(s),
            _ => Err(IdError::ShardOutOfRange { shard, max: self.max_shard() }),
        }
    }

    /// Builds an id from its fields. The caller guarantees each field fits its width; the
    /// generator does, because its state machine never exceeds [`Layout::max_ticks`].
    pub const fn compose(&self, p: Parts) -> i64 {
        let w = self.widths;
        ((p.ticks << (w.shard_bits + w.seq_bits)) | ((p.shard as u64) << w.seq_bits) | p.seq as u64) as i64
    }

    /// Splits an id into its fields.
    ///
    /// # Errors
    /// [`IdError::IdOutOfRange`] for a negative id, or one above [`Layout::max_id`].
    pub const fn decompose(&self, id: i64) -> Result<Parts, IdError> {
        if id < 0 || id > self.max_id() {
            return Err(IdError::IdOutOfRange { id, max: self.max_id() });
        }
        let w = self.widths;
        let id = id as u64;
        Ok(Parts {
            ticks: id >> (w.shard_bits + w.seq_bits),
            shard: ((id >> w.seq_bits) & self.max_shard() as u64) as u32,
            seq: (id & self.max_seq() as u64) as u32,
        })
    }

    /// The generator timeline of one shard: ticks of this layout, the sequence in the low bits.
    pub const fn timeline(&self) -> Timeline {
        Timeline {
            origin_unix_ms: self.epoch_unix_ms,
            tick_ms: self.widths.tick_ms,
            low_bits: self.widths.seq_bits,
            max_tick: self.max_ticks(),
            sub_tick_fraction: false,
        }
    }

    /// The id of a generator word (`tick << seq_bits | seq`) minted for `shard`.
    pub const fn id_from_word(&self, word: u64, shard: u32) -> i64 {
        self.compose(Parts { ticks: word >> self.widths.seq_bits, shard, seq: (word & self.max_seq() as u64) as u32 })
    }

    /// Unix milliseconds of the start of a tick.
    pub const fn tick_start_unix_ms(&self, ticks: u64) -> i64 {
        self.epoch_unix_ms + ticks as i64 * self.widths.tick_ms as i64
    }

    /// The tick holding a Unix millisecond.
    ///
    /// # Errors
    /// [`IdError::TimeOutOfRange`] before the epoch or after [`Layout::last_unix_ms`].
    pub const fn tick_of_unix_ms(&self, unix_ms: i64) -> Result<u64, IdError> {
        if unix_ms < self.epoch_unix_ms || unix_ms > self.last_unix_ms() {
            return Err(IdError::TimeOutOfRange { unix_ms, first: self.epoch_unix_ms, last: self.last_unix_ms() });
        }
        Ok((unix_ms - self.epoch_unix_ms) as u64 / self.widths.tick_ms as u64)
    }

    /// The smallest id any shard can mint in the tick holding `unix_ms`. Every id minted at or
    /// after `unix_ms` is `>=` it, so `id >= min_id_at(t)` is an index range scan.
    ///
    /// # Errors
    /// As [`Layout::tick_of_unix_ms`].
    pub const fn min_id_at(&self, unix_ms: i64) -> Result<i64, IdError> {
        match self.tick_of_unix_ms(unix_ms) {
            Ok(ticks) => Ok(self.compose(Parts { ticks, shard: 0, seq: 0 })),
            Err(e) => Err(e),
        }
    }

    /// The largest id any shard can mint in the tick holding `unix_ms`. Every id minted at or
    /// before `unix_ms` is `<=` it.
    ///
    /// # Errors
    /// As [`Layout::tick_of_unix_ms`].
    pub const fn max_id_at(&self, unix_ms: i64) -> Result<i64, IdError> {
        match self.tick_of_unix_ms(unix_ms) {
            Ok(ticks) => Ok(self.compose(Parts { ticks, shard: self.max_shard(), seq: self.max_seq() })),
            Err(e) => Err(e),
        }
    }
}

/// A layout or epoch setting that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutError {
    Syntax(String),
    TooWide { widths: Widths, total: u64 },
    FieldOutOfRange { field: &'static str, value: u32, min: u32, max: u32 },
    EpochBefore1970 { epoch_unix_ms: i64 },
    EpochInFuture { epoch_unix_ms: i64, now_unix_ms: i64 },
    OutlivesTime,
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::Syntax(s) => write!(
                f,
                "\"{s}\" is not a snowflake layout. Use default, twitter, sonyflake, or TIME/SHARD/SEQ bit widths with an optional @Nms tick, such as 41/13/9 or 39/16/8@10ms."
            ),
            LayoutError::TooWide { widths, total } => write!(
                f,
                "Layout {}/{}/{} needs {total} bits, but ids have {ID_BITS}: the sign bit stays clear so that ids never go negative.",
                widths.time_bits, widths.shard_bits, widths.seq_bits
            ),
            LayoutError::FieldOutOfRange { field, value, min, max } if *field == "tick" => {
                write!(f, "A tick of {value} ms is out of range: it must be between {min} and {max} ms.")
            }
            LayoutError::FieldOutOfRange { field, value, min, max } => {
                write!(f, "A {field} field of {value} bits is out of range: it must be between {min} and {max} bits.")
            }
            LayoutError::EpochBefore1970 { epoch_unix_ms } => {
                write!(f, "Epoch {} is before 1970-01-01.", time::format_unix_ms(*epoch_unix_ms))
            }
            LayoutError::EpochInFuture { epoch_unix_ms, now_unix_ms } => write!(
                f,
                "Epoch {} is in the future: the clock reads {}.",
                time::format_unix_ms(*epoch_unix_ms),
                time::format_unix_ms(*now_unix_ms)
            ),
            LayoutError::OutlivesTime => f.write_str("The time field reaches beyond the year 292 million."),
        }
    }
}

/// An id, shard or time that the layout cannot represent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdError {
    ShardOutOfRange { shard: i64, max: u32 },
    IdOutOfRange { id: i64, max: i64 },
    TimeOutOfRange { unix_ms: i64, first: i64, last: i64 },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(w: Widths) -> Layout {
        Layout::new(w, DEFAULT_EPOCH_UNIX_MS).unwrap()
    }

    #[test]
    fn default_layout_figures() {
        let l = Layout::DEFAULT;
        assert_eq!(Layout::new(Widths::DEFAULT, DEFAULT_EPOCH_UNIX_MS), Ok(l));
        assert_eq!(l.total_bits(), 63);
        assert_eq!(l.max_shard(), 8191);
        assert_eq!(l.max_seq(), 511);
        assert_eq!(l.ids_per_ms(), 512.0);
        assert_eq!(l.ids_per_second(), 512_000);
        assert_eq!(l.max_id(), i64::MAX);
        // 2^41 ms is 69.68 Julian years: the layout ends in 2094.
        assert!((l.lifetime_years() - 69.68).abs() < 0.01, "{}", l.lifetime_years());
        assert_eq!(l.last_unix_ms(), DEFAULT_EPOCH_UNIX_MS + (1i64 << 41) - 1);
        assert_eq!(time::format_unix_ms(l.last_unix_ms()), "2094-09-07 15:47:35.551+00");
    }

    #[test]
    fn presets_and_custom_widths_parse() {
        assert_eq!(Widths::parse("default"), Ok(Widths::DEFAULT));
        assert_eq!(Widths::parse(" Twitter "), Ok(Widths::TWITTER));
        assert_eq!(Widths::parse("SONYFLAKE"), Ok(Widths::SONYFLAKE));
        assert_eq!(Widths::parse("41/13/9"), Ok(Widths::DEFAULT));
        assert_eq!(Widths::parse("39/16/8@10ms"), Ok(Widths::SONYFLAKE));
        assert_eq!(Widths::parse("39 / 16 / 8 @ 10"), Ok(Widths::SONYFLAKE));
        assert_eq!(Widths::parse("40/10/12"), Ok(Widths { time_bits: 40, shard_bits: 10, seq_bits: 12, tick_ms: 1 }));
        for w in [Widths::DEFAULT, Widths::TWITTER, Widths::SONYFLAKE] {
            assert_eq!(Widths::parse(&w.to_string()), Ok(w), "round trip of {w}");
        }
    }

    #[test]
    fn bad_layouts_are_refused() {
        // Instagram's 41/13/10 spends the sign bit.
        assert_eq!(
            Widths::parse("41/13/10"),
            Err(LayoutError::TooWide {
                widths: Widths { time_bits: 41, shard_bits: 13, seq_bits: 10, tick_ms: 1 },
                total: 64
            })
        );
        for bad in ["", "instagram", "41/13", "41/13/9/1", "a/b/c", "41/13/9@", "41/13/9@xms", "-1/13/9"] {
            assert!(matches!(Widths::parse(bad), Err(LayoutError::Syntax(_))), "{bad:?}");
        }
        assert!(matches!(Widths::parse("40/17/2"), Err(LayoutError::FieldOutOfRange { field: "shard", .. })));
        assert!(matches!(Widths::parse("41/13/0"), Err(LayoutError::FieldOutOfRange { field: "sequence", .. })));
        assert!(matches!(Widths::parse("0/13/9"), Err(LayoutError::FieldOutOfRange { field: "time", .. })));
        assert!(matches!(Widths::parse("41/13/9@0ms"), Err(LayoutError::FieldOutOfRange { field: "tick", .. })));
        assert!(matches!(Widths::parse("41/13/9@1001ms"), Err(LayoutError::FieldOutOfRange { field: "tick", .. })));
        let msg = Widths::parse("41/13/10").unwrap_err().to_string();
        assert!(msg.contains("needs 64 bits"), "{msg}");
    }

    #[test]
    fn epoch_bounds() {
        assert_eq!(Layout::new(Widths::DEFAULT, -1), Err(LayoutError::EpochBefore1970 { epoch_unix_ms: -1 }));
        let l = Layout::DEFAULT;
        assert!(l.check_epoch_not_in_future(DEFAULT_EPOCH_UNIX_MS).is_ok());
        assert!(matches!(
            l.check_epoch_not_in_future(DEFAULT_EPOCH_UNIX_MS - 1),
            Err(LayoutError::EpochInFuture { .. })
        ));
        // 63 bits of 1000 ms ticks overflow an i64 of milliseconds.
        let huge = Widths { time_bits: 62, shard_bits: 0, seq_bits: 1, tick_ms: 1000 };
        assert_eq!(huge.validate(), Ok(()));
        assert_eq!(Layout::new(huge, 0), Err(LayoutError::OutlivesTime));
    }

    #[test]
    fn compose_and_decompose_are_inverse_at_the_field_limits() {
        for (name, w) in Widths::PRESETS {
            let l = layout(w);
            for shard in [0, l.max_shard()] {
                for seq in [0, l.max_seq()] {
                    for ticks in [0, 1, l.max_ticks()] {
                        let p = Parts { ticks, shard, seq };
                        let id = l.compose(p);
                        assert!(id >= 0, "{name}: {p:?} gave a negative id");
                        assert_eq!(l.decompose(id), Ok(p), "{name}");
                    }
                }
            }
            // The very largest id is all ones below the sign bit.
            assert_eq!(l.compose(Parts { ticks: l.max_ticks(), shard: l.max_shard(), seq: l.max_seq() }), i64::MAX);
        }
    }

    #[test]
    fn exact_bit_positions_of_the_default_layout() {
        let l = Layout::DEFAULT;
        assert_eq!(l.compose(Parts { ticks: 1, shard: 0, seq: 0 }), 1 << 22);
        assert_eq!(l.compose(Parts { ticks: 0, shard: 1, seq: 0 }), 1 << 9);
        assert_eq!(l.compose(Parts { ticks: 0, shard: 0, seq: 1 }), 1);
        assert_eq!(l.compose(Parts { ticks: 3, shard: 7, seq: 5 }), (3 << 22) | (7 << 9) | 5);
    }

    #[test]
    fn decoding_rejects_negative_ids_and_ids_beyond_a_narrow_layout() {
        let l = Layout::DEFAULT;
        assert_eq!(l.decompose(-1), Err(IdError::IdOutOfRange { id: -1, max: i64::MAX }));
        let narrow = layout(Widths { time_bits: 40, shard_bits: 13, seq_bits: 9, tick_ms: 1 });
        assert_eq!(narrow.max_id(), (1 << 62) - 1);
        assert!(narrow.decompose(1 << 62).is_err());
        assert!(narrow.decompose((1 << 62) - 1).is_ok());
    }

    #[test]
    fn shard_bounds() {
        for (_, w) in Widths::PRESETS {
            let l = layout(w);
            assert_eq!(l.shard(0), Ok(0));
            assert_eq!(l.shard(i64::from(l.max_shard())), Ok(l.max_shard()));
            assert!(l.shard(-1).is_err());
            assert!(l.shard(i64::from(l.max_shard()) + 1).is_err());
        }
        assert_eq!(Layout::DEFAULT.shard(8192), Err(IdError::ShardOutOfRange { shard: 8192, max: 8191 }));
    }

    #[test]
    fn range_bounds_bracket_every_id_of_a_tick() {
        let l = layout(Widths::SONYFLAKE);
        let t = DEFAULT_EPOCH_UNIX_MS + 12_345;
        let tick = l.tick_of_unix_ms(t).unwrap();
        assert_eq!(tick, 1234);
        let lo = l.min_id_at(t).unwrap();
        let hi = l.max_id_at(t).unwrap();
        assert_eq!(l.decompose(lo), Ok(Parts { ticks: 1234, shard: 0, seq: 0 }));
        assert_eq!(l.decompose(hi), Ok(Parts { ticks: 1234, shard: 65535, seq: 255 }));
        // The whole tick 12340..12349 ms maps to the same bounds.
        assert_eq!(l.min_id_at(DEFAULT_EPOCH_UNIX_MS + 12_340), Ok(lo));
        assert_eq!(l.max_id_at(DEFAULT_EPOCH_UNIX_MS + 12_349), Ok(hi));
        assert_eq!(l.min_id_at(DEFAULT_EPOCH_UNIX_MS + 12_350), Ok(hi + 1));
        assert!(matches!(l.min_id_at(DEFAULT_EPOCH_UNIX_MS - 1), Err(IdError::TimeOutOfRange { .. })));
        assert!(l.max_id_at(l.last_unix_ms()).is_ok());
        assert!(l.max_id_at(l.last_unix_ms() + 1).is_err());
    }
}
