//! Every `snowflake_id.*` setting: registration, validation and typed accessors.
//!
//! Each setting, its context, and why that context:
//!
//! - `snowflake_id.layout` (postmaster): changing the widths on a live server would re-read old
//!   ids wrongly and break ordering.
//! - `snowflake_id.epoch` (postmaster): the same; the epoch is part of every id.
//! - `snowflake_id.max_lead` (sighup): how far a shard's ids may run ahead of the clock. The state
//!   word is shared, so one session's lead would be every session's.
//! - `snowflake_id.max_rewind_wait` (sighup): how long a call waits for a clock that stepped back;
//!   one policy for the whole server.
//! - `snowflake_id.uuidv7_max_lead` (sighup): as `max_lead`, for the one UUIDv7 state every
//!   backend shares.
//! - `snowflake_id.shards` (sighup): the shards this server owns, a fence no session or role may
//!   widen.
//! - `snowflake_id.default_shard` (user): narrows `snowflake_next()` to one of the server's shards
//!   (0.1.0's meaning, kept for compatibility). Any session may pick one, but only inside the set.
//! - `snowflake_id.fleet_connections` (sighup): whether the fleet check may connect out of the
//!   server at all; a provider's switch, which no session may turn back on.
//! - `snowflake_id.public_keys_file` (sighup): where the keys of public ids are. A file only the
//!   server reads, never a setting a role could SHOW; hidden from other roles, like `config_file`.
//! - `snowflake_id.clock_source` (superuser): where the time comes from (TSC or
//!   `clock_gettime`); either keeps ids unique.
//! - `snowflake_id.clock_source_status` (internal): read-only, what `auto` resolved to on this
//!   server.
//! - `snowflake_id.debug_clock_offset` (superuser): fault injection, which shifts the generators'
//!   clock; off (0) by default.
//!
//! The layout and epoch are parsed once, in `_PG_init` (in the postmaster when preloaded, so
//! every backend inherits the parsed value), and kept in [`layout`]. Without the preload they
//! come from the configuration files, read when the library loads: never from a value a session
//! set before the library was loaded, which would let any user skew what the readers return.

use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::OnceLock;

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting, GucValue};
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::core::layout::{Layout, LayoutError, Widths};
use crate::core::monotonic::ClockPolicy;
use crate::core::shards::ShardSet;
use crate::core::time;
use crate::runtime::sysclock;

const LAYOUT_NAME: &CStr = c"snowflake_id.layout";
const EPOCH_NAME: &CStr = c"snowflake_id.epoch";
const SHARDS_NAME: &CStr = c"snowflake_id.shards";

static LAYOUT: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"default"));
static EPOCH: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"2025-01-01 00:00:00+00"));
static MAX_LEAD_MS: GucSetting<i32> = GucSetting::<i32>::new(5);
static MAX_REWIND_WAIT_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
static UUIDV7_MAX_LEAD_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
static SHARDS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"*"));
static DEFAULT_SHARD: GucSetting<i32> = GucSetting::<i32>::new(-1);
static PUBLIC_KEYS_FILE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"snowflake_id.keys"));
static DEBUG_CLOCK_OFFSET_MS: GucSetting<i32> = GucSetting::<i32>::new(0);
static FLEET_CONNECTIONS: GucSetting<bool> = GucSetting::<bool>::new(true);
static CLOCK_SOURCE: GucSetting<ClockSource> = GucSetting::<ClockSource>::new(ClockSource::Auto);
/// Read-only, like PostgreSQL's `huge_pages_status`: what `auto` resolved to.
static CLOCK_SOURCE_STATUS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"system"));
const CLOCK_SOURCE_STATUS_NAME: &CStr = c"snowflake_id.clock_source_status";

/// `snowflake_id.clock_source`: where the generators read the time.
#[derive(PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum ClockSource {
    /// The TSC, re-anchored to `CLOCK_REALTIME` every 12 µs, when the kernel itself keeps
    /// time with the TSC; `CLOCK_REALTIME` otherwise.
    #[name = c"auto"]
    Auto,
    /// `clock_gettime(CLOCK_REALTIME)` on every call.
    #[name = c"system"]
    System,
}

