//! One database's load must not spend another's capacity: the last tick of a generator's lead is
//! kept for the databases that mint little.
//!
//! Every database of a server shares each generator (a snowflake shard's, the UUIDv7 one), so
//! that its ids increase across all of them. A database that mints more than a tick holds runs
//! the generator ahead of the clock, up to the lead (`crate::core::monotonic`); at the lead, every
//! caller waits for the clock and competes for the few words each tick frees, and a database
//! minting one id now and then would wait behind another's flood (measured at 7 ms a call, 111 ms
//! at worst, beside a flood of one shard).
//!
//! So the last tick of the lead, the *reserve*, goes to a database only while it takes less than a
//! quarter of a tick's words in it each tick, its *quota*, whenever another database wanted the
//! reserve in the last second ([`Shares::admit`]). A database alone keeps the whole lead: nothing
//! changes for a server with one database minting. Beside another, a flooding database issues
//! the rest of the lead freely and at most its quota of the reserve a tick; up to three such
//! databases together take less than a tick of it, so the reserve never fills, and a database that
//! mints less than its quota finds a word there without waiting. Its ids then run as far ahead of
//! the clock as the others pushed the generator: the lead, at most.
//!
//! A database that finds even the reserve taken (the first call after another flooded alone, or
//! a database over its quota) waits for the clock as before, and *announces* itself meanwhile
//! ([`Shares::announce`]), so that the floods are held to their quotas by the time the clock has
//! freed a tick: a database minting now and then waits at most about a tick, once a second.
//!
//! # The table
//! Per generator, [`SHARE_ENTRIES`] words, each a database's use of the reserve, packed as
//! `database (32 bits) | clock tick (low 20 bits) | words taken in that tick (12 bits)`; 0 is free.
//! They are updated with compare-and-swap only by calls whose word falls in the reserve or beyond
//! (a generator at its lead), never on the fast path. An entry whose tick is more than a second
//! away from the clock's may be taken by another database. Two backends of one database that
//! claim two entries at once both count: the database then has two quotas until one entry ages
//! out. No id depends on the table: it only decides who waits.

use std::sync::atomic::{AtomicU64, Ordering};

/// How many databases' use of the reserve a generator follows within a second. A database that
/// finds every entry held by others is not admitted to the reserve: it waits, as every caller
/// did before.
pub const SHARE_ENTRIES: usize = 6;

const TICK_BITS: u32 = 20;
const TICK_MASK: u64 = (1 << TICK_BITS) - 1;
const COUNT_BITS: u32 = 12;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;

/// What one database may take of the reserve each tick: a quarter of a tick's words, at least
/// one, at most 4,095 (the entry's count).
pub const fn quota(low_bits: u32) -> u64 {
    let q = (1u64 << low_bits) >> 2;
    if q == 0 {
        1
    } else if q > COUNT_MAX {
        COUNT_MAX
    } else {
        q
    }
}

/// How many ticks a database's use of the reserve counts for others: a second.
pub const fn window(tick_ms: u32) -> u64 {
    let w = 1000 / tick_ms as u64;
    if w == 0 {
        1
    } else {
        w
    }
}

/// How many ticks of a lead of `max_lead_ticks` are the reserve: the last one (none under a
/// strict lead of 0, where every caller waits for the clock).
pub const fn reserve_ticks(max_lead_ticks: u64) -> u64 {
    if max_lead_ticks == 0 {
        0
    } else {
        1
    }
}

fn pack(database: u32, tick: u64, count: u64) -> u64 {
    u64::from(database) << 32 | (tick & TICK_MASK) << COUNT_BITS | count.min(COUNT_MAX)
}

fn unpack(v: u64) -> (u32, u64, u64) {
    ((v >> 32) as u32, (v >> COUNT_BITS) & TICK_MASK, v & COUNT_MAX)
}

/// How far `tick` (20 bits) lies from `now` (20 bits) either way: backends read the clock at
/// slightly different moments, so an entry a tick "ahead" is as current as one a tick behind.
fn distance(now: u64, tick: u64) -> u64 {
    let ahead = tick.wrapping_sub(now) & TICK_MASK;
    let behind = now.wrapping_sub(tick) & TICK_MASK;
    ahead.min(behind)
}

/// One generator's table of databases using its reserve (see the module documentation).
#[derive(Debug, Default)]
#[repr(C)]
pub struct Shares {
    entries: [AtomicU64; SHARE_ENTRIES],
}

impl Shares {
    /// An empty table.
    pub const fn new() -> Self {
        Shares { entries: [const { AtomicU64::new(0) }; SHARE_ENTRIES] }
    }

    /// Whether `database` may take a word of the reserve at clock tick `now_tick`, counting it
    /// when it may: yes while no other database wanted the reserve within `window` ticks, or while
    /// `database` took fewer than `quota` words of it in this tick. `database` is never 0.
    pub fn admit(&self, database: u32, now_tick: u64, quota: u64, window: u64) -> bool {
        self.visit(database, now_tick, window, |count, others| (!others || count < quota).then_some(count + 1))
    }

    /// Records that `database` wanted the reserve at clock tick `now_tick` and found it taken (it
    /// waits for the clock), so that the databases over their quota leave it the next words.
    pub fn announce(&self, database: u32, now_tick: u64, window: u64) {
        self.visit(database, now_tick, window, |count, _| Some(count));
    }

