//! The one place where core errors become PostgreSQL errors, each with its SQLSTATE.
//!
//! Every SQLSTATE raised here, with its message, cause and remedy, is listed in
//! `docs/errors.md`; `scripts/check-errors.py` (in `make test`'s static checks) keeps that list
//! equal to the codes used in `src/`, so no second table is kept here.
//!
//! Messages follow PostgreSQL's style: lower case, no final period; DETAIL and HINT are full
//! sentences.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

use crate::core::layout::{IdError, Layout, LayoutError};
use crate::core::monotonic::IssueError;
use crate::core::partition::PartitionError;
use crate::core::reservation::Refusal;
use crate::core::shards::plan_sentence;
use crate::core::time::{self, NS_PER_MS};

const FUNC: &str = "snowflake_id";

/// Raises `report` as an ERROR. For the generators' hot path, which returns plain values rather
/// than a `Result` so that the common case moves no error-sized data around.
#[cold]
pub fn raise(report: ErrorReport) -> ! {
    report.report(PgLogLevel::ERROR);
    unreachable!("an ERROR report does not return")
}

pub fn not_preloaded() -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id must be loaded via \"shared_preload_libraries\"",
        FUNC,
    )
    .set_detail("The id generators keep their state in shared memory, which only a preloaded library can allocate.")
    .set_hint(
        "Add snowflake_id to shared_preload_libraries, keeping the libraries listed there already (SHOW \
        shared_preload_libraries), and restart the server.",
    )
}

/// `snowflake_fleet_check` while `snowflake_id.fleet_connections` is off.
pub fn fleet_connections_disabled() -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_fleet_check cannot connect to other servers on this server",
        FUNC,
    )
    .set_detail("snowflake_id.fleet_connections is off.")
    .set_hint(
        "Run the check from a server that allows it, or have an administrator set snowflake_id.fleet_connections = on.",
    )
}

/// A peer's connection string that libpq cannot read (or no libpq to read it).
pub fn fleet_connection_string(why: &str) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("invalid connection string for a peer: {why}"),
        FUNC,
    )
}

/// A connection string a role that is not a superuser may not use (`crate::core::conninfo`).
pub fn fleet_connection_refused(refusal: &crate::core::conninfo::Refusal) -> ErrorReport {
    use crate::core::conninfo::Refusal;
    match refusal {
        Refusal::NoPassword => ErrorReport::new(
            PgSqlErrorCode::ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED,
            "password is required",
            FUNC,
        )
        .set_detail("Non-superusers must provide a password in the connection string of every peer.")
        .set_hint("Add password=... to the connection string; the peer must ask for it."),
        Refusal::Keyword { keyword } => ErrorReport::new(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("connection option \"{keyword}\" is not allowed for non-superusers"),
            FUNC,
        )
        .set_detail("Only superusers may use connection options that read the server's files or credentials."),
    }
}

/// A trigger function called as a plain function.
pub fn not_called_as_trigger(function: &str) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
        format!("{function} can only be called as a trigger"),
        FUNC,
    )
}

/// `snowflake_fleet_info()` could not serialise this server's facts.
pub fn fleet_info_unserialisable(e: impl std::fmt::Display) -> ErrorReport {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("could not describe this server: {e}"), FUNC)
}

/// An interval argument of the fleet check that is negative or counts months.
pub fn bad_fleet_interval(name: &str) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("{name} must be a non-negative interval of days, hours and smaller units"),
        FUNC,
    )
}

/// The fleet check's timeout outside (0, 1 minute].
pub fn fleet_timeout_out_of_range() -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        "timeout must be more than 0 and at most 1 minute",
        FUNC,
    )
}

/// More peers than one fleet check takes.
pub fn too_many_peers(count: usize, max: usize) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        format!("{count} peers are more than one check asks ({max})"),
        FUNC,
    )
}

/// At start: a tick of `generator` holds fewer words than the server has backends, so a flood can
/// fill the lead's last tick, and a session minting little may wait behind it (crate::core::share).
pub fn reserve_can_fill(generator: &str, words: u64, backends: u32) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_WARNING,
        format!("a {generator} generator's tick holds {words} ids, fewer than this server's {backends} backends"),
        FUNC,
    )
    .set_detail("Beside a flood on the same generator, a session that mints little may wait for the clock.")
    .set_hint(
        "Lower max_connections (with the workers, the backends must be at most a tick's ids), or choose a layout \
         with more sequence bits.",
    )
}

/// A fleet check's connection string longer than it takes.
pub fn conninfo_too_long(len: usize, max: usize) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        format!("a connection string of {len} bytes is longer than one check takes ({max})"),
        FUNC,
    )
}

/// The record's trigger function fired on another table.
pub fn trigger_not_on_record(function: &str) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
        format!("{function} runs only as the trigger on snowflake_id's record of the id space"),
        FUNC,
    )
    .set_hint("Drop this trigger: it does nothing on other tables.")
}

pub fn null_argument(name: &str) -> ErrorReport {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, format!("{name} must not be null"), FUNC)
}

/// The argument `name` of a function that is not STRICT (where a NULL result would mislead), or
/// 22004 when it is NULL.
pub fn required<T>(value: Option<T>, name: &str) -> Result<T, ErrorReport> {
    value.ok_or_else(|| null_argument(name))
}

