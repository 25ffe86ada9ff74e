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

use pgrx::pg_sys::panic::ErrorReport;

use crate::core::layout::{LayoutError, Widths, MAX_LAYOUT_LEN};
use crate::runtime::errors;

/// A text of ASCII bytes (the text forms and public tokens are ASCII by construction).
pub(crate) fn ascii(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

/// A layout argument (`snowflake_layout`, the readers that take one) as the setting spells it: at
/// most [`MAX_LAYOUT_LEN`] bytes of ASCII, which every layout is, read before anything walks it (a
/// caller cannot make the backend spend in proportion to what it passes). In a database that is not
/// UTF-8, other bytes need not even be UTF-8.
pub(crate) fn layout_arg(bytes: &[u8]) -> Result<Widths, ErrorReport> {
    if bytes.len() > MAX_LAYOUT_LEN {
        return Err(errors::bad_layout(&LayoutError::TooLong { len: bytes.len(), max: MAX_LAYOUT_LEN }));
    }
    let text = std::str::from_utf8(bytes)
        .ok()
        .filter(|t| t.is_ascii())
        .ok_or_else(|| errors::bad_layout(&LayoutError::NotAscii))?;
    Widths::parse(text).map_err(|e| errors::bad_layout(&e))
}
