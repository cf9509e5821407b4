//! One renewal, whichever process writes it: claim it under the lock ([`claim_renewal`]), write
//! it with no lock held ([`renew`] → `store::reserve`), report it ([`report_renewal`]) and wake
//! the callers waiting for it. The renewer (`src/renewer.rs`) normally writes every reservation;
//! with none running, the call that needs one writes it itself ([`renew_here`]). A claim is
//! always released: reported, reported abandoned when an ERROR unwinds past it ([`Claim`]'s
//! drop), or released when its process exits holding it ([`release_on_exit`]). The protocol
//! itself is told once, in the core (`core/src/generator/reservation.rs`).

use super::store::{self, Reserved};
use crate::error::SnowflakeError;
use crate::gucs;
use crate::shmem::{self, Handle, RenewalFailure, Shared};
use pgrx::prelude::*;
use snowflake_core::clock::{Clock, SystemClock};
use snowflake_core::node::{Durable, Refusing};
use snowflake_core::registry::Identity;
use snowflake_core::state_file::History;
use std::sync::atomic::{AtomicBool, Ordering};

/// A claimed renewal: the reservation to write and the history to write with it. Whoever holds
/// it must report it ([`renew`] does); dropped unreported — an ERROR or a panic unwinding past
/// it — it is reported abandoned, so that the next renewer takes the demand up. A process that
/// exits holding it (a FATAL: no unwinding) has it released by [`release_on_exit`].
pub struct Claim {
    shm: Handle,
    until: i64,
    node: u32,
    history: History,
    claim: Option<Identity>,
    /// The durable reservation written again as it is (`claim_rewrite`), not a renewal.
    rewrite: bool,
}

impl Drop for Claim {
    fn drop(&mut self) {
        report_renewal(self.shm, Renewal::Abandoned);
    }
}

/// Claims the due renewal for this process (the renewer, or a backend standing in for it), if
/// one is due and none is running.
pub fn claim_renewal(shm: Handle, by_renewer: bool) -> Option<Claim> {
    release_on_exit();
    shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
        let until = shared.generator.claim_renewal(by_renewer)?;
        // Fenced mode: never past the ceiling the registry recorded for the lease.
        Some(Claim::of(
            shm,
            shared,
            until.min(shared.node.ceiling),
            false,
        ))
    })
}

/// Claims, for the renewer, the writing of the durable reservation again as it is, with what
/// shared memory now says goes with it (the registry claim): `None` while a renewal is being
/// written (`Generator::claim_rewrite`). Written and reported by [`renew`]; or, holding the
/// writer's role while the registry commits a claim, released unused ([`Claim::release`]).
pub fn claim_rewrite(shm: Handle) -> Option<Claim> {
    release_on_exit();
    shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
        let until = shared.generator.claim_rewrite()?;
        Some(Claim::of(shm, shared, until, true))
    })
}

impl Claim {
    /// The claim of a reservation until `until`, with the identity `shared` holds now; the
    /// caller holds the lock and has just claimed the writer's role for this process.
    fn of(shm: Handle, shared: &mut Shared, until: i64, rewrite: bool) -> Claim {
        // SAFETY: a plain read of this process's pid.
        shared.claimant_pid = unsafe { pg_sys::MyProcPid };
        Claim {
            shm,
            until,
            node: shared.node.id,
            history: shared.node.history,
            claim: shared.node.claim,
            rewrite,
        }
    }

    /// Writes the state file alone, as `durable` says, holding the writer's role: a registry
    /// claim's intent, before the registry commits it (`Node::claimed`).
    pub fn write_state_file(&self, durable: &Durable) -> Result<(), std::io::Error> {
        store::write_state_file(gucs::layout(), durable)
    }

    /// Gives the writer's role back without a renewal: nothing is raised.
    pub fn release(self) {
        drop(self);
    }
}

