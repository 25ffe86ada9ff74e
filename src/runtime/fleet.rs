//! The fleet check's glue: this server's facts, and asking the peers for theirs over libpq. The
//! rules are `crate::core::fleet`.
//!
//! **Connecting from a backend.** A backend is single-threaded, and its error handling, signals
//! and memory contexts assume it: no threads and no async runtime here. As `dblink` and
//! `postgres_fdw` do, each peer is reached with libpq in non-blocking mode (`PQconnectStartParams`
//! and `PQconnectPoll`, then `PQsendQuery` and `PQconsumeInput`), waiting on the socket with
//! `WaitLatchOrSocket`, so that a query cancel, `statement_timeout`, a termination or the death of
//! the postmaster end the wait at once, and every step is bounded by the call's timeout. The
//! connection is closed when its guard is dropped, which an ERROR unwinding through the Rust
//! frames also does.
//!
//! **Why libpq is loaded with `dlopen`**, not linked: only this function needs it, and a server
//! without `libpq.so.5` (the client library every PostgreSQL package depends on, and that the
//! server's own `libpqwalreceiver` loads) should still load the extension; the check then says
//! what is missing. No contrib module is needed: `dblink` would have to be installed in every
//! database that runs the check, and could not wait on the latch for us.
//!
//! **What a peer is asked:** its clock, five times (`clock_timestamp()`, core SQL), the schema of
//! its snowflake_id, and then that schema's `snowflake_fleet_info()`: one fixed statement at a
//! time, sent with `PQsendQueryParams` (so never two statements), under `search_path =
//! pg_catalog` (so no role's function or operator on the peer can stand in for a built-in), the
//! schema name quoted here, not by the peer. A reply is refused, and the connection closed, if it
//! is not one row of at most 64 KiB, or is anything but rows (a peer answering with a COPY, say).
//! libpq's notices from the peer are dropped, never written to this server's log.
//!
//! **What a peer can make this backend hold:** little. Rows are read in single-row mode (the
//! second row ends the conversation), and the memory libpq holds is watched after every call that
//! may read or parse ([`MemoryWatch`]): a peer that announces or streams more than 16 MiB is
//! dropped as soon as libpq has allocated for it (glibc) or the pages fill (any allocator).
//!
//! **What cannot be bounded:** libpq resolves a host name with `getaddrinfo` inside
//! `PQconnectPoll`, which blocks (the resolver's own timeout, 5 s a try by default) and cannot be
//! cancelled; so can Kerberos negotiation. Give peers as addresses (`hostaddr=`) where that
//! matters. A peer may name one host only, so that one entry is one server and one lookup.
//!
//! **Who may connect how** (`crate::core::conninfo`, the rules of `dblink` and `postgres_fdw`):
//! nobody when `snowflake_id.fleet_connections` is off. A superuser, as the server (peer or trust
//! authentication, the server user's `.pgpass`, service file and certificates). Any other role
//! granted the function only with a password of its own in the string, which the peer must ask
//! for (`require_auth` with libpq 16 or later, `PQconnectionUsedPassword` on every version), only
//! with the keywords of an allow-list (none that reads or writes a file of the server's, or uses
//! another kind of credential), and never with the server's client certificate or Kerberos
//! credentials, so that a grant cannot borrow the server's identity.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pgrx::datum::Array;
use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;

use crate::core::conninfo;
use crate::core::fleet::{self, Finding, Limits, Reached, Sample, ServerInfo};
use crate::core::monotonic::Timeline;
use crate::core::shards::ShardSet;
use crate::runtime::{errors, guc, shmem, sysclock};

/// At most this many peers a check, each within at most a minute: the check runs inside one
/// statement, whose snapshot holds back vacuum while it waits.
const MAX_PEERS: usize = 64;
const MAX_TIMEOUT_US: i64 = 60_000_000;
/// The longest connection string a check takes: libpq's are a few hundred bytes. With
/// [`MAX_PEERS`], what a caller passes can make the check hold at most a few MiB of its own.
const MAX_CONNINFO_BYTES: usize = 8192;

/// `snowflake_fleet_info()`: this server's facts, as JSON.
///
/// # Errors
/// 55000 without the preload.
pub fn describe() -> Result<serde_json::Value, ErrorReport> {
    shmem::shard_slot(0).map_err(|_| errors::not_preloaded())?;
    serde_json::to_value(local_info()).map_err(errors::fleet_info_unserialisable)
}

