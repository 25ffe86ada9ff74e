//! The SQL surface: `#[pg_extern]` glue only. Each function parses its arguments, calls the
//! core, and maps errors through `crate::errors`.

pub mod layout;
pub mod snowflake;

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::core::time;
use crate::errors;

/// A Unix millisecond as a `timestamptz`.
pub(crate) fn timestamptz(unix_ms: i64) -> Result<TimestampWithTimeZone, ErrorReport> {
    TimestampWithTimeZone::try_from(time::pg_us_from_unix_ms(unix_ms))
        .map_err(|_| errors::infinite_timestamp())
}

/// The Unix millisecond of a finite `timestamptz`.
pub(crate) fn unix_ms(ts: TimestampWithTimeZone) -> Result<i64, ErrorReport> {
    if !ts.is_finite() {
        return Err(errors::infinite_timestamp());
    }
    Ok(time::unix_ms_from_pg_us(ts.into_inner()))
}
