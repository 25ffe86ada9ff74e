//! `snowflake_layout()`: the active layout, and the same figures for any layout a DBA is weighing.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::core::layout::Layout;
use crate::runtime::{errors, guc, space, timestamp};

/// The figures of a layout: the server's (`snowflake_layout()`), or any layout a DBA is weighing
/// before choosing it (`snowflake_layout('twitter')`, `snowflake_layout('39/16/8@10ms', '2020-01-01')`).
/// A NULL layout means the server's layout, a NULL epoch the server's epoch.
///
/// STABLE: the defaults are the server's settings, fixed while it runs but set in
/// postgresql.conf. PARALLEL SAFE: reads settings only.
///
/// The layout is a `text`, read here as its bytes (its declaration in sql/finalize.sql says `text`): pgrx's
/// `&str` panics on text that is not UTF-8, which a database in another encoding passes.
#[pg_extern(stable, parallel_safe, sql = false)]
fn snowflake_layout(
    layout: Option<&[u8]>,
    epoch: Option<TimestampWithTimeZone>,
) -> Result<
    TableIterator<
        'static,
        (
            name!(layout, String),
            name!(epoch, TimestampWithTimeZone),
            name!(time_bits, i32),
            name!(shard_bits, i32),
            name!(seq_bits, i32),
            name!(tick_ms, i32),
            name!(max_shard, i32),
            name!(ids_per_ms, f64),
            name!(ids_per_second, i64),
            name!(last_timestamp, TimestampWithTimeZone),
            name!(lifetime_years, f64),
        ),
    >,
    ErrorReport,
> {
    let server = guc::layout();
    // A text longer than a layout is refused unread, and a bad one is quoted only in part, so an
    // unprivileged caller cannot make this backend allocate in proportion to it.
    let widths = match layout {
        Some(bytes) => super::layout_arg(bytes)?,
        None => server.widths(),
    };
    let epoch_ms = match epoch {
        Some(ts) => timestamp::unix_ms(ts)?,
        None => server.epoch_unix_ms(),
    };
    let l = Layout::new(widths, epoch_ms).map_err(|e| errors::bad_layout(&e))?;
    let w = l.widths();
    // A layout that ends after PostgreSQL's last timestamp (294276 AD) lasts forever as far as
    // any timestamptz can tell: its end is 'infinity'. timestamp::from_unix_ms refuses such a time
    // rather than clamping it, so nothing else becomes infinity.
    let last_timestamp =
        timestamp::from_unix_ms(l.last_unix_ms()).unwrap_or_else(|_| TimestampWithTimeZone::positive_infinity());
    // Every width is at most 63 and the tick at most 1000, so the casts are exact.
    Ok(TableIterator::once((
        w.to_string(),
        timestamp::from_unix_ms(l.epoch_unix_ms())?,
        w.time_bits as i32,
        w.shard_bits as i32,
        w.seq_bits as i32,
        w.tick_ms as i32,
        l.max_shard() as i32,
        l.ids_per_ms(),
        l.ids_per_second() as i64,
        last_timestamp,
        l.lifetime_years(),
    )))
}

/// The trigger on `snowflake_id_space` (`crate::runtime::space::record_changed`). A statement
/// trigger, AFTER, so its result is ignored.
///
/// # Safety
/// Called by PostgreSQL's fmgr, as a trigger or (refused) directly.
#[unsafe(no_mangle)]
#[doc(hidden)]
#[pg_guard]
pub unsafe extern "C-unwind" fn snowflake_id_space_changed(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: PostgreSQL's fmgr passes the call's FunctionCallInfo.
    unsafe { space::record_changed(fcinfo) };
    pg_sys::Datum::from(0)
}

/// `PG_FUNCTION_INFO_V1(snowflake_id_space_changed)`.
#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_snowflake_id_space_changed() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn active_layout_is_the_default() {
        let s = Spi::get_one::<String>(
            "SELECT concat_ws(' ', layout, epoch, time_bits, shard_bits, seq_bits, tick_ms, max_shard, ids_per_ms,
                              ids_per_second, last_timestamp, round(lifetime_years::numeric, 2))
             FROM snowflake_layout()",
        );
        assert_eq!(
            s,
            Ok(Some(
                "41/13/9 2025-01-01 00:00:00+00 41 13 9 1 8191 512 512000 2094-09-07 15:47:35.551+00 69.68".into()
            ))
        );
    }

    #[pg_test]
    fn bit_budget_of_the_presets() {
        let s = Spi::get_one::<String>(
            "SELECT string_agg(concat_ws(' ', layout, max_shard, ids_per_ms, ids_per_second,
               round(lifetime_years::numeric, 1)), '; ' ORDER BY p)
             FROM unnest(ARRAY['default', 'twitter', 'sonyflake']) WITH ORDINALITY u(p, o),
                  LATERAL snowflake_layout(p)",
        );
        assert_eq!(
            s,
            Ok(Some(
                "41/13/9 8191 512 512000 69.7; 39/16/8@10ms 65535 25.6 25600 174.2; 41/10/12 1023 4096 4096000 69.7"
                    .into()
            ))
        );
    }

    #[pg_test(error = "invalid snowflake layout")]
    fn an_overwide_layout_is_refused() {
        Spi::run("SELECT * FROM snowflake_layout('41/13/10')").unwrap();
    }

    #[pg_test]
    fn a_layout_beyond_postgres_timestamps_ends_at_infinity() {
        // 2^50 ticks of a second end in the year 35 million: past PostgreSQL's range, so the end
        // is infinity, never a clamp to the largest i64 of microseconds (294247-01-10).
        let s = Spi::get_one::<String>("SELECT last_timestamp::text FROM snowflake_layout('50/5/8@1000ms')");
        assert_eq!(s, Ok(Some("infinity".into())));
        let s = Spi::get_one::<String>("SELECT last_timestamp::text FROM snowflake_layout('48/7/8@10ms')");
        assert_eq!(s, Ok(Some("91220-11-14 07:18:26.559+00".into())));
    }

    #[pg_test(error = "invalid snowflake layout")]
    fn a_layout_ending_beyond_an_i64_of_milliseconds_is_refused() {
        // Its last tick starts at i64::MAX ms, so its end does not fit an i64: refused (22023),
        // never an overflow (XX000 in a debug build).
        Spi::run("SELECT * FROM snowflake_layout('62/0/1@2ms', '1970-01-01 00:00:00.001+00')").unwrap();
    }

    #[pg_test]
    fn a_huge_layout_text_is_refused_with_a_short_detail() {
        // A long text is refused before it is split or quoted: splitting 300 MB into a Vec, or
        // echoing it into the DETAIL, could fail to allocate, which aborts the backend. 30 MB
        // keeps the test quick; the refusal does not read it.
        Spi::run(
            "DO $$
             DECLARE detail text;
             BEGIN
                 PERFORM snowflake_layout(repeat('/', 30000000));
                 RAISE 'a 30 MB layout was accepted';
             EXCEPTION WHEN invalid_parameter_value THEN
                 GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
                 IF length(detail) > 200 THEN
                     RAISE 'the DETAIL has % characters', length(detail);
                 END IF;
             END $$",
        )
        .unwrap();
    }
}
