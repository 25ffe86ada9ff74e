//! The fleet check (`crate::core::fleet` for the rules, `crate::runtime::fleet` for the connections).
//!
//! - `snowflake_fleet_info()`: this server's facts as `jsonb`. VOLATILE (it reads the clock and
//!   the counters), PARALLEL SAFE (it only reads shared memory). Granted to `pg_monitor`, like the
//!   statistics it summarises.
//! - `snowflake_fleet_check(peers, max_skew, timeout)`: connects to each peer and reports one row
//!   per server and check. VOLATILE, and PARALLEL UNSAFE: it opens connections. Superusers only
//!   unless granted: a superuser connects with the server's own identity where a connection
//!   string names no password (peer or trust authentication, the server user's `.pgpass`), as
//!   `dblink` lets superusers; a grantee only with a password of its own and the allow-listed
//!   keywords of `crate::core::conninfo`. Nobody, when `snowflake_id.fleet_connections` is off.

use pgrx::datum::Array;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::core::fleet::Limits;
use crate::runtime::{errors, fleet, timestamp};

/// This server's facts for the fleet check.
#[pg_extern(volatile, parallel_safe)]
fn snowflake_fleet_info() -> Result<pgrx::JsonB, ErrorReport> {
    fleet::describe().map(pgrx::JsonB)
}

/// An interval argument in microseconds: days and smaller units, not negative.
fn micros(i: Interval, name: &str) -> Result<i64, ErrorReport> {
    timestamp::interval_us(i).filter(|&us| us >= 0).ok_or_else(|| errors::bad_fleet_interval(name))
}

/// Checks this server and `peers` (libpq connection strings) for overlapping shards, clones,
/// layouts, clock skew and reservations: one row per server and check, `ok` when it passed.
/// Not STRICT: a NULL argument is an error (22004), never an empty, healthy-looking result.
///
/// The peers are a `text[]` (declared in sql/finalize.sql), taken as the array itself, not a
/// `Vec`: pgrx would convert every element before this runs, and an array of a hundred million
/// NULLs would become gigabytes before the limit of 64 peers was looked at.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn snowflake_fleet_check(
    peers: Option<Array<'_, &[u8]>>,
    max_skew: Option<Interval>,
    timeout: Option<Interval>,
) -> Result<
    TableIterator<
        'static,
        (
            name!(peer, String),
            name!(check, String),
            name!(ok, bool),
            name!(detail, String),
            name!(figures, pgrx::JsonB),
        ),
    >,
    ErrorReport,
> {
    fleet::check_allowed()?;
    let peers = errors::required(peers, "peers")?;
    let limits =
        Limits { max_skew_us: micros(errors::required(max_skew, "max_skew")?, "max_skew")?, ..Limits::default() };
    let timeout_us = micros(errors::required(timeout, "timeout")?, "timeout")?;
    let rows = fleet::check(&peers, &limits, timeout_us)?;
    Ok(TableIterator::new(
        rows.into_iter().map(|(peer, f)| (peer, f.check.to_owned(), f.ok, f.detail, pgrx::JsonB(f.figures))),
    ))
}
