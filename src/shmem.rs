//! The server's one generator, in shared memory behind one LWLock, and the few things next to
//! it that processes use to wait for each other. Nothing here decides an ID or writes a
//! reservation: `ids.rs` runs the generator (the hot path), `renewal.rs` writes reservations.
//!
//! Lock protocol:
//! - The lock, an LWLock of its own tranche named "pg_snowflake", guards [`Shared`]: the
//!   [`Generator`] (the last issued tick and sequence, the clocks it last read, the durable
//!   reservation, the demand for the next one and the flag of the renewal in progress, the
//!   counters), the cause of the last failed renewal, the process holding the renewal's claim,
//!   the node ids this server used before its current one (written with every reservation), and
//!   whether the data directory awaits its state file after pg_upgrade. Every access goes
//!   through [`locked`].
//! - `ids::next_run` takes it in exclusive mode for one call of `Generator::allocate`;
//!   `renewal.rs` in exclusive mode to claim a renewal and again to report it;
//!   [`replay_reservation`] (WAL redo, in the startup process) in exclusive mode to raise the
//!   floor; [`snapshot`] in shared mode to copy the state out.
//! - While it is held, only one clock read (two after the wall clock stepped back) and integer
//!   arithmetic happen. No allocation, no logging, no SPI, no sleeping, no file or WAL write:
//!   the durable reservation is written with no lock held, and only counts once it has been
//!   reported. Errors are returned as values and raised after the lock is released; every wait
//!   (for the clock under overload, for a reservation) happens after releasing it.
//! - The clock is read inside the lock so that the readings the generator sees are in the order
//!   the calls are served; a reading taken before waiting for the lock would look like a clock
//!   regression.
//! - The lock is taken and released with `LWLockAcquire` / `LWLockRelease` called directly, not
//!   through pgrx's per-call guard (a thread check and a `sigsetjmp` around each FFI call, about
//!   a quarter of the instructions of an ID). That is sound because nothing between them can
//!   raise an ERROR: `LWLockAcquire` on a valid lock raises only when a backend already holds
//!   `MAX_SIMUL_LWLOCKS` (200) LWLocks, which no caller of a SQL function does, and
//!   `LWLockRelease` only for a lock not held; the code in between is the core's arithmetic,
//!   which returns errors as values. Were a Rust panic to happen there anyway, pgrx turns it
//!   into an ERROR, and Postgres' error recovery releases every LWLock the backend holds
//!   (`LWLockReleaseAll`), exactly as for C code.
//!
//! Next to the locked state, outside it, live two condition variables: `renewed`, broadcast
//! after every renewal (done or failed), on which callers whose next ID is not covered yet wait
//! — interruptibly: a cancel or `statement_timeout` ends the wait at once —, and `renewal_due`,
//! on which the renewer sleeps until a call raises the demand for a reservation; and an atomic,
//! `renewer_seen_at`, that the renewer sets on every turn of its loop (at least once a second).
//! A renewer counts as running while it has shown life within `RENEWER_SILENCE_MS`.
//!
//! The shared memory only exists when the library is loaded through `shared_preload_libraries`;
//! [`ensure_available`] says whether it is, so that callers never touch an uninitialised lock.
//! The layout is read from `gucs::layout()` where it is needed, never passed in.

use crate::durable::{self, Start};
use crate::error::SnowflakeError;
use crate::gucs;
use pgrx::prelude::*;
use pgrx::shmem::PgSharedMemoryInitialization;
use pgrx::{pg_shmem_init, PGRXSharedMemory};
use snowflake_core::clock::{Clock, SystemClock};
use snowflake_core::generator::Generator;
use snowflake_core::layout::Layout;
use snowflake_core::state_file::{self, History};
use std::cell::UnsafeCell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// The locked state.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Shared {
    pub generator: Generator,
    /// pg_upgrade made the data directory and its old state file has not been copied in.
    pub awaiting_carry: bool,
    /// The OS error number of the last failed renewal (0 when it had none), for the callers
    /// that waited for it.
    pub last_failure_errno: i32,
    /// The process that holds the claim of the renewal in progress (0: none), so that its
    /// claim is released if it exits without reporting it (`renewal::release_on_exit`).
    pub claimant_pid: i32,
    /// The node ids used here before this one, written with every reservation.
    pub history: History,
}

// SAFETY: Shared is plain data (integers, booleans and options of integers): no pointers,
// nothing process-local, valid when copied between processes.
unsafe impl PGRXSharedMemory for Shared {}

