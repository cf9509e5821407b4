//! The durable reservation: the high-water mark written ahead of use so that no restart, crash
//! or failover makes the server issue an ID twice. When a reservation is due, who may write it
//! and when IDs under it may be issued is the core's (`core/src/generator/reservation.rs`, the
//! one telling of the protocol); this wing writes, keeps and replays it.
//!
//! - [`renew`]: one renewal — the writer's turn taken, the write, the report — by the renewer
//!   (`src/renewer.rs`) or a backend standing in
//! - [`store`]: the state file and the WAL record: writing them, reading the file at start-up
//! - [`redo`]: replaying the WAL records (the custom resource manager)
//! - [`backfill`]: the backfill's ceiling (`snowflake_nextval_at`): its file and WAL record

pub mod backfill;
pub mod redo;
pub mod renew;
pub mod store;
