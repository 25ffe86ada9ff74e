//! The SQL surface: `#[pg_extern]` glue only. Each function parses its arguments, calls the
//! core, and maps errors through `crate::runtime::errors`.

pub mod convert;
pub mod fleet;
pub mod layout;
pub mod public;
pub mod snowflake;
pub mod stats;
pub mod text;
pub mod uuid;

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::core::time::{self, US_PER_MS};
use crate::runtime::errors;

/// A text of ASCII bytes (the text forms and public tokens are ASCII by construction).
pub(crate) fn ascii(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

/// A Unix microsecond as a finite `timestamptz`.
///
/// # Errors
/// 22008 (`errors::timestamp_out_of_range`) outside PostgreSQL's range, never a clamped value.
pub(crate) fn timestamptz_from_us(unix_us: i64) -> Result<TimestampWithTimeZone, ErrorReport> {
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
/// As [`timestamptz_from_us`], also when the microseconds leave an i64.
pub(crate) fn timestamptz_from_ms(unix_ms: i64) -> Result<TimestampWithTimeZone, ErrorReport> {
    timestamptz_from_us(unix_ms.checked_mul(US_PER_MS).ok_or_else(errors::timestamp_out_of_range)?)
}

/// The Unix microsecond of a finite `timestamptz`.
pub(crate) fn unix_us(ts: TimestampWithTimeZone) -> Result<i64, ErrorReport> {
    if !ts.is_finite() {
        return Err(errors::timestamp_out_of_range());
    }
    time::unix_us_from_pg_us(ts.into_inner()).ok_or_else(errors::timestamp_out_of_range)
}

/// The Unix millisecond holding a finite `timestamptz`.
pub(crate) fn unix_ms(ts: TimestampWithTimeZone) -> Result<i64, ErrorReport> {
    Ok(unix_us(ts)?.div_euclid(US_PER_MS))
}
