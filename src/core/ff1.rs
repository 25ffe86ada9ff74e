//! FF1, the format-preserving block cipher of NIST SP 800-38G (§5.1, Algorithms 7 and 8), for
//! numeral strings whose value fits in 128 bits.
//!
//! This is the standard construction, not a new one: a ten-round Feistel network whose round
//! function is AES in CBC-MAC mode over a fixed header `P` and a block `Q` that carries the tweak,
//! the round number and one half of the input. The code follows the specification's steps and
//! names (`u`, `v`, `b`, `d`, `P`, `Q`, `y`, `m`, `c`); the NIST sample vectors (FF1samples.pdf,
//! samples 1 to 9, with AES-128, -192 and -256, radix 10 and 36, with and without tweaks) and
//! Zcash's binary vectors are its tests.
//!
//! What is particular here:
//! - A numeral string is carried as its value (`NUM_radix`, most significant digit first), a
//!   `u128`. So `radix^n` must stay below 2^128, and `b` (the bytes of `NUM_radix` of the longer
//!   half) at most 12, which keeps `d` at most 16: one AES output per round (step 6.iii needs no
//!   extra blocks). [`Domain::new`] refuses anything else.
//! - The tweak is absorbed into the CBC-MAC once per call, not once per round: `Q`'s blocks before
//!   its last one hold only tweak bytes and zero padding, so each round costs one AES call.
//! - Nothing allocates, and for a radix that is a power of two (the only ones the extension
//!   uses) the arithmetic is shifts, masks and additions, with no branch or division that depends
//!   on the data.
//!
//! The block cipher comes from the `aes` crate (AES-NI where the CPU has it, else a bitsliced
//! constant-time implementation).

use aes::cipher::{Array, BlockCipherEncrypt};

/// The NIST minimum for `radix^minlen` (SP 800-38G §5.2): smaller domains are refused.
const MIN_DOMAIN: u128 = 1_000_000;
/// FF1 has ten rounds (§5.1).
const ROUNDS: u8 = 10;

/// A block cipher with 16-byte blocks: AES under one key.
pub trait Block16 {
    fn encrypt16(&self, block: &mut [u8; 16]);
}

impl<C: BlockCipherEncrypt<BlockSize = aes::cipher::consts::U16>> Block16 for C {
    fn encrypt16(&self, block: &mut [u8; 16]) {
        let b: &mut Array<u8, aes::cipher::consts::U16> = block.into();
        self.encrypt_block(b);
    }
}

/// A message space: numeral strings of `n` digits in `radix`, with the constants FF1 derives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Domain {
    radix: u32,
    n: u32,
    u: u32,
    v: u32,
    /// Bytes of `NUM_radix` of a `v`-digit half in `Q` (step 3).
    b: usize,
    /// Bytes of the round output used as `y` (step 4).
    d: usize,
    /// `radix^u` and `radix^v`: the two halves' moduli.
    pow_u: u128,
    pow_v: u128,
}

impl Domain {
    /// The domain of `n`-digit strings in `radix`, if FF1 over a `u128` can serve it.
    pub const fn new(radix: u32, n: u32) -> Option<Domain> {
        if radix < 2 || radix > 65_536 || n < 2 {
            return None;
        }
        let u = n / 2;
        let v = n - u;
        let (Some(pow_u), Some(pow_v)) = (pow(radix, u), pow(radix, v)) else { return None };
        // radix^n = radix^u * radix^v must fit, and reach NIST's minimum.
        let Some(total) = pow_u.checked_mul(pow_v) else { return None };
        if total < MIN_DOMAIN {
            return None;
        }
        // Step 3: b = ceil(ceil(v * log2(radix)) / 8). ceil(v * log2(radix)) is the smallest k with
        // 2^k >= radix^v: the bit length of radix^v - 1.
        let bits = 128 - (pow_v - 1).leading_zeros();
        let b = bits.div_ceil(8) as usize;
        // Step 4: d = 4 * ceil(b / 4) + 4.
        let d = 4 * b.div_ceil(4) + 4;
        if d > 16 {
            return None;
        }
        Some(Domain { radix, n, u, v, b, d, pow_u, pow_v })
    }

