//! The server's one issuing state (the core's `Issuer`: its generator, node and registry status)
//! in shared memory, its lock, and the condition variables processes wait on. No I/O here: what
//! the region starts with comes from the reservation's store (`reservation::store::start_state`,
//! through the callback [`init`] takes), and everything that writes a reservation lives in
//! `reservation/`.
//!
//! Lock rules (one LWLock, tranche "pg_snowflake", guards the `Issuer`):
//! - every access goes through [`Handle::exclusive`] or [`Handle::shared`]: exclusive for every
//!   `Issuer` method that takes `&mut self`, shared to read it through `&self` (a copy out:
//!   [`Handle::snapshot`]). The types hold every caller to it: the shared lock lends only
//!   `&Issuer`;
//! - while it is held: one clock read (two after a step) and integer arithmetic. No allocation,
//!   logging, SPI, sleep, file or WAL write; errors are values, raised after the release;
//! - the clock is read inside the lock, so readings reach the generator in the order the calls
//!   are served;
//! - it is taken with `LWLockAcquire`/`LWLockRelease` unguarded (see `Handle::locked`).
//!
//! The watermark's part (`watermark.rs` uses it, the core's `watermark` decides with it), in a
//! second block of its own, sized at start-up:
//! - one slot per backend (indexed by its proc number, `MaxBackends` of them): the lowest ID
//!   drawn in the backend's current top-level transaction, or `watermark::NONE`. Written only by
//!   its backend: set inside the generator's lock, in the critical section that draws the ID and
//!   only when empty ([`Slot::mark_with`]), so that a watermark call, which draws under the same
//!   lock, finds every lower ID's slot written; emptied without the lock when the transaction
//!   ends ([`Slot::clear`]). Atomics: read by watermark calls without the lock;
//! - the prepared transactions' table (`max_prepared_transactions` + `MaxBackends` entries:
//!   every pending prepared transaction and one being prepared per backend), under the second
//!   lock of the tranche, which is never taken with the generator's held; with it, whether the
//!   transactions prepared before this start have been listed.
//!
//! The backfill cursor (`snowflake_nextval_at`, the core's `backfill::Cursor`), under the third
//! lock of the tranche, which is never taken with another of ours held: [`Handle::backfill`].
//! Unlike the generator's, this lock is held across the backfill's rare durable write (its
//! ceiling's file and WAL record, at a run's start and once per `backfill::BLOCK` ties at one
//! instant), so that no ID above a ceiling is made before the ceiling is on disk; callers wait
//! for it uninterruptibly, as for any LWLock. It starts empty at each creation of the region: a
//! restart, after a crash or not, begins a new run above the recorded ceiling.
//!
//! The region exists only when the library is preloaded: [`get`] says so once and hands out a
//! [`Handle`], the only way in.

use crate::error::SnowflakeError;
use crate::pg::{unguarded, ADDIN_SHMEM_INIT_LOCK};
use pgrx::prelude::*;
use pgrx::shmem::PgSharedMemoryInitialization;
use pgrx::{pg_shmem_init, PGRXSharedMemory};
use snowflake_core::backfill::Cursor;
use snowflake_core::clock::{Clock, SystemClock};
use snowflake_core::issuer::Issuer;
use snowflake_core::watermark::{Prepared, NONE};
use std::cell::UnsafeCell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicI64, AtomicPtr, Ordering};
use std::sync::OnceLock;

/// The locked state as pgrx hands it to the region once, at its creation: the core's
/// [`Issuer`] (generator, node, registry status, the writer's turn), which decides everything;
/// this file holds it, it does not decide.
#[repr(transparent)]
struct Start(Issuer);

// SAFETY: Issuer is plain data (integers, booleans, enums, arrays and options of them): no
// pointers, nothing process-local, valid when copied between processes.
unsafe impl PGRXSharedMemory for Start {}

