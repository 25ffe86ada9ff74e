//! UUIDv7 (RFC 9562): generation that is monotonic across every backend of the server, and the
//! readers, on every supported PostgreSQL.
//!
//! Names:
//! - `uuidv7_next()` and `uuidv7_next(shift interval)`: this extension's generator, under a name
//!   core PostgreSQL does not use, so it is reachable on every version (the counterpart of
//!   `snowflake_next`).
//! - `uuidv7()` and `uuidv7(shift interval)`: PostgreSQL 18's API, as the same generator.
//! - `uuid_extract_timestamp(uuid)`, `uuid_extract_version(uuid)`: core's readers (17 added
//!   them, 18 taught the first to read version 7), with PostgreSQL 18's results.
//!
//! These four are created in the extension's schema on every version, from the same C symbols,
//! so that one catalog survives `pg_upgrade` and `pg_dump` between any two majors: the
//! binary-upgrade restore recreates every member with its symbol, and a dump names them
//! schema-qualified (`DEFAULT public.uuidv7()`). An unqualified call resolves to `pg_catalog`
//! first where core has the name (`uuidv7()` on 18, the readers on 17 and later; 17's
//! `uuid_extract_timestamp` reads v1 times only), and to these everywhere else.
//! - `uuidv7_timestamp(uuid)`: the time to the microsecond, from the sub-millisecond fraction.
//! - `uuidv7_min_id(ts)`, `uuidv7_max_id(ts)`: range bounds, like `snowflake_min_id`/`_max_id`.
//!
//! Volatility: the generators are VOLATILE and PARALLEL UNSAFE: an id past the database's floor
//! must first advance it (`crate::runtime::space`), which writes, and nothing may be written in parallel
//! mode; so a query that mints runs without parallel workers. The readers are IMMUTABLE, STRICT
//! and PARALLEL SAFE: a UUIDv7 counts Unix milliseconds, which no setting changes.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::core::time::{self, NS_PER_US};
use crate::core::uuidv7;
use crate::runtime::{errors, timestamp, uuidv7 as generator};

fn encode(word: u64, shifted: bool) -> pgrx::Uuid {
    pgrx::Uuid::from_bytes(generator::encode(word, shifted))
}

/// The word moved by `shift`, with PostgreSQL's calendar arithmetic (`timestamptz + interval`),
/// so that `'1 month'` means a calendar month, as in PostgreSQL 18's `uuidv7(interval)`.
fn shifted(word: u64, shift: Interval) -> Result<u64, ErrorReport> {
    let out_of_range = || errors::uuidv7_time_out_of_range("shifted timestamp");
    if !uuidv7::shift_is_plausible(shift.months(), shift.days(), shift.micros()) {
        return Err(out_of_range());
    }
    let base = timestamp::from_unix_ms((word >> uuidv7::FRACTION_BITS) as i64)?;
    // SAFETY: timestamptz_pl_interval is a strict built-in taking (timestamptz, interval); it
    // cannot leave PostgreSQL's range for the plausible shifts let through above.
    let moved: TimestampWithTimeZone = unsafe {
        pgrx::direct_function_call(pg_sys::timestamptz_pl_interval, &[base.into_datum(), shift.into_datum()])
    }
    .ok_or_else(errors::timestamp_out_of_range)?;
    let delta_us = timestamp::unix_us(moved)? - timestamp::unix_us(base)?;
    uuidv7::shift_word(word, i128::from(delta_us) * i128::from(NS_PER_US)).ok_or_else(out_of_range)
}

/// A new UUIDv7, greater than every UUIDv7 this server generated before without a shift.
#[pg_extern(volatile, parallel_unsafe)]
fn uuidv7_next() -> pgrx::Uuid {
    encode(generator::next_word(), false)
}

/// A new UUIDv7 whose time is moved by `shift` (PostgreSQL 18's `uuidv7(interval)`). It sorts by
/// its shifted time, not in generation order, and may lie ahead of later unshifted ones. It never
/// equals an unshifted UUIDv7 (`uuidv7::SHIFTED_BIT`); two shifted ones whose words meet (two
/// shifts that differ as much as their calls' times) differ in their 61 random bits.
#[pg_extern(volatile, parallel_unsafe, name = "uuidv7_next")]
fn uuidv7_next_shifted(shift: Interval) -> Result<pgrx::Uuid, ErrorReport> {
    Ok(encode(shifted(generator::next_word(), shift)?, true))
}

/// PostgreSQL 18's `uuidv7()`, as `uuidv7_next()`: monotonic across every backend.
#[pg_extern(volatile, parallel_unsafe)]
fn uuidv7() -> pgrx::Uuid {
    uuidv7_next()
}

/// PostgreSQL 18's `uuidv7(shift interval)`, as `uuidv7_next(shift)`.
#[pg_extern(volatile, parallel_unsafe, name = "uuidv7")]
fn uuidv7_shifted(shift: Interval) -> Result<pgrx::Uuid, ErrorReport> {
    uuidv7_next_shifted(shift)
}

/// PostgreSQL 18's `uuid_extract_timestamp(uuid)`: the time of a version 1 or 7 UUID
/// (milliseconds for v7), NULL for other versions and non-RFC variants.
#[pg_extern(immutable, strict, parallel_safe)]
fn uuid_extract_timestamp(id: pgrx::Uuid) -> Result<Option<TimestampWithTimeZone>, ErrorReport> {
    uuidv7::extract_unix_us(id.as_bytes()).map(timestamp::from_unix_us).transpose()
}