/// Keeps the reservation ahead of the clock between calls (`Generator::keep_ahead`: for a
/// minute after the last call, and after the renewer started at `renewer_started_at` on a
/// server that was in use just before, a renewal falls due by the clock as it would by a call).
/// Called by the renewer on every turn of its loop; returns how long it may sleep before the
/// next turn: a quarter of the reservation, between 10 ms and a second. Without a node id no ID
/// can be made, and nothing is reserved.
pub fn keep_ahead(shm: Handle, renewer_started_at: i64) -> i64 {
    let (layout, limits) = (gucs::layout(), gucs::limits());
    shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
        // Only while IDs may be made: not without a node id, not before the registry's claim,
        // and not in a data directory that awaits its state file after pg_upgrade (it keeps
        // the marker file until the old one is copied in: no reservation may replace it).
        if shared.node.refusing == Refusing::Nothing {
            shared
                .generator
                .keep_ahead(layout, &limits, &mut SystemClock, renewer_started_at);
        }
        (shared.generator.effective_reservation_ms(&limits) / 4).clamp(10, 1_000)
    })
}

/// How a claimed renewal ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// Durable (and confirmed by the synchronous standbys): IDs below `until` may be issued;
    /// the write took `took_ms` (slow writes lengthen the next reservations).
    Done { until: i64, took_ms: i64 },
    /// Not written: the callers waiting for it fail with this OS error (0: none known).
    Failed { errno: i32 },
    /// Not written: it would not reach past the fenced lease's ceiling (Unix ms).
    Fenced { ceiling: i64 },
    /// The renewing process is being terminated before it knew: the claim is released and the
    /// demand kept for the next renewer.
    Abandoned,
}

/// Reports a claimed renewal and wakes every caller waiting for one.
fn report_renewal(shm: Handle, renewal: Renewal) {
    shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
        shared.claimant_pid = 0;
        match renewal {
            Renewal::Done { until, took_ms } => shared.generator.renewal_done(until, took_ms),
            Renewal::Failed { errno } => {
                shared.last_failure = RenewalFailure::Io { errno };
                shared.generator.renewal_failed();
            }
            Renewal::Fenced { ceiling } => {
                shared.last_failure = RenewalFailure::Fenced { ceiling };
                shared.generator.renewal_failed();
            }
            Renewal::Abandoned => shared.generator.renewal_abandoned(),
        }
    });
    shm.broadcast_renewed();
}

/// Releases a claim left by a renewer that exited without reporting it, not one of a backend
/// standing in for it (`Generator::renewer_started`); the new renewer calls this when it starts.
pub fn release_abandoned_claim(shm: Handle) {
    shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
        shared.generator.renewer_started()
    });
}

/// Makes sure this process, if it exits while holding a claim (a FATAL inside a write, which
/// does not unwind), releases it on the way out: registered once per process, before its first
/// claim.
fn release_on_exit() {
    static REGISTERED: AtomicBool = AtomicBool::new(false);
    if REGISTERED.swap(true, Ordering::Relaxed) {
        return;
    }
    #[pg_guard]
    unsafe extern "C-unwind" fn release(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
        // SAFETY: a plain read of this process's pid.
        let pid = unsafe { pg_sys::MyProcPid };
        // Registered before a claim, so only in a process that has the region.
        let Ok(shm) = shmem::get() else { return };
        let released = shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
            let mine = shared.generator.renewing() && shared.claimant_pid == pid;
            if mine {
                shared.claimant_pid = 0;
                shared.generator.renewal_abandoned();
            }
            mine
        });
        if released {
            shm.broadcast_renewed();
        }
    }
    // SAFETY: registers a callback that runs while shared memory is still attached.
    unsafe { pg_sys::before_shmem_exit(Some(release), pg_sys::Datum::from(0)) };
}

