//! The pure core of snowflake_id: bit layouts, time arithmetic and the monotonic state machine.
//!
//! Nothing below this module imports pgrx or reads a real clock. Time, randomness and previous
//! state come in as arguments, so every rule here is tested with plain `#[test]` and a fake
//! clock (`cargo test --lib core`). The SQL glue in `crate::api` only parses arguments, calls
//! in here and maps errors (`crate::runtime::errors`).

pub mod conninfo;
pub mod convert;
pub mod cycle_clock;
pub mod excerpt;
pub mod ff1;
pub mod fleet;
pub mod layout;
pub mod monotonic;
pub mod public;
pub mod reservation;
pub mod rng;
pub mod shards;
pub mod space;
pub mod text;
pub mod time;
pub mod uuidv7;
