//! The keys of public ids: read from the key file (`snowflake_id.public_keys_file`, relative to
//! the data directory), parsed by `crate::core::public::KeyRing`, cached in the backend.
//!
//! - **Who can read them:** the file is read by the server, for any role that calls a public-id
//!   function; no function returns a key, no error or log line quotes the file, and no setting
//!   holds one. The file must be a regular file owned by the server's user with no group or
//!   world access, or owned by root and at most group-readable (PostgreSQL's rule for
//!   `ssl_key_file`); anything else is refused (F0000).
//! - **When they change:** at the first call of each transaction the file is looked at (one
//!   `stat`), and read again if it changed (another file, size, modification or status-change
//!   time), so a transaction sees one set of keys from start to end (STABLE promises a
//!   statement), and the next transaction sees an edited or replaced file without a reload.
//!   A parallel worker has its own cache: it looks at the file at its first call, so a file
//!   replaced while a parallel query runs can give its workers the new keys and its leader the
//!   old ones. A multi-statement query string is one transaction start time, and a background
//!   worker's transactions take the time it sets, if any.
//! - **In memory:** the file's bytes are zeroed once parsed, and a key's AES round keys when the
//!   cache lets it go.

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use zeroize::Zeroizing;

use crate::core::public::{self, KeyFileAccess, KeyFileUnusable, KeyRing, MAX_KEY_FILE_BYTES};
use crate::runtime::{errors, guc};

/// What identifies one version of the file: another file, or the same one written or chmod-ed,
/// differs in one of these.
#[derive(Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileId {
    fn of(m: &std::fs::Metadata) -> FileId {
        FileId {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

struct Cached {
    /// The transaction (its start time) that last looked at the file.
    transaction: pg_sys::TimestampTz,
    path: String,
    file: Option<FileId>,
    ring: Result<KeyRing, KeyFileUnusable>,
}

thread_local! {
    static CACHE: RefCell<Option<Cached>> = const { RefCell::new(None) };
}

/// Runs `f` on the server's keys, as of this transaction.
///
/// # Errors
/// The key file's problem (`crate::runtime::errors::key_file_unusable`), or an empty file (55000).
pub fn with_ring<T>(f: impl FnOnce(&KeyRing) -> Result<T, ErrorReport>) -> Result<T, ErrorReport> {
    with_cached(|keys| match keys {
        Ok(ring) if ring.is_empty() => Err(errors::no_public_key()),
        Ok(ring) => f(ring),
        Err(why) => Err(errors::key_file_unusable(why)),
    })
}

/// Runs `f` on what the key file holds as of this transaction, looking at the file first if this
/// transaction has not.
fn with_cached<T>(f: impl FnOnce(&Result<KeyRing, KeyFileUnusable>) -> T) -> T {
    // SAFETY: reads the start time xact.c recorded for the running transaction. It changes with
    // every transaction, including each one a procedure starts with COMMIT, and parallel workers
    // get their leader's.
    let transaction = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() };
    CACHE.with_borrow_mut(|cache| {
        // A reload (which may change the path) is processed between statements, never during one.
        if cache.as_ref().is_none_or(|c| c.transaction != transaction) {
            let path = guc::public_keys_file();
            let file = std::fs::metadata(&path).ok().map(|m| FileId::of(&m));
            match cache {
                Some(c) if c.path == path && c.file.is_some() && c.file == file => c.transaction = transaction,
                _ => {
                    let (file, ring) = load(&path);
                    *cache = Some(Cached { transaction, path, file, ring });
                }
            }
        }
        match cache.as_ref() {
            Some(c) => f(&c.ring),
            None => unreachable!("the cache was just filled"),
        }
    })
}

/// Reads and parses the key file. Follows links (a secret store mounts files through them),
/// never blocks on something that is not a regular file, reads at most one byte past the limit.
fn load(path: &str) -> (Option<FileId>, Result<KeyRing, KeyFileUnusable>) {
    let file = match OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (None, Err(KeyFileUnusable::Missing)),
        Err(e) => return (None, Err(KeyFileUnusable::Io(e.to_string()))),
    };
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => return (None, Err(KeyFileUnusable::Io(e.to_string()))),
    };
    let id = Some(FileId::of(&meta));
    (id, check(&meta).and_then(|()| read(file)))
}

/// A regular file that [`public::key_file_access`] allows.
fn check(meta: &std::fs::Metadata) -> Result<(), KeyFileUnusable> {
    if !meta.is_file() {
        return Err(KeyFileUnusable::NotRegular);
    }
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    match public::key_file_access(meta.uid(), me, meta.mode()) {
        KeyFileAccess::Allowed => Ok(()),
        KeyFileAccess::Exposed => Err(KeyFileUnusable::Exposed),
        KeyFileAccess::WrongOwner => Err(KeyFileUnusable::WrongOwner),
    }
}

fn read(file: File) -> Result<KeyRing, KeyFileUnusable> {
    // Room for one byte past the limit up front, so the buffer never moves (and leaves no copy
    // of the keys behind); zeroed when dropped.
    let mut bytes = Zeroizing::new(Vec::with_capacity(MAX_KEY_FILE_BYTES + 1));
    file.take(MAX_KEY_FILE_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(|e| KeyFileUnusable::Io(e.to_string()))?;
    KeyRing::parse(&bytes).map_err(KeyFileUnusable::Invalid)
}

/// What `snowflake_public_keys()` shows of the keys: version, whether it encodes, fingerprint.
/// No rows when there is no key file.
///
/// # Errors
/// A key file that exists but cannot be used.
pub fn describe() -> Result<Vec<(i32, bool, String)>, ErrorReport> {
    with_cached(|keys| match keys {
        Ok(ring) => {
            let encoder = ring.encoder().map(|k| k.version());
            Ok(ring.keys().map(|k| (i32::from(k.version()), Some(k.version()) == encoder, k.fingerprint())).collect())
        }
        Err(KeyFileUnusable::Missing) => Ok(Vec::new()),
        Err(why) => Err(errors::key_file_unusable(why)),
    })
}
