//! The server's one generator, in shared memory behind one LWLock.
//!
//! Lock protocol:
//! - The lock, an LWLock of its own tranche named "pg_snowflake", guards [`Shared`]: the
//!   [`Generator`] (the last issued tick and sequence, the clocks it last read, the durable
//!   reservation, the demand for the next one and the flag of the renewal in progress, the
//!   counters), the cause of the last failed renewal, and whether the data directory awaits its
//!   state file after pg_upgrade.
//! - [`next_run`] takes it in exclusive mode for one call of `Generator::allocate`; the renewer
//!   (`renewer.rs`) in exclusive mode to claim a renewal and again to report it;
//!   [`replay_reservation`] (WAL redo, in the startup process) in exclusive mode to raise the
//!   floor; [`snapshot`] in shared mode to copy the state out.
//! - While it is held, only one clock read (two after the wall clock stepped back) and integer
//!   arithmetic happen. No allocation, no logging, no SPI, no sleeping, no file or WAL write:
//!   the durable reservation is written by the renewer with no lock held, and only counts once
//!   it has reported it. Errors are returned as values and raised after the lock is released;
//!   every wait (for the clock under overload, for a reservation) happens after releasing it.
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
//!
//! Without a renewer — single-user mode; `max_worker_processes` too small for it to be
//! registered; the renewer stopped or restarting — a call that needs a renewal claims it and
//! writes it itself, outside the lock, as the renewer would ([`renew_here`]). A renewer counts
//! as running while it has shown life within `RENEWER_SILENCE_MS`; the claim keeps writers to
//! one whichever process writes, so a renewer that comes back is never doubled.
//!
//! The shared memory only exists when the library is loaded through `shared_preload_libraries`;
//! [`ensure_available`] says whether it is, so that callers never touch an uninitialised lock.
//! The layout is read from `gucs::layout()` where it is needed, never passed in.

use crate::durable::{self, Reserved, Start};
use crate::error::SnowflakeError;
use crate::gucs;
use pgrx::prelude::*;
use pgrx::shmem::PgSharedMemoryInitialization;
use pgrx::{pg_shmem_init, PGRXSharedMemory};
use snowflake_core::clock::{Clock, SystemClock};
use snowflake_core::error::Error as CoreError;
use snowflake_core::generator::{Allocation, Generator, Limits, Run};
use snowflake_core::layout::{Layout, Parts};
use snowflake_core::state_file;
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

/// Runs `f` on the state under the lock in `mode`.
#[inline]
fn locked<R>(mode: pg_sys::LWLockMode::Type, f: impl FnOnce(&mut Shared) -> R) -> R {
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
            let (generator, awaiting_carry) = match durable::load(gucs::layout()) {
                Ok(Start::Fresh) => (Generator::new(), false),
                Ok(Start::After(floor)) => (Generator::resume(floor), false),
                Ok(Start::AwaitingCarry) => (Generator::new(), true),
                Err(e) => e.report_fatal(),
            };
            Shared {
                generator,
                awaiting_carry,
                last_failure_errno: 0,
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

/// The next IDs for `node`, up to `want` of them, from one acquisition of the lock. Waits,
/// outside the lock and interruptibly, under sustained overload (for the clock) and when the
/// issued time has caught up with the durable reservation (for the renewer).
pub fn next_run(node: u32, want: u64) -> Result<Run, SnowflakeError> {
    ensure_available()?;
    ensure_not_in_recovery()?;
    let (layout, limits) = (gucs::layout(), gucs::limits());
    let allocation = allocate(layout, &limits, node, want);
    // The common case, kept small: IDs under the reservation, nothing to wake, nothing to warn.
    if let Some(Ok(Allocation::Run {
        run,
        clock_stepped_back_ms: None,
        wake_renewer: false,
    })) = allocation
    {
        return Ok(run);
    }
    next_run_otherwise(layout, &limits, node, want, allocation)
}

/// One call of the generator under the lock; `None` while the data directory awaits its state
/// file after pg_upgrade.
#[inline(always)]
fn allocate(
    layout: &Layout,
    limits: &Limits,
    node: u32,
    want: u64,
) -> Option<Result<Allocation, CoreError>> {
    locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
        (!shared.awaiting_carry).then(|| {
            shared
                .generator
                .allocate(layout, node, &mut SystemClock, limits, want)
        })
    })
}

