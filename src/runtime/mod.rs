//! The PostgreSQL runtime: everything that talks to the server (settings, shared memory, files,
//! the WAL, catalogs, connections) to run the rules of `crate::core`.

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
pub mod uuidv7;
pub mod wal;
