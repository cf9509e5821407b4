//! One renewal, whichever process writes it: the writer's turn taken under the lock
//! ([`renewal_turn`]), written with no lock held ([`renew`] → `store::reserve`), ended
//! ([`end_turn`]) and the callers waiting for it woken. The renewer (`src/renewer.rs`) normally
//! writes every reservation; with none running, the call that needs one writes it itself
//! ([`renew_here`]). A turn always ends: reported, given back unused ([`Turn::give_back`]),
//! reported abandoned when an ERROR unwinds past it ([`Turn`]'s drop), or given back when its
//! process exits holding it ([`end_on_exit`]).
//! What a turn is, and the fenced ceiling it stops at, are the core's (`Issuer`'s
//! `renewal_turn`, `rewrite_turn`, `turn_ended`); the protocol itself is told in
//! `core/src/generator/reservation.rs`.

use super::store::{self, Reserved};
use crate::error::SnowflakeError;
use crate::gucs;
use crate::shmem::{self, Handle};
use pgrx::prelude::*;
use snowflake_core::clock::{Clock, SystemClock};
use snowflake_core::issuer;
use snowflake_core::node::Durable;
use std::sync::atomic::{AtomicBool, Ordering};

pub use snowflake_core::issuer::Renewal;

/// This process's turn as the writer: the reservation to write and the identity to write with
/// it. Whoever holds it must end it ([`renew`] does, [`Turn::give_back`] too); dropped unended —
/// an ERROR or a panic unwinding past it — it ends abandoned, dropped unended on the ordinary
/// path it ends given back (the two end alike: the next writer takes the demand up). A process
/// that exits holding it (a FATAL: no unwinding) has it given back by [`end_on_exit`].
pub struct Turn {
    shm: Handle,
    turn: issuer::Turn,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let ended = if std::thread::panicking() {
            Renewal::Abandoned
        } else {
            Renewal::GivenBack
        };
        end_turn(self.shm, ended);
    }
}

/// This process's pid.
fn my_pid() -> i32 {
    // SAFETY: a plain read of this process's pid.
    unsafe { pg_sys::MyProcPid }
}

/// Takes the turn to write the due renewal for this process (the renewer, or a backend standing
/// in for it), if one is due and no turn is taken.
pub fn renewal_turn(shm: Handle, by_renewer: bool) -> Option<Turn> {
    end_on_exit();
    let pid = my_pid();
    let turn = shm.exclusive(|issuer| issuer.renewal_turn(by_renewer, pid))?;
    Some(Turn { shm, turn })
}

/// Takes, for the renewer, the turn to write the durable reservation again as it is, with what
/// shared memory now says goes with it (the registry claim): `None` while a turn is taken.
/// Written and ended by [`renew`]; or, held while the registry commits a claim, given back
/// unused ([`Turn::give_back`]).
pub fn rewrite_turn(shm: Handle) -> Option<Turn> {
    end_on_exit();
    let pid = my_pid();
    let turn = shm.exclusive(|issuer| issuer.rewrite_turn(pid))?;
    Some(Turn { shm, turn })
}

impl Turn {
    /// Writes the state file alone, as `durable` says, during this turn: a registry claim's
    /// intent, before the registry commits it (`Node::intend`).
    pub fn write_state_file(&self, durable: &Durable) -> Result<(), std::io::Error> {
        store::write_state_file(gucs::layout(), durable)
    }

    /// Gives the turn back without a renewal ([`Renewal::GivenBack`]): nothing is raised.
    pub fn give_back(self) {
        drop(self);
    }
}

/// Keeps the reservation ahead of the clock between calls (`Issuer::keep_ahead`: for a minute
/// after the last call, and after the renewer started at `renewer_started_at` on a server that
/// was in use just before, a renewal falls due by the clock as it would by a call). Called by
/// the renewer on every round of its loop; returns how long it may sleep before the next one.
pub fn keep_ahead(shm: Handle, renewer_started_at: i64) -> i64 {
    let (layout, limits) = (gucs::layout(), gucs::limits());
    shm.exclusive(|issuer| issuer.keep_ahead(layout, &limits, &mut SystemClock, renewer_started_at))
}

/// Ends the turn and wakes every caller waiting for a renewal.
fn end_turn(shm: Handle, renewal: Renewal) {
    shm.exclusive(|issuer| {
        issuer.turn_ended(renewal);
    });
    shm.broadcast_renewed();
}

