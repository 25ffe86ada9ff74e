//! Snowflake ids: for one shard, and from the shards this server owns (`snowflake_id.shards`).
//! Each has a fast path, which raises nothing, allocates nothing and takes no lock, and a guarded
//! path (`crate::runtime::generate::next_word`) that does everything else; a fast path that
//! returns `None` has issued nothing.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use pgrx::pg_sys::panic::ErrorReport;

use crate::core::monotonic::{self, Timeline};
use crate::core::shards::{self, ShardSet};
use crate::runtime::errors::{self, Generator};
use crate::runtime::shmem::{self, Slot};
use crate::runtime::{clock, generate, guc};

/// The id for `shard` (`snowflake_next(int)`), if the fast path can issue it: a ready backend, a
/// valid shard of this server, a word within the lead and below the reservation.
#[inline]
pub fn try_next_id_fast(shard: i32) -> Option<i64> {
    if !generate::fast_path_open() {
        return None;
    }
    let layout = guc::layout();
    let shard = layout.shard(i64::from(shard)).ok().filter(|&s| guc::shard_allowed(s))?;
    let slot = shmem::try_shard_slot(shard)?;
    let tl = Timeline::of(layout);
    let now = clock::now_unix_ns();
    let m = monotonic::try_issue_fast(&slot.state, now, &tl, &guc::clock_policy(), generate::fast_limit(&tl))?;
    generate::record_fast(slot, &m, &tl);
    Some(layout.id_from_word(m.word, shard))
}

/// This backend's last pick for `snowflake_next()` with room in the clock's tick: that tick, the
/// generation of the shard set (`guc::shard_set_generation`) and the position in it. Every owned
/// shard before that position had no room in that tick, and never will again (a shard's next
/// word only grows), so a later call in the same tick starts there instead of reading them all
/// again. Plain statics, not thread-locals: a backend is one thread, and a thread-local in a
/// loaded library costs a `__tls_get_addr` call.
static HINT_TICK: AtomicU64 = AtomicU64::new(u64::MAX);
static HINT_GENERATION: AtomicU64 = AtomicU64::new(0);
static HINT_POSITION: AtomicU64 = AtomicU64::new(0);

/// The id `snowflake_next()` mints from the shards this server owns: the fast path, else the
/// guarded one.
#[inline]
pub fn next_owned_id() -> i64 {
    try_next_owned_id_fast().unwrap_or_else(next_owned_id_guarded)
}

/// The id `snowflake_next()` mints from the owned shards, if the fast path can issue it: a ready
/// backend, a set of owned shards, a shard with room within the lead and below the reservation.
/// Raises nothing and allocates nothing; `None` hands the call to [`next_owned_id_guarded`], with
/// nothing issued.
#[inline]
pub fn try_next_owned_id_fast() -> Option<i64> {
    if !generate::fast_path_open() || guc::default_shard().is_some() {
        return None;
    }
    let layout = guc::layout();
    let tl = Timeline::of(layout);
    let policy = guc::clock_policy();
    let limit = generate::fast_limit(&tl);
    let generation = guc::shard_set_generation();
    let lead_ticks = u64::from(policy.max_lead_ms / tl.tick_ms);
    guc::with_shard_set(|set| {
        // A lost race on a shard's word: read the shards again, a few times, before the slow path.
        for _ in 0..4 {
            let now = clock::now_unix_ns();
            let (_, now_tick) = tl.word_at(now).ok()?;
            // The tick snowflake_next() mints from: the clock's, or the latest one it minted at
            // (on any backend), if that is later. An idle shard's next word lies in the past, and
            // taking it after an id of a later tick would put the new id behind it. Up to the lead
            // behind (a tick borrowed ahead, a clock read a few microseconds earlier near a tick's
            // end, a small step back), the id is minted at that later tick, ahead of this
            // backend's clock; further behind, the clock stepped back, and the slow path judges it.
            let seen = shmem::owned_minted_tick();
            if now_tick.saturating_add(lead_ticks) < seen {
                return None;
            }
            let tick = now_tick.max(seen);
            let hinted =
                HINT_TICK.load(Ordering::Relaxed) == tick && HINT_GENERATION.load(Ordering::Relaxed) == generation;
            let from = if hinted { HINT_POSITION.load(Ordering::Relaxed) } else { 0 };
            let ((position, shard), slot) = pick_from(set, from, tick, tl.low_bits)
                // Nothing with room after the hint: every shard is full in this tick, and the
                // earliest borrowed tick may be on any of them.
                .filter(|(_, slot)| has_room(slot, tick, tl.low_bits) || from == 0)
                .or_else(|| pick_from(set, 0, tick, tl.low_bits))?;
            if tick > now_tick && has_room(slot, tick, tl.low_bits) {
                // As seen: the latest clock reading, never the tick minted at (maybe borrowed).
                slot.raise_to(tick << tl.low_bits, now_tick.max(shmem::owned_clock_tick()), &tl);
            }
            if let Some(m) = monotonic::try_issue_fast(&slot.state, now, &tl, &policy, limit) {
                generate::record_fast(slot, &m, &tl);
                shmem::saw_owned(m.word >> tl.low_bits, now_tick);
                if m.word >> tl.low_bits == tick {
                    HINT_TICK.store(tick, Ordering::Relaxed);
                    HINT_GENERATION.store(generation, Ordering::Relaxed);
                    HINT_POSITION.store(position, Ordering::Relaxed);
                }
                return Some(layout.id_from_word(m.word, shard));
            }
        }
        None
    })
}