/// This process's parsed `snowflake_id.shards`, kept current by its assign hook; null means every
/// shard, the default. Read on every id, so a plain static rather than a `thread_local!` (a
/// backend is one thread, and a thread-local in a loaded library costs a `__tls_get_addr` call).
/// Only the assign hook replaces it, and it never runs while [`shard_allowed`] reads the set.
static SHARD_SET: AtomicPtr<ShardSet> = AtomicPtr::new(std::ptr::null_mut());

/// The layout in force, parsed once at load.
static ACTIVE_LAYOUT: OnceLock<Layout> = OnceLock::new();

/// Registers the settings and parses the layout. Runs once per process that loads the library:
/// the postmaster when preloaded, else each backend that first calls a function.
///
/// # Panics
/// Raises an ERROR (FATAL in the postmaster, so the server does not start) when the layout or
/// epoch in the configuration cannot be used.
pub fn init() {
    let preloading = starting();
    // A value in postgresql.conf sits in a placeholder until the setting is defined. If the check
    // hook refuses it, PostgreSQL only warns and keeps the default, which for an id layout would
    // be a silent disaster. So read the configured text first and refuse it ourselves. In the
    // postmaster the placeholder holds the configuration (files and command line); in a backend
    // loading the library on demand it may hold whatever the session SET, so read the files.
    let (configured_layout, configured_epoch) = if preloading {
        (placeholder(LAYOUT_NAME), placeholder(EPOCH_NAME))
    } else {
        let [layout, epoch] = config_file_values([LAYOUT_NAME, EPOCH_NAME])
            .unwrap_or_else(|why| crate::runtime::errors::raise(crate::runtime::errors::config_unreadable(&why)));
        (layout, epoch)
    };
    // The same for the fence: a shard list the check hook refuses would leave '*' in force, every
    // shard open. Read it now, and close the fence below if it does not parse.
    let configured_shards = if preloading { placeholder(SHARDS_NAME) } else { None };

    // PostgreSQL refuses to define postmaster-context settings after startup, so a library
    // loaded on demand (not preloaded) only reads what the configuration files say.
    // SAFETY: the hooks are plain functions that only parse their argument.
    if preloading {
        unsafe {
            GucRegistry::define_string_guc_with_hooks(
                LAYOUT_NAME,
                c"Bit layout of snowflake ids: default (41/13/9), twitter (41/10/12), sonyflake (39/16/8@10ms), \
                javascript (41/4/8), or TIME/SHARD/SEQ[@Nms].",
                c"Time, shard and sequence widths must add up to at most 63 bits, so ids never go negative. Fixed at \
                server start.",
                &LAYOUT,
                GucContext::Postmaster,
                GucFlags::default(),
                Some(check_layout),
                None,
                None,
            );
            GucRegistry::define_string_guc_with_hooks(
                EPOCH_NAME,
                c"Custom epoch of snowflake ids, as an ISO 8601 timestamp with a UTC offset.",
                c"Ids count ticks from this instant. It must not be in the future. Fixed at server start.",
                &EPOCH,
                GucContext::Postmaster,
                GucFlags::default(),
                Some(check_epoch),
                None,
                None,
            );
        }
    }
    // The layout comes first: the shard settings below are checked against it.
    let layout_text = configured_layout.unwrap_or_else(|| setting_text(&LAYOUT));
    let epoch_text = configured_epoch.unwrap_or_else(|| setting_text(&EPOCH));
    match parse_layout(&layout_text, &epoch_text) {
        Ok(layout) => {
            // A clock before the epoch is the clock's fault as often as the epoch's: the server
            // starts, the readers work, and the generators refuse with 22008 until the clock
            // passes the epoch.
            if let Err(e) = layout.check_epoch_not_in_future(sysclock::real_unix_ms()) {
                crate::runtime::errors::epoch_in_future(&e).report(PgLogLevel::WARNING);
            }
            let _ = ACTIVE_LAYOUT.set(layout);
        }
        Err(e) => crate::runtime::errors::bad_layout_setting(&e).report(PgLogLevel::ERROR),
    }

    // SAFETY: the hooks only parse their argument and update this process's copy of the set.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            SHARDS_NAME,
            c"The shards this server may mint snowflake ids for: * for all, or a list such as 0-15,40.",
            c"snowflake_next refuses any other shard, which catches two servers configured with the same shard.",
            &SHARDS,
            GucContext::Sighup,
            GucFlags::default(),
            Some(check_shards),
            Some(assign_shards),
            None,
        );
    }
    if let Some(Err(why)) = configured_shards.as_deref().map(|t| ShardSet::parse(t, layout().max_shard())) {
        close_fence(&why);
    }
    GucRegistry::define_int_guc(
        c"snowflake_id.default_shard",
        c"Narrows snowflake_next() to one of this server's shards; -1, the default, spreads it over all of them.",
        c"Must be one of snowflake_id.shards. New configurations leave it unset.",
        &DEFAULT_SHARD,
        -1,
        (1 << crate::core::layout::MAX_SHARD_BITS) - 1,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"snowflake_id.public_keys_file",
        c"The file holding the keys of public ids (snowflake_to_public, uuidv7_to_public), relative to the data \
            directory.",
        c"One key per line: VERSION HEX [encode]. It must be a regular file owned by the server's user with no group \
            or world access. Read again at the first call of a transaction after it changes.",
        &PUBLIC_KEYS_FILE,
        GucContext::Sighup,
        GucFlags::SUPERUSER_ONLY,
    );
    GucRegistry::define_bool_guc(
        c"snowflake_id.fleet_connections",
        c"Whether snowflake_fleet_check may connect to other servers.",
        c"off refuses every outgoing connection, a superuser's too: for services that allow no connection out of the \
            server.",
        &FLEET_CONNECTIONS,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.debug_clock_offset",
        c"For fault-injection tests only: steps the generators' clock back by this many milliseconds (a negative \
            value).",
        c"0, the default, is off. It never makes ids repeat: the generators treat it like any clock step back. Only \
            backward steps are allowed, so it cannot push the durable reservation into the future.",
        &DEBUG_CLOCK_OFFSET_MS,
        -86_400_000,
        0,
        GucContext::Suset,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_enum_guc(
        c"snowflake_id.clock_source",
        c"Where the generators read the time: auto (the CPU's TSC when the kernel keeps time with it) or system \
            (clock_gettime on every call).",
        c"auto extrapolates CLOCK_REALTIME from the TSC and reads the real clock again at least every 12 \
            microseconds, which makes a clock read cheaper. Either keeps ids unique.",
        &CLOCK_SOURCE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        CLOCK_SOURCE_STATUS_NAME,
        c"What snowflake_id.clock_source = auto uses on this server: tsc or system.",
        c"tsc when the kernel kept time with the TSC (x86-64, current_clocksource tsc) as the library loaded.",
        &CLOCK_SOURCE_STATUS,
        GucContext::Internal,
        GucFlags::from_bits_retain(pg_sys::GUC_NOT_IN_SAMPLE as i32) | GucFlags::DISALLOW_IN_FILE,
    );
    if sysclock::tsc_available() {
        // SAFETY: sets an internal setting we just defined, as PostgreSQL does for its own
        // read-only status settings.
        unsafe {
            pg_sys::SetConfigOption(
                CLOCK_SOURCE_STATUS_NAME.as_ptr(),
                c"tsc".as_ptr(),
                pg_sys::GucContext::PGC_INTERNAL,
                pg_sys::GucSource::PGC_S_OVERRIDE,
            );
        }
    }
    GucRegistry::define_int_guc(
        c"snowflake_id.max_lead",
        c"How far ahead of the clock a shard may run when its per-tick sequence is exhausted.",
        c"0 is strict: an id never carries a tick later than the clock's. Past the lead the call waits for the clock.",
        &MAX_LEAD_MS,
        0,
        1000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.max_rewind_wait",
        c"Longest wait for a clock that stepped back behind the last issued id.",
        c"A step back shorter than this is waited out; a longer one fails at once with SQLSTATE 58000.",
        &MAX_REWIND_WAIT_MS,
        0,
        60_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.uuidv7_max_lead",
        c"How far ahead of the clock UUIDv7 times may run when more than 4096 are generated in a millisecond.",
        c"UUIDv7 keeps a 12-bit sub-millisecond fraction; past 4096 values per millisecond the time moves ahead, as \
            in PostgreSQL 18. Past this lead the call waits for the clock.",
        &UUIDV7_MAX_LEAD_MS,
        0,
        60_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    reserve_prefix();
}

/// A scalar setting's value, read as PostgreSQL's own code reads its variables. `GucSetting::get`
/// first checks that it runs on the thread that first called into PostgreSQL, through a
/// thread-local: a `__tls_get_addr` call from a loaded library, five of them per id on the id
/// path. That path runs only where fmgr calls it, on the backend's one thread, which is the only
/// thread that ever writes a setting; so its settings are read here, without the check.
#[inline]
fn current<T: GucValue>(setting: &GucSetting<T>) -> T {
    // SAFETY: the variable PostgreSQL assigns, read on the one thread that assigns it (above);
    // GucRegistry initialised it at registration, before any SQL function could run.
    unsafe { T::from_raw(*setting.as_ptr()) }
}

/// Whether the fleet check may connect to other servers (`snowflake_id.fleet_connections`).
pub fn fleet_connections() -> bool {
    FLEET_CONNECTIONS.get()
}

/// The layout the server runs with.
pub fn layout() -> &'static Layout {
    // init() runs in _PG_init, before any SQL function of the library can be called.
    ACTIVE_LAYOUT.get().unwrap_or(&Layout::DEFAULT)
}