    /// Finds or claims `database`'s entry and offers `decide` its count in this tick and whether
    /// another database used the reserve within the window; `decide` returns the new count, or
    /// `None` to leave the entry and refuse. Returns whether an entry took the new count.
    fn visit(&self, database: u32, now_tick: u64, window: u64, decide: impl Fn(u64, bool) -> Option<u64>) -> bool {
        let now = now_tick & TICK_MASK;
        loop {
            let seen: [u64; SHARE_ENTRIES] = std::array::from_fn(|i| self.entries[i].load(Ordering::Acquire));
            let current = |v: u64| v != 0 && distance(now, unpack(v).1) < window;
            let others = seen.iter().any(|&v| current(v) && unpack(v).0 != database);
            // This database's entry; else the first free or aged one, from a place its own backends
            // all start at, so that they claim the same one.
            let start = database as usize % SHARE_ENTRIES;
            let order = (0..SHARE_ENTRIES).map(|k| (start + k) % SHARE_ENTRIES);
            let Some(i) = order
                .clone()
                .find(|&i| current(seen[i]) && unpack(seen[i]).0 == database)
                .or_else(|| order.clone().find(|&i| !current(seen[i])))
            else {
                return false;
            };
            let (owner, tick, count) = unpack(seen[i]);
            let this_tick = if owner == database && current(seen[i]) && tick == now { count } else { 0 };
            let Some(new) = decide(this_tick, others) else { return false };
            if self.entries[i]
                .compare_exchange(seen[i], pack(database, now, new), Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: u32 = 16384;
    const B: u32 = 16385;
    const Q: u64 = 128;
    const W: u64 = 1000;

    #[test]
    fn the_figures_of_the_share() {
        assert_eq!((quota(9), quota(12), quota(2), quota(1), quota(0), quota(31)), (128, 1024, 1, 1, 1, 4095));
        assert_eq!((window(1), window(10), window(1000)), (1000, 100, 1));
        assert_eq!((reserve_ticks(0), reserve_ticks(1), reserve_ticks(5), reserve_ticks(1000)), (0, 1, 1, 1));
    }

    #[test]
    fn a_database_alone_takes_all_of_the_reserve() {
        let s = Shares::new();
        assert!((0..10_000).all(|_| s.admit(A, 7, Q, W)));
        assert!((0..10_000).all(|_| s.admit(A, 8, Q, W)), "and again the next tick");
    }

    #[test]
    fn beside_another_database_a_quota_a_tick() {
        let s = Shares::new();
        assert!(s.admit(B, 100, Q, W));
        assert_eq!((0..1000).filter(|_| s.admit(A, 100, Q, W)).count(), Q as usize);
        assert!(s.admit(B, 100, Q, W), "the other database still finds its share");
        assert_eq!((0..1000).filter(|_| s.admit(A, 101, Q, W)).count(), Q as usize, "a new quota the next tick");
        // B's use counts for a second: until then A keeps to its quota, then has it all again.
        assert_eq!((0..1000).filter(|_| s.admit(A, 100 + W - 1, Q, W)).count(), Q as usize);
        assert_eq!((0..1000).filter(|_| s.admit(A, 100 + W + 1, Q, W)).count(), 1000);
    }

    #[test]
    fn a_database_that_waited_holds_the_others_to_their_quota() {
        let s = Shares::new();
        assert!((0..1000).all(|_| s.admit(A, 5, Q, W)));
        s.announce(B, 5, W);
        assert_eq!((0..1000).filter(|_| s.admit(A, 6, Q, W)).count(), Q as usize);
    }

    #[test]
    fn two_floods_beside_a_third_database_each_keep_to_their_quota() {
        let s = Shares::new();
        s.announce(B, 50, W);
        for tick in 50..60 {
            assert_eq!((0..1000).filter(|_| s.admit(A, tick, Q, W)).count(), Q as usize);
            assert_eq!((0..1000).filter(|_| s.admit(A + 7, tick, Q, W)).count(), Q as usize);
            assert!(s.admit(B, tick, Q, W));
        }
    }

    #[test]
    fn the_backends_of_one_database_share_one_entry() {
        let s = Shares::new();
        s.announce(B, 9, W);
        for _ in 0..Q {
            assert!(s.admit(A, 9, Q, W));
        }
        assert!(!s.admit(A, 9, Q, W));
        let mine = s.entries.iter().filter(|e| unpack(e.load(Ordering::Relaxed)).0 == A).count();
        assert_eq!(mine, 1);
    }

    #[test]
    fn a_seventh_database_finds_no_entry_and_is_refused_until_one_ages_out() {
        let s = Shares::new();
        for d in 0..SHARE_ENTRIES as u32 {
            s.announce(A + 100 + d, 3, W);
        }
        assert!(!s.admit(B, 3, Q, W));
        assert!(s.admit(B, 3 + W, Q, W), "a second later every entry has aged out");
    }

    #[test]
    fn ticks_a_little_apart_either_way_are_current_and_the_clock_wraps() {
        assert_eq!(distance(5, 4), 1);
        assert_eq!(distance(4, 5), 1);
        assert_eq!(distance(0, TICK_MASK), 1);
        assert_eq!(distance(TICK_MASK, 0), 1);
        let s = Shares::new();
        // Another backend of B read a clock a tick later: still current for A.
        s.announce(B, (1 << TICK_BITS) + 1, W);
        assert_eq!((0..1000).filter(|_| s.admit(A, 1 << TICK_BITS, Q, W)).count(), Q as usize);
    }

    #[test]
    fn the_entry_packs_and_unpacks() {
        for (d, t, c) in [(1, 0, 0), (u32::MAX, TICK_MASK, COUNT_MAX), (16384, 12345, 77)] {
            assert_eq!(unpack(pack(d, t, c)), (d, t, c));
        }
        assert_eq!(unpack(pack(1, 1 << TICK_BITS, COUNT_MAX + 5)), (1, 0, COUNT_MAX));
    }
}