/// Whether this server may run the fleet check: preloaded, and `snowflake_id.fleet_connections`
/// on. Checked before anything else the caller passed is looked at.
///
/// # Errors
/// 55000 for either.
pub fn check_allowed() -> Result<(), ErrorReport> {
    shmem::shard_slot(0).map_err(|_| errors::not_preloaded())?;
    if !guc::fleet_connections() {
        return Err(errors::fleet_connections_disabled());
    }
    Ok(())
}

/// `snowflake_fleet_check(peers, ...)`: every peer's connection string judged before any peer is
/// reached, then each asked within `timeout_us`, then the findings about them all, each with the
/// label of the server it is about.
///
/// The peers are the array the caller passed, unconverted: its length is checked from its header
/// before any element is read, and each element's before it is copied, so that no array, however
/// large, makes this backend allocate beyond the limits (a failed Rust allocation would abort the
/// process, and restart every session of the server).
///
/// # Errors
/// Those of [`check_allowed`]; a timeout outside (0, 1 minute] (22023); more than 64 peers, or
/// a connection string longer than 8 KiB (54000); a NULL peer (22004); a connection string that is
/// not text of this database (22023) or that the caller may not use.
pub fn check(
    peers: &Array<'_, &[u8]>,
    limits: &Limits,
    timeout_us: i64,
) -> Result<Vec<(String, Finding)>, ErrorReport> {
    check_allowed()?;
    if !(1..=MAX_TIMEOUT_US).contains(&timeout_us) {
        return Err(errors::fleet_timeout_out_of_range());
    }
    if peers.len() > MAX_PEERS {
        return Err(errors::too_many_peers(peers.len(), MAX_PEERS));
    }
    let peers = peers.iter().map(peer_text).collect::<Result<Vec<_>, _>>()?;
    // Every string is judged before any peer is reached.
    for p in &peers {
        vet(p)?;
    }
    let timeout = Duration::from_micros(timeout_us.unsigned_abs());
    let mut labels = vec!["(this server)".to_owned()];
    let mut servers = vec![Reached::Yes(local_info(), None)];
    for p in &peers {
        labels.push(label(p));
        servers.push(ask(p, timeout));
    }
    Ok(fleet::judge(&labels, &servers, limits).into_iter().map(|f| (labels[f.server].clone(), f)).collect())
}

/// One element of the peers: a connection string of at most [`MAX_CONNINFO_BYTES`], in UTF-8
/// (ASCII in a database of another encoding, whose bytes would mean other characters to libpq).
fn peer_text(peer: Option<&[u8]>) -> Result<String, ErrorReport> {
    let bytes = errors::required(peer, "a peer")?;
    if bytes.len() > MAX_CONNINFO_BYTES {
        return Err(errors::conninfo_too_long(bytes.len(), MAX_CONNINFO_BYTES));
    }
    // SAFETY: a plain read of the database's encoding, fixed for the backend's life.
    let utf8 = unsafe { pg_sys::GetDatabaseEncoding() } == pg_sys::pg_enc::PG_UTF8 as i32;
    match std::str::from_utf8(bytes) {
        Ok(text) if utf8 || text.is_ascii() => Ok(text.to_owned()),
        _ => Err(errors::fleet_connection_string("it is not ASCII, in a database whose encoding is not UTF-8")),
    }
}

