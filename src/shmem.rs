//! The server's one generator, in shared memory behind one LWLock.
//!
//! Lock protocol:
//! - The lock, an LWLock in its own tranche named "pg_snowflake", guards the [`Generator`]:
//!   the last issued millisecond and sequence, and the counters.
//! - [`next_id`] takes it in exclusive mode for one call to `Generator::next`; nothing else takes
//!   it yet.
//! - While it is held, only the wall-clock read and integer arithmetic happen: no allocation, no
//!   logging, no SPI, no waiting, no `ereport`. Errors are returned as values and raised after
//!   the guard is dropped.
//! - The clock is read inside the lock so that the readings the generator sees are in the order
//!   the calls are served; a reading taken before waiting for the lock would look like a clock
//!   regression.
//!
//! The shared memory only exists when the library is loaded through `shared_preload_libraries`;
//! [`ensure_available`] says whether it is, so that callers never touch an uninitialised lock.

use crate::error::SnowflakeError;
use crate::generator::Generator;
use crate::layout::Layout;
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgLwLock};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

// SAFETY: the name is the extension's own, so no other library's tranche can clash with it.
static GENERATOR: PgLwLock<Generator> = unsafe { PgLwLock::new(c"pg_snowflake") };

/// Set in the postmaster when the shared memory is requested; backends inherit it by fork.
static REQUESTED: AtomicBool = AtomicBool::new(false);

// SAFETY: Generator is plain data (integers and options of integers): no pointers, nothing
// process-local, valid when copied between processes.
unsafe impl PGRXSharedMemory for Generator {}

/// Requests the shared memory and the lock. Only valid from `_PG_init` during
/// `shared_preload_libraries` processing.
pub fn init() {
    pg_shmem_init!(GENERATOR = Generator::new());
    REQUESTED.store(true, Ordering::Relaxed);
}

/// Whether the shared generator exists, i.e. the library was preloaded.
pub fn ensure_available() -> Result<(), SnowflakeError> {
    if REQUESTED.load(Ordering::Relaxed) {
        Ok(())
    } else {
        Err(SnowflakeError::NotPreloaded)
    }
}

/// The next ID for `node` from the server's generator.
pub fn next_id(layout: &Layout, node: u32) -> Result<i64, SnowflakeError> {
    ensure_available()?;
    let mut generator = GENERATOR.exclusive();
    generator.next(layout, node, wall_clock_unix_ms())
}

/// The wall clock in Unix milliseconds; negative before 1970.
fn wall_clock_unix_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(since) => since.as_millis() as i64,
        Err(before) => -(before.duration().as_millis() as i64),
    }
}