/// The generator a [`IssueError`] came from, to name it in messages.
#[derive(Clone, Copy)]
pub enum Generator<'a> {
    Snowflake { layout: &'a Layout, shard: u32 },
    Uuidv7,
}

pub fn issue_error(e: IssueError, generator: Generator<'_>) -> ErrorReport {
    let ms = |ns: i64| time::format_unix_ms(ns.div_euclid(NS_PER_MS));
    let what = match generator {
        Generator::Snowflake { shard, .. } => format!("shard {shard}"),
        Generator::Uuidv7 => "uuidv7".to_owned(),
    };
    match (e, generator) {
        (IssueError::ClockBehind { behind_ns, last_unix_ns, now_unix_ns, max_wait_ms }, _) => ErrorReport::new(
            PgSqlErrorCode::ERRCODE_SYSTEM_ERROR,
            format!("system clock moved backwards by {} ms", behind_ns.div_ceil(NS_PER_MS as u64)),
            FUNC,
        )
        .set_detail(format!(
            "Ids for {what} must continue after {} (issued, or reserved before a restart), but the clock reads {}. \
                Waiting for the clock is limited to snowflake_id.max_rewind_wait ({} ms).",
            ms(last_unix_ns),
            ms(now_unix_ns),
            max_wait_ms
        ))
        .set_hint(
            "Check the server's time synchronization. New ids resume once the clock passes the last issued one; no id \
                is repeated.",
        ),
        (IssueError::TooFarAhead { ahead_ns, waited_ns, budget_ms }, _) => ErrorReport::new(
            PgSqlErrorCode::ERRCODE_SYSTEM_ERROR,
            format!("ids for {what} run {} ms ahead of the clock", ahead_ns.div_ceil(NS_PER_MS as u64)),
            FUNC,
        )
        .set_detail(format!(
            "The clock did not step back, but catching up takes longer than this server waits ({budget_ms} ms; this \
                call waited {} ms): ids were issued, reserved or advanced ahead of the clock, or the clock stopped.",
            waited_ns / NS_PER_MS as u64
        ))
        .set_hint(
            "Ids resume once the clock reaches them; none is repeated. Check that the server's clock is right \
            and advances.",
        ),
        (IssueError::ClockBeforeOrigin { now_unix_ns }, Generator::Snowflake { layout, .. }) => ErrorReport::new(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!("system clock reads {}, before the snowflake epoch", ms(now_unix_ns)),
            FUNC,
        )
        .set_detail(format!("snowflake_id.epoch is {}.", time::format_unix_ms(layout.epoch_unix_ms())))
        .set_hint("Check the server's clock."),
        (IssueError::ClockBeforeOrigin { now_unix_ns }, Generator::Uuidv7) => {
            uuidv7_time_out_of_range(&format!("system clock time {}", ms(now_unix_ns)))
                .set_hint("Check the server's clock.")
        }
        (IssueError::TimeExhausted { .. }, Generator::Snowflake { layout, .. }) => ErrorReport::new(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!("snowflake layout {} has run out of time for {what}", layout.widths()),
            FUNC,
        )
        .set_detail(format!("Its last representable instant is {}.", time::format_unix_ms(layout.last_unix_ms())))
        .set_hint("Move to a layout with more time bits or a later epoch on a new id range."),
        (IssueError::TimeExhausted { .. }, Generator::Uuidv7) => uuidv7_time_out_of_range("system clock time"),
        // crate::runtime::generate renews the reservation and mints again; this never reaches a user.
        (IssueError::Unreserved { .. }, _) => {
            ErrorReport::new(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "snowflake_id reservation was not renewed", FUNC)
        }
    }
}

pub fn id_error(e: IdError, layout: &Layout) -> ErrorReport {
    match e {
        IdError::ShardOutOfRange { shard, max } => ErrorReport::new(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("shard {shard} is out of range"),
            FUNC,
        )
        .set_detail(format!("Valid shards are 0 to {max} under snowflake layout {}.", layout.widths())),
        IdError::SeqOutOfRange { seq, max } => ErrorReport::new(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("sequence {seq} is out of range"),
            FUNC,
        )
        .set_detail(format!("Valid sequences are 0 to {max} under snowflake layout {}.", layout.widths())),
        IdError::SpanNotTicks { span_us, tick_ms, max_ticks } => ErrorReport::new(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            if span_us == i64::MAX {
                "a span this long does not fit the snowflake layout".to_string()
            } else {
                format!("a span of {} ms does not fit the snowflake layout", span_us as f64 / 1000.0)
            },
            FUNC,
        )
        .set_detail(format!(
            "Under snowflake layout {}, a span is 1 to {max_ticks} ticks of {tick_ms} ms, with no months or years.",
            layout.widths()
        )),
        IdError::IdOutOfRange { id, max } => ErrorReport::new(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("snowflake id {id} is out of range"),
            FUNC,
        )
        .set_detail(format!("Valid ids are 0 to {max} under snowflake layout {}.", layout.widths())),
        IdError::TimeOutOfRange { unix_ms, first, last } => ErrorReport::new(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!("timestamp {} is outside the snowflake layout", time::format_unix_ms(unix_ms)),
            FUNC,
        )
        .set_detail(format!(
            "Snowflake ids cover {} to {}.",
            time::format_unix_ms(first),
            time::format_unix_ms(last)
        )),
    }
}

