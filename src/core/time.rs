//! Time units and the text form of an epoch, without a clock and without PostgreSQL.
//!
//! The epoch setting is read in the postmaster, before any SQL can run, so it is parsed here
//! rather than by PostgreSQL's `timestamptz_in` (which depends on `DateStyle` and `TimeZone`).
//! The accepted form is ISO 8601 / RFC 3339 with an explicit UTC offset, which is also the form
//! PostgreSQL prints with `TimeZone = UTC`.

use super::excerpt::excerpt;

pub const NS_PER_US: i64 = 1_000;
pub const NS_PER_MS: i64 = 1_000_000;
pub const NS_PER_SEC: i64 = 1_000_000_000;
pub const US_PER_MS: i64 = 1_000;
pub const MS_PER_SEC: i64 = 1_000;
/// A Julian year (365.25 days) in milliseconds, for lifetimes.
pub const MS_PER_JULIAN_YEAR: f64 = 365.25 * 86_400_000.0;
/// 2000-01-01 00:00:00 UTC, PostgreSQL's timestamp origin, in Unix microseconds.
pub const PG_EPOCH_UNIX_US: i64 = 946_684_800_000_000;
/// The longest timestamp text [`parse_timestamp_ms`] reads, in bytes. The longest sensible
/// spelling, `2025-01-01 00:00:00.000 +05:30`, has 29.
pub const MAX_TIMESTAMP_LEN: usize = 64;

/// PostgreSQL `timestamptz` microseconds of a Unix microsecond; `None` before about 290,000 BC,
/// where the difference leaves an i64 (PostgreSQL's own timestamps begin in 4714 BC).
pub const fn pg_us_from_unix_us(unix_us: i64) -> Option<i64> {
    unix_us.checked_sub(PG_EPOCH_UNIX_US)
}

/// Unix microseconds of a PostgreSQL `timestamptz`; `None` past about the year 294,000, where
/// an i64 of Unix microseconds ends before PostgreSQL's timestamps do.
pub const fn unix_us_from_pg_us(pg_us: i64) -> Option<i64> {
    pg_us.checked_add(PG_EPOCH_UNIX_US)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
const fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
const fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { yoe + era * 400 + 1 } else { yoe + era * 400 }, m, d)
}

const fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Microseconds in a day.
pub const US_PER_DAY: i64 = 86_400_000_000;

/// A Unix microsecond plus an interval of `months`, `days` and `micros`, in UTC, as PostgreSQL's
/// `timestamp + interval` adds them: the months first, keeping the day of the month unless the
/// new month is shorter (January 31 plus a month is February 28 or 29), then the days, then the
/// time. `None` where the result, or the year on the way, leaves an i64.
pub fn add_interval_utc(unix_us: i64, months: i64, days: i64, micros: i64) -> Option<i64> {
    let (mut day, time_of_day) = (unix_us.div_euclid(US_PER_DAY), unix_us.rem_euclid(US_PER_DAY));
    if months != 0 {
        // Far beyond any timestamp, but where the calendar's arithmetic is still exact.
        const MAX_DAYS: i64 = 1 << 40;
        if day.abs() > MAX_DAYS || months.abs() > MAX_DAYS {
            return None;
        }
        let (y, m, d) = civil_from_days(day);
        let total = y * 12 + (m - 1) + months;
        let (y, m) = (total.div_euclid(12), total.rem_euclid(12) + 1);
        day = days_from_civil(y, m, d.min(days_in_month(y, m)));
    }
    day.checked_add(days)?.checked_mul(US_PER_DAY)?.checked_add(time_of_day)?.checked_add(micros)
}

