//! The PostgreSQL runtime: everything that talks to the server or the operating system
//! (settings, shared memory, files, the WAL, catalogs, connections) to run the rules of
//! `crate::core`. It never imports `crate::api`.
//!
//! The modules, from the bottom up. Each imports `crate::core` and only the runtime modules listed
//! before it (`scripts/check-layers.py`, in `make test`'s static checks, keeps this true):
//!
//! 1. `errors`: every error, warning and log line, with its SQLSTATE; the one place an
//!    `ErrorReport` is built.
//! 2. `timestamp`: PostgreSQL's `timestamptz` and Unix time, finite values only.
//! 3. `restricted`: running a closure with the catalogs' search path.
//! 4. `sysclock`: the operating system's clocks, unshifted, and whether the kernel uses the TSC.
//! 5. `guc`: every `snowflake_id.*` setting: registration, checks, accessors.
//! 6. `clock`: the generators' clock (the TSC or `clock_gettime`, plus the test offset), and
//!    interruptible waits.
//! 7. `keys`: the key file of public ids, read once per transaction.
//! 8. `reservation_file`: the reservation file's I/O.
//! 9. `shmem`: all shared memory, and the protocol that guards it.
//! 10. `wal`: the WAL record that carries the reservation to standbys.
//! 11. `reservation`: renewing, recovering, replaying and advancing the reservation.
//! 12. `space`: the first id in a database checks its recorded id space and waits for its floor.
//! 13. `generate`: the guarded path every generator's word goes through.
//! 14. `snowflake`: snowflake ids for a shard, and from the server's own shards.
//! 15. `uuidv7`: UUIDv7s from the one generator every backend shares.
//! 16. `convert`: converting key columns: catalog reads, locks, the stored ids, the plan run.
//! 17. `fleet`: the fleet check: its gate, this server's facts, the connections to other servers.

pub mod clock;
pub mod convert;
pub mod errors;
pub mod fleet;
pub mod generate;
pub mod guc;
pub mod keys;
pub mod reservation;
pub mod reservation_file;
pub mod restricted;
pub mod shmem;
pub mod snowflake;
pub mod space;
pub mod sysclock;
pub mod timestamp;
pub mod uuidv7;
pub mod wal;