/// Partitions that `snowflake_partitions` does not make.
pub fn partition_error(e: PartitionError, layout: &Layout) -> ErrorReport {
    match e {
        PartitionError::Step { tick_ms } => {
            ErrorReport::new(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "invalid partition step", FUNC)
                .set_detail(format!(
                    "A partition step is positive, has no negative part, and is at least one tick ({tick_ms} ms) long."
                ))
        }
        PartitionError::TooMany { max } => {
            ErrorReport::new(PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED, "too many partitions", FUNC)
                .set_detail(format!("snowflake_partitions makes at most {max} partitions in one call."))
        }
        PartitionError::Id(e) => id_error(e, layout),
    }
}

/// A span of time with months or years, which have no fixed length, where ids are counted.
pub fn span_not_fixed() -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        "a span of months or years holds no fixed number of snowflake ids",
        FUNC,
    )
    .set_hint("Give the span in days or smaller units; for calendar months, use snowflake_partitions().")
}

/// An unusable layout given as an argument.
pub fn bad_layout(e: &LayoutError) -> ErrorReport {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "invalid snowflake layout", FUNC)
        .set_detail(e.to_string())
}

/// An unusable layout or epoch in the server's configuration.
pub fn bad_layout_setting(e: &LayoutError) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        "invalid snowflake_id.layout or \
        snowflake_id.epoch",
        FUNC,
    )
    .set_detail(e.to_string())
    .set_hint(
        "Fix the setting in postgresql.conf. Both are fixed at server start, because changing them would \
            break the uniqueness and order of ids.",
    )
}

/// A timestamp that is infinite or beyond PostgreSQL's range.
pub fn timestamp_out_of_range() -> ErrorReport {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW, "timestamp out of range", FUNC)
        .set_detail("Infinite timestamps, and timestamps beyond PostgreSQL's range, have no id.")
}

/// A UUIDv7 time outside 48 bits of Unix milliseconds. `subject` names the time, such as
/// "timestamp 1969-12-31 23:59:59+00" or "shifted timestamp".
pub fn uuidv7_time_out_of_range(subject: &str) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
        format!("{subject} is outside the UUIDv7 range"),
        FUNC,
    )
    .set_detail("A UUIDv7 holds 48 bits of Unix milliseconds: 1970-01-01 00:00:00+00 to 10889-08-02 05:31:50.655+00.")
}

/// The operating system could not seed the random generator.
pub fn no_entropy(e: impl std::fmt::Display) -> ErrorReport {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "could not generate random values", FUNC)
        .set_detail(format!("The operating system's random source failed: {e}."))
}

/// A shard this server is not configured to mint for.
pub fn shard_not_assigned(shard: u32, allowed: &str) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("shard {shard} is not assigned to this server"),
        FUNC,
    )
    .set_detail(format!("snowflake_id.shards is \"{allowed}\"."))
    .set_hint(format!(
        "Another server probably mints for shard {shard}. Call this server with one of its own shards, or add {shard} \
            to snowflake_id.shards if this server really owns it."
    ))
}

/// `snowflake_next()` on a server that has not been told which shards it owns (`*`), in a layout
/// of `shard_count` shards. The hint gives the shard plan (`core::shards::plan_sentence`).
pub fn no_owned_shards(shard_count: u64) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id.shards does not say which shards this server owns",
        FUNC,
    )
    .set_detail(
        "snowflake_next() mints from the shards this server owns, and snowflake_id.shards is \"*\": every \
        shard, which another server may also mint for. Two servers minting for one shard can repeat each other's ids.",
    )
    .set_hint(format!(
        "{} One line in each server's postgresql.conf, from configuration management (never in a migration), then \
        SELECT pg_reload_conf().",
        plan_sentence(shard_count)
    ))
}

/// `snowflake_next()` minting for `default_shard` on a server whose list is `*` (a WARNING).
pub fn default_shard_without_shards(shard: i64) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_WARNING,
        format!(
            "snowflake_next() mints for snowflake_id.default_shard ({shard}) on a server whose \
            snowflake_id.shards is \"*\""
        ),
        FUNC,
    )
    .set_detail(
        "That is snowflake_id 0.1.0's configuration, kept working. Without a shard list, nothing stops \
        another server from minting for the same shard.",
    )
    .set_hint(format!(
        "Give this server its shards in postgresql.conf, for example snowflake_id.shards = '{shard}', \
        then SELECT pg_reload_conf()."
    ))
}

/// `snowflake_next()` while no shard is assigned (a list that did not parse closed the fence).
pub fn no_shard_assigned(allowed: &str) -> ErrorReport {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "no shard is assigned to this server", FUNC)
        .set_detail(format!("snowflake_id.shards is {allowed}."))
        .set_hint("Fix snowflake_id.shards in the configuration and reload.")
}

