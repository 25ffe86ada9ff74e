//! One session's load must not spend another's capacity: the last tick of a generator's lead is
//! shared out so that it never fills.
//!
//! Every session of every database shares each generator (a snowflake shard's, the UUIDv7 one),
//! so that its ids increase across all of them. A flood that mints more than a tick holds runs the
//! generator ahead of the clock, up to the lead (`crate::core::monotonic`); at the lead every caller
//! waits for the clock and competes for the few words each tick frees, and a database minting one
//! id now and then waited behind another's flood (7 ms a call on average, 111 ms at worst, beside a
//! flood of one shard).
//!
//! So the last tick of the lead, the *reserve*, is shared out per tick, among the server's
//! `backends` (PostgreSQL's `MaxBackends`: every process that may mint):
//! - each backend takes up to its *light quota* of reserve words each tick, over every generator
//!   together ([`light_quota`]: half a tick's words divided among the backends, at least one);
//! - past that, all backends together take at most what the light quotas leave of a tick
//!   ([`heavy_cap`]), and a backend refused waits for the clock.
//!
//! So the reserve never fills while the backends are at most a tick's words ([`never_fills`]): a
//! session that mints at most its light quota in a tick finds its word there at once, whatever any
//! other session of any database does, on whatever generators. No table of databases or roles is
//! kept: nothing a role can multiply (databases, roles, generators, sessions beyond the server's
//! limit) defeats it. Its ids run as far ahead of the clock as the floods pushed the generator: the
//! lead, at most. A flood keeps its rate, one tick's words for each tick of the clock, and borrows up
//! to the light quotas' part of a tick less ahead.
//!
//! The shared count is one atomic word per generator, `tick (44 bits) | words (20 bits)`, updated
//! with compare-and-swap only by calls past their light quota in the reserve, never on the fast path,
//! and given back when the call loses the race for its word. A backend's own use ([`Light`]) is its
//! own, and counts a word only once it is issued. No id depends on either: they only decide who
//! waits.

use std::sync::atomic::{AtomicU64, Ordering};

const COUNT_BITS: u32 = 20;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;
const TICK_MASK: u64 = u64::MAX >> COUNT_BITS;

/// How many ticks of a lead of `max_lead_ticks` are the reserve: the last one (none under a
/// strict lead of 0, where every caller waits for the clock).
pub const fn reserve_ticks(max_lead_ticks: u64) -> u64 {
    if max_lead_ticks == 0 {
        0
    } else {
        1
    }
}

/// The words of the reserve one backend may take freely each tick, over every generator, on a
/// server of `backends` processes that may mint: half a tick's words shared among them, at least
/// one.
pub const fn light_quota(low_bits: u32, backends: u32) -> u64 {
    let backends = if backends == 0 { 1 } else { backends as u64 };
    let q = ((1u64 << low_bits) >> 1) / backends;
    if q == 0 {
        1
    } else {
        q
    }
}

/// The words of a generator's reserve all backends together may take past their light quotas each
/// tick: what the light quotas leave of a tick (none when they take it all).
pub const fn heavy_cap(low_bits: u32, backends: u32) -> u64 {
    let light = if backends == 0 { 1 } else { backends as u64 } * light_quota(low_bits, backends);
    let left = (1u64 << low_bits).saturating_sub(light);
    if left > COUNT_MAX {
        COUNT_MAX
    } else {
        left
    }
}

/// Whether the reserve is sure never to fill on a server of `backends` processes: their light
/// quotas fit in a tick (the heavy cap takes the rest).
pub const fn never_fills(low_bits: u32, backends: u32) -> bool {
    backends as u64 * light_quota(low_bits, backends) <= 1u64 << low_bits
}

/// One backend's use of reserves in its latest tick, over every generator together: the tick and
/// the words taken. A backend's own (a plain static: a backend is one thread); atomics only so that
/// it can be one. (A backend minting in one moment on generators of different tick lengths counts
/// them against one quota: it only shares a little less.)
#[derive(Debug, Default)]
pub struct Light {
    tick: AtomicU64,
    taken: AtomicU64,
}