/// The snowflake clock policy from the current settings.
pub fn clock_policy() -> ClockPolicy {
    // The settings are registered with non-negative bounds.
    ClockPolicy {
        max_lead_ms: current(&MAX_LEAD_MS).unsigned_abs(),
        max_wait_ms: current(&MAX_REWIND_WAIT_MS).unsigned_abs(),
    }
}

/// The UUIDv7 clock policy: its own lead, the shared rewind wait.
pub fn uuidv7_clock_policy() -> ClockPolicy {
    ClockPolicy { max_lead_ms: current(&UUIDV7_MAX_LEAD_MS).unsigned_abs(), ..clock_policy() }
}

/// Whether this server may mint for `shard` (`snowflake_id.shards`).
#[inline]
pub fn shard_allowed(shard: u32) -> bool {
    let set = SHARD_SET.load(Ordering::Relaxed);
    // SAFETY: non-null pointers come from Box::into_raw in assign_shards, which frees a set only
    // after replacing it; this process has one thread, so no reader holds the old one then.
    set.is_null() || unsafe { &*set }.contains(shard)
}

/// Runs `f` on this server's shard set (`snowflake_id.shards`), `ShardSet::All` for `*`.
#[inline]
pub fn with_shard_set<T>(f: impl FnOnce(&ShardSet) -> T) -> T {
    let set = SHARD_SET.load(Ordering::Relaxed);
    if set.is_null() {
        f(&ShardSet::All)
    } else {
        // SAFETY: as in shard_allowed: the assign hook, the only writer, never runs during `f`.
        f(unsafe { &*set })
    }
}