/// This server's facts, for `snowflake_fleet_info()` and as the check's first server.
fn local_info() -> ServerInfo {
    let layout = guc::layout();
    let tl = Timeline::of(layout);
    let minted: Vec<(u32, u32)> = shmem::shard_slots()
        .map(|slots| slots.filter(|(_, slot)| slot.issued(&tl) > 0).map(|(s, _)| (s, s)).collect())
        .unwrap_or_default();
    let minted = merge(minted);
    // SAFETY: plain reads of the control file's identifier and the recovery state.
    let (sysid, in_recovery) = unsafe { (pg_sys::GetSystemIdentifier(), pg_sys::RecoveryInProgress()) };
    ServerInfo {
        system_identifier: sysid.to_string(),
        timeline: timeline(in_recovery),
        in_recovery,
        layout: layout.widths().to_string(),
        epoch_unix_ms: layout.epoch_unix_ms(),
        shards: guc::shards_text(),
        minted: if minted.is_empty() { String::new() } else { ShardSet::Ranges(minted).to_string() },
        reserved_until_unix_ms: shmem::reserved_until(),
        clock_unix_us: sysclock::real_unix_us(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        // SAFETY: plain reads of globals the postmaster set at start, inherited by every backend.
        instance: format!("{sysid}-{}-{}", unsafe { pg_sys::PostmasterPid }, unsafe { pg_sys::PgStartTime }),
    }
}

/// Adjacent single shards as ranges.
fn merge(single: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for (lo, hi) in single {
        match out.last_mut() {
            Some(last) if lo == last.1 + 1 => last.1 = hi,
            _ => out.push((lo, hi)),
        }
    }
    out
}

fn timeline(in_recovery: bool) -> u32 {
    let mut tli: pg_sys::TimeLineID = 0;
    // SAFETY: in recovery, the replay position's timeline; otherwise the one WAL is written on.
    unsafe {
        if in_recovery {
            pg_sys::GetXLogReplayRecPtr(&mut tli);
        } else {
            #[cfg(feature = "pg14")]
            {
                tli = pg_sys::ThisTimeLineID;
            }
            #[cfg(not(feature = "pg14"))]
            {
                tli = pg_sys::GetWALInsertionTimeLine();
            }
        }
    }
    tli
}

// --- libpq, loaded on first use -------------------------------------------------------------

#[repr(C)]
struct PGconn(c_void);
#[repr(C)]
struct PGresult(c_void);
#[repr(C)]
struct ConninfoOption {
    keyword: *mut c_char,
    envvar: *mut c_char,
    compiled: *mut c_char,
    val: *mut c_char,
    label: *mut c_char,
    dispchar: *mut c_char,
    dispsize: c_int,
}

const CONNECTION_BAD: c_int = 1;
const PGRES_POLLING_FAILED: c_int = 0;
const PGRES_POLLING_READING: c_int = 1;
const PGRES_POLLING_WRITING: c_int = 2;
const PGRES_POLLING_OK: c_int = 3;
const PGRES_TUPLES_OK: c_int = 2;
const PGRES_SINGLE_TUPLE: c_int = 9;
/// The most a peer's answer may hold.
const MAX_VALUE_BYTES: c_int = 64 * 1024;
/// The most libpq may hold in memory for one peer at any time, whatever the peer sends: its
/// input buffer, results, notices and parameter reports. An answer of [`MAX_VALUE_BYTES`] needs a
/// small part of it; the rest leaves room for what TLS sets up on a first connection.
const MAX_BUFFERED_BYTES: usize = 16 << 20;

/// The libpq functions the check calls.
struct Libpq {
    connect_start_params: unsafe extern "C" fn(*const *const c_char, *const *const c_char, c_int) -> *mut PGconn,
    connect_poll: unsafe extern "C" fn(*mut PGconn) -> c_int,
    status: unsafe extern "C" fn(*const PGconn) -> c_int,
    error_message: unsafe extern "C" fn(*const PGconn) -> *const c_char,
    socket: unsafe extern "C" fn(*const PGconn) -> c_int,
    set_nonblocking: unsafe extern "C" fn(*mut PGconn, c_int) -> c_int,
    #[allow(clippy::type_complexity)]
    send_query_params: unsafe extern "C" fn(
        *mut PGconn,
        *const c_char,
        c_int,
        *const pg_sys::Oid,
        *const *const c_char,
        *const c_int,
        *const c_int,
        c_int,
    ) -> c_int,
    set_notice_processor: unsafe extern "C" fn(
        *mut PGconn,
        Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
        *mut c_void,
    ) -> *mut c_void,
    connection_used_password: unsafe extern "C" fn(*const PGconn) -> c_int,
    set_single_row_mode: unsafe extern "C" fn(*mut PGconn) -> c_int,
    lib_version: unsafe extern "C" fn() -> c_int,
    getlength: unsafe extern "C" fn(*const PGresult, c_int, c_int) -> c_int,
    flush: unsafe extern "C" fn(*mut PGconn) -> c_int,
    consume_input: unsafe extern "C" fn(*mut PGconn) -> c_int,
    is_busy: unsafe extern "C" fn(*mut PGconn) -> c_int,
    get_result: unsafe extern "C" fn(*mut PGconn) -> *mut PGresult,
    result_status: unsafe extern "C" fn(*const PGresult) -> c_int,
    result_error_message: unsafe extern "C" fn(*const PGresult) -> *const c_char,
    ntuples: unsafe extern "C" fn(*const PGresult) -> c_int,
    getvalue: unsafe extern "C" fn(*const PGresult, c_int, c_int) -> *const c_char,
    getisnull: unsafe extern "C" fn(*const PGresult, c_int, c_int) -> c_int,
    clear: unsafe extern "C" fn(*mut PGresult),
    finish: unsafe extern "C" fn(*mut PGconn),
    conninfo_parse: unsafe extern "C" fn(*const c_char, *mut *mut c_char) -> *mut ConninfoOption,
    conninfo_free: unsafe extern "C" fn(*mut ConninfoOption),
    freemem: unsafe extern "C" fn(*mut c_void),
}

// SAFETY: function pointers into a library that stays loaded; a backend has one thread.
unsafe impl Send for Libpq {}
unsafe impl Sync for Libpq {}

static LIBPQ: OnceLock<Result<Libpq, String>> = OnceLock::new();

fn libpq() -> Result<&'static Libpq, String> {
    LIBPQ.get_or_init(load_libpq).as_ref().map_err(Clone::clone)
}

