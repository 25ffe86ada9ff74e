//! The SQL surface: `#[pg_extern]` declarations only. Each function checks its arguments, calls
//! the runtime (or a pure reader of the core), and raises errors through
//! `crate::runtime::errors`. The files share code only through this one.

pub mod convert;
pub mod fleet;
pub mod layout;
pub mod public;
pub mod snowflake;
pub mod stats;
pub mod text;
pub mod uuid;

/// A text of ASCII bytes (the text forms and public tokens are ASCII by construction).
pub(crate) fn ascii(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}