/// The reservation file could not be read or written.
pub fn reservation_io(op: &str, e: &std::io::Error) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_IO_ERROR,
        format!("could not {op} the snowflake_id reservation file \"{}\": {e}", crate::core::reservation::FILE_NAME),
        FUNC,
    )
    .set_detail("No id is issued past a reservation that is not on disk.")
    .set_hint("Check the data directory's disk and permissions.")
}

/// A start found no reservation file (a LOG line).
pub fn no_reservation_file() -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        format!(
            "snowflake_id: no reservation file \"{}\"; the generators start from the clock",
            crate::core::reservation::FILE_NAME
        ),
        FUNC,
    )
    .set_detail(
        "That is expected the first time the library is preloaded in this data directory. In a data directory \
        that already issued ids (restored from a backup, copied, or the file removed), new ids are only above the old \
        ones if the clock is past them.",
    )
    .set_hint(
        "If the clock may be behind ids already stored, call snowflake_id_advance() with a time after them \
        before minting.",
    )
}

/// A start found a reservation far ahead of the clock (a WARNING).
pub fn reservation_far_ahead(until_unix_ms: i64, now_unix_ms: i64) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_WARNING,
        format!(
            "snowflake_id reservation lies {} s ahead of the clock",
            until_unix_ms.saturating_sub(now_unix_ms) / crate::core::time::MS_PER_SEC
        ),
        FUNC,
    )
    .set_detail(format!(
        "The reservation file \"{}\" says ids may have been issued up to {}, and the clock reads {}. The generators \
            refuse with SQLSTATE 58000 until the clock is within a few seconds of it.",
        crate::core::reservation::FILE_NAME,
        time::format_unix_ms(until_unix_ms),
        time::format_unix_ms(now_unix_ms)
    ))
    .set_hint(
        "If the clock is right now and was wrong when the file was written, and no stored id lies in the \
        future, stop the server, remove the file, and start the server again.",
    )
}

/// Every generator refuses: a start found a reservation file they cannot continue from.
pub fn generators_disabled(refusal: Refusal, why: &str) -> ErrorReport {
    let file = crate::core::reservation::FILE_NAME;
    let (code, what, hint) = match refusal {
        Refusal::Unreadable => (
            PgSqlErrorCode::ERRCODE_IO_ERROR,
            "cannot be read",
            "Fix the file's permissions or the disk; the next call reads it again. Or, knowing a time after every id \
                already issued, replace it with snowflake_id_advance(that time). Removing the file does not help: a \
                start from the clock could repeat ids.",
        ),
        Refusal::Damaged => (
            PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
            "is damaged",
            "Knowing a time after every id already issued (from the tables, or the server log), replace the file with \
                snowflake_id_advance(that time). Removing it does not help: a start from the clock could repeat ids.",
        ),
        Refusal::OtherLayout => (
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "belongs to another layout",
            "Restore the previous snowflake_id.layout and snowflake_id.epoch and restart. To start a new id space on \
                purpose, make sure no old ids share a table with new ones, then remove the file; the next call starts \
                afresh.",
        ),
    };
    ErrorReport::new(
        code,
        format!("snowflake_id generators are disabled: the reservation file \"{file}\" {what}"),
        FUNC,
    )
    .set_detail(format!("{}. The readers keep working; no id is issued until this is fixed.", capitalized(why)))
    .set_hint(hint)
}

/// A reservation replayed from the WAL while the server's reservation file belongs to another
/// layout: recovery stops (FATAL), since the file is never replaced.
pub fn replay_other_layout(until_unix_ms: i64) -> ErrorReport {
    let file = crate::core::reservation::FILE_NAME;
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!(
            "cannot keep a replayed snowflake_id reservation: the reservation file \"{file}\" belongs to another \
            layout"
        ),
        FUNC,
    )
    .set_detail(format!(
        "The WAL reserves ids until {}; this server's snowflake_id.layout and snowflake_id.epoch are not the file's, \
        and a file of another layout is never overwritten.",
        time::format_unix_ms(until_unix_ms)
    ))
    .set_hint(
        "Recovery stops here. Give this server the snowflake_id.layout and snowflake_id.epoch the file was written \
        with, or, if its primary started a new id space on purpose, move the file out of the data directory; then \
        start it again, and it replays this record again.",
    )
}

/// A call in a database whose record another transaction is still changing, after waiting.
pub fn record_change_running(xid: u32, waited_ms: u128) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
        format!("transaction {xid} is changing this database's record of its id space"),
        FUNC,
    )
    .set_detail(format!(
        "Ids in this database wait for such a change to commit or roll back, since the ids it records may lie \
        ahead of this server's; this call waited {waited_ms} ms (snowflake_id.max_rewind_wait)."
    ))
    .set_hint(
        "A restore or an UPDATE of snowflake_id_private.snowflake_id_space is running: ids in this database resume \
        when it ends. Restore into a database that no session mints in.",
    )
}

/// The record's trigger could not note its transaction: as many others are changing records.
pub fn too_many_record_changes() -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
        "too many transactions are changing records of id spaces at once",
        FUNC,
    )
    .set_detail("The server follows at most 32 uncommitted changes of snowflake_id_space, in all databases.")
    .set_hint("Commit or roll back the others first.")
}