// Each transmute's target is the `Libpq` field it initialises, whose type is libpq's signature.
#[allow(clippy::missing_transmute_annotations)]
fn load_libpq() -> Result<Libpq, String> {
    // The one beside the server's own libraries (a relocatable install: the server's own
    // version, whose keywords the server's documentation lists), else the system's.
    // SAFETY: pkglib_path is set at start, a NUL-terminated path.
    let pkglib = unsafe { CStr::from_ptr(std::ptr::addr_of!(pg_sys::pkglib_path).cast::<c_char>()) }
        .to_string_lossy()
        .into_owned();
    let candidates = [format!("{pkglib}/../libpq.so.5"), format!("{pkglib}/libpq.so.5"), "libpq.so.5".to_owned()];
    let mut handle = std::ptr::null_mut();
    for c in &candidates {
        let name = CString::new(c.as_str()).map_err(|e| e.to_string())?;
        // SAFETY: dlopen with a valid path; a failure returns NULL.
        // RTLD_LOCAL: libpq's symbols stay out of the server's global namespace, where another
        // library loaded later could bind to them instead of its own.
        handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if !handle.is_null() {
            break;
        }
    }
    if handle.is_null() {
        return Err(format!("libpq.so.5 was not found (tried {})", candidates.join(", ")));
    }
    macro_rules! sym {
        ($name:literal) => {{
            // SAFETY: dlsym on a loaded handle; the symbol's type is libpq's documented one.
            let p = unsafe { libc::dlsym(handle, concat!($name, "\0").as_ptr().cast()) };
            if p.is_null() {
                return Err(format!("libpq has no {}", $name));
            }
            // SAFETY: a non-null function pointer of the declared signature.
            unsafe { std::mem::transmute::<*mut c_void, _>(p) }
        }};
    }
    Ok(Libpq {
        connect_start_params: sym!("PQconnectStartParams"),
        connect_poll: sym!("PQconnectPoll"),
        status: sym!("PQstatus"),
        error_message: sym!("PQerrorMessage"),
        socket: sym!("PQsocket"),
        set_nonblocking: sym!("PQsetnonblocking"),
        send_query_params: sym!("PQsendQueryParams"),
        set_notice_processor: sym!("PQsetNoticeProcessor"),
        connection_used_password: sym!("PQconnectionUsedPassword"),
        set_single_row_mode: sym!("PQsetSingleRowMode"),
        lib_version: sym!("PQlibVersion"),
        getlength: sym!("PQgetlength"),
        flush: sym!("PQflush"),
        consume_input: sym!("PQconsumeInput"),
        is_busy: sym!("PQisBusy"),
        get_result: sym!("PQgetResult"),
        result_status: sym!("PQresultStatus"),
        result_error_message: sym!("PQresultErrorMessage"),
        ntuples: sym!("PQntuples"),
        getvalue: sym!("PQgetvalue"),
        getisnull: sym!("PQgetisnull"),
        clear: sym!("PQclear"),
        finish: sym!("PQfinish"),
        conninfo_parse: sym!("PQconninfoParse"),
        conninfo_free: sym!("PQconninfoFree"),
        freemem: sym!("PQfreemem"),
    })
}

/// A copy of a libpq string, at most 1 KiB of it (an error message is the peer's to choose).
fn text(p: *const c_char) -> String {
    text_within(p, 1024)
}

