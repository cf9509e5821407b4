//! The server's one generator, in shared memory behind one LWLock.
//!
//! Lock protocol:
//! - The lock, an LWLock in its own tranche named "pg_snowflake", guards the [`Generator`]:
//!   the last issued millisecond and sequence, the clocks it last read, the durable floor and
//!   reservation, and the counters.
//! - [`next_run`] takes it in exclusive mode for one call of `Generator::allocate`; [`replay_reservation`]
//!   (WAL redo, in the startup process) in exclusive mode to raise the floor; [`snapshot`] in
//!   shared mode to copy the state out.
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

use crate::error::SnowflakeError;
use crate::generator::{Allocation, Clocks, Generator, Limits, Run};
use crate::layout::{Layout, Parts};
use crate::{durable, gucs};
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgLwLock};
use std::sync::atomic::{AtomicBool, Ordering};

// SAFETY: the name is the extension's own, so no other library's tranche can clash with it.
static GENERATOR: PgLwLock<Generator> = unsafe { PgLwLock::new(c"pg_snowflake") };

/// Set in the postmaster when the shared memory is requested; backends inherit it by fork.
static REQUESTED: AtomicBool = AtomicBool::new(false);

// SAFETY: Generator is plain data (integers and options of integers): no pointers, nothing
// process-local, valid when copied between processes.
unsafe impl PGRXSharedMemory for Generator {}

/// Requests the shared memory and the lock. Only valid from `_PG_init` during
/// `shared_preload_libraries` processing. When the shared memory is created (postmaster start,
/// and again after a crash), the generator resumes from the state file; if that cannot be read,
/// the server does not start.
pub fn init() {
    pg_shmem_init!(
        GENERATOR = match durable::load(&gucs::layout()) {
            Ok(Some(floor)) => Generator::resume(floor),
            Ok(None) => Generator::new(),
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

/// The next ID for `node` from the server's generator.
pub fn next_id(layout: &Layout, node: u32, limits: &Limits) -> Result<i64, SnowflakeError> {
    let run = next_run(layout, node, limits, 1)?;
    Ok(layout.pack(Parts {
        time: run.time as u64,
        node,
        seq: run.seq,
    }))
}

/// The next IDs for `node`, up to `want` of them, from one acquisition of the lock. Under
/// sustained overload this waits, outside the lock and interruptibly, until the generator has
/// room again.
pub fn next_run(
    layout: &Layout,
    node: u32,
    limits: &Limits,
    want: u64,
) -> Result<Run, SnowflakeError> {
    ensure_available()?;
    ensure_not_in_recovery()?;
    loop {
        let allocation =
            GENERATOR
                .exclusive()
                .allocate(layout, node, read_clocks(), limits, want, |until| {
                    durable::reserve(layout, until)
                })?;
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
    durable::check_layout(layout, &gucs::layout())?;
    let mut generator = GENERATOR.exclusive();
    if generator.observe_reservation(until) {
        durable::write_state_file(layout, until)?;
    }
    Ok(())
}

/// A copy of the generator, for reporting.
pub fn snapshot() -> Result<Generator, SnowflakeError> {
    ensure_available()?;
    Ok(*GENERATOR.share())
}

/// The wall clock (Unix ms) and the monotonic clock (ms), as the generator wants them.
pub fn read_clocks() -> Clocks {
    let read = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes into the timespec; both clocks always exist on Linux.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
    };
    Clocks {
        wall: read(libc::CLOCK_REALTIME),
        monotonic: read(libc::CLOCK_MONOTONIC),
    }
}
