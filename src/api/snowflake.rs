//! `snowflake_next` and the functions that read snowflake ids back.
//!
//! Volatility of the readers: they depend on `snowflake_id.layout` and `snowflake_id.epoch`,
//! which are fixed while the server runs but may differ after a restart. That is exactly
//! STABLE (PostgreSQL's rule: IMMUTABLE functions must not depend on settings). STABLE is also
//! what lets `WHERE id >= snowflake_min_id(now() - interval '1 hour')` become an index scan:
//! the bound is computed once, at executor start. They are PARALLEL SAFE: workers run with the
//! leader's settings and the readers touch no state.
//!
//! Each reader also has a form that takes the layout (and, where time is involved, the epoch) as
//! arguments: IMMUTABLE, since its result depends on nothing else, so that a generated column, an
//! expression index, a CHECK constraint or a partitioning tool can use it. Its layout is read as
//! bytes, as `snowflake_layout`'s is, and declared `text` in sql/finalize.sql.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::core::layout::{Layout, Parts};
use crate::core::partition::{self, Step};
use crate::runtime::{errors, guc, snowflake, timestamp};

/// Mints the next id for `shard`: the complete, guarded implementation, with every check and
/// error. PostgreSQL reaches it through [`snowflake_next_fast`] below, which handles the common
/// case itself and hands everything else to this function's pgrx wrapper.
///
/// VOLATILE: every call returns a new id.
/// PARALLEL UNSAFE: an id past the database's floor must first advance it (`crate::runtime::space`), which
/// writes, and nothing may be written in parallel mode; so a query that mints runs without
/// parallel workers.
/// Not STRICT: a NULL shard raises an error instead of silently producing a NULL key.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn snowflake_next(shard: Option<i32>) -> i64 {
    let Some(shard) = shard else { errors::raise(errors::null_argument("shard")) };
    snowflake::next_id(shard.into())
}

/// Mints from the shards this server owns (`snowflake_id.shards`), the Twitter meaning of a
/// shard: it says which server minted the id. Each call takes the first owned shard with room in
/// the current tick, and only when all are full borrows the next tick (`core::shards::pick`), so
/// a server owning 8 shards mints 4,096 ids a millisecond before it runs ahead of the clock.
/// Refuses (55000) on a server whose set is `*`: it was never told what it owns, and another
/// server may pick the same shards. `snowflake_id.default_shard`, when set, narrows it to that
/// one shard of the set (0.1.0's meaning); under `*` it is still honoured, with a WARNING, so that
/// a 0.1.0 configuration keeps working across the upgrade. PostgreSQL reaches it through
/// [`snowflake_next_default_wrapper`] below.
///
/// VOLATILE and PARALLEL UNSAFE for the same reasons as `snowflake_next(shard)`.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn snowflake_next_owned() -> i64 {
    snowflake::next_owned_id_guarded()
}

/// Serves a call from `fast`, or else hands it to `guarded`, the pgrx wrapper of the complete
/// function.
///
/// The id functions run once per row of tables that take billions of rows, and pgrx's guarded
/// wrapper adds work to every call (catch_unwind, error-context bookkeeping, moving a
/// `Result`-sized value). So the common case, a valid shard whose next id lies within the lead and
/// below the reservation, is served by `fast` (`crate::runtime::snowflake::try_next_id_fast` and
/// `try_next_owned_id_fast`): argument, layout and fencing checks, one clock read (the TSC when
/// `snowflake_id.clock_source` allows), one compare-and-swap, and on a tick's first id one counter
/// add. It allocates nothing, raises nothing and takes no lock; a panic is caught just the same.
/// Anything else (NULL, a bad or fenced shard, no preload, a backend that has not yet checked for
/// recovery and its database's id space, a lost race, a wait, a reservation to renew, an error)
/// goes to `guarded`, which does it all again, fully guarded. Nothing was issued on the fast path
/// in that case. `make bench` measures both entries.
///
/// # Safety
/// `fcinfo` is fmgr's, for a call of the function `guarded` is the pgrx wrapper of.
#[inline(always)]
unsafe fn fast_or_guarded(
    fcinfo: pg_sys::FunctionCallInfo,
    fast: impl FnOnce() -> Option<i64>,
    guarded: unsafe extern "C-unwind" fn(pg_sys::FunctionCallInfo) -> pg_sys::Datum,
) -> pg_sys::Datum {
    let issued = std::panic::catch_unwind(std::panic::AssertUnwindSafe(fast));
    if let Ok(Some(id)) = issued {
        return pg_sys::Datum::from(id);
    }
    // The wrapper may raise an ERROR, which longjmps over this frame: nothing with a destructor
    // (such as a caught panic's payload) may still be alive here.
    drop(issued);
    // SAFETY: the caller's fcinfo, for the function `guarded` wraps.
    unsafe { guarded(fcinfo) }
}

