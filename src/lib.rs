//! snowflake_id: coordinator-free, k-sorted 64-bit ids for PostgreSQL.
//!
//! - `core`: the pure logic (layouts, time, the monotonic state machine). Never imports pgrx.
//! - `guc`, `shmem`, `clock`: the settings, the shared-memory state and the wall clock.
//! - `generate`, `reservation`: the mint loop every generator shares, and the durable
//!   high-water mark it keeps; `wal` carries that mark to standbys.
//! - `space`: the first mint in a database checks its recorded id space and its stored ids.
//! - `keys`: the key file of public ids.
//! - `errors`: core errors to SQLSTATEs.
//! - `api`: the `#[pg_extern]` glue.

#[cfg(not(panic = "unwind"))]
compile_error!("snowflake_id must be built with panic = \"unwind\": pgrx turns panics into PostgreSQL errors");

// The sabotaged builds exist for `make chaos` to show that its checker catches broken ids.
#[cfg(all(not(debug_assertions), any(feature = "sabotage-no-reservation", feature = "sabotage-no-replay")))]
compile_error!("the sabotage features are for make chaos's debug builds only");

mod api;
pub mod core;
mod runtime;

use pgrx::prelude::*;

pgrx::pg_module_magic!(name = c"snowflake_id", version = c"0.3.0");

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
