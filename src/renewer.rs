//! The renewer: a background worker that writes the generator's durable reservations ahead of
//! need, so that no caller of `snowflake_nextval()` waits for a disk on the normal path.
//!
//! Calls raise the demand for a reservation under the generator's lock once less than half of
//! the current one remains, and signal the renewer (`shmem::wake_the_renewer`). The renewer
//! claims the renewal (the generator's flag: one writer at a time), writes it with no lock held
//! — state file, WAL record, flush, and the wait for the synchronous standbys —, and reports it;
//! only then may IDs under it be issued, and every caller waiting for it is woken. On every turn
//! of its loop (at least every quarter reservation, at most every second) it also keeps the
//! reservation ahead of the clock for a minute after the last call and after its own start
//! (`renewal::keep_ahead`), so that a call after a pause, or the first after a restart, does
//! not wait. A caller waits only when the issued time has caught up with the reservation, and
//! then on a condition variable, interruptibly.
//!
//! A write that fails (a full or unwritable disk) is retried after a pause that doubles from
//! 10 ms to half a second, and logged at most once every ten seconds, with the count of the
//! failures not logged: a full disk does not flood the log.
//!
//! The renewer starts once recovery is over (on a standby: when it is promoted), is restarted
//! a second after it exits, and on start releases a claim its predecessor left. Its SIGTERM
//! handler is Postgres' own `die`, so a wait for a standby that never answers ends at shutdown
//! (and the renewal then does not count); on SIGHUP it rereads postgresql.conf like every other
//! server process, so a reload reaches its `pg_snowflake.reservation_ms`. It waits for the
//! synchronous standbys whatever `synchronous_commit` says in postgresql.conf: that setting
//! trades commits' durability, and the reservation must hold for every ID handed out. Each turn
//! of its loop is a sign of life (`shmem::renewer_is_alive`). Where no renewer runs —
//! single-user mode, a `max_worker_processes` too small to register it, a renewer stopped or
//! silent for 3 s — the call that needs a renewal writes it itself (`renewal::renew_here`,
//! through `renewal::renew`, the same function this loop calls); a renewer that starts while
//! such a call writes leaves its claim alone.

use crate::error::SnowflakeError;
use crate::renewal::{self, Renewal};
use crate::{durable, shmem};
use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::prelude::*;
use snowflake_core::clock::{wall_now, Clock, SystemClock};
use snowflake_core::retry::{Backoff, LogThrottle};
use std::ffi::c_int;
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

mod unguarded {
    use std::ffi::c_int;
    unsafe extern "C-unwind" {
        /// Postgres' SIGTERM handler for backends: sets ProcDiePending and the latch.
        pub fn die(postgres_signal_arg: c_int);
        /// Postgres' SIGHUP handler for auxiliary processes: sets ConfigReloadPending and the
        /// latch.
        pub fn SignalHandlerForConfigReload(postgres_signal_arg: c_int);
    }
}

/// Installs `handler` for `signal`; `pqsignal` is named `pqsignal_be` in the server from
/// PostgreSQL 18 on.
fn set_signal_handler(signal: u32, handler: unsafe extern "C-unwind" fn(c_int)) {
    // SAFETY: a valid signal number and handler, installed before signals are unblocked.
    unsafe {
        #[cfg(not(feature = "pg18"))]
        pg_sys::pqsignal(signal as c_int, Some(handler));
        #[cfg(feature = "pg18")]
        pg_sys::pqsignal_be(signal as c_int, Some(handler));
    }
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
    renewal::release_abandoned_claim();
    let started_at = wall_now();
    let mut backoff = Backoff::new(RETRY_FIRST_MS, RETRY_MAX_MS);
    let mut failure_log = LogThrottle::new(FAILURE_LOG_INTERVAL_MS);
    loop {
        pg_sys::check_for_interrupts!();
        reload_config_if_asked();
        shmem::renewer_is_alive();
        let next_turn_ms = renewal::keep_ahead(started_at);
        match renewal::claim_renewal(true) {
            Some(claim) => {
                shmem::stop_sleeping();
                match renewal::renew(claim) {
                    Renewal::Done { .. } => {
                        backoff.succeeded();
                        failure_log.reset();
                    }
                    Renewal::Failed { errno } => {
                        if let Some(not_logged) = failure_log.due(SystemClock.monotonic()) {
                            SnowflakeError::ReservationsFailing {
                                cause: durable::write_error_from_errno(errno).message().text,
                                not_logged,
                            }
                            .report_warning();
                        }
                        shmem::sleep_on_latch(backoff.failed());
                    }
                    Renewal::Abandoned => {}
                }
            }
            None => shmem::sleep_until_renewal_due(next_turn_ms),
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