/// [`next_run`] past its first allocation: wakes or stands in for the renewer, warns, waits and
/// allocates again, as the allocation says.
#[inline(never)]
fn next_run_otherwise(
    layout: &Layout,
    limits: &Limits,
    node: u32,
    want: u64,
    first: Option<Result<Allocation, CoreError>>,
) -> Result<Run, SnowflakeError> {
    // The failure count when this call first waited for a reservation.
    let mut failures_seen: Option<u64> = None;
    let mut waited_on_renewal = false;
    let mut next = Some(first);
    loop {
        let allocation = match next.take() {
            Some(first) => first,
            None => allocate(layout, limits, node, want),
        };
        let Some(allocation) = allocation else {
            return Err(SnowflakeError::StateFileNotCarried {
                path: durable::STATE_FILE,
            });
        };
        match allocation? {
            Allocation::Run {
                run,
                clock_stepped_back_ms,
                wake_renewer,
            } => {
                stop_waiting_on_renewal(waited_on_renewal);
                if wake_renewer {
                    if renewer_running() {
                        wake_the_renewer();
                    } else {
                        // This call's ID is covered already; it writes the next reservation
                        // before returning it.
                        renew_here();
                    }
                }
                if let Some(ms) = clock_stepped_back_ms {
                    SnowflakeError::ClockSteppedBack { ms }.report_warning();
                }
                return Ok(run);
            }
            Allocation::Wait { ms } => {
                stop_waiting_on_renewal(waited_on_renewal);
                waited_on_renewal = false;
                sleep_ms(ms.clamp(1, 10));
            }
            Allocation::AwaitReservation {
                wake_renewer,
                failures,
            } => {
                if failures_seen.is_some_and(|seen| failures > seen) {
                    // The renewal this call waited for failed: its error, as the renewer saw it.
                    stop_waiting_on_renewal(waited_on_renewal);
                    let errno = locked(pg_sys::LWLockMode::LW_SHARED, |shared| {
                        shared.last_failure_errno
                    });
                    return Err(durable::write_error_from_errno(errno));
                }
                failures_seen.get_or_insert(failures);
                if renewer_running() {
                    if wake_renewer {
                        wake_the_renewer();
                    }
                } else if renew_here() {
                    continue;
                }
                // The first call only registers this process on the condition variable, so a
                // broadcast between here and the next check is not missed; then each call
                // sleeps until a renewal is reported (or a second passes), and raises a cancel
                // or statement timeout as an ERROR, with no lock held.
                waited_on_renewal = true;
                // SAFETY: a condition variable in our shared memory; no lock is held.
                unsafe {
                    pg_sys::ConditionVariableTimedSleep(
                        &raw const region().renewed as *mut _,
                        1000,
                        pg_sys::PG_WAIT_EXTENSION,
                    );
                }
            }
        }
    }
}

/// Leaves the renewal condition variable's wait list if this call joined it.
#[inline(always)]
fn stop_waiting_on_renewal(waited: bool) {
    if waited {
        // SAFETY: ends a sleep prepared by ConditionVariableTimedSleep in this process.
        unsafe {
            pg_sys::ConditionVariableCancelSleep();
        }
    }
}

/// Waits `ms` milliseconds on the process latch, then raises a pending cancel as an ERROR.
fn sleep_ms(ms: i64) {
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
    pg_sys::check_for_interrupts!();
}

