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

use super::excerpt::excerpt;
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

/// The longest layout text [`Widths::parse`] reads, in bytes. The longest sensible spelling,
/// ` 41/13/9@1000ms `, is 16; anything longer is refused before it is looked at, so that
/// `snowflake_layout(repeat('/', 300000000))` costs nothing.
pub const MAX_LAYOUT_LEN: usize = 64;

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
    /// 41 | 4 | 8 with 1 ms ticks: 53 bits, so that every id of the layout's whole life is below
    /// 2^53, the largest integer JavaScript's `Number` (and a JSON parser that reads doubles) holds
    /// exactly. 16 shards, 256 ids per ms per shard, ~69.7 years. A tick of 256 ids keeps every
    /// backend of a default server (100 connections) its own share (`crate::core::share`).
    pub const JAVASCRIPT: Widths = Widths { time_bits: 41, shard_bits: 4, seq_bits: 8, tick_ms: 1 };

    /// The named presets, in the order the documentation lists them.
    pub const PRESETS: [(&'static str, Widths); 4] = [
        ("default", Self::DEFAULT),
        ("twitter", Self::TWITTER),
        ("sonyflake", Self::SONYFLAKE),
        ("javascript", Self::JAVASCRIPT),
    ];

    /// Parses a layout setting: a preset name (`default`, `twitter`, `sonyflake`, `javascript`, any case), or
    /// custom widths `TIME/SHARD/SEQ`, optionally followed by a tick length `@Nms`
    /// (for example `39/16/8@10ms`). Surrounding blanks are ignored. The text is at most
    /// [`MAX_LAYOUT_LEN`] bytes; parsing allocates nothing but the error.
    ///
    /// # Errors
    /// [`LayoutError::TooLong`] for a text longer than [`MAX_LAYOUT_LEN`];
    /// [`LayoutError::Syntax`] when the text is neither a preset nor well-formed widths;
    /// [`LayoutError::TooWide`] or [`LayoutError::FieldOutOfRange`] when the widths are out of
    /// bounds (see [`Widths::validate`]).
    pub fn parse(spec: &str) -> Result<Widths, LayoutError> {
        // First, before anything walks the text: a backend must not spend time or memory in
        // proportion to what an unprivileged caller passes.
        if spec.len() > MAX_LAYOUT_LEN {
            return Err(LayoutError::TooLong { len: spec.len(), max: MAX_LAYOUT_LEN });
        }
        let spec = spec.trim();
        if let Some((_, w)) = Self::PRESETS.iter().find(|(name, _)| name.eq_ignore_ascii_case(spec)) {
            return Ok(*w);
        }
        let syntax = || LayoutError::Syntax(excerpt(spec));
        let (bits, tick) = match spec.split_once('@') {
            Some((bits, tick)) => (bits, Some(tick.trim())),
            None => (spec, None),
        };
        let mut fields = bits.split('/').map(str::trim);
        let (Some(t), Some(s), Some(q), None) = (fields.next(), fields.next(), fields.next(), fields.next()) else {
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

    /// Checks the bounds every layout must meet. [`Layout::new`] checks them too.
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

    /// Joins widths and an epoch, checking the widths again ([`Widths::validate`]) and what
    /// depends on the epoch.
    ///
    /// Every instant of the layout, up to the last millisecond of its last tick, is an `i64` of
    /// Unix milliseconds, so no method of a `Layout` can overflow.
    ///
    /// # Errors
    /// - the errors of [`Widths::validate`];
    /// - [`LayoutError::EpochBefore1970`] for an epoch before the Unix epoch;
    /// - [`LayoutError::OutlivesTime`] when the end of the last tick lies beyond what an `i64`
    ///   of Unix milliseconds can hold (only absurdly wide time fields get there).
    pub fn new(widths: Widths, epoch_unix_ms: i64) -> Result<Layout, LayoutError> {
        widths.validate()?;
        if epoch_unix_ms < 0 {
            return Err(LayoutError::EpochBefore1970 { epoch_unix_ms });
        }
        // The number of ticks the time field holds; time_bits <= 63, so it fits a u64.
        let ticks = 1u64 << widths.time_bits;
        // At most 2^63 * 1000 + 2^63: far inside an i128, so no width or epoch can overflow.
        let last_tick = epoch_unix_ms as i128 + (ticks as i128 - 1) * widths.tick_ms as i128;
        let last_ms = last_tick + widths.tick_ms as i128 - 1;
        if last_ms > i64::MAX as i128 {
            return Err(LayoutError::OutlivesTime);
        }
        Ok(Layout { widths, epoch_unix_ms, last_tick_unix_ms: last_tick as i64 })
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
        // Layout::new made sure this sum fits.
        self.last_tick_unix_ms + (self.widths.tick_ms as i64 - 1)
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

    /// The id of a generator word (`tick << seq_bits | seq`) minted for `shard`.
    pub const fn id_from_word(&self, word: u64, shard: u32) -> i64 {
        self.compose(Parts { ticks: word >> self.widths.seq_bits, shard, seq: (word & self.max_seq() as u64) as u32 })
    }

    /// Unix milliseconds of the start of a tick. Exact for every tick of the layout (up to
    /// [`Layout::max_ticks`]); a larger count, which no id of the layout holds, gives its exact
    /// start when that fits an `i64`, and `i64::MAX`, past every timestamp, when it does not.
    pub const fn tick_start_unix_ms(&self, ticks: u64) -> i64 {
        let ms = self.epoch_unix_ms as i128 + ticks as i128 * self.widths.tick_ms as i128;
        if ms > i64::MAX as i128 {
            i64::MAX
        } else {
            ms as i64
        }
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

    /// The id of `shard` and position `seq` in the tick holding `unix_ms`: what a backfill mints
    /// for a row of a past time, on a shard kept for backfills.
    ///
    /// # Errors
    /// As [`Layout::tick_of_unix_ms`]; [`IdError::ShardOutOfRange`] and [`IdError::SeqOutOfRange`]
    /// for fields outside the layout.
    pub const fn id_at(&self, unix_ms: i64, shard: i64, seq: i64) -> Result<i64, IdError> {
        let ticks = match self.tick_of_unix_ms(unix_ms) {
            Ok(t) => t,
            Err(e) => return Err(e),
        };
        if shard < 0 || shard > self.max_shard() as i64 {
            return Err(IdError::ShardOutOfRange { shard, max: self.max_shard() });
        }
        if seq < 0 || seq > self.max_seq() as i64 {
            return Err(IdError::SeqOutOfRange { seq, max: self.max_seq() });
        }
        Ok(self.compose(Parts { ticks, shard: shard as u32, seq: seq as u32 }))
    }

    /// How many ids a span of `span_us` microseconds holds across every shard: its ticks times the
    /// ids of a tick. Partitioned by id into spans of time (a day, an hour), a table's partitions
    /// are this wide, and start at [`Layout::min_id_at`] of their first instant.
    ///
    /// # Errors
    /// [`IdError::SpanNotTicks`] unless the span is a positive whole number of ticks, fewer than the
    /// layout has.
    pub const fn ids_in_span(&self, span_us: i64) -> Result<i64, IdError> {
        let tick_us = self.widths.tick_ms as i64 * 1000;
        if span_us <= 0 || span_us % tick_us != 0 || (span_us / tick_us) as u64 > self.max_ticks() {
            return Err(IdError::SpanNotTicks { span_us, tick_ms: self.widths.tick_ms, max_ticks: self.max_ticks() });
        }
        // At most max_ticks << (shard + seq bits): below 2^63.
        Ok((((span_us / tick_us) as u64) << (self.widths.shard_bits + self.widths.seq_bits)) as i64)
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
    /// A text longer than [`MAX_LAYOUT_LEN`] bytes, refused unread.
    TooLong {
        len: usize,
        max: usize,
    },
    /// A text that is not a layout: its [`excerpt`], never the whole of a long text.
    Syntax(String),
    /// An epoch that is not a timestamp: the parser's message, which quotes only an excerpt.
    BadEpoch(String),
    /// A text with bytes outside ASCII (every layout is ASCII).
    NotAscii,
    TooWide {
        widths: Widths,
        total: u64,
    },
    FieldOutOfRange {
        field: &'static str,
        value: u32,
        min: u32,
        max: u32,
    },
    EpochBefore1970 {
        epoch_unix_ms: i64,
    },
    EpochInFuture {
        epoch_unix_ms: i64,
        now_unix_ms: i64,
    },
    OutlivesTime,
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::TooLong { len, max } => write!(
                f,
                "A layout of {len} bytes is too long: a layout is at most {max} bytes, such as sonyflake or \
                    39/16/8@10ms."
            ),
            LayoutError::Syntax(s) => write!(
                f,
                "\"{s}\" is not a snowflake layout. Use default, twitter, sonyflake, javascript, or TIME/SHARD/SEQ \
                    bit widths with an optional @Nms tick, such as 41/13/9 or 39/16/8@10ms."
            ),
            LayoutError::BadEpoch(why) => f.write_str(why),
            LayoutError::NotAscii => f.write_str("A layout is ASCII text, such as sonyflake or 39/16/8@10ms."),
            LayoutError::TooWide { widths, total } => write!(
                f,
                "Layout {}/{}/{} needs {total} bits, but ids have {ID_BITS}: the sign bit stays clear so that ids \
                    never go negative.",
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
    ShardOutOfRange {
        shard: i64,
        max: u32,
    },
    SeqOutOfRange {
        seq: i64,
        max: u32,
    },
    IdOutOfRange {
        id: i64,
        max: i64,
    },
    TimeOutOfRange {
        unix_ms: i64,
        first: i64,
        last: i64,
    },
    /// A span of time (in microseconds) that is not a positive whole number of ticks, fewer than
    /// `max_ticks`.
    SpanNotTicks {
        span_us: i64,
        tick_ms: u32,
        max_ticks: u64,
    },
}

#[cfg(test)]
pub(crate) mod tests {
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
            // The very largest id is all ones: below the sign bit for the 63-bit presets, below 2^53
            // for javascript's 53 bits.
            let largest = l.compose(Parts { ticks: l.max_ticks(), shard: l.max_shard(), seq: l.max_seq() });
            assert_eq!(largest, l.max_id());
            assert_eq!(largest, if name == "javascript" { (1 << 53) - 1 } else { i64::MAX }, "{name}");
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

    #[test]
    fn a_huge_layout_text_is_refused_unread_with_a_short_message() {
        // What snowflake_layout(repeat('/', 300000000)) passes, at 4 MB so the test stays cheap.
        let huge = "/".repeat(4 << 20);
        let started = std::time::Instant::now();
        for _ in 0..100 {
            assert_eq!(Widths::parse(&huge), Err(LayoutError::TooLong { len: 4 << 20, max: MAX_LAYOUT_LEN }));
        }
        // Unread, each call is a length check: far below this even in a loaded debug build. The
        // old parser split the text into a Vec of 4 million fields on every call.
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?}", started.elapsed());
        let msg = Widths::parse(&huge).unwrap_err().to_string();
        assert!(msg.len() < 200, "{} bytes: {msg}", msg.len());
        assert!(msg.contains("4194304 bytes is too long"), "{msg}");
        // The bound is on the raw text: padded up to it still parses, one byte more does not.
        assert_eq!(Widths::parse(&format!("{:>MAX_LAYOUT_LEN$}", "39/16/8@10ms")), Ok(Widths::SONYFLAKE));
        assert!(matches!(
            Widths::parse(&format!("{:>w$}", "39/16/8@10ms", w = MAX_LAYOUT_LEN + 1)),
            Err(LayoutError::TooLong { .. })
        ));
    }

    #[test]
    fn syntax_errors_quote_an_excerpt() {
        // 40 bytes, under the length bound but over the excerpt.
        let e = Widths::parse(&"1/".repeat(20)).unwrap_err();
        assert_eq!(e, LayoutError::Syntax(format!("{}…", "1/".repeat(16))));
        assert!(e.to_string().starts_with(&format!("\"{}…\" is not a snowflake layout.", "1/".repeat(16))), "{e}");
        // Multi-byte text around every separator parses to an error, not a panic.
        for bad in ["é/é/é", "41/13/9@é", "41/13/9@10é", "４１/13/9", "41/13/9@10mś", "@", "/@/", "ééé@"] {
            assert!(matches!(Widths::parse(bad), Err(LayoutError::Syntax(_))), "{bad:?}");
        }
    }

    #[test]
    fn the_end_of_the_last_tick_must_fit_an_i64() {
        // 2^62 ticks of 2 ms from the Unix epoch end exactly at i64::MAX ...
        let w = Widths::parse("62/0/1@2ms").unwrap();
        let l = Layout::new(w, 0).unwrap();
        assert_eq!(l.last_unix_ms(), i64::MAX);
        assert_eq!(l.tick_of_unix_ms(i64::MAX), Ok(l.max_ticks()));
        assert_eq!(l.max_id_at(i64::MAX), Ok(l.max_id()));
        assert_eq!(l.tick_start_unix_ms(l.max_ticks()), i64::MAX - 1);
        // ... so one millisecond later the last tick starts at i64::MAX and ends past it: refused,
        // so that last_unix_ms() never overflows (a panic in a debug build, a wrap to i64::MIN in
        // a release build).
        assert_eq!(Layout::new(w, 1), Err(LayoutError::OutlivesTime));
        assert_eq!(Layout::new(w, i64::MAX), Err(LayoutError::OutlivesTime));
        // Ticks no id holds start past the end, saturating at i64::MAX rather than wrapping.
        assert_eq!(l.tick_start_unix_ms(u64::MAX), i64::MAX);
        assert_eq!(Layout::DEFAULT.tick_start_unix_ms(u64::MAX), i64::MAX);
        assert_eq!(Layout::DEFAULT.tick_start_unix_ms(1 << 41), Layout::DEFAULT.last_unix_ms() + 1);
    }

    #[test]
    fn new_checks_the_widths_too() {
        let w = Widths { time_bits: 64, shard_bits: 0, seq_bits: 1, tick_ms: 1 };
        assert!(matches!(Layout::new(w, 0), Err(LayoutError::TooWide { total: 65, .. })));
        let w = Widths { time_bits: 0, shard_bits: 0, seq_bits: 0, tick_ms: 0 };
        assert!(matches!(Layout::new(w, 0), Err(LayoutError::FieldOutOfRange { field: "time", .. })));
        let w = Widths { time_bits: u32::MAX, shard_bits: u32::MAX, seq_bits: u32::MAX, tick_ms: u32::MAX };
        assert!(matches!(Layout::new(w, 0), Err(LayoutError::TooWide { .. })));
    }

    /// Property tests: the parser and every method of [`Layout`] are total.
    pub(crate) mod props {
        use proptest::prelude::*;

        use super::super::*;
        use crate::core::excerpt::tests::any_text;

        /// Widths within validate's bounds, with the extremes of each field weighted up.
        fn valid_widths() -> impl Strategy<Value = Widths> {
            let tick = prop_oneof![Just(1u32), Just(MAX_TICK_MS), 1..=MAX_TICK_MS];
            (0..=MAX_SHARD_BITS, 1..=MAX_SEQ_BITS, tick).prop_flat_map(|(shard_bits, seq_bits, tick_ms)| {
                let most = ID_BITS - shard_bits - seq_bits;
                prop_oneof![Just(most), 1..=most].prop_map(move |time_bits| Widths {
                    time_bits,
                    shard_bits,
                    seq_bits,
                    tick_ms,
                })
            })
        }

        /// Widths and an epoch: anywhere, or within a tick of the latest epoch whose layout
        /// still ends inside an i64 of milliseconds (random epochs almost never land there).
        fn widths_and_epoch() -> impl Strategy<Value = (Widths, i64)> {
            valid_widths().prop_flat_map(|w| {
                let latest = i128::from(i64::MAX) + 1 - (1i128 << w.time_bits) * i128::from(w.tick_ms);
                let near = (-2..=i64::from(w.tick_ms))
                    .prop_map(move |d| (latest + i128::from(d)).clamp(0, i128::from(i64::MAX)) as i64);
                let anywhere = prop_oneof![Just(0i64), Just(i64::MAX), 0..=4_102_444_800_000i64, 0..=i64::MAX];
                (Just(w), prop_oneof![anywhere, near])
            })
        }

        /// A layout that [`Layout::new`] accepts: narrow enough time fields for the epoch.
        fn layout() -> impl Strategy<Value = Layout> {
            widths_and_epoch()
                .prop_filter_map("outlives time", |(w, e)| Layout::new(w, e).ok().or_else(|| Layout::new(w, 0).ok()))
        }

        /// Times in and around a layout, and anywhere.
        fn time_for(l: Layout) -> impl Strategy<Value = i64> {
            let (first, last) = (l.epoch_unix_ms(), l.last_unix_ms());
            prop_oneof![
                any::<i64>(),
                first..=last,
                Just(first),
                Just(last),
                Just(first.saturating_sub(1)),
                Just(last.saturating_add(1)),
            ]
        }

        fn id_for(l: Layout) -> impl Strategy<Value = i64> {
            prop_oneof![any::<i64>(), 0..=l.max_id(), Just(l.max_id()), Just(l.max_id().saturating_add(1))]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn parse_never_panics_and_errors_are_short(text in any_text()) {
                match Widths::parse(&text) {
                    Ok(w) => prop_assert_eq!(w.validate(), Ok(())),
                    // 150 bytes of text and at most 32 quoted characters of 4 bytes.
                    Err(e) => prop_assert!(e.to_string().len() <= 300, "{}", e),
                }
            }

            #[test]
            fn display_round_trips(w in valid_widths()) {
                prop_assert_eq!(Widths::parse(&w.to_string()), Ok(w));
                let spaced = format!(" {} / {} / {} @ {} ms ", w.time_bits, w.shard_bits, w.seq_bits, w.tick_ms);
                prop_assert_eq!(Widths::parse(&spaced), Ok(w));
            }

            #[test]
            fn new_is_total(
                time_bits in any::<u32>(), shard_bits in any::<u32>(), seq_bits in any::<u32>(),
                tick_ms in any::<u32>(), epoch in any::<i64>(),
            ) {
                let w = Widths { time_bits, shard_bits, seq_bits, tick_ms };
                if let Ok(l) = Layout::new(w, epoch) {
                    prop_assert_eq!(w.validate(), Ok(()));
                    prop_assert!(l.epoch_unix_ms() >= 0);
                }
            }

            #[test]
            fn layout_figures_are_consistent((w, epoch) in widths_and_epoch()) {
                let Ok(l) = Layout::new(w, epoch) else {
                    // Only an end past i64::MAX is refused.
                    let end = i128::from(epoch) + (1i128 << w.time_bits) * i128::from(w.tick_ms) - 1;
                    prop_assert!(end > i128::from(i64::MAX));
                    return Ok(());
                };
                let span = i128::from(l.last_unix_ms()) - i128::from(l.epoch_unix_ms()) + 1;
                prop_assert_eq!(span, (i128::from(l.max_ticks()) + 1) * i128::from(l.tick_ms()));
                prop_assert_eq!(l.tick_start_unix_ms(l.max_ticks()), l.last_unix_ms() - (i64::from(l.tick_ms()) - 1));
                prop_assert!(l.lifetime_years() > 0.0 && l.lifetime_years().is_finite());
                prop_assert!(l.ids_per_second() > 0 && i64::try_from(l.ids_per_second()).is_ok());
                prop_assert!(l.ids_per_ms() > 0.0 && l.ids_per_ms().is_finite());
                prop_assert!(l.max_id() > 0);
                let top = Parts { ticks: l.max_ticks(), shard: l.max_shard(), seq: l.max_seq() };
                prop_assert_eq!(l.compose(top), l.max_id());
                prop_assert_eq!(l.decompose(l.max_id()), Ok(top));
                prop_assert_eq!(l.shard_count(), l.max_shard() as usize + 1);
                prop_assert_eq!(l.total_bits(), w.time_bits + w.shard_bits + w.seq_bits);
            }

            #[test]
            fn times_map_to_ticks_and_id_bounds(
                (l, t) in layout().prop_flat_map(|l| (Just(l), time_for(l))),
            ) {
                let in_range = l.epoch_unix_ms() <= t && t <= l.last_unix_ms();
                let tick = l.tick_of_unix_ms(t);
                let (lo, hi) = (l.min_id_at(t), l.max_id_at(t));
                prop_assert_eq!(tick.is_ok(), in_range);
                prop_assert_eq!(lo.is_ok(), in_range);
                prop_assert_eq!(hi.is_ok(), in_range);
                if let (Ok(tick), Ok(lo), Ok(hi)) = (tick, lo, hi) {
                    prop_assert!(0 <= lo && lo <= hi && hi <= l.max_id());
                    prop_assert_eq!(l.decompose(lo), Ok(Parts { ticks: tick, shard: 0, seq: 0 }));
                    prop_assert_eq!(l.decompose(hi).map(|p| p.ticks), Ok(tick));
                    let start = l.tick_start_unix_ms(tick);
                    prop_assert!(start <= t && i128::from(t) < i128::from(start) + i128::from(l.tick_ms()));
                }
            }

            #[test]
            fn ids_decompose_and_compose_back(
                (l, id) in layout().prop_flat_map(|l| (Just(l), id_for(l))),
            ) {
                match l.decompose(id) {
                    Ok(p) => {
                        prop_assert!(0 <= id && id <= l.max_id());
                        prop_assert!(p.ticks <= l.max_ticks() && p.shard <= l.max_shard() && p.seq <= l.max_seq());
                        prop_assert_eq!(l.compose(p), id);
                        let start = l.tick_start_unix_ms(p.ticks);
                        prop_assert!(l.epoch_unix_ms() <= start && start <= l.last_unix_ms());
                        prop_assert_eq!(l.tick_of_unix_ms(start), Ok(p.ticks));
                        prop_assert!(l.min_id_at(start).unwrap() <= id && id <= l.max_id_at(start).unwrap());
                    }
                    Err(_) => prop_assert!(id < 0 || id > l.max_id()),
                }
            }

            #[test]
            fn words_and_shards_make_ids(
                l in layout(), word in any::<u64>(), shard in any::<u32>(), ticks in any::<u64>(),
                seq in any::<u32>(), n in any::<i64>(),
            ) {
                // Fields that fit give the id of those fields.
                let word_ok = word % ((l.max_ticks() << l.widths().seq_bits | u64::from(l.max_seq())) + 1);
                let shard_ok = shard % (l.max_shard() + 1);
                let id = l.id_from_word(word_ok, shard_ok);
                let p = Parts {
                    ticks: word_ok >> l.widths().seq_bits,
                    shard: shard_ok,
                    seq: (word_ok & u64::from(l.max_seq())) as u32,
                };
                prop_assert_eq!(l.decompose(id), Ok(p));
                // Anything else is outside the contract, but must not panic.
                let _ = l.id_from_word(word, shard);
                let _ = l.compose(Parts { ticks, shard, seq });
                prop_assert!(l.tick_start_unix_ms(ticks) >= l.epoch_unix_ms());
                prop_assert_eq!(l.shard(n).is_ok(), (0..=i64::from(l.max_shard())).contains(&n));
                let _ = l.check_epoch_not_in_future(n).map_err(|e| e.to_string());
            }

            #[test]
            fn a_backfill_id_is_its_time_shard_and_position(
                (l, t) in layout().prop_flat_map(|l| (Just(l), time_for(l))),
                shard in prop_oneof![any::<i64>(), -1..=8192i64],
                seq in prop_oneof![any::<i64>(), -1..=512i64],
            ) {
                let fits = (0..=i64::from(l.max_shard())).contains(&shard)
                    && (0..=i64::from(l.max_seq())).contains(&seq);
                match l.id_at(t, shard, seq) {
                    Ok(id) => {
                        prop_assert!(fits);
                        let tick = l.tick_of_unix_ms(t).unwrap();
                        let parts = Parts { ticks: tick, shard: shard as u32, seq: seq as u32 };
                        prop_assert_eq!(l.decompose(id), Ok(parts));
                        prop_assert!(l.min_id_at(t).unwrap() <= id && id <= l.max_id_at(t).unwrap());
                    }
                    Err(IdError::ShardOutOfRange { .. } | IdError::SeqOutOfRange { .. }) => prop_assert!(!fits),
                    Err(_) => prop_assert!(l.tick_of_unix_ms(t).is_err()),
                }
            }

            #[test]
            fn a_span_holds_the_ids_between_its_bounds(
                (l, t) in layout().prop_flat_map(|l| (Just(l), time_for(l))),
                ticks in prop_oneof![1..=1000u64, 1..=1u64 << 40, any::<u64>()],
                span_us in any::<i64>(),
            ) {
                // Any span is a count of ids or SpanNotTicks.
                match l.ids_in_span(span_us) {
                    Ok(n) => {
                        let tick_us = i64::from(l.tick_ms()) * 1000;
                        prop_assert!(span_us > 0 && span_us % tick_us == 0);
                        prop_assert_eq!(n >> (l.widths().shard_bits + l.widths().seq_bits), span_us / tick_us);
                    }
                    Err(e) => {
                        let named = matches!(e, IdError::SpanNotTicks { span_us: s, .. } if s == span_us);
                        prop_assert!(named, "{:?}", e);
                    }
                }
                // A whole number of ticks from a time in the layout to another is the difference of
                // their min ids: a partition of that span holds exactly the ids minted in it.
                let later = i128::from(t) + i128::from(ticks) * i128::from(l.tick_ms());
                if let (Ok(lo), Ok(later)) = (l.min_id_at(t), i64::try_from(later)) {
                    let span_us = i64::try_from(i128::from(ticks) * i128::from(l.tick_ms()) * 1000);
                    if let (Ok(hi), Ok(span_us)) = (l.min_id_at(later), span_us) {
                        prop_assert_eq!(l.ids_in_span(span_us), Ok(hi - lo));
                    }
                }
            }
        }
    }
}
