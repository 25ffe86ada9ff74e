//! Reading and renewing the reservation file (the durable high-water mark). The rules are in
//! `crate::core::reservation`; the locking protocol is in `crate::runtime::shmem`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::PgLogLevel;

use crate::core::layout::Layout;
use crate::core::reservation::{self as rules, Refusal, Reservation, FAR_AHEAD_WARNING_MS, FILE_NAME, MAX_FILE_BYTES};
use crate::runtime::shmem::{self, ReservationLock};
use crate::runtime::{clock, errors, guc, sysclock};

/// What a (re)start finds in the data directory.
pub enum Found {
    /// No file: a new data directory, or one whose file was removed on purpose.
    Nothing,
    /// A reservation to continue from.
    Continue(Reservation),
    /// A file the generators cannot continue from; they refuse until it is fixed.
    Refuse(Refusal, String),
}

/// Reads the reservation left by the previous run. The working directory of every PostgreSQL
/// process is the data directory, so the file name is relative to it. Never raises: it runs in
/// the postmaster, where an error would stop the whole server. At most [`MAX_FILE_BYTES`] are
/// read, whatever the file's size.
pub fn load(layout: &Layout) -> Found {
    if cfg!(feature = "sabotage-no-reservation") {
        return Found::Nothing;
    }
    // Never through a link, and never blocking the postmaster on something that is not a file.
    let opened = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(FILE_NAME);
    let file = match opened {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Found::Nothing,
        Err(e) => return Found::Refuse(Refusal::Unreadable, format!("it cannot be read: {e}")),
        Ok(f) => f,
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Found::Refuse(Refusal::Damaged, "it is not a regular file".to_owned());
    }
    let mut bytes = Vec::new();
    if let Err(e) = file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes) {
        return Found::Refuse(Refusal::Unreadable, format!("it cannot be read: {e}"));
    }
    match rules::judge(&bytes, layout) {
        Ok(r) => Found::Continue(r),
        Err((refusal, why)) => Found::Refuse(refusal, why),
    }
}

/// Says in the server log what a start found, when it deserves a line: a missing file, a
/// reservation far ahead of the clock, or a file the generators cannot continue from.
pub fn log_start(found: &Found, now_unix_ms: i64) {
    match found {
        Found::Nothing => errors::no_reservation_file().report(PgLogLevel::LOG),
        Found::Continue(r) if r.reserved_until_unix_ms.saturating_sub(now_unix_ms) > FAR_AHEAD_WARNING_MS => {
            errors::reservation_far_ahead(r.reserved_until_unix_ms, now_unix_ms).report(PgLogLevel::WARNING);
        }
        Found::Continue(_) => {}
        Found::Refuse(refusal, why) => errors::generators_disabled(*refusal, why).report(PgLogLevel::WARNING),
    }
}

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
    match load(layout) {
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
pub fn replace_unusable(until: i64) -> Result<(), ErrorReport> {
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
    let now = sysclock::now_unix_ms();
    if let Err(e) = write_durably(&Reservation::new(layout, until, now)) {
        drop(lock);
        return Err(errors::reservation_io("write", &e));
    }
    crate::runtime::wal::log_reservation(until, now);
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
/// from its last restartpoint, before this record, and writes the file then.
#[cfg_attr(feature = "pg14", allow(dead_code))] // PostgreSQL 14 has no custom WAL resource managers
pub fn replay(until: i64, written_at: i64) {
    if cfg!(any(feature = "sabotage-no-reservation", feature = "sabotage-no-replay")) {
        return;
    }
    let Some(lock) = ReservationLock::acquire(true) else { return };
    let refused = shmem::refusal();
    if refused == Some(Refusal::OtherLayout) {
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
                .set_hint("Recovery stops here: make the data directory writable, then start the server again; it replays this record again.")
                .report(PgLogLevel::FATAL);
        }
    }
}

/// Puts the reservation on disk. Every file since 0.3.0 has two fixed-size slots
/// ([`rules::SLOT_BYTES`]), so a renewal overwrites the older slot in place and costs one
/// fdatasync: the startup process replays one per WAL record, and a long archive is replayed at
/// the disk's fdatasync rate (`make bench-replay`). A write torn by a crash, or a base backup
/// copying the file meanwhile, leaves the other slot whole.
///
/// A slot is overwritten only while the file is known durable: the first write of every run, and
/// the first after any failed write, replaces the file whole (a new file, fsync, rename, fsync
/// the directory). What the page cache shows after a failed fdatasync, or after a restart that
/// followed one, may never have reached the disk, and the slot chosen from it could be the only
/// durable one. Any other file (an older version's, not a regular file, or linked from
/// elsewhere, as a hard-linked backup would be) is replaced too. Plain Rust I/O: no PostgreSQL
/// allocation and no ereport while the lock is held.
fn write_durably(r: &Reservation) -> io::Result<()> {
    let written = match shmem::file_durable().then(|| overwrite_in_place(r)).flatten() {
        Some(written) => written,
        None => replace_file(&r.to_file()),
    };
    shmem::set_file_durable(written.is_ok());
    written
}

/// `None` when the file is not one to overwrite.
fn overwrite_in_place(r: &Reservation) -> Option<io::Result<()>> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(FILE_NAME)
        .ok()?;
    let m = f.metadata().ok()?;
    if !m.is_file() || m.nlink() != 1 || m.len() != rules::FILE_BYTES as u64 {
        return None;
    }
    let mut bytes = [0u8; rules::FILE_BYTES];
    f.read_exact_at(&mut bytes, 0).ok()?;
    let (slot, sequence) = rules::next_slot(&bytes)?;
    Some(f.write_all_at(&r.to_slot(sequence), (slot * rules::SLOT_BYTES) as u64).and_then(|()| f.sync_data()))
}

