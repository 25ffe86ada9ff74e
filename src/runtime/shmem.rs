//! All of snowflake_id's shared memory, and the protocol that guards it.
//!
//! # What is in the segment
//! One region, `snowflake_id`, sized at server start from the layout:
//!
//! ```text
//! Header                                    6,144 bytes (48 cache-line pairs)
//!   shard_count               u64           fixed by the postmaster, read-only afterwards
//!   reserved_until_unix_ms    AtomicI64     the durable reservation (crate::core::reservation)
//!   reservation_writes        AtomicU64     statistics of the reservation file
//!   reservation_written_at    AtomicI64
//!   refusal                   AtomicU32     why every generator refuses (a reservation file it
//!                                           cannot continue from), 0 when they may mint
//!   file_durable              AtomicU32     1 once this run replaced the reservation file whole
//!                                           (new file, fsync, rename, directory fsync) and every
//!                                           write since succeeded: only then may a renewal
//!                                           overwrite a slot in place (under the reservation lock)
//!   space_generation          AtomicU64     bumped when any database's record of its id space changes
//!   checked_next              AtomicU64     the next registry entry to replace when all are taken
//!   owned_minted_tick         AtomicU64     the latest tick snowflake_next() minted at, from the
//!                                           server's own shards (borrowed ahead of the clock, maybe)
//!   owned_clock_tick          AtomicU64     the latest clock tick snowflake_next() read
//!   standbys_lag_ms           AtomicI64     how long the synchronous standbys take to flush a
//!                                           renewal, as estimated at the last one published
//!   pending                   [Pending; 2]  renewals on disk and in the WAL, not yet published: they
//!                                           wait for the synchronous standbys; the older first
//!   checked_databases         [AtomicU64; 256] databases whose floor was waited for since the
//!                                           start: the 64-bit record fingerprint, which holds the
//!                                           database's oid, 0 free
//!   checked_database_oids     [AtomicU32; 256] the database of each of those entries
//!   verdicts                  [Verdict; 64] the last good check of a database's record, for a
//!                                           session that cannot lock the record table at once
//!   record_changes            [AtomicU64; 32] uncommitted changes of a database's record:
//!                                           database oid << 32 | transaction id, 0 free
//!
//! Pending (32 bytes): until (AtomicI64, i64::MIN when empty), written_at (AtomicI64, the real
//! clock's Unix ms), lsn (AtomicU64, the end of its WAL record), seen_unflushed_at (AtomicI64, the
//! latest time a backend saw it not yet flushed)
//!
//! Verdict (40 bytes): version (AtomicU64, odd while written), key (database oid << 32 | the
//! record fingerprint's low 32 bits, which only say the entry is taken), table (the record
//! table's OID), floor (Unix ms), generation (the `space_generation` it was read at)
//! uuidv7: Slot                              128 bytes
//! shards: [Slot; shard_count]               128 bytes each
//!
//! Slot (one per generator, on its own pair of cache lines, 128 bytes)
//!   state.next_free           AtomicU64     the next free generator word
//!   state.seen_tick           AtomicU64     the latest clock tick a minter read (crate::core::monotonic::State)
//!   state.reserve             AtomicU64     the words of the lead's last tick taken past the
//!                                           backends' own shares in the latest tick (crate::core::share)
//!   issued_base, ahead_ticks, max_lead_ms, waits, wait_ns, backsteps, max_backstep_ms, errors: AtomicU64
//! ```
//!
//! The header's size is asserted where `Header` is defined. With the default layout the segment
//! holds 8192 + 1 slots, about 1 MiB.
//!
//! # Protocol
//! - **`shard_count`** is written once, in the postmaster's `shmem_startup_hook` under the
//!   `snowflake_id` LWLock, before any backend exists, and never again.
//! - **`Slot::state.next_free`** is owned by no one: every backend and parallel worker updates it
//!   with a single compare-and-swap (`crate::core::monotonic`). A CAS either installs `w + 1`, which hands
//!   out word `w` to exactly that caller, or fails and the caller retries with the value it saw.
//!   There is no lock, so there is nothing to wait on and nothing a crash can leave held. The
//!   critical section is the one CAS instruction: it cannot block, allocate, call SPI or raise.
//!   The word only grows; a refused call leaves it as it was. `snowflake_id_advance()` may also
//!   raise it with an atomic `fetch_max`, which a concurrent CAS simply sees and retries on.
//! - **`Slot::state.reserve`** decides who may take a word in the last tick of the lead, never
//!   which word: it is updated with one compare-and-swap, only by calls past their backend's own
//!   share of that tick (a generator at its lead), never on the fast path, and never moved back to
//!   an earlier tick. A lost race retries with what it saw. No id's uniqueness depends on it. (Each
//!   backend's own share is a static of its own, `crate::runtime::generate`.)
//! - **`Slot::state.seen_tick`** only grows, by `fetch_max`, from any minter (about once per tick:
//!   a minter loads it first and writes only a newer tick), from the startup hook (the clock of
//!   the reservation's last write) and from `snowflake_id_advance()`. It only tells a clock step
//!   back from a generator that runs ahead; no id depends on it.
//! - **The statistics** in a slot are independent counters, bumped with relaxed atomic adds (or
//!   `fetch_max`) after the CAS. Readers load them without any lock; a reader may see one counter
//!   a few ids ahead of another, never a torn value. The number of ids issued is not a counter
//!   bumped per id: it is `issued_base` plus what `next_free` carries
//!   ([`crate::core::monotonic::IssuedCount`]), so `issued_base` is added to only by the caller
//!   whose CAS moved the word forward into a new tick (for a snowflake shard, once per tick).
//! - **`reserved_until_unix_ms`** only grows, and only while holding the `snowflake_id`
//!   LWLock, which serialises writers of the reservation file: the writer puts the new value on
//!   disk (`crate::runtime::reservation`: in place with one fdatasync, or a new file and a rename) and
//!   stores it here afterwards, so no backend issues an id past a reservation that is not
//!   durable. Id paths read it with one atomic load and take the lock only to renew it, about
//!   every 250 ms: conditionally (never waiting) while
//!   ids are still below the reservation, and waiting only when an id would pass it. Holding an
//!   LWLock across an fsync is the point of this lock; no id path holds it otherwise. Inside it,
//!   after the file and before publishing, the renewal is also inserted into the WAL and flushed
//!   (`crate::runtime::wal`, PostgreSQL 15+), so that a standby has every reservation before any row
//!   carrying an id under it. Nothing else inside it allocates from PostgreSQL or raises an
//!   error (errors are raised after release), and PostgreSQL releases it on any error anyway.
//!   On a standby the startup process takes it to replay a reservation from the WAL
//!   (`crate::runtime::reservation::replay`): file first, then publish, as a renewal does.
//! - **`pending`**: where `synchronous_standby_names` names standbys, a renewal is published only
//!   once they have flushed its record (`crate::runtime::wal::sync_state`), and no lock is held
//!   across that wait, which lasts as long as the standbys take (an LWLock cannot be cancelled).
//!   So the lock holder that wrote a renewal leaves it here, unpublished, with its record's end,
//!   and releases the lock; any backend then publishes it, under the lock, once the standbys'
//!   flush position has passed that end, or once no standby is required any more. There are two
//!   slots: a renewal written while two wait takes the newer one's place, never the older's, so
//!   the older, which the standbys flush first, is published as soon as they have it, even while
//!   a newer one is on its way; publishing one drops every older one with it. The slots are
//!   written only under the lock (`seen_unflushed_at` also by `fetch_max` from any backend that
//!   looks, which only feeds the lag estimate), the newer always reaches further than the older,
//!   and an unlocked reader only decides from them whether to take the lock. A published
//!   reservation is always one a pending renewal covered, and the file and the WAL hold every
//!   pending one already, so a crash with renewals pending loses nothing: the next start reads the
//!   file, which is ahead.
//! - **`standbys_lag_ms`** is written only under the lock, when a pending renewal is published:
//!   how long after its writing a backend last saw it not yet flushed
//!   (`crate::core::reservation::next_lag`). It only sizes renewals (`Reach`); no id depends on it.
//!
//! - **`refusal`** is set by the startup hook when the reservation file exists but cannot be
//!   continued from (unreadable, damaged, another layout); `reserved_until_unix_ms` is then
//!   `i64::MIN`, so no id passes the fast path, and the slow path raises the reason. It is
//!   cleared, and the generators started at the file's reservation, only under the LWLock by the
//!   backend that finds the file usable again (`crate::runtime::reservation::recover`). The server and
//!   every reader keep working meanwhile.
//!
//! - **`space_generation`** only grows, by `fetch_add` from the `snowflake_id_space` trigger (at
//!   the statement and again at commit). A backend remembers the value it last checked its
//!   database's record at (`crate::runtime::space`) and checks again, through SPI, when it differs; the
//!   fast path reads it with one relaxed load.
//! - **`owned_minted_tick`** and **`owned_clock_tick`** only grow, by `fetch_max` from
//!   `snowflake_next()` (about once per tick: each is loaded first and written only with a newer
//!   tick). `snowflake_next()` picks among the server's shards, and one that sat idle has its next
//!   word in the past: so it mints at the latest minted tick or later, raising the shard it picked
//!   (`Slot::raise_to`) when it must. The raise records the latest *clock* tick as seen, never the
//!   minted one, which may have been borrowed ahead of the clock: a clock that merely catches up
//!   with a borrowed tick is not a step back. A clock behind the latest clock tick stepped back,
//!   and is waited out or refused as on any generator. No id's uniqueness depends on either: they
//!   keep `snowflake_next()`'s ids in time order across its shards, and each backend's in the
//!   order it minted them.
//! - **`checked_databases`** is a cache, not a guard: an entry says that some backend of that
//!   database waited for its recorded floor (with that record of its id space) since the start
//!   (`crate::runtime::space`), after which the clock is past it. An entry is the record's 64-bit
//!   fingerprint, which holds the database's oid, so that a hit is the fingerprint alone; the oid
//!   beside it (stored after the entry is claimed) only says which entry a database's next check
//!   replaces, and a stale one costs another wait, never a skipped one. Entries are claimed and
//!   replaced with one CAS each, only once the wait is over, and never cleared before a restart; a
//!   backend that finds no entry waits for the floor itself (at once when the clock is already past
//!   it), so two backends of the same database may both wait. When all 256 are taken, a new entry
//!   replaces one in turn (`checked_next`), so a server with more databases than that checks
//!   some of them again, never all of them on every connection.
//! - **`verdicts`** is a cache too: a backend whose check found its database's record naming the
//!   server's id space, and waited for its floor, leaves what it read there, with the
//!   `space_generation` it read it at. A new session that cannot take the record table's lock at
//!   once (a session holds it with a stronger request queued behind) uses the entry of its
//!   database instead, if no record changed since (the generation is the same). A writer claims
//!   an entry by moving its version from even to odd with one CAS (it skips the cache if another
//!   writer holds it), writes the fields, and makes the version even again; a reader copies the
//!   fields between two loads of an even, unchanged version (a sequence lock), and any doubt is
//!   a miss. A stale floor there is only lower than the record's: the floor is advanced again
//!   before an id past it.
//! - **`record_changes`** is a guard: the record's trigger claims an entry for its database and
//!   transaction (one CAS from 0) before it bumps `space_generation`, so every backend that checks
//!   its record because of that bump finds it, and waits for that transaction to end before it
//!   reads the record (`crate::runtime::space`): what it would read before the commit is the old
//!   record, and the commit's own bump comes a moment after the new rows are visible. An entry is
//!   cleared (one CAS back to 0) by whichever backend finds its transaction no longer running; a
//!   trigger that finds no free entry clears those first, and fails its statement if all 32 are
//!   still running (only superusers and pg_write_all_data write records). The transaction runs
//!   on: no backend ever waits on a lock here, only on its latch, within its call's budget.
//!
//! # Lifetime
//! The segment exists only when the library is in `shared_preload_libraries`. Without it the
//! pointer below stays null and every accessor reports [`NotPreloaded`], which the SQL layer
//! turns into SQLSTATE 55000 with a hint. A crash restart re-creates the segment, starting every
//! generator at the reservation read back from disk. Nothing here stops the postmaster: a file
//! it cannot continue from disables the generators, with a WARNING in the log.

