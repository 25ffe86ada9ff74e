//! The monotonic (tick, low) state machine shared by every generator, and the clock policy.
//!
//! # The state word
//! Each generator's state is one `u64`, the **next free word**: the smallest word not yet
//! handed out. A word is `(tick << low_bits) | low`, where `low` is the per-tick sequence
//! (snowflake) or the sub-millisecond fraction (UUIDv7). Handing out a word `w` stores `w + 1`.
//! The word read from the clock is `now = (now_tick << low_bits) | now_low`, and the next word
//! is simply
//!
//! ```text
//! w = max(next_free, now)
//! ```
//!
//! which gives every property at once:
//! - **never a repeat:** `w >= next_free`, and the state only grows;
//! - **sequence exhaustion moves on:** `next_free` past the last `low` of a tick *is* the first
//!   word of the next tick, so the generator borrows the next tick instead of wrapping;
//! - **a clock step back cannot go below what was issued:** `w` stays at `next_free`.
//!
//! # The clock policy
//! Borrowing ticks makes the generator run ahead of the wall clock. [`ClockPolicy`] bounds that:
//! `w` may be at most `max_lead_ms` (in whole ticks) ahead of the clock. Past that the call
//! waits until the clock catches up. Why the clock is behind decides how long it may wait
//! ([`judge_wait`]), and the generator can tell, because it also keeps the latest clock tick any
//! minter saw ([`State::seen_tick`]):
//! - **the clock stepped back**: it reads behind a tick it already showed. The call waits at
//!   most `max_wait_ms` (plus one tick, so that a strict `max_lead_ms = 0` can always wait out an
//!   exhausted sequence); a longer step fails closed with [`IssueError::ClockBehind`], reporting
//!   the step as measured on a fresh reading.
//! - **the generator runs ahead**: ticks borrowed by any backend, under whatever lead was in
//!   force then (a lead lowered at reload), or a restart at the reservation. That is no fault,
//!   and the call waits for the clock for as long as the settings can explain: the larger of
//!   `max_wait_ms` and the lead plus the reservation's reach, plus a second
//!   ([`catch_up_budget_ns`]). Further ahead (a clock that stopped, ids advanced far ahead before
//!   a restart) fails at once with [`IssueError::TooFarAhead`] rather than hold the call for
//!   long. No backend's lead can make another backend's call fail.
//!
//! Either way the state is left untouched by a refusal, so no id is lost or repeated. Waits are
//! measured on a monotonic clock, not counted as requested: a sleep may end early or late.
//!
//! [`next_step`] is the pure decision; [`issue`] runs it against a [`State`] with a
//! compare-and-swap loop and an injected [`Clock`].

use std::sync::atomic::{AtomicU64, Ordering};

use super::layout::Layout;
use super::reservation::RESERVE_AHEAD_MS;
use super::share::{self, Light, Reserve};
use super::time::NS_PER_MS;

/// How generator words map onto wall-clock time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeline {
    /// Unix milliseconds of tick 0.
    pub origin_unix_ms: i64,
    /// Length of one tick, in milliseconds.
    pub tick_ms: u32,
    /// Bits below the tick in a word.
    pub low_bits: u32,
    /// The last tick a word may carry.
    pub max_tick: u64,
    /// Whether the clock's position inside the tick fills the low bits (UUIDv7's sub-ms
    /// fraction, RFC 9562 §6.2 method 3) or they start at 0 (a snowflake sequence).
    pub sub_tick_fraction: bool,
}

/// How far the generator may run ahead of the clock, and how long it may wait for it, in
/// milliseconds. The lead is counted in whole ticks, rounded down: a 5 ms lead on 10 ms ticks is
/// strict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockPolicy {
    pub max_lead_ms: u32,
    pub max_wait_ms: u32,
}

/// What the generator does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Hand out this word (store `word + 1`).
    Issue { word: u64, lead_ticks: u64 },
    /// The clock is too far behind `next_free`: sleep this long, then look again.
    Wait { ns: u64 },
}

/// Why no id was issued. None of these changes the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IssueError {
    /// The clock reads `behind_ns` before a tick it already showed (it stepped back), and
    /// catching up would take longer than the policy waits. `last_unix_ns` is the start of the
    /// last issued word's tick.
    ClockBehind { behind_ns: u64, last_unix_ns: i64, now_unix_ns: i64, max_wait_ms: u32 },
    /// The generator runs `ahead_ns` ahead of a clock that did not step back, further than the
    /// call may wait for (`budget_ms`, see [`catch_up_budget_ns`]); it had waited `waited_ns`.
    TooFarAhead { ahead_ns: u64, waited_ns: u64, budget_ms: u64 },
    /// The clock reads before tick 0 (the epoch).
    ClockBeforeOrigin { now_unix_ns: i64 },
    /// The next word would need a tick past `max_tick`: the layout has run out of time.
    TimeExhausted { max_tick: u64 },
    /// The next word lies at or past the durable reservation (`limit_word`): the caller must
    /// extend the reservation past `word_unix_ms`, then mint again. Never shown to users.
    Unreserved { word_unix_ms: i64 },
}

impl Timeline {
    /// The generator timeline of one snowflake shard: ticks of `layout`, the sequence in the low
    /// bits.
    pub const fn of(layout: &Layout) -> Timeline {
        Timeline {
            origin_unix_ms: layout.epoch_unix_ms(),
            tick_ms: layout.widths().tick_ms,
            low_bits: layout.widths().seq_bits,
            max_tick: layout.max_ticks(),
            sub_tick_fraction: false,
        }
    }

    /// How the issued ids of a generator on this timeline are counted.
    pub const fn count(&self) -> IssuedCount {
        IssuedCount { low_bits: self.low_bits }
    }

    /// The largest word the timeline can hold.
    pub const fn max_word(&self) -> u64 {
        (self.max_tick << self.low_bits) | ((1u64 << self.low_bits) - 1)
    }

    const fn tick_ns(&self) -> i128 {
        self.tick_ms as i128 * NS_PER_MS as i128
    }

    /// Unix nanoseconds of the start of a tick.
    fn tick_start_ns(&self, tick: u64) -> i128 {
        i128::from(self.origin_unix_ms) * i128::from(NS_PER_MS) + i128::from(tick) * self.tick_ns()
    }

    /// The first word whose tick starts at or after `unix_ms`: every word below it belongs to a
    /// tick that starts before `unix_ms`. Used both as the reservation limit (words at or past
    /// it need a reservation first) and as the starting state after a restart.
    #[inline]
    pub fn first_word_at(&self, unix_ms: i64) -> u64 {
        let Ok(rel_ms) = u64::try_from(i128::from(unix_ms) - i128::from(self.origin_unix_ms)) else { return 0 };
        // Every id checks the reservation through this: skip the division for 1 ms ticks.
        let tick = if self.tick_ms == 1 { rel_ms } else { rel_ms.div_ceil(u64::from(self.tick_ms)) };
        if tick > self.max_tick {
            return self.max_word() + 1;
        }
        tick << self.low_bits
    }

    /// The tick holding `unix_ms`: 0 before the origin, the last tick past the end.
    pub fn tick_of_unix_ms(&self, unix_ms: i64) -> u64 {
        let rel = (i128::from(unix_ms) - i128::from(self.origin_unix_ms)).max(0);
        u64::try_from(rel / i128::from(self.tick_ms)).unwrap_or(u64::MAX).min(self.max_tick)
    }

    /// Unix milliseconds of the start of a word's tick.
    pub fn word_unix_ms(&self, word: u64) -> i64 {
        let ms = i128::from(self.origin_unix_ms) + i128::from(word >> self.low_bits) * i128::from(self.tick_ms);
        i64::try_from(ms).unwrap_or(i64::MAX)
    }

