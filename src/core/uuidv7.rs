//! RFC 9562 UUIDs: the version 7 layout, and reading timestamps back out of versions 1 and 7.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                           unix_ts_ms                          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          unix_ts_ms           |  ver  |   rand_a (fraction)   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |var|                        rand_b                             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                            rand_b                             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! - `unix_ts_ms`: 48 bits of Unix milliseconds (RFC 9562 §5.7), good until the year 10889.
//! - `ver` = 7.
//! - `rand_a`: 12 bits of sub-millisecond fraction (§6.2 method 3, "replace leftmost random bits
//!   with increased clock precision"), as PostgreSQL 18 does. Together with the milliseconds it is
//!   the generator word of [`TIMELINE`]: the shared monotonic state of `crate::core::monotonic`,
//!   so the first 64 bits strictly increase across every backend of a server.
//! - `var` = `0b10` (§4.1), then 62 bits from a CSPRNG (`crate::core::rng`).

use super::monotonic::Timeline;
use super::time::{NS_PER_MS, US_PER_MS};

/// Bits of sub-millisecond fraction in `rand_a`.
pub const FRACTION_BITS: u32 = 12;
/// The largest Unix millisecond 48 bits hold: 10889-08-02 05:31:50.655 UTC.
pub const MAX_UNIX_MS: u64 = (1 << 48) - 1;

/// UUIDv7's generator timeline: Unix epoch, 1 ms ticks, the fraction of the tick in 12 low bits.
pub const TIMELINE: Timeline =
    Timeline { origin_unix_ms: 0, tick_ms: 1, low_bits: FRACTION_BITS, max_tick: MAX_UNIX_MS, sub_tick_fraction: true };

/// The top bit of rand_b (bit 5 of byte 8): set in a UUIDv7 whose time was shifted
/// (`uuidv7_next(shift)`), clear in one at the generator's own time. A shifted word may be one the
/// generator reaches later (a shift into the future), and this bit keeps the two UUIDs apart, so
/// that an unshifted UUIDv7 never equals any other this server generated. The other 61 bits stay
/// random.
pub const SHIFTED_BIT: u64 = 1 << 61;

/// The 62 bits of rand_b for `rand62`: [`SHIFTED_BIT`] set for a shifted UUIDv7, clear otherwise.
pub const fn tail(rand62: u64, shifted: bool) -> u64 {
    if shifted {
        rand62 | SHIFTED_BIT
    } else {
        rand62 & !SHIFTED_BIT
    }
}

/// Lays out a UUIDv7 from a generator word (`unix_ms << 12 | fraction`) and 62 random bits.
pub const fn encode(word: u64, rand62: u64) -> [u8; 16] {
    let ms = word >> FRACTION_BITS;
    let frac = word & ((1 << FRACTION_BITS) - 1);
    // Bytes 0..8: 48-bit ms, then version 7 in the high nibble of byte 6, then the fraction.
    let hi = (ms << 16) | (0x7 << 12) | frac;
    // Bytes 8..16: variant 0b10 in the top two bits (RFC 9562 §4.1), then rand_b.
    let lo = (0b10 << 62) | (rand62 & ((1 << 62) - 1));
    let (h, l) = (hi.to_be_bytes(), lo.to_be_bytes());
    [h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7]]
}

/// Whether the variant bits say RFC 9562 (`0b10`); versions only mean something then.
pub const fn is_rfc_variant(u: &[u8; 16]) -> bool {
    u[8] & 0xc0 == 0x80
}

/// The version field of an RFC 9562 UUID, `None` for other variants (the nil UUID among them).
pub const fn version(u: &[u8; 16]) -> Option<u8> {
    if is_rfc_variant(u) {
        Some(u[6] >> 4)
    } else {
        None
    }
}

const fn unix_ms_of(u: &[u8; 16]) -> u64 {
    u64::from_be_bytes([0, 0, u[0], u[1], u[2], u[3], u[4], u[5]])
}

/// Days from 1582-10-15 (the Gregorian reform, UUIDv1's origin) to 1970-01-01.
const GREGORIAN_TO_UNIX_DAYS: i64 = 141_427;

/// The timestamp of a version 1 or 7 UUID in Unix microseconds, as PostgreSQL's
/// `uuid_extract_timestamp` reads it: milliseconds for v7 (the fraction is ignored, since other
/// generators fill `rand_a` with random bits), 100 ns ticks truncated to µs for v1. `None` for
/// other versions and variants.
pub const fn extract_unix_us(u: &[u8; 16]) -> Option<i64> {
    match version(u) {
        Some(7) => Some(unix_ms_of(u) as i64 * US_PER_MS),
        Some(1) => {
            // time_low (bytes 0-3), time_mid (4-5), time_hi (low nibble of 6, then 7).
            let low = u32::from_be_bytes([u[0], u[1], u[2], u[3]]) as i64;
            let mid = u16::from_be_bytes([u[4], u[5]]) as i64;
            let hi = u16::from_be_bytes([u[6] & 0x0f, u[7]]) as i64;
            let ticks_100ns = (hi << 48) | (mid << 32) | low;
            Some(ticks_100ns / 10 - GREGORIAN_TO_UNIX_DAYS * 86_400 * 1_000_000)
        }
        _ => None,
    }
}