use std::mem::size_of;
use std::ptr;
use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::core::layout::Layout;
use crate::core::monotonic::{State, Timeline};
use crate::core::reservation::Refusal;
use crate::core::share;
use crate::core::uuidv7;
use crate::runtime::reservation_file::{self, Found};
use crate::runtime::{clock, errors, guc};

const TRANCHE: &std::ffi::CStr = c"snowflake_id";

#[repr(C, align(128))]
struct Header {
    shard_count: u64,
    reserved_until_unix_ms: AtomicI64,
    reservation_writes: AtomicU64,
    reservation_written_at: AtomicI64,
    refusal: AtomicU32,
    file_durable: AtomicU32,
    space_generation: AtomicU64,
    checked_next: AtomicU64,
    owned_minted_tick: AtomicU64,
    owned_clock_tick: AtomicU64,
    standbys_lag_ms: AtomicI64,
    pending: [Pending; 2],
    checked_databases: [AtomicU64; CHECKED_DATABASES],
    checked_database_oids: [AtomicU32; CHECKED_DATABASES],
    verdicts: [Verdict; VERDICTS],
    record_changes: [AtomicU64; RECORD_CHANGES],
}

/// How many databases the registry of scanned ones remembers.
const CHECKED_DATABASES: usize = 256;
/// How many databases' last good checks the cache keeps.
const VERDICTS: usize = 64;
/// How many uncommitted changes of records the server follows at once.
const RECORD_CHANGES: usize = 32;
const _: () = assert!(size_of::<Header>() == 6144, "the layout in the module comment");