/// A libpq string, at most `limit` bytes of it.
fn text_within(p: *const c_char, limit: usize) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: libpq returns NUL-terminated strings it owns; we copy at once.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    String::from_utf8_lossy(&bytes[..bytes.len().min(limit)]).trim_end().to_owned()
}

/// A connection, finished when dropped (on every path, an ERROR's unwinding included). Its memory
/// watch starts before the connection and covers everything libpq keeps for it until then
/// (parameter reports stay in libpq's memory as long as the connection), so one peer is held to
/// [`MAX_BUFFERED_BYTES`] in all.
struct Conn<'a> {
    pq: &'a Libpq,
    conn: *mut PGconn,
    deadline: Instant,
    watch: MemoryWatch,
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        // SAFETY: a connection from PQconnectStartParams, finished once.
        unsafe { (self.pq.finish)(self.conn) };
    }
}

/// Waits until the socket is ready as asked, the latch is set (then interrupts are checked), or
/// the deadline passes.
fn wait_socket(c: &Conn<'_>, writable: bool) -> Result<(), String> {
    loop {
        let left = c.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("timed out".into());
        }
        // SAFETY: a socket libpq reports open; MyLatch is this backend's latch.
        let sock = unsafe { (c.pq.socket)(c.conn) };
        if sock < 0 {
            return Err("the connection has no socket".into());
        }
        let events = pg_sys::WL_LATCH_SET
            | pg_sys::WL_TIMEOUT
            | pg_sys::WL_EXIT_ON_PM_DEATH
            | if writable { pg_sys::WL_SOCKET_WRITEABLE } else { pg_sys::WL_SOCKET_READABLE };
        // WaitEventSetWait takes at most INT_MAX milliseconds.
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as std::ffi::c_long;
        // SAFETY: a plain wait on this backend's latch and the connection's socket.
        let got =
            unsafe { pg_sys::WaitLatchOrSocket(pg_sys::MyLatch, events as c_int, sock, ms, pg_sys::PG_WAIT_EXTENSION) };
        if got as u32 & pg_sys::WL_LATCH_SET != 0 {
            // SAFETY: resetting our own latch before looking at why it was set.
            unsafe { pg_sys::ResetLatch(pg_sys::MyLatch) };
            pgrx::check_for_interrupts!();
        }
        if got as u32 & (pg_sys::WL_SOCKET_READABLE | pg_sys::WL_SOCKET_WRITEABLE) != 0 {
            return Ok(());
        }
    }
}

/// Bounds what libpq buffers for a peer. libpq reads a message whole before handing it over,
/// and enlarges its input buffer to the length a message announces before the bytes arrive; a
/// peer can announce a gigabyte row, or stream parameter reports without end. So after every
/// libpq call that may read or parse, two measures are taken, and the connection is given up as
/// soon as either grew by more than [`MAX_BUFFERED_BYTES`]: the bytes `malloc` has handed out
/// (glibc's `mallinfo2`, the heap in use and the mmapped blocks, where a large buffer goes), which
/// catches an announced size at its allocation before the peer can fill the pages; and the
/// process's resident memory (`/proc/self/statm`), which holds under any allocator (another
/// `malloc` preloaded, or a C library without `mallinfo2`).
struct MemoryWatch {
    heap: Option<usize>,
    resident: Option<usize>,
}

impl MemoryWatch {
    fn start() -> Self {
        MemoryWatch { heap: heap_in_use(), resident: resident_bytes() }
    }

    fn check(&self) -> Result<(), String> {
        let grew = |base: Option<usize>, now: Option<usize>| match (base, now) {
            (Some(base), Some(now)) => now.saturating_sub(base) > MAX_BUFFERED_BYTES,
            _ => false,
        };
        if grew(self.heap, heap_in_use()) || grew(self.resident, resident_bytes()) {
            Err(format!("it sent more than this check holds for one peer ({} MiB)", MAX_BUFFERED_BYTES >> 20))
        } else {
            Ok(())
        }
    }
}

/// The bytes `malloc` has handed out in this process and not taken back (glibc only).
fn heap_in_use() -> Option<usize> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: a read of the allocator's statistics; a backend has one thread.
        let m = unsafe { libc::mallinfo2() };
        Some(m.uordblks.saturating_add(m.hblkhd))
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