    /// How far the start of the last issued word's tick lies ahead of the clock (0 if not).
    pub fn ahead_ns(&self, next_free: u64, now_unix_ns: i64) -> u64 {
        if next_free == 0 {
            return 0;
        }
        let last = self.tick_start_ns((next_free - 1) >> self.low_bits);
        u64::try_from(last - i128::from(now_unix_ns)).unwrap_or(0)
    }

    /// The clock's word and tick. The common case (1 ms ticks) divides only by constants, which
    /// compile to multiplications: this runs on every id.
    ///
    /// # Errors
    /// [`IssueError::ClockBeforeOrigin`] when the clock reads before tick 0.
    #[inline]
    pub fn word_at(&self, now_unix_ns: i64) -> Result<(u64, u64), IssueError> {
        let (ms, ns_in_ms) = (now_unix_ns.div_euclid(NS_PER_MS), now_unix_ns.rem_euclid(NS_PER_MS) as u64);
        let Ok(rel_ms) = u64::try_from(ms - self.origin_unix_ms) else {
            return Err(IssueError::ClockBeforeOrigin { now_unix_ns });
        };
        let (tick, low) = if self.tick_ms == 1 {
            // The fraction of the millisecond elapsed, scaled to low_bits (< 2^32, exact in u64).
            let low = if self.sub_tick_fraction { (ns_in_ms << self.low_bits) / NS_PER_MS as u64 } else { 0 };
            (rel_ms, low)
        } else {
            let tick_ms = u64::from(self.tick_ms);
            let ns_in_tick = (rel_ms % tick_ms) * NS_PER_MS as u64 + ns_in_ms;
            let low = if self.sub_tick_fraction {
                ((u128::from(ns_in_tick) << self.low_bits) / (tick_ms as u128 * NS_PER_MS as u128)) as u64
            } else {
                0
            };
            (rel_ms / tick_ms, low)
        };
        // A clock beyond the last tick saturates; next_step then reports TimeExhausted.
        let word = if tick > self.max_tick { u64::MAX } else { (tick << self.low_bits) | low };
        Ok((word, tick))
    }
}

/// One generator's shared state: two words, updated only with atomic instructions.
///
/// - `next_free`, the state word (see the module documentation);
/// - `seen_tick`, the latest clock tick that a minter of this generator read while issuing, or
///   that a restart or an advance asserted. The clock has been there, so a clock reading behind
///   it stepped back; a word ahead of it is one that minters borrowed within their lead. This is
///   what tells a clock step back from a generator that merely runs ahead, whoever made it run
///   ahead and under whatever lead was in force then.
/// - `reserve`, how much of the last tick of the lead the callers past their own share took in
///   the latest tick ([`crate::core::share`]): it decides who may take a word there, never which.
#[derive(Debug, Default)]
#[repr(C)]
pub struct State {
    pub next_free: AtomicU64,
    pub seen_tick: AtomicU64,
    pub reserve: Reserve,
}

impl State {
    /// A state at `next_free`, with the clock seen at `seen_tick`, and nothing of its reserve taken.
    pub const fn new(next_free: u64, seen_tick: u64) -> Self {
        State { next_free: AtomicU64::new(next_free), seen_tick: AtomicU64::new(seen_tick), reserve: Reserve::new() }
    }

    /// Records that a minter read the clock at `tick`. Costs a locked instruction only when the
    /// tick is new, about once per tick.
    #[inline]
    fn saw(&self, tick: u64) {
        if tick > self.seen_tick.load(Ordering::Relaxed) {
            self.seen_tick.fetch_max(tick, Ordering::Relaxed);
        }
    }
}

/// Decides the next word from the state and the clock. Pure: the same inputs give the same
/// step. A [`Step::Wait`] is not judged here: how long a call may wait depends on why the clock
/// is behind, which [`judge_wait`] decides.
///
/// # Errors
/// [`IssueError::ClockBeforeOrigin`], [`IssueError::TimeExhausted`] and
/// [`IssueError::Unreserved`].
#[inline]
pub fn next_step(
    next_free: u64,
    now_unix_ns: i64,
    tl: &Timeline,
    policy: &ClockPolicy,
    limit_word: u64,
) -> Result<Step, IssueError> {
    let (now_word, now_tick) = tl.word_at(now_unix_ns)?;
    let word = next_free.max(now_word);
    if word > tl.max_word() {
        return Err(IssueError::TimeExhausted { max_tick: tl.max_tick });
    }
    // The reservation must cover the word before anything else, waiting included, so that a
    // wait is spent on a word that may then be issued.
    if word >= limit_word {
        return Err(IssueError::Unreserved { word_unix_ms: tl.word_unix_ms(word) });
    }
    let tick = word >> tl.low_bits;
    let lead_ticks = tick.saturating_sub(now_tick);
    // The common case, a word in the clock's own tick, needs no policy arithmetic.
    if lead_ticks == 0 {
        return Ok(Step::Issue { word, lead_ticks });
    }
    let max_lead_ticks = u64::from(policy.max_lead_ms / tl.tick_ms);
    if lead_ticks <= max_lead_ticks {
        return Ok(Step::Issue { word, lead_ticks });
    }
    // Wait until the clock reaches the tick at which `word` is within the lead.
    let target = tl.tick_start_ns(tick - max_lead_ticks);
    Ok(Step::Wait { ns: u64::try_from(target - i128::from(now_unix_ns)).unwrap_or(u64::MAX) })
}

/// Beyond what the settings explain, how long a call may wait for a generator that runs ahead.
pub const MAX_CATCH_UP_SLACK_MS: u64 = 1000;

/// How long one call may wait, in all, for the clock to catch up with a generator that runs ahead
/// of it without a step back: the larger of the rewind wait and the lead plus the reservation's
/// reach (how far ahead a restart can start a generator), plus [`MAX_CATCH_UP_SLACK_MS`].
pub fn catch_up_budget_ns(policy: &ClockPolicy) -> u64 {
    let explained = u64::from(policy.max_wait_ms).max(u64::from(policy.max_lead_ms) + RESERVE_AHEAD_MS as u64);
    (explained + MAX_CATCH_UP_SLACK_MS) * NS_PER_MS as u64
}

/// Why a call waits, and whether it may.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The clock reads behind a tick that minters already saw: it stepped back by `behind_ns`.
    /// Waiting it out counts against `max_rewind_wait`.
    Rewind { behind_ns: u64 },
    /// The generator runs ahead of a clock that has not stepped back: ticks were borrowed
    /// (by this backend or any other, under whatever lead was in force then), or a restart
    /// started it at the reservation. Waiting for the clock is the only way on, and is not a
    /// fault.
    CatchUp,
}

