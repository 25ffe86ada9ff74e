//! All of snowflake_id's shared memory, and the protocol that guards it.
//!
//! # What is in the segment
//! One region, `snowflake_id`, sized at server start from the layout:
//!
//! ```text
//! Header {
//!   shard_count: u64                fixed once by the postmaster, read-only afterwards
//!   uuidv7_next: AtomicU64          UUIDv7: the next free (unix_ms << 12 | fraction) word
//! }
//! shards[shard_count]: AtomicU64    per shard: the next free (tick << seq_bits | seq) word
//! ```
//!
//! With the default layout that is 8192 + 2 words, 64 KiB.
//!
//! # Protocol
//! - **`shard_count`** is written once, in the postmaster's `shmem_startup_hook` under
//!   `AddinShmemInitLock`, before any backend exists, and never again. Backends only read it.
//! - **`shards[i]`** and **`uuidv7_next`** are owned by no one: every backend and parallel worker updates it with a
//!   single compare-and-swap (`crate::core::monotonic::mint`). A CAS either installs `w + 1`,
//!   which hands out word `w` to exactly that caller, or fails and the caller retries with the
//!   value it saw. There is no lock, so there is nothing to wait on and nothing a crash can leave
//!   held. The "critical section" is the single CAS instruction: it cannot block, allocate,
//!   call SPI or raise an error. Errors are raised only after the loop has left the CAS.
//! - The state only grows. A refused call (clock too far behind, layout exhausted) leaves it as
//!   it was.
//!
//! # Lifetime
//! The segment exists only when the library is in `shared_preload_libraries`. Without it, the
//! pointer below stays null and [`shard_state`] reports [`NotPreloaded`], which the SQL layer
//! turns into SQLSTATE 55000 with a hint. A crash restart re-creates the segment from zero.

use std::mem::size_of;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::guc;

#[repr(C)]
struct Header {
    shard_count: u64,
    uuidv7_next: AtomicU64,
}

/// The base of the segment in this process, or null when the library was not preloaded.
/// Set in the postmaster before fork, so every backend inherits it.
static SEGMENT: AtomicPtr<Header> = AtomicPtr::new(ptr::null_mut());

/// The generators were called in a server that did not preload the library.
#[derive(Debug)]
pub struct NotPreloaded;

fn segment_size(shard_count: usize) -> usize {
    size_of::<Header>() + shard_count * size_of::<AtomicU64>()
}

/// Asks for the segment and installs the startup hook. Call from `_PG_init` while
/// `shared_preload_libraries` is being processed, after `guc::init`.
pub fn init() {
    // SAFETY: _PG_init runs single-threaded in the postmaster; the hook chain is ours to extend.
    unsafe {
        #[cfg(feature = "pg14")]
        request();
        #[cfg(not(feature = "pg14"))]
        {
            PREV_REQUEST_HOOK = pg_sys::shmem_request_hook;
            pg_sys::shmem_request_hook = Some(shmem_request);
        }
        PREV_STARTUP_HOOK = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(shmem_startup);
    }
}

static mut PREV_STARTUP_HOOK: Option<unsafe extern "C-unwind" fn()> = None;
#[cfg(not(feature = "pg14"))]
static mut PREV_REQUEST_HOOK: Option<unsafe extern "C-unwind" fn()> = None;

unsafe fn request() {
    // SAFETY: called from _PG_init (PG14) or the shmem_request hook (PG15+), where it is allowed.
    unsafe { pg_sys::RequestAddinShmemSpace(segment_size(guc::layout().shard_count())) };
}

#[cfg(not(feature = "pg14"))]
#[pg_guard]
unsafe extern "C-unwind" fn shmem_request() {
    // SAFETY: chaining to the previous hook, then requesting our space, as PostgreSQL expects.
    unsafe {
        if let Some(prev) = PREV_REQUEST_HOOK {
            prev();
        }
        request();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn shmem_startup() {
    // SAFETY: runs in the postmaster (or a crash-restarted postmaster) with no backends yet;
    // AddinShmemInitLock serialises it with any other library's startup hook.
    unsafe {
        if let Some(prev) = PREV_STARTUP_HOOK {
            prev();
        }
        let shard_count = guc::layout().shard_count();
        let lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock; // AddinShmemInitLock
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let base =
            pg_sys::ShmemInitStruct(c"snowflake_id".as_ptr(), segment_size(shard_count), &mut found).cast::<Header>();
        if !found {
            // Zero is "nothing issued yet" for every generator word.
            ptr::write_bytes(base.cast::<u8>(), 0, segment_size(shard_count));
            (&raw mut (*base).shard_count).write(shard_count as u64);
        }
        pg_sys::LWLockRelease(lock);
        SEGMENT.store(base, Ordering::Release);
    }
}

/// The segment, or [`NotPreloaded`].
#[inline]
fn segment() -> Result<&'static Header, NotPreloaded> {
    let base = SEGMENT.load(Ordering::Acquire);
    // SAFETY: non-null only once shmem_startup has initialised the segment, which lives as long
    // as the server.
    unsafe { base.as_ref() }.ok_or(NotPreloaded)
}

/// The state word of one shard.
///
/// # Errors
/// [`NotPreloaded`] when the segment does not exist.
///
/// # Panics
/// When `shard` is outside the segment: callers check it against the layout first.
pub fn shard_state(shard: u32) -> Result<&'static AtomicU64, NotPreloaded> {
    let header = segment()?;
    Ok(shard_word(header, shard)
        .unwrap_or_else(|| panic!("shard {shard} outside a segment of {} shards", header.shard_count)))
}

/// The state word of one shard, or `None` when the library is not preloaded or the shard is
/// outside the segment. Never panics: the generator's unguarded fast entry uses it.
#[inline]
pub fn try_shard_state(shard: u32) -> Option<&'static AtomicU64> {
    shard_word(segment().ok()?, shard)
}

#[inline]
fn shard_word(header: &'static Header, shard: u32) -> Option<&'static AtomicU64> {
    if u64::from(shard) >= header.shard_count {
        return None;
    }
    // SAFETY: the words follow the header, `shard_count` of them, and `shard` is below that.
    // The words are only ever accessed atomically.
    unsafe {
        let words = (header as *const Header).add(1).cast::<AtomicU64>();
        Some(&*words.add(shard as usize))
    }
}

/// The UUIDv7 state word.
///
/// # Errors
/// [`NotPreloaded`] when the segment does not exist.
pub fn uuidv7_state() -> Result<&'static AtomicU64, NotPreloaded> {
    Ok(&segment()?.uuidv7_next)
}