/// `why` with its first letter in upper case, as a DETAIL sentence starts.
fn capitalized(why: &str) -> String {
    let mut chars = why.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// A generator called on a hot standby.
pub fn in_recovery() -> ErrorReport {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION, "cannot mint ids during recovery", FUNC)
        .set_detail("A standby shares its primary's shards; ids minted here would repeat the primary's.")
        .set_hint(if cfg!(feature = "pg14") {
            "Mint ids on the primary. PostgreSQL 14 replays no record of the primary's reservation: once \
            promoted, and before this server mints, a superuser runs SELECT snowflake_id_advance(now() + interval \
            '2 seconds'), or the old primary's reservation if later."
        } else {
            "Mint ids on the primary. Once promoted, this server mints above every id whose reservation it \
            replayed."
        })
}

/// `snowflake_id_advance` to a point it must not reach.
pub fn advance_too_far(ts_unix_ms: i64, limit: &str) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("cannot advance the generators to {}", time::format_unix_ms(ts_unix_ms)),
        FUNC,
    )
    .set_detail(format!("It is {limit}; the move would be permanent."))
    .set_hint("Pass the old primary's reservation, or now() plus the clock skew you allow.")
}

/// The clock read before the epoch when the library loaded (a WARNING: the server starts).
pub fn epoch_in_future(e: &LayoutError) -> ErrorReport {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_WARNING, "snowflake_id: the clock reads before snowflake_id.epoch", FUNC)
        .set_detail(e.to_string())
        .set_hint(
            "snowflake_next refuses with SQLSTATE 22008 until the clock passes the epoch; UUIDv7 and the \
            readers work. Check the server's clock, or the epoch.",
        )
}

/// Recovery from a file of another layout that was removed: a new id space starts (a WARNING).
pub fn new_id_space() -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_WARNING,
        format!(
            "snowflake_id: the reservation file \"{}\" was removed; the generators start a new id space from the clock",
            crate::core::reservation::FILE_NAME
        ),
        FUNC,
    )
    .set_detail("The file belonged to another layout or epoch, and was removed while the generators refused to mint.")
}

/// Without the preload, the layout and epoch could not be read from the configuration files.
pub fn config_unreadable(why: &str) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_CONFIG_FILE_ERROR,
        "could not read snowflake_id.layout and snowflake_id.epoch from the configuration files",
        FUNC,
    )
    .set_detail(format!("{}.", capitalized(why)))
    .set_hint(
        "Fix the configuration file; the readers use no other source, so that no session can change what they return.",
    )
}

/// The configured shard list did not parse at start (a WARNING): the fence is closed.
pub fn invalid_fence(why: &str) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_WARNING,
        "snowflake_id.shards is not a valid shard list: no shard may \
        mint",
        FUNC,
    )
    .set_detail(format!("{}.", capitalized(why)))
    .set_hint(
        "Fix snowflake_id.shards in the configuration and reload. Until then snowflake_next refuses every \
            shard (22023); UUIDv7 and the readers work.",
    )
}

/// `snowflake_id_advance` where it must not write.
pub fn advance_read_only(on_standby: bool) -> ErrorReport {
    let msg = if on_standby {
        "cannot advance the generators during recovery"
    } else {
        "cannot advance the generators in a read-only transaction"
    };
    ErrorReport::new(PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION, msg, FUNC)
        .set_detail("snowflake_id_advance writes the reservation file and moves every generator of the server.")
}

/// The database's record of its id space names another layout or epoch than the server's.
pub fn space_mismatch(m: &crate::core::space::Mismatch) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "this database's snowflake ids belong to another id space than this server's",
        FUNC,
    )
    .set_detail(format!(
        "{}. New ids would mix two id spaces in the same tables: they could sort before stored ids and collide with \
            them.",
        capitalized(&m.to_string())
    ))
    .set_hint(format!(
        "Set snowflake_id.layout = '{}' and snowflake_id.epoch = '{}' in postgresql.conf and restart. Only if this \
            database holds no snowflake id of the recorded space, record this server's instead: DELETE FROM \
            snowflake_id_private.snowflake_id_space; INSERT INTO snowflake_id_private.snowflake_id_space (layout, \
            epoch) SELECT layout, epoch FROM snowflake_layout();",
        m.recorded.layout,
        time::format_unix_ms(m.recorded.epoch_unix_ms)
    ))
}

/// A database's recorded floor lies further ahead of the clock than a call may wait for (a
/// restore onto a server whose clock is behind): its ids refuse, since ids minted below the floor
/// could repeat ids the database holds.
pub fn floor_beyond_horizon(floor_unix_ms: i64, now_unix_ms: i64, horizon_ms: i64) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_SYSTEM_ERROR,
        format!(
            "this database holds ids minted until {}, {} ms ahead of this server's clock",
            time::format_unix_ms(floor_unix_ms),
            floor_unix_ms.saturating_sub(now_unix_ms)
        ),
        FUNC,
    )
    .set_detail(format!(
        "Ids minted before then could repeat ids the database holds, and a call waits for the clock at most \
            {horizon_ms} ms (snowflake_id.max_rewind_wait, the lead, and a second). Ids in this database resume once \
            the clock is that close to the time the record gives \
            (snowflake_id_private.snowflake_id_space.minted_before); other databases are not affected."
    ))
    .set_hint(
        "Check this server's clock against the one the database comes from (a restore or upgrade onto a server \
        whose clock is behind). A larger snowflake_id.max_rewind_wait lets the first id wait out a larger step.",
    )
}

