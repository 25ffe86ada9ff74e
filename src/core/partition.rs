//! The bounds of partitions by time over a layout's ids: a table partitioned by its snowflake key
//! into days, months or any other step holds, in the partition that starts at `s` and ends at
//! `e`, the ids from `min_id_at(s)` up to (not including) `min_id_at(e)`.
//!
//! Partition `k` starts at the first time plus `k` steps, added at once in UTC as PostgreSQL adds
//! an interval to a `timestamp` (so months stay on their day: from January 31 by a month, the
//! starts are January 31, February 28, March 31), and ends where partition `k + 1` starts.

use crate::core::layout::{IdError, Layout};
use crate::core::time::{self, US_PER_MS};

/// The most partitions one call makes: a bound on the work and memory an argument can ask for
/// (PostgreSQL plans a table of a few thousand partitions slowly already).
pub const MAX_PARTITIONS: usize = 100_000;

/// A step between partitions, as PostgreSQL's `interval` holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub months: i32,
    pub days: i32,
    pub micros: i64,
}

/// One partition: its times (Unix microseconds) and its ids, `FROM (lower_id) TO (upper_id)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    pub starts_us: i64,
    pub ends_us: i64,
    pub lower_id: i64,
    pub upper_id: i64,
}

/// Why no partitions are given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionError {
    /// A step with a negative part, or none at all, or shorter than the layout's tick (whose
    /// partitions would hold no ids).
    Step { tick_ms: u32 },
    /// More than [`MAX_PARTITIONS`] from the first time to the last.
    TooMany { max: usize },
    /// A partition's start or end outside the layout's life.
    Id(IdError),
}