/// The process's resident memory, from `/proc/self/statm` (Linux), read into a fixed buffer.
fn resident_bytes() -> Option<usize> {
    use std::io::Read;
    let mut buf = [0u8; 128];
    let n = std::fs::File::open("/proc/self/statm").ok()?.read(&mut buf).ok()?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    let pages: usize = text.split_ascii_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: a plain query of the page size.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    pages.checked_mul(page)
}

/// Drops what a peer's libpq says in notices: they must not reach this server's log unfiltered.
unsafe extern "C" fn ignore_notice(_arg: *mut c_void, _message: *const c_char) {}

/// Whether the caller may connect with `conninfo` (`crate::core::conninfo`): a superuser with
/// any string libpq parses, any other role only with a password of its own and none of the
/// server's files or credentials. Judged before any peer is reached.
///
/// # Errors
/// 2F003 without a password, 42501 for another keyword, 22023 for a string libpq cannot parse or
/// no libpq (the check could not reach anyone anyway).
fn vet(conninfo: &str) -> Result<(), ErrorReport> {
    let pq = libpq().map_err(|e| errors::fleet_connection_string(&e))?;
    let opts = options(pq, conninfo).map_err(|e| errors::fleet_connection_string(&e))?;
    // SAFETY: a plain read of the current user's superuser flag.
    if unsafe { pg_sys::superuser() } {
        return Ok(());
    }
    let pairs: Vec<(String, String)> = opts.into_iter().map(|(k, v, _)| (k, v)).collect();
    conninfo::check_non_superuser(&pairs).map_err(|r| errors::fleet_connection_refused(&r))
}

/// Connects to `conninfo` in non-blocking mode within the deadline, with `search_path =
/// pg_catalog` on the peer. A role that is not a superuser must have been vetted ([`vet`]), gets
/// [`conninfo::overrides`], and must have been asked for its password.
fn connect<'a>(pq: &'a Libpq, conninfo: &str, deadline: Instant) -> Result<Conn<'a>, String> {
    let dsn = CString::new(conninfo).map_err(|_| "the connection string holds a NUL byte".to_owned())?;
    let opts = options(pq, conninfo)?;
    if opts.iter().any(|(k, v, _)| (k == "host" || k == "hostaddr") && v.contains(',')) {
        return Err("it names more than one host; a peer is one server, one host".into());
    }
    // SAFETY: a plain read of the current user's superuser flag.
    let superuser = unsafe { pg_sys::superuser() };
    // Later keywords win over the same ones inside the expanded connection string.
    let mut params: Vec<(CString, CString)> = vec![
        (c"dbname".to_owned(), dsn),
        (c"application_name".to_owned(), c"snowflake_id fleet check".to_owned()),
        (c"options".to_owned(), c"-c search_path=pg_catalog".to_owned()),
    ];
    if !superuser {
        let pairs: Vec<(String, String)> = opts.into_iter().map(|(k, v, _)| (k, v)).collect();
        // SAFETY: a plain call into the loaded libpq.
        let version = unsafe { (pq.lib_version)() };
        for (k, v) in conninfo::overrides(&pairs, version) {
            // The overrides are constants without NUL bytes.
            params.push((CString::new(k).unwrap_or_default(), CString::new(v).unwrap_or_default()));
        }
    }
    let mut keys: Vec<*const c_char> = params.iter().map(|(k, _)| k.as_ptr()).collect();
    let mut values: Vec<*const c_char> = params.iter().map(|(_, v)| v.as_ptr()).collect();
    keys.push(std::ptr::null());
    values.push(std::ptr::null());
    let watch = MemoryWatch::start();
    // SAFETY: NULL-terminated keyword and value arrays; expand_dbname = 1 reads dbname as a
    // connection string, as dblink does.
    let conn = unsafe { (pq.connect_start_params)(keys.as_ptr(), values.as_ptr(), 1) };
    if conn.is_null() {
        return Err("libpq could not allocate a connection".into());
    }
    let c = Conn { pq, conn, deadline, watch };
    // SAFETY: a connection just started; the processor is a plain function.
    unsafe { (pq.set_notice_processor)(c.conn, Some(ignore_notice), std::ptr::null_mut()) };
    // SAFETY: a connection just started.
    if unsafe { (pq.status)(c.conn) } == CONNECTION_BAD {
        return Err(text(unsafe { (pq.error_message)(c.conn) }));
    }
    let mut poll = PGRES_POLLING_WRITING;
    loop {
        match poll {
            PGRES_POLLING_OK => break,
            PGRES_POLLING_FAILED => return Err(text(unsafe { (pq.error_message)(c.conn) })),
            PGRES_POLLING_READING => wait_socket(&c, false)?,
            _ => wait_socket(&c, true)?,
        }
        // SAFETY: polling the connection being made.
        poll = unsafe { (pq.connect_poll)(c.conn) };
        c.watch.check()?;
    }
    // SAFETY: reading the state of a connected connection.
    if !superuser && unsafe { (pq.connection_used_password)(c.conn) } == 0 {
        return Err("a role that is not a superuser must connect with a password the peer asks for".into());
    }
    // SAFETY: a connected connection.
    if unsafe { (pq.set_nonblocking)(c.conn, 1) } != 0 {
        return Err(text(unsafe { (pq.error_message)(c.conn) }));
    }
    Ok(c)
}