/// PostgreSQL's entry point for `snowflake_next(int)` (declared in sql/finalize.sql).
///
/// # Safety
/// Called by PostgreSQL's fmgr with the one `int` argument its declaration gives it.
#[unsafe(no_mangle)]
#[doc(hidden)]
pub unsafe extern "C-unwind" fn snowflake_next_fast(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    let fast = || {
        // SAFETY: fmgr passes one argument, as declared; `args` is its inline array.
        let arg = unsafe { *(*fcinfo).args.as_ptr() };
        // An int4 Datum holds the value in its low 32 bits (DatumGetInt32).
        (!arg.isnull).then(|| snowflake::try_next_id_fast(arg.value.value() as i32)).flatten()
    };
    // SAFETY: fmgr's fcinfo for snowflake_next(int), which snowflake_next_wrapper wraps.
    unsafe { fast_or_guarded(fcinfo, fast, snowflake_next_wrapper) }
}

/// PostgreSQL's entry point for `snowflake_next()` (declared in sql/finalize.sql). The symbol is
/// the one 0.1.0's install script names (pgrx's wrapper of a Rust function of that name), so that
/// every version's catalog entry still finds it.
///
/// # Safety
/// Called by PostgreSQL's fmgr, with no arguments.
#[unsafe(no_mangle)]
#[doc(hidden)]
pub unsafe extern "C-unwind" fn snowflake_next_default_wrapper(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fmgr's fcinfo for snowflake_next(), which snowflake_next_owned_wrapper wraps.
    unsafe { fast_or_guarded(fcinfo, snowflake::try_next_owned_id_fast, snowflake_next_owned_wrapper) }
}

/// `PG_FUNCTION_INFO_V1` of a hand-written entry point.
const FINFO_V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };

/// `PG_FUNCTION_INFO_V1(snowflake_next_fast)`.
#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_snowflake_next_fast() -> &'static pg_sys::Pg_finfo_record {
    &FINFO_V1
}

/// `PG_FUNCTION_INFO_V1(snowflake_next_default_wrapper)`.
#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_snowflake_next_default_wrapper() -> &'static pg_sys::Pg_finfo_record {
    &FINFO_V1
}

fn parts(l: &Layout, id: i64) -> Result<Parts, ErrorReport> {
    l.decompose(id).map_err(|e| errors::id_error(e, l))
}

/// The layout a reader's arguments name: `layout` as the setting spells it, with `epoch` (22023 for
/// either that is not one).
fn named(layout: &[u8], epoch_unix_ms: i64) -> Result<Layout, ErrorReport> {
    Layout::new(super::layout_arg(layout)?, epoch_unix_ms).map_err(|e| errors::bad_layout(&e))
}

fn named_at(layout: &[u8], epoch: TimestampWithTimeZone) -> Result<Layout, ErrorReport> {
    named(layout, timestamp::unix_ms(epoch)?)
}

/// The layout of a reader that takes no epoch (shard, position, a span's ids), whose result does
/// not depend on one. Its widths are checked against 1970, the epoch that leaves the most room
/// (a time field of 64 bits of milliseconds outlives an `i64` from any later one), so that it
/// accepts every layout a server may run with.
fn named_epochless(layout: &[u8]) -> Result<Layout, ErrorReport> {
    named(layout, 0)
}

