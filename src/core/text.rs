//! Key-free text forms: Crockford base32 of fixed width, which sorts like the value it encodes.
//!
//! - A snowflake id (63 bits) is 13 characters; a UUID (128 bits) is 26, the ULID text form, so
//!   that a UUIDv7 reads as the ULID of the same time and bits (the ulid and TypeID ecosystem).
//! - The alphabet `0123456789ABCDEFGHJKMNPQRSTVWXYZ` is in ASCII order, and the width is fixed,
//!   so comparing two texts byte by byte compares the values.
//! - Decoding is strict: exactly the width, only alphabet characters (either case), and a first
//!   character small enough that the value fits (`7` at most for both widths). Crockford's
//!   aliases (`I`, `L` for 1, `O` for 0), hyphens and blanks are refused rather than guessed at,
//!   so that each value has one text, up to case. Nothing here allocates.
//!
//! The SQL surface is `crate::api::text`.

use std::fmt;

/// Crockford's base32 alphabet, in ascending ASCII order.
pub const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// Characters of a snowflake id's text (63 bits in 13 × 5).
pub const SNOWFLAKE_LEN: usize = 13;
/// Characters of a ULID (128 bits in 26 × 5).
pub const ULID_LEN: usize = 26;

/// Why a text is not a value's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextError {
    /// Not exactly the width.
    Length { len: usize, want: usize },
    /// A character outside the alphabet, at a byte position.
    Character { at: usize },
    /// The first character makes the value too large for its type.
    Overflow,
}

impl fmt::Display for TextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TextError::Length { len, want } => write!(f, "is {len} bytes long, not {want}"),
            TextError::Character { at } => {
                write!(f, "has a character outside Crockford's base32 alphabet at position {}", at + 1)
            }
            TextError::Overflow => write!(f, "is larger than the largest value of its type"),
        }
    }
}

/// The value of one character, either case; `None` outside the alphabet (and for the aliases).
pub const fn digit(c: u8) -> Option<u8> {
    let c = c.to_ascii_uppercase();
    let mut i = 0;
    while i < ALPHABET.len() {
        if ALPHABET[i] == c {
            return Some(i as u8);
        }
        i += 1;
    }
    None
}

/// The N characters of `value`, most significant first, 5 bits each.
pub fn encode<const N: usize>(mut value: u128) -> [u8; N] {
    let mut out = [b'0'; N];
    for slot in out.iter_mut().rev() {
        *slot = ALPHABET[(value & 31) as usize];
        value >>= 5;
    }
    out
}

/// The value of an N-character text whose value must stay within `max`.
///
/// # Errors
/// [`TextError`] for another length, a character outside the alphabet, or a value past `max`.
pub fn decode<const N: usize>(text: &[u8], max: u128) -> Result<u128, TextError> {
    if text.len() != N {
        return Err(TextError::Length { len: text.len(), want: N });
    }
    let mut value: u128 = 0;
    for (at, &c) in text.iter().enumerate() {
        let d = digit(c).ok_or(TextError::Character { at })?;
        // N * 5 may exceed 128 bits (130 for a ULID): a value that would lose bits to the shift
        // is already too large.
        if value > (u128::MAX >> 5) {
            return Err(TextError::Overflow);
        }
        value = (value << 5) | u128::from(d);
    }
    if value > max {
        return Err(TextError::Overflow);
    }
    Ok(value)
}

/// The 13-character text of a non-negative snowflake id. `None` for a negative one.
pub fn snowflake_to_text(id: i64) -> Option<[u8; SNOWFLAKE_LEN]> {
    u64::try_from(id).ok().map(|v| encode::<SNOWFLAKE_LEN>(u128::from(v)))
}

/// The snowflake id of a 13-character text.
///
/// # Errors
/// [`TextError`] for a text of another length, a character outside the alphabet, or a value
/// beyond `i64::MAX`.
pub fn snowflake_from_text(text: &[u8]) -> Result<i64, TextError> {
    decode::<SNOWFLAKE_LEN>(text, i64::MAX as u128).map(|v| v as i64)
}

/// The ULID text of a UUID's 16 bytes.
pub fn uuid_to_ulid(uuid: &[u8; 16]) -> [u8; ULID_LEN] {
    encode::<ULID_LEN>(u128::from_be_bytes(*uuid))
}

