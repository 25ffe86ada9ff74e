//! Public ids: keyed, reversible forms of snowflake ids and UUIDv7s that show the world nothing
//! of when a row was made, how many rows a shard makes, or where its neighbours are.
//!
//! Both forms are FF1 (NIST SP 800-38G, `super::ff1`) with AES-256, used as an
//! *encode-then-encipher* scheme (Bellare and Rogaway, "Encode-then-encipher encryption",
//! ASIACRYPT 2000): the value is enciphered together with fixed redundancy (zero bits) by a
//! permutation of a larger domain, and the decoder checks the redundancy. A token nobody made
//! with the key deciphers to an essentially random point of the domain, so its redundancy bits
//! are zero only by chance: that is the forger's odds, per try. No separate MAC is needed, and
//! the check compares a whole word at once, in constant time.
//!
//! **Snowflake tokens** ([`snowflake_token`]): 20 Crockford base32 characters (`super::text`'s
//! alphabet, either case on input). The first is the key version (0 to 31), in the clear, so the
//! decoder knows which key to use; the other 19 are 95 bits: FF1 over 95-bit strings (radix 2)
//! of the 63-bit id below 32 zero bits. A forged or altered token passes with odds 2^-32.
//!
//! **UUIDv7 public forms** ([`uuid_to_public`]): a UUID that is a well-formed version 4 (RFC 9562
//! §5.4): version nibble 4, variant `10`, 122 bits that look random to anyone without the key.
//! Those 122 bits are FF1 over 122-bit strings of the UUIDv7's 122 bits (48-bit time, 12-bit
//! fraction, 62 random bits). A UUID has no spare bits: every bit of a v7 must come back, and a
//! v4 has exactly as many. So the only redundancy is the time's top 5 bits, which must be zero:
//! UUIDv7s after 2248-09-26 (2^43 ms) have no public form, and a forged public UUID is refused
//! with odds 31/32; the rest decode to a UUIDv7 that is almost surely not stored (the lookup is
//! the rest of the check). Nor is there room for the key version: [`uuid_from_public`] takes the
//! key, and during a rotation [`uuid_candidates`] gives the decoding under every key.
//!
//! Each key is 32 random bytes from the key file ([`KeyRing::parse`]); the FF1 tweak separates
//! the two forms, the key versions and the caller's context (a tenant, a table), so a token made
//! for one context never decodes in another.

use std::fmt;

use aes::cipher::KeyInit;
use aes::Aes256;
use zeroize::Zeroizing;

use super::ff1::{self, Block16, Domain};
use super::text::{self, TextError};

/// Key versions are one base32 character: 0 to 31.
pub const MAX_VERSION: u8 = 31;
/// Characters of a snowflake token: the version, then 95 bits.
pub const TOKEN_LEN: usize = 20;
/// The longest context a token may be bound to, in bytes.
pub const MAX_CONTEXT_BYTES: usize = 64;
/// The largest key file read, and the longest line in it.
pub const MAX_KEY_FILE_BYTES: usize = 16 * 1024;
pub const MAX_KEY_LINE_BYTES: usize = 256;
/// Zero bits enciphered with a snowflake id: a forgery's odds are 2^-REDUNDANCY_BITS.
pub const TOKEN_REDUNDANCY_BITS: u32 = 32;
/// A UUIDv7's time must fit this many bits (2^43 ms after 1970 is 2248-09-26) to have a public
/// form; the other 5 of its 48 are the public form's redundancy.
pub const UUID_TIME_BITS: u32 = 43;

const TOKEN_DOMAIN: Domain = match Domain::new(2, 63 + TOKEN_REDUNDANCY_BITS) {
    Some(d) => d,
    None => panic!("FF1 serves 95-bit strings"),
};
const UUID_DOMAIN: Domain = match Domain::new(2, 122) {
    Some(d) => d,
    None => panic!("FF1 serves 122-bit strings"),
};
/// The first tweak byte: which form a tweak is for.
const TWEAK_SNOWFLAKE: u8 = b'S';
const TWEAK_UUID: u8 = b'U';
/// Enciphered to make a key's fingerprint (a key check value): 16 bytes no form's FF1 uses.
const FINGERPRINT_BLOCK: &[u8; 16] = b"snowflake_id key";

/// One key: its version and AES-256 under it (whose round keys are zeroed on drop).
pub struct Key {
    version: u8,
    cipher: Aes256,
}

impl Key {
    /// The key of `version` from 32 secret bytes.
    pub fn new(version: u8, secret: &[u8; 32]) -> Key {
        Key { version, cipher: Aes256::new(secret.into()) }
    }

    pub fn version(&self) -> u8 {
        self.version
    }