impl Light {
    /// A backend that has taken nothing of any reserve.
    pub const fn new() -> Self {
        Light { tick: AtomicU64::new(u64::MAX), taken: AtomicU64::new(0) }
    }

    fn taken_in(&self, tick: u64) -> u64 {
        if self.tick.load(Ordering::Relaxed) == tick {
            self.taken.load(Ordering::Relaxed)
        } else {
            0
        }
    }
}

/// A word of the reserve that [`Reserve::admit`] lets a caller take: to [`Reserve::taken`] once it
/// is issued, or [`Reserve::lost`] when another caller got it first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Within the backend's light quota: counted once issued.
    Light { tick: u64 },
    /// Past it, within the heavy cap: counted already, given back if lost.
    Heavy { tick: u64 },
}

/// One generator's count of the reserve's words taken past the light quotas, in its latest tick.
#[derive(Debug, Default)]
#[repr(C)]
pub struct Reserve {
    heavy: AtomicU64,
}

impl Reserve {
    /// None taken.
    pub const fn new() -> Self {
        Reserve { heavy: AtomicU64::new(0) }
    }

    /// Whether the backend whose use is `light` may take a word of this generator's reserve at
    /// clock tick `now_tick`: within its light quota, or while the backends past theirs took fewer
    /// than `heavy_cap` words of it in this tick. `None` when it may not.
    pub fn admit(&self, light: &Light, now_tick: u64, light_quota: u64, heavy_cap: u64) -> Option<Admission> {
        if light.taken_in(now_tick) < light_quota {
            return Some(Admission::Light { tick: now_tick });
        }
        let now = now_tick & TICK_MASK;
        let mut seen = self.heavy.load(Ordering::Acquire);
        loop {
            let (tick, count) = (seen >> COUNT_BITS, seen & COUNT_MAX);
            // A backend that read the clock a moment before another may see the other's later
            // tick: it counts in that tick, and never moves the count back to its own.
            let (tick, count) = if tick >= now { (tick, count) } else { (now, 0) };
            if count >= heavy_cap {
                return None;
            }
            let counted = tick << COUNT_BITS | (count + 1);
            match self.heavy.compare_exchange_weak(seen, counted, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(Admission::Heavy { tick }),
                Err(actual) => seen = actual,
            }
        }
    }

    /// The word `admission` let the backend whose use is `light` take was issued: a light one now
    /// counts.
    pub fn taken(light: &Light, admission: Admission) {
        if let Admission::Light { tick } = admission {
            let taken = light.taken_in(tick);
            light.tick.store(tick, Ordering::Relaxed);
            light.taken.store(taken + 1, Ordering::Relaxed);
        }
    }

