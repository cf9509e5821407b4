//! The renewer: the background worker that conducts both wings. On each round of its loop it first
//! runs the registry's round (`registry/link.rs`: the claim, the heartbeats, the clock check),
//! then writes the reservations ahead of need (`reservation/renew.rs` takes the writer's turn,
//! writes and reports each one; the protocol: `core/src/generator/reservation.rs`). It starts once
//! recovery is over, is restarted a second after it exits, and on start gives back a writer's turn
//! its predecessor left. A failed write is retried after a pause doubling from 10 ms to half a
//! second and logged at most once in ten seconds, so a full disk does not flood the log. SIGTERM is
//! Postgres' own `die`, so a wait for a standby that never answers ends at shutdown (that renewal
//! then does not count); SIGHUP rereads postgresql.conf; `synchronous_commit` is forced on, because
//! the reservation must hold for every ID handed out, not only commits.

use crate::error::SnowflakeError;
use crate::gucs;
use crate::pg::{set_signal_handler, unguarded};
use crate::registry::link::Link;
use crate::reservation::renew::{self, Renewal};
use crate::shmem;
use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::prelude::*;
use snowflake_core::clock::{wall_now, Clock, SystemClock};
use snowflake_core::retry::{Backoff, LogThrottle};
use std::time::Duration;

/// After a failed write, the renewer waits this long before the next, doubling up to
/// `RETRY_MAX_MS`: a full disk is not hammered, and IDs flow again within half a second of
/// space returning.
const RETRY_FIRST_MS: i64 = 10;
const RETRY_MAX_MS: i64 = 500;
/// The failure is logged at most once in this long (with the count of those not logged).
const FAILURE_LOG_INTERVAL_MS: i64 = 10_000;

/// Registers the renewer. Only valid from `_PG_init` while preloading.
pub fn register() {
    BackgroundWorkerBuilder::new("pg_snowflake renewer")
        .set_type("pg_snowflake renewer")
        .set_library("pg_snowflake")
        .set_function("pg_snowflake_renewer_main")
        .enable_shmem_access(None)
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

/// The renewer's main loop.
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn pg_snowflake_renewer_main(_arg: pg_sys::Datum) {
    set_signal_handler(pg_sys::SIGTERM, unguarded::die);
    // A background worker starts with SIGHUP ignored: without this, a reload would never
    // reach the renewer's pg_snowflake.reservation_ms (keep_ahead reads it).
    set_signal_handler(pg_sys::SIGHUP, unguarded::SignalHandlerForConfigReload);
    // SAFETY: called once at the worker's start, from its only thread.
    unsafe {
        pg_sys::BackgroundWorkerUnblockSignals();
        pg_sys::SetConfigOption(
            c"synchronous_commit".as_ptr(),
            c"on".as_ptr(),
            pg_sys::GucContext::PGC_SUSET,
            pg_sys::GucSource::PGC_S_OVERRIDE,
        );
    }
    // The worker is registered only by a preloaded library: the region is there.
    let shm = shmem::get().unwrap_or_else(|e| e.report_fatal());
    renew::give_back_abandoned_turn(shm);
    let started_at = wall_now();
    let mut backoff = Backoff::new(RETRY_FIRST_MS, RETRY_MAX_MS);
    let mut failure_log = LogThrottle::new(FAILURE_LOG_INTERVAL_MS);
    // With a registry, the renewer also claims the node id and keeps its lease.
    let mut link = gucs::registry().map(|conninfo| Link::new(conninfo, shm));
    if link.is_some() {
        crate::registry::link::release_on_exit();
    }
    loop {
        pg_sys::check_for_interrupts!();
        reload_config_if_asked();
        shm.renewer_is_alive();
        let registry_due_ms = link.as_mut().map_or(1_000, |link| link.round(shm));
        shm.renewer_is_alive();
        let next_round_ms = renew::keep_ahead(shm, started_at).min(registry_due_ms);
        match renew::renewal_turn(shm, true) {
            Some(turn) => {
                // Off the condition variable before a write that may take long.
                shmem::stop_waiting(true);
                match renew::renew(turn) {
                    Renewal::Done { .. } => {
                        backoff.succeeded();
                        failure_log.reset();
                    }
                    Renewal::Failed { errno } => {
                        if let Some(not_logged) = failure_log.due(SystemClock.monotonic()) {
                            SnowflakeError::ReservationsFailing {
                                cause: SnowflakeError::state_file_write(errno).message().text,
                                not_logged,
                            }
                            .report_warning();
                        }
                        shmem::sleep_on_latch(backoff.failed());
                    }
                    // Fenced: a heartbeat must extend the lease first (the next one).
                    Renewal::Fenced { .. } => shmem::sleep_on_latch(backoff.failed()),
                    Renewal::Abandoned | Renewal::GivenBack => {}
                }
            }
            None => shm.sleep_until_renewal_due(next_round_ms),
        }
    }
}

/// Rereads postgresql.conf after a SIGHUP (`pg_ctl reload`, `pg_reload_conf()`), as every
/// other server process does between commands.
fn reload_config_if_asked() {
    // SAFETY: a flag set by our SIGHUP handler, read and cleared on this process's only
    // thread; ProcessConfigFile is how every auxiliary process reloads.
    unsafe {
        if pg_sys::ConfigReloadPending != 0 {
            pg_sys::ConfigReloadPending = 0;
            pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
        }
    }
}