/// Runs one fixed statement (with one text parameter if `param` is given) and returns its row's
/// first column: `None` for no row or NULL. Anything but at most one row of at most
/// [`MAX_VALUE_BYTES`] is an error, after which the caller closes the connection.
fn query(c: &Conn<'_>, sql: &CStr, param: Option<&CStr>) -> Result<Option<String>, String> {
    let pq = c.pq;
    let values = [param.map_or(std::ptr::null(), CStr::as_ptr)];
    // SAFETY: a connected, non-blocking connection with no query in progress; the parameter
    // array holds `n` valid C strings (text format, types left to the server).
    let sent = unsafe {
        (pq.send_query_params)(
            c.conn,
            sql.as_ptr(),
            c_int::from(param.is_some()),
            std::ptr::null(),
            values.as_ptr(),
            std::ptr::null(),
            std::ptr::null(),
            0,
        )
    };
    if sent == 0 {
        return Err(text(unsafe { (pq.error_message)(c.conn) }));
    }
    // One row at a time: libpq hands over each row as it arrives instead of collecting them all.
    // SAFETY: right after a successful send, as libpq requires.
    if unsafe { (pq.set_single_row_mode)(c.conn) } == 0 {
        return Err("libpq could not read the answer one row at a time".into());
    }
    // Flush what could not be sent at once.
    loop {
        // SAFETY: as above.
        match unsafe { (pq.flush)(c.conn) } {
            0 => break,
            1 => wait_socket(c, true)?,
            _ => return Err(text(unsafe { (pq.error_message)(c.conn) })),
        }
    }
    // One statement gives at most one row (in single-row mode, a result of its own), then the
    // result that ends the rows, then NULL. A peer that sends more is refused at once.
    let mut value = None;
    let mut rows = 0;
    for _ in 0..3 {
        // SAFETY: reading what the peer sent; PQisBusy parses what was read and says whether a
        // result is complete. The memory watch follows every call that may grow libpq's buffers.
        loop {
            let busy = unsafe { (pq.is_busy)(c.conn) } != 0;
            c.watch.check()?;
            if !busy {
                break;
            }
            wait_socket(c, false)?;
            if unsafe { (pq.consume_input)(c.conn) } == 0 {
                return Err(text(unsafe { (pq.error_message)(c.conn) }));
            }
            c.watch.check()?;
        }
        // SAFETY: a complete result, or NULL when the statement is done.
        let res = unsafe { (pq.get_result)(c.conn) };
        if res.is_null() {
            return Ok(value);
        }
        // SAFETY: reading then clearing a result we own; a value is copied only within the cap.
        let outcome = unsafe {
            let status = (pq.result_status)(res);
            let r = match status {
                PGRES_SINGLE_TUPLE | PGRES_TUPLES_OK => {
                    rows += (pq.ntuples)(res);
                    if rows > 1 {
                        Err("it answered with more than one row".to_owned())
                    } else if (pq.ntuples)(res) == 1 && (pq.getisnull)(res, 0, 0) == 0 {
                        if (pq.getlength)(res, 0, 0) > MAX_VALUE_BYTES {
                            Err(format!("its answer is larger than {MAX_VALUE_BYTES} bytes"))
                        } else {
                            // The value whole: its length was checked above.
                            Ok(Some(text_within((pq.getvalue)(res, 0, 0), MAX_VALUE_BYTES as usize)))
                        }
                    } else {
                        Ok(None)
                    }
                }
                _ => {
                    let e = text((pq.result_error_message)(res));
                    Err(if e.is_empty() {
                        format!("it answered with something other than rows (result status {status})")
                    } else {
                        e
                    })
                }
            };
            (pq.clear)(res);
            r
        };
        if let Some(v) = outcome? {
            value = Some(v);
        }
    }
    Err("it answered with more than one result".into())
}