/// A renewal on disk and in the WAL, not yet published: it waits for the synchronous standbys
/// (see the module comment). `until` is `i64::MIN` when the slot is empty.
#[repr(C)]
struct Pending {
    until: AtomicI64,
    written_at: AtomicI64,
    lsn: AtomicU64,
    seen_unflushed_at: AtomicI64,
}

/// A renewal waiting for the synchronous standbys: reserved until, written at (by the real
/// clock, Unix ms), and the end of its WAL record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingRenewal {
    pub until: i64,
    pub written_at: i64,
    pub lsn: u64,
}

/// One database's last good check of its record (see the module comment).
#[repr(C)]
struct Verdict {
    version: AtomicU64,
    key: AtomicU64,
    table: AtomicU64,
    floor: AtomicI64,
    generation: AtomicU64,
}

/// What a check of a database's record found, for [`remember_verdict`] and [`remembered_verdict`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoodCheck {
    pub fingerprint: u64,
    pub table: u32,
    pub floor_unix_ms: i64,
}

const _: () = assert!(size_of::<Slot>() == 128, "the layout in the module comment");

/// One generator's state word and statistics.
#[repr(C, align(128))]
#[derive(Default)]
pub struct Slot {
    pub state: State,
    pub issued_base: AtomicU64,
    pub ahead_ticks: AtomicU64,
    pub max_lead_ms: AtomicU64,
    pub waits: AtomicU64,
    pub wait_ns: AtomicU64,
    pub backsteps: AtomicU64,
    pub max_backstep_ms: AtomicU64,
    pub errors: AtomicU64,
}

