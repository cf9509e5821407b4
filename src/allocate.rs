//! The hot path: the next IDs from the server's generator (`shmem.rs`), and the waits that
//! sometimes come with them, all outside the generator's lock.
//!
//! [`next_run`] takes the lock once and returns at once in the common case (IDs under the
//! durable reservation, nothing to wake, nothing to warn). Anything else goes to
//! `next_run_otherwise`: waking the renewer (or, with none running, writing the reservation
//! itself: `reservation::renew::renew_here`), the clock-step warning, and the waits — for the
//! clock under overload, on the process latch; for a reservation, on the `renewed` condition
//! variable —, both interruptible. Its cost is counted by `bench/instructions` (callgrind):
//! keep it small.
//!
//! Every draw but the watermark's own records its first ID in the backend's slot inside the
//! lock (`shmem::Slot::mark_with`: a load and a compare, a store once per transaction), so that
//! a watermark call, which draws under the same lock, finds every lower ID's slot written.

use crate::error::{RegistryError, SnowflakeError, STATE_FILE};
use crate::gucs;
use crate::registry::refusal;
use crate::reservation::renew;
use crate::shmem::{self, Handle, Slot};
use crate::watermark;
use pgrx::prelude::*;
use snowflake_core::clock::SystemClock;
use snowflake_core::error::Error as CoreError;
use snowflake_core::generator::{Allocation, ClockEvent, Limits, Run, FORWARD_CONFIRM_MS};
use snowflake_core::issuer::{Refusing, RenewalFailure};
use snowflake_core::layout::{Layout, Parts};

/// How long a call waits for the registry's first claim before it gives up (ms).
const CLAIM_WAIT_MS: i64 = 10_000;

/// The next ID in the common case (`Generator::next_one`: the server out of recovery as this
/// backend has seen before, the generator making IDs, one ID in the current or a fresh tick,
/// nothing to wait for, wake or warn of; its first ID in a transaction recorded in the backend's
/// slot), or `None`, having changed nothing, when
/// [`next_id`] must decide. The fast path of `snowflake_nextval()`, called without pgrx's guard
/// (`sql/nextval.rs` has the safety argument): nothing here allocates, raises an ERROR or can
/// panic, and no value with a destructor is alive across the lock's calls.
#[inline(always)]
pub fn next_id_fast() -> Option<i64> {
    // A slot is claimed once the backend has seen recovery over (`ensure_not_in_recovery`).
    let slot = shmem::my_slot()?;
    let shm = shmem::get().ok()?;
    let layout = gucs::preloaded_layout()?;
    let limits = gucs::limits();
    let (time, seq, node) = shm.exclusive(|issuer| {
        let drawn = issuer.next_one(layout, &mut SystemClock, &limits)?;
        let (time, seq, node) = drawn;
        slot.mark_with(|| {
            layout.pack(Parts {
                time: time as u64,
                node,
                seq,
            })
        });
        Some(drawn)
    })?;
    Some(layout.pack(Parts {
        time: time as u64,
        node,
        seq,
    }))
}

/// The next ID from the server's generator.
pub fn next_id() -> Result<i64, SnowflakeError> {
    let shm = shmem::get()?;
    let layout = gucs::layout();
    let (run, node) = next_run(shm, layout, 1)?;
    Ok(layout.pack(Parts {
        time: run.time as u64,
        node,
        seq: run.seq,
    }))
}

/// The watermark's own ID (`watermark.rs`): drawn the normal way, so that every later ID is above
/// it, but not recorded in the backend's slot, as no row holds it.
pub fn draw_unrecorded(shm: Handle) -> Result<i64, SnowflakeError> {
    ensure_not_in_recovery()?;
    let layout = gucs::layout();
    let (run, node) = draw(shm, layout, 1, None)?;
    Ok(layout.pack(Parts {
        time: run.time as u64,
        node,
        seq: run.seq,
    }))
}

