//! Writing the durable reservations: claiming a renewal, writing it with no lock held, and
//! reporting it, whichever process writes it.
//!
//! The renewer (`renewer.rs`, a background worker) normally writes every reservation, those
//! calls ask for and, for a minute after the last call, those the clock makes due
//! ([`keep_ahead`], so that a call after a pause does not wait for a write): it claims
//! the due renewal under the generator's lock ([`claim_renewal`]; the claim keeps writers to
//! one), writes it with [`renew`] — state file, WAL record, flush, and the wait for the
//! synchronous standbys (`durable::reserve`) — and reports it ([`report_renewal`], with the
//! time the write took: slow writes lengthen the next reservations); only then may IDs under it
//! be issued, and every caller waiting for it is woken.
//!
//! Without a renewer — single-user mode; `max_worker_processes` too small for it to be
//! registered; the renewer stopped or restarting (`shmem::renewer_running`) — the call that
//! needs a renewal claims and writes it itself ([`renew_here`]), as the renewer would; the claim
//! keeps writers to one whichever process writes, so a renewer that comes back is never doubled.

use crate::durable::{self, Reserved};
use crate::error::SnowflakeError;
use crate::{gucs, shmem};
use pgrx::prelude::*;
use snowflake_core::clock::{wall_now, Clock, SystemClock};
use std::sync::atomic::{AtomicBool, Ordering};

/// Claims the due renewal for this process (the renewer, or a backend standing in for it), if
/// one is due and none is running.
pub fn claim_renewal(by_renewer: bool) -> Option<i64> {
    shmem::locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
        shared.generator.claim_renewal(by_renewer)
    })
}

/// Keeps the reservation ahead of the clock between calls (`Generator::keep_ahead`: for a
/// minute after the last call, and after the renewer started at `renewer_started_at`, a
/// renewal falls due by the clock as it would by a call). Called by the renewer on every turn
/// of its loop; returns how long it may sleep before the next turn: a quarter of the
/// reservation, between 10 ms and a second.
pub fn keep_ahead(renewer_started_at: i64) -> i64 {
    let (layout, limits) = (gucs::layout(), gucs::limits());
    let now = wall_now();
    shmem::locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
        // A data directory that awaits its state file after pg_upgrade keeps the marker file
        // until the old one is copied in: no reservation may replace it.
        if !shared.awaiting_carry {
            shared
                .generator
                .keep_ahead(layout, &limits, now, renewer_started_at);
        }
        (shared.generator.reservation_ms(&limits) / 4).clamp(10, 1_000)
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
    shmem::locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| match renewal {
        Renewal::Done { until, took_ms } => shared.generator.renewal_done(until, took_ms),
        Renewal::Failed { errno } => {
            shared.last_failure_errno = errno;
            shared.generator.renewal_failed();
        }
        Renewal::Abandoned => shared.generator.renewal_abandoned(),
    });
    shmem::broadcast_renewed();
}

/// Releases a claim left by a renewer that exited without reporting it, not one of a backend
/// standing in for it (`Generator::renewer_started`); the new renewer calls this when it starts.
pub fn release_abandoned_claim() {
    shmem::locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
        shared.generator.renewer_started()
    });
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

/// With no renewer running: claims the due renewal, if any and none is being written, and
/// writes it from this process, with no lock held; returns whether it did. It waits for the
/// synchronous standbys as the renewer does: the session's `synchronous_commit` is set to `on`
/// for the write (restored right after, or by the transaction's abort), and a cancel or
/// statement timeout is held back until the write is over, because `SyncRepWaitForLSN` would
/// give up its wait on one and the reservation would count unconfirmed. A cancel that came
/// before is taken instead of the write (the caller raises it while waiting).
pub fn renew_here() -> bool {
    let _held = CancelsHeldBack::new();
    // SAFETY: a plain read of a flag set by the SIGINT handler, which cannot run now.
    if unsafe { pg_sys::QueryCancelPending } != 0 {
        return false;
    }
    let Some(until) = claim_renewal(false) else {
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
