//! snowflake_id: coordinator-free, k-sorted 64-bit ids for PostgreSQL.
//!
//! Three layers, each importing only the ones below it (`scripts/check-layers.py`):
//! - `core`: every rule, as pure Rust (layouts, time, the monotonic state machine, the ciphers,
//!   the parsers). Never imports pgrx.
//! - `runtime`: what talks to PostgreSQL and the operating system (settings, shared memory, the
//!   reservation file and its WAL record, the id space's record, catalogs, connections).
//! - `api`: the `#[pg_extern]` declarations of the SQL surface; the hand-written SQL is
//!   `sql/finalize.sql`.

#[cfg(not(panic = "unwind"))]
compile_error!("snowflake_id must be built with panic = \"unwind\": pgrx turns panics into PostgreSQL errors");

// The sabotaged builds exist for `make chaos` to show that its checker catches broken ids.
#[cfg(all(
    not(debug_assertions),
    any(feature = "sabotage-no-reservation", feature = "sabotage-no-replay", feature = "sabotage-no-sync")
))]
compile_error!("the sabotage features are for make chaos's debug builds only");

mod api;
pub mod core;
mod runtime;

use pgrx::prelude::*;

pgrx::pg_module_magic!(name = c"snowflake_id", version = c"0.4.0");

// The install script's hand-written part (functions declared in SQL, the record of the id space,
// the statistics view, comments and grants), after every definition pgrx derives from the code.
extension_sql_file!("../sql/finalize.sql", finalize);

/// Registers the settings, and when preloaded, the shared memory.
#[pg_guard]
#[allow(non_snake_case)]
pub extern "C-unwind" fn _PG_init() {
    runtime::sysclock::init();
    runtime::guc::init();
    // SAFETY: a plain read of a flag PostgreSQL sets while processing shared_preload_libraries.
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        runtime::shmem::init();
        runtime::wal::init(runtime::reservation::replay);
    }
}

/// Used by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries = 'snowflake_id'", "timezone = 'UTC'"]
    }
}