fn tick_start(l: &Layout, id: i64) -> Result<TimestampWithTimeZone, ErrorReport> {
    timestamp::from_unix_ms(l.tick_start_unix_ms(parts(l, id)?.ticks))
}

fn min_id(l: &Layout, ts: TimestampWithTimeZone) -> Result<i64, ErrorReport> {
    l.min_id_at(timestamp::unix_ms(ts)?).map_err(|e| errors::id_error(e, l))
}

fn max_id(l: &Layout, ts: TimestampWithTimeZone) -> Result<i64, ErrorReport> {
    l.max_id_at(timestamp::unix_ms(ts)?).map_err(|e| errors::id_error(e, l))
}

/// The start of the tick an id was minted in.
#[pg_extern(stable, strict, parallel_safe)]
fn snowflake_timestamp(id: i64) -> Result<TimestampWithTimeZone, ErrorReport> {
    tick_start(guc::layout(), id)
}

/// `snowflake_timestamp(id, layout, epoch)`: the same, under the layout and epoch given.
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn snowflake_timestamp_in(
    id: i64,
    layout: &[u8],
    epoch: TimestampWithTimeZone,
) -> Result<TimestampWithTimeZone, ErrorReport> {
    tick_start(&named_at(layout, epoch)?, id)
}

/// The shard an id was minted for.
#[pg_extern(stable, strict, parallel_safe)]
fn snowflake_shard(id: i64) -> Result<i32, ErrorReport> {
    // The layout caps shards at 2^16, so this never truncates.
    Ok(parts(guc::layout(), id)?.shard as i32)
}

/// `snowflake_shard(id, layout)`: the same, under the layout given (the epoch plays no part).
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn snowflake_shard_in(id: i64, layout: &[u8]) -> Result<i32, ErrorReport> {
    Ok(parts(&named_epochless(layout)?, id)?.shard as i32)
}

/// The id's position in its shard's tick.
#[pg_extern(stable, strict, parallel_safe)]
fn snowflake_seq(id: i64) -> Result<i32, ErrorReport> {
    // The layout caps the sequence at 31 bits, so this never truncates.
    Ok(parts(guc::layout(), id)?.seq as i32)
}

/// `snowflake_seq(id, layout)`: the same, under the layout given.
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn snowflake_seq_in(id: i64, layout: &[u8]) -> Result<i32, ErrorReport> {
    Ok(parts(&named_epochless(layout)?, id)?.seq as i32)
}

/// The smallest id any shard can mint in the tick holding `ts`.
#[pg_extern(stable, strict, parallel_safe)]
fn snowflake_min_id(ts: TimestampWithTimeZone) -> Result<i64, ErrorReport> {
    min_id(guc::layout(), ts)
}

/// `snowflake_min_id(ts, layout, epoch)`: the same, under the layout and epoch given.
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn snowflake_min_id_in(
    ts: TimestampWithTimeZone,
    layout: &[u8],
    epoch: TimestampWithTimeZone,
) -> Result<i64, ErrorReport> {
    min_id(&named_at(layout, epoch)?, ts)
}

/// The largest id any shard can mint in the tick holding `ts`.
#[pg_extern(stable, strict, parallel_safe)]
fn snowflake_max_id(ts: TimestampWithTimeZone) -> Result<i64, ErrorReport> {
    max_id(guc::layout(), ts)
}

/// `snowflake_max_id(ts, layout, epoch)`: the same, under the layout and epoch given.
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn snowflake_max_id_in(
    ts: TimestampWithTimeZone,
    layout: &[u8],
    epoch: TimestampWithTimeZone,
) -> Result<i64, ErrorReport> {
    max_id(&named_at(layout, epoch)?, ts)
}

/// How many ids a span of time holds across every shard of a layout: the width of a partition
/// that holds that span, when a table is partitioned by id (pg_partman's integer interval).
/// 22023 for a span that is not a whole number of ticks (months have no fixed length).
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn snowflake_id_interval(span: Interval, layout: &[u8]) -> Result<i64, ErrorReport> {
    let l = named_epochless(layout)?;
    if span.months() != 0 {
        return Err(errors::span_not_fixed());
    }
    // Past an i64 of microseconds (some 292,000 years), a span is longer than any layout's life.
    let span_us = timestamp::interval_us(span).unwrap_or(i64::MAX);
    l.ids_in_span(span_us).map_err(|e| errors::id_error(e, &l))
}

