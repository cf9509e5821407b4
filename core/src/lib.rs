//! pg_snowflake's pure core: everything about an ID that needs no Postgres.
//!
//! - [`layout`]: the bits of an ID, packing and unpacking, time → ID bounds
//! - [`calendar`]: UTC dates for the epoch setting and for messages
//! - [`clock`]: the clock readings the generator is given
//! - [`generator`]: the next-id state machine (steady clock, borrowing, reservations)
//! - [`registry`]: the node-id registry's decisions: claims, leases, clock offsets
//! - [`node`]: the server's identity (node id, history, registry claim, refusal) and its transitions
//! - [`issuer`]: the issuing state in shared memory (generator, node, registry status, the
//!   writer's turn), the gate and the fenced ceiling
//! - [`renewer`]: the renewer's turn: when it contacts the registry, then the pin and the publication
//! - [`retry`]: pacing retries and their log lines after failures
//! - [`backfill`]: IDs stamped at past instants: the backfill cursor, its durable ceiling
//! - [`base32`]: the 13-character text form
//! - [`state_file`] and [`wal_record`]: the bytes of the durable reservation
//! - [`watermark`]: the least ID still held by a transaction that has not ended
//! - [`error`]: what can go wrong, as data (the extension words it)

pub mod backfill;
pub mod base32;
pub mod calendar;
pub mod clock;
pub mod error;
pub mod generator;
pub mod issuer;
pub mod layout;
pub mod node;
pub mod registry;
pub mod renewer;
pub mod retry;
pub mod state_file;
pub mod wal_record;
pub mod watermark;

pub use error::Error;