/// The timestamp of a UUIDv7 to the microsecond, reading `rand_a` as the 12-bit sub-millisecond
/// fraction this extension and PostgreSQL 18 write there. `None` for anything but v7.
pub const fn extract_unix_us_precise(u: &[u8; 16]) -> Option<i64> {
    match version(u) {
        Some(7) => {
            let frac = u16::from_be_bytes([u[6] & 0x0f, u[7]]) as i64;
            Some(unix_ms_of(u) as i64 * US_PER_MS + ((frac * US_PER_MS) >> FRACTION_BITS))
        }
        _ => None,
    }
}

/// The smallest and largest UUIDv7 of the millisecond holding `unix_us`, for range scans:
/// every UUIDv7 minted in that millisecond, by any generator, lies between the two.
/// `None` outside 1970 .. 10889.
pub const fn bounds_at(unix_us: i64) -> Option<([u8; 16], [u8; 16])> {
    let ms = unix_us.div_euclid(US_PER_MS);
    if ms < 0 || ms as u64 > MAX_UNIX_MS {
        return None;
    }
    let word = (ms as u64) << FRACTION_BITS;
    Some((encode(word, 0), encode(word | ((1 << FRACTION_BITS) - 1), (1 << 62) - 1)))
}

/// Whether a `uuidv7(shift)` interval could land inside the UUIDv7 range at all. A component
/// longer than the whole range (about 8,920 years) cannot; refusing it up front also keeps the
/// calendar arithmetic far from the limits of PostgreSQL's own timestamps.
pub const fn shift_is_plausible(months: i32, days: i32, micros: i64) -> bool {
    const YEARS: i64 = 8_920;
    (months as i64).abs() <= YEARS * 12
        && (days as i64).abs() <= YEARS * 366
        && micros.unsigned_abs() <= (YEARS * 366 * 86_400 * 1_000_000) as u64
}