    /// `radix^n`: every value below it is in the domain.
    pub const fn size(&self) -> u128 {
        self.pow_u * self.pow_v
    }
}

/// `radix^e`, if it fits.
const fn pow(radix: u32, e: u32) -> Option<u128> {
    let mut acc: u128 = 1;
    let mut i = 0;
    while i < e {
        acc = match acc.checked_mul(radix as u128) {
            Some(x) => x,
            None => return None,
        };
        i += 1;
    }
    Some(acc)
}

/// `x mod m`: a mask when `m` is a power of two (the modulus is public; the value is not).
#[inline]
fn reduce(x: u128, m: u128) -> u128 {
    if m.is_power_of_two() {
        x & (m - 1)
    } else {
        x % m
    }
}

impl Domain {
    /// Step 2: the halves of a value, `A = X[1..u]` (the high digits) and `B = X[u+1..n]`. A shift
    /// and a mask when `radix^v` is a power of two: a `u128` division is a library call whose time
    /// depends on its operands.
    #[inline]
    fn split(&self, x: u128) -> (u128, u128) {
        if self.pow_v.is_power_of_two() {
            (x >> self.pow_v.trailing_zeros(), x & (self.pow_v - 1))
        } else {
            (x / self.pow_v, x % self.pow_v)
        }
    }

    /// `A ‖ B` as a value: the inverse of [`Domain::split`].
    #[inline]
    fn join(&self, a: u128, b: u128) -> u128 {
        if self.pow_v.is_power_of_two() {
            a << self.pow_v.trailing_zeros() | b
        } else {
            a * self.pow_v + b
        }
    }
}

/// The CBC-MAC of `P ‖ Q` up to `Q`'s last block, which is the same in every round of a call.
struct RoundFunction<'a, C: Block16> {
    cipher: &'a C,
    domain: &'a Domain,
    /// The CBC-MAC state after every full block before `Q`'s last.
    state: [u8; 16],
    /// The first `15 - b` bytes of `Q`'s last block (tweak bytes or zeros); then `[i]` and
    /// `[NUM_radix(half)]^b` fill it.
    last: [u8; 16],
}

impl<'a, C: Block16> RoundFunction<'a, C> {
    fn new(cipher: &'a C, domain: &'a Domain, tweak: &[u8]) -> Self {
        let t = tweak.len();
        // Step 5: P = [1]^1 [2]^1 [1]^1 [radix]^3 [10]^1 [u mod 256]^1 [n]^4 [t]^4.
        let r = domain.radix.to_be_bytes();
        let n = domain.n.to_be_bytes();
        let tl = (t as u32).to_be_bytes();
        let mut state =
            [1, 2, 1, r[1], r[2], r[3], 10, (domain.u % 256) as u8, n[0], n[1], n[2], n[3], tl[0], tl[1], tl[2], tl[3]];
        cipher.encrypt16(&mut state);
        // Step 6.i: Q = T ‖ [0]^((-t-b-1) mod 16) ‖ [i]^1 ‖ [NUM_radix(B)]^b. Absorb T and the
        // padding block by block; what is left (15 - b bytes, since Q is whole blocks and its tail
        // is b + 1 bytes) starts the last block.
        let pad = (16 - (t + domain.b + 1) % 16) % 16;
        let prefix = t + pad;
        let mut last = [0u8; 16];
        let mut filled = 0;
        for byte in tweak.iter().copied().chain(std::iter::repeat(0)).take(prefix) {
            last[filled] = byte;
            filled += 1;
            if filled == 16 {
                for (s, q) in state.iter_mut().zip(last.iter()) {
                    *s ^= q;
                }
                cipher.encrypt16(&mut state);
                last = [0; 16];
                filled = 0;
            }
        }
        debug_assert_eq!(filled, 15 - domain.b);
        RoundFunction { cipher, domain, state, last }
    }

    /// Steps 6.i to 6.iv: `y` for round `i` over the half `half` (`NUM_radix` of B when
    /// encrypting, of A when decrypting).
    fn y(&self, i: u8, half: u128) -> u128 {
        let b = self.domain.b;
        let mut block = self.last;
        block[15 - b] = i;
        block[16 - b..].copy_from_slice(&half.to_be_bytes()[16 - b..]);
        for (q, s) in block.iter_mut().zip(self.state.iter()) {
            *q ^= s;
        }
        // R = PRF(P ‖ Q): the last CBC-MAC block. S = the first d bytes of R (d <= 16).
        self.cipher.encrypt16(&mut block);
        let mut s = [0u8; 16];
        s[16 - self.domain.d..].copy_from_slice(&block[..self.domain.d]);
        u128::from_be_bytes(s)
    }
}