/// The shared-memory region.
#[repr(C)]
struct Region {
    lock: *mut pg_sys::LWLock,
    /// Guarded by `lock`.
    state: UnsafeCell<Issuer>,
    /// Broadcast after every renewal (done or failed); callers whose next ID is not covered yet
    /// wait on it, interruptibly. No lock.
    renewed: pg_sys::ConditionVariable,
    /// Signalled when a call raises the demand for a reservation; the renewer sleeps on it. No
    /// lock.
    renewal_due: pg_sys::ConditionVariable,
    /// The renewer's last round of its loop (monotonic ms), or `NEVER_SEEN`. Atomic, no lock.
    renewer_seen_at: AtomicI64,
    /// The watermark's block (see the header).
    marks: *mut Marks,
    /// The third lock of the tranche: guards `backfill`.
    backfill_lock: *mut pg_sys::LWLock,
    /// The backfill cursor of this run. Guarded by `backfill_lock`.
    backfill: UnsafeCell<Cursor>,
}

/// The watermark's block: this header, then `backends` slots (`AtomicI64`), then `capacity`
/// prepared entries.
#[repr(C)]
struct Marks {
    /// The second lock of the tranche: guards `listed` and the prepared entries.
    prepared_lock: *mut pg_sys::LWLock,
    backends: usize,
    capacity: usize,
    /// Whether the transactions prepared before this start have been listed. Guarded by
    /// `prepared_lock`.
    listed: UnsafeCell<bool>,
}

impl Marks {
    /// The block's size for `backends` slots and `capacity` prepared entries.
    fn size(backends: usize, capacity: usize) -> usize {
        size_of::<Marks>() + backends * size_of::<AtomicI64>() + capacity * size_of::<Prepared>()
    }

    /// The sizes the block is made with: asked of Postgres once the server's limits are known
    /// (the shared memory request hook and later).
    fn dimensions() -> (usize, usize) {
        // SAFETY: plain reads of settings fixed at server start.
        let (backends, prepared) = unsafe { (pg_sys::MaxBackends, pg_sys::max_prepared_xacts) };
        let backends = backends.max(0) as usize;
        (backends, backends + prepared.max(0) as usize)
    }

    fn slots(&self) -> &[AtomicI64] {
        // SAFETY: `backends` slots follow the header, initialised at creation.
        unsafe {
            let first = std::ptr::from_ref(self).add(1).cast::<AtomicI64>();
            std::slice::from_raw_parts(first, self.backends)
        }
    }

    /// The prepared entries; only under `prepared_lock`.
    #[allow(clippy::mut_from_ref)]
    unsafe fn prepared(&self) -> &mut [Prepared] {
        // SAFETY: `capacity` entries follow the slots, initialised at creation; the caller
        // holds `prepared_lock`, so no one else touches them.
        unsafe {
            let first = self
                .slots()
                .as_ptr()
                .add(self.backends)
                .cast::<Prepared>()
                .cast_mut();
            std::slice::from_raw_parts_mut(first, self.capacity)
        }
    }
}

const NEVER_SEEN: i64 = i64::MIN;

/// A renewer silent for this long (it runs a round at least once a second when idle) is taken
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
const MARKS_NAME: &CStr = c"pg_snowflake watermark";

static REGION: SharedRegion = SharedRegion {
    region: UnsafeCell::new(std::ptr::null_mut()),
};

/// What the region starts with, each time it is created: set by [`init`].
static START_STATE: OnceLock<fn() -> Issuer> = OnceLock::new();

impl PgSharedMemoryInitialization for SharedRegion {
    type Value = Start;

    unsafe fn on_shmem_request(&'static self) {
        unsafe {
            let (backends, capacity) = Marks::dimensions();
            pg_sys::RequestAddinShmemSpace(size_of::<Region>());
            pg_sys::RequestAddinShmemSpace(Marks::size(backends, capacity));
            // The name is the extension's own, so no other library's tranche can clash with it.
            // The generator's lock, the prepared transactions', the backfill's (see the header).
            pg_sys::RequestNamedLWLockTranche(NAME.as_ptr(), 3);
        }
    }

