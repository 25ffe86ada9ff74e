//! The durable reservation (the high-water mark): renewing it, recovering generators that a start
//! refused, and applying a reservation replayed from the WAL. The rules are in
//! `crate::core::reservation`, the file's I/O in `crate::runtime::reservation_file`, and the
//! locking protocol in `crate::runtime::shmem`.

use std::io;

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::{pg_sys, PgLogLevel};

use crate::core::reservation::{self as rules, Reach, Refusal, Reservation};
use crate::runtime::reservation_file::{self, Found};
use crate::runtime::shmem::{self, ReservationLock};
use crate::runtime::{clock, errors, guc, sysclock, timestamp, wal};

/// The generators refuse because of the file. Re-reads it, under the lock: if it is usable
/// now (repaired or replaced), starts every generator at its reservation and lets them mint
/// again. A file of another layout may also be removed on purpose, which starts a new id space
/// from the clock; a damaged or unreadable one may not, since the clock alone could repeat ids
/// the file covered (`snowflake_id_advance` replaces it, see [`replace_unusable`]).
///
/// # Errors
/// The refusal, with its SQLSTATE, while the file is still unusable.
pub fn recover() -> Result<(), ErrorReport> {
    let Some(lock) = ReservationLock::acquire(true) else { return Err(errors::not_preloaded()) };
    if shmem::refusal().is_none() {
        return Ok(()); // another backend recovered while we waited
    }
    let layout = guc::layout();
    let refused_for = shmem::refusal();
    match reservation_file::load(layout) {
        Found::Refuse(refusal, why) => {
            drop(lock);
            Err(errors::generators_disabled(refusal, &why))
        }
        Found::Nothing if refused_for != Some(Refusal::OtherLayout) => {
            drop(lock);
            let refusal = refused_for.unwrap_or(Refusal::Damaged);
            Err(errors::generators_disabled(refusal, "the file was removed after the start found it unusable"))
        }
        found => {
            if matches!(found, Found::Nothing) {
                errors::new_id_space().report(PgLogLevel::WARNING);
            }
            let (until, written_at) = match &found {
                Found::Continue(r) => (r.reserved_until_unix_ms, r.written_at_unix_ms),
                _ => (0, 0),
            };
            shmem::raise_generators(layout, until, written_at);
            lock.publish_loaded(until);
            lock.clear_refusal();
            Ok(())
        }
    }
}

/// `snowflake_id_advance(ts)` on generators refused because of an unreadable or damaged file:
/// the caller asserts that no id at or after `until` exists, which is all the file would have
/// said. Replaces the file with a reservation at `until` and lets the generators mint again. A
/// file from another layout is never replaced: its ids would share tables with the new ones.
///
/// # Errors
/// The refusal, for a file from another layout; an I/O error writing the new file.
fn replace_unusable(until: i64) -> Result<(), ErrorReport> {
    let Some(lock) = ReservationLock::acquire(true) else { return Err(errors::not_preloaded()) };
    match shmem::refusal() {
        None => return Ok(()),
        Some(Refusal::OtherLayout) => {
            drop(lock);
            return recover(); // still another layout: its error; removed meanwhile: recovered
        }
        Some(_) => {}
    }
    let layout = guc::layout();
    let now = sysclock::real_unix_ms();
    if let Err(e) = write_durably(&Reservation::new(layout, until, now)) {
        drop(lock);
        return Err(errors::reservation_io("write", &e));
    }
    wal::log_reservation(until, now);
    shmem::raise_generators(layout, until, now);
    lock.publish(until, now);
    lock.clear_refusal();
    Ok(())
}