/// The partitions of one `step` each from `first` (calendar steps in UTC) until one holds `last`,
/// with their id bounds: `FOR VALUES FROM (lower_id) TO (upper_id)` (`crate::core::partition`).
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn snowflake_partitions(
    first: TimestampWithTimeZone,
    last: TimestampWithTimeZone,
    step: Interval,
    layout: &[u8],
    epoch: TimestampWithTimeZone,
) -> Result<
    TableIterator<
        'static,
        (
            name!(starts, TimestampWithTimeZone),
            name!(ends, TimestampWithTimeZone),
            name!(lower_id, i64),
            name!(upper_id, i64),
        ),
    >,
    ErrorReport,
> {
    let l = named_at(layout, epoch)?;
    let (first, last) = (timestamp::unix_us(first)?, timestamp::unix_us(last)?);
    let step = Step { months: step.months(), days: step.days(), micros: step.micros() };
    let rows = partition::partitions(&l, first, last, step).map_err(|e| errors::partition_error(e, &l))?;
    let rows = rows
        .into_iter()
        .map(|p| {
            Ok((timestamp::from_unix_us(p.starts_us)?, timestamp::from_unix_us(p.ends_us)?, p.lower_id, p.upper_id))
        })
        .collect::<Result<Vec<_>, ErrorReport>>()?;
    Ok(TableIterator::new(rows))
}

