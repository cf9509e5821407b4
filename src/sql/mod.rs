//! The SQL face: every function a user calls, each a thin wrapper.
//!
//! - [`nextval`]: `snowflake_nextval()` and `snowflake_nextval_batch(n)`
//! - [`backfill`]: `snowflake_nextval_at(ts)`: IDs stamped at past instants
//! - [`stats`]: the function `snowflake_stats()`
//! - [`decode`]: IDs → parts, JSON and base 32, and back
//! - [`bounds`]: time → ID bounds
//! - [`adopt`]: `snowflake_adopt(table, column)`; the view `snowflake_sequence_keys` of what is
//!   left to adopt
//! - [`adopt_new_keys`]: the event trigger that adopts new key columns
//!   (`pg_snowflake.adopt_new_keys`), and `snowflake_adopt_exclude(table)`
//! - [`adopt_online`]: `CALL snowflake_adopt_online(table, column)`: the checks in Rust, the
//!   procedure in `sql/install/adopt_online.sql`
//! - [`registry`]: the node-id registry: `snowflake_registry()`, `_create()`, `_retire(id)`
//! - [`lease`]: node-id leases for applications: `snowflake_lease_acquire(label)`, `_renew`,
//!   `_release`
//! - [`timestamps`]: Unix milliseconds ↔ timestamptz, for the others
//! - [`watermark`]: the function `snowflake_watermark()`

mod adopt;
mod adopt_new_keys;
mod adopt_online;
mod backfill;
mod bounds;
mod decode;
mod lease;
mod nextval;
mod registry;
mod stats;
mod timestamps;
mod watermark;
