//! UUIDv7s: the next word of the one generator every backend shares, and its random tail.

use std::cell::RefCell;

use pgrx::pg_sys;

use crate::core::rng::TailRng;
use crate::core::uuidv7;
use crate::runtime::errors::{self, Generator};
use crate::runtime::{generate, guc, shmem};

thread_local! {
    /// This backend's random stream. PostgreSQL backends are single-threaded; thread-local
    /// storage is just a safe home for per-process state.
    static TAIL_RNG: RefCell<TailRng> = const { RefCell::new(TailRng::new()) };
}

fn os_seed() -> Result<[u8; 32], getrandom::Error> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed)?;
    Ok(seed)
}

/// The next word of the server-wide UUIDv7 generator, through the guarded path.
pub fn next_word() -> u64 {
    let slot = shmem::uuidv7_slot().unwrap_or_else(|_| errors::raise(errors::not_preloaded()));
    generate::next_word(slot, &uuidv7::TIMELINE, &guc::uuidv7_clock_policy(), Generator::Uuidv7)
}

/// The UUIDv7 of `word`, with this backend's random stream as its tail, whose top bit says
/// whether its time was shifted (`uuidv7::SHIFTED_BIT`).
pub fn encode(word: u64, shifted: bool) -> [u8; 16] {
    // SAFETY: a plain read of this process's pid, set by PostgreSQL at process start.
    let pid = unsafe { pg_sys::MyProcPid };
    let tail = TAIL_RNG
        .with_borrow_mut(|rng| rng.next_u62(pid, os_seed))
        .unwrap_or_else(|e| errors::raise(errors::no_entropy(e)));
    uuidv7::encode(word, uuidv7::tail(tail, shifted))
}