/// The id of a tick, shard and position under a layout and epoch: for backfilling rows of past
/// times on a shard that no server mints for (see docs/partitioning.md).
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn snowflake_compose(
    ts: TimestampWithTimeZone,
    shard: i32,
    seq: i32,
    layout: &[u8],
    epoch: TimestampWithTimeZone,
) -> Result<i64, ErrorReport> {
    let l = named_at(layout, epoch)?;
    l.id_at(timestamp::unix_ms(ts)?, shard.into(), seq.into()).map_err(|e| errors::id_error(e, &l))
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::core::layout::{Layout, DEFAULT_EPOCH_UNIX_MS};

    fn sqlstate(sql: &str) -> String {
        // The statement's SQLSTATE: a PL/pgSQL block's EXCEPTION clause (a subtransaction, rolled
        // back with the error) catches it and leaves it in a setting the next query reads.
        Spi::get_one::<String>(&format!(
            "DO $d$ BEGIN PERFORM ({sql}); RAISE EXCEPTION 'no error' USING ERRCODE = 'P0001';
             EXCEPTION WHEN OTHERS THEN
               IF SQLSTATE = 'P0001' THEN RAISE; END IF;
               PERFORM set_config('sf.test_sqlstate', SQLSTATE, true);
             END $d$; SELECT current_setting('sf.test_sqlstate')"
        ))
        .unwrap()
        .unwrap()
    }

    #[pg_test]
    fn next_ids_increase_and_carry_the_shard() {
        let a = Spi::get_one::<i64>("SELECT snowflake_next(7)").unwrap().unwrap();
        let b = Spi::get_one::<i64>("SELECT snowflake_next(7)").unwrap().unwrap();
        assert!(b > a && a > 0);
        let l = Layout::DEFAULT;
        assert_eq!(l.decompose(a).unwrap().shard, 7);
        let now_ms = crate::runtime::clock::now_unix_ms();
        let ms = l.tick_start_unix_ms(l.decompose(b).unwrap().ticks);
        assert!((now_ms - ms).abs() < 1000, "id time {ms} vs clock {now_ms}");
        assert!(ms >= DEFAULT_EPOCH_UNIX_MS);
    }

    #[pg_test]
    fn default_on_a_primary_key() {
        Spi::run("CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(7), n int)").unwrap();
        Spi::run("INSERT INTO t (n) SELECT g FROM generate_series(1, 5000) g").unwrap();
        let ok = Spi::get_one::<bool>(
            "SELECT count(DISTINCT id) = 5000 AND bool_and(snowflake_shard(id) = 7)
                    AND count(*) FILTER (WHERE id <= prev) = 0
             FROM (SELECT id, lag(id) OVER (ORDER BY n) prev FROM t) s",
        );
        assert_eq!(ok, Ok(Some(true)));
    }

    #[pg_test]
    fn decode_round_trips() {
        let row = Spi::get_one::<bool>(
            "WITH i AS (SELECT snowflake_next(8191) id, clock_timestamp() c)
             SELECT d.shard = 8191 AND d.seq >= 0 AND abs(extract(epoch FROM d.ts - i.c)) < 1
                AND (snowflake_decode(id)).shard = 8191
                AND snowflake_timestamp(id) = d.ts AND snowflake_seq(id) = d.seq
             FROM i, snowflake_decode(i.id) d",
        );
        assert_eq!(row, Ok(Some(true)));
        // Exact values: tick 1000 after the epoch, shard 3, sequence 5.
        let id: i64 = (1000 << 22) | (3 << 9) | 5;
        let s = Spi::get_one::<String>(&format!("SELECT snowflake_decode({id})::text")).unwrap().unwrap();
        assert_eq!(s, "(\"2025-01-01 00:00:01+00\",3,5)");
    }

    #[pg_test]
    fn range_bounds_bracket_ids() {
        let ok = Spi::get_one::<bool>(
            "WITH i AS (SELECT snowflake_next(1) id)
             SELECT snowflake_min_id(snowflake_timestamp(id)) <= id AND id <= snowflake_max_id(snowflake_timestamp(id))
                AND snowflake_min_id('2025-01-01 00:00:00+00') = 0
                AND snowflake_max_id('2025-01-01 00:00:00+00') = 4194303
             FROM i",
        );
        assert_eq!(ok, Ok(Some(true)));
    }

    #[pg_test]
    fn ids_keep_increasing_when_the_clock_source_changes() {
        Spi::run("CREATE TEMP TABLE cs (n serial, id bigint)").unwrap();
        for src in ["system", "auto", "system", "auto"] {
            Spi::run(&format!("SET snowflake_id.clock_source = {src}")).unwrap();
            Spi::run("INSERT INTO cs (id) SELECT snowflake_next(9) FROM generate_series(1, 3000)").unwrap();
        }
        let ok = Spi::get_one::<bool>(
            "SELECT count(*) = 12000 AND count(*) FILTER (WHERE id <= prev) = 0
                AND bool_and(snowflake_timestamp(id) BETWEEN now() - interval '1 min'
                                                         AND clock_timestamp() + interval '5 ms')
             FROM (SELECT id, lag(id) OVER (ORDER BY n) prev FROM cs) s",
        );
        assert_eq!(ok, Ok(Some(true)));
    }

    #[pg_test]
    fn sqlstates_of_bad_arguments() {
        assert_eq!(sqlstate("snowflake_next(-1)"), "22003");
        assert_eq!(sqlstate("snowflake_next(8192)"), "22003");
        assert_eq!(sqlstate("snowflake_next(NULL)"), "22004");
        assert_eq!(sqlstate("snowflake_timestamp(-1)"), "22003");
        assert_eq!(sqlstate("snowflake_decode(-1)"), "22003");
        assert_eq!(sqlstate("snowflake_shard(-9223372036854775808)"), "22003");
        assert_eq!(sqlstate("snowflake_min_id('2024-12-31 23:59:59.999+00')"), "22008");
        assert_eq!(sqlstate("snowflake_min_id('infinity')"), "22008");
        assert_eq!(sqlstate("snowflake_max_id('2100-01-01')"), "22008");
    }

    #[pg_test(error = "shard 8192 is out of range")]
    fn shard_out_of_range_message() {
        Spi::run("SELECT snowflake_next(8192)").unwrap();
    }

    #[pg_test]
    fn a_null_decodes_to_null() {
        assert_eq!(Spi::get_one::<i32>("SELECT snowflake_shard(NULL)"), Ok(None));
    }
}
