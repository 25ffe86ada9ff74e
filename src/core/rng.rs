//! The random tail of a UUIDv7: a per-process ChaCha20 stream, seeded from the operating system.
//!
//! `gen_random_uuid()` asks the kernel (through `pg_strong_random`) for 16 bytes per UUID, which
//! costs microseconds. Here the kernel supplies a 32-byte seed, and ChaCha20, a cryptographically
//! secure stream cipher, expands it: one seed serves [`RESEED_AFTER`] UUIDs.
//!
//! Fork safety: PostgreSQL forks every backend from the postmaster. A generator seeded before the
//! fork would hand the *same* stream to every backend. So the stream remembers the process id it
//! was seeded in, and a different caller pid (a new backend, a parallel worker, a restarted
//! server) seeds afresh before drawing. Nothing is seeded until the first draw, and the postmaster
//! never draws.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// Draws between reseeds from the operating system: 8 bytes each, 64 KiB of stream in all
/// (the same budget as `rand::ThreadRng`), so a leaked state exposes little past or future output.
pub const RESEED_AFTER: u32 = 8192;

/// A lazily seeded, fork-aware ChaCha20 stream.
#[derive(Clone, Default)]
pub struct TailRng {
    /// The stream, and the pid it was seeded in.
    state: Option<(i32, ChaCha20Rng)>,
    draws: u32,
}

impl TailRng {
    pub const fn new() -> Self {
        TailRng { state: None, draws: 0 }
    }

    /// 62 uniformly random bits (the top two are zero, for the RFC 9562 variant).
    ///
    /// `pid` is the caller's process id; `seed` is asked for 32 fresh bytes from the operating
    /// system on the first draw in a process, after a fork, and every [`RESEED_AFTER`] draws.
    ///
    /// # Errors
    /// Whatever `seed` returns when the operating system cannot supply randomness; no value is
    /// drawn then.
    pub fn next_u62<E>(&mut self, pid: i32, seed: impl FnOnce() -> Result<[u8; 32], E>) -> Result<u64, E> {
        let fresh = match &self.state {
            Some((owner, _)) => *owner != pid || self.draws >= RESEED_AFTER,
            None => true,
        };
        if fresh {
            self.state = Some((pid, ChaCha20Rng::from_seed(seed()?)));
            self.draws = 0;
        }
        self.draws += 1;
        let (_, rng) = self.state.as_mut().expect("seeded just above");
        Ok(rng.next_u64() >> 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed_of(byte: u8) -> impl FnOnce() -> Result<[u8; 32], ()> {
        move || Ok([byte; 32])
    }

    #[test]
    fn same_seed_same_stream_and_62_bits() {
        let (mut a, mut b) = (TailRng::new(), TailRng::new());
        for _ in 0..100 {
            let x = a.next_u62(1, seed_of(7)).unwrap();
            assert_eq!(x, b.next_u62(1, seed_of(7)).unwrap());
            assert!(x < 1 << 62);
        }
    }

    #[test]
    fn seeds_lazily_and_again_after_a_fork() {
        let mut seeds = 0;
        let mut parent = TailRng::new();
        for _ in 0..3 {
            parent
                .next_u62(100, || {
                    seeds += 1;
                    Ok::<_, ()>([1; 32])
                })
                .unwrap();
        }
        assert_eq!(seeds, 1, "seeded once, on the first draw");
        // fork(): the child inherits the parent's stream, but draws under its own pid.
        let mut child = parent.clone();
        let from_parent = parent.next_u62(100, seed_of(9)).unwrap();
        let from_child = child.next_u62(101, seed_of(2)).unwrap();
        assert_ne!(from_parent, from_child, "the child must not repeat the parent's stream");
        assert_eq!(from_child, TailRng::new().next_u62(7, seed_of(2)).unwrap(), "the child reseeded");
    }

    #[test]
    fn reseeds_after_the_budget() {
        let mut r = TailRng::new();
        let mut seeds = 0u32;
        for _ in 0..(2 * RESEED_AFTER + 1) {
            r.next_u62(5, || {
                seeds += 1;
                Ok::<_, ()>([seeds as u8; 32])
            })
            .unwrap();
        }
        assert_eq!(seeds, 3);
    }

    #[test]
    fn a_failed_seed_draws_nothing() {
        let mut r = TailRng::new();
        assert_eq!(r.next_u62(5, || Err("no entropy")), Err("no entropy"));
        assert!(r.next_u62(5, || Ok::<_, &str>([9; 32])).is_ok());
    }
}
