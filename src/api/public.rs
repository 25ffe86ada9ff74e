//! Public ids (`crate::core::public`): keyed, reversible tokens for snowflake ids and UUIDv7s,
//! with the keys from the key file (`crate::runtime::keys`).
//!
//! Volatility: STABLE, STRICT and PARALLEL SAFE. A result depends on the keys, which come from
//! configuration and stay the same for a whole transaction (`crate::runtime::keys` looks at the file once
//! per transaction), so a token in a `WHERE` clause is decoded once and an index scan uses the id.
//! Not IMMUTABLE: a key rotation changes the results, so they must never be stored in an index or
//! a generated column. Parallel safe: a worker reads the same file and derives the same keys,
//! unless the file is replaced while the query runs, when a worker may see the new keys and the
//! leader the old ones; every result is then still one that a configured key gives (under the
//! documented rotation, both decode), which is the price of letting parallel plans mint tokens.
//!
//! Text arguments are read as bytes (pgrx's `&str` panics on text that is not UTF-8), and their
//! length checked first; errors quote at most 32 bytes of them (`crate::runtime::errors::invalid_text`).

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::core::public::{self, MAX_CONTEXT_BYTES};
use crate::runtime::errors;
use crate::runtime::keys;

const TOKEN: &str = "a public id";

fn context(c: &[u8]) -> Result<&[u8], ErrorReport> {
    if c.len() > MAX_CONTEXT_BYTES {
        return Err(errors::context_too_long(c.len()));
    }
    Ok(c)
}

/// The 20-character public token of a snowflake id, under the key marked `encode`.
#[pg_extern(stable, strict, parallel_safe, sql = false)]
fn snowflake_to_public(id: i64, context: &[u8]) -> Result<String, ErrorReport> {
    let ctx = self::context(context)?;
    if id < 0 {
        return Err(errors::negative_id(id));
    }
    keys::with_ring(|ring| {
        let key = ring.encoder().ok_or_else(errors::no_encoding_key)?;
        Ok(super::ascii(&public::snowflake_token(key, id, ctx)))
    })
}

/// The snowflake id of a public token made under any configured key for `context`.
#[pg_extern(stable, strict, parallel_safe, sql = false)]
fn snowflake_from_public(token: &[u8], context: &[u8]) -> Result<i64, ErrorReport> {
    let ctx = self::context(context)?;
    keys::with_ring(|ring| {
        public::snowflake_from_token(ring, token, ctx).map_err(|e| errors::invalid_text(TOKEN, token, e))
    })
}

/// The public form of a UUIDv7: a UUID that reads as a random version 4, under the key marked
/// `encode`.
#[pg_extern(stable, strict, parallel_safe, sql = false)]
fn uuidv7_to_public(id: pgrx::Uuid, context: &[u8]) -> Result<pgrx::Uuid, ErrorReport> {
    let ctx = self::context(context)?;
    keys::with_ring(|ring| {
        let key = ring.encoder().ok_or_else(errors::no_encoding_key)?;
        public::uuid_to_public(key, id.as_bytes(), ctx).map(pgrx::Uuid::from_bytes).map_err(errors::no_public_form)
    })
}

/// The UUIDv7 of a public form made under the key marked `encode`.
#[pg_extern(stable, strict, parallel_safe, sql = false)]
fn uuidv7_from_public(token: pgrx::Uuid, context: &[u8]) -> Result<pgrx::Uuid, ErrorReport> {
    let ctx = self::context(context)?;
    keys::with_ring(|ring| {
        let key = ring.encoder().ok_or_else(errors::no_encoding_key)?;
        public::uuid_from_public(key, token.as_bytes(), ctx)
            .map(pgrx::Uuid::from_bytes)
            .map_err(|e| errors::invalid_public_uuid(token.as_bytes(), e))
    })
}

/// Every UUIDv7 a public form decodes to under the configured keys, the encoder's first: for
/// `WHERE id = ANY (uuidv7_public_candidates($1))` while a rotation has tokens of two keys out.
#[pg_extern(stable, strict, parallel_safe, sql = false)]
fn uuidv7_public_candidates(token: pgrx::Uuid, context: &[u8]) -> Result<Vec<pgrx::Uuid>, ErrorReport> {
    let ctx = self::context(context)?;
    keys::with_ring(|ring| {
        public::uuid_candidates(ring, token.as_bytes(), ctx)
            .map(|v| v.into_iter().map(pgrx::Uuid::from_bytes).collect())
            .map_err(|e| errors::invalid_public_uuid(token.as_bytes(), e))
    })
}

/// The configured keys, without their secrets: version, whether it encodes, and a fingerprint to
/// compare servers by. STABLE for the reason above; the fingerprint reveals nothing of the key.
// Formatted by hand: rustfmt keeps this return type on one line, past the width check.py enforces
// (scripts/check-style.py), and pgrx reads only the type spelled out, never an alias.
#[rustfmt::skip]
#[pg_extern(stable, parallel_safe)]
fn snowflake_public_keys() -> Result<
    TableIterator<'static, (name!(version, i32), name!(encodes, bool), name!(fingerprint, String))>,
    ErrorReport,
> {
    Ok(TableIterator::new(keys::describe()?))
}
