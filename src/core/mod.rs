//! The pure core of snowflake_id: bit layouts, time arithmetic, the monotonic state machine, and
//! every other rule, as plain Rust.
//!
//! Nothing below this module imports pgrx or reads a real clock. Time, randomness and previous
//! state come in as arguments, so every rule here is tested with plain `#[test]` and a fake
//! clock (`cargo test --lib core`). The runtime (`crate::runtime`) gathers the inputs from
//! PostgreSQL and the operating system; the SQL glue (`crate::api`) parses arguments.
//!
//! The modules, from the bottom up. Each imports only modules listed before it
//! (`scripts/check-layers.py`, in `make test`'s static checks, keeps this true):
//!
//! 1. `excerpt`: how much of a refused text an error message quotes.
//! 2. `time`: time units, PostgreSQL's epoch, the text form of an epoch.
//! 3. `layout`: the bit layout of a snowflake id, its figures and its range bounds.
//! 4. `reservation`: the durable high-water mark's rules and its file's format.
//! 5. `share`: the last tick of a generator's lead, shared out so that no flood fills it.
//! 6. `monotonic`: the state machine every generator shares, and the clock policy.
//! 7. `cycle_clock`: a wall clock extrapolated from the CPU's cycle counter.
//! 8. `uuidv7`: the RFC 9562 version 7 layout and the readers of versions 1 and 7.
//! 9. `rng`: the random tail of a UUIDv7.
//! 10. `shards`: the set of shards a server owns, and the pick among them.
//! 11. `space`: a database's record of its id space, and its floor.
//! 12. `text`: the key-free text forms (Crockford base32, ULID).
//! 13. `ff1`: FF1 (NIST SP 800-38G) over AES-256.
//! 14. `public`: the public forms of ids, and the key file's format.
//! 15. `conninfo`: which connection strings a role may use.
//! 16. `fleet`: the fleet check's facts and verdicts.
//! 17. `convert`: the plans that convert a key column and back.
//! 18. `partition`: the bounds of partitions by time over a layout's ids.

pub mod conninfo;
pub mod convert;
pub mod cycle_clock;
pub mod excerpt;
pub mod ff1;
pub mod fleet;
pub mod layout;
pub mod monotonic;
pub mod partition;
pub mod public;
pub mod reservation;
pub mod rng;
pub mod shards;
pub mod share;
pub mod space;
pub mod text;
pub mod time;
pub mod uuidv7;