/// Parses `YYYY-MM-DD[( |T)HH:MM[:SS[.fff]]][Z|UTC|+HH[:MM]|-HH[:MM]]` into Unix milliseconds.
/// Without an offset the time is UTC. Fractions finer than a millisecond are refused rather
/// than rounded, because the epoch must be exact. The text is at most [`MAX_TIMESTAMP_LEN`]
/// bytes. Any `&str` is safe: the text is cut only at ASCII characters, and the four-digit year
/// keeps the arithmetic far from overflow.
///
/// # Errors
/// A message naming what is wrong with the text, quoting at most an [`excerpt`] of it.
pub fn parse_timestamp_ms(text: &str) -> Result<i64, String> {
    if text.len() > MAX_TIMESTAMP_LEN {
        return Err(format!(
            "\"{}\" is not a timestamp: it is {} bytes long, and a timestamp is at most {MAX_TIMESTAMP_LEN}.",
            excerpt(text),
            text.len()
        ));
    }
    let bad = |why: &str| Err(format!("\"{}\" is not a timestamp: {why}.", excerpt(text.trim())));
    let s = text.trim();
    // Split the offset off the end first.
    let (body, offset_min) = if let Some(b) = s.strip_suffix('Z').or_else(|| s.strip_suffix("UTC")) {
        (b.trim_end(), 0)
    } else if let Some(pos) = s.rfind(['+', '-']).filter(|&p| p > 10) {
        // `pos` is the index of an ASCII sign, so both cuts fall on character boundaries.
        let (b, off) = s.split_at(pos);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        let off = &off[1..];
        let (h, m) = match off.split_once(':') {
            Some((h, m)) => (h, m),
            None if off.len() == 4 && off.is_ascii() => off.split_at(2),
            None => (off, "0"),
        };
        match (h.parse::<i64>(), m.parse::<i64>()) {
            (Ok(h), Ok(m)) if h <= 15 && m < 60 => (b.trim_end(), sign * (h * 60 + m)),
            _ => return bad("the UTC offset must look like +00, +05:30 or Z"),
        }
    } else {
        (s, 0)
    };
    let (date, clock) = match body.split_once(['T', ' ']) {
        Some((d, c)) => (d, c.trim()),
        None => (body, ""),
    };
    let num = |t: &str, len: usize| {
        if t.len() == len && t.bytes().all(|b| b.is_ascii_digit()) {
            t.parse::<i64>().ok()
        } else {
            None
        }
    };
    let mut dp = date.split('-');
    let (Some(y), Some(mo), Some(d), None) = (
        dp.next().and_then(|t| num(t, 4)),
        dp.next().and_then(|t| num(t, 2)),
        dp.next().and_then(|t| num(t, 2)),
        dp.next(),
    ) else {
        return bad("the date must look like 2025-01-01");
    };
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) {
        return bad("no such date");
    }
    let (mut h, mut mi, mut sec, mut ms) = (0, 0, 0, 0);
    if !clock.is_empty() {
        let (hms, frac) = match clock.split_once('.') {
            Some((a, f)) => (a, Some(f)),
            None => (clock, None),
        };
        let mut tp = hms.split(':');
        let (Some(hh), Some(mm), ss, None) =
            (tp.next().and_then(|t| num(t, 2)), tp.next().and_then(|t| num(t, 2)), tp.next(), tp.next())
        else {
            return bad("the time must look like 00:00:00");
        };
        (h, mi) = (hh, mm);
        if let Some(ss) = ss {
            let Some(ss) = num(ss, 2) else {
                return bad("the time must look like 00:00:00");
            };
            sec = ss;
        }
        if let Some(f) = frac {
            if f.is_empty() || f.len() > 3 || !f.bytes().all(|b| b.is_ascii_digit()) || ss.is_none() {
                return bad("the epoch is exact to the millisecond: at most 3 fractional digits");
            }
            ms = f.parse::<i64>().unwrap_or(0) * 10i64.pow(3 - f.len() as u32);
        }
        if h > 23 || mi > 59 || sec > 59 {
            return bad("no such time of day");
        }
    }
    let days = days_from_civil(y, mo, d);
    Ok((((days * 24 + h) * 60 + mi - offset_min) * 60 + sec) * MS_PER_SEC + ms)
}