/// A generator called in parallel mode (from a function a user marked parallel safe) needed to
/// advance the database's floor, which parallel mode forbids.
pub fn floor_in_parallel_mode() -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_TRANSACTION_STATE,
        "cannot advance this database's record of minted ids during a parallel operation",
        FUNC,
    )
    .set_detail("The id generators are PARALLEL UNSAFE: a function that calls them must be too.")
    .set_hint("Mark the function that calls the generator PARALLEL UNSAFE.")
}

/// The database's floor could not be written before an id past it was handed out (a WARNING,
/// once per backend): a dump taken before a later id writes it may carry too low a floor.
pub fn floor_not_written(why: &str) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_WARNING,
        format!(
            "snowflake_id: this database's record of minted ids \
            (snowflake_id_private.snowflake_id_space.minted_before) was not advanced: {why}"
        ),
        FUNC,
    )
    .set_detail(
        "The id was issued anyway; the next id that passes the recorded time advances it. A dump taken before \
        then records too early a time for the newest ids.",
    )
}

/// A WAL record of this resource manager that this version does not know (FATAL in recovery).
#[cfg_attr(feature = "pg14", allow(dead_code))] // PostgreSQL 14 has no custom WAL resource managers
pub fn unknown_wal_record(kind: u8, len: usize) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
        format!("snowflake_id: unknown WAL record (kind 0x{kind:02x}, {len} bytes)"),
        FUNC,
    )
    .set_detail(
        "A newer snowflake_id wrote it, or the WAL is damaged. Skipping it could leave this server a \
        reservation below ids the primary issued.",
    )
    .set_hint(
        "Install the snowflake_id of the server that wrote the WAL (or a newer one) here, then start the server \
        again: replay resumes at this record.",
    )
}

/// Replay replaced a damaged or unreadable reservation file (a LOG line).
pub fn reservation_replaced_from_wal(until_unix_ms: i64) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        format!(
            "snowflake_id: the unusable reservation file \"{}\" was replaced with a reservation replayed from the WAL \
                (until {})",
            crate::core::reservation::FILE_NAME,
            time::format_unix_ms(until_unix_ms)
        ),
        FUNC,
    )
    .set_detail("The replayed reservation covers every id in the data replayed with it; the generators may mint again.")
}

/// The record table stayed locked for as long as a call may wait.
pub fn space_record_locked(waited_ms: u128) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
        format!("snowflake_id_space stayed locked for {waited_ms} ms"),
        FUNC,
    )
    .set_detail(
        "The generators read the database's record of its id space before a session's first id, and wait for \
        its lock no longer than snowflake_id.max_rewind_wait.",
    )
    .set_hint(
        "Look in pg_locks for the sessions holding or awaiting a lock on \
        snowflake_id_private.snowflake_id_space (only superusers, the database's owner, pg_read_all_data and \
        pg_write_all_data can name it); the next call tries again.",
    )
}

/// The record table's columns are not the ones the extension created.
pub fn space_record_altered() -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id_space does not have the columns snowflake_id created (layout text, epoch timestamptz, \
            recorded_at timestamptz, minted_before timestamptz)",
        FUNC,
    )
    .set_hint("Restore the table's definition; the generators read it before a session's first id.")
}

/// A transaction that changed `snowflake_id_space` cannot be prepared.
pub fn space_change_prepared() -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        "cannot PREPARE a transaction that has modified snowflake_id_space",
        FUNC,
    )
    .set_detail(
        "Sessions learn of a change to the record when the transaction that made it commits, which a prepared \
        transaction does elsewhere.",
    )
}

/// A negative bigint where a snowflake id is wanted (its text or public forms).
pub fn negative_id(id: i64) -> ErrorReport {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE, format!("snowflake id {id} is negative"), FUNC)
}

/// Text that is not of its form (`snowflake_from_text`, `ulid_to_uuid`, `snowflake_from_public`):
/// 22P02, quoting at most 32 bytes of it, printable ASCII as is and any other byte as `\xNN`, so
/// that the message is valid in any server encoding.
pub fn invalid_text(kind: &str, input: &[u8], detail: impl std::fmt::Display) -> ErrorReport {
    let mut shown: String = input
        .iter()
        .take(32)
        .map(|&b| if (0x20..0x7f).contains(&b) { char::from(b).to_string() } else { format!("\\x{b:02x}") })
        .collect();
    if input.len() > 32 {
        shown.push_str("...");
    }
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        format!("invalid input syntax for {kind}: \"{shown}\""),
        FUNC,
    )
    .set_detail(detail.to_string())
}

/// A public UUID that no configured key made (22P02, like a token).
pub fn invalid_public_uuid(public: &[u8; 16], e: crate::core::public::TokenError) -> ErrorReport {
    let hex: String = public.iter().map(|b| format!("{b:02x}")).collect();
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        format!(
            "invalid public UUID: \"{}-{}-{}-{}-{}\"",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        ),
        FUNC,
    )
    .set_detail(e.to_string())
}