    /// Another caller got the word `admission` let this one take: a heavy one is given back, while
    /// its tick is still the one counted.
    pub fn lost(&self, admission: Admission) {
        let Admission::Heavy { tick } = admission else { return };
        let mut seen = self.heavy.load(Ordering::Acquire);
        while seen >> COUNT_BITS == tick && seen & COUNT_MAX > 0 {
            match self.heavy.compare_exchange_weak(seen, seen - 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(actual) => seen = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Admits and issues up to `n` words for `light` at `tick`; how many it took.
    fn take(r: &Reserve, light: &Light, tick: u64, n: usize, quota: u64, cap: u64) -> usize {
        (0..n)
            .filter(|_| match r.admit(light, tick, quota, cap) {
                Some(a) => {
                    Reserve::taken(light, a);
                    true
                }
                None => false,
            })
            .count()
    }

    #[test]
    fn the_figures_of_the_share() {
        // PostgreSQL 14-17's default MaxBackends is 122, 18's 136.
        assert_eq!(
            (light_quota(9, 122), light_quota(12, 122), light_quota(9, 300), light_quota(9, 0)),
            (2, 16, 1, 256)
        );
        assert_eq!(
            (heavy_cap(9, 122), heavy_cap(9, 136), heavy_cap(12, 136), heavy_cap(8, 136)),
            (268, 376, 2056, 120)
        );
        assert_eq!((heavy_cap(9, 512), heavy_cap(9, 600), heavy_cap(31, 1)), (0, 0, COUNT_MAX));
        assert_eq!((reserve_ticks(0), reserve_ticks(1), reserve_ticks(5), reserve_ticks(1000)), (0, 1, 1, 1));
        assert!(never_fills(9, 136) && never_fills(8, 136) && never_fills(9, 512) && !never_fills(9, 513));
    }

    #[test]
    fn a_backend_takes_its_light_quota_then_shares_the_heavy_cap() {
        let r = Reserve::new();
        let (a, b) = (Light::new(), Light::new());
        // 2 light, then the heavy cap of 10 for everyone.
        assert_eq!(take(&r, &a, 7, 100, 2, 10), 12);
        assert_eq!(take(&r, &b, 7, 100, 2, 10), 2, "the other backend's light quota is its own");
        assert_eq!(take(&r, &a, 8, 100, 2, 10), 12, "a new tick, new quotas");
    }

    #[test]
    fn a_backend_has_one_light_quota_a_tick_over_every_generator() {
        // Switching generators does not give a backend another quota.
        let (r5, r6) = (Reserve::new(), Reserve::new());
        let a = Light::new();
        assert_eq!(take(&r5, &a, 7, 1, 2, 0) + take(&r6, &a, 7, 1, 2, 0) + take(&r5, &a, 7, 1, 2, 0), 2);
    }

    #[test]
    fn a_word_counts_only_once_issued() {
        let r = Reserve::new();
        let a = Light::new();
        // Admitted within the light quota, then lost: the quota is still there.
        let first = r.admit(&a, 3, 1, 1).unwrap();
        assert_eq!(first, Admission::Light { tick: 3 });
        r.lost(first);
        assert_eq!(r.admit(&a, 3, 1, 1), Some(Admission::Light { tick: 3 }));
        Reserve::taken(&a, Admission::Light { tick: 3 });
        // Past it, a heavy word lost is given back.
        let heavy = r.admit(&a, 3, 1, 1).unwrap();
        assert_eq!(heavy, Admission::Heavy { tick: 3 });
        assert_eq!(r.admit(&a, 3, 1, 1), None, "the cap of 1 is taken");
        r.lost(heavy);
        assert_eq!(r.admit(&a, 3, 1, 1), Some(Admission::Heavy { tick: 3 }));
    }

    #[test]
    fn a_count_from_a_later_tick_is_never_moved_back() {
        let r = Reserve::new();
        let (a, b) = (Light::new(), Light::new());
        assert_eq!(take(&r, &a, 9, 100, 0, 10), 10);
        // b read the clock a moment earlier: it counts in tick 9, which is full.
        assert!(r.admit(&b, 8, 0, 10).is_none());
        assert_eq!(r.heavy.load(Ordering::Relaxed) >> COUNT_BITS, 9);
    }

    #[test]
    fn floods_from_every_backend_leave_room_for_a_light_one() {
        // 135 backends of a server of 136 (PostgreSQL 18's default) each flood 64 words a tick of a
        // generator of 256 a tick (sonyflake's): one light word each and the heavy cap of 120, 255,
        // and the 136th backend's light word finds room.
        let (quota, cap) = (light_quota(8, 136), heavy_cap(8, 136));
        let r = Reserve::new();
        let floods: Vec<Light> = (0..135).map(|_| Light::new()).collect();
        let modest = Light::new();
        for tick in 0..20 {
            let taken: usize = floods.iter().map(|f| take(&r, f, tick, 64, quota, cap)).sum();
            assert_eq!(taken, 135 + 120);
            assert_eq!(take(&r, &modest, tick, 1, quota, cap), 1);
        }
    }
}