/// The shared-memory region: the lock, the state it guards, and the condition variables.
#[repr(C)]
struct Region {
    lock: *mut pg_sys::LWLock,
    state: UnsafeCell<Shared>,
    renewed: pg_sys::ConditionVariable,
    renewal_due: pg_sys::ConditionVariable,
    /// The renewer's last turn of its loop (monotonic ms), or `NEVER_SEEN`.
    renewer_seen_at: AtomicI64,
}

const NEVER_SEEN: i64 = i64::MIN;

/// A renewer silent for this long (its loop turns at least once a second when idle) is taken
/// to be gone: callers then write their reservations themselves.
const RENEWER_SILENCE_MS: i64 = 3_000;

/// Where this process finds the region: set in the postmaster when the shared memory is
/// created, inherited by every backend through fork.
struct SharedRegion {
    region: UnsafeCell<*mut Region>,
}

// SAFETY: the pointer is written once per postmaster life cycle, in the postmaster, before any
// backend exists; afterwards it is only read.
unsafe impl Sync for SharedRegion {}

const NAME: &CStr = c"pg_snowflake";

static REGION: SharedRegion = SharedRegion {
    region: UnsafeCell::new(std::ptr::null_mut()),
};

/// Set in the postmaster when the shared memory is requested; backends inherit it by fork.
static REQUESTED: AtomicBool = AtomicBool::new(false);

impl PgSharedMemoryInitialization for SharedRegion {
    type Value = Shared;

    unsafe fn on_shmem_request(&'static self) {
        unsafe {
            pg_sys::RequestAddinShmemSpace(size_of::<Region>());
            // The name is the extension's own, so no other library's tranche can clash with it.
            pg_sys::RequestNamedLWLockTranche(NAME.as_ptr(), 1);
        }
    }

    unsafe fn on_shmem_startup(&'static self, value: Shared) {
        unsafe {
            // AddinShmemInitLock, as pgrx finds it: the 22nd of the main LWLocks.
            let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
            pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
            let mut found = false;
            let region = pg_sys::ShmemInitStruct(NAME.as_ptr(), size_of::<Region>(), &mut found)
                .cast::<Region>();
            if !found {
                region.write(Region {
                    lock: &raw mut (*pg_sys::GetNamedLWLockTranche(NAME.as_ptr())).lock,
                    state: UnsafeCell::new(value),
                    renewed: std::mem::zeroed(),
                    renewal_due: std::mem::zeroed(),
                    renewer_seen_at: AtomicI64::new(NEVER_SEEN),
                });
                pg_sys::ConditionVariableInit(&raw mut (*region).renewed);
                pg_sys::ConditionVariableInit(&raw mut (*region).renewal_due);
            }
            *self.region.get() = region;
            pg_sys::LWLockRelease(init_lock);
        }
    }
}

/// `LWLockAcquire` and `LWLockRelease` themselves, without pgrx's guard (see the lock protocol
/// above for why no ERROR can cross them).
mod unguarded {
    use pgrx::pg_sys::{LWLock, LWLockMode};
    unsafe extern "C-unwind" {
        pub fn LWLockAcquire(lock: *mut LWLock, mode: LWLockMode::Type) -> bool;
        pub fn LWLockRelease(lock: *mut LWLock);
    }
}

fn region() -> &'static Region {
    // SAFETY: only called after ensure_available(), i.e. in a process forked from a postmaster
    // that created the region; it lives as long as the process.
    unsafe { &**REGION.region.get() }
}

/// Runs `f` on the state under the lock in `mode` (see the lock protocol above).
#[inline]
pub fn locked<R>(mode: pg_sys::LWLockMode::Type, f: impl FnOnce(&mut Shared) -> R) -> R {
    let region = region();
    // SAFETY: a valid LWLock of our tranche; the state is only touched while it is held, and
    // shared mode only ever reads (snapshot).
    unsafe {
        unguarded::LWLockAcquire(region.lock, mode);
        let result = f(&mut *region.state.get());
        unguarded::LWLockRelease(region.lock);
        result
    }
}