impl Slot {
    /// Starts the generator at `next_free`, with the clock seen at `seen_tick` and nothing
    /// issued yet.
    fn start_at(&self, next_free: u64, seen_tick: u64, tl: &Timeline) {
        self.state.next_free.store(next_free, Ordering::Relaxed);
        self.state.seen_tick.store(seen_tick, Ordering::Relaxed);
        self.issued_base.store(tl.count().base_at(next_free), Ordering::Relaxed);
    }

    /// The ids issued since the start or the last reset.
    pub fn issued(&self, tl: &Timeline) -> u64 {
        let base = self.issued_base.load(Ordering::Relaxed);
        tl.count().issued(base, self.state.next_free.load(Ordering::Acquire))
    }

    /// Starts every statistic from zero again, the issued count included; the state word is left
    /// as it is. A reset that races a call entering a new tick can miss or double that call's add:
    /// the count is then off by less than one tick's ids.
    fn reset_statistics(&self, tl: &Timeline) {
        self.issued_base.store(tl.count().base_at(self.state.next_free.load(Ordering::Acquire)), Ordering::Relaxed);
        for c in [
            &self.ahead_ticks,
            &self.max_lead_ms,
            &self.waits,
            &self.wait_ns,
            &self.backsteps,
            &self.max_backstep_ms,
            &self.errors,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// Raises the generator to at least `word` without issuing anything, as if the clock had
    /// been seen at `seen_tick` (`snowflake_id_advance`, and recovery from a damaged file).
    pub fn raise_to(&self, word: u64, seen_tick: u64, tl: &Timeline) {
        self.state.seen_tick.fetch_max(seen_tick, Ordering::AcqRel);
        let prev = self.state.next_free.fetch_max(word, Ordering::AcqRel);
        if word > prev {
            self.issued_base.fetch_add(tl.count().on_raise(prev, word), Ordering::Relaxed);
        }
    }
}

/// The base of the segment in this process, or null when the library was not preloaded.
/// Set in the postmaster before fork, so every backend inherits it.
static SEGMENT: AtomicPtr<Header> = AtomicPtr::new(ptr::null_mut());
/// The reservation LWLock, found at startup like the segment.
static LOCK: AtomicPtr<pg_sys::LWLock> = AtomicPtr::new(ptr::null_mut());

/// The generators were called in a server that did not preload the library.
#[derive(Debug)]
pub struct NotPreloaded;

fn segment_size(shard_count: usize) -> usize {
    size_of::<Header>() + (1 + shard_count) * size_of::<Slot>()
}

/// Asks for the segment and the LWLock, and installs the startup hook. Call from `_PG_init`
/// while `shared_preload_libraries` is being processed, after `guc::init`.
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
    unsafe {
        pg_sys::RequestAddinShmemSpace(segment_size(guc::layout().shard_count()));
        pg_sys::RequestNamedLWLockTranche(TRANCHE.as_ptr(), 1);
    }
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
    // SAFETY: runs in the postmaster (also after a crash restart) with no backends yet; the
    // segment is found or created under ShmemInitStruct's own lock, and initialised under ours.
    unsafe {
        if let Some(prev) = PREV_STARTUP_HOOK {
            prev();
        }
        let layout = guc::layout();
        let shard_count = layout.shard_count();
        // Read the reservation before taking the lock. Whatever the file holds, the server
        // starts: a file the generators cannot continue from disables them, with a WARNING.
        let found = reservation_file::load(layout);
        reservation_file::log_start(&found, clock::now_unix_ms());
        // A server with more backends than a tick holds words cannot keep the lead's last tick
        // from filling (crate::core::share): say so once, where a DBA reads the start.
        let backends = pg_sys::MaxBackends.unsigned_abs();
        for (generator, low_bits) in [("snowflake id", layout.widths().seq_bits), ("UUIDv7", uuidv7::FRACTION_BITS)] {
            if !share::never_fills(low_bits, backends) {
                errors::reserve_can_fill(generator, 1u64 << low_bits, backends).report(PgLogLevel::WARNING);
            }
        }
        let (reserved, written_at, refusal) = match &found {
            Found::Nothing => (0, 0, 0),
            Found::Continue(r) => (r.reserved_until_unix_ms, r.written_at_unix_ms, 0),
            Found::Refuse(why, _) => (i64::MIN, 0, *why as u32),
        };
        // Our own named tranche's lock, which PostgreSQL has set up before this hook runs, guards
        // the first initialisation (as AddinShmemInitLock does for pg_stat_statements, whose
        // place in MainLWLockArray is not part of any API). Afterwards it serialises renewals.
        let lock = &raw mut (*pg_sys::GetNamedLWLockTranche(TRANCHE.as_ptr())).lock;
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let base = pg_sys::ShmemInitStruct(TRANCHE.as_ptr(), segment_size(shard_count), &mut found).cast::<Header>();
        if !found {
            ptr::write_bytes(base.cast::<u8>(), 0, segment_size(shard_count));
            (&raw mut (*base).shard_count).write(shard_count as u64);
            (*base).reserved_until_unix_ms.store(reserved, Ordering::Relaxed);
            (*base).refusal.store(refusal, Ordering::Relaxed);
            for p in &(*base).pending {
                p.until.store(i64::MIN, Ordering::Relaxed);
            }
            // Every generator starts at the reservation, above every id issued before, with the
            // clock last seen when the file was written.
            let slots = base.add(1).cast::<Slot>();
            let start = |slot: &Slot, tl: &Timeline| {
                slot.start_at(tl.first_word_at(reserved), tl.tick_of_unix_ms(written_at), tl);
            };
            start(&*slots, &uuidv7::TIMELINE);
            let tl = Timeline::of(layout);
            for i in 0..shard_count {
                start(&*slots.add(1 + i), &tl);
            }
        }
        LOCK.store(lock, Ordering::Release);
        pg_sys::LWLockRelease(lock);
        SEGMENT.store(base, Ordering::Release);
    }
}

/// The segment, or [`NotPreloaded`]. A thin handle on the raw pointer, so that slot addresses
/// are derived from the whole segment, not from a reference to its header alone.
#[derive(Clone, Copy)]
struct Segment(*mut Header);

impl Segment {
    fn header(self) -> &'static Header {
        // SAFETY: non-null (checked in `segment`), initialised by shmem_startup, and alive as long
        // as the server.
        unsafe { &*self.0 }
    }

