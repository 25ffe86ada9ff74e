//! The one mint loop every generator goes through: the core state machine, plus the durable
//! reservation and the statistics that need shared memory and I/O.

use std::sync::atomic::{AtomicBool, Ordering};

use pgrx::PgLogLevel;

use crate::core::monotonic::{self, ClockPolicy, IssueError, Issued, Minter, Timeline, Waited};
use crate::core::share::Light;
use crate::core::time::NS_PER_MS;
use crate::runtime::clock::WallClock;
use crate::runtime::errors::{self, Generator};
use crate::runtime::shmem::{self, Slot};
use crate::runtime::{reservation, space};

/// The word below which ids may be issued without touching the reservation or the database's
/// floor (`crate::runtime::space`): the reservation less the renewal margin, so that the fast path never
/// runs into it, and no later than the floor this backend knows.
#[inline]
pub fn fast_limit(tl: &Timeline) -> u64 {
    let margin = reservation::reach().margin_ms;
    tl.first_word_at(shmem::reserved_until().saturating_sub(margin).min(space::floor_known()))
}

/// This backend's use of a generator's reserve in its latest tick (`crate::core::share`).
static LIGHT: Light = Light::new();

/// Set once this backend has seen that the server is not in recovery, which, once true, stays
/// true for the life of the process (promotion is one-way). The fast entry of `snowflake_next`
/// reads it instead of calling into PostgreSQL. A process-wide static, not a `thread_local!`: a
/// backend is one thread, and a thread-local in a loaded library costs a `__tls_get_addr` call
/// per id.
static NOT_IN_RECOVERY: AtomicBool = AtomicBool::new(false);

/// Whether this backend may mint snowflake ids without any check: it knows the server is a
/// primary, and has checked its database's id space (`crate::runtime::space`).
#[inline]
pub fn fast_path_open() -> bool {
    NOT_IN_RECOVERY.load(Ordering::Relaxed) && space::snowflake_checked()
}

/// A hot standby shares its primary's configuration, shards included: minting there would
/// repeat the primary's ids. Refuse until promotion.
fn refuse_during_recovery(slot: &Slot) {
    if NOT_IN_RECOVERY.load(Ordering::Relaxed) {
        return;
    }
    // SAFETY: a plain query of the startup state; callable from any backend.
    if unsafe { pgrx::pg_sys::RecoveryInProgress() } {
        slot.errors.fetch_add(1, Ordering::Relaxed);
        errors::raise(errors::in_recovery());
    }
    NOT_IN_RECOVERY.store(true, Ordering::Relaxed);
}