    /// 8 hex digits that tell keys apart without telling anything of them (AES of a fixed block,
    /// the first 4 bytes: a key check value, as payment systems use), for comparing servers.
    pub fn fingerprint(&self) -> String {
        let mut b = *FINGERPRINT_BLOCK;
        self.cipher.encrypt16(&mut b);
        b[..4].iter().map(|x| format!("{x:02x}")).collect()
    }

    /// The FF1 tweak of a form under this key: the form, the version, the context.
    fn tweak(&self, form: u8, context: &[u8]) -> ([u8; 2 + MAX_CONTEXT_BYTES], usize) {
        let mut t = [0u8; 2 + MAX_CONTEXT_BYTES];
        t[0] = form;
        t[1] = self.version;
        t[2..2 + context.len()].copy_from_slice(context);
        (t, 2 + context.len())
    }
}

/// The keys configured on a server: at most one per version, at most one of them encoding.
pub struct KeyRing {
    /// By version, ascending.
    keys: Vec<Key>,
    encoder: Option<u8>,
}

/// Whether the owner and mode of a key file let the server use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyFileAccess {
    Allowed,
    /// Group or world access beyond what the owner may grant.
    Exposed,
    /// Owned by neither the server's user nor root.
    WrongOwner,
}

/// PostgreSQL's rule for private key files (`check_ssl_key_file_permissions` in be-secure-common.c):
/// owned by the server's user (`euid`) with no group or world access (at most 0600), or owned by
/// root with at most group read (0640), so that a secret store's root-owned file with the
/// server's group can serve. `mode` is `st_mode`, file type bits included.
pub fn key_file_access(uid: u32, euid: u32, mode: u32) -> KeyFileAccess {
    let perms = mode & 0o777;
    if uid == euid {
        if perms & 0o077 == 0 {
            KeyFileAccess::Allowed
        } else {
            KeyFileAccess::Exposed
        }
    } else if uid == 0 {
        // Root's file: group read only, nothing for others.
        if perms & 0o037 == 0 {
            KeyFileAccess::Allowed
        } else {
            KeyFileAccess::Exposed
        }
    } else {
        KeyFileAccess::WrongOwner
    }
}

/// Why the server has no keys to use: what `crate::runtime::keys` found at the key file's path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyFileUnusable {
    /// No file at the path.
    Missing,
    /// It cannot be opened or read: the error's text.
    Io(String),
    /// Not a regular file.
    NotRegular,
    /// Owned by neither the server's user nor root.
    WrongOwner,
    /// Readable (or writable) by others.
    Exposed,
    /// Its contents.
    Invalid(KeyFileError),
}

/// Why a key file cannot be used. Never quotes the file: its lines hold secrets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyFileError {
    TooLarge,
    NotAscii {
        line: usize,
    },
    LineTooLong {
        line: usize,
    },
    /// Not `VERSION HEX` or `VERSION HEX encode`.
    Syntax {
        line: usize,
    },
    BadVersion {
        line: usize,
    },
    /// Not 64 hex digits.
    BadSecret {
        line: usize,
    },
    DuplicateVersion {
        line: usize,
        version: u8,
    },
    SecondEncoder {
        line: usize,
    },
}

impl fmt::Display for KeyFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            KeyFileError::TooLarge => write!(f, "it is larger than {MAX_KEY_FILE_BYTES} bytes"),
            KeyFileError::NotAscii { line } => write!(f, "line {line} is not ASCII"),
            KeyFileError::LineTooLong { line } => write!(f, "line {line} is longer than {MAX_KEY_LINE_BYTES} bytes"),
            KeyFileError::Syntax { line } => {
                write!(f, "line {line} is not of the form \"VERSION HEX\" or \"VERSION HEX encode\"")
            }
            KeyFileError::BadVersion { line } => {
                write!(f, "line {line} has a key version that is not a number from 0 to {MAX_VERSION}")
            }
            KeyFileError::BadSecret { line } => write!(f, "line {line} has a key that is not 64 hexadecimal digits"),
            KeyFileError::DuplicateVersion { line, version } => {
                write!(f, "line {line} repeats key version {version}")
            }
            KeyFileError::SecondEncoder { line } => {
                write!(f, "line {line} marks a second key \"encode\"; only one key may encode")
            }
        }
    }
}