/// PostgreSQL 17's `uuid_extract_version(uuid)`: NULL for non-RFC variants.
#[pg_extern(immutable, strict, parallel_safe)]
fn uuid_extract_version(id: pgrx::Uuid) -> Option<i16> {
    uuidv7::version(id.as_bytes()).map(i16::from)
}

/// The time of a UUIDv7 to the microsecond, reading the 12-bit sub-millisecond fraction in
/// `rand_a` (as this extension and PostgreSQL 18 write it). NULL for other versions.
#[pg_extern(immutable, strict, parallel_safe)]
fn uuidv7_timestamp(id: pgrx::Uuid) -> Result<Option<TimestampWithTimeZone>, ErrorReport> {
    uuidv7::extract_unix_us_precise(id.as_bytes()).map(timestamp::from_unix_us).transpose()
}

fn bounds(ts: TimestampWithTimeZone) -> Result<([u8; 16], [u8; 16]), ErrorReport> {
    let us = timestamp::unix_us(ts)?;
    uuidv7::bounds_at(us).ok_or_else(|| {
        errors::uuidv7_time_out_of_range(&format!("timestamp {}", time::format_unix_ms(us.div_euclid(1000))))
    })
}

/// The smallest UUIDv7 of the millisecond holding `ts`: `WHERE id >= uuidv7_min_id(t)` finds
/// every UUIDv7 minted at or after `t`, by any generator, with an index range scan.
#[pg_extern(immutable, strict, parallel_safe)]
fn uuidv7_min_id(ts: TimestampWithTimeZone) -> Result<pgrx::Uuid, ErrorReport> {
    Ok(pgrx::Uuid::from_bytes(bounds(ts)?.0))
}

/// The largest UUIDv7 of the millisecond holding `ts`.
#[pg_extern(immutable, strict, parallel_safe)]
fn uuidv7_max_id(ts: TimestampWithTimeZone) -> Result<pgrx::Uuid, ErrorReport> {
    Ok(pgrx::Uuid::from_bytes(bounds(ts)?.1))
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn uuidv7_next_is_version_7_variant_rfc_and_increasing() {
        let ok = Spi::get_one::<bool>(
            "WITH g AS (SELECT n, uuidv7_next() AS u FROM generate_series(1, 10000) n)
             SELECT bool_and(substr(u::text, 15, 1) = '7') AND bool_and(substr(u::text, 20, 1) IN ('8', '9', 'a', 'b'))
                AND count(DISTINCT u) = 10000
                AND count(*) FILTER (WHERE u <= prev) = 0
             FROM (SELECT u, lag(u) OVER (ORDER BY n) prev FROM g) s",
        );
        assert_eq!(ok, Ok(Some(true)));
    }

    #[pg_test]
    fn timestamp_is_the_clock_at_the_call() {
        let ok = Spi::get_one::<bool>(
            "SELECT bool_and(uuidv7_timestamp(u) BETWEEN c0 - interval '1 ms' AND c1 + interval '1 ms')
             FROM (SELECT clock_timestamp() c0, uuidv7_next() u, clock_timestamp() c1 FROM generate_series(1, 1000)) s",
        );
        assert_eq!(ok, Ok(Some(true)));
    }

    #[pg_test]
    fn bounds_bracket_the_rfc_vector() {
        let ok = Spi::get_one::<bool>(
            "SELECT uuidv7_min_id('2022-02-22 19:22:22+00') = '017f22e2-79b0-7000-8000-000000000000'
                AND uuidv7_max_id('2022-02-22 19:22:22.0009+00') = '017f22e2-79b0-7fff-bfff-ffffffffffff'
                AND '017F22E2-79B0-7CC3-98C4-DC0C0C07398F'::uuid BETWEEN uuidv7_min_id('2022-02-22 19:22:22+00')
                                                                  AND uuidv7_max_id('2022-02-22 19:22:22+00')
                AND uuidv7_timestamp('017F22E2-79B0-7CC3-98C4-DC0C0C07398F') = '2022-02-22 19:22:22.000797+00'",
        );
        assert_eq!(ok, Ok(Some(true)));
    }

    #[pg_test]
    fn a_shifted_uuidv7_never_equals_an_unshifted_one() {
        // The top bit of rand_b (bit 5 of byte 8) is set in every shifted UUIDv7 and clear in
        // every other: a shifted word that the generator reaches later cannot repeat a UUID.
        let ok = Spi::get_one::<bool>(
            "SELECT bool_and(get_byte(uuid_send(s), 8) & 32 = 32) AND bool_and(get_byte(uuid_send(u), 8) & 32 = 0)
                AND bool_and(substr(s::text, 20, 1) IN ('a', 'b')) AND bool_and(substr(u::text, 20, 1) IN ('8', '9'))
             FROM (SELECT uuidv7_next(interval '2 ms') s, uuidv7_next() u FROM generate_series(1, 1000)) g",
        );
        assert_eq!(ok, Ok(Some(true)));
    }

    #[pg_test(error = "shifted timestamp is outside the UUIDv7 range")]
    fn a_shift_before_1970_is_refused() {
        Spi::run("SELECT uuidv7_next(- interval '100 years')").unwrap();
    }
}