/// FF1.Encrypt(K, T, X) (Algorithm 7) of the numeral string whose value is `x`.
///
/// # Panics
/// If `x` is not below `domain.size()`: a caller's invariant.
pub fn encrypt<C: Block16>(cipher: &C, domain: &Domain, tweak: &[u8], x: u128) -> u128 {
    assert!(x < domain.size(), "FF1 input outside its domain");
    let f = RoundFunction::new(cipher, domain, tweak);
    let (mut a, mut b) = domain.split(x);
    for i in 0..ROUNDS {
        let y = f.y(i, b);
        // Step 6.v: m = u in even rounds, v in odd ones; A has m digits then.
        let m = if i % 2 == 0 { domain.pow_u } else { domain.pow_v };
        // Step 6.vi: c = (NUM_radix(A) + y) mod radix^m. Both terms are below m <= 2^96.
        let c = reduce(a + reduce(y, m), m);
        // Steps 6.viii and 6.ix.
        a = b;
        b = c;
    }
    // After an even number of rounds A has u digits and B has v again.
    domain.join(a, b)
}

/// FF1.Decrypt(K, T, Y) (Algorithm 8): the inverse of [`encrypt`].
///
/// # Panics
/// If `y` is not below `domain.size()`.
pub fn decrypt<C: Block16>(cipher: &C, domain: &Domain, tweak: &[u8], y: u128) -> u128 {
    assert!(y < domain.size(), "FF1 input outside its domain");
    let f = RoundFunction::new(cipher, domain, tweak);
    let (mut a, mut b) = domain.split(y);
    for i in (0..ROUNDS).rev() {
        let y = f.y(i, a);
        let m = if i % 2 == 0 { domain.pow_u } else { domain.pow_v };
        // Step 6.vi: c = (NUM_radix(B) - y) mod radix^m, with B below m.
        let c = reduce(b + m - reduce(y, m), m);
        b = a;
        a = c;
    }
    domain.join(a, b)
}

#[cfg(test)]
mod tests {
    use aes::cipher::KeyInit;
    use aes::{Aes128, Aes192, Aes256};
    use proptest::prelude::*;

    use super::*;

    const KEY: [u8; 32] = [
        0x2B, 0x7E, 0x15, 0x16, 0x28, 0xAE, 0xD2, 0xA6, 0xAB, 0xF7, 0x15, 0x88, 0x09, 0xCF, 0x4F, 0x3C, 0xEF, 0x43,
        0x59, 0xD8, 0xD5, 0x80, 0xAA, 0x4F, 0x7F, 0x03, 0x6D, 0x6F, 0x04, 0xFC, 0x6A, 0x94,
    ];
    const TWEAK_10: &[u8] = &[0x39, 0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31, 0x30];
    const TWEAK_11: &[u8] = &[0x37, 0x37, 0x37, 0x37, 0x70, 0x71, 0x72, 0x73, 0x37, 0x37, 0x37];

    /// NUM_radix of a digit string given as text (0-9, then a-z for 10-35).
    fn num(radix: u32, digits: &str) -> u128 {
        digits.chars().fold(0, |acc, c| acc * u128::from(radix) + u128::from(c.to_digit(36).unwrap()))
    }

    /// NUM_2 of a bit string.
    fn bits(b: &[u8]) -> u128 {
        b.iter().fold(0, |acc, &x| acc << 1 | u128::from(x))
    }

    fn check<C: Block16>(c: &C, radix: u32, tweak: &[u8], pt: &str, ct: &str) {
        let d = Domain::new(radix, pt.len() as u32).unwrap();
        let (x, y) = (num(radix, pt), num(radix, ct));
        assert_eq!(encrypt(c, &d, tweak, x), y, "encrypt {pt}");
        assert_eq!(decrypt(c, &d, tweak, y), x, "decrypt {ct}");
    }

