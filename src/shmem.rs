//! The server's one generator, in shared memory behind one LWLock.
//!
//! Lock protocol:
//! - The lock, an LWLock in its own tranche named "pg_snowflake", guards [`Shared`]: the
//!   [`Generator`] (the last issued tick and sequence, the clocks it last read, the durable
//!   floor and reservation, the counters) and whether the data directory awaits its state file
//!   after pg_upgrade.
//! - [`next_run`] takes it in exclusive mode for one call of `Generator::allocate`;
//!   [`replay_reservation`] (WAL redo, in the startup process) in exclusive mode to raise the
//!   floor; [`snapshot`] in shared mode to copy the state out.
//! - While it is held, only the clock reads and integer arithmetic happen — plus, about once a
//!   second of issued time, the durable reservation (`durable::reserve`: one small file replaced
//!   with fsync, and one WAL record). No allocation, no logging, no SPI, no sleeping. Errors are
//!   returned as values and raised after the guard is dropped; waiting under overload happens
//!   after releasing the lock.
//! - The clocks are read inside the lock so that the readings the generator sees are in the
//!   order the calls are served; a reading taken before waiting for the lock would look like a
//!   clock regression.
//!
//! The shared memory only exists when the library is loaded through `shared_preload_libraries`;
//! [`ensure_available`] says whether it is, so that callers never touch an uninitialised lock.
//! The layout is read from `gucs::layout()` where it is needed, never passed in.

use crate::durable::{self, Start};
use crate::error::SnowflakeError;
use crate::gucs;
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgLwLock};
use snowflake_core::clock::Clocks;
use snowflake_core::generator::{Allocation, Generator, Run};
use snowflake_core::layout::{Layout, Parts};
use snowflake_core::state_file;
use std::sync::atomic::{AtomicBool, Ordering};

/// What lives in shared memory.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Shared {
    pub generator: Generator,
    /// pg_upgrade made the data directory and its old state file has not been copied in.
    pub awaiting_carry: bool,
}

// SAFETY: the name is the extension's own, so no other library's tranche can clash with it.
static SHARED: PgLwLock<Shared> = unsafe { PgLwLock::new(c"pg_snowflake") };

/// Set in the postmaster when the shared memory is requested; backends inherit it by fork.
static REQUESTED: AtomicBool = AtomicBool::new(false);

// SAFETY: Shared is plain data (integers, booleans and options of integers): no pointers,
// nothing process-local, valid when copied between processes.
unsafe impl PGRXSharedMemory for Shared {}

/// Requests the shared memory and the lock. Only valid from `_PG_init` during
/// `shared_preload_libraries` processing. When the shared memory is created (postmaster start,
/// and again after a crash), the generator resumes from the state file; if that cannot be read,
/// the server does not start.
pub fn init() {
    pg_shmem_init!(
        SHARED = match durable::load(&gucs::layout()) {
            Ok(Start::Fresh) => Shared {
                generator: Generator::new(),
                awaiting_carry: false,
            },
            Ok(Start::After(floor)) => Shared {
                generator: Generator::resume(floor),
                awaiting_carry: false,
            },
            Ok(Start::AwaitingCarry) => Shared {
                generator: Generator::new(),
                awaiting_carry: true,
            },
            Err(e) => e.report_fatal(),
        }
    );
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

/// The next ID from the server's generator.
pub fn next_id() -> Result<i64, SnowflakeError> {
    let node = node()?;
    let run = next_run(node, 1)?;
    Ok(gucs::layout().pack(Parts {
        time: run.time as u64,
        node,
        seq: run.seq,
    }))
}

/// This server's node id, checking first that there is a generator at all (without
/// preloading, the node id setting does not even exist).
pub fn node() -> Result<u32, SnowflakeError> {
    ensure_available()?;
    gucs::node_id()
}

/// The next IDs for `node`, up to `want` of them, from one acquisition of the lock. Under
/// sustained overload this waits, outside the lock and interruptibly, until the generator has
/// room again.
pub fn next_run(node: u32, want: u64) -> Result<Run, SnowflakeError> {
    ensure_available()?;
    ensure_not_in_recovery()?;
    let (layout, limits) = (gucs::layout(), gucs::limits());
    loop {
        let allocation = {
            let mut shared = SHARED.exclusive();
            if shared.awaiting_carry {
                return Err(SnowflakeError::StateFileNotCarried {
                    path: durable::STATE_FILE,
                });
            }
            shared
                .generator
                .allocate(&layout, node, Clocks::read(), &limits, want, |until| {
                    durable::reserve(&layout, until)
                })?
        };
        match allocation {
            Allocation::Run {
                run,
                clock_stepped_back_ms,
            } => {
                if let Some(ms) = clock_stepped_back_ms {
                    SnowflakeError::ClockSteppedBack { ms }.report_warning();
                }
                return Ok(run);
            }
            Allocation::Wait { ms } => {
                // SAFETY: sleeping outside any lock; interrupts are checked right after.
                unsafe { pg_sys::pg_usleep(ms.clamp(1, 10) * 1000) };
                pg_sys::check_for_interrupts!();
            }
        }
    }
}

/// Refuses while the server is in recovery (a standby): it cannot write the WAL record a
/// reservation needs, and its IDs would carry its primary's node id. Recovery only ever ends, so
/// once a backend has seen it over, it does not ask again (saving a guarded FFI call per ID).
fn ensure_not_in_recovery() -> Result<(), SnowflakeError> {
    static RECOVERY_OVER: AtomicBool = AtomicBool::new(false);
    if RECOVERY_OVER.load(Ordering::Relaxed) {
        return Ok(());
    }
    // SAFETY: a plain read of the server's recovery state.
    if unsafe { pg_sys::RecoveryInProgress() } {
        return Err(SnowflakeError::InRecovery);
    }
    RECOVERY_OVER.store(true, Ordering::Relaxed);
    Ok(())
}

/// WAL redo of a reservation made under `layout`: raise the floor, and keep this server's state
/// file up with it. A reservation of another layout than this server's stops the replay.
pub fn replay_reservation(layout: &Layout, until: i64) -> Result<(), SnowflakeError> {
    state_file::check_layout(layout, &gucs::layout())?;
    let mut shared = SHARED.exclusive();
    if shared.generator.observe_reservation(until) {
        durable::write_state_file(layout, until)?;
    }
    Ok(())
}

/// A copy of the shared state, for reporting.
pub fn snapshot() -> Result<Shared, SnowflakeError> {
    ensure_available()?;
    Ok(*SHARED.share())
}
