//! Observability: per-generator statistics and the reservation, read from shared memory with
//! plain atomic loads (no lock, so reading never holds up generation).
//!
//! All three functions are VOLATILE (the counters move under every call) and PARALLEL SAFE (they
//! only read shared memory).

use std::sync::atomic::{AtomicU64, Ordering};

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::core::monotonic::Timeline;
use crate::core::reservation::FILE_NAME;
use crate::core::time::NS_PER_MS;
use crate::core::uuidv7;
use crate::runtime::shmem::{self, Slot};
use crate::runtime::{errors, guc, reservation, timestamp};

type StatsRow = (String, Option<i32>, i64, Option<TimestampWithTimeZone>, i64, i64, i64, f64, i64, i64, i64);

fn load(c: &AtomicU64) -> i64 {
    i64::try_from(c.load(Ordering::Relaxed)).unwrap_or(i64::MAX)
}

fn row(generator: &str, shard: Option<i32>, slot: &Slot, tl: &Timeline) -> Result<Option<StatsRow>, ErrorReport> {
    let issued = i64::try_from(slot.issued(tl)).unwrap_or(i64::MAX);
    let errors = load(&slot.errors);
    if issued == 0 && errors == 0 {
        return Ok(None);
    }
    let last = match (issued, slot.state.next_free.load(Ordering::Acquire)) {
        (0, _) | (_, 0) => None,
        (_, next_free) => Some(timestamp::from_unix_ms(tl.word_unix_ms(next_free - 1))?),
    };
    Ok(Some((
        generator.to_owned(),
        shard,
        issued,
        last,
        load(&slot.ahead_ticks),
        load(&slot.max_lead_ms),
        load(&slot.waits),
        slot.wait_ns.load(Ordering::Relaxed) as f64 / NS_PER_MS as f64,
        load(&slot.backsteps),
        load(&slot.max_backstep_ms),
        errors,
    )))
}

/// One row for UUIDv7 and for each shard that has minted (or refused to), since the server
/// started or the last `snowflake_id_stats_reset()`.
#[pg_extern(volatile, parallel_safe)]
fn snowflake_id_stats() -> Result<
    TableIterator<
        'static,
        (
            name!(generator, String),
            name!(shard, Option<i32>),
            name!(ids_issued, i64),
            name!(last_issued, Option<TimestampWithTimeZone>),
            name!(ahead_ticks, i64),
            name!(max_ahead_ms, i64),
            name!(waits, i64),
            name!(wait_ms, f64),
            name!(clock_backsteps, i64),
            name!(max_backstep_ms, i64),
            name!(errors, i64),
        ),
    >,
    ErrorReport,
> {
    let uuid = shmem::uuidv7_slot().map_err(|_| errors::not_preloaded())?;
    let shards = shmem::shard_slots().map_err(|_| errors::not_preloaded())?;
    let tl = Timeline::of(guc::layout());
    let mut rows = Vec::new();
    rows.extend(row("uuidv7", None, uuid, &uuidv7::TIMELINE)?);
    for (shard, slot) in shards {
        // Shards are capped at 2^16, so the cast is exact.
        rows.extend(row("snowflake", Some(shard as i32), slot, &tl)?);
    }
    Ok(TableIterator::new(rows))
}

/// Zeroes the statistics (not the generators' state). Superuser only (its REVOKE is in sql/finalize.sql).
#[pg_extern(volatile, parallel_safe)]
fn snowflake_id_stats_reset() -> Result<(), ErrorReport> {
    shmem::reset_statistics(guc::layout()).map_err(|_| errors::not_preloaded())
}

/// The durable reservation: every id issued so far carries an earlier time.
#[pg_extern(volatile, parallel_safe)]
fn snowflake_id_reservation() -> Result<
    TableIterator<
        'static,
        (
            name!(reserved_until, Option<TimestampWithTimeZone>),
            name!(file, String),
            name!(writes, i64),
            name!(written_at, Option<TimestampWithTimeZone>),
        ),
    >,
    ErrorReport,
> {
    let (until, writes, at) = shmem::reservation_stats().map_err(|_| errors::not_preloaded())?;
    let ts = |ms: i64| if ms > 0 { timestamp::from_unix_ms(ms).map(Some) } else { Ok(None) };
    Ok(TableIterator::once((ts(until)?, FILE_NAME.to_owned(), i64::try_from(writes).unwrap_or(i64::MAX), ts(at)?)))
}

/// Moves every generator, and the durable reservation, so that the next id of each is at or
/// after `ts`. For a promoted standby, which does not have the old primary's reservation file.
/// Generators only move forward; a `ts` in the past changes nothing. Superuser only.
///
/// VOLATILE (it changes shared state) and PARALLEL UNSAFE (it writes the reservation file).
#[pg_extern(volatile, parallel_unsafe)]
fn snowflake_id_advance(ts: TimestampWithTimeZone) -> Result<TimestampWithTimeZone, ErrorReport> {
    timestamp::from_unix_ms(reservation::advance(ts)?)
}