/// Set when the configured `snowflake_id.shards` did not parse at start: the fence is closed
/// (no shard may mint) until a reload brings a valid list.
static FENCE_INVALID: AtomicBool = AtomicBool::new(false);

/// Closes the fence: no shard may mint. For a configured shard list that does not parse, which
/// PostgreSQL would otherwise replace by the default, every shard.
fn close_fence(why: &str) {
    replace_shard_set(Some(ShardSet::Ranges(Vec::new())));
    FENCE_INVALID.store(true, Ordering::Relaxed);
    crate::runtime::errors::invalid_fence(why).report(PgLogLevel::WARNING);
}

/// After a refusal: whether a fence closed at start because its configured list did not parse
/// has been fixed in the configuration since. PostgreSQL does not call the assign hook when the
/// line is removed (the setting keeps the default it never left), so the files are read again
/// here, on the refusal path only. Opens the fence in this backend when the list now parses.
pub fn reopen_fixed_fence() -> bool {
    if !FENCE_INVALID.load(Ordering::Relaxed) {
        return false;
    }
    let Ok([configured]) = config_file_values([SHARDS_NAME]) else { return false };
    match ShardSet::parse(configured.as_deref().unwrap_or("*"), layout().max_shard()) {
        Ok(set) => {
            replace_shard_set((set != ShardSet::All).then_some(set));
            FENCE_INVALID.store(false, Ordering::Relaxed);
            true
        }
        Err(_) => false,
    }
}

/// `snowflake_id.shards`, as configured, for messages.
pub fn shards_text() -> String {
    if FENCE_INVALID.load(Ordering::Relaxed) {
        return "(not a valid shard list in the configuration, so no shard is assigned)".to_owned();
    }
    setting_text(&SHARDS)
}

/// `snowflake_id.default_shard`, if set.
pub fn default_shard() -> Option<i64> {
    let s = current(&DEFAULT_SHARD);
    (s >= 0).then_some(i64::from(s))
}