/// A reservation replayed from the WAL (`crate::runtime::wal`): on a standby, in a crash recovery, or
/// while a backup is restored. Raises the generators to it, and when it is newer than the
/// file's, writes the file, so that a promoted standby, or one restarted after its WAL was
/// recycled, continues above every id the primary issued under it.
///
/// A damaged or unreadable file is replaced, and the generators may mint again: the replayed
/// reservation covers every id in the data replayed with it, which is what the file was for
/// (and on a primary's crash recovery, the last one logged covers every id issued, since an id is
/// issued only after its reservation is logged). A file from another layout is never replaced.
///
/// A write failure stops recovery (FATAL): a restartpoint after this record would let its WAL go,
/// and the reservation would then be held by no durable place. Started again, the server replays
/// from its last restartpoint, before this record, and writes the file then. So does a file from
/// another layout than the server's, which is never replaced.
pub fn replay(until: i64, written_at: i64) {
    if cfg!(any(feature = "sabotage-no-reservation", feature = "sabotage-no-replay")) {
        return;
    }
    let Some(lock) = ReservationLock::acquire(true) else { return };
    let refused = shmem::refusal();
    if refused == Some(Refusal::OtherLayout) {
        drop(lock);
        // A primary's crash recovery replays its own records, which the file, written before
        // each of them, already holds: nothing is lost by passing them (and its generators stay
        // refused until the file or the settings are fixed).
        // SAFETY: a plain read of a flag the startup process set before replay began.
        if !unsafe { pg_sys::ArchiveRecoveryRequested } {
            return;
        }
        // A standby's or an archive recovery's records come from elsewhere, and the file is never
        // replaced (its ids may share tables with this layout's), so the record cannot be kept:
        // stop recovery, as for a file that cannot be written, rather than let a restartpoint pass
        // a reservation no durable place holds.
        errors::replay_other_layout(until).report(PgLogLevel::FATAL);
        return;
    }
    // A reservation that already covers the record is enough only once it is known to be on
    // disk: the one a start read may be a page that never got there (a write that failed before
    // the restart), and the record may be replayed for the last time.
    let held = if refused.is_none() { shmem::reserved_until() } else { i64::MIN };
    if until <= held && shmem::file_durable() {
        return;
    }
    let until = until.max(held);
    let layout = guc::layout();
    shmem::raise_generators(layout, until, written_at);
    match write_durably(&Reservation::new(layout, until, written_at)) {
        Ok(()) => {
            lock.publish(until, written_at);
            if refused.is_some() {
                lock.clear_refusal();
                drop(lock);
                errors::reservation_replaced_from_wal(until).report(PgLogLevel::LOG);
            }
        }
        Err(e) => {
            drop(lock);
            errors::reservation_io("write", &e)
                .set_hint(
                    "Recovery stops here: make the data directory writable, then start the server again; it \
                    replays this record again.",
                )
                .report(PgLogLevel::FATAL);
        }
    }
}

/// How far ahead of the clock `snowflake_id_advance` may move the generators: enough for any
/// clock skew between a primary and its standby, small enough that a typo is not permanent.
const MAX_ADVANCE_AHEAD_MS: i64 = 3_600_000;

/// `snowflake_id_advance(ts)`: moves every generator, and the durable reservation, so that the
/// next id of each is at or after `ts`; returns the reservation then in force (Unix ms).
///
/// # Errors
/// On a standby or in a read-only transaction (before `ts` is looked at); for a time that is not
/// finite, past the layout's end or more than an hour ahead of the clock; without the preload;
/// and the reservation's own errors.
pub fn advance(ts: TimestampWithTimeZone) -> Result<i64, ErrorReport> {
    // SAFETY: plain queries of the transaction and startup state.
    let (on_standby, read_only) = unsafe { (pg_sys::RecoveryInProgress(), pg_sys::XactReadOnly) };
    if on_standby || read_only {
        return Err(errors::advance_read_only(on_standby));
    }
    let until = timestamp::unix_ms(ts)?;
    let layout = guc::layout();
    if until > layout.last_unix_ms() {
        return Err(errors::advance_too_far(until, "past the end of the snowflake layout"));
    }
    if until > clock::now_unix_ms() + MAX_ADVANCE_AHEAD_MS {
        return Err(errors::advance_too_far(until, "more than an hour ahead of the clock"));
    }
    shmem::uuidv7_slot().map_err(|_| errors::not_preloaded())?;
    // Generators refused because of a damaged file: the caller's point in time is what the file
    // would have said, so it replaces the file (never one from another layout).
    replace_unusable(until)?;
    // The reservation first: no generator may stand past a reservation that is not on disk.
    renew(until, true)?;
    // The caller asserts the clock has reached `until` (on the old primary): a clock reading
    // behind it stepped back, and waits only as long as max_rewind_wait allows.
    shmem::raise_generators(layout, until, until);
    shmem::reservation_stats().map(|(reserved, _, _)| reserved).map_err(|_| errors::not_preloaded())
}