/// Whether a wait of `wait_ns` for a clock reading `now_unix_ns` is allowed: the pure policy of
/// [`issue`]. `seen_tick` is the generator's [`State::seen_tick`], read before the clock;
/// `rewind_waited_ns` and `waited_ns` are the time this call already spent waiting, measured,
/// for a step back and in all.
///
/// A reading one tick behind `seen_tick` is not a step back: clocks of different backends
/// (the TSC extrapolation, a reading taken just before another backend's) may disagree by a
/// few microseconds across a tick boundary.
///
/// # Errors
/// [`IssueError::ClockBehind`] when the step back is longer than the policy waits;
/// [`IssueError::TooFarAhead`] when the clock cannot catch up within [`catch_up_budget_ns`].
pub fn judge_wait(
    tl: &Timeline,
    policy: &ClockPolicy,
    state: (u64, u64),
    now_unix_ns: i64,
    wait_ns: u64,
    waited: (u64, u64),
) -> Result<Verdict, IssueError> {
    let (next_free, seen_tick) = state;
    let (rewind_waited_ns, waited_ns) = waited;
    let seen_ns = tl.tick_start_ns(seen_tick);
    let now = i128::from(now_unix_ns);
    if now < seen_ns - tl.tick_ns() {
        let behind_ns = u64::try_from(seen_ns - now).unwrap_or(u64::MAX);
        if i128::from(rewind_waited_ns) + i128::from(wait_ns) > wait_budget_ns(tl, policy) {
            return Err(IssueError::ClockBehind {
                behind_ns,
                last_unix_ns: i64::try_from(tl.tick_start_ns(next_free.saturating_sub(1) >> tl.low_bits))
                    .unwrap_or(i64::MAX),
                now_unix_ns,
                max_wait_ms: policy.max_wait_ms,
            });
        }
        return Ok(Verdict::Rewind { behind_ns });
    }
    let budget = catch_up_budget_ns(policy);
    if u128::from(waited_ns) + u128::from(wait_ns) > u128::from(budget) {
        let ahead_ns = tl.ahead_ns(next_free, now_unix_ns);
        return Err(IssueError::TooFarAhead { ahead_ns, waited_ns, budget_ms: budget / NS_PER_MS as u64 });
    }
    Ok(Verdict::CatchUp)
}

/// The longest the generator waits for a clock that stepped back, in one call: the policy's
/// limit plus one tick, so that even `max_wait_ms = 0` can wait out an exhausted sequence.
fn wait_budget_ns(tl: &Timeline, policy: &ClockPolicy) -> i128 {
    i128::from(policy.max_wait_ms) * i128::from(NS_PER_MS) + tl.tick_ns()
}

/// A source of wall-clock time that can also sleep. Production reads `CLOCK_REALTIME`; tests
/// inject a fake one.
pub trait Clock {
    /// Nanoseconds since 1970-01-01 00:00:00 UTC.
    fn now_unix_ns(&mut self) -> i64;
    /// A clock that only moves forward (`CLOCK_MONOTONIC`), to measure how long waits really
    /// took: a sleep may end early (a signal) or late (the scheduler), and the wall clock may
    /// step meanwhile.
    fn monotonic_ns(&mut self) -> u64;
    /// Sleeps for about `ns` nanoseconds, or less when interrupted (the caller measures).
    fn sleep_ns(&mut self, ns: u64);
}

/// The outcome of one successful [`issue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Issued {
    pub word: u64,
    /// Ticks the word is ahead of the clock at the moment it was issued.
    pub lead_ticks: u64,
    /// Time spent waiting for the clock, measured.
    pub waited_ns: u64,
    /// How far the clock read behind a tick minters had already seen, at worst during the call:
    /// a clock step back (0 when there was none). A generator that merely runs ahead is not one.
    pub behind_ns: u64,
    /// What the generator's issued counter must absorb for this word: 0 for a word that
    /// follows its predecessor within a tick, which is almost every snowflake call. See
    /// [`IssuedCount`].
    pub count_adjust: u64,
}

/// Counting the words a generator issued without a per-id atomic counter.
///
/// The state word already counts the ids of its current tick: the last issued word's position in
/// its tick, plus one ([`IssuedCount::carried`]). A counter `base` holds the rest, so that
///
/// ```text
/// issued = base + carried(next_free)        (mod 2^64)
/// ```
///
/// Issuing `w` from state `prev` must raise that by exactly one, so `base` absorbs
/// `1 + carried(prev) - carried(w + 1)`, which is 0 whenever `w` directly follows the last issued
/// word inside a tick. Only the first id of a tick, or a word the clock moved forward, touches
/// `base`: for a snowflake sequence that is one atomic add per tick instead of one per id (UUIDv7,
/// whose word follows the clock's sub-millisecond fraction, adds whenever the clock moved it).
/// Every change of the state is paid for in `base` by whoever made it, so the count is exact once
/// minting pauses; while it runs, a reader may catch a minter between its compare-and-swap and its
/// add, and be off by less than one tick's words. A reset stores a new `base` and cannot see such
/// a pending add either: one that races a minter entering a new tick leaves the count off by less
/// than a tick's words until the next reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IssuedCount {
    pub low_bits: u32,
}

impl IssuedCount {
    /// The ids of the current tick, as far as the state word tells: the last issued word's
    /// position in its tick, plus one.
    pub const fn carried(self, next_free: u64) -> u64 {
        (next_free.wrapping_sub(1) & ((1 << self.low_bits) - 1)) + 1
    }

    /// The `base` that counts zero ids at state `next_free`: the start, or a reset.
    pub const fn base_at(self, next_free: u64) -> u64 {
        0u64.wrapping_sub(self.carried(next_free))
    }

    /// What `base` absorbs when word `word` is issued from state `prev`.
    pub const fn on_issue(self, prev: u64, word: u64) -> u64 {
        1u64.wrapping_add(self.carried(prev)).wrapping_sub(self.carried(word + 1))
    }

    /// What `base` absorbs when the state is raised from `prev` to `new` without issuing.
    pub const fn on_raise(self, prev: u64, new: u64) -> u64 {
        self.carried(prev).wrapping_sub(self.carried(new))
    }

    /// The ids issued. A reader that caught a statistics reset halfway reads 0, never a
    /// wrapped-around count.
    pub const fn issued(self, base: u64, next_free: u64) -> u64 {
        let n = base.wrapping_add(self.carried(next_free));
        if n > i64::MAX as u64 {
            0
        } else {
            n
        }
    }
}

/// Hands out the next word of the generator whose state is `state`, waiting for the clock when
/// the policy says so. Lock-free: concurrent callers race on one compare-and-swap, and the
/// loser retries with the winner's state. No call ever returns a word another call returned.
///
/// # Errors
/// See [`IssueError`]. Waits are measured with [`Clock::monotonic_ns`], so a sleep cut short by
/// a signal costs only the time it took, and one that overran counts in full.
///
/// The caller is the one backend of its server (see [`issue_within`] for others).
#[inline]
pub fn issue(
    state: &State,
    clock: &mut impl Clock,
    tl: &Timeline,
    policy: &ClockPolicy,
    limit_word: u64,
) -> Result<Issued, IssueError> {
    let minter = Minter { light: &Light::new(), backends: 1 };
    issue_within(state, clock, tl, policy, limit_word, &mut Waited::default(), &minter)
}

/// Who mints, for the reserve's share-out ([`crate::core::share`]): the backend's own use of the
/// reserve, and how many backends the server has.
#[derive(Clone, Copy, Debug)]
pub struct Minter<'a> {
    pub light: &'a Light,
    pub backends: u32,
}

/// The time one call has waited so far. A caller that retries [`issue_within`] after renewing the
/// reservation passes the same one, so that the call's wait budget holds for the whole call and
/// never starts again at a renewal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Waited {
    /// Everything slept, measured on the monotonic clock.
    pub total_ns: u64,
    /// The part of it slept for a clock that stepped back.
    pub rewind_ns: u64,
    /// The largest step back seen.
    pub behind_ns: u64,
}

/// [`issue`] for `minter`, counting the waits into `waited`, which may hold earlier attempts' of
/// the same call. A word in the last tick of the lead is the minter's only within its share
/// ([`crate::core::share`]).
#[inline]
pub fn issue_within(
    state: &State,
    clock: &mut impl Clock,
    tl: &Timeline,
    policy: &ClockPolicy,
    limit_word: u64,
    waited: &mut Waited,
    minter: &Minter<'_>,
) -> Result<Issued, IssueError> {
    let now = clock.now_unix_ns();
    match try_issue_fast(state, now, tl, policy, limit_word) {
        Some(m) => Ok(Issued { waited_ns: waited.total_ns, behind_ns: waited.behind_ns, ..m }),
        None => issue_slow(state, clock, tl, policy, limit_word, now, waited, minter),
    }
}