/// `snowflake_id.public_keys_file`: a path, relative to the data directory (every backend's
/// working directory) unless absolute.
pub fn public_keys_file() -> String {
    setting_text(&PUBLIC_KEYS_FILE)
}

/// Whether `snowflake_id.clock_source` lets the generators use the TSC.
#[inline]
pub fn use_cycle_counter() -> bool {
    current(&CLOCK_SOURCE) == ClockSource::Auto
}

/// `snowflake_id.debug_clock_offset` in nanoseconds (0 unless a fault test set it).
#[inline]
pub fn debug_clock_offset_ns() -> i64 {
    i64::from(current(&DEBUG_CLOCK_OFFSET_MS)) * crate::core::time::NS_PER_MS
}

/// The widths and the epoch, checked together.
fn parse_layout(layout: &str, epoch: &str) -> Result<Layout, LayoutError> {
    let widths = Widths::parse(layout)?;
    let epoch_ms = time::parse_timestamp_ms(epoch).map_err(LayoutError::BadEpoch)?;
    Layout::new(widths, epoch_ms)
}

/// The values the server's configuration files give `names` (the last one wins, as in
/// PostgreSQL): `postgresql.conf` with its includes, then `postgresql.auto.conf`. `None` for a
/// name the files do not set. Reads only files the server itself reads.
///
/// # Errors
/// A message when a file cannot be read or parsed: the caller must not fall back to defaults.
fn config_file_values<const N: usize>(names: [&CStr; N]) -> Result<[Option<String>; N], String> {
    let mut values = [const { None }; N];
    // SAFETY: ParseConfigFile reads the files into a list allocated in the current memory
    // context, which we walk and free; ConfigFileName is set at server start. The auto file is
    // relative to the data directory, every backend's working directory. It reports problems at
    // DEBUG1 and returns false, so nothing is raised here.
    unsafe {
        for (file, strict) in
            [(pg_sys::ConfigFileName.cast_const(), true), (pg_sys::PG_AUTOCONF_FILENAME.as_ptr(), false)]
        {
            if file.is_null() {
                return Err("the server's configuration file is not known".to_owned());
            }
            let (mut head, mut tail) = (std::ptr::null_mut(), std::ptr::null_mut());
            let ok = pg_sys::ParseConfigFile(
                file,
                strict,
                std::ptr::null(),
                0,
                0,
                pg_sys::DEBUG1 as i32,
                &mut head,
                &mut tail,
            );
            let mut item = head;
            while ok && !item.is_null() {
                let var = &*item;
                if !var.name.is_null() && !var.value.is_null() {
                    let name = CStr::from_ptr(var.name).to_bytes();
                    if let Some(i) = names.iter().position(|n| n.to_bytes().eq_ignore_ascii_case(name)) {
                        values[i] = Some(CStr::from_ptr(var.value).to_string_lossy().into_owned());
                    }
                }
                item = var.next;
            }
            pg_sys::FreeConfigVariables(head);
            if !ok {
                return Err(format!("\"{}\" could not be parsed", CStr::from_ptr(file).to_string_lossy()));
            }
        }
    }
    Ok(values)
}