/// The next IDs of `layout` (this server's), up to `want` of them, from one acquisition of the
/// lock, and the node id they are made under. Waits, outside the lock and interruptibly, under
/// sustained overload (for the clock), when the issued time has caught up with the durable
/// reservation (for the renewer), and for the registry's first claim.
/// The first of them is recorded in the backend's slot when its transaction holds none yet.
pub fn next_run(shm: Handle, layout: &Layout, want: u64) -> Result<(Run, u32), SnowflakeError> {
    let slot = ensure_not_in_recovery()?;
    draw(shm, layout, want, Some(slot))
}

/// [`next_run`], recording the first ID in `slot`, if any.
fn draw(
    shm: Handle,
    layout: &Layout,
    want: u64,
    slot: Option<Slot>,
) -> Result<(Run, u32), SnowflakeError> {
    let limits = gucs::limits();
    let allocation = allocate(shm, layout, &limits, want, slot);
    // The common case, kept small: IDs under the reservation, nothing to wake, nothing to warn.
    if let Ok((
        node,
        Ok(Allocation::Run {
            run,
            clock_event: None,
            wake_renewer: false,
        }),
    )) = allocation
    {
        return Ok((run, node));
    }
    next_run_otherwise(shm, layout, &limits, want, allocation, slot)
}

/// What one allocation came to: IDs (or a wait, or a generator's error) under this node id,
/// or why no ID may be made (`Issuer::allocate`).
type Allocated = Result<(u32, Result<Allocation, CoreError>), Refusing>;

/// One allocation under the lock: the core's gate, ceiling and generator (`Issuer::allocate`);
/// a run's first ID recorded in `slot`, if any, in the same critical section.
#[inline(always)]
fn allocate(
    shm: Handle,
    layout: &Layout,
    limits: &Limits,
    want: u64,
    slot: Option<Slot>,
) -> Allocated {
    shm.exclusive(|issuer| {
        let allocated = issuer.allocate(layout, &mut SystemClock, limits, want);
        if let (Some(slot), Ok((node, Ok(Allocation::Run { run, .. })))) = (slot, &allocated) {
            slot.mark_with(|| {
                layout.pack(Parts {
                    time: run.time as u64,
                    node: *node,
                    seq: run.seq,
                })
            });
        }
        allocated
    })
}