/// Mints one word on `slot`, renewing the reservation when due and recording statistics.
/// Raises the generator's error (with its SQLSTATE) when no word can be issued.
pub fn next_word(slot: &Slot, tl: &Timeline, policy: &ClockPolicy, generator: Generator<'_>) -> u64 {
    refuse_during_recovery(slot);
    // The first id of this backend, and every snowflake id of a database recorded with another
    // id space: the record, and once per start the ids the database already holds.
    let snowflake = matches!(generator, Generator::Snowflake { .. });
    if let Err(e) = space::ensure_checked(snowflake) {
        slot.errors.fetch_add(1, Ordering::Relaxed);
        errors::raise(e);
    }
    // A start that found a reservation file the generators cannot continue from disabled them;
    // the file may have been fixed since.
    if shmem::refusal().is_some() {
        if let Err(e) = reservation::recover() {
            slot.errors.fetch_add(1, Ordering::Relaxed);
            errors::raise(e);
        }
    }
    // One budget for the whole call: a renewal between two attempts does not start it again.
    let mut waited = Waited::default();
    // This backend's share of the lead's last tick (`crate::core::share`), among the server's
    // backends (fixed at start).
    // SAFETY: a plain read of a value the postmaster set before any backend started.
    let minter = Minter { light: &LIGHT, backends: unsafe { pgrx::pg_sys::MaxBackends }.unsigned_abs() };
    loop {
        let reserved = shmem::reserved_until();
        let limit = tl.first_word_at(reserved.min(space::floor_known()));
        match monotonic::issue_within(&slot.state, &mut WallClock, tl, policy, limit, &mut waited, &minter) {
            Ok(m) => {
                record(slot, &m, tl);
                let word_ms = tl.word_unix_ms(m.word);
                if crate::core::reservation::due_for_renewal(reserved, word_ms, reservation::reach().margin_ms) {
                    // Opportunistic: the id is already covered and handed out, so a failure here
                    // is only a warning; the next call that needs the renewal fails closed.
                    if let Err(e) = reservation::renew(word_ms, false) {
                        e.report(PgLogLevel::WARNING);
                    }
                }
                return m.word;
            }
            // The reservation must cover the word before it is issued: renew (waiting for the
            // lock if another backend is renewing). So must the database's floor, which a dump
            // carries: advance it to the reservation (never waiting). Then mint again.
            Err(IssueError::Unreserved { word_unix_ms }) => {
                if word_unix_ms >= shmem::reserved_until() {
                    if let Err(e) = reservation::renew(word_unix_ms, true) {
                        slot.errors.fetch_add(1, Ordering::Relaxed);
                        errors::raise(e);
                    }
                    // The renewal may have waited (for the lock, for the standbys): a record
                    // change that committed meanwhile (a restore) may carry a floor above the one
                    // this backend knows, so the record is read again (and its floor waited for)
                    // before any id past the floor. A no-op while no record changed.
                    if let Err(e) = space::ensure_checked(snowflake) {
                        slot.errors.fetch_add(1, Ordering::Relaxed);
                        errors::raise(e);
                    }
                }
                if word_unix_ms >= space::floor_known() {
                    space::cover(shmem::reserved_until());
                }
            }
            Err(e) => {
                slot.errors.fetch_add(1, Ordering::Relaxed);
                if let IssueError::ClockBehind { behind_ns, .. } = e {
                    record_backstep(slot, behind_ns);
                }
                errors::raise(errors::issue_error(e, generator));
            }
        }
    }
}

/// The statistics of an id from the fast path: issued, and how far ahead of the clock.
///
/// Every locked instruction here would be paid per id, so none is on most calls: the issued
/// count needs an add only on a tick's first id (`count_adjust`). A generator that outruns the
/// clock issues every id ahead of it, so "ahead" counts ticks borrowed (the first id of each
/// tick taken ahead of the clock), and the maximum is only written when it grows.
#[inline]
pub fn record_fast(slot: &Slot, m: &Issued, tl: &Timeline) {
    if m.count_adjust != 0 {
        slot.issued_base.fetch_add(m.count_adjust, Ordering::Relaxed);
    }
    if m.lead_ticks > 0 {
        if m.word & ((1 << tl.low_bits) - 1) == 0 {
            slot.ahead_ticks.fetch_add(1, Ordering::Relaxed);
        }
        let lead_ms = m.lead_ticks * u64::from(tl.tick_ms);
        if lead_ms > slot.max_lead_ms.load(Ordering::Relaxed) {
            slot.max_lead_ms.fetch_max(lead_ms, Ordering::Relaxed);
        }
    }
}

fn record(slot: &Slot, m: &Issued, tl: &Timeline) {
    record_fast(slot, m, tl);
    if m.waited_ns > 0 {
        slot.waits.fetch_add(1, Ordering::Relaxed);
        slot.wait_ns.fetch_add(m.waited_ns, Ordering::Relaxed);
    }
    // Only a clock reading behind a tick it already showed: a generator that merely runs ahead
    // (any backend's lead, a restart at the reservation) is not a step back.
    if m.behind_ns > 0 {
        record_backstep(slot, m.behind_ns);
    }
}

fn record_backstep(slot: &Slot, behind_ns: u64) {
    slot.backsteps.fetch_add(1, Ordering::Relaxed);
    slot.max_backstep_ms.fetch_max(behind_ns.div_ceil(NS_PER_MS as u64), Ordering::Relaxed);
}