/// Writes the claimed reservation and reports how it went; returns that.
pub fn renew(claim: Claim) -> Renewal {
    let started = SystemClock.monotonic();
    let durable = claim.shm.locked(pg_sys::LWLockMode::LW_SHARED, |shared| {
        shared.generator.reserved_until()
    });
    let renewal = if claim.until <= durable && !claim.rewrite {
        // Capped at the fenced lease's ceiling, it would cover nothing more.
        Renewal::Fenced {
            ceiling: claim.until,
        }
    } else {
        let written = store::reserve(
            gucs::layout(),
            claim.until,
            claim.node,
            &claim.history,
            claim.claim,
        );
        match written {
            Ok(Reserved::Confirmed) => Renewal::Done {
                until: claim.until,
                took_ms: SystemClock.monotonic() - started,
            },
            Ok(Reserved::Interrupted) => Renewal::Abandoned,
            Err(e) => Renewal::Failed {
                errno: e.raw_os_error().unwrap_or(0),
            },
        }
    };
    let shm = claim.shm;
    std::mem::forget(claim);
    report_renewal(shm, renewal);
    renewal
}

/// With no renewer running: claims the due renewal, if any and none is being written, and
/// writes it from this process, with no lock held; returns whether it did. It waits for the
/// synchronous standbys as the renewer does: the session's `synchronous_commit` is set to `on`
/// for the write (restored right after, or by the transaction's abort), and a cancel or
/// statement timeout is held back until the write is over, because `SyncRepWaitForLSN` would
/// give up its wait on one and the reservation would count unconfirmed. A cancel or terminate
/// that came before is taken instead of the write (the caller raises it while waiting).
///
/// Interrupts are held from before the claim until it is reported: a terminate (or any
/// interrupt that ends the process) cannot end it while it holds the claim — not inside the
/// wait for the standbys, whose warning would otherwise process it, nor in the log line below —
/// so the claim is always reported; the terminate is then processed at once, on the way out.
pub fn renew_here(shm: Handle) -> bool {
    let held = InterruptsHeld::new();
    let cancels = CancelsHeldBack::new();
    // SAFETY: plain reads of flags set by signal handlers; SIGINT cannot run now.
    if unsafe { pg_sys::QueryCancelPending != 0 || pg_sys::ProcDiePending != 0 } {
        return false;
    }
    let Some(claim) = claim_renewal(shm, false) else {
        return false;
    };
    static LOGGED: AtomicBool = AtomicBool::new(false);
    // SAFETY: a plain read of a flag set at process start.
    if unsafe { pg_sys::IsUnderPostmaster } && !LOGGED.swap(true, Ordering::Relaxed) {
        SnowflakeError::RenewerNotRunning.report_log();
    }
    // SAFETY: a GUC nest level opened and closed around one setting, inside the caller's
    // transaction (a SQL function's); an ERROR in between aborts the transaction, whose
    // clean-up restores the setting (and the claim is reported abandoned as it unwinds).
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
        renew(claim);
        pg_sys::AtEOXact_GUC(true, level);
    }
    drop(cancels);
    drop(held);
    // A terminate that came during the write ends the process now, its claim reported.
    pg_sys::check_for_interrupts!();
    true
}

/// Interrupts held (`HOLD_INTERRUPTS`) while this lives: `CHECK_FOR_INTERRUPTS` does nothing,
/// the interrupt stays pending. Restores the count it found (an ERROR resets it to 0 before
/// unwinding, so restoring, not decrementing, is right on both ways out).
struct InterruptsHeld {
    saved: u32,
}

impl InterruptsHeld {
    fn new() -> Self {
        // SAFETY: the holdoff counter of this process's only thread.
        unsafe {
            let saved = pg_sys::InterruptHoldoffCount;
            pg_sys::InterruptHoldoffCount = saved + 1;
            InterruptsHeld { saved }
        }
    }
}

impl Drop for InterruptsHeld {
    fn drop(&mut self) {
        // SAFETY: as in new().
        unsafe { pg_sys::InterruptHoldoffCount = self.saved };
    }
}

/// SIGINT (query cancel; statement_timeout sends it too) blocked while this lives: it stays
/// pending and is delivered when the mask is restored.
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
