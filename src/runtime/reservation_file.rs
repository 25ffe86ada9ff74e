//! The reservation file in the data directory (`snowflake_id.state`): reading it at start, and
//! writing it durably. Its format and rules are `crate::core::reservation`. Nothing here touches
//! shared memory: the caller (`crate::runtime::reservation`, under the reservation lock) says
//! whether a slot may be overwritten in place, and the startup hook (`crate::runtime::shmem`)
//! starts the generators from what [`load`] found.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};

use pgrx::PgLogLevel;

use crate::core::layout::Layout;
use crate::core::reservation::{self as rules, Refusal, Reservation, FAR_AHEAD_WARNING_MS, FILE_NAME, MAX_FILE_BYTES};
use crate::runtime::errors;

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

/// Puts the reservation on disk. Every file since 0.3.0 has two fixed-size slots
/// ([`rules::SLOT_BYTES`]), so a renewal overwrites the older slot in place and costs one
/// fdatasync: the startup process replays one per WAL record, and a long archive is replayed at
/// the disk's fdatasync rate (`make bench-replay`). A write torn by a crash, or a base backup
/// copying the file meanwhile, leaves the other slot whole.
///
/// A slot is overwritten only when `in_place` says the file is known durable (the caller keeps that
/// in shared memory): the first write of every run, and the first after any failed write, replaces
/// the file whole (a new file, fsync, rename, fsync
/// the directory). What the page cache shows after a failed fdatasync, or after a restart that
/// followed one, may never have reached the disk, and the slot chosen from it could be the only
/// durable one. Any other file (an older version's, not a regular file, or linked from
/// elsewhere, as a hard-linked backup would be) is replaced too. Plain Rust I/O: no PostgreSQL
/// allocation and no ereport while the lock is held.
pub fn write(r: &Reservation, in_place: bool) -> io::Result<()> {
    match in_place.then(|| overwrite_in_place(r)).flatten() {
        Some(written) => written,
        None => replace_file(&r.to_file()),
    }
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
    Some(f.write_all_at(&r.to_slot(sequence), (slot * rules::SLOT_BYTES) as u64).and_then(|()| sync(|| f.sync_data())))
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

/// An fsync of a renewal written in place; skipped by the `sabotage-no-sync` build of `make
/// chaos`, which a power loss exposes (the file then goes back to an older slot).
fn sync(f: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
    if cfg!(feature = "sabotage-no-sync") {
        return Ok(());
    }
    f()
}