/// The 16 bytes of a ULID text.
///
/// # Errors
/// [`TextError`] for a text of another length, a character outside the alphabet, or a first
/// character above `7` (a value beyond 128 bits).
pub fn ulid_to_uuid(text: &[u8]) -> Result<[u8; 16], TextError> {
    decode::<ULID_LEN>(text, u128::MAX).map(u128::to_be_bytes)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_alphabet_is_in_ascii_order_without_the_ambiguous_letters() {
        assert!(ALPHABET.windows(2).all(|w| w[0] < w[1]));
        for c in [b'I', b'L', b'O', b'U', b'i', b'l', b'o', b'u', b'-', b' '] {
            assert_eq!(digit(c), None, "{}", c as char);
        }
    }

    #[test]
    fn snowflake_edges() {
        assert_eq!(&snowflake_to_text(0).unwrap(), b"0000000000000");
        assert_eq!(&snowflake_to_text(i64::MAX).unwrap(), b"7ZZZZZZZZZZZZ");
        assert_eq!(snowflake_to_text(-1), None);
        assert_eq!(snowflake_from_text(b"7ZZZZZZZZZZZZ"), Ok(i64::MAX));
        assert_eq!(snowflake_from_text(b"7zzzzzzzzzzzz"), Ok(i64::MAX), "either case");
        assert_eq!(snowflake_from_text(b"8000000000000"), Err(TextError::Overflow));
        assert_eq!(snowflake_from_text(b"ZZZZZZZZZZZZZ"), Err(TextError::Overflow));
        assert_eq!(snowflake_from_text(b"000000000000"), Err(TextError::Length { len: 12, want: 13 }));
        assert_eq!(snowflake_from_text(b"00000000000000"), Err(TextError::Length { len: 14, want: 13 }));
        assert_eq!(snowflake_from_text(b"00000O0000000"), Err(TextError::Character { at: 5 }));
        assert_eq!(snowflake_from_text("000000000000\u{e9}".as_bytes()), Err(TextError::Length { len: 14, want: 13 }));
    }

    #[test]
    fn ulid_spec_vectors() {
        // The ULID specification's largest value, and a UUIDv7 from RFC 9562 (appendix A.6)
        // whose ULID text was computed independently (Python: base32 of the 128-bit integer).
        assert_eq!(ulid_to_uuid(b"7ZZZZZZZZZZZZZZZZZZZZZZZZZ"), Ok([0xff; 16]));
        assert_eq!(ulid_to_uuid(b"80000000000000000000000000"), Err(TextError::Overflow));
        let rfc: [u8; 16] =
            [0x01, 0x7f, 0x22, 0xe2, 0x79, 0xb0, 0x7c, 0xc3, 0x98, 0xc4, 0xdc, 0x0c, 0x0c, 0x07, 0x39, 0x8f];
        assert_eq!(&uuid_to_ulid(&rfc), b"01FWHE4YDGFK1SHH6W1G60EECF");
        assert_eq!(ulid_to_uuid(b"01fwhe4ydgfk1shh6w1g60eecf"), Ok(rfc));
    }

    proptest! {
        #[test]
        fn snowflake_round_trip_and_order(a in 0..=i64::MAX, b in 0..=i64::MAX) {
            let (ta, tb) = (snowflake_to_text(a).unwrap(), snowflake_to_text(b).unwrap());
            prop_assert_eq!(snowflake_from_text(&ta), Ok(a));
            prop_assert_eq!(a.cmp(&b), ta.cmp(&tb));
        }

        #[test]
        fn ulid_round_trip_and_order(a in any::<[u8; 16]>(), b in any::<[u8; 16]>()) {
            let (ta, tb) = (uuid_to_ulid(&a), uuid_to_ulid(&b));
            prop_assert_eq!(ulid_to_uuid(&ta), Ok(a));
            prop_assert_eq!(a.cmp(&b), ta.cmp(&tb));
        }

        #[test]
        fn any_bytes_decode_or_refuse(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            // Never panics; whatever decodes encodes back to the same text, up to case.
            if let Ok(v) = snowflake_from_text(&bytes) {
                prop_assert_eq!(snowflake_to_text(v).unwrap().to_vec(), bytes.to_ascii_uppercase());
            }
            if let Ok(u) = ulid_to_uuid(&bytes) {
                prop_assert_eq!(uuid_to_ulid(&u).to_vec(), bytes.to_ascii_uppercase());
            }
        }
    }
}