impl KeyRing {
    /// Parses a key file. One key per line, `VERSION HEX [encode]`: a version from 0 to 31, 64
    /// hexadecimal digits (32 random bytes), and `encode` on the one key that makes new tokens.
    /// Blank lines and lines starting with `#` are ignored. The caller zeroes `text` after.
    ///
    /// # Errors
    /// [`KeyFileError`], naming the line but never its content.
    pub fn parse(text: &[u8]) -> Result<KeyRing, KeyFileError> {
        if text.len() > MAX_KEY_FILE_BYTES {
            return Err(KeyFileError::TooLarge);
        }
        // Room for every version up front: a growing vector would free old copies of the round
        // keys without zeroing them.
        let mut ring = KeyRing { keys: Vec::with_capacity(usize::from(MAX_VERSION) + 1), encoder: None };
        for (i, raw) in text.split(|&c| c == b'\n').enumerate() {
            let line = i + 1;
            if raw.len() > MAX_KEY_LINE_BYTES {
                return Err(KeyFileError::LineTooLong { line });
            }
            if !raw.is_ascii() {
                return Err(KeyFileError::NotAscii { line });
            }
            let mut words = raw.split(|c| c.is_ascii_whitespace()).filter(|w| !w.is_empty());
            let Some(first) = words.next() else { continue };
            if first.starts_with(b"#") {
                continue;
            }
            let (Some(hex), marker, None) = (words.next(), words.next(), words.next()) else {
                return Err(KeyFileError::Syntax { line });
            };
            let version = parse_version(first).ok_or(KeyFileError::BadVersion { line })?;
            let encodes = match marker {
                None => false,
                Some(b"encode") => true,
                Some(_) => return Err(KeyFileError::Syntax { line }),
            };
            let secret = parse_secret(hex).ok_or(KeyFileError::BadSecret { line })?;
            let key = Key::new(version, &secret);
            if ring.get(version).is_some() {
                return Err(KeyFileError::DuplicateVersion { line, version });
            }
            if encodes {
                if ring.encoder.is_some() {
                    return Err(KeyFileError::SecondEncoder { line });
                }
                ring.encoder = Some(version);
            }
            let at = ring.keys.partition_point(|k| k.version < version);
            ring.keys.insert(at, key);
        }
        Ok(ring)
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key of `version`, if configured.
    pub fn get(&self, version: u8) -> Option<&Key> {
        self.keys.iter().find(|k| k.version == version)
    }

    /// The key that makes new tokens, if one is marked.
    pub fn encoder(&self) -> Option<&Key> {
        self.encoder.and_then(|v| self.get(v))
    }

    /// Every key: the encoder first, then the others from the newest version down.
    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        self.encoder().into_iter().chain(self.keys.iter().rev().filter(move |k| Some(k.version) != self.encoder))
    }
}

fn parse_version(w: &[u8]) -> Option<u8> {
    if w.is_empty() || w.len() > 2 || !w.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = w.iter().fold(0u8, |acc, d| acc * 10 + (d - b'0'));
    (v <= MAX_VERSION).then_some(v)
}

/// The 32 bytes of 64 hex digits, zeroed when dropped.
fn parse_secret(w: &[u8]) -> Option<Zeroizing<[u8; 32]>> {
    if w.len() != 64 {
        return None;
    }
    let mut out = Zeroizing::new([0u8; 32]);
    for (o, pair) in out.iter_mut().zip(w.chunks_exact(2)) {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        *o = (hi << 4 | lo) as u8;
    }
    Some(out)
}

/// Why a token or public UUID is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenError {
    /// Not a token's text: its length or a character (`TextError`).
    Text(TextError),
    /// Made (if at all) under a key version this server does not have.
    UnknownKey { version: u8 },
    /// Not made by the key: forged, altered, from another context, or from another key that
    /// used the same version.
    NotMadeByKey,
    /// A public UUID must be a version 4 (RFC variant) UUID.
    NotVersion4,
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenError::Text(e) => write!(f, "The text {e}."),
            TokenError::UnknownKey { version } => write!(
                f,
                "It names key version {version}, which is not configured \
                on this server."
            ),
            TokenError::NotMadeByKey => write!(
                f,
                "It was not made by the key it names for this context: it was altered, forged, made for another \
                    context, or made by another key."
            ),
            TokenError::NotVersion4 => write!(f, "A public UUID is a version 4 UUID of the RFC 9562 variant."),
        }
    }
}

/// The token of a snowflake id (`0 <= id`, the caller's invariant) under `key`, bound to
/// `context` (at most [`MAX_CONTEXT_BYTES`], the caller's invariant).
pub fn snowflake_token(key: &Key, id: i64, context: &[u8]) -> [u8; TOKEN_LEN] {
    debug_assert!(id >= 0 && context.len() <= MAX_CONTEXT_BYTES);
    let (tweak, len) = key.tweak(TWEAK_SNOWFLAKE, context);
    // The id in the low 63 bits of a 95-bit string, the redundancy (zeros) above it.
    let c = ff1::encrypt(&key.cipher, &TOKEN_DOMAIN, &tweak[..len], id as u128);
    let mut out = [0u8; TOKEN_LEN];
    out[0] = text::ALPHABET[usize::from(key.version)];
    out[1..].copy_from_slice(&text::encode::<{ TOKEN_LEN - 1 }>(c));
    out
}