/// Requests the shared memory and the lock. Only valid from `_PG_init` during
/// `shared_preload_libraries` processing. When the shared memory is created (postmaster start,
/// and again after a crash), the generator resumes from the state file; if that cannot be read,
/// the server does not start.
pub fn init() {
    pg_shmem_init!(
        REGION = {
            let node = gucs::node_id().ok();
            let (generator, awaiting_carry, history) = match durable::load(gucs::layout(), node) {
                Ok(Start::Fresh) => (Generator::new(), false, History::EMPTY),
                Ok(Start::After { floor, history }) => (Generator::resume(floor), false, history),
                Ok(Start::AwaitingCarry) => (Generator::new(), true, History::EMPTY),
                Err(e) => e.report_fatal(),
            };
            Shared {
                generator,
                awaiting_carry,
                last_failure_errno: 0,
                claimant_pid: 0,
                history,
            }
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

/// A copy of the shared state, for reporting.
pub fn snapshot() -> Result<Shared, SnowflakeError> {
    ensure_available()?;
    Ok(locked(pg_sys::LWLockMode::LW_SHARED, |shared| *shared))
}

/// WAL redo of a reservation made under `layout` and `node` (`None`: a record of 0.3.0): raise
/// the floor, and keep this server's state file up with it (written after releasing the lock;
/// only the startup process replays, one record after another). A reservation of another node
/// id than this server's goes into its history as well. A reservation of another layout than
/// this server's stops the replay.
pub fn replay_reservation(
    layout: &Layout,
    until: i64,
    node: Option<u32>,
) -> Result<(), SnowflakeError> {
    state_file::check_layout(layout, gucs::layout())?;
    let own = gucs::node_id().ok();
    let raised = locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
        let raised = shared.generator.observe_reservation(until);
        if node.is_none() || node != own {
            shared.history.add(node, until);
        }
        raised.then_some(shared.history)
    });
    if let Some(history) = raised {
        durable::write_state_file(layout, until, own, &history)?;
    }
    Ok(())
}

/// Tells the renewer that a renewal is due.
pub fn wake_the_renewer() {
    // SAFETY: a condition variable in our shared memory.
    unsafe { pg_sys::ConditionVariableSignal(&raw const region().renewal_due as *mut _) };
}

/// Sleeps until a call signals that a renewal is due, or `timeout_ms` pass; raises interrupts
/// (the renewer's SIGTERM) as they come. The first call in a loop only registers the process on
/// the condition variable (see `ConditionVariableTimedSleep`), so the caller checks for a due
/// renewal between calls without missing a signal.
pub fn sleep_until_renewal_due(timeout_ms: i64) {
    sleep_on(&region().renewal_due, timeout_ms);
}

/// Ends a sleep begun by [`sleep_until_renewal_due`], before a renewal is written.
pub fn stop_sleeping() {
    stop_waiting(true);
}

/// Wakes every caller waiting for a renewal (after one was reported, done or failed).
pub fn broadcast_renewed() {
    // SAFETY: a condition variable in our shared memory.
    unsafe { pg_sys::ConditionVariableBroadcast(&raw const region().renewed as *mut _) };
}

/// Sleeps until a renewal is reported, or `timeout_ms` pass; raises a cancel or statement
/// timeout as an ERROR. The first call in a loop only registers the process on the condition
/// variable, so a broadcast between it and the caller's next check is not missed. No lock may be
/// held.
pub fn sleep_until_renewed(timeout_ms: i64) {
    sleep_on(&region().renewed, timeout_ms);
}

/// One timed sleep on one of our condition variables (the callers say what for).
fn sleep_on(cv: &pg_sys::ConditionVariable, timeout_ms: i64) {
    // SAFETY: a condition variable in our shared memory; the callers hold no lock.
    unsafe {
        pg_sys::ConditionVariableTimedSleep(
            std::ptr::from_ref(cv).cast_mut(),
            timeout_ms as std::ffi::c_long,
            pg_sys::PG_WAIT_EXTENSION,
        );
    }
}

/// Sleeps `ms` milliseconds on this process's latch (a signal that sets it — SIGTERM, a cancel —
/// ends the sleep early); interrupts are the caller's to raise. No lock may be held.
pub fn sleep_on_latch(ms: i64) {
    // SAFETY: waiting on this process's own latch, with no lock held.
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
            ms as std::ffi::c_long,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
}

/// Leaves the wait list of the condition variable this process last slept on, if `waited`.
#[inline(always)]
pub fn stop_waiting(waited: bool) {
    if waited {
        // SAFETY: ends a sleep prepared by ConditionVariableTimedSleep in this process.
        unsafe {
            pg_sys::ConditionVariableCancelSleep();
        }
    }
}

/// The renewer's sign of life, once per turn of its loop.
pub fn renewer_is_alive() {
    region()
        .renewer_seen_at
        .store(SystemClock.monotonic(), Ordering::Relaxed);
}

/// Whether a renewer process is running: it has shown life within `RENEWER_SILENCE_MS`. Never
/// in single-user mode (`postgres --single`), which runs no background workers.
pub fn renewer_running() -> bool {
    // SAFETY: a plain read of a flag set at process start.
    if !unsafe { pg_sys::IsUnderPostmaster } {
        return false;
    }
    let seen = region().renewer_seen_at.load(Ordering::Relaxed);
    seen != NEVER_SEEN && SystemClock.monotonic() - seen < RENEWER_SILENCE_MS
}
