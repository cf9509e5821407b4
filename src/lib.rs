//! pg_snowflake: Snowflake IDs for PostgreSQL.
//!
//! The pure core — [`layout`] (the bits of an ID) and [`generator`] (the next-id state machine,
//! clock passed in) — knows nothing of Postgres. Around it: [`gucs`] (every setting), [`shmem`]
//! (the server's one generator behind its lock), [`durable`] (the reservation that survives
//! restarts and failovers: state file and WAL), [`error`] (the one error type and its SQLSTATEs)
//! and [`api`] (the SQL functions).

use pgrx::prelude::*;

pub mod adopt;
pub mod api;
pub mod base32;
pub mod bounds;
pub mod decode;
pub mod durable;
pub mod error;
pub mod generator;
pub mod gucs;
pub mod layout;
pub mod shmem;
pub mod timestamps;

::pgrx::pg_module_magic!(name, version);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // Shared memory and PGC_POSTMASTER settings can only be set up while the postmaster loads
    // shared_preload_libraries. Loaded any other way (CREATE EXTENSION, LOAD), the library
    // defines nothing: the decoders work, and snowflake_nextval() raises an error that says to
    // preload it.
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        gucs::init(shmem::read_clocks().wall).unwrap_or_else(|e| e.report_fatal());
        durable::register_wal_resource_manager();
        shmem::init();
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