/// The key version a token names, or why it is not a token's text.
///
/// # Errors
/// [`TokenError::Text`] for a text of another length or with a character outside the alphabet.
pub fn token_version(token: &[u8]) -> Result<u8, TokenError> {
    if token.len() != TOKEN_LEN {
        return Err(TokenError::Text(TextError::Length { len: token.len(), want: TOKEN_LEN }));
    }
    text::digit(token[0]).ok_or(TokenError::Text(TextError::Character { at: 0 }))
}

/// The snowflake id of a token made under a key of `ring` for `context`.
///
/// # Errors
/// [`TokenError`]: not a token's text, a key version `ring` lacks, or not made by that key for
/// that context (odds 2^-32 that a forgery is not caught).
pub fn snowflake_from_token(ring: &KeyRing, token: &[u8], context: &[u8]) -> Result<i64, TokenError> {
    let version = token_version(token)?;
    // 19 characters are 95 bits: every text of the alphabet is in the domain.
    let c = text::decode::<{ TOKEN_LEN - 1 }>(&token[1..], TOKEN_DOMAIN.size() - 1).map_err(|e| match e {
        TextError::Character { at } => TokenError::Text(TextError::Character { at: at + 1 }),
        other => TokenError::Text(other),
    })?;
    let key = ring.get(version).ok_or(TokenError::UnknownKey { version })?;
    let (tweak, len) = key.tweak(TWEAK_SNOWFLAKE, context);
    let x = ff1::decrypt(&key.cipher, &TOKEN_DOMAIN, &tweak[..len], c);
    // The redundancy: all 32 bits above the id zero, tested as one word.
    if x >> 63 == 0 {
        Ok(x as i64)
    } else {
        Err(TokenError::NotMadeByKey)
    }
}

/// Why a UUID has no public form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UuidError {
    /// Not a version 7 UUID of the RFC 9562 variant.
    NotVersion7,
    /// Its time is at or after 2^43 ms (2248-09-26).
    TooLate,
}

/// The 122 bits of an RFC 9562 UUID that are not its version and variant, in order.
fn payload(u: u128) -> u128 {
    (u >> 80) << 74 | ((u >> 64) & 0xfff) << 62 | (u & ((1 << 62) - 1))
}

/// The UUID of version `version` and the RFC variant that carries `payload`'s 122 bits.
fn with_payload(p: u128, version: u128) -> u128 {
    (p >> 74) << 80 | version << 76 | ((p >> 62) & 0xfff) << 64 | 0b10 << 62 | (p & ((1 << 62) - 1))
}

fn version_of(u: u128) -> Option<u128> {
    // The variant is the top two bits of byte 8 (RFC 9562 §4.1); the version the top nibble of byte 6.
    ((u >> 62) & 0b11 == 0b10).then_some((u >> 76) & 0xf)
}

/// The public form of a UUIDv7 under `key`, bound to `context` (at most [`MAX_CONTEXT_BYTES`]).
///
/// # Errors
/// [`UuidError`]: not a UUIDv7, or one whose time does not leave the 5 bits of redundancy.
pub fn uuid_to_public(key: &Key, uuid: &[u8; 16], context: &[u8]) -> Result<[u8; 16], UuidError> {
    let u = u128::from_be_bytes(*uuid);
    if version_of(u) != Some(7) {
        return Err(UuidError::NotVersion7);
    }
    let p = payload(u);
    // The time is the payload's top 48 bits; its top 5 must be zero.
    if p >> (74 + UUID_TIME_BITS) != 0 {
        return Err(UuidError::TooLate);
    }
    let (tweak, len) = key.tweak(TWEAK_UUID, context);
    let c = ff1::encrypt(&key.cipher, &UUID_DOMAIN, &tweak[..len], p);
    Ok(with_payload(c, 4).to_be_bytes())
}

/// The UUIDv7 whose public form under `key` for `context` is `public`.
///
/// # Errors
/// [`TokenError::NotVersion4`] for a UUID no public form can be, [`TokenError::NotMadeByKey`]
/// when the redundancy fails (31 of 32 forgeries).
pub fn uuid_from_public(key: &Key, public: &[u8; 16], context: &[u8]) -> Result<[u8; 16], TokenError> {
    let u = u128::from_be_bytes(*public);
    if version_of(u) != Some(4) {
        return Err(TokenError::NotVersion4);
    }
    let (tweak, len) = key.tweak(TWEAK_UUID, context);
    let p = ff1::decrypt(&key.cipher, &UUID_DOMAIN, &tweak[..len], payload(u));
    if p >> (74 + UUID_TIME_BITS) == 0 {
        Ok(with_payload(p, 7).to_be_bytes())
    } else {
        Err(TokenError::NotMadeByKey)
    }
}

