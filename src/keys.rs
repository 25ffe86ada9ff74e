//! The keys of public ids: read from the key file (`snowflake_id.public_keys_file`, relative to
//! the data directory), parsed by `crate::core::public::KeyRing`, cached in the backend.
//!
//! - **Who can read them:** the file is read by the server, for any role that calls a public-id
//!   function; no function returns a key, no error or log line quotes the file, and no setting
//!   holds one. The file must be a regular file owned by the server's user with no group or
//!   world access, or owned by root and at most group-readable (PostgreSQL's rule for
//!   `ssl_key_file`); anything else is refused (F0000).
//! - **When they change:** at the first call of each statement the file is looked at (one
//!   `stat`), and read again if it changed (another file, size, modification or status-change
//!   time), so a statement sees one set of keys from start to end, which is what STABLE
//!   promises, and the next statement sees an edited or replaced file without a reload.
//! - **In memory:** the file's bytes are zeroed once parsed, and a key's AES round keys when the
//!   cache lets it go.

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use zeroize::Zeroizing;

use crate::core::public::{self, KeyFileAccess, KeyFileError, KeyRing, MAX_KEY_FILE_BYTES};
use crate::{errors, guc};

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

/// Why there are no keys to use.
#[derive(Clone)]
pub enum Unusable {
    /// No file at the path.
    Missing,
    /// It cannot be opened or read: the error's text.
    Io(String),
    /// Not a regular file.
    NotRegular,
    /// Owned by neither the server's user nor root.
    WrongOwner,
    /// Readable (or writable) by others.
    Exposed,
    /// Its contents.
    Invalid(KeyFileError),
}

struct Cached {
    /// The statement (its start time, and its transaction's) that last looked at the file.
    statement: (pg_sys::TimestampTz, pg_sys::TimestampTz),
    path: String,
    file: Option<FileId>,
    ring: Result<KeyRing, Unusable>,
}

thread_local! {
    static CACHE: RefCell<Option<Cached>> = const { RefCell::new(None) };
}

/// Runs `f` on the server's keys, as of this statement.
///
/// # Errors
/// The key file's problem (`crate::errors::key_file_unusable`), or an empty file (55000).
pub fn with_ring<T>(f: impl FnOnce(&KeyRing) -> Result<T, ErrorReport>) -> Result<T, ErrorReport> {
    // SAFETY: read the start times xact.c recorded for the running statement and transaction.
    // The transaction's tells statements apart inside a procedure that commits, whose own
    // statement time stays that of the CALL.
    let statement =
        unsafe { (pg_sys::GetCurrentStatementStartTimestamp(), pg_sys::GetCurrentTransactionStartTimestamp()) };
    CACHE.with_borrow_mut(|cache| {
        // A reload (which may change the path) is processed between statements, never during one.
        if cache.as_ref().is_none_or(|c| c.statement != statement) {
            let path = guc::public_keys_file();
            let file = std::fs::metadata(&path).ok().map(|m| FileId::of(&m));
            match cache {
                Some(c) if c.path == path && c.file.is_some() && c.file == file => c.statement = statement,
                _ => {
                    let (file, ring) = load(&path);
                    *cache = Some(Cached { statement, path, file, ring });
                }
            }
        }
        match cache.as_ref().map(|c| &c.ring) {
            Some(Ok(ring)) if ring.is_empty() => Err(errors::no_public_key()),
            Some(Ok(ring)) => f(ring),
            Some(Err(why)) => Err(errors::key_file_unusable(why)),
            None => unreachable!("the cache was just filled"),
        }
    })
}

/// Reads and parses the key file. Follows links (a secret store mounts files through them),
/// never blocks on something that is not a regular file, reads at most one byte past the limit.
fn load(path: &str) -> (Option<FileId>, Result<KeyRing, Unusable>) {
    let file = match OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (None, Err(Unusable::Missing)),
        Err(e) => return (None, Err(Unusable::Io(e.to_string()))),
    };
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => return (None, Err(Unusable::Io(e.to_string()))),
    };
    let id = Some(FileId::of(&meta));
    (id, check(&meta).and_then(|()| read(file)))
}

/// A regular file that [`public::key_file_access`] allows.
fn check(meta: &std::fs::Metadata) -> Result<(), Unusable> {
    if !meta.is_file() {
        return Err(Unusable::NotRegular);
    }
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    match public::key_file_access(meta.uid(), me, meta.mode()) {
        KeyFileAccess::Allowed => Ok(()),
        KeyFileAccess::Exposed => Err(Unusable::Exposed),
        KeyFileAccess::WrongOwner => Err(Unusable::WrongOwner),
    }
}

fn read(file: File) -> Result<KeyRing, Unusable> {
    // Room for one byte past the limit up front, so the buffer never moves (and leaves no copy
    // of the keys behind); zeroed when dropped.
    let mut bytes = Zeroizing::new(Vec::with_capacity(MAX_KEY_FILE_BYTES + 1));
    file.take(MAX_KEY_FILE_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(|e| Unusable::Io(e.to_string()))?;
    KeyRing::parse(&bytes).map_err(Unusable::Invalid)
}

/// What `snowflake_public_keys()` shows of the keys: version, whether it encodes, fingerprint.
pub fn describe() -> Result<Vec<(i32, bool, String)>, ErrorReport> {
    with_ring(|ring| {
        let encoder = ring.encoder().map(|k| k.version());
        Ok(ring.keys().map(|k| (i32::from(k.version()), Some(k.version()) == encoder, k.fingerprint())).collect())
    })
}