    fn slot(self, index: usize) -> &'static Slot {
        // SAFETY: `1 + shard_count` slots follow the header within the segment; callers pass an
        // index below that.
        unsafe { &*self.0.add(1).cast::<Slot>().add(index) }
    }
}

#[inline]
fn segment() -> Result<Segment, NotPreloaded> {
    let base = SEGMENT.load(Ordering::Acquire);
    if base.is_null() {
        Err(NotPreloaded)
    } else {
        Ok(Segment(base))
    }
}

/// The slot of one shard.
///
/// # Errors
/// [`NotPreloaded`] when the segment does not exist.
///
/// # Panics
/// When `shard` is outside the segment: callers check it against the layout first.
pub fn shard_slot(shard: u32) -> Result<&'static Slot, NotPreloaded> {
    let seg = segment()?;
    let count = seg.header().shard_count;
    assert!(u64::from(shard) < count, "shard {shard} outside a segment of {count} shards");
    Ok(seg.slot(1 + shard as usize))
}

/// The slot of one shard, or `None` when the library is not preloaded or the shard is outside
/// the segment. Never panics: the generator's unguarded fast entry uses it.
#[inline]
pub fn try_shard_slot(shard: u32) -> Option<&'static Slot> {
    let seg = segment().ok()?;
    (u64::from(shard) < seg.header().shard_count).then(|| seg.slot(1 + shard as usize))
}

/// The UUIDv7 slot.
///
/// # Errors
/// [`NotPreloaded`] when the segment does not exist.
pub fn uuidv7_slot() -> Result<&'static Slot, NotPreloaded> {
    Ok(segment()?.slot(0))
}

/// Every shard slot with its shard number, for the statistics view.
///
/// # Errors
/// [`NotPreloaded`] when the segment does not exist.
pub fn shard_slots() -> Result<impl Iterator<Item = (u32, &'static Slot)>, NotPreloaded> {
    let seg = segment()?;
    Ok((0..seg.header().shard_count as u32).map(move |s| (s, seg.slot(1 + s as usize))))
}

/// Why every generator refuses, if they do (see [`Refusal`]).
#[inline]
pub fn refusal() -> Option<Refusal> {
    segment().ok().and_then(|s| Refusal::from_code(s.header().refusal.load(Ordering::Acquire)))
}

/// Whether the reservation file on disk is known durable, so that a slot may be overwritten in
/// place (see the layout). 0 at every start (the segment is zeroed).
pub fn file_durable() -> bool {
    segment().is_ok_and(|s| s.header().file_durable.load(Ordering::Acquire) != 0)
}

/// Records whether the file is known durable; the caller holds the reservation lock.
pub fn set_file_durable(durable: bool) {
    if let Ok(s) = segment() {
        s.header().file_durable.store(u32::from(durable), Ordering::Release);
    }
}

/// Raises every generator so that its next id lies at or after `until`, as if the clock had been
/// seen at `seen_unix_ms`: for generators refused at start that may mint again (with the file's
/// reservation and write time), and for `snowflake_id_advance` (with its point in time for both).
pub fn raise_generators(layout: &Layout, until: i64, seen_unix_ms: i64) {
    let Ok(seg) = segment() else { return };
    let raise =
        |slot: &Slot, tl: &Timeline| slot.raise_to(tl.first_word_at(until), tl.tick_of_unix_ms(seen_unix_ms), tl);
    raise(seg.slot(0), &uuidv7::TIMELINE);
    let tl = Timeline::of(layout);
    for s in 0..seg.header().shard_count as usize {
        raise(seg.slot(1 + s), &tl);
    }
}

/// Zeroes every generator's statistics, not its state (`snowflake_id_stats_reset()`).
///
/// # Errors
/// [`NotPreloaded`] when the segment does not exist.
pub fn reset_statistics(layout: &Layout) -> Result<(), NotPreloaded> {
    let seg = segment()?;
    seg.slot(0).reset_statistics(&uuidv7::TIMELINE);
    let tl = Timeline::of(layout);
    for s in 0..seg.header().shard_count as usize {
        seg.slot(1 + s).reset_statistics(&tl);
    }
    Ok(())
}