/// Whether a shard's next word is in the clock's tick or before it.
#[inline]
fn has_room(slot: &Slot, now_tick: u64, low_bits: u32) -> bool {
    slot.state.next_free.load(Ordering::Relaxed) >> low_bits <= now_tick
}

/// `core::shards::pick` over the owned shards from position `from` on: the position, the shard
/// and its slot.
#[inline]
fn pick_from(set: &ShardSet, from: u64, now_tick: u64, low_bits: u32) -> Option<((u64, u32), &'static Slot)> {
    let slots = set.owned_from(from)?.zip(from..).filter_map(|(s, p)| Some(((p, s), shmem::try_shard_slot(s)?)));
    shards::pick(slots.map(|(ps, slot)| ((ps, slot), slot.state.next_free.load(Ordering::Relaxed))), now_tick, low_bits)
}

/// Whether this backend warned that it mints for `default_shard` on a server whose list is `*`.
static WARNED_UNASSIGNED: AtomicBool = AtomicBool::new(false);

/// The id `snowflake_next()` mints from the owned shards, through the guarded path: the first
/// call of a backend, a set of `*` or a closed fence, `default_shard`, waits and errors.
#[cold]
pub fn next_owned_id_guarded() -> i64 {
    // Without the preload no shard can mint, whatever the list says: say so first, so that the
    // hint names the line that is missing rather than the shard list (at the default '*', fixing
    // the list would only lead to this error).
    if shmem::uuidv7_slot().is_err() {
        errors::raise(errors::not_preloaded());
    }
    let unassigned = guc::with_shard_set(|set| set.owned().is_none());
    match guc::default_shard() {
        // 0.1.0's configuration (a default shard, the list left at '*') keeps minting across an
        // upgrade, with a WARNING once per backend: the shard was chosen, not guessed.
        Some(shard) if unassigned => {
            if !WARNED_UNASSIGNED.swap(true, Ordering::Relaxed) {
                errors::default_shard_without_shards(shard).report(pgrx::PgLogLevel::WARNING);
            }
            return next_id(shard);
        }
        Some(shard) => return next_id(shard),
        None if unassigned => errors::raise(errors::no_owned_shards(guc::layout().shard_count() as u64)),
        None => {}
    }
    let tl = Timeline::of(guc::layout());
    let (_, now_tick) = tl.word_at(clock::now_unix_ns()).unwrap_or((0, 0));
    // A clock behind the latest tick snowflake_next() minted at: pick among the shards as of that tick,
    // and raise the one picked to it, so that next_id() mints at or after it, waiting for the clock
    // (within the lead, not at all) or refusing (58000) as for any step back, instead of an idle
    // shard taking the earlier time.
    let seen = shmem::owned_minted_tick();
    let picked = guc::with_shard_set(|set| pick_from(set, 0, now_tick.max(seen), tl.low_bits));
    match picked {
        Some(((_, shard), slot)) => {
            if now_tick < seen && has_room(slot, seen, tl.low_bits) {
                // As seen: the latest clock reading (a step back shows against it), never the
                // tick minted at, which a borrow may have put ahead of every clock reading.
                slot.raise_to(seen << tl.low_bits, shmem::owned_clock_tick(), &tl);
            }
            let id = next_id(i64::from(shard));
            if let Ok(parts) = guc::layout().decompose(id) {
                shmem::saw_owned(parts.ticks, now_tick);
            }
            id
        }
        // No shard: the fence was closed at start by a list that did not parse, and may have
        // been fixed since.
        None if guc::reopen_fixed_fence() => next_owned_id_guarded(),
        None => errors::raise(errors::no_shard_assigned(&guc::shards_text())),
    }
}

/// The id for `shard` (`snowflake_next(int)`) through the guarded path: the shard's checks, then
/// [`generate::next_word`].
pub fn next_id(shard: i64) -> i64 {
    let layout = guc::layout();
    let shard = layout.shard(shard).unwrap_or_else(|e| errors::raise(errors::id_error(e, layout)));
    let slot = shmem::shard_slot(shard).unwrap_or_else(|_| errors::raise(errors::not_preloaded()));
    // A fence closed at start by an invalid list may have been fixed since (see reopen_fixed_fence).
    let allowed = guc::shard_allowed(shard) || (guc::reopen_fixed_fence() && guc::shard_allowed(shard));
    if !allowed {
        slot.errors.fetch_add(1, Ordering::Relaxed);
        errors::raise(errors::shard_not_assigned(shard, &guc::shards_text()));
    }
    let tl = Timeline::of(layout);
    let word = generate::next_word(slot, &tl, &guc::clock_policy(), Generator::Snowflake { layout, shard });
    layout.id_from_word(word, shard)
}

/// The largest id any shard may have minted under the durable reservation (0 before the first):
/// the last id of the reservation's tick.
///
/// # Errors
/// 55000 without the preload; the layout's error for a reservation outside its range.
pub fn max_id_before_reservation() -> Result<i64, ErrorReport> {
    let (until, _, _) = shmem::reservation_stats().map_err(|_| errors::not_preloaded())?;
    if until <= 0 {
        return Ok(0);
    }
    let layout = guc::layout();
    layout.max_id_at(until).map_err(|e| errors::id_error(e, layout))
}
