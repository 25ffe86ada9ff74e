//! Reading and renewing the reservation file (the durable high-water mark). The rules are in
//! `crate::core::reservation`; the locking protocol is in `crate::shmem`.

use std::fs::{self, File};
use std::io::{self, Write};

use pgrx::pg_sys::panic::ErrorReport;

use crate::core::layout::Layout;
use crate::core::reservation::{self as rules, Reservation, FILE_NAME};
use crate::shmem::{self, ReservationLock};
use crate::{clock, errors, guc};

/// The reservation left by the previous run, or 0 when there is none (a new data directory).
/// Runs in the postmaster at every (re)start of shared memory. The working directory of every
/// PostgreSQL process is the data directory, so the file name is relative to it.
///
/// # Panics
/// Raises an ERROR (the postmaster turns it into FATAL: the server does not start) when the file
/// cannot be read or was written under another layout.
pub fn load(layout: &Layout) -> i64 {
    let bytes = match fs::read(FILE_NAME) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return 0,
        Err(e) => errors::raise(errors::reservation_io("read", &e)),
    };
    let checked = Reservation::from_bytes(&bytes).and_then(|r| r.check_layout(layout).map(|()| r));
    match checked {
        Ok(r) => r.reserved_until_unix_ms,
        Err(why) => errors::raise(errors::reservation_unusable(&why)),
    }
}

/// Writes the file durably: a temporary file, fsync, rename over the old one, fsync the
/// directory. Plain Rust I/O: no PostgreSQL allocation and no ereport while the lock is held.
fn write_durably(r: &Reservation) -> io::Result<()> {
    let tmp = format!("{FILE_NAME}.tmp");
    let mut f = File::create(&tmp)?;
    f.write_all(&r.to_bytes())?;
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
/// past it is issued: the server fails closed.
pub fn renew(word_unix_ms: i64, must: bool) -> Result<(), ErrorReport> {
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
    let now = clock::now_unix_ms();
    let target = rules::renewal_target(current, word_unix_ms, now);
    let written = write_durably(&Reservation::new(guc::layout(), target, now));
    if written.is_ok() {
        lock.publish(target, now);
    }
    drop(lock);
    written.map_err(|e| errors::reservation_io("write", &e))
}