/// A UUID with no public form: not a UUIDv7, or one after 2248-09-26.
pub fn no_public_form(e: crate::core::public::UuidError) -> ErrorReport {
    use crate::core::public::{UuidError, UUID_TIME_BITS};
    match e {
        UuidError::NotVersion7 => {
            ErrorReport::new(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "only a UUIDv7 has a public form", FUNC)
                .set_detail("uuidv7_to_public takes a version 7 UUID of the RFC 9562 variant.")
        }
        UuidError::TooLate => ErrorReport::new(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            "UUIDv7 time is too late for a public form",
            FUNC,
        )
        .set_detail(format!(
            "A public form keeps the top 5 bits of a UUIDv7's time as its check, so it covers times before {}.",
            time::format_unix_ms(1 << UUID_TIME_BITS)
        )),
    }
}

/// A public-id context longer than the tweak holds.
pub fn context_too_long(len: usize) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("public id context is {len} bytes long"),
        FUNC,
    )
    .set_detail(format!(
        "A context is at most {} bytes. Pass a short name (a tenant id, a table name), or a hash of a longer one.",
        crate::core::public::MAX_CONTEXT_BYTES
    ))
}

const KEY_FILE_HINT: &str = "Put one line per key in it, \"VERSION HEX\", with \"encode\" after the key that makes \
    new ids: VERSION from 0 to 31, HEX 64 hexadecimal digits from a random source (openssl rand -hex 32). It must be \
    owned by the server's user with mode 0600. See the README, \"Public ids\".";

/// No key: the key file holds none (55000).
pub fn no_public_key() -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "no key for public ids is configured",
        FUNC,
    )
    .set_detail("The key file (snowflake_id.public_keys_file) holds no key.")
    .set_hint(KEY_FILE_HINT)
}

/// Keys, but none marked to encode (55000): this server only decodes.
pub fn no_encoding_key() -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "no key for public ids is marked \"encode\"",
        FUNC,
    )
    .set_detail("The keys in the key file (snowflake_id.public_keys_file) only decode.")
    .set_hint(
        "Add \"encode\" after the key that makes new ids, on every server at once (see the README's rotation steps).",
    )
}

/// The key file cannot be used. Names the setting, never the path (a plain role sees this) or
/// the file's contents.
pub fn key_file_unusable(why: &crate::core::public::KeyFileUnusable) -> ErrorReport {
    use crate::core::public::KeyFileUnusable as Unusable;
    let (code, message, detail) = match why {
        Unusable::Missing => (
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "no key for public ids is configured",
            "The key file (snowflake_id.public_keys_file) does not exist.".to_owned(),
        ),
        Unusable::Io(e) => (
            PgSqlErrorCode::ERRCODE_IO_ERROR,
            "could not read the key file of public ids",
            format!("Reading snowflake_id.public_keys_file failed: {e}."),
        ),
        Unusable::NotRegular => (
            PgSqlErrorCode::ERRCODE_CONFIG_FILE_ERROR,
            "the key file of public ids is not a regular file",
            "snowflake_id.public_keys_file must name a regular file.".to_owned(),
        ),
        Unusable::WrongOwner => (
            PgSqlErrorCode::ERRCODE_CONFIG_FILE_ERROR,
            "the key file of public ids must be owned by the database user or root",
            "snowflake_id.public_keys_file names a file another user owns.".to_owned(),
        ),
        Unusable::Exposed => (
            PgSqlErrorCode::ERRCODE_CONFIG_FILE_ERROR,
            "the key file of public ids has group or world access",
            "File must have permissions u=rw (0600) or less if owned by the database user, or permissions u=rw,g=r \
                (0640) or less if owned by root."
                .to_owned(),
        ),
        Unusable::Invalid(e) => (
            PgSqlErrorCode::ERRCODE_CONFIG_FILE_ERROR,
            "the key file of public ids cannot be used",
            format!("In snowflake_id.public_keys_file, {e}."),
        ),
    };
    ErrorReport::new(code, message, FUNC).set_detail(detail).set_hint(KEY_FILE_HINT)
}

/// `snowflake_convert` or `snowflake_unconvert` of a table that no longer exists (dropped while
/// the call waited for its lock).
pub fn no_such_table() -> ErrorReport {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE, "the table does not exist any more", FUNC)
}

/// `snowflake_convert` or `snowflake_unconvert` of a column that does not exist.
pub fn no_such_column(col: &str) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
        format!("column \"{col}\" of the table does not exist"),
        FUNC,
    )
}

/// A catalog query or a statement of a conversion's plan failed (its own error, such as a lock
/// timeout, is raised by PostgreSQL before this sees it; this is the rest).
pub fn catalog_query(e: pgrx::spi::SpiError) -> ErrorReport {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("snowflake_id catalog query: {e}"), FUNC)
}