/// [`next_run`] past its first allocation: wakes or stands in for the renewer, warns, waits and
/// allocates again, as the allocation says.
#[inline(never)]
fn next_run_otherwise(
    shm: Handle,
    layout: &Layout,
    limits: &Limits,
    want: u64,
    first: Allocated,
    slot: Option<Slot>,
) -> Result<(Run, u32), SnowflakeError> {
    // The failure count when this call first waited for a reservation.
    let mut failures_seen: Option<u64> = None;
    let mut waited_on_renewal = false;
    let mut claim_waited_ms = 0;
    let mut next = Some(first);
    loop {
        let allocation = match next.take() {
            Some(first) => first,
            None => allocate(shm, layout, limits, want, slot),
        };
        let (node, allocation) = match allocation {
            Ok(allocated) => allocated,
            Err(Refusing::AwaitingClaim | Refusing::AwaitingLease)
                if claim_waited_ms < CLAIM_WAIT_MS =>
            {
                // The registry's first claim is under way, or the heartbeat a switch to fenced
                // mode makes at once (the renewer broadcasts when either is answered).
                waited_on_renewal = true;
                shm.sleep_until_renewed(100);
                claim_waited_ms += 100;
                pg_sys::check_for_interrupts!();
                continue;
            }
            Err(refusing) => {
                shmem::stop_waiting(waited_on_renewal);
                return Err(refusal_error(shm, refusing));
            }
        };
        match allocation? {
            Allocation::Run {
                run,
                clock_event,
                wake_renewer,
            } => {
                shmem::stop_waiting(waited_on_renewal);
                if wake_renewer {
                    if shm.renewer_running() {
                        shm.wake_the_renewer();
                    } else {
                        // This call's ID is covered already, or is a wake's (past the
                        // reservation, `generator.rs`): it writes the next reservation, which
                        // covers it, before returning it.
                        renew::renew_here(shm);
                    }
                }
                if let Some(event) = clock_event {
                    warn_of(event);
                }
                return Ok((run, node));
            }
            Allocation::Wait { ms } => {
                shmem::stop_waiting(waited_on_renewal);
                waited_on_renewal = false;
                sleep_ms(ms.clamp(1, 10));
            }
            Allocation::AwaitReservation {
                wake_renewer,
                failures,
            } => {
                if failures_seen.is_some_and(|seen| failures > seen) {
                    // The renewal this call waited for failed: its error, as the renewer saw it.
                    shmem::stop_waiting(waited_on_renewal);
                    let failure = shm.shared(|issuer| issuer.last_failure());
                    return Err(match failure {
                        RenewalFailure::Io { errno } => SnowflakeError::state_file_write(errno),
                        RenewalFailure::Fenced { ceiling } => {
                            RegistryError::CeilingReached { ceiling }.into()
                        }
                    });
                }
                failures_seen.get_or_insert(failures);
                if shm.renewer_running() {
                    if wake_renewer {
                        shm.wake_the_renewer();
                    }
                } else if renew::renew_here(shm) {
                    continue;
                }
                // The first call only registers this process on the condition variable, so a
                // broadcast between here and the next check is not missed; then each call
                // sleeps until a renewal is reported (or a second passes), and raises a cancel
                // or statement timeout as an ERROR, with no lock held.
                waited_on_renewal = true;
                shm.sleep_until_renewed(1_000);
            }
        }
    }
}

/// The error that says why no ID may be made now.
#[cold]
fn refusal_error(shm: Handle, refusing: Refusing) -> SnowflakeError {
    let issuer = shm.snapshot();
    match refusing {
        Refusing::NodeUnset => SnowflakeError::NodeUnset {
            max: gucs::layout().max_node(),
        },
        Refusing::AwaitingOldStateFile => SnowflakeError::StateFileNotCopied { path: STATE_FILE },
        _ => refusal::error_of(
            refusing,
            issuer.node().id,
            issuer.registry(),
            gucs::layout(),
            gucs::registry_settings().max_clock_skew_ms,
            CLAIM_WAIT_MS,
        )
        .into(),
    }
}

/// The warning about what the clock did.
fn warn_of(event: ClockEvent) {
    match event {
        ClockEvent::SteppedBack { ms } => SnowflakeError::ClockSteppedBack { ms },
        ClockEvent::JumpHeld { ms } => SnowflakeError::ClockJumpHeld {
            ms,
            confirm_s: FORWARD_CONFIRM_MS / 1_000,
        },
        ClockEvent::JumpFollowed { ms } => SnowflakeError::ClockJumpFollowed { ms },
    }
    .report_warning();
}

/// Waits `ms` milliseconds on the process latch, then raises a pending cancel as an ERROR.
fn sleep_ms(ms: i64) {
    shmem::sleep_on_latch(ms);
    pg_sys::check_for_interrupts!();
}

/// Refuses while the server is in recovery (a standby): it cannot write the WAL record a
/// reservation needs, and its IDs would carry its primary's node id. Recovery only ever ends, so
/// once a backend has seen it over, it does not ask again (saving a guarded FFI call per ID):
/// it then joins the watermark (`watermark::join`: its slot, cleared when its transactions and
/// the process end), and the slot it claimed says from then on that recovery is over.
fn ensure_not_in_recovery() -> Result<Slot, SnowflakeError> {
    if let Some(slot) = shmem::my_slot() {
        return Ok(slot);
    }
    // SAFETY: a plain read of the server's recovery state.
    if unsafe { pg_sys::RecoveryInProgress() } {
        return Err(SnowflakeError::InRecovery);
    }
    watermark::join()
}
