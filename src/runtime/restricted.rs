//! Running SQL with no role's code picked by name, and reading another role's table as its owner.
//!
//! Two rules, both PostgreSQL's own:
//! - **Catalog queries** run with `search_path = pg_catalog, pg_temp`, so that no function or
//!   operator a role created can stand in for a built-in one ([`with_catalog_search_path`]).
//! - **A query over a user's table** runs as the table's owner, under
//!   `SECURITY_RESTRICTED_OPERATION` and the same search path ([`as_table_owner`]), as `ANALYZE`,
//!   `REINDEX`, `CLUSTER` and `REFRESH MATERIALIZED VIEW` do. Planning a query evaluates the
//!   owner's index expressions and statistics, and executing it may call the owner's functions:
//!   that code then runs with the owner's rights, never the caller's, and the restricted
//!   operation forbids it to change the session (`SET ROLE`, temporary objects, `PREPARE`,
//!   cursors that outlive it).
//!
//! Both restore the user and the settings when the closure returns. On an ERROR (a panic unwinding
//! through here), the abort of the transaction or subtransaction restores them, as it does for
//! `ANALYZE`: `AbortTransaction` resets the user and security context, and `AtEOXact_GUC` pops the
//! nesting level.

use pgrx::pg_sys;

/// Runs `f` with `search_path = pg_catalog, pg_temp`, restoring it afterwards.
pub fn with_catalog_search_path<T>(f: impl FnOnce() -> T) -> T {
    let nest = push_catalog_search_path();
    let out = f();
    // SAFETY: pops exactly the level pushed above.
    unsafe { pg_sys::AtEOXact_GUC(true, nest) };
    out
}

/// Runs `f` as `owner`, under `SECURITY_RESTRICTED_OPERATION`, with `search_path = pg_catalog,
/// pg_temp`; then restores the caller's user, security context and settings.
pub fn as_table_owner<T>(owner: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    let (mut user, mut context) = (pg_sys::InvalidOid, 0);
    // SAFETY: PostgreSQL's user and security-context API, used as ANALYZE uses it (commands/
    // analyze.c): save, switch, restore. The switch is undone by the abort on an error.
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut user, &mut context);
        pg_sys::SetUserIdAndSecContext(owner, context | pg_sys::SECURITY_RESTRICTED_OPERATION as i32);
    }
    let nest = push_catalog_search_path();
    let out = f();
    // SAFETY: pops the level pushed above (the settings the owner's code changed roll back with
    // it), then gives the caller back its user.
    unsafe {
        pg_sys::AtEOXact_GUC(false, nest);
        pg_sys::SetUserIdAndSecContext(user, context);
    }
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