/// Whether a renewer process is running: it has shown life within `RENEWER_SILENCE_MS`. Never
/// in single-user mode (`postgres --single`), which runs no background workers.
fn renewer_running() -> bool {
    // SAFETY: a plain read of a flag set at process start.
    if !unsafe { pg_sys::IsUnderPostmaster } {
        return false;
    }
    let seen = region().renewer_seen_at.load(Ordering::Relaxed);
    seen != NEVER_SEEN && SystemClock.monotonic() - seen < RENEWER_SILENCE_MS
}

/// SIGINT (query cancel; statement_timeout sends it too) blocked while this lives: it stays
/// pending and is delivered when the mask is restored. SIGTERM still ends a wait for the
/// standbys, and a renewal cut short by it does not count.
struct CancelsHeldBack {
    old: libc::sigset_t,
}

impl CancelsHeldBack {
    fn new() -> Self {
        // SAFETY: sigset_t is plain data, initialised by sigemptyset/sigaddset before use;
        // sigprocmask on this process's only thread.
        unsafe {
            let mut sigint: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut sigint);
            libc::sigaddset(&mut sigint, libc::SIGINT);
            libc::sigprocmask(libc::SIG_BLOCK, &sigint, &mut old);
            CancelsHeldBack { old }
        }
    }
}

impl Drop for CancelsHeldBack {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by new().
        unsafe { libc::sigprocmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}

/// The renewer's sign of life, once per turn of its loop.
pub fn renewer_is_alive() {
    region()
        .renewer_seen_at
        .store(SystemClock.monotonic(), Ordering::Relaxed);
}

/// With no renewer running: claims the due renewal, if any and none is being written, and
/// writes it from this process, with no lock held; returns whether it did. It waits for the
/// synchronous standbys as the renewer does: the session's `synchronous_commit` is set to `on`
/// for the write (restored right after, or by the transaction's abort), and a cancel or
/// statement timeout is held back until the write is over, because `SyncRepWaitForLSN` would
/// give up its wait on one and the reservation would count unconfirmed. A cancel that came
/// before is taken instead of the write (the caller raises it while waiting).
fn renew_here() -> bool {
    let _held = CancelsHeldBack::new();
    // SAFETY: a plain read of a flag set by the SIGINT handler, which cannot run now.
    if unsafe { pg_sys::QueryCancelPending } != 0 {
        return false;
    }
    let Some(until) = claim_renewal() else {
        return false;
    };
    static LOGGED: AtomicBool = AtomicBool::new(false);
    // SAFETY: a plain read of a flag set at process start.
    if unsafe { pg_sys::IsUnderPostmaster } && !LOGGED.swap(true, Ordering::Relaxed) {
        SnowflakeError::RenewerNotRunning.report_log();
    }
    // SAFETY: a GUC nest level opened and closed around one setting, inside the caller's
    // transaction (a SQL function's); an ERROR in between aborts the transaction, whose
    // clean-up restores the setting.
    unsafe {
        let level = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            c"synchronous_commit".as_ptr(),
            c"on".as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        renew(until);
        pg_sys::AtEOXact_GUC(true, level);
    }
    true
}

/// Tells the renewer that a renewal is due.
fn wake_the_renewer() {
    // SAFETY: a condition variable in our shared memory.
    unsafe { pg_sys::ConditionVariableSignal(&raw const region().renewal_due as *mut _) };
}

/// Claims the due renewal for this process, if one is due and none is running.
pub fn claim_renewal() -> Option<i64> {
    locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
        shared.generator.claim_renewal()
    })
}

/// How a claimed renewal ended.
pub enum Renewal {
    /// Durable (and confirmed by the synchronous standbys): IDs below `until` may be issued;
    /// the write took `took_ms` (slow writes lengthen the next reservations).
    Done { until: i64, took_ms: i64 },
    /// Not written: the callers waiting for it fail with this OS error (0: none known).
    Failed { errno: i32 },
    /// The renewing process is being terminated before it knew: the claim is released and the
    /// demand kept for the next renewer.
    Abandoned,
}