/// Quotes a schema name here, whatever the peer sent.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The (keyword, value, dispchar) options of a connection string, parsed by libpq.
fn options(pq: &Libpq, conninfo: &str) -> Result<Vec<(String, String, String)>, String> {
    let dsn = CString::new(conninfo).map_err(|_| "the connection string holds a NUL byte".to_owned())?;
    let mut err = std::ptr::null_mut();
    // SAFETY: PQconninfoParse returns an array ending in a NULL keyword, or NULL with an error
    // message we free.
    let opts = unsafe { (pq.conninfo_parse)(dsn.as_ptr(), &mut err) };
    if opts.is_null() {
        let why = text(err);
        if !err.is_null() {
            unsafe { (pq.freemem)(err.cast()) };
        }
        return Err(format!("libpq cannot parse the connection string: {why}"));
    }
    let mut out = Vec::new();
    let mut p = opts;
    // SAFETY: walking the array up to its terminator, copying what we keep.
    unsafe {
        while !(*p).keyword.is_null() {
            if !(*p).val.is_null() {
                out.push((text((*p).keyword), text((*p).val), text((*p).dispchar)));
            }
            p = p.add(1);
        }
        (pq.conninfo_free)(opts);
    }
    Ok(out)
}

/// A peer's label: its connection string without the options libpq marks secret (passwords).
fn label(conninfo: &str) -> String {
    let Ok(pq) = libpq() else { return "(a peer: libpq is not available to read its connection string)".into() };
    match options(pq, conninfo) {
        Ok(opts) => opts
            .into_iter()
            .filter(|(_, _, dispchar)| dispchar != "*")
            .map(|(k, v, _)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        Err(_) => "(a connection string libpq cannot parse)".into(),
    }
}

/// Asks one peer: its clock five times, then its facts. Never raises for the peer's sake (only a
/// cancel or a termination of this backend does).
fn ask(conninfo: &str, timeout: Duration) -> Reached {
    let pq = match libpq() {
        Ok(pq) => pq,
        Err(e) => return Reached::No(e),
    };
    let deadline = Instant::now() + timeout;
    let c = match connect(pq, conninfo, deadline) {
        Ok(c) => c,
        Err(e) => return Reached::No(e),
    };
    let mut samples = Vec::with_capacity(5);
    for _ in 0..5 {
        let sent_us = sysclock::real_unix_us();
        let peer =
            query(&c, c"SELECT (EXTRACT(epoch FROM pg_catalog.clock_timestamp()) * 1000000)::pg_catalog.int8", None);
        let received_us = sysclock::real_unix_us();
        match peer.map(|v| v.and_then(|v| v.parse::<i64>().ok())) {
            Ok(Some(peer_us)) => samples.push(Sample { sent_us, peer_us, received_us }),
            Ok(None) => return Reached::No("it returned no clock reading".into()),
            Err(e) => return Reached::No(e),
        }
    }
    let schema = match query(
        &c,
        c"SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace \
            WHERE e.extname = $1",
        Some(c"snowflake_id"),
    ) {
        Ok(Some(s)) => s,
        Ok(None) => return Reached::NoExtension("snowflake_id is not installed in that database".into()),
        Err(e) => return Reached::No(e),
    };
    let Ok(sql) = CString::new(format!("SELECT {}.snowflake_fleet_info()::pg_catalog.text", quote_ident(&schema)))
    else {
        return Reached::NoExtension("its schema name holds a NUL byte".into());
    };
    let info = match query(&c, &sql, None) {
        Ok(Some(j)) => j,
        Ok(None) => return Reached::NoExtension("snowflake_fleet_info() returned nothing".into()),
        Err(e) => return Reached::NoExtension(format!("snowflake_fleet_info() failed there: {e}")),
    };
    match serde_json::from_str::<ServerInfo>(&info) {
        Ok(info) => Reached::Yes(info, crate::core::fleet::clock_offset(&samples)),
        Err(e) => Reached::NoExtension(format!("its snowflake_fleet_info() is not one this version reads ({e})")),
    }
}