/// Puts the reservation on disk ([`reservation_file::write`]), overwriting a slot in place only
/// while the file is known durable, and records whether it now is. The caller holds the
/// reservation lock.
fn write_durably(r: &Reservation) -> io::Result<()> {
    let written = reservation_file::write(r, shmem::file_durable());
    shmem::set_file_durable(written.is_ok());
    written
}

/// How far the reservation reaches and how early it is renewed ([`rules::Reach`]): further, and
/// earlier, by the time the synchronous standbys take to flush a renewal, as last estimated, up to
/// what a restart can wait out (`snowflake_id.max_rewind_wait`).
#[inline]
pub fn reach() -> Reach {
    // Every id on the fast path asks: without standbys (or with ones that answer at once), one load.
    match shmem::standbys_lag_ms() {
        0 => Reach::PLAIN,
        lag => Reach::with_lag(lag, rules::reach_cap_ms(guc::clock_policy().max_wait_ms)),
    }
}

/// How often a call that waits for the synchronous standbys looks whether they answered: the
/// walsenders wake only the commits they queued.
const STANDBYS_POLL_MS: u64 = 10;

/// Makes sure an id starting at `word_unix_ms` may be issued, renewing the reservation if it is
/// due. With `must`, the caller cannot issue until the reservation covers the word, so it waits
/// for the lock, and for the synchronous standbys where there are some; otherwise the renewal is
/// opportunistic: skipped if another backend holds the lock, and left to be published by a later
/// call once the standbys have it.
///
/// Where `synchronous_standby_names` names standbys, a renewal is written (file, then WAL) under
/// the lock but published only once they have flushed its record (`crate::runtime::wal`): it is
/// left pending in shared memory, and the lock released, while a caller that needs it waits for
/// them, interruptibly. A cancelled wait publishes nothing; the renewal stays pending for the next
/// call. So no id is handed out under a reservation a promoted synchronous standby would not have.
/// Renewals then reach further, and start earlier, by the standbys' lag ([`reach`]), so that one
/// is still ahead of the clock once they have it, and under a steady lag no call waits at all; and
/// two may be pending at once (`shmem`), so that the older is published as soon as the standbys
/// have it, while a newer one is on its way.
///
/// # Errors
/// An I/O error writing the file (SQLSTATE 58030). The reservation is unchanged then, so no id
/// past it is issued: the server fails closed. Also the generators' refusal, when a start found
/// a file they cannot continue from: the file is never overwritten then. A cancel or timeout while
/// waiting for the standbys (57014), as for a commit.
pub fn renew(word_unix_ms: i64, must: bool) -> Result<(), ErrorReport> {
    // The refusal is only ever cleared, never set, once the server runs: checking it before
    // taking the lock is enough to never overwrite a file the generators refused.
    if shmem::refusal().is_some() {
        recover()?;
    }
    // Whether a reservation up to `until` lets the caller go on: past the word for a caller that
    // must have it, far enough past for an opportunistic one.
    let enough = |until: i64| {
        if must {
            word_unix_ms < until
        } else {
            !rules::due_for_renewal(until, word_unix_ms, reach().margin_ms)
        }
    };
    loop {
        // An opportunistic call whose renewal is written and still on its way to the standbys
        // (or with two on their way) has nothing to do: the lock is not taken on every id until
        // they answer.
        if !must {
            let sync = wal::sync_state_peek();
            let [older, newer] = shmem::pending_renewals();
            if let Some(newest) = newer.or(older) {
                let flushed = !sync.required || older.is_some_and(|o| sync.flushed >= o.lsn);
                if (enough(newest.until) || newer.is_some()) && !flushed {
                    shmem::saw_unflushed(sync.flushed, sysclock::real_unix_ms());
                    return Ok(());
                }
            }
        }
        let Some(lock) = ReservationLock::acquire(must) else {
            // Without the lock (only when not preloaded, as acquire(true) always gets it), a
            // mandatory renewal cannot happen: fail rather than let the caller retry forever.
            return if must { Err(errors::not_preloaded()) } else { Ok(()) };
        };
        let sync = wal::sync_state();
        lock.publish_flushed(sync.required.then_some(sync.flushed));
        // Someone may have renewed while we waited.
        let current = shmem::reserved_until();
        if enough(current) {
            return Ok(());
        }
        // What is still pending, the standbys have not flushed.
        let real_now = sysclock::real_unix_ms();
        shmem::saw_unflushed(sync.flushed, real_now);
        let [older, newer] = shmem::pending_renewals();
        let lsn = match [older, newer].into_iter().flatten().find(|r| enough(r.until)) {
            // Written already, waiting for the standbys: the older one that is enough, which they
            // flush first.
            Some(r) => r.lsn,
            // Two on their way: an opportunistic call leaves it at that; one that must have a
            // renewal writes it in place of the newer.
            None if !must && newer.is_some() => return Ok(()),
            None => {
                // Beyond what is published and what is pending (a pending renewal is never
                // moved back). The standbys have left the older one pending for as long as it has
                // been written: they take at least that long, whatever the estimate says.
                let base = current.max(newer.or(older).map_or(i64::MIN, |r| r.until));
                let lag = shmem::standbys_lag_ms().max(older.map_or(0, |o| real_now.saturating_sub(o.written_at)));
                let reach = Reach::with_lag(lag, rules::reach_cap_ms(guc::clock_policy().max_wait_ms));
                let target = rules::renewal_target(base, word_unix_ms, clock::now_unix_ms(), reach.ahead_ms);
                // The file records when it was written by the real clock, never shifted by
                // snowflake_id.debug_clock_offset: a restart takes it as the last time the clock
                // was seen.
                let written_at = sysclock::real_unix_ms();
                if let Err(e) = write_durably(&Reservation::new(guc::layout(), target, written_at)) {
                    drop(lock);
                    return Err(errors::reservation_io("write", &e));
                }
                // Into the WAL before any id under it is issued: standbys replay it
                // (crate::runtime::wal).
                let lsn = wal::log_reservation(target, written_at);
                lock.push_pending(shmem::PendingRenewal { until: target, written_at, lsn });
                let sync = wal::sync_state();
                if !sync.required || sync.flushed >= lsn {
                    lock.publish_flushed(sync.required.then_some(sync.flushed));
                    return Ok(());
                }
                lsn
            }
        };
        drop(lock);
        if !must {
            return Ok(());
        }
        // No lock is held: the wait lasts as long as the standbys take, and a cancel ends it.
        wait_for_standbys(lsn, word_unix_ms);
    }
}

/// Waits until the synchronous standbys have flushed the WAL up to `lsn`, none is required any
/// more (`synchronous_standby_names` emptied: the server's copy, which a reload reaches while this
/// waits, as for a commit), or another backend published a reservation past the word; interruptible
/// as any wait of a query (a cancel raises 57014 here). The caller holds no lock. Shown as
/// PostgreSQL's own `IPC`/`SyncRep` wait event.
fn wait_for_standbys(lsn: u64, word_unix_ms: i64) {
    loop {
        let sync = wal::sync_state();
        if !sync.required || sync.flushed >= lsn || shmem::reserved_until() > word_unix_ms {
            return;
        }
        shmem::saw_unflushed(sync.flushed, sysclock::real_unix_ms());
        wal::wait_as_sync_rep(STANDBYS_POLL_MS);
    }
}