/// The lead a word may have with no share of the reserve: all of it but the reserve, the last
/// tick ([`share::reserve_ticks`]).
#[inline]
fn free_lead_ticks(tl: &Timeline, policy: &ClockPolicy) -> u64 {
    let lead = u64::from(policy.max_lead_ms / tl.tick_ms);
    lead - share::reserve_ticks(lead)
}

/// The fast path, taken by almost every call: the next word is within the lead, short of its
/// reserve, and below the reservation, where [`next_step`] would say Issue, and no other backend
/// got in first.
/// `None` means "take the general path"; nothing was issued then. Within the lead the clock is
/// behind the last tick by at most the lead, which is not a step back: `behind_ns` is 0.
#[inline]
pub fn try_issue_fast(
    state: &State,
    now_unix_ns: i64,
    tl: &Timeline,
    policy: &ClockPolicy,
    limit_word: u64,
) -> Option<Issued> {
    let next_free = state.next_free.load(Ordering::Acquire);
    let (now_word, now_tick) = tl.word_at(now_unix_ns).ok()?;
    let word = next_free.max(now_word);
    let lead_ticks = (word >> tl.low_bits).saturating_sub(now_tick);
    // Relaxed would do for uniqueness (all RMWs on one word are totally ordered);
    // AcqRel costs nothing extra on x86-64 and keeps the reasoning simple.
    let issued = word <= tl.max_word()
        && word < limit_word
        && (lead_ticks == 0 || lead_ticks <= free_lead_ticks(tl, policy))
        && state.next_free.compare_exchange(next_free, word + 1, Ordering::AcqRel, Ordering::Acquire).is_ok();
    if !issued {
        return None;
    }
    state.saw(now_tick);
    Some(Issued { word, lead_ticks, waited_ns: 0, behind_ns: 0, count_adjust: tl.count().on_issue(next_free, word) })
}