    unsafe fn on_shmem_startup(&'static self, value: Start) {
        unsafe {
            let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(ADDIN_SHMEM_INIT_LOCK)).lock;
            pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
            let mut found = false;
            let region = pg_sys::ShmemInitStruct(NAME.as_ptr(), size_of::<Region>(), &mut found)
                .cast::<Region>();
            if !found {
                let locks = pg_sys::GetNamedLWLockTranche(NAME.as_ptr());
                let (backends, capacity) = Marks::dimensions();
                let mut marks_found = false;
                let marks = pg_sys::ShmemInitStruct(
                    MARKS_NAME.as_ptr(),
                    Marks::size(backends, capacity),
                    &mut marks_found,
                )
                .cast::<Marks>();
                marks.write(Marks {
                    prepared_lock: &raw mut (*locks.add(1)).lock,
                    backends,
                    capacity,
                    listed: UnsafeCell::new(false),
                });
                let slots = marks.add(1).cast::<AtomicI64>();
                for i in 0..backends {
                    slots.add(i).write(AtomicI64::new(NONE));
                }
                let prepared = slots.add(backends).cast::<Prepared>();
                for i in 0..capacity {
                    prepared.add(i).write(Prepared::FREE);
                }
                region.write(Region {
                    lock: &raw mut (*locks).lock,
                    state: UnsafeCell::new(value.0),
                    renewed: std::mem::zeroed(),
                    renewal_due: std::mem::zeroed(),
                    renewer_seen_at: AtomicI64::new(NEVER_SEEN),
                    marks,
                    backfill_lock: &raw mut (*locks.add(2)).lock,
                    backfill: UnsafeCell::new(Cursor::NEW),
                });
                pg_sys::ConditionVariableInit(&raw mut (*region).renewed);
                pg_sys::ConditionVariableInit(&raw mut (*region).renewal_due);
            }
            *self.region.get() = region;
            pg_sys::LWLockRelease(init_lock);
        }
    }
}

/// Requests the shared memory and the lock, to be filled with `start_state()` each time it is
/// created (postmaster start, and again after a crash; `start_state` stops the server when it
/// cannot say). Only valid from `_PG_init` during `shared_preload_libraries` processing.
pub fn init(start_state: fn() -> Issuer) {
    START_STATE.get_or_init(|| start_state);
    pg_shmem_init!(
        REGION = START_STATE.get().map_or_else(
            || unreachable!("shmem::init sets START_STATE before requesting the region"),
            |start| Start(start())
        )
    );
}

/// The region, for a process of a server that preloaded the library: the one check of that
/// precondition, after which every use goes through the handle.
#[inline]
pub fn get() -> Result<Handle, SnowflakeError> {
    // SAFETY: written once in the postmaster before any backend exists, read-only after.
    let region = unsafe { *REGION.region.get() };
    if region.is_null() {
        Err(SnowflakeError::NotPreloaded)
    } else {
        // SAFETY: the region lives as long as the process.
        Ok(Handle(unsafe { &*region }))
    }
}

