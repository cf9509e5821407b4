//! The SQL face: every function a user calls, each a thin wrapper.
//!
//! - [`nextval`]: `snowflake_nextval()` and `snowflake_nextval_batch(n)`
//! - [`stats`]: the function `snowflake_stats()`
//! - [`decode`]: IDs → parts, JSON and base 32, and back
//! - [`bounds`]: time → ID bounds
//! - [`adopt`]: `snowflake_adopt(table, column)`
//! - [`adopt_online`]: `CALL snowflake_adopt_online(table, column)`: the checks in Rust, the
//!   procedure in `sql/install/adopt_online.sql`
//! - [`registry`]: the node-id registry: `snowflake_registry()`, `_create()`, `_retire(id)`
//! - [`timestamps`]: Unix milliseconds ↔ timestamptz, for the others

mod adopt;
mod adopt_online;
mod bounds;
mod decode;
mod nextval;
mod registry;
mod stats;
mod timestamps;
