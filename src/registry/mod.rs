//! The node-id registry: node ids leased from a table in a PostgreSQL database the servers
//! reach (`pg_snowflake.registry`), so that two servers never make IDs under one node id —
//! copies of a data directory, restored backups and failovers included — and every server's
//! clock is checked against a second one. Without the setting nothing here runs.
//!
//! - [`link`]: the renewer's registry link — its connection, the core's round run over it, and
//!   what is said of each claim, heartbeat and release
//! - `member`: the server as the core's round and contact see it (shared memory, the state file)
//! - [`client`]: the registry's SQL (its table, a claim, a heartbeat, listing, retiring)
//! - [`libpq`]: the connection, through PostgreSQL's client library
//! - [`refusal`]: which error of the catalogue a refusal becomes (a call's, a claim's)
//!
//! The decisions (who may take which id, leases, clock offsets) and the reasoning about
//! identity are the core's: `core/src/registry.rs`. The SQL face is `sql/registry.rs`; the
//! guide for operators, docs/FLEETS.md.

pub mod client;
pub mod libpq;
pub mod link;
pub(crate) mod member;
pub mod refusal;
