//! pg_snowflake: Snowflake IDs for PostgreSQL.
//!
//! The pure core — the crate `snowflake_core` in `core/`: layout, calendar, generator (clock
//! passed in), the reservation protocol, base 32, the bytes of the state file and WAL record —
//! cannot call Postgres: it does not depend on pgrx. The server's identity (node id, history,
//! registry claim, refusal) is the core's too (`node`). This crate is the thin layer around it:
//!
//! - [`sql`]: the SQL face, every function a user calls
//! - [`allocate`]: the hot path: the next IDs from the shared generator, and the waits
//! - [`renewer`]: the background worker's loop, which conducts both wings below: the
//!   registry's turn, then keep-ahead and the renewals
//! - [`reservation`]: the durable reservation: renewing it (by the renewer, or a backend
//!   standing in), its state file and WAL record, their replay
//! - [`registry`]: node ids leased from a registry database, the clock checked against it
//! - [`shmem`]: the generator in shared memory, its lock and condition variables (no I/O)
//! - [`watermark`]: the IDs still held by open transactions: slots, prepared transactions
//! - [`gucs`]: every setting, and the layout built from them at start-up
//! - [`error`]: the one error type; every message, NOTICE and WARNING is worded there
//! - [`pg`]: the server's functions pgrx does not give as needed, and per-major differences

use error::SnowflakeError;
use pgrx::prelude::*;
use snowflake_core::clock::wall_now;

mod allocate;
mod error;
mod gucs;
mod pg;
mod registry;
mod renewer;
mod reservation;
mod shmem;
mod sql;
mod watermark;

::pgrx::pg_module_magic!(name, version);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // Shared memory and PGC_POSTMASTER settings can only be set up while the postmaster loads
    // shared_preload_libraries. Loaded any other way (CREATE EXTENSION, LOAD), the library
    // defines nothing: the decoders work, and snowflake_nextval() raises an error that says to
    // preload it.
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        gucs::init(wall_now()).unwrap_or_else(|e| e.report_fatal());
        reservation::redo::register();
        shmem::init(reservation::store::start_state);
        watermark::register();
        renewer::register();
    } else if unsafe { pg_sys::IsBinaryUpgrade } {
        // pg_upgrade's check LOADs every library the old cluster's functions use into the new
        // cluster: refusing here stops pg_upgrade before it builds a data directory that would
        // start without the old reservation and without the marker that says so.
        SnowflakeError::NotPreloadedForUpgrade.report();
    }
}