/// Every UUIDv7 `public` may be the public form of under the keys of `ring`, the encoder's
/// first: for lookups during a key rotation (`WHERE id = ANY (...)`), where the table tells
/// which one is real.
///
/// # Errors
/// [`TokenError::NotVersion4`] for a UUID no public form can be.
pub fn uuid_candidates(ring: &KeyRing, public: &[u8; 16], context: &[u8]) -> Result<Vec<[u8; 16]>, TokenError> {
    let mut out = Vec::with_capacity(ring.keys.len());
    for key in ring.keys() {
        match uuid_from_public(key, public, context) {
            Ok(u) => out.push(u),
            Err(TokenError::NotMadeByKey) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    const HEX_A: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const HEX_B: &str = "f0e1d2c3b4a5968778695a4b3c2d1e0ff0e1d2c3b4a5968778695a4b3c2d1e0f";

    fn ring(text: &str) -> KeyRing {
        KeyRing::parse(text.as_bytes()).unwrap()
    }

    fn one_key() -> KeyRing {
        ring(&format!("3 {HEX_A} encode\n"))
    }

    /// splitmix64: a fixed pseudo-random stream for the forgery counts.
    fn stream(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
    }

    fn uuidv7(ms: u64, frac: u16, tail: u64) -> [u8; 16] {
        crate::core::uuidv7::encode(ms << 12 | u64::from(frac & 0xfff), tail)
    }

    #[test]
    fn key_file_syntax() {
        let r = ring(&format!("# keys\n\n 1 {HEX_A}\n\t2   {}  encode  \n", HEX_B.to_uppercase()));
        assert_eq!(r.keys().map(Key::version).collect::<Vec<_>>(), vec![2, 1], "the encoder first");
        assert_eq!(r.encoder().map(Key::version), Some(2));
        assert!(ring("").is_empty() && ring("# nothing\n").is_empty());
        assert_eq!(ring(&format!("7 {HEX_A}")).encoder().map(Key::version), None, "decode only");
        let err = |t: String| KeyRing::parse(t.as_bytes()).err();
        assert_eq!(err(format!("1 {HEX_A} enc")), Some(KeyFileError::Syntax { line: 1 }));
        assert_eq!(err(format!("\n1 {HEX_A} encode x")), Some(KeyFileError::Syntax { line: 2 }));
        assert_eq!(err("1".to_owned()), Some(KeyFileError::Syntax { line: 1 }));
        assert_eq!(err(format!("32 {HEX_A}")), Some(KeyFileError::BadVersion { line: 1 }));
        assert_eq!(err(format!("-1 {HEX_A}")), Some(KeyFileError::BadVersion { line: 1 }));
        assert_eq!(err(format!("001 {HEX_A}")), Some(KeyFileError::BadVersion { line: 1 }));
        assert_eq!(err(format!("1 {}", &HEX_A[1..])), Some(KeyFileError::BadSecret { line: 1 }));
        assert_eq!(err(format!("1 {}g", &HEX_A[1..])), Some(KeyFileError::BadSecret { line: 1 }));
        assert_eq!(err(format!("1 {HEX_A}\n1 {HEX_B}")), Some(KeyFileError::DuplicateVersion { line: 2, version: 1 }));
        assert_eq!(err(format!("1 {HEX_A} encode\n2 {HEX_B} encode")), Some(KeyFileError::SecondEncoder { line: 2 }));
        assert_eq!(err(format!("1 {HEX_A} \u{e9}")), Some(KeyFileError::NotAscii { line: 1 }));
        assert_eq!(err(format!("# {}", "x".repeat(300))), Some(KeyFileError::LineTooLong { line: 1 }));
        assert_eq!(err("\n".repeat(MAX_KEY_FILE_BYTES + 1)), Some(KeyFileError::TooLarge));
    }

    #[test]
    fn key_file_access_is_postgresqls_rule_for_private_keys() {
        use KeyFileAccess::*;
        const REG: u32 = 0o100_000; // S_IFREG: st_mode carries the file type too
        let pg = 999;
        for (uid, mode, want) in [
            (pg, 0o600, Allowed),
            (pg, 0o400, Allowed),
            (pg, 0o640, Exposed),
            (pg, 0o604, Exposed),
            (pg, 0o644, Exposed),
            (pg, 0o660, Exposed),
            (pg, 0o700, Allowed),
            (pg, 0o610, Exposed),
            (0, 0o600, Allowed),
            (0, 0o640, Allowed),
            (0, 0o644, Exposed),
            (0, 0o660, Exposed),
            (0, 0o650, Exposed),
            (65534, 0o600, WrongOwner),
            (65534, 0o644, WrongOwner),
        ] {
            assert_eq!(key_file_access(uid, pg, REG | mode), want, "uid {uid} mode {mode:o}");
        }
    }

    #[test]
    fn errors_never_quote_the_file() {
        for bad in [format!("1 {HEX_A}x"), format!("1 {HEX_A} {HEX_B}"), format!("99 {HEX_A}")] {
            let e = KeyRing::parse(bad.as_bytes()).err().unwrap().to_string();
            assert!(!e.contains(&HEX_A[..8]) && !e.contains(&HEX_B[..8]), "{e}");
        }
    }

    #[test]
    fn fingerprints_tell_keys_apart() {
        let r = ring(&format!("1 {HEX_A}\n2 {HEX_B}\n3 {HEX_A}"));
        let f: Vec<String> = r.keys().map(Key::fingerprint).collect();
        assert_eq!(f.len(), 3);
        assert_eq!(f[0].len(), 8);
        assert_eq!(f[0], f[2], "the same secret under two versions");
        assert_ne!(f[0], f[1]);
    }

    /// Known answers, the same as pg_test/expected/public_ids.out's (and, for the UUID under key
    /// 1, computed by an independent FF1 in Python during review).
    #[test]
    fn known_answers() {
        let r = ring(&format!("1 {HEX_A} encode"));
        let k = r.encoder().unwrap();
        for (id, token) in [
            (0, "1R0C92F204YBBEK5Q8JD"),
            (1, "1NMSN1GXNZKZS1FYCJ27"),
            (i64::MAX, "1T3Y32TKP81ANT3MG024"),
            (252_969_121_090_637_507, "193AEE1MKXN1XP4BAED6"),
        ] {
            assert_eq!(&snowflake_token(k, id, b""), token.as_bytes(), "{id}");
        }
        assert_eq!(&snowflake_token(k, 42, b"tenant-a"), b"1FN204MGVWKRPCXM0GTG");
        let rfc: [u8; 16] =
            [0x01, 0x7f, 0x22, 0xe2, 0x79, 0xb0, 0x7c, 0xc3, 0x98, 0xc4, 0xdc, 0x0c, 0x0c, 0x07, 0x39, 0x8f];
        let hex = |u: [u8; 16]| u.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(hex(uuid_to_public(k, &rfc, b"").unwrap()), "87e8bdc86bb34795944fc25d1aaec76a");
        let r2 = ring(&format!("2 {HEX_B} encode"));
        assert_eq!(hex(uuid_to_public(r2.encoder().unwrap(), &rfc, b"").unwrap()), "a7cd6cb4d2c64293af42bd603c03242f");
        assert_eq!(&snowflake_token(r2.encoder().unwrap(), 252_969_121_090_637_507, b""), b"2DPJ9WPD0QWC593MXBC1");
    }

    #[test]
    fn snowflake_token_edges() {
        let r = one_key();
        let k = r.encoder().unwrap();
        for id in [0, 1, i64::MAX, i64::MAX - 1, 1 << 62] {
            let t = snowflake_token(k, id, b"");
            assert_eq!(t[0], b'3');
            assert!(t.iter().all(|c| text::ALPHABET.contains(c)));
            assert_eq!(snowflake_from_token(&r, &t, b""), Ok(id));
            assert_eq!(snowflake_from_token(&r, &t.to_ascii_lowercase(), b""), Ok(id), "either case");
        }
        // The key-version boundaries: 0 and 31 are the first character's extremes.
        for v in [0, MAX_VERSION] {
            let r = ring(&format!("{v} {HEX_B} encode"));
            let t = snowflake_token(r.encoder().unwrap(), 42, b"");
            assert_eq!(t[0], text::ALPHABET[usize::from(v)]);
            assert_eq!(snowflake_from_token(&r, &t, b""), Ok(42));
        }
    }

    #[test]
    fn tokens_hide_order_and_neighbours() {
        let r = one_key();
        let k = r.encoder().unwrap();
        let ts: Vec<[u8; TOKEN_LEN]> = (1000..1064).map(|id| snowflake_token(k, id, b"")).collect();
        // Neighbouring ids: tokens in no order, sharing no prefix beyond the version.
        let ordered = ts.windows(2).filter(|w| w[0] < w[1]).count();
        assert!((16..48).contains(&ordered), "{ordered} of 63 pairs in order");
        let same_second = ts.windows(2).filter(|w| w[0][1] == w[1][1]).count();
        assert!(same_second < 12, "{same_second}");
    }

    #[test]
    fn tampering_is_refused() {
        let r = one_key();
        let t = snowflake_token(r.encoder().unwrap(), 252_969_121_090_637_507, b"");
        // Every single-character change of the 19 enciphered characters.
        for at in 1..TOKEN_LEN {
            for &c in text::ALPHABET {
                if c == t[at] {
                    continue;
                }
                let mut bad = t;
                bad[at] = c;
                assert_eq!(snowflake_from_token(&r, &bad, b""), Err(TokenError::NotMadeByKey), "{at}");
            }
        }
        assert_eq!(
            snowflake_from_token(&r, &t[..19], b""),
            Err(TokenError::Text(TextError::Length { len: 19, want: 20 }))
        );
        let mut other_version = t;
        other_version[0] = b'4';
        assert_eq!(snowflake_from_token(&r, &other_version, b""), Err(TokenError::UnknownKey { version: 4 }));
        let mut bad_char = t;
        bad_char[7] = b'U';
        assert_eq!(snowflake_from_token(&r, &bad_char, b""), Err(TokenError::Text(TextError::Character { at: 7 })));
        // The same version under another secret: another key, refused.
        let other = ring(&format!("3 {HEX_B} encode"));
        assert_eq!(snowflake_from_token(&other, &t, b""), Err(TokenError::NotMadeByKey));
        // Another context, of another length or the same one.
        assert_eq!(snowflake_from_token(&r, &t, b"tenant 2"), Err(TokenError::NotMadeByKey));
        let for_a = snowflake_token(r.encoder().unwrap(), 42, b"tenant-a");
        assert_eq!(snowflake_from_token(&r, &for_a, b"tenant-a"), Ok(42));
        assert_eq!(snowflake_from_token(&r, &for_a, b"tenant-b"), Err(TokenError::NotMadeByKey));
    }

    #[test]
    fn forgeries_pass_at_the_stated_odds() {
        // Random texts under the key: none of 200,000 passes (expected 200,000 / 2^32 = 0.00005).
        let r = one_key();
        let mut next = stream(7);
        let mut passed = 0;
        for _ in 0..200_000 {
            let mut t = [0u8; TOKEN_LEN];
            t[0] = b'3';
            for c in t[1..].iter_mut() {
                *c = text::ALPHABET[(next() % 32) as usize];
            }
            passed += usize::from(snowflake_from_token(&r, &t, b"").is_ok());
        }
        assert_eq!(passed, 0);
        // With the redundancy cut to 8 bits (a mutation of the check), random texts would pass
        // about once in 256: the check is what refuses them.
        let k = r.encoder().unwrap();
        let (tweak, len) = k.tweak(TWEAK_SNOWFLAKE, b"");
        let weak = (0..20_000u128)
            .filter(|&c| ff1::decrypt(&k.cipher, &TOKEN_DOMAIN, &tweak[..len], c * 0x9e37_79b9_7f4a) >> 87 == 0)
            .count();
        assert!((30..130).contains(&weak), "{weak}");
    }

    #[test]
    fn rotation() {
        let old = ring(&format!("1 {HEX_A} encode"));
        let t_old = snowflake_token(old.encoder().unwrap(), 99, b"");
        let both = ring(&format!("1 {HEX_A}\n2 {HEX_B} encode"));
        let t_new = snowflake_token(both.encoder().unwrap(), 99, b"");
        assert_ne!(t_old, t_new);
        assert_eq!(snowflake_from_token(&both, &t_old, b""), Ok(99), "the old key still decodes");
        assert_eq!(snowflake_from_token(&both, &t_new, b""), Ok(99));
        let new_only = ring(&format!("2 {HEX_B} encode"));
        assert_eq!(snowflake_from_token(&new_only, &t_old, b""), Err(TokenError::UnknownKey { version: 1 }));
        assert_eq!(snowflake_from_token(&new_only, &t_new, b""), Ok(99));
    }

    #[test]
    fn distinct_ids_distinct_tokens() {
        let r = one_key();
        let k = r.encoder().unwrap();
        // A dense run of ids from one millisecond and shard, and a sparse one across the range.
        let ids = (0..50_000i64).map(|s| (1 << 40) + s).chain((0..50_000i64).map(|i| i * (i64::MAX / 50_000)));
        let mut seen = HashSet::new();
        for id in ids {
            assert!(seen.insert(snowflake_token(k, id, b"")), "{id}");
        }
    }

    #[test]
    fn public_uuids_are_version_4_and_map_back() {
        let r = one_key();
        let k = r.encoder().unwrap();
        let rfc: [u8; 16] =
            [0x01, 0x7f, 0x22, 0xe2, 0x79, 0xb0, 0x7c, 0xc3, 0x98, 0xc4, 0xdc, 0x0c, 0x0c, 0x07, 0x39, 0x8f];
        let p = uuid_to_public(k, &rfc, b"").unwrap();
        assert_eq!(p[6] >> 4, 4, "version 4");
        assert_eq!(p[8] >> 6, 0b10, "RFC variant");
        assert_eq!(uuid_from_public(k, &p, b""), Ok(rfc));
        assert_ne!(uuid_from_public(k, &p, b"other"), Ok(rfc));
        // The edges of the time the form covers.
        let last = (1u64 << UUID_TIME_BITS) - 1;
        for u in [uuidv7(0, 0, 0), uuidv7(last, 0xfff, u64::MAX), uuidv7(1_800_000_000_000, 5, 6)] {
            assert_eq!(uuid_from_public(k, &uuid_to_public(k, &u, b"t").unwrap(), b"t"), Ok(u));
        }
        assert_eq!(uuid_to_public(k, &uuidv7(last + 1, 0, 0), b""), Err(UuidError::TooLate));
        let mut v4 = rfc;
        v4[6] = 0x4c;
        assert_eq!(uuid_to_public(k, &v4, b""), Err(UuidError::NotVersion7));
        assert_eq!(uuid_from_public(k, &rfc, b""), Err(TokenError::NotVersion4), "a v7 is no public form");
        assert_eq!(uuid_from_public(k, &[0; 16], b""), Err(TokenError::NotVersion4));
    }

    #[test]
    fn forged_public_uuids_are_mostly_refused() {
        let r = one_key();
        let k = r.encoder().unwrap();
        let mut next = stream(9);
        let n = 64_000;
        let passed = (0..n)
            .filter(|_| {
                let raw = (u128::from(next()) << 64) | u128::from(next());
                uuid_from_public(k, &with_payload(payload(raw), 4).to_be_bytes(), b"").is_ok()
            })
            .count();
        // 1 in 32 expected: 2,000.
        assert!((1_700..2_300).contains(&passed), "{passed}");
    }

    #[test]
    fn candidates_during_a_rotation() {
        let both = ring(&format!("1 {HEX_A}\n2 {HEX_B} encode"));
        let (k1, k2) = (both.get(1).unwrap(), both.get(2).unwrap());
        let mut found_old = 0;
        for i in 0..2_000u64 {
            let u = uuidv7(1_700_000_000_000 + i, 0, i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let old = uuid_to_public(k1, &u, b"").unwrap();
            let c = uuid_candidates(&both, &old, b"").unwrap();
            assert!(c.contains(&u) && c.len() <= 2);
            assert_eq!(uuid_candidates(&both, &uuid_to_public(k2, &u, b"").unwrap(), b"").unwrap()[0], u);
            found_old += usize::from(c[0] != u);
        }
        // The encoder's decoding of an old form passes its check 1 time in 32, ahead of the true one.
        assert!((20..110).contains(&found_old), "{found_old}");
    }

    proptest! {
        #[test]
        fn snowflake_round_trip(
            id in 0..=i64::MAX,
            context in proptest::collection::vec(any::<u8>(), 0..=MAX_CONTEXT_BYTES),
        ) {
            let r = one_key();
            let t = snowflake_token(r.encoder().unwrap(), id, &context);
            prop_assert_eq!(snowflake_from_token(&r, &t, &context), Ok(id));
        }

        #[test]
        fn distinct_ids_never_share_a_token(a in 0..=i64::MAX, b in 0..=i64::MAX) {
            let r = one_key();
            let k = r.encoder().unwrap();
            prop_assert_eq!(a == b, snowflake_token(k, a, b"") == snowflake_token(k, b, b""));
        }

        #[test]
        fn uuid_round_trip(ms in 0u64..(1 << UUID_TIME_BITS), frac in any::<u16>(), tail in any::<u64>(),
                           context in proptest::collection::vec(any::<u8>(), 0..=MAX_CONTEXT_BYTES)) {
            let r = one_key();
            let k = r.encoder().unwrap();
            let u = uuidv7(ms, frac, tail);
            let p = uuid_to_public(k, &u, &context).unwrap();
            prop_assert_eq!(version_of(u128::from_be_bytes(p)), Some(4));
            prop_assert_eq!(uuid_from_public(k, &p, &context), Ok(u));
        }

        #[test]
        fn tokens_decode_in_any_case(id in 0..=i64::MAX, flips in any::<u32>()) {
            let r = one_key();
            let mut t = snowflake_token(r.encoder().unwrap(), id, b"");
            for (i, c) in t.iter_mut().enumerate() {
                if flips >> i & 1 == 1 {
                    *c = c.to_ascii_lowercase();
                }
            }
            prop_assert_eq!(snowflake_from_token(&r, &t, b""), Ok(id));
        }

        #[test]
        fn any_text_decodes_or_refuses(bytes in proptest::collection::vec(any::<u8>(), 0..30)) {
            let r = one_key();
            if let Ok(id) = snowflake_from_token(&r, &bytes, b"") {
                prop_assert_eq!(snowflake_token(r.encoder().unwrap(), id, b"").to_vec(), bytes.to_ascii_uppercase());
            }
        }
    }
}