/// Everything else: a lost race, a borrowed tick, the reserve, a wait, an error. Kept out of line
/// so the fast path stays small.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn issue_slow(
    state: &State,
    clock: &mut impl Clock,
    tl: &Timeline,
    policy: &ClockPolicy,
    limit_word: u64,
    mut now: i64,
    waited: &mut Waited,
    minter: &Minter<'_>,
) -> Result<Issued, IssueError> {
    let free_lead = free_lead_ticks(tl, policy);
    // The lead of a caller the reserve is refused to: up to the reserve, where it waits.
    let held = ClockPolicy { max_lead_ms: (free_lead * u64::from(tl.tick_ms)) as u32, ..*policy };
    let (backends, low_bits) = (minter.backends, tl.low_bits);
    let (light_quota, heavy_cap) = (share::light_quota(low_bits, backends), share::heavy_cap(low_bits, backends));
    let now_tick = |now: i64| tl.word_at(now).map_or(0, |(_, t)| t);
    let mut next_free = state.next_free.load(Ordering::Acquire);
    loop {
        // A word in the reserve is this caller's only within its share; otherwise it waits as at
        // the end of the free lead.
        let mut lead = policy;
        let mut step = next_step(next_free, now, tl, lead, limit_word)?;
        let mut admission = None;
        if let Step::Issue { lead_ticks, .. } = step {
            if lead_ticks > free_lead {
                admission = state.reserve.admit(minter.light, now_tick(now), light_quota, heavy_cap);
                if admission.is_none() {
                    lead = &held;
                    step = next_step(next_free, now, tl, lead, limit_word)?;
                }
            }
        }
        match step {
            Step::Issue { word, lead_ticks } => {
                match state.next_free.compare_exchange_weak(next_free, word + 1, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        if let Some(a) = admission {
                            Reserve::taken(minter.light, a);
                        }
                        if let Ok((_, now_tick)) = tl.word_at(now) {
                            state.saw(now_tick);
                        }
                        let count_adjust = tl.count().on_issue(next_free, word);
                        return Ok(Issued {
                            word,
                            lead_ticks,
                            waited_ns: waited.total_ns,
                            behind_ns: waited.behind_ns,
                            count_adjust,
                        });
                    }
                    Err(actual) => {
                        if let Some(a) = admission {
                            state.reserve.lost(a);
                        }
                        next_free = actual;
                    }
                }
            }
            Step::Wait { .. } => {
                // Judge on a clock read after `seen_tick`: every tick a minter recorded there was
                // read before this reading, so only a clock that really stepped back reads
                // behind it. The same fresh reading decides a refusal and the size it reports.
                let seen_tick = state.seen_tick.load(Ordering::Acquire);
                now = clock.now_unix_ns();
                next_free = state.next_free.load(Ordering::Acquire);
                let Step::Wait { ns } = next_step(next_free, now, tl, lead, limit_word)? else {
                    continue;
                };
                let so_far = (waited.rewind_ns, waited.total_ns);
                let verdict = judge_wait(tl, policy, (next_free, seen_tick), now, ns, so_far)?;
                let start = clock.monotonic_ns();
                clock.sleep_ns(ns);
                let slept = clock.monotonic_ns().saturating_sub(start);
                waited.total_ns = waited.total_ns.saturating_add(slept);
                if let Verdict::Rewind { behind_ns: b } = verdict {
                    waited.rewind_ns = waited.rewind_ns.saturating_add(slept);
                    waited.behind_ns = waited.behind_ns.max(b);
                }
                next_free = state.next_free.load(Ordering::Acquire);
                now = clock.now_unix_ns();
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod fake {
    use super::Clock;

    /// A clock that only moves when told to, or when someone sleeps on it. `script` lets a test
    /// step the clock (forwards or back) on given reads.
    #[derive(Debug, Default)]
    pub struct FakeClock {
        pub now_ns: i64,
        /// The monotonic clock: moves only by the time actually slept.
        pub mono_ns: u64,
        pub slept_ns: Vec<u64>,
        /// When set, a sleep ends after at most this long, as if a signal woke it.
        pub interrupt_after_ns: Option<u64>,
        /// (read number, new time): on that read the clock jumps to the new time.
        pub script: Vec<(usize, i64)>,
        pub reads: usize,
    }

    impl FakeClock {
        pub fn at(now_ns: i64) -> Self {
            FakeClock { now_ns, ..Default::default() }
        }
    }

    impl Clock for FakeClock {
        fn now_unix_ns(&mut self) -> i64 {
            if let Some(&(_, t)) = self.script.iter().find(|(n, _)| *n == self.reads) {
                self.now_ns = t;
            }
            self.reads += 1;
            self.now_ns
        }
        fn monotonic_ns(&mut self) -> u64 {
            self.mono_ns
        }
        fn sleep_ns(&mut self, ns: u64) {
            self.slept_ns.push(ns);
            let ns = self.interrupt_after_ns.map_or(ns, |cut| ns.min(cut));
            self.now_ns += ns as i64;
            self.mono_ns += ns;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeClock;
    use super::*;

    const MS: i64 = NS_PER_MS;
    /// The default snowflake timeline: 1 ms ticks, 9 sequence bits, 41 time bits, epoch 0.
    const TL: Timeline =
        Timeline { origin_unix_ms: 0, tick_ms: 1, low_bits: 9, max_tick: (1 << 41) - 1, sub_tick_fraction: false };
    const STRICT: ClockPolicy = ClockPolicy { max_lead_ms: 0, max_wait_ms: 1000 };
    const LEAD5: ClockPolicy = ClockPolicy { max_lead_ms: 5, max_wait_ms: 1000 };
    /// No reservation limit.
    const NO_LIMIT: u64 = u64::MAX;

    fn tick_seq(word: u64) -> (u64, u64) {
        (word >> 9, word & 511)
    }

    #[test]
    fn a_fresh_state_starts_at_the_clock() {
        let s = State::new(0, 0);
        let mut c = FakeClock::at(100 * MS + 123);
        let m = issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap();
        assert_eq!(m.word, 100 << 9);
        assert_eq!((m.lead_ticks, m.waited_ns, m.behind_ns), (0, 0, 0));
        assert_eq!(s.next_free.load(Ordering::Relaxed), (100 << 9) + 1);
    }

    #[test]
    fn the_epoch_itself_is_tick_zero() {
        let s = State::new(0, 0);
        let mut c = FakeClock::at(0);
        assert_eq!(issue(&s, &mut c, &TL, &STRICT, NO_LIMIT).unwrap().word, 0);
        assert_eq!(issue(&s, &mut c, &TL, &STRICT, NO_LIMIT).unwrap().word, 1);
        let mut before = FakeClock::at(-1);
        assert_eq!(
            issue(&State::new(0, 0), &mut before, &TL, &STRICT, NO_LIMIT),
            Err(IssueError::ClockBeforeOrigin { now_unix_ns: -1 })
        );
    }

    #[test]
    fn words_strictly_increase_and_follow_the_clock() {
        let s = State::new(0, 0);
        let mut c = FakeClock::at(7 * MS);
        let mut prev = None;
        for step in 0..2000 {
            if step % 300 == 0 {
                c.now_ns += MS; // the clock moves on now and then
            }
            let w = issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap().word;
            if let Some(p) = prev {
                assert!(w > p, "{w} after {p}");
            }
            prev = Some(w);
        }
        // A later millisecond sorts after everything before it.
        c.now_ns = 1000 * MS;
        let w = issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap().word;
        assert_eq!(tick_seq(w), (1000, 0));
    }

    #[test]
    fn exactly_512_ids_per_ms_and_the_513th_moves_to_the_next_ms() {
        let s = State::new(0, 0);
        let mut c = FakeClock::at(42 * MS);
        for seq in 0..512 {
            let m = issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap();
            assert_eq!(tick_seq(m.word), (42, seq));
            assert_eq!(m.lead_ticks, 0);
        }
        let m = issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap();
        assert_eq!(tick_seq(m.word), (43, 0));
        assert_eq!(m.lead_ticks, 1);
        assert!(c.slept_ns.is_empty(), "a lead of 1 ms is within 5 ms: no wait");
    }

    #[test]
    fn the_lead_bound_forces_a_wait() {
        let s = State::new(0, 0);
        // 0.25 ms into tick 10. Ticks 10..=15 (the clock's tick plus a lead of 5) fit without
        // waiting.
        let mut c = FakeClock::at(10 * MS + 250_000);
        for _ in 0..6 * 512 {
            issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap();
        }
        assert!(c.slept_ns.is_empty());
        // Tick 16 is 6 ticks ahead: wait until the clock reaches tick 11, 0.75 ms from now.
        let m = issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap();
        assert_eq!(tick_seq(m.word), (16, 0));
        assert_eq!(c.slept_ns, vec![750_000]);
        assert_eq!(m.waited_ns, 750_000);
        assert_eq!(m.lead_ticks, 5);
    }

    #[test]
    fn strict_mode_waits_for_the_next_ms_when_the_sequence_runs_out() {
        let s = State::new(0, 0);
        let mut c = FakeClock::at(5 * MS + 900_000);
        for _ in 0..512 {
            issue(&s, &mut c, &TL, &STRICT, NO_LIMIT).unwrap();
        }
        let m = issue(&s, &mut c, &TL, &STRICT, NO_LIMIT).unwrap();
        assert_eq!(tick_seq(m.word), (6, 0));
        assert_eq!(c.slept_ns, vec![100_000]);
        // Even a zero wait budget may wait out one tick.
        let s = State::new(0, 0);
        let zero = ClockPolicy { max_lead_ms: 0, max_wait_ms: 0 };
        let mut c = FakeClock::at(5 * MS);
        for _ in 0..513 {
            issue(&s, &mut c, &TL, &zero, NO_LIMIT).unwrap();
        }
        assert_eq!(c.slept_ns, vec![MS as u64]);
    }

    #[test]
    fn waits_for_an_exhausted_sequence_are_not_a_clock_step_back() {
        // max_rewind_wait = 0, and another backend keeps taking the next tick while we wait: the
        // repeated exhaustion waits must not be reported as "clock moved backwards".
        let s = State::new(0, 0);
        let zero = ClockPolicy { max_lead_ms: 0, max_wait_ms: 0 };
        let mut c = FakeClock::at(5 * MS);
        for _ in 0..512 {
            issue(&s, &mut c, &TL, &zero, NO_LIMIT).unwrap();
        }
        // Simulate the rival: whenever we sleep into a tick, it has already used that tick up.
        struct Rival<'a> {
            clock: FakeClock,
            state: &'a State,
            rounds: u32,
        }
        impl Clock for Rival<'_> {
            fn now_unix_ns(&mut self) -> i64 {
                self.clock.now_unix_ns()
            }
            fn monotonic_ns(&mut self) -> u64 {
                self.clock.monotonic_ns()
            }
            fn sleep_ns(&mut self, ns: u64) {
                self.clock.sleep_ns(ns);
                if self.rounds > 0 {
                    self.rounds -= 1;
                    let tick = (self.clock.now_ns / MS) as u64;
                    self.state.next_free.store((tick + 1) << 9, Ordering::Relaxed);
                }
            }
        }
        let mut r = Rival { clock: c, state: &s, rounds: 3 };
        let m = issue(&s, &mut r, &TL, &zero, NO_LIMIT).unwrap();
        assert_eq!(tick_seq(m.word), (9, 0), "after three lost ticks, the fourth");
        assert_eq!(m.behind_ns, 0, "no step back was seen");
    }

    #[test]
    fn a_small_step_back_is_waited_out_without_a_repeat() {
        let s = State::new(0, 0);
        let mut c = FakeClock::at(1000 * MS);
        let before = issue(&s, &mut c, &TL, &STRICT, NO_LIMIT).unwrap().word;
        assert_eq!(tick_seq(before), (1000, 0));
        c.now_ns = 995 * MS + 400_000; // NTP steps back 4.6 ms
        let after = issue(&s, &mut c, &TL, &STRICT, NO_LIMIT).unwrap();
        assert!(after.word > before);
        // Strict: the id in tick 1000 may only be issued once the clock reads tick 1000 again.
        assert_eq!(tick_seq(after.word), (1000, 1));
        assert_eq!(c.slept_ns, vec![4_600_000]);
        // With a lead, a step back within the lead needs no wait at all.
        let mut c2 = FakeClock::at(998 * MS);
        let m = issue(&s, &mut c2, &TL, &LEAD5, NO_LIMIT).unwrap();
        assert_eq!((tick_seq(m.word), m.lead_ticks, m.waited_ns), ((1000, 2), 2, 0));
    }

    #[test]
    fn a_large_step_back_fails_closed_and_leaves_the_state_alone() {
        let s = State::new(0, 0);
        let mut c = FakeClock::at(10_000 * MS);
        let before = issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap().word;
        let state = s.next_free.load(Ordering::Relaxed);
        c.now_ns = 5_000 * MS; // back 5 s: more than the 1 s the policy waits
        let err = issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap_err();
        assert_eq!(
            err,
            IssueError::ClockBehind {
                behind_ns: 5_000 * MS as u64,
                last_unix_ns: 10_000 * MS,
                now_unix_ns: 5_000 * MS,
                max_wait_ms: 1000
            }
        );
        assert!(c.slept_ns.is_empty(), "fails at once, without waiting");
        assert_eq!(s.next_free.load(Ordering::Relaxed), state, "a refusal changes nothing");
        // Once the clock is back, generation resumes above the old id.
        c.now_ns = 10_000 * MS;
        assert!(issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap().word > before);
    }

    #[test]
    fn a_clock_that_keeps_stepping_back_while_we_wait_is_refused() {
        let s = State::new(0, 0);
        let mut c = FakeClock::at(2000 * MS);
        issue(&s, &mut c, &TL, &STRICT, NO_LIMIT).unwrap();
        // Back 0.9 s; after each sleep the clock is thrown back to the same point.
        c.now_ns = 1100 * MS;
        c.script = (1..10).map(|r| (r, 1100 * MS)).collect();
        c.reads = 0;
        let err = issue(&s, &mut c, &TL, &STRICT, NO_LIMIT).unwrap_err();
        assert!(matches!(err, IssueError::ClockBehind { .. }), "{err:?}");
        assert_eq!(c.slept_ns, vec![900 * MS as u64], "waited once, then gave up");
    }

    #[test]
    fn the_last_representable_tick_then_an_error_never_a_wrap() {
        let tl = Timeline { max_tick: 3, ..TL };
        let s = State::new(0, 0);
        let mut c = FakeClock::at(3 * MS);
        for seq in 0..512 {
            assert_eq!(tick_seq(issue(&s, &mut c, &tl, &LEAD5, NO_LIMIT).unwrap().word), (3, seq));
        }
        assert_eq!(issue(&s, &mut c, &tl, &LEAD5, NO_LIMIT), Err(IssueError::TimeExhausted { max_tick: 3 }));
        // A clock past the end is refused too, with a fresh state.
        let mut late = FakeClock::at(4 * MS);
        assert_eq!(
            issue(&State::new(0, 0), &mut late, &tl, &LEAD5, NO_LIMIT),
            Err(IssueError::TimeExhausted { max_tick: 3 })
        );
    }

    #[test]
    fn the_reservation_limit_is_never_crossed() {
        let s = State::new(0, 0);
        let mut c = FakeClock::at(100 * MS);
        // Reserved up to (not including) 100 ms: nothing in tick 100 may be issued yet.
        let limit = TL.first_word_at(100);
        assert_eq!(issue(&s, &mut c, &TL, &LEAD5, limit), Err(IssueError::Unreserved { word_unix_ms: 100 }));
        assert_eq!(s.next_free.load(Ordering::Relaxed), 0, "nothing was issued");
        // Reserved up to 101 ms: the 512 ids of tick 100, then tick 101 needs more.
        let limit = TL.first_word_at(101);
        for seq in 0..512 {
            assert_eq!(tick_seq(issue(&s, &mut c, &TL, &LEAD5, limit).unwrap().word), (100, seq));
        }
        assert_eq!(issue(&s, &mut c, &TL, &LEAD5, limit), Err(IssueError::Unreserved { word_unix_ms: 101 }));
        assert_eq!(tick_seq(issue(&s, &mut c, &TL, &LEAD5, TL.first_word_at(102)).unwrap().word), (101, 0));
    }

    #[test]
    fn first_word_at_rounds_up_to_a_whole_tick() {
        let sony = Timeline { origin_unix_ms: 1000, tick_ms: 10, low_bits: 8, max_tick: 100, sub_tick_fraction: false };
        assert_eq!(sony.first_word_at(0), 0, "before the epoch");
        assert_eq!(sony.first_word_at(1000), 0);
        assert_eq!(sony.first_word_at(1001), 1 << 8, "1001 ms lies inside tick 0, so tick 1 is the first after");
        assert_eq!(sony.first_word_at(1010), 1 << 8);
        assert_eq!(sony.word_unix_ms(1 << 8 | 77), 1010);
        assert_eq!(sony.first_word_at(1000 + 101 * 10), sony.max_word() + 1, "past the last tick");
    }

    #[test]
    fn after_a_restart_ids_start_at_the_reservation_whatever_the_clock() {
        // The state restarts at the reservation (2000 ms) while the clock reads 1500 ms: the
        // half-second gap is waited out, and the first id is at 2000 ms.
        let s = State::new(TL.first_word_at(2000), 0);
        let mut c = FakeClock::at(1500 * MS);
        let m = issue(&s, &mut c, &TL, &LEAD5, TL.first_word_at(2500)).unwrap();
        assert_eq!(tick_seq(m.word), (2000, 0));
        assert_eq!(c.slept_ns, vec![495 * MS as u64], "waits until the word is within the 5 ms lead");
        // Ten seconds back is more than max_rewind_wait: refused, nothing issued. The restart
        // starts `seen_tick` at the clock of the reservation's last write (11.5 s), so the clock
        // is known to have stepped back.
        let s = State::new(TL.first_word_at(12_000), 11_500);
        let mut c = FakeClock::at(2000 * MS);
        assert!(matches!(issue(&s, &mut c, &TL, &LEAD5, u64::MAX), Err(IssueError::ClockBehind { .. })));
        assert_eq!(s.next_free.load(Ordering::Relaxed), TL.first_word_at(12_000));
    }

    #[test]
    fn a_step_back_is_reported_in_the_outcome() {
        let s = State::new(0, 0);
        let mut c = FakeClock::at(1000 * MS);
        assert_eq!(issue(&s, &mut c, &TL, &STRICT, NO_LIMIT).unwrap().behind_ns, 0);
        c.now_ns = 990 * MS;
        let m = issue(&s, &mut c, &TL, &STRICT, NO_LIMIT).unwrap();
        assert_eq!((m.behind_ns, m.waited_ns), (10 * MS as u64, 10 * MS as u64));
    }

    #[test]
    fn a_generator_run_ahead_by_another_lead_is_caught_up_with_never_a_step_back() {
        // Minters under a 10 s lead (a setting since lowered at reload) pushed the generator
        // 1.5 s ahead of a clock that never stepped back. A call under the 5 ms lead and the 1 s
        // rewind budget waits for the clock (its catch-up budget is 2 s): no ClockBehind, no step
        // back recorded.
        let s = State::new(0, 0);
        let mut c = FakeClock::at(1000 * MS);
        let ten_s = ClockPolicy { max_lead_ms: 10_000, max_wait_ms: 1000 };
        issue(&s, &mut c, &TL, &ten_s, NO_LIMIT).unwrap();
        s.next_free.store(TL.first_word_at(2500), Ordering::Relaxed);
        let m = issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap();
        assert_eq!(tick_seq(m.word), (2500, 0));
        assert_eq!(m.behind_ns, 0, "running ahead is not a clock step back");
        assert_eq!(m.waited_ns, 1495 * MS as u64, "waited until the word was within its own 5 ms lead");
        // Five seconds ahead is more than the settings explain: refused at once, as too far
        // ahead, not as a step back.
        s.next_free.store(TL.first_word_at(7600), Ordering::Relaxed);
        let err = issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap_err();
        assert!(matches!(err, IssueError::TooFarAhead { .. }), "{err:?}");
        // Once the clock really steps back, a long step is refused as one.
        c.now_ns = 7600 * MS;
        issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap();
        c.now_ns -= 5000 * MS;
        let err = issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap_err();
        assert!(matches!(err, IssueError::ClockBehind { behind_ns, .. } if behind_ns == 5000 * MS as u64), "{err:?}");
    }

    #[test]
    fn a_sleep_cut_short_costs_only_the_time_it_took() {
        // The clock stepped back 900 ms, within the 1 s budget, and every sleep is cut short
        // after 1 ms (signals). Counting the sleeps asked for would give up after the second;
        // measuring them waits the 900 ms out.
        let s = State::new(0, 0);
        let mut c = FakeClock::at(2000 * MS);
        let before = issue(&s, &mut c, &TL, &STRICT, NO_LIMIT).unwrap().word;
        c.now_ns = 1100 * MS;
        c.interrupt_after_ns = Some(MS as u64);
        let m = issue(&s, &mut c, &TL, &STRICT, NO_LIMIT).unwrap();
        assert!(m.word > before);
        assert_eq!(m.waited_ns, 900 * MS as u64);
        assert_eq!(c.slept_ns.len(), 900, "900 sleeps of 1 ms each");
        assert_eq!(m.behind_ns, 900 * MS as u64);
    }

    #[test]
    fn an_overlong_sleep_counts_in_full() {
        // Each sleep overruns threefold (the scheduler), and the clock keeps stepping back to the
        // same point, 400 ms behind. Counting the sleeps asked for (400 ms, then 800 ms) would
        // sleep twice within the 1 s budget; measured, the first sleep took 1.2 s, so the call
        // is refused at once, reporting the step measured on a fresh reading.
        struct Slow(FakeClock);
        impl Clock for Slow {
            fn now_unix_ns(&mut self) -> i64 {
                self.0.now_unix_ns()
            }
            fn monotonic_ns(&mut self) -> u64 {
                self.0.monotonic_ns()
            }
            fn sleep_ns(&mut self, ns: u64) {
                self.0.slept_ns.push(ns);
                self.0.mono_ns += 3 * ns;
                self.0.now_ns = 1600 * MS; // stepped back again
            }
        }
        let s = State::new(0, 0);
        let mut c = Slow(FakeClock::at(2000 * MS));
        issue(&s, &mut c, &TL, &STRICT, NO_LIMIT).unwrap();
        c.0.now_ns = 1600 * MS;
        let err = issue(&s, &mut c, &TL, &STRICT, NO_LIMIT).unwrap_err();
        assert_eq!(
            err,
            IssueError::ClockBehind {
                behind_ns: 400 * MS as u64,
                last_unix_ns: 2000 * MS,
                now_unix_ns: 1600 * MS,
                max_wait_ms: 1000
            }
        );
        assert_eq!(c.0.slept_ns, vec![400 * MS as u64], "one overlong sleep, then the refusal");
    }

    /// A clock that stopped: sleeping moves only the monotonic clock.
    struct Stopped(FakeClock);
    impl Clock for Stopped {
        fn now_unix_ns(&mut self) -> i64 {
            self.0.now_ns
        }
        fn monotonic_ns(&mut self) -> u64 {
            self.0.mono_ns
        }
        fn sleep_ns(&mut self, ns: u64) {
            self.0.slept_ns.push(ns);
            self.0.mono_ns += ns;
        }
    }

    #[test]
    fn a_clock_that_stopped_is_refused_as_too_far_ahead_never_as_a_zero_step() {
        // The generator runs 300 ms ahead (a restart at the reservation) of a clock that then
        // stops: the call waits up to its catch-up budget (2 s here), then gives up, saying so.
        let s = State::new(TL.first_word_at(1300), 1000);
        let mut c = Stopped(FakeClock::at(1000 * MS));
        let err = issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap_err();
        let IssueError::TooFarAhead { ahead_ns, waited_ns, budget_ms } = err else { panic!("{err:?}") };
        assert_eq!(ahead_ns, 299 * MS as u64, "the last word issued, 1299 ms, is 299 ms ahead");
        assert_eq!(budget_ms, 2000, "max(1 s rewind wait, 5 ms lead + 500 ms reservation) + 1 s");
        assert!((1500 * MS as u64..=2000 * MS as u64).contains(&waited_ns), "{waited_ns}");
    }

    #[test]
    fn one_call_has_one_wait_budget_across_its_attempts() {
        let light = Light::new();
        let lone = Minter { light: &light, backends: 1 };
        // A clock that stopped, a generator 300 ms ahead of it, and a call that retries after each
        // renewal of the reservation (`issue_within` with the same `Waited`): the first attempt
        // waits most of the 2 s budget; a second attempt of the same call may not wait it again.
        let s = State::new(TL.first_word_at(1300), 1000);
        let mut c = Stopped(FakeClock::at(1000 * MS));
        let mut waited = Waited::default();
        assert!(issue_within(&s, &mut c, &TL, &LEAD5, NO_LIMIT, &mut waited, &lone).is_err());
        let first = waited.total_ns;
        assert!(first >= 1500 * MS as u64, "{first}");
        let err = issue_within(&s, &mut c, &TL, &LEAD5, NO_LIMIT, &mut waited, &lone).unwrap_err();
        assert!(matches!(err, IssueError::TooFarAhead { .. }), "{err:?}");
        assert!(waited.total_ns <= 2000 * MS as u64, "the call waited {} ms in all", waited.total_ns / MS as u64);
        // A new call starts with a budget of its own.
        let mut fresh = Waited::default();
        assert!(issue_within(&s, &mut c, &TL, &LEAD5, NO_LIMIT, &mut fresh, &lone).is_err());
        assert!(fresh.total_ns >= 1500 * MS as u64);
    }

    #[test]
    fn a_generator_far_ahead_of_a_clock_that_never_stepped_back_is_refused_at_once() {
        // snowflake_id_advance an hour ahead, then a restart: the generators start at the
        // reservation, an hour past the clock, which (as far as the restart knows) never showed
        // that time. No setting explains waiting an hour: refused at once, nothing issued.
        let s = State::new(TL.first_word_at(3_601_000), 1000);
        let mut c = FakeClock::at(1000 * MS);
        let err = issue(&s, &mut c, &TL, &LEAD5, NO_LIMIT).unwrap_err();
        assert!(matches!(err, IssueError::TooFarAhead { waited_ns: 0, .. }), "{err:?}");
        assert!(c.slept_ns.is_empty());
        assert_eq!(s.next_free.load(Ordering::Relaxed), TL.first_word_at(3_601_000));
    }

    #[test]
    fn sub_tick_fraction_fills_the_low_bits() {
        // UUIDv7's timeline: 1 ms ticks, a 12-bit fraction.
        let tl =
            Timeline { origin_unix_ms: 0, tick_ms: 1, low_bits: 12, max_tick: (1 << 48) - 1, sub_tick_fraction: true };
        assert_eq!(tl.word_at(7 * MS + 500_000), Ok(((7 << 12) | 2048, 7)));
        assert_eq!(tl.word_at(7 * MS + 999_999), Ok(((7 << 12) | 4095, 7)));
        let s = State::new(0, 0);
        let mut c = FakeClock::at(7 * MS + 999_999);
        let a = issue(&s, &mut c, &tl, &LEAD5, NO_LIMIT).unwrap().word;
        // The fraction is already at its top: the next value carries into the next ms.
        let b = issue(&s, &mut c, &tl, &LEAD5, NO_LIMIT).unwrap().word;
        assert_eq!((a, b), ((7 << 12) | 4095, 8 << 12));
    }

    #[test]
    fn concurrent_minters_never_share_a_word() {
        use std::sync::Arc;
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        struct Real;
        impl Clock for Real {
            fn now_unix_ns(&mut self) -> i64 {
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i64
            }
            fn monotonic_ns(&mut self) -> u64 {
                START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
            }
            fn sleep_ns(&mut self, ns: u64) {
                std::thread::sleep(std::time::Duration::from_nanos(ns));
            }
        }
        let s = Arc::new(State::new(0, 0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = Arc::clone(&s);
                std::thread::spawn(move || {
                    let mut words = Vec::with_capacity(20_000);
                    let mut adjust = 0u64;
                    for _ in 0..20_000 {
                        let m = issue(&s, &mut Real, &TL, &LEAD5, NO_LIMIT).unwrap();
                        words.push(m.word);
                        adjust = adjust.wrapping_add(m.count_adjust);
                    }
                    (words, adjust)
                })
            })
            .collect();
        let (mut all, mut base) = (Vec::new(), TL.count().base_at(0));
        for t in threads {
            let (w, k) = t.join().unwrap();
            assert!(w.windows(2).all(|p| p[0] < p[1]), "each thread sees increasing words");
            all.extend(w);
            base = base.wrapping_add(k);
        }
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "no word was handed out twice");
        assert_eq!(TL.count().issued(base, s.next_free.load(Ordering::Relaxed)), n as u64, "the count adds up");
    }

    #[test]
    fn the_count_of_issued_ids_needs_an_add_only_once_per_tick() {
        // A walk through every way the state moves: within a tick, into a new tick, through an
        // exhausted sequence, ahead of the clock, back across a small step back, and an advance.
        for tl in [TL, Timeline { low_bits: 12, sub_tick_fraction: true, ..TL }] {
            let count = tl.count();
            let s = State::new(50 << tl.low_bits, 0);
            let mut base = count.base_at(s.next_free.load(Ordering::Relaxed));
            assert_eq!(count.issued(base, s.next_free.load(Ordering::Relaxed)), 0);
            let mut c = FakeClock::at(100 * MS);
            let (mut issued, mut adds, mut seed) = (0u64, 0u64, 7u64);
            for i in 0..20_000 {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                match seed >> 60 {
                    _ if i % 1000 == 999 => {
                        // snowflake_id_advance: raises the state, issues nothing.
                        let to = ((c.now_ns / MS + 20) as u64) << tl.low_bits;
                        let prev = s.next_free.fetch_max(to, Ordering::AcqRel);
                        base = base.wrapping_add(count.on_raise(prev, prev.max(to)));
                    }
                    0 => c.now_ns += MS,
                    1 => c.now_ns += 3 * MS + 1234,
                    2 => c.now_ns -= 2 * MS,
                    _ => c.now_ns += 97,
                }
                let m = issue(&s, &mut c, &tl, &LEAD5, NO_LIMIT).unwrap();
                issued += 1;
                adds += u64::from(m.count_adjust != 0);
                base = base.wrapping_add(m.count_adjust);
                assert_eq!(count.issued(base, s.next_free.load(Ordering::Relaxed)), issued);
            }
            if !tl.sub_tick_fraction {
                // A sequence needs the add only on the first id of each tick.
                let ticks = (s.next_free.load(Ordering::Relaxed) >> tl.low_bits) - 50;
                assert!(adds <= ticks && adds < issued / 4, "{adds} adds for {issued} ids over {ticks} ticks");
            }
        }
        // Exact values: the first id of a fresh tick after a full one, then its successor.
        let count = TL.count();
        assert_eq!(count.carried(7 << 9), 512, "a state at a tick's start carries the full previous tick");
        assert_eq!(count.on_issue(7 << 9, 7 << 9), 512);
        assert_eq!(count.on_issue((7 << 9) + 1, (7 << 9) + 1), 0);
        // Words 0..=2 of tick 7 were issued, then the clock moved to tick 9: their 3 ids move into
        // the base, and the new word starts tick 9's count at 1.
        assert_eq!(count.on_issue((7 << 9) + 3, 9 << 9), 3);
        assert_eq!(count.issued(count.base_at(100), 99), 0, "a reset racing a mint reads as zero, not 2^64 - 1");
    }

    /// A clock that stands still at a time, and whose sleep gives up: a call that would have to wait
    /// for it fails (too far ahead) without issuing, as a flood's call at that moment would wait.
    struct StandStill {
        now_ns: i64,
        mono_ns: u64,
    }

    impl Clock for StandStill {
        fn now_unix_ns(&mut self) -> i64 {
            self.now_ns
        }
        fn monotonic_ns(&mut self) -> u64 {
            self.mono_ns
        }
        fn sleep_ns(&mut self, _ns: u64) {
            self.mono_ns += 3_600 * NS_PER_MS as u64 * 1000;
        }
    }

    /// `floods` backends flood a shard, each until its next call would have to wait for the clock,
    /// and one more then calls once, at the moment the floods have taken all they may, on a server
    /// of `floods + 1` backends; tick after tick. Returns the modest backend's waits and the words
    /// issued in the reserve (the lead's last tick) each tick. No word is issued twice.
    fn floods_beside_a_modest_backend(floods: usize) -> (Vec<u64>, Vec<u64>) {
        const T0: i64 = 1_000 * MS;
        let s = State::new(0, 0);
        let lights: Vec<Light> = (0..=floods).map(|_| Light::new()).collect();
        let backends = floods as u32 + 1;
        let mut seen = std::collections::HashSet::new();
        let (mut waits, mut in_reserve) = (Vec::new(), Vec::new());
        for tick in 0..200 {
            let now = T0 + tick * MS + 300_000;
            let reserve = (tick as u64 + 1_000 + 5) << 9;
            let mut taken = 0;
            for light in &lights[..floods] {
                let minter = Minter { light, backends };
                let mut c = StandStill { now_ns: now, mono_ns: 0 };
                while let Ok(m) = issue_within(&s, &mut c, &TL, &LEAD5, NO_LIMIT, &mut Waited::default(), &minter) {
                    assert!(seen.insert(m.word), "word {} issued twice", m.word);
                    taken += u64::from(m.word >= reserve && m.word < reserve + 512);
                }
            }
            in_reserve.push(taken);
            let mut c = FakeClock::at(now + 100_000);
            let minter = Minter { light: &lights[floods], backends };
            let m = issue_within(&s, &mut c, &TL, &LEAD5, NO_LIMIT, &mut Waited::default(), &minter).unwrap();
            assert!(seen.insert(m.word), "word {} issued twice", m.word);
            waits.push(c.slept_ns.iter().sum::<u64>());
        }
        (waits, in_reserve)
    }

    #[test]
    fn a_modest_backend_never_waits_beside_a_flood() {
        let (waits, in_reserve) = floods_beside_a_modest_backend(1);
        assert!(waits.iter().all(|&w| w == 0), "{waits:?}");
        // The flood: its light quota of the reserve (a quarter, on a server of two) and the heavy
        // cap, what the two light quotas leave.
        assert!(in_reserve[5..].iter().all(|&n| n == 128 + 256), "{in_reserve:?}");
    }

    #[test]
    fn a_modest_backend_never_waits_beside_a_flood_from_every_other_backend() {
        let (waits, in_reserve) = floods_beside_a_modest_backend(50);
        assert!(waits.iter().all(|&w| w == 0), "{waits:?}");
        // 50 light quotas of 5 words (half a tick among 51 backends), and the heavy cap: what the
        // 51 light quotas leave of the tick, 257.
        assert!(in_reserve[5..].iter().all(|&n| n == 50 * 5 + 257), "{in_reserve:?}");
    }

    #[test]
    fn without_a_share_a_modest_caller_waits_behind_a_flood() {
        // The contrast: callers of issue() each bring a share of their own (as if every call were a
        // new backend), so the flood fills the whole lead, and the modest call waits on every tick.
        // This is what the share changes, and how the tests above would fail without it.
        let s = State::new(0, 0);
        let lead4 = ClockPolicy { max_lead_ms: 4, ..LEAD5 };
        let mut waited = 0;
        for tick in 0..50 {
            let now = 1_000 * MS + tick * MS + 300_000;
            loop {
                let mut c = FakeClock::at(now);
                issue(&s, &mut c, &TL, &lead4, NO_LIMIT).unwrap();
                if !c.slept_ns.is_empty() {
                    break;
                }
            }
            let mut c = FakeClock::at(now + 100_000);
            issue(&s, &mut c, &TL, &lead4, NO_LIMIT).unwrap();
            waited += usize::from(!c.slept_ns.is_empty());
        }
        assert_eq!(waited, 50);
    }
}