/// Moves a generator word by `delta_ns` (a `uuidv7(shift)` offset), keeping its sub-millisecond
/// fraction exact when the shift is whole milliseconds. `None` when the result leaves the 48-bit
/// millisecond range.
pub fn shift_word(word: u64, delta_ns: i128) -> Option<u64> {
    let frac = word & ((1 << FRACTION_BITS) - 1);
    // The smallest nanosecond offset that encodes to `frac`, so that re-encoding is exact.
    let frac_ns = (u128::from(frac) * NS_PER_MS as u128).div_ceil(1 << FRACTION_BITS) as i128;
    let ns = i128::from(word >> FRACTION_BITS) * i128::from(NS_PER_MS) + frac_ns + delta_ns;
    let ms = ns.div_euclid(i128::from(NS_PER_MS));
    if ms < 0 || ms > i128::from(MAX_UNIX_MS) {
        return None;
    }
    let new_frac = ((ns.rem_euclid(i128::from(NS_PER_MS)) as u128) << FRACTION_BITS) / NS_PER_MS as u128;
    Some(((ms as u64) << FRACTION_BITS) | new_frac as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::time::parse_timestamp_ms;

    fn parse(s: &str) -> [u8; 16] {
        let hex: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
        let mut out = [0u8; 16];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }

    #[test]
    fn the_shifted_bit_tells_the_two_apart_and_leaves_the_rest() {
        for r in [0, u64::MAX, 0x1555_5555_5555_5555, SHIFTED_BIT] {
            let (plain, moved) = (encode(7, tail(r, false)), encode(7, tail(r, true)));
            assert_eq!((plain[8] & 0x20, moved[8] & 0x20), (0, 0x20));
            assert!(is_rfc_variant(&plain) && is_rfc_variant(&moved));
            let mut same = moved;
            same[8] &= !0x20;
            assert_eq!(same, plain, "only that bit differs");
        }
    }

    #[test]
    fn rfc_9562_test_vector() {
        // RFC 9562 appendix A.6: 2022-02-22 19:22:22 UTC.
        let u = parse("017F22E2-79B0-7CC3-98C4-DC0C0C07398F");
        assert_eq!(version(&u), Some(7));
        assert!(is_rfc_variant(&u));
        let ms = parse_timestamp_ms("2022-02-22 19:22:22Z").unwrap();
        assert_eq!(extract_unix_us(&u), Some(ms * 1000));
        // rand_a = 0xCC3 read as a fraction of the millisecond: 3267/4096 ms = 797 µs.
        assert_eq!(extract_unix_us_precise(&u), Some(ms * 1000 + 797));
        // Re-encoding its fields gives the same bytes.
        let word = ((ms as u64) << 12) | 0xCC3;
        let rand = u64::from_be_bytes(u[8..16].try_into().unwrap()) & ((1 << 62) - 1);
        assert_eq!(encode(word, rand), u);
    }

    #[test]
    fn version_1_timestamps() {
        // RFC 9562 appendix A.1: C232AB00-9414-11EC-B3C8-9F6BDECED846 is 2022-02-22 19:22:22 UTC.
        let u = parse("C232AB00-9414-11EC-B3C8-9F6BDECED846");
        assert_eq!(version(&u), Some(1));
        assert_eq!(extract_unix_us(&u), Some(parse_timestamp_ms("2022-02-22 19:22:22Z").unwrap() * 1000));
        assert_eq!(extract_unix_us_precise(&u), None, "the precise reader is for v7 only");
    }

    #[test]
    fn versions_and_variants_without_a_timestamp() {
        let v4 = parse("6ba7b810-9dad-41d1-80b4-00c04fd430c8");
        assert_eq!((version(&v4), extract_unix_us(&v4)), (Some(4), None));
        let nil = [0u8; 16];
        assert_eq!((version(&nil), extract_unix_us(&nil)), (None, None));
        let max = [0xff; 16];
        assert_eq!((version(&max), extract_unix_us(&max)), (None, None));
        // A v7 layout with the Microsoft variant (0b110) is not RFC: no version, no time.
        let mut ms_variant = parse("017F22E2-79B0-7CC3-98C4-DC0C0C07398F");
        ms_variant[8] = 0xc4;
        assert_eq!((version(&ms_variant), extract_unix_us(&ms_variant)), (None, None));
    }

    #[test]
    fn encode_sets_version_and_variant_for_any_input() {
        for (word, rand) in [(0, 0), (u64::MAX >> 4, u64::MAX), (12345 << 12 | 4095, 1 << 61)] {
            let u = encode(word, rand);
            assert_eq!(version(&u), Some(7));
            assert!(is_rfc_variant(&u));
        }
    }

    #[test]
    fn words_order_the_uuids() {
        let a = encode(100 << 12 | 5, (1 << 62) - 1);
        let b = encode(100 << 12 | 6, 0);
        let c = encode(101 << 12, 0);
        assert!(a < b && b < c, "byte order follows the word whatever the random bits");
    }

    #[test]
    fn bounds_bracket_a_millisecond() {
        let (lo, hi) = bounds_at(1_645_557_742_000_123).unwrap();
        let inside = parse("017F22E2-79B0-7CC3-98C4-DC0C0C07398F");
        assert!(lo <= inside && inside <= hi);
        assert_eq!(lo, parse("017F22E2-79B0-7000-8000-000000000000"));
        assert_eq!(hi, parse("017F22E2-79B0-7FFF-BFFF-FFFFFFFFFFFF"));
        assert!(bounds_at(-1).is_none());
        assert!(bounds_at(0).is_some());
        assert!(bounds_at(MAX_UNIX_MS as i64 * 1000 + 999).is_some());
        assert!(bounds_at((MAX_UNIX_MS as i64 + 1) * 1000).is_none());
    }

    #[test]
    fn implausible_shifts() {
        assert!(shift_is_plausible(0, 0, 0));
        assert!(shift_is_plausible(-8_920 * 12, 8_920 * 366, -1));
        assert!(!shift_is_plausible(300_000 * 12, 0, 0));
        assert!(!shift_is_plausible(0, i32::MIN, 0));
        assert!(!shift_is_plausible(0, 0, i64::MIN));
    }

    #[test]
    fn shifting_keeps_the_fraction_and_refuses_to_leave_the_range() {
        let w = 5000 << 12 | 3267;
        assert_eq!(shift_word(w, 0), Some(w));
        assert_eq!(shift_word(w, 1_000 * NS_PER_MS as i128), Some(6000 << 12 | 3267));
        assert_eq!(shift_word(w, -5_000 * NS_PER_MS as i128), Some(3267));
        assert_eq!(shift_word(w, -5_001 * NS_PER_MS as i128), None, "before 1970");
        assert_eq!(shift_word(MAX_UNIX_MS << 12, NS_PER_MS as i128), None, "after 10889");
        // Half a millisecond moves the fraction by half its range.
        assert_eq!(shift_word(5000 << 12, 500_000), Some(5000 << 12 | 2048));
        for frac in 0..4096 {
            assert_eq!(shift_word(7 << 12 | frac, 0), Some(7 << 12 | frac), "fraction {frac} survives");
        }
    }
}