/// Whether every snowflake generator's next word is at least `snowflake_word` (when given) and the
/// UUIDv7 generator's at least `uuidv7_word`: then no id they hand out lies below either. False
/// without the preload.
pub fn generators_at_least(snowflake_word: Option<u64>, uuidv7_word: u64) -> bool {
    let Ok(seg) = segment() else { return false };
    let at_least = |slot: &Slot, word: u64| slot.state.next_free.load(Ordering::Acquire) >= word;
    at_least(seg.slot(0), uuidv7_word)
        && snowflake_word.is_none_or(|w| (0..seg.header().shard_count as usize).all(|s| at_least(seg.slot(1 + s), w)))
}

/// The counter of changes to any database's record of its id space (0 without the preload).
#[inline]
pub fn space_generation() -> u64 {
    segment().map_or(0, |s| s.header().space_generation.load(Ordering::Acquire))
}

/// Tells every backend to read its database's record again.
pub fn bump_space_generation() {
    if let Ok(s) = segment() {
        s.header().space_generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// Notes that transaction `xid` is changing `database`'s record, before the change is announced
/// (see the module comment). False when all entries hold running transactions.
pub fn note_record_change(database: u32, xid: u32, running: impl Fn(u32) -> bool) -> bool {
    let Ok(seg) = segment() else { return true };
    let key = u64::from(database) << 32 | u64::from(xid);
    let entries = &seg.header().record_changes;
    if entries.iter().any(|e| e.load(Ordering::Acquire) == key) {
        return true;
    }
    for pass in 0..2 {
        for e in entries {
            let seen = e.load(Ordering::Acquire);
            // The second pass frees the entries of transactions that ended, then takes one.
            let free = seen == 0 || (pass == 1 && !running(seen as u32));
            if free && e.compare_exchange(seen, key, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                return true;
            }
        }
    }
    false
}

/// Clears the entry [`note_record_change`] made for `database` and `xid`: at the end of that
/// transaction, by its own backend, so that no entry outlives it (a 32-bit xid left behind would
/// read as running again after 2^31 more transactions).
pub fn clear_record_change(database: u32, xid: u32) {
    let Ok(seg) = segment() else { return };
    let key = u64::from(database) << 32 | u64::from(xid);
    for e in &seg.header().record_changes {
        let _ = e.compare_exchange(key, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// The transactions noted as changing `database`'s record, clearing the entries of those for which
/// `running` says they ended.
pub fn record_changes(database: u32, running: impl Fn(u32) -> bool) -> Vec<u32> {
    let Ok(seg) = segment() else { return Vec::new() };
    let mut open = Vec::new();
    for e in &seg.header().record_changes {
        let seen = e.load(Ordering::Acquire);
        if seen == 0 || (seen >> 32) as u32 != database {
            continue;
        }
        if running(seen as u32) {
            open.push(seen as u32);
        } else {
            let _ = e.compare_exchange(seen, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
    }
    open
}

/// Whether the stored ids of `database`, with the record fingerprint `fingerprint` (64 bits, with
/// the database in it, never zero), were scanned since the start. False without the preload.
pub fn database_checked(fingerprint: u64) -> bool {
    segment().is_ok_and(|s| s.header().checked_databases.iter().any(|e| e.load(Ordering::Acquire) == fingerprint))
}

/// Remembers that the stored ids of `database` were scanned, under its record's `fingerprint`:
/// replacing its entry for an older fingerprint, else taking a free one, else replacing the
/// entries in turn. The database beside an entry only says which entry to replace: a hit is the
/// fingerprint alone, which holds the database.
pub fn mark_database_checked(database: u32, fingerprint: u64) {
    let Ok(seg) = segment() else { return };
    let h = seg.header();
    let claim = |matches: &dyn Fn(usize, u64) -> bool| {
        h.checked_databases.iter().enumerate().find_map(|(i, e)| {
            let seen = e.load(Ordering::Acquire);
            (matches(i, seen) && e.compare_exchange(seen, fingerprint, Ordering::AcqRel, Ordering::Acquire).is_ok())
                .then_some(i)
        })
    };
    let mine = |i: usize, seen: u64| seen != 0 && h.checked_database_oids[i].load(Ordering::Acquire) == database;
    let i = claim(&mine).or_else(|| claim(&|_, seen| seen == 0)).unwrap_or_else(|| {
        let i = h.checked_next.fetch_add(1, Ordering::Relaxed) as usize % CHECKED_DATABASES;
        h.checked_databases[i].store(fingerprint, Ordering::Release);
        i
    });
    h.checked_database_oids[i].store(database, Ordering::Release);
}

/// Leaves a good check of `database`'s record, read at `generation`, for sessions that cannot
/// lock the record table (see the module comment). Skipped when another backend is writing the
/// entry it would use.
pub fn remember_verdict(database: u32, generation: u64, check: GoodCheck) {
    let Ok(seg) = segment() else { return };
    let entries = &seg.header().verdicts;
    // This database's entry; else one left before the latest record change (or never used);
    // else one in turn.
    let mine = |e: &Verdict| e.key.load(Ordering::Acquire) >> 32 == u64::from(database);
    let stale = |e: &Verdict| e.generation.load(Ordering::Acquire) < generation || e.key.load(Ordering::Acquire) == 0;
    let i = entries
        .iter()
        .position(mine)
        .or_else(|| entries.iter().position(stale))
        .unwrap_or(database as usize % VERDICTS);
    let e = &entries[i];
    let v = e.version.load(Ordering::Acquire);
    // Never replace a newer check of this database with an older one.
    if v % 2 == 1 || (mine(e) && e.generation.load(Ordering::Acquire) > generation) {
        return;
    }
    if e.version.compare_exchange(v, v + 1, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return;
    }
    e.key.store(u64::from(database) << 32 | (check.fingerprint & 0xffff_ffff), Ordering::Release);
    e.table.store(u64::from(check.table), Ordering::Release);
    e.floor.store(check.floor_unix_ms, Ordering::Release);
    e.generation.store(generation, Ordering::Release);
    e.version.store(v + 2, Ordering::Release);
}

/// The good check of `database`'s record left at `generation`, if the cache holds one.
pub fn remembered_verdict(database: u32, generation: u64) -> Option<GoodCheck> {
    let seg = segment().ok()?;
    seg.header().verdicts.iter().find_map(|e| {
        let v = e.version.load(Ordering::Acquire);
        let key = e.key.load(Ordering::Acquire);
        let check = GoodCheck {
            fingerprint: key & 0xffff_ffff,
            table: e.table.load(Ordering::Acquire) as u32,
            floor_unix_ms: e.floor.load(Ordering::Acquire),
        };
        let read_at = e.generation.load(Ordering::Acquire);
        std::sync::atomic::fence(Ordering::Acquire);
        let whole = v % 2 == 0 && e.version.load(Ordering::Acquire) == v;
        (whole && key >> 32 == u64::from(database) && key != 0 && read_at == generation).then_some(check)
    })
}

/// The durable reservation: no id carries a time at or after it. `i64::MIN` without preload.
#[inline]
pub fn reserved_until() -> i64 {
    segment().map_or(i64::MIN, |s| s.header().reserved_until_unix_ms.load(Ordering::Acquire))
}

/// The renewals waiting for the synchronous standbys, the older first (see the module comment).
/// Read without the lock: a pair read while the lock holder changes a slot may be mismatched, so
/// callers only use it to decide whether to take the lock.
pub fn pending_renewals() -> [Option<PendingRenewal>; 2] {
    let Ok(seg) = segment() else { return [None, None] };
    seg.header().pending.each_ref().map(|p| {
        let until = p.until.load(Ordering::Acquire);
        (until != i64::MIN).then(|| PendingRenewal {
            until,
            written_at: p.written_at.load(Ordering::Relaxed),
            lsn: p.lsn.load(Ordering::Relaxed),
        })
    })
}

/// Notes that the pending renewals whose record ends past `flushed` were not yet flushed by the
/// standbys at `now_unix_ms` (the real clock): the lag sampled when one is published. A locked
/// instruction only when the time noted is older.
pub fn saw_unflushed(flushed: u64, now_unix_ms: i64) {
    let Ok(seg) = segment() else { return };
    for p in &seg.header().pending {
        if p.until.load(Ordering::Acquire) != i64::MIN
            && p.lsn.load(Ordering::Relaxed) > flushed
            && p.seen_unflushed_at.load(Ordering::Relaxed) < now_unix_ms
        {
            p.seen_unflushed_at.fetch_max(now_unix_ms, Ordering::Relaxed);
        }
    }
}

/// How long the synchronous standbys take to flush a renewal, as last estimated
/// (`crate::core::reservation::next_lag`); 0 without standbys or without the preload.
#[inline]
pub fn standbys_lag_ms() -> i64 {
    segment().map_or(0, |s| s.header().standbys_lag_ms.load(Ordering::Relaxed))
}

/// The latest tick `snowflake_next()` minted at, from the server's shards; 0 without preload.
#[inline]
pub fn owned_minted_tick() -> u64 {
    segment().map_or(0, |s| s.header().owned_minted_tick.load(Ordering::Relaxed))
}

/// The latest clock tick `snowflake_next()` read; 0 without preload.
#[inline]
pub fn owned_clock_tick() -> u64 {
    segment().map_or(0, |s| s.header().owned_clock_tick.load(Ordering::Acquire))
}

/// Records that `snowflake_next()` minted at `minted_tick` with the clock at `clock_tick` (a
/// locked instruction only when a tick is newer than the one recorded, about once per tick).
#[inline]
pub fn saw_owned(minted_tick: u64, clock_tick: u64) {
    if let Ok(s) = segment() {
        let h = s.header();
        if minted_tick > h.owned_minted_tick.load(Ordering::Relaxed) {
            h.owned_minted_tick.fetch_max(minted_tick, Ordering::Relaxed);
        }
        if clock_tick > h.owned_clock_tick.load(Ordering::Relaxed) {
            h.owned_clock_tick.fetch_max(clock_tick, Ordering::AcqRel);
        }
    }
}

/// The reservation's statistics: (reserved until, file writes, last write).
///
/// # Errors
/// [`NotPreloaded`] when the segment does not exist.
pub fn reservation_stats() -> Result<(i64, u64, i64), NotPreloaded> {
    let h = segment()?.header();
    Ok((
        h.reserved_until_unix_ms.load(Ordering::Acquire),
        h.reservation_writes.load(Ordering::Relaxed),
        h.reservation_written_at.load(Ordering::Relaxed),
    ))
}

/// Holds the reservation LWLock; releases it when dropped.
pub struct ReservationLock(*mut pg_sys::LWLock);

impl ReservationLock {
    /// Takes the lock, waiting when `wait`, else only if it is free.
    pub fn acquire(wait: bool) -> Option<ReservationLock> {
        let lock = LOCK.load(Ordering::Acquire);
        if lock.is_null() {
            return None;
        }
        // SAFETY: the lock lives in shared memory for the server's lifetime.
        let got = unsafe {
            if wait {
                pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE)
            } else {
                pg_sys::LWLockConditionalAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE)
            }
        };
        // `then`, not `then_some`: building the guard eagerly would release a lock we do not hold.
        (got || wait).then(|| ReservationLock(lock))
    }

    /// Lets the generators mint again, once the lock holder has started them at a usable
    /// reservation ([`raise_generators`], [`ReservationLock::publish`]).
    pub fn clear_refusal(&self) {
        if let Ok(seg) = segment() {
            seg.header().refusal.store(0, Ordering::Release);
        }
    }

    /// Publishes a reservation read back from disk (recovery), without counting a write.
    pub fn publish_loaded(&self, reserved_until_unix_ms: i64) {
        if let Ok(seg) = segment() {
            seg.header().reserved_until_unix_ms.fetch_max(reserved_until_unix_ms, Ordering::AcqRel);
        }
    }

    /// Leaves a renewal that is on disk and in the WAL to be published once the synchronous
    /// standbys have flushed its record ([`ReservationLock::publish_flushed`]): in the empty
    /// slot, else in place of the newer one, so that the older, which the standbys flush first,
    /// is published as soon as they have it.
    pub fn push_pending(&self, r: PendingRenewal) {
        let Ok(seg) = segment() else { return };
        let h = seg.header();
        let pending = &h.pending;
        let p = if pending[0].until.load(Ordering::Acquire) == i64::MIN {
            &pending[0]
        } else {
            if pending[1].until.load(Ordering::Acquire) != i64::MIN {
                // The newer one was written too, and is replaced unpublished: count its write.
                h.reservation_writes.fetch_add(1, Ordering::Relaxed);
            }
            &pending[1]
        };
        p.written_at.store(r.written_at, Ordering::Relaxed);
        p.lsn.store(r.lsn, Ordering::Relaxed);
        p.seen_unflushed_at.store(r.written_at, Ordering::Relaxed);
        p.until.store(r.until, Ordering::Release);
    }

    /// Publishes the newest pending renewal the standbys have flushed (`flushed`; every pending
    /// one when `None`, no standby being required any more), drops it and the older one, and
    /// counts its lag into the estimate. Whether one was published.
    pub fn publish_flushed(&self, flushed: Option<u64>) -> bool {
        let Ok(seg) = segment() else { return false };
        let h = seg.header();
        let [older, newer] = pending_renewals();
        let have = |r: Option<PendingRenewal>| r.filter(|r| flushed.is_none_or(|f| f >= r.lsn));
        let (published, keep) = match (have(newer), have(older)) {
            (Some(n), _) => (n, None),
            (None, Some(o)) => (o, newer),
            (None, None) => return false,
        };
        let slot = if newer == Some(published) { &h.pending[1] } else { &h.pending[0] };
        let sample = slot.seen_unflushed_at.load(Ordering::Relaxed).saturating_sub(published.written_at);
        let lag = match flushed {
            Some(_) => crate::core::reservation::next_lag(h.standbys_lag_ms.load(Ordering::Relaxed), sample),
            None => 0,
        };
        h.standbys_lag_ms.store(lag, Ordering::Relaxed);
        if published != older.unwrap_or(published) {
            // The older one was written too, and is dropped unpublished: count its write.
            h.reservation_writes.fetch_add(1, Ordering::Relaxed);
        }
        self.publish(published.until, published.written_at);
        for p in &h.pending {
            p.until.store(i64::MIN, Ordering::Release);
        }
        if let Some(k) = keep {
            let seen = h.pending[1].seen_unflushed_at.load(Ordering::Relaxed);
            self.push_pending(k);
            h.pending[0].seen_unflushed_at.store(seen, Ordering::Relaxed);
        }
        true
    }

    /// Publishes a reservation that is now on disk. Only the lock holder may call it.
    pub fn publish(&self, reserved_until_unix_ms: i64, written_at_unix_ms: i64) {
        if let Ok(seg) = segment() {
            let h = seg.header();
            h.reserved_until_unix_ms.fetch_max(reserved_until_unix_ms, Ordering::AcqRel);
            h.reservation_writes.fetch_add(1, Ordering::Relaxed);
            h.reservation_written_at.store(written_at_unix_ms, Ordering::Relaxed);
        }
    }
}

impl Drop for ReservationLock {
    fn drop(&mut self) {
        // SAFETY: we hold this lock (acquired in `acquire`).
        unsafe { pg_sys::LWLockRelease(self.0) };
    }
}