/// The region of a process that has it: made only by [`get`].
#[derive(Clone, Copy)]
pub struct Handle(&'static Region);

impl Handle {
    /// Runs `f` on the state under the lock held exclusively (see the lock rules above).
    #[inline]
    pub fn exclusive<R>(self, f: impl FnOnce(&mut Issuer) -> R) -> R {
        self.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, f)
    }

    /// Runs `f` on the state under the lock held shared: `f` only reads it.
    #[inline]
    pub fn shared<R>(self, f: impl FnOnce(&Issuer) -> R) -> R {
        self.locked(pg_sys::LWLockMode::LW_SHARED, |issuer| f(issuer))
    }

    /// Runs `f` on the state under the lock in `mode`: [`Handle::exclusive`] and
    /// [`Handle::shared`] are the only callers, and only `exclusive` lends `&mut Issuer`.
    ///
    /// The lock is taken and released unguarded: pgrx's guard costs about a quarter of an ID's
    /// instructions, and no ERROR can cross these calls — `LWLockAcquire` on a valid lock raises
    /// only when a backend already holds `MAX_SIMUL_LWLOCKS` (200) LWLocks, which no caller of a
    /// SQL function does, `LWLockRelease` only for a lock not held, and `f` is the core's
    /// arithmetic, which returns errors as values. Were a Rust panic to happen in `f` anyway,
    /// pgrx turns it into an ERROR, and Postgres' error recovery releases every LWLock the
    /// backend holds (`LWLockReleaseAll`), exactly as for C code.
    #[inline]
    fn locked<R>(self, mode: pg_sys::LWLockMode::Type, f: impl FnOnce(&mut Issuer) -> R) -> R {
        // SAFETY: a valid LWLock of our tranche; the state is only touched while it is held,
        // and shared mode only ever reads (`shared` lends `&Issuer`).
        unsafe {
            unguarded::LWLockAcquire(self.0.lock, mode);
            let result = f(&mut *self.0.state.get());
            unguarded::LWLockRelease(self.0.lock);
            result
        }
    }

    /// Claims the slot of proc number `number` for this backend ([`my_slot`] gives it from now
    /// on), emptied: a backend that held it before emptied it when it exited. `None` when the
    /// number has no slot (not a backend's).
    pub fn claim_slot(self, number: usize) -> Option<Slot> {
        // SAFETY: the block lives as long as the region.
        let marks = unsafe { &*self.0.marks };
        let slot = marks.slots().get(number)?;
        slot.store(NONE, Ordering::Release);
        MY_SLOT.store(std::ptr::from_ref(slot).cast_mut(), Ordering::Relaxed);
        Some(Slot(slot))
    }

    /// What every backend's slot holds now. Read after the caller drew an ID under the
    /// generator's lock: every slot written before that draw is seen (the lock's acquisition is
    /// a full barrier); a slot emptied since (`Acquire`, paired with [`Slot::clear`]'s
    /// `Release`) belongs to a transaction that has ended.
    pub fn open_slots(self) -> impl Iterator<Item = i64> {
        // SAFETY: the block lives as long as the region.
        let marks = unsafe { &*self.0.marks };
        marks
            .slots()
            .iter()
            .map(|slot| slot.load(Ordering::Acquire))
    }

    /// Runs `f` on the prepared transactions' table and the flag that says whether those of
    /// before this start were listed, under the second lock, exclusively. `f` may ask Postgres
    /// (`TransactionIdIsInProgress`, which takes the ProcArrayLock): no other lock of ours is
    /// held, and an ERROR releases this one with the others (`LWLockReleaseAll`).
    pub fn prepared<R>(self, f: impl FnOnce(&mut [Prepared], &mut bool) -> R) -> R {
        // SAFETY: the block lives as long as the region; its entries and flag are only touched
        // while the lock is held.
        unsafe {
            let marks = &*self.0.marks;
            pg_sys::LWLockAcquire(marks.prepared_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
            let result = f(marks.prepared(), &mut *marks.listed.get());
            pg_sys::LWLockRelease(marks.prepared_lock);
            result
        }
    }

    /// Runs `f` on the backfill cursor under the backfill lock, exclusively. `f` may write the
    /// backfill's ceiling (file, WAL, the synchronous standbys' wait: see the header); no other
    /// lock of ours is held, and an ERROR releases this one with the others (`LWLockReleaseAll`).
    pub fn backfill<R>(self, f: impl FnOnce(&mut Cursor) -> R) -> R {
        // SAFETY: the cursor is only touched while the lock is held.
        unsafe {
            pg_sys::LWLockAcquire(self.0.backfill_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
            let result = f(&mut *self.0.backfill.get());
            pg_sys::LWLockRelease(self.0.backfill_lock);
            result
        }
    }

    /// A copy of the shared state, for reporting.
    pub fn snapshot(self) -> Issuer {
        self.shared(|issuer| *issuer)
    }

    /// Tells the renewer that a renewal is due.
    pub fn wake_the_renewer(self) {
        // SAFETY: a condition variable in our shared memory.
        unsafe { pg_sys::ConditionVariableSignal(&raw const self.0.renewal_due as *mut _) };
    }

    /// Sleeps until a call signals that a renewal is due, or `timeout_ms` pass; raises
    /// interrupts (the renewer's SIGTERM) as they come. The first call in a loop only registers
    /// the process on the condition variable (see `ConditionVariableTimedSleep`), so the caller
    /// checks for a due renewal between calls without missing a signal.
    pub fn sleep_until_renewal_due(self, timeout_ms: i64) {
        sleep_on(&self.0.renewal_due, timeout_ms);
    }

    /// Wakes every caller waiting for a renewal (after one was reported, done or failed).
    pub fn broadcast_renewed(self) {
        // SAFETY: a condition variable in our shared memory.
        unsafe { pg_sys::ConditionVariableBroadcast(&raw const self.0.renewed as *mut _) };
    }

    /// Sleeps until a renewal is reported, or `timeout_ms` pass; raises a cancel or statement
    /// timeout as an ERROR. The first call in a loop only registers the process on the
    /// condition variable, so a broadcast between it and the caller's next check is not missed.
    /// No lock may be held.
    pub fn sleep_until_renewed(self, timeout_ms: i64) {
        sleep_on(&self.0.renewed, timeout_ms);
    }

    /// The renewer's sign of life, once per round of its loop.
    pub fn renewer_is_alive(self) {
        self.0
            .renewer_seen_at
            .store(SystemClock.monotonic(), Ordering::Relaxed);
    }

    /// Whether a renewer process is running: it has shown life within `RENEWER_SILENCE_MS`.
    /// Never in single-user mode (`postgres --single`), which runs no background workers.
    pub fn renewer_running(self) -> bool {
        // SAFETY: a plain read of a flag set at process start.
        if !unsafe { pg_sys::IsUnderPostmaster } {
            return false;
        }
        let seen = self.0.renewer_seen_at.load(Ordering::Relaxed);
        seen != NEVER_SEEN && SystemClock.monotonic() - seen < RENEWER_SILENCE_MS
    }
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

/// Leaves the wait list of the condition variable this process last slept on, if `waited`
/// (before a renewal is written, or once the wait is over).
#[inline(always)]
pub fn stop_waiting(waited: bool) {
    if waited {
        // SAFETY: ends a sleep prepared by ConditionVariableTimedSleep in this process.
        unsafe {
            pg_sys::ConditionVariableCancelSleep();
        }
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

/// This backend's slot: the lowest ID drawn in its current top-level transaction (see the
/// header). Only its backend writes it.
#[derive(Clone, Copy)]
pub struct Slot(&'static AtomicI64);

/// This backend's slot, once claimed ([`Handle::claim_slot`]); null before.
static MY_SLOT: AtomicPtr<AtomicI64> = AtomicPtr::new(std::ptr::null_mut());

/// This backend's slot, once it has claimed one: the backend has seen recovery over and is
/// ready to draw IDs (`allocate.rs`).
#[inline(always)]
pub fn my_slot() -> Option<Slot> {
    let slot = MY_SLOT.load(Ordering::Relaxed);
    // SAFETY: a pointer into the block, which lives as long as the process, or null.
    unsafe { slot.as_ref() }.map(Slot)
}

impl Slot {
    /// Records the first ID of a draw when the transaction holds none yet (IDs increase, so the
    /// first is the lowest). Only inside the generator's lock, in the draw's critical section:
    /// a load, a compare and, once per transaction, `id()` and a store.
    #[inline(always)]
    pub fn mark_with(self, id: impl FnOnce() -> i64) {
        if self.0.load(Ordering::Relaxed) == NONE {
            self.0.store(id(), Ordering::Relaxed);
        }
    }

    /// The lowest ID the current transaction drew, or `NONE`.
    pub fn lowest(self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Empties the slot: the transaction has ended (or moved to the prepared table). `Release`:
    /// a watermark call that sees it empty sees what the backend did before (its transaction's
    /// end in the proc array).
    pub fn clear(self) {
        self.0.store(NONE, Ordering::Release);
    }
}