    /// NIST SP 800-38G, FF1samples.pdf, samples 1 to 9.
    #[test]
    fn nist_samples() {
        let aes128 = Aes128::new(&KEY[..16].try_into().unwrap());
        let aes192 = Aes192::new(&KEY[..24].try_into().unwrap());
        let aes256 = Aes256::new(&KEY.into());
        let (digits, alnum) = ("0123456789", "0123456789abcdefghi");
        check(&aes128, 10, &[], digits, "2433477484");
        check(&aes128, 10, TWEAK_10, digits, "6124200773");
        check(&aes128, 36, TWEAK_11, alnum, "a9tv40mll9kdu509eum");
        check(&aes192, 10, &[], digits, "2830668132");
        check(&aes192, 10, TWEAK_10, digits, "2496655549");
        check(&aes192, 36, TWEAK_11, alnum, "xbj3kv35jrawxv32ysr");
        check(&aes256, 10, &[], digits, "6657667009");
        check(&aes256, 10, TWEAK_10, digits, "1001623463");
        check(&aes256, 36, TWEAK_11, alnum, "xs8a0azh2avyalyzuwd");
    }

    /// Zcash's FF1-AES256 binary vectors (zcash-test-vectors, ff1.py): radix 2, 88 bits, the
    /// last with a 255-byte tweak, which spans many CBC-MAC blocks before Q's last one.
    #[test]
    fn zcash_binary_vectors() {
        let c = Aes256::new(&KEY.into());
        let d = Domain::new(2, 88).unwrap();
        let alternating: Vec<u8> = (0..88).map(|i| (i % 2) as u8).collect();
        let ct1 = bits(&[
            0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 1, 1, 0, 1, 0, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0,
            0, 0, 0, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 0, 1, 0, 1, 1, 0, 1, 0, 1, 0,
            0, 1, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1,
        ]);
        let ct2 = bits(&[
            1, 1, 0, 1, 1, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0,
            1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1, 0, 0,
            0, 1, 0, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0, 0,
        ]);
        let ct3 = bits(&[
            0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 0, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1,
            0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 0, 0, 0, 1, 0, 0, 1,
            0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 1, 0, 0, 1, 1, 0,
        ]);
        let ct4 = bits(&[
            0, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1,
            0, 1, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0,
            1, 1, 0, 1, 1, 1, 1, 0, 1, 0, 1, 0, 0, 0, 1, 1,
        ]);
        let long_tweak: Vec<u8> = (0..=254).collect();
        assert_eq!(encrypt(&c, &d, &[], 0), ct1);
        assert_eq!(encrypt(&c, &d, &[], ct1), ct2);
        assert_eq!(encrypt(&c, &d, &[], bits(&alternating)), ct3);
        assert_eq!(encrypt(&c, &d, &long_tweak, bits(&alternating)), ct4);
        assert_eq!(decrypt(&c, &d, &long_tweak, ct4), bits(&alternating));
    }

    #[test]
    fn domains_ff1_over_u128_cannot_serve_are_refused() {
        assert_eq!(Domain::new(1, 10), None);
        assert_eq!(Domain::new(10, 5), None, "10^5 is below NIST's minimum domain");
        assert_eq!(Domain::new(2, 128), None, "2^128 does not fit");
        assert_eq!(Domain::new(2, 193), None);
        // The extension's two domains.
        assert_eq!(Domain::new(2, 95).map(|d| (d.b, d.d)), Some((6, 12)));
        assert_eq!(Domain::new(2, 122).map(|d| (d.b, d.d)), Some((8, 12)));
        assert!(Domain::new(2, 127).is_some());
    }

    proptest! {
        #[test]
        fn decrypt_inverts_encrypt(x in any::<u128>(), tweak in proptest::collection::vec(any::<u8>(), 0..80),
                                   radix in prop::sample::select(vec![2u32, 10, 32, 36]), n in 20u32..40) {
            let c = Aes256::new(&KEY.into());
            if let Some(d) = Domain::new(radix, n) {
                let x = x % d.size();
                let y = encrypt(&c, &d, &tweak, x);
                prop_assert!(y < d.size());
                prop_assert_eq!(decrypt(&c, &d, &tweak, y), x);
            }
        }
    }
}