/// Reports a claimed renewal and wakes every caller waiting for one.
pub fn report_renewal(renewal: Renewal) {
    locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| match renewal {
        Renewal::Done { until, took_ms } => shared.generator.renewal_done(until, took_ms),
        Renewal::Failed { errno } => {
            shared.last_failure_errno = errno;
            shared.generator.renewal_failed();
        }
        Renewal::Abandoned => shared.generator.renewal_abandoned(),
    });
    // SAFETY: a condition variable in our shared memory.
    unsafe { pg_sys::ConditionVariableBroadcast(&raw const region().renewed as *mut _) };
}

/// Releases a claim left by a renewer that exited without reporting it (the new renewer calls
/// this when it starts; only one renewer runs at a time).
pub fn release_abandoned_claim() {
    locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
        shared.generator.renewal_abandoned()
    });
}

/// Sleeps until a call signals that a renewal is due, or `timeout_ms` pass; raises interrupts
/// (the renewer's SIGTERM) as they come. The first call in a loop only registers the process on
/// the condition variable (see `ConditionVariableTimedSleep`), so the caller checks for a due
/// renewal between calls without missing a signal.
pub fn sleep_until_renewal_due(timeout_ms: i64) {
    // SAFETY: a condition variable in our shared memory; no lock is held.
    unsafe {
        pg_sys::ConditionVariableTimedSleep(
            &raw const region().renewal_due as *mut _,
            timeout_ms as std::ffi::c_long,
            pg_sys::PG_WAIT_EXTENSION,
        );
    }
}

/// Ends a sleep begun by [`sleep_until_renewal_due`], before a renewal is written.
pub fn stop_sleeping() {
    stop_waiting_on_renewal(true);
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
/// file up with it (written after releasing the lock; only the startup process replays, one
/// record after another). A reservation of another layout than this server's stops the replay.
pub fn replay_reservation(layout: &Layout, until: i64) -> Result<(), SnowflakeError> {
    state_file::check_layout(layout, gucs::layout())?;
    let raised = locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
        shared.generator.observe_reservation(until)
    });
    if raised {
        durable::write_state_file(layout, until)?;
    }
    Ok(())
}

/// A copy of the shared state, for reporting.
pub fn snapshot() -> Result<Shared, SnowflakeError> {
    ensure_available()?;
    Ok(locked(pg_sys::LWLockMode::LW_SHARED, |shared| *shared))
}

/// Writes the claimed reservation `until` and reports how it went. If an ERROR (or a panic)
/// interrupts it, the claim is reported abandoned on the way out, so the next renewer takes the
/// demand up.
pub fn renew(until: i64) {
    struct Claim;
    impl Drop for Claim {
        fn drop(&mut self) {
            report_renewal(Renewal::Abandoned);
        }
    }
    let claim = Claim;
    let started = SystemClock.monotonic();
    let renewal = match durable::reserve(gucs::layout(), until) {
        Ok(Reserved::Confirmed) => Renewal::Done {
            until,
            took_ms: SystemClock.monotonic() - started,
        },
        Ok(Reserved::Interrupted) => Renewal::Abandoned,
        Err(e) => {
            let errno = e.raw_os_error().unwrap_or(0);
            // SAFETY: a plain read of a variable set at process start. (MyBackendType, not
            // IsBackgroundWorker: PostgreSQL 17 removed that flag.)
            if unsafe { pg_sys::MyBackendType == pg_sys::BackendType::B_BG_WORKER } {
                // The callers that waited get the error; the server log gets it from here.
                let error: SnowflakeError = durable::write_error_from_errno(errno);
                error.report_warning();
            }
            Renewal::Failed { errno }
        }
    };
    std::mem::forget(claim);
    report_renewal(renewal);
}