fn setting_text(s: &GucSetting<Option<CString>>) -> String {
    s.get().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The text a configuration file gave a not-yet-defined setting, if any.
fn placeholder(name: &CStr) -> Option<String> {
    // SAFETY: GetConfigOption with missing_ok returns NULL or a string owned by the GUC system,
    // which we copy at once.
    unsafe {
        let p = pg_sys::GetConfigOption(name.as_ptr(), true, false);
        (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
    }
}

fn reserve_prefix() {
    // SAFETY: plain calls into the GUC machinery with a static string.
    unsafe {
        #[cfg(feature = "pg14")]
        pg_sys::EmitWarningsOnPlaceholders(c"snowflake_id".as_ptr());
        #[cfg(not(feature = "pg14"))]
        pg_sys::MarkGUCPrefixReserved(c"snowflake_id".as_ptr());
    }
}

/// Sets the DETAIL line of a refused setting.
fn check_failed(e: &impl std::fmt::Display) -> bool {
    let msg = CString::new(e.to_string()).unwrap_or_default();
    // SAFETY: PostgreSQL reads GUC_check_errdetail_string right after the hook returns; pstrdup
    // copies into the current memory context, which outlives that.
    unsafe { pg_sys::GUC_check_errdetail_string = pg_sys::pstrdup(msg.as_ptr()) };
    false
}

fn hook_text(newval: *mut *mut c_char) -> Option<String> {
    // SAFETY: PostgreSQL passes a valid pointer to a (possibly NULL) C string.
    unsafe { newval.as_ref().filter(|p| !p.is_null()).map(|p| CStr::from_ptr(*p).to_string_lossy().into_owned()) }
}

#[pg_guard]
unsafe extern "C-unwind" fn check_layout(
    newval: *mut *mut c_char,
    _extra: *mut *mut c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    let Some(text) = hook_text(newval) else {
        return true;
    };
    // At start, `init` checks the layout and the epoch together. Later (ALTER SYSTEM), a new
    // layout must also fit the epoch in force, or the next start would fail.
    let checked = Widths::parse(&text).and_then(|w| {
        if starting() {
            Ok(())
        } else {
            Layout::new(w, layout().epoch_unix_ms()).map(|_| ())
        }
    });
    match checked {
        Err(e) => check_failed(&e),
        Ok(()) => true,
    }
}

/// Whether the postmaster is loading the library (processing `shared_preload_libraries`).
fn starting() -> bool {
    // SAFETY: a plain read of a flag PostgreSQL sets while processing shared_preload_libraries.
    unsafe { pg_sys::process_shared_preload_libraries_in_progress }
}

#[pg_guard]
unsafe extern "C-unwind" fn check_epoch(
    newval: *mut *mut c_char,
    _extra: *mut *mut c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    let Some(text) = hook_text(newval) else {
        return true;
    };
    // At start (the postmaster loading the library) `init` checks the epoch with the layout, and
    // a clock that reads before the epoch must not silently swap in the default epoch. Later, a
    // new epoch (ALTER SYSTEM) must fit the layout in force and be one the clock has reached;
    // the epoch in force is accepted as it is, so that a reload of a server whose clock is still
    // behind it does not log a configuration error each time.
    let checked = time::parse_timestamp_ms(&text).map_err(LayoutError::BadEpoch).and_then(|ms| {
        if starting() || ms == layout().epoch_unix_ms() {
            return Layout::new(Widths::DEFAULT, ms).map(|_| ());
        }
        Layout::new(layout().widths(), ms)?.check_epoch_not_in_future(sysclock::real_unix_ms())
    });
    match checked {
        Err(e) => check_failed(&e),
        Ok(()) => true,
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn check_shards(
    newval: *mut *mut c_char,
    _extra: *mut *mut c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    match hook_text(newval).map(|t| ShardSet::parse(&t, layout().max_shard())) {
        Some(Err(e)) => check_failed(&e),
        _ => true,
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn assign_shards(newval: *const c_char, _extra: *mut c_void) {
    // SAFETY: PostgreSQL passes the (already checked) new value as a C string, or NULL.
    let text = unsafe { newval.as_ref() }.map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
    // The check hook accepted this text, so it parses; a failure would keep the old set.
    if let Some(Ok(set)) = text.map(|t| ShardSet::parse(&t, layout().max_shard())) {
        replace_shard_set((set != ShardSet::All).then_some(set));
        FENCE_INVALID.store(false, Ordering::Relaxed);
    }
}

/// Installs this process's shard set (`None`: every shard).
/// Counts replacements of [`SHARD_SET`] in this process, so that what a backend remembers about
/// positions in the set (`crate::api::snowflake`'s pick hint) is dropped when the set changes.
static SHARD_SET_GENERATION: AtomicU64 = AtomicU64::new(0);

/// The generation of this process's shard set: it changes whenever the set does.
#[inline]
pub fn shard_set_generation() -> u64 {
    SHARD_SET_GENERATION.load(Ordering::Relaxed)
}

fn replace_shard_set(set: Option<ShardSet>) {
    SHARD_SET_GENERATION.fetch_add(1, Ordering::Relaxed);
    let new = set.map_or(std::ptr::null_mut(), |s| Box::into_raw(Box::new(s)));
    let old = SHARD_SET.swap(new, Ordering::Relaxed);
    if !old.is_null() {
        // SAFETY: `old` came from Box::into_raw above and is no longer reachable; this process has
        // one thread, so no reader holds it.
        drop(unsafe { Box::from_raw(old) });
    }
}