/// Gives back a turn left by a renewer that exited without ending it, not one of a backend
/// standing in for it (`Generator::renewer_started`); the new renewer calls this when it starts.
pub fn give_back_abandoned_turn(shm: Handle) {
    shm.exclusive(|issuer| {
        issuer.renewer_started();
    });
}

/// Makes sure this process, if it exits during its turn (a FATAL inside a write, which does not
/// unwind), gives the turn back on the way out: registered once per process, before its first
/// turn.
fn end_on_exit() {
    static REGISTERED: AtomicBool = AtomicBool::new(false);
    if REGISTERED.swap(true, Ordering::Relaxed) {
        return;
    }
    #[pg_guard]
    unsafe extern "C-unwind" fn give_back(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
        // Registered before a turn, so only in a process that has the region.
        let Ok(shm) = shmem::get() else { return };
        let pid = my_pid();
        let had = shm.exclusive(|issuer| issuer.writer_exited(pid));
        if had {
            shm.broadcast_renewed();
        }
    }
    // SAFETY: registers a callback that runs while shared memory is still attached.
    unsafe { pg_sys::before_shmem_exit(Some(give_back), pg_sys::Datum::from(0)) };
}

/// Writes the turn's reservation (nothing, when it is fenced: `issuer::Turn::unwritten`), ends
/// the turn with how it went, and returns that.
pub fn renew(turn: Turn) -> Renewal {
    let started = SystemClock.monotonic();
    let t = turn.turn;
    let renewal = t.unwritten().unwrap_or_else(|| {
        match store::reserve(gucs::layout(), t.until, t.node, &t.history, t.identity) {
            Ok(Reserved::Confirmed) => Renewal::Done {
                until: t.until,
                took_ms: SystemClock.monotonic() - started,
            },
            Ok(Reserved::Interrupted) => Renewal::Abandoned,
            Err(e) => Renewal::Failed {
                errno: e.raw_os_error().unwrap_or(0),
            },
        }
    });
    let shm = turn.shm;
    std::mem::forget(turn);
    end_turn(shm, renewal);
    renewal
}

/// With no renewer running: takes the turn to write the due renewal, if any and no turn is taken, and
/// writes it from this process, with no lock held; returns whether it did. It waits for the
/// synchronous standbys as the renewer does: the session's `synchronous_commit` is set to `on`
/// for the write (restored right after, or by the transaction's abort), and a cancel or
/// statement timeout is held back until the write is over, because `SyncRepWaitForLSN` would
/// give up its wait on one and the reservation would count unconfirmed. A cancel or terminate
/// that came before is taken instead of the write (the caller raises it while waiting).
///
/// Interrupts are held from before the turn until it ends: a terminate (or any
/// interrupt that ends the process) cannot end it during its turn — not inside the
/// wait for the standbys, whose warning would otherwise process it, nor in the log line below —
/// so the turn always ends; the terminate is then processed at once, on the way out.
pub fn renew_here(shm: Handle) -> bool {
    let held = InterruptsHeld::new();
    let cancels = CancelsHeldBack::new();
    // SAFETY: plain reads of flags set by signal handlers; SIGINT cannot run now.
    if unsafe { pg_sys::QueryCancelPending != 0 || pg_sys::ProcDiePending != 0 } {
        return false;
    }
    let Some(turn) = renewal_turn(shm, false) else {
        return false;
    };
    static LOGGED: AtomicBool = AtomicBool::new(false);
    // SAFETY: a plain read of a flag set at process start.
    if unsafe { pg_sys::IsUnderPostmaster } && !LOGGED.swap(true, Ordering::Relaxed) {
        SnowflakeError::RenewerNotRunning.report_log();
    }
    // The turn ends abandoned if an ERROR unwinds through the write.
    with_synchronous_commit_on(|| renew(turn));
    drop(cancels);
    drop(held);
    // A terminate that came during the write ends the process now, its turn ended.
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
pub(super) struct CancelsHeldBack {
    old: libc::sigset_t,
}

impl CancelsHeldBack {
    pub(super) fn new() -> Self {
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

/// Runs `f` (a durable write from a backend: a reservation, the backfill's ceiling) with
/// `synchronous_commit` on, so that its wait for the synchronous standbys happens even in a
/// session that turned it off (as bulk work often does): a standby that may be promoted must
/// hold what the write covers before any ID under it is handed out.
pub(super) fn with_synchronous_commit_on<R>(f: impl FnOnce() -> R) -> R {
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
        let result = f();
        pg_sys::AtEOXact_GUC(true, level);
        result
    }
}
