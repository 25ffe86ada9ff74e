//! Running SQL with no role's code picked by name: catalog queries run with `search_path =
//! pg_catalog, pg_temp`, so that no function or operator a role created can stand in for a built-in
//! one ([`with_catalog_search_path`]). The setting is restored when the closure returns; on an
//! ERROR (a panic unwinding through here), the abort of the transaction or subtransaction restores
//! it (`AtEOXact_GUC` pops the nesting level).
//!
//! (No code here runs another role's queries: the converters read a user's table below the query
//! layer, by OID, and run none of its code: `crate::runtime::convert`.)

use pgrx::pg_sys;

/// Runs `f` with `search_path = pg_catalog, pg_temp`, restoring it afterwards.
pub fn with_catalog_search_path<T>(f: impl FnOnce() -> T) -> T {
    let nest = push_catalog_search_path();
    let out = f();
    // SAFETY: pops exactly the level pushed above.
    unsafe { pg_sys::AtEOXact_GUC(true, nest) };
    out
}

/// Opens a GUC nesting level with `search_path = pg_catalog, pg_temp` and returns it.
fn push_catalog_search_path() -> i32 {
    // SAFETY: PostgreSQL's GUC-nesting API, in a backend inside a transaction (every caller runs
    // in a query). GUC_ACTION_SAVE is allowed in parallel workers too.
    unsafe {
        let nest = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            c"search_path".as_ptr(),
            c"pg_catalog, pg_temp".as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        nest
    }
}
