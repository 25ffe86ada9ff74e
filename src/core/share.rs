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
//! So the last tick of the lead, the *reserve*, is shared out per tick:
//! - each backend takes up to its *light quota* of the reserve's words each tick ([`light_quota`]),
//!   freely;
//! - past that, every backend together takes at most half a tick's words there each tick
//!   ([`heavy_cap`]), and a backend refused waits for the clock.
//!
//! The light quota is sized so that all the server's backends together take at most the other half:
//! at least one word, and otherwise half a tick's words shared among them. So the reserve never
//! fills, and a session that mints at most its light quota on a generator in a tick finds its word
//! there at once, whatever any other session of any database does, for as long as the server has at
//! most half a tick's words of backends (256 for a shard of the default layout, 2,048 for UUIDv7). No
//! table of databases or roles is kept: nothing a role can multiply (databases, roles, sessions
//! beyond the server's limit) defeats it. Its ids run as far ahead of the clock as the floods pushed
//! the generator: the lead, at most. A flood loses half of the lead's last tick; its rate, one tick's
//! words for each tick of the clock, is the same.
//!
//! The shared count is one atomic word per generator, `tick (44 bits) | words (20 bits)`, updated with
//! compare-and-swap only by calls past their light quota in the reserve, never on the fast path. A
//! backend's own use ([`Light`]) is its own. No id depends on either: they only decide who waits.

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

/// The words of the reserve all backends together may take past their light quotas each tick: half
/// a tick's (at least one).
pub const fn heavy_cap(low_bits: u32) -> u64 {
    let half = (1u64 << low_bits) >> 1;
    if half == 0 {
        1
    } else if half > COUNT_MAX {
        COUNT_MAX
    } else {
        half
    }
}

/// The words of the reserve one backend may take freely each tick, on a server of `backends`
/// processes that may mint: half a tick's words shared among them, at least one.
pub const fn light_quota(low_bits: u32, backends: u32) -> u64 {
    let backends = if backends == 0 { 1 } else { backends as u64 };
    let q = ((1u64 << low_bits) >> 1) / backends;
    if q == 0 {
        1
    } else {
        q
    }
}

/// Whether the reserve is sure never to fill on a server of `backends` processes: their light
/// quotas and the heavy cap together fit in a tick.
pub const fn never_fills(low_bits: u32, backends: u32) -> bool {
    (backends as u64) * light_quota(low_bits, backends) + heavy_cap(low_bits) <= 1u64 << low_bits
}

/// One backend's use of a generator's reserve in its latest tick: the generator, the tick and the
/// words taken. A backend's own (a plain static: a backend is one thread); atomics only so that it
/// can be one.
#[derive(Debug, Default)]
pub struct Light {
    generator: AtomicU64,
    tick: AtomicU64,
    taken: AtomicU64,
}

impl Light {
    /// A backend that has taken nothing of any reserve.
    pub const fn new() -> Self {
        Light { generator: AtomicU64::new(0), tick: AtomicU64::new(u64::MAX), taken: AtomicU64::new(0) }
    }
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

    /// Whether the backend whose use is `light` may take a word of this generator's reserve
    /// (`generator` names the generator to it) at clock tick `now_tick`, counting it when it may:
    /// within its light quota, or while the backends past theirs took fewer than `heavy_cap`
    /// words in this tick.
    pub fn admit(&self, light: &Light, generator: u64, now_tick: u64, light_quota: u64, heavy_cap: u64) -> bool {
        if light.generator.load(Ordering::Relaxed) != generator || light.tick.load(Ordering::Relaxed) != now_tick {
            light.generator.store(generator, Ordering::Relaxed);
            light.tick.store(now_tick, Ordering::Relaxed);
            light.taken.store(0, Ordering::Relaxed);
        }
        let taken = light.taken.load(Ordering::Relaxed);
        if taken < light_quota {
            light.taken.store(taken + 1, Ordering::Relaxed);
            return true;
        }
        let now = now_tick & TICK_MASK;
        let mut seen = self.heavy.load(Ordering::Acquire);
        loop {
            let (tick, count) = (seen >> COUNT_BITS, seen & COUNT_MAX);
            // A backend that read the clock a moment before another may see the other's later
            // tick: it counts in that tick, and never moves the count back to its own.
            let (tick, count) = if tick >= now { (tick, count) } else { (now, 0) };
            if count >= heavy_cap {
                return false;
            }
            match self.heavy.compare_exchange_weak(
                seen,
                tick << COUNT_BITS | (count + 1),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => seen = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_figures_of_the_share() {
        assert_eq!(
            (heavy_cap(9), heavy_cap(12), heavy_cap(1), heavy_cap(0), heavy_cap(31)),
            (256, 2048, 1, 1, COUNT_MAX)
        );
        assert_eq!(
            (light_quota(9, 100), light_quota(12, 100), light_quota(9, 300), light_quota(9, 0)),
            (2, 20, 1, 256)
        );
        assert_eq!((reserve_ticks(0), reserve_ticks(1), reserve_ticks(5), reserve_ticks(1000)), (0, 1, 1, 1));
        assert!(never_fills(9, 100) && never_fills(9, 256) && !never_fills(9, 257) && never_fills(12, 2048));
    }

    #[test]
    fn a_backend_takes_its_light_quota_then_shares_the_heavy_cap() {
        let r = Reserve::new();
        let (a, b) = (Light::new(), Light::new());
        // 2 light, then the heavy cap of 10 for everyone.
        assert_eq!((0..100).filter(|_| r.admit(&a, 1, 7, 2, 10)).count(), 12);
        assert_eq!(
            (0..100).filter(|_| r.admit(&b, 1, 7, 2, 10)).count(),
            2,
            "the other backend's light quota is its own"
        );
        assert_eq!((0..100).filter(|_| r.admit(&a, 1, 8, 2, 10)).count(), 12, "a new tick, new quotas");
        assert_eq!((0..100).filter(|_| r.admit(&a, 2, 8, 2, 10)).count(), 2, "another generator, another light quota");
    }

    #[test]
    fn a_count_from_a_later_tick_is_never_moved_back() {
        let r = Reserve::new();
        let (a, b) = (Light::new(), Light::new());
        assert_eq!((0..100).filter(|_| r.admit(&a, 1, 9, 0, 10)).count(), 10);
        // b read the clock a moment earlier: it counts in tick 9, which is full.
        assert!(!r.admit(&b, 1, 8, 0, 10));
        assert_eq!(r.heavy.load(Ordering::Relaxed) >> COUNT_BITS, 9);
    }

    #[test]
    fn floods_from_every_backend_leave_room_for_a_light_one() {
        // 200 backends of a server of 201 each flood 64 words a tick, on a generator of 512 a tick:
        // the reserve gives them one light word each and 256 heavy ones in all, 456, and the
        // 201st backend's light word finds room.
        assert!(never_fills(9, 201));
        let (quota, cap) = (light_quota(9, 201), heavy_cap(9));
        let r = Reserve::new();
        let floods: Vec<Light> = (0..200).map(|_| Light::new()).collect();
        let modest = Light::new();
        for tick in 0..20 {
            let taken: usize = floods.iter().map(|f| (0..64).filter(|_| r.admit(f, 5, tick, quota, cap)).count()).sum();
            assert_eq!(taken, 200 + 256);
            assert!(r.admit(&modest, 5, tick, quota, cap));
        }
    }
}