/// A new temporary file (never through a link, never over an existing file, readable by the
/// server's user only), fsync, rename over the old one, fsync the directory.
fn replace_file(bytes: &[u8]) -> io::Result<()> {
    let tmp = format!("{FILE_NAME}.tmp");
    let create =
        || OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(&tmp);
    let mut f = match create() {
        // Left by a crash during an earlier write (we hold the lock: no one else is writing).
        // remove_file removes a link itself, never what it points to.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fs::remove_file(&tmp)?;
            create()?
        }
        other => other?,
    };
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, FILE_NAME)?;
    File::open(".")?.sync_all()
}

/// Makes sure an id starting at `word_unix_ms` may be issued, renewing the reservation if it is
/// due. With `must`, the caller cannot issue until the reservation covers the word, so it waits
/// for the lock; otherwise the renewal is opportunistic and skipped if another backend holds it.
///
/// # Errors
/// An I/O error writing the file (SQLSTATE 58030). The reservation is unchanged then, so no id
/// past it is issued: the server fails closed. Also the generators' refusal, when a start found
/// a file they cannot continue from: the file is never overwritten then.
pub fn renew(word_unix_ms: i64, must: bool) -> Result<(), ErrorReport> {
    // The refusal is only ever cleared, never set, once the server runs: checking it before
    // taking the lock is enough to never overwrite a file the generators refused.
    if shmem::refusal().is_some() {
        recover()?;
    }
    let Some(lock) = ReservationLock::acquire(must) else {
        // Without the lock (only when not preloaded, as acquire(true) always gets it), a
        // mandatory renewal cannot happen: fail rather than let the caller retry forever.
        return if must { Err(errors::not_preloaded()) } else { Ok(()) };
    };
    // Someone may have renewed while we waited.
    let current = shmem::reserved_until();
    let covered = if must { word_unix_ms < current } else { !rules::due_for_renewal(current, word_unix_ms) };
    if covered {
        return Ok(());
    }
    let target = rules::renewal_target(current, word_unix_ms, clock::now_unix_ms());
    // The file records when it was written by the real clock, never shifted by
    // snowflake_id.debug_clock_offset: a restart takes it as the last time the clock was seen.
    let written_at = sysclock::now_unix_ms();
    let written = write_durably(&Reservation::new(guc::layout(), target, written_at));
    if written.is_ok() {
        // Into the WAL before any id under it is issued: standbys replay it (crate::runtime::wal).
        crate::runtime::wal::log_reservation(target, written_at);
        lock.publish(target, written_at);
    }
    drop(lock);
    written.map_err(|e| errors::reservation_io("write", &e))
}
