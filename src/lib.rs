//! pg_snowflake: Snowflake IDs for PostgreSQL.
//!
//! The pure core — the crate `snowflake_core` in `core/`: layout, calendar, generator (clock
//! passed in), base 32, the bytes of the state file and WAL record — cannot call Postgres: it
//! does not depend on pgrx. This crate is the thin layer around it:
//!
//! - [`gucs`]: every setting, and the layout built from them at start-up
//! - [`shmem`]: the server's one generator in shared memory, behind its lock, and the condition
//!   variables processes wait on
//! - [`ids`]: the hot path: the next IDs from that generator, and the waits that come with them
//! - [`renewal`]: claiming, writing and reporting a durable reservation, by the renewer or, with
//!   none running, by the backend that needs it; [`renewer`]: the background worker that renews
//!   it ahead of need
//! - [`durable`]: writing the reservation that survives restarts and failovers (state file and
//!   WAL record) and reading it at start-up; [`wal_redo`]: replaying the WAL record
//! - [`error`]: the one error type; every message, NOTICE and WARNING is worded there
//! - the SQL functions: [`api`] (making IDs, stats), [`decode`] (IDs → parts, JSON, base 32),
//!   [`bounds`] (time → ID bounds), [`adopt`] (`snowflake_adopt`); [`timestamps`] converts
//!   between the core's Unix milliseconds and timestamptz

use error::SnowflakeError;
use pgrx::prelude::*;
use snowflake_core::clock::wall_now;

pub mod adopt;
pub mod api;
pub mod bounds;
pub mod decode;
pub mod durable;
pub mod error;
pub mod gucs;
pub mod ids;
pub mod renewal;
pub mod renewer;
pub mod shmem;
pub mod timestamps;
pub mod wal_redo;

#[cfg(any(test, feature = "pg_test"))]
mod in_server_tests;

::pgrx::pg_module_magic!(name, version);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // Shared memory and PGC_POSTMASTER settings can only be set up while the postmaster loads
    // shared_preload_libraries. Loaded any other way (CREATE EXTENSION, LOAD), the library
    // defines nothing: the decoders work, and snowflake_nextval() raises an error that says to
    // preload it.
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        gucs::init(wall_now()).unwrap_or_else(|e| e.report_fatal());
        wal_redo::register();
        shmem::init();
        renewer::register();
    } else if unsafe { pg_sys::IsBinaryUpgrade } {
        // pg_upgrade's check LOADs every library the old cluster's functions use into the new
        // cluster: refusing here stops pg_upgrade before it builds a data directory that would
        // start without the old reservation and without the marker that says so.
        SnowflakeError::NotPreloadedForUpgrade.report();
    }
}

/// Required by `cargo pgrx test`: the #[pg_test]s run with the library really preloaded.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![
            "shared_preload_libraries = 'pg_snowflake'",
            "pg_snowflake.node_id = 1",
        ]
    }
}