/// The partitions of one `step` each from `first_us` until one holds `last_us` (none when
/// `first_us` is after `last_us`).
///
/// # Errors
/// [`PartitionError`]: the step first, then each partition's bounds in turn.
pub fn partitions(layout: &Layout, first_us: i64, last_us: i64, step: Step) -> Result<Vec<Partition>, PartitionError> {
    let tick_us = i64::from(layout.tick_ms()) * US_PER_MS;
    let fixed = step.months == 0 && step.days == 0;
    if step.months < 0 || step.days < 0 || step.micros < 0 || (fixed && step.micros < tick_us) {
        return Err(PartitionError::Step { tick_ms: layout.tick_ms() });
    }
    // The start of partition k; None past an i64, far past any layout's end.
    let start = |k: i64| {
        let (months, days) = (i64::from(step.months) * k, i64::from(step.days) * k);
        time::add_interval_utc(first_us, months, days, step.micros.checked_mul(k)?)
    };
    // An end past an i64 of microseconds is past the layout's end, or where no timestamp goes.
    let past_layout = || {
        let (first, last) = (layout.epoch_unix_ms(), layout.last_unix_ms());
        PartitionError::Id(IdError::TimeOutOfRange { unix_ms: i64::MAX / US_PER_MS, first, last })
    };
    let min_id = |us: i64| layout.min_id_at(us.div_euclid(US_PER_MS)).map_err(PartitionError::Id);
    let mut out = Vec::new();
    let (mut k, mut starts_us) = (0i64, first_us);
    while starts_us <= last_us {
        if out.len() == MAX_PARTITIONS {
            return Err(PartitionError::TooMany { max: MAX_PARTITIONS });
        }
        let ends_us = start(k + 1).ok_or_else(past_layout)?;
        out.push(Partition { starts_us, ends_us, lower_id: min_id(starts_us)?, upper_id: min_id(ends_us)? });
        (k, starts_us) = (k + 1, ends_us);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::layout::{Widths, DEFAULT_EPOCH_UNIX_MS};
    use crate::core::time::US_PER_DAY;

    const JAN_1_2026_US: i64 = 1_767_225_600_000_000;

    fn default_layout() -> Layout {
        Layout::new(Widths::DEFAULT, DEFAULT_EPOCH_UNIX_MS).unwrap()
    }

    fn days(n: i32) -> Step {
        Step { months: 0, days: n, micros: 0 }
    }

    #[test]
    fn consecutive_partitions_share_their_bounds_and_hold_their_days() {
        let l = default_layout();
        let p = partitions(&l, JAN_1_2026_US, JAN_1_2026_US + 2 * US_PER_DAY, days(1)).unwrap();
        assert_eq!(p.len(), 3, "the last day is held by a partition that starts on it");
        for (i, part) in p.iter().enumerate() {
            assert_eq!(part.starts_us, JAN_1_2026_US + i as i64 * US_PER_DAY);
            assert_eq!(part.ends_us, part.starts_us + US_PER_DAY);
            assert_eq!(part.lower_id, l.min_id_at(part.starts_us / 1000).unwrap());
            assert_eq!(part.upper_id - part.lower_id, l.ids_in_span(US_PER_DAY).unwrap());
        }
        assert!(p.windows(2).all(|w| w[0].upper_id == w[1].lower_id && w[0].ends_us == w[1].starts_us));
        assert_eq!(partitions(&l, JAN_1_2026_US + 1, JAN_1_2026_US, days(1)), Ok(vec![]));
    }

    #[test]
    fn months_are_counted_from_the_first_start_not_from_a_clamped_day() {
        let l = default_layout();
        let jan_31 = JAN_1_2026_US + 30 * US_PER_DAY;
        let p = partitions(&l, jan_31, jan_31 + 80 * US_PER_DAY, Step { months: 1, days: 0, micros: 0 }).unwrap();
        let day_of = |us: i64| (us - JAN_1_2026_US) / US_PER_DAY;
        // Jan 31, Feb 28, Mar 31, Apr 30 (days 30, 58, 89, 119 of 2026), ending May 31.
        assert_eq!(p.iter().map(|x| day_of(x.starts_us)).collect::<Vec<_>>(), [30, 58, 89]);
        assert_eq!(day_of(p[2].ends_us), 119);
    }

    #[test]
    fn steps_that_make_empty_or_endless_partitions_are_refused() {
        let l = Layout::new(Widths::SONYFLAKE, DEFAULT_EPOCH_UNIX_MS).unwrap();
        let bad = Err(PartitionError::Step { tick_ms: 10 });
        for step in [
            Step { months: 0, days: 0, micros: 0 },
            Step { months: 0, days: 0, micros: 9_999 },
            Step { months: -1, days: 40, micros: 0 },
            Step { months: 1, days: -1, micros: 0 },
            Step { months: 0, days: 1, micros: -1 },
        ] {
            assert_eq!(partitions(&l, JAN_1_2026_US, JAN_1_2026_US, step), bad, "{step:?}");
        }
        let tick = Step { months: 0, days: 0, micros: 10_000 };
        let p = partitions(&l, JAN_1_2026_US, JAN_1_2026_US + 30_000, tick).unwrap();
        assert_eq!(p.len(), 4);
        assert!(p.iter().all(|x| x.upper_id > x.lower_id));
    }

    #[test]
    fn the_count_and_the_layout_bound_the_work() {
        let l = default_layout();
        let ms = Step { months: 0, days: 0, micros: 1_000 };
        let max_us = (MAX_PARTITIONS as i64 - 1) * 1_000;
        assert_eq!(partitions(&l, JAN_1_2026_US, JAN_1_2026_US + max_us, ms).map(|p| p.len()), Ok(MAX_PARTITIONS));
        let too_many = partitions(&l, JAN_1_2026_US, JAN_1_2026_US + max_us + 1_000, ms);
        assert_eq!(too_many, Err(PartitionError::TooMany { max: MAX_PARTITIONS }));
        // Before the epoch, and a last partition that ends past the layout's life.
        let before = partitions(&l, 0, 0, days(1));
        assert!(matches!(before, Err(PartitionError::Id(IdError::TimeOutOfRange { .. }))), "{before:?}");
        let last_us = l.last_unix_ms() * 1000;
        let past = partitions(&l, last_us, last_us, days(1));
        assert!(matches!(past, Err(PartitionError::Id(IdError::TimeOutOfRange { .. }))), "{past:?}");
        let endless =
            partitions(&l, JAN_1_2026_US, JAN_1_2026_US, Step { months: i32::MAX, days: i32::MAX, micros: i64::MAX });
        assert!(matches!(endless, Err(PartitionError::Id(_))), "{endless:?}");
    }
}