/// A conversion in a REPEATABLE READ or SERIALIZABLE transaction, whose snapshot predates the lock.
pub fn convert_needs_read_committed(table: &str) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_TRANSACTION_STATE,
        format!("cannot convert a column of {table} in a REPEATABLE READ or SERIALIZABLE transaction"),
        FUNC,
    )
    .set_detail(
        "The column's facts are read again after the table is locked, and this transaction's snapshot would \
        not show what was committed while it waited for the lock.",
    )
    .set_hint("Run it in a READ COMMITTED transaction (the default). A dry run works at any isolation level.")
}

/// A relation a conversion locks while it holds the table's `ACCESS EXCLUSIVE` lock (a partition
/// or child, the identity's sequence, a sequence it drops) stayed locked by another session for
/// as long as it waits then (`bound_ms`).
pub fn convert_lock_not_available(relation: &str, table: &str, bound_ms: u128) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
        format!("could not lock {relation} to convert a column of {table}"),
        FUNC,
    )
    .set_detail(format!(
        "Another session holds a lock on {relation}. Holding the table's ACCESS EXCLUSIVE lock, a conversion waits \
            for another lock at most {bound_ms} ms (1 s, or lock_timeout if that is shorter), so that no session's \
            lock can keep the table's readers and writers waiting."
    ))
    .set_hint(format!(
        "Look in pg_locks and pg_prepared_xacts for the sessions holding a lock on {relation}, and convert again \
            once they end. Nothing was converted, and the table's lock was released with the transaction."
    ))
}

/// A column `snowflake_convert` or `snowflake_unconvert` does not convert: 42809 for what is not
/// a table (or has a foreign partition), 42501 for a caller who is not its owner (or a
/// partition's, or may not create the continuation), 42804 for a column that is not `bigint`,
/// 55000 for stored ids at or above the next snowflake id and for a plan whose effect on the
/// column is missing once it ran, 0A000 for the inverse of a table with partitions or children or
/// of one, 22023 for the rest.
pub fn convert_refused(e: &crate::core::convert::ConvertError, c: &crate::core::convert::Column) -> ErrorReport {
    use crate::core::convert::ConvertError as E;
    let (code, hint) = match e {
        E::NotATable => (PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE, None),
        E::NotOwner => (
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            Some(format!("Run it as {}, a member of that role, or a superuser.", c.owner)),
        ),
        E::NotBigint { .. } => (
            PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
            Some(format!(
                "A snowflake id needs 63 bits. Changing the type rewrites the table under an ACCESS EXCLUSIVE lock, \
                    so it is yours to choose: ALTER TABLE {} ALTER COLUMN {} TYPE bigint, then convert.",
                c.table, c.column
            )),
        ),
        E::IdsAboveSnowflake { .. } => (
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            Some(
                "New ids must sort above every stored one. Ids an identity from snowflake_unconvert() issued lie \
                just ahead of the clock: wait until it passes them, or have a superuser move the generators past them \
                with snowflake_id_advance(). Ids from elsewhere: renumber those rows, or keep the column as it is."
                    .into(),
            ),
        ),
        E::SequenceNotOwned { .. } => (
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            Some("Keep it (drop_sequence => false), and DROP SEQUENCE it yourself once nothing uses it.".into()),
        ),
        E::InHierarchy => (
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            Some(
                "Give each table of the tree the default you want yourself, above every id the whole tree holds."
                    .into(),
            ),
        ),
        E::SequenceShared { .. } => (
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            Some("Keep the sequence (drop_sequence => false), or first remove its other uses.".into()),
        ),
        E::IdentityShared { .. } => (
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            Some("First make the other defaults and views stop using the identity's sequence.".into()),
        ),
        E::CannotCreate { .. } => (
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            Some(
                "Run it as a role with CREATE on the table's schema, or drop the sequence with the identity \
                (drop_sequence => true)."
                    .into(),
            ),
        ),
        E::ForeignDescendant { .. } => (
            PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
            Some(
                "Detach the foreign partition first, convert, and give the foreign table the default you want \
                yourself."
                    .into(),
            ),
        ),
        E::DescendantNotOwned { .. } => (
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            Some("Run it as the owner of every table in the tree, or as a superuser.".into()),
        ),
        E::DescendantDefault { .. } => (
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            Some(
                "Give that table the parent's default first, or drop its default, if the change is what you want."
                    .into(),
            ),
        ),
        E::Descending { .. } => (
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            Some(
                "Drop it with the identity (drop_sequence => true), or create the sequence you want yourself \
                afterwards."
                    .into(),
            ),
        ),
        E::Nullable => (
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            Some(format!("ALTER TABLE {} ALTER COLUMN {} SET NOT NULL first.", c.table, c.column)),
        ),
        E::NotApplied(_) => (
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            Some(
                "Nothing is kept: the transaction rolls back, with whatever the statements did to other objects. \
                Check the names of the table's schema and objects, and convert again."
                    .into(),
            ),
        ),
        E::OtherDefault(_) | E::Generated | E::NotConverted => (
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            Some(
                "Only a bigserial, serial8 or identity column (or one with no default) is converted, and only a \
                converted one back."
                    .into(),
            ),
        ),
    };
    let report = ErrorReport::new(code, format!("cannot convert {}.{}", c.table, c.column), FUNC)
        .set_detail(capitalized(&format!("{e}.")));
    match hint {
        Some(h) => report.set_hint(h),
        None => report,
    }
}