/// Formats Unix milliseconds the way PostgreSQL prints a `timestamptz` with `TimeZone = UTC`:
/// `2025-01-01 00:00:00+00`, with `.fff` only when the milliseconds are not zero.
pub fn format_unix_ms(unix_ms: i64) -> String {
    let days = unix_ms.div_euclid(86_400_000);
    let in_day = unix_ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, mi, s, ms) = (in_day / 3_600_000, in_day / 60_000 % 60, in_day / 1000 % 60, in_day % 1000);
    let frac = if ms == 0 { String::new() } else { format!(".{ms:03}") };
    format!("{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}{frac}+00")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix microseconds of a UTC date and time of day.
    fn utc(y: i64, m: i64, d: i64, hour: i64) -> i64 {
        days_from_civil(y, m, d) * US_PER_DAY + hour * 3_600_000_000
    }

    #[test]
    fn intervals_add_as_postgresql_adds_them_in_utc() {
        // The day of the month is kept, or clamped to a shorter month; months count from the
        // date, never from a clamped one.
        assert_eq!(add_interval_utc(utc(2026, 1, 31, 5), 1, 0, 0), Some(utc(2026, 2, 28, 5)));
        assert_eq!(add_interval_utc(utc(2026, 1, 31, 5), 2, 0, 0), Some(utc(2026, 3, 31, 5)));
        assert_eq!(add_interval_utc(utc(2024, 1, 31, 0), 1, 0, 0), Some(utc(2024, 2, 29, 0)));
        assert_eq!(add_interval_utc(utc(2026, 3, 31, 0), -1, 0, 0), Some(utc(2026, 2, 28, 0)));
        assert_eq!(add_interval_utc(utc(2026, 12, 15, 0), 14, 0, 0), Some(utc(2028, 2, 15, 0)));
        assert_eq!(add_interval_utc(utc(2026, 1, 15, 0), -13, 0, 0), Some(utc(2024, 12, 15, 0)));
        // Months, then days, then the time.
        assert_eq!(add_interval_utc(utc(2026, 1, 31, 0), 1, 1, 0), Some(utc(2026, 3, 1, 0)));
        assert_eq!(add_interval_utc(utc(2026, 2, 28, 23), 0, 1, 3_600_000_000), Some(utc(2026, 3, 2, 0)));
        assert_eq!(add_interval_utc(utc(1969, 12, 31, 23), 1, 0, 0), Some(utc(1970, 1, 31, 23)));
        assert_eq!(add_interval_utc(0, 0, 0, -1), Some(-1));
        // Nothing overflows: an i64 of microseconds ends in the year 294,247.
        assert_eq!(add_interval_utc(i64::MAX, 0, 1, 0), None);
        assert_eq!(add_interval_utc(0, i64::MAX, 0, 0), None);
        assert_eq!(add_interval_utc(i64::MIN, -1, 0, 0), None);
        assert_eq!(add_interval_utc(0, 0, 0, i64::MAX), Some(i64::MAX));
    }

    #[test]
    fn parses_the_default_epoch_in_every_spelling() {
        for s in [
            "2025-01-01",
            "2025-01-01 00:00:00+00",
            "2025-01-01T00:00:00Z",
            "2025-01-01 00:00:00 UTC",
            "2025-01-01 00:00",
            "2025-01-01 01:00:00+01",
            "2024-12-31 19:00:00-05:00",
            "2025-01-01 05:30:00+0530",
            " 2025-01-01 00:00:00.000+00 ",
        ] {
            assert_eq!(parse_timestamp_ms(s), Ok(1_735_689_600_000), "{s}");
        }
    }

    #[test]
    fn known_instants() {
        assert_eq!(parse_timestamp_ms("1970-01-01"), Ok(0));
        // Twitter's epoch, 2010-11-04 01:42:54.657 UTC.
        assert_eq!(parse_timestamp_ms("2010-11-04 01:42:54.657Z"), Ok(1_288_834_974_657));
        assert_eq!(parse_timestamp_ms("2000-02-29 12:00:00.5+00"), Ok(951_825_600_500));
        assert_eq!(parse_timestamp_ms("1969-12-31 23:59:59.999Z"), Ok(-1));
    }

    #[test]
    fn refuses_malformed_text() {
        for s in [
            "",
            "yesterday",
            "2025-1-1",
            "2025-02-30",
            "2023-02-29",
            "2025-01-01 24:00:00",
            "2025-01-01 00:00:00.1234",
            "2025-01-01 00:00:00+99",
            "2025-01-01 00",
            "2025-01-01 00:00.5",
            "2025-01-01 00:00+1é1",
        ] {
            assert!(parse_timestamp_ms(s).is_err(), "{s:?} was accepted");
        }
    }

    #[test]
    fn postgres_timestamps() {
        assert_eq!(pg_us_from_unix_us(946_684_800_000_000), Some(0));
        assert_eq!(unix_us_from_pg_us(0), Some(946_684_800_000_000));
        assert_eq!(pg_us_from_unix_us(-1).and_then(unix_us_from_pg_us), Some(-1));
        assert_eq!(unix_us_from_pg_us(i64::MAX - 1), None);
        // Far before PostgreSQL's first timestamp the difference leaves an i64: None, never a
        // panic (debug) or a wrap to a time near i64::MAX (release).
        assert_eq!(pg_us_from_unix_us(i64::MIN), None);
        assert_eq!(pg_us_from_unix_us(i64::MIN + PG_EPOCH_UNIX_US), Some(i64::MIN));
        assert_eq!(pg_us_from_unix_us(i64::MAX), Some(i64::MAX - PG_EPOCH_UNIX_US));
    }

    #[test]
    fn a_huge_text_is_refused_unread_with_a_short_message() {
        let huge = "2025-01-01".repeat(400_000);
        let e = parse_timestamp_ms(&huge).unwrap_err();
        assert!(e.len() < 200, "{} bytes: {e}", e.len());
        assert_eq!(
            e,
            "\"2025-01-012025-01-012025-01-0120…\" is not a timestamp: it is 4000000 bytes long, and a \
            timestamp is at most 64."
        );
        // Within the bound, a malformed text is quoted in part too.
        // 33 characters in 64 bytes: cut after the 32nd, on a character boundary.
        let e = parse_timestamp_ms(&format!("{}xx", "é".repeat(31))).unwrap_err();
        assert!(e.starts_with(&format!("\"{}x…\" is not a timestamp", "é".repeat(31))), "{e}");
        // Blanks count towards the bound.
        assert_eq!(parse_timestamp_ms(&format!("{:>MAX_TIMESTAMP_LEN$}", "2025-01-01")), Ok(1_735_689_600_000));
        assert!(parse_timestamp_ms(&format!("{:>w$}", "2025-01-01", w = MAX_TIMESTAMP_LEN + 1)).is_err());
    }

    #[test]
    fn multibyte_text_next_to_every_cut_is_refused_not_a_panic() {
        for s in [
            "2025-01-01 00:00:00+é",
            "2025-01-01 00:00:00+0é",
            "2025-01-01 00:00:00+é:00",
            "2025-01-01 00:00:00-éé",
            "2025-01-01 00:00:00.é",
            "2025-01-01 00:00:é",
            "2025-01-01é00:00",
            "2025-01-0é",
            "éééééééééééé+00",
            "2025-01-01 00:00:00+0530é",
            "2025-01-01 00:00:00 UTCé",
            "2025-01-01 00:00:00é",
            "２０２５-01-01",
        ] {
            assert!(parse_timestamp_ms(s).is_err(), "{s:?} was accepted");
        }
    }

    #[test]
    fn format_round_trips() {
        for ms in [0, 1, 951_825_600_500, 1_735_689_600_000, 1_735_689_600_000 + (1i64 << 41) - 1, -1] {
            assert_eq!(parse_timestamp_ms(&format_unix_ms(ms)), Ok(ms), "{}", format_unix_ms(ms));
        }
        assert_eq!(format_unix_ms(1_735_689_600_000), "2025-01-01 00:00:00+00");
        assert_eq!(format_unix_ms(-1), "1969-12-31 23:59:59.999+00");
    }

    mod props {
        use proptest::prelude::*;

        use super::super::*;
        use crate::core::excerpt::tests::any_text;

        /// 0000-01-01 00:00:00 UTC and 9999-12-31 23:59:59.999 UTC: the four-digit years, which
        /// [`format_unix_ms`] prints in the form [`parse_timestamp_ms`] reads.
        const FIRST_4_DIGIT_MS: i64 = -62_167_219_200_000;
        const LAST_4_DIGIT_MS: i64 = 253_402_300_799_999;

        fn timestamp_like() -> impl Strategy<Value = String> {
            prop_oneof![
                "[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]{0,4})?)?)? \
                    ?(Z|UTC|[+-][0-9]{1,4}(:[0-9]{1,2})?)?",
                "[0-9 :T.Z+é-]{0,40}",
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn parse_never_panics_and_errors_are_short(text in prop_oneof![any_text(), timestamp_like()]) {
                match parse_timestamp_ms(&text) {
                    // Four-digit years, give or take a 15:59 offset.
                    Ok(ms) => prop_assert!(
                        (FIRST_4_DIGIT_MS - 86_400_000..=LAST_4_DIGIT_MS + 86_400_000).contains(&ms),
                        "{}", ms
                    ),
                    Err(e) => prop_assert!(e.len() <= 300, "{}", e),
                }
            }

            #[test]
            fn formatted_times_parse_back(ms in prop_oneof![
                FIRST_4_DIGIT_MS..=LAST_4_DIGIT_MS,
                Just(FIRST_4_DIGIT_MS),
                Just(LAST_4_DIGIT_MS),
                0..=4_102_444_800_000i64,
            ]) {
                prop_assert_eq!(parse_timestamp_ms(&format_unix_ms(ms)), Ok(ms));
            }

            #[test]
            fn conversions_are_total(n in any::<i64>()) {
                // Error messages format any time the caller passes.
                let text = format_unix_ms(n);
                prop_assert!(text.len() < 40, "{}", text);
                if let Some(pg) = pg_us_from_unix_us(n) {
                    prop_assert_eq!(unix_us_from_pg_us(pg), Some(n));
                }
                if let Some(unix) = unix_us_from_pg_us(n) {
                    prop_assert_eq!(pg_us_from_unix_us(unix), Some(n));
                }
            }
        }
    }
}
