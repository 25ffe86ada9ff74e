//! Key-free text forms (`crate::core::text`): 13 Crockford base32 characters for a snowflake id,
//! the 26-character ULID text for a UUID. Both sort like the values they encode.
//!
//! Volatility: IMMUTABLE, STRICT and PARALLEL SAFE. The texts depend on the value alone, never
//! on a setting (a snowflake id's text is its 63 bits, whatever the layout).
//!
//! The text arguments are read as bytes (their declarations in sql/finalize.sql say `text`): pgrx's `&str`
//! panics on text that is not UTF-8, which a database in another encoding passes. Once
//! detoasted, their length is checked before anything else looks at them, and an error quotes
//! at most 32 bytes of them, non-ASCII bytes escaped, so that the message is valid in any
//! encoding.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::core::text::{self, TextError};
use crate::runtime::errors;

fn bad_text(kind: &str, input: &[u8], e: TextError) -> ErrorReport {
    errors::invalid_text(kind, input, format_args!("The text {e}."))
}

/// The 13-character text of a snowflake id: Crockford base32, which sorts like the ids.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_to_text(id: i64) -> Result<String, ErrorReport> {
    text::snowflake_to_text(id).map(|t| super::ascii(&t)).ok_or_else(|| errors::negative_id(id))
}

/// The snowflake id of a 13-character text (either case).
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn snowflake_from_text(t: &[u8]) -> Result<i64, ErrorReport> {
    text::snowflake_from_text(t).map_err(|e| bad_text("a snowflake id's text", t, e))
}

/// The ULID text of a UUID: for a UUIDv7, the ULID of the same time and bits.
#[pg_extern(immutable, strict, parallel_safe)]
fn uuid_to_ulid(id: pgrx::Uuid) -> String {
    super::ascii(&text::uuid_to_ulid(id.as_bytes()))
}

/// The UUID of a 26-character ULID text (either case).
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn ulid_to_uuid(t: &[u8]) -> Result<pgrx::Uuid, ErrorReport> {
    text::ulid_to_uuid(t).map(pgrx::Uuid::from_bytes).map_err(|e| bad_text("a ULID", t, e))
}
