//! `snowflake_layout()`: the active layout, and the same figures for any layout a DBA is weighing.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::core::layout::{Layout, Widths};
use crate::{errors, guc};

/// The figures of a layout: the server's (`snowflake_layout()`), or any layout a DBA is weighing
/// before choosing it (`snowflake_layout('twitter')`, `snowflake_layout('39/16/8@10ms', '2020-01-01')`).
/// A NULL layout means the server's layout, a NULL epoch the server's epoch.
///
/// STABLE: the defaults are the server's settings, fixed while it runs but set in
/// postgresql.conf. PARALLEL SAFE: reads settings only.
#[pg_extern(stable, parallel_safe)]
fn snowflake_layout(
    layout: default!(Option<&str>, "NULL"),
    epoch: default!(Option<TimestampWithTimeZone>, "NULL"),
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
    let widths = match layout {
        Some(text) => Widths::parse(text).map_err(|e| errors::bad_layout(&e))?,
        None => server.widths(),
    };
    let epoch_ms = match epoch {
        Some(ts) => super::unix_ms(ts)?,
        None => server.epoch_unix_ms(),
    };
    let l = Layout::new(widths, epoch_ms).map_err(|e| errors::bad_layout(&e))?;
    let w = l.widths();
    // Every width is at most 63 and the tick at most 1000, so the casts are exact.
    Ok(TableIterator::once((
        w.to_string(),
        super::timestamptz_from_ms(l.epoch_unix_ms())?,
        w.time_bits as i32,
        w.shard_bits as i32,
        w.seq_bits as i32,
        w.tick_ms as i32,
        l.max_shard() as i32,
        l.ids_per_ms(),
        l.ids_per_second() as i64,
        super::timestamptz_from_ms(l.last_unix_ms()).unwrap_or_else(|_| TimestampWithTimeZone::positive_infinity()),
        l.lifetime_years(),
    )))
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
            "SELECT string_agg(concat_ws(' ', layout, max_shard, ids_per_ms, ids_per_second, round(lifetime_years::numeric, 1)), '; ' ORDER BY p)
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
}
