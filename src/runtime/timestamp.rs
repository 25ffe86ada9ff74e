//! PostgreSQL's `timestamptz` and Unix time: finite values only, never a clamp.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::core::time::{self, US_PER_MS};
use crate::runtime::errors;

/// A Unix microsecond as a finite `timestamptz`.
///
/// # Errors
/// 22008 (`errors::timestamp_out_of_range`) outside PostgreSQL's range, never a clamped value.
pub fn from_unix_us(unix_us: i64) -> Result<TimestampWithTimeZone, ErrorReport> {
    match time::pg_us_from_unix_us(unix_us) {
        // pgrx reads i64::MIN and i64::MAX as -infinity and infinity; a finite time is neither.
        Some(pg_us) if pg_us != i64::MIN && pg_us != i64::MAX => {
            TimestampWithTimeZone::try_from(pg_us).map_err(|_| errors::timestamp_out_of_range())
        }
        _ => Err(errors::timestamp_out_of_range()),
    }
}

/// A Unix millisecond as a finite `timestamptz`.
///
/// # Errors
/// As [`from_unix_us`], also when the microseconds leave an i64.
pub fn from_unix_ms(unix_ms: i64) -> Result<TimestampWithTimeZone, ErrorReport> {
    from_unix_us(unix_ms.checked_mul(US_PER_MS).ok_or_else(errors::timestamp_out_of_range)?)
}

/// The Unix microsecond of a finite `timestamptz`.
pub fn unix_us(ts: TimestampWithTimeZone) -> Result<i64, ErrorReport> {
    if !ts.is_finite() {
        return Err(errors::timestamp_out_of_range());
    }
    time::unix_us_from_pg_us(ts.into_inner()).ok_or_else(errors::timestamp_out_of_range)
}

/// The Unix millisecond holding a finite `timestamptz`.
pub fn unix_ms(ts: TimestampWithTimeZone) -> Result<i64, ErrorReport> {
    Ok(unix_us(ts)?.div_euclid(US_PER_MS))
}

/// The microseconds of an interval of fixed length: its days as 24 hours and its time; `None` for
/// one with months or years (which have no fixed length) or that leaves an i64.
pub fn interval_us(i: Interval) -> Option<i64> {
    if i.months() != 0 {
        return None;
    }
    i64::from(i.days()).checked_mul(86_400_000_000).and_then(|d| d.checked_add(i.micros()))
}
