//! The few things of the server that pgrx does not give us as we need them: functions called
//! without pgrx's per-call guard, Postgres' own signal handlers, and the calls whose signature
//! differs between PostgreSQL majors. One place, so that a new major is one file to check.
//!
//! Each `cfg` names the majors before a change, from the floor (15) up: `any(..)` for the old
//! form, `not(any(..))` for the form from the next major on. Those lists never grow, so a newer
//! major (its Cargo feature `pgN`) compiles unchanged, with the newest forms.

use pgrx::pg_sys;
use snowflake_core::clock::{wall_now, Clock, SystemClock};
use std::ffi::c_int;

/// `AddinShmemInitLock`: the 22nd of the main LWLocks (`lwlocklist.h`), which pgrx does not
/// name.
pub const ADDIN_SHMEM_INIT_LOCK: usize = 21;

/// Functions called directly, not through pgrx's guard (a thread check and a `sigsetjmp`
/// around each FFI call). Each caller says why no ERROR can cross the call.
pub mod unguarded {
    use pgrx::pg_sys::{LWLock, LWLockMode};
    use std::ffi::c_int;
    unsafe extern "C-unwind" {
        /// Raises only for a backend already holding `MAX_SIMUL_LWLOCKS` LWLocks.
        pub fn LWLockAcquire(lock: *mut LWLock, mode: LWLockMode::Type) -> bool;
        /// Raises only for a lock not held.
        pub fn LWLockRelease(lock: *mut LWLock);
    }

    // Postgres' own signal handlers. Their parameters are `SIGNAL_ARGS`: `int` up to 18,
    // `(int, const pg_signal_info *)` from 19 on.
    #[cfg(any(feature = "pg15", feature = "pg16", feature = "pg17", feature = "pg18"))]
    unsafe extern "C-unwind" {
        /// Postgres' SIGTERM handler for backends: sets ProcDiePending and the latch.
        pub fn die(postgres_signal_arg: c_int);
        /// Postgres' SIGHUP handler for auxiliary processes: sets ConfigReloadPending and the
        /// latch.
        pub fn SignalHandlerForConfigReload(postgres_signal_arg: c_int);
    }
    #[cfg(not(any(feature = "pg15", feature = "pg16", feature = "pg17", feature = "pg18")))]
    unsafe extern "C-unwind" {
        /// Postgres' SIGTERM handler for backends: sets ProcDiePending and the latch.
        pub fn die(postgres_signal_arg: c_int, pg_siginfo: *const pgrx::pg_sys::pg_signal_info);
        /// Postgres' SIGHUP handler for auxiliary processes: sets ConfigReloadPending and the
        /// latch.
        pub fn SignalHandlerForConfigReload(
            postgres_signal_arg: c_int,
            pg_siginfo: *const pgrx::pg_sys::pg_signal_info,
        );
    }
}

/// A Postgres signal handler (`pqsigfunc`): `SIGNAL_ARGS` is `int` up to 18,
/// `(int, const pg_signal_info *)` from 19 on.
#[cfg(any(feature = "pg15", feature = "pg16", feature = "pg17", feature = "pg18"))]
pub type SignalHandler = unsafe extern "C-unwind" fn(c_int);
#[cfg(not(any(feature = "pg15", feature = "pg16", feature = "pg17", feature = "pg18")))]
pub type SignalHandler = unsafe extern "C-unwind" fn(c_int, *const pg_sys::pg_signal_info);

/// Installs `handler` for `signal`; `pqsignal` is named `pqsignal_be` in the server from
/// PostgreSQL 18 on.
pub fn set_signal_handler(signal: u32, handler: SignalHandler) {
    // SAFETY: a valid signal number and handler, installed before signals are unblocked.
    unsafe {
        #[cfg(any(feature = "pg15", feature = "pg16", feature = "pg17"))]
        pg_sys::pqsignal(signal as c_int, Some(handler));
        #[cfg(not(any(feature = "pg15", feature = "pg16", feature = "pg17")))]
        pg_sys::pqsignal_be(signal as c_int, Some(handler));
    }
}

/// Hands `payload` to the WAL insertion in progress. `XLogRegisterData` takes `(char *, int)`
/// in 15, `(char *, uint32)` in 16 and 17, `(const void *, uint32)` from 18 on.
///
/// # Safety
/// Between `XLogBeginInsert` and `XLogInsert`; `payload` outlives the `XLogInsert`.
pub unsafe fn xlog_register_data(payload: &mut [u8]) {
    // `as _`: the length's type is the major's, int or uint32; a record's length fits either.
    #[cfg(any(feature = "pg15", feature = "pg16", feature = "pg17"))]
    unsafe {
        pg_sys::XLogRegisterData(
            payload.as_mut_ptr().cast::<std::ffi::c_char>(),
            payload.len() as _,
        )
    };
    #[cfg(not(any(feature = "pg15", feature = "pg16", feature = "pg17")))]
    unsafe {
        pg_sys::XLogRegisterData(payload.as_ptr().cast(), payload.len() as u32)
    };
}

/// 128 random bits from the server's strong random source (owner tokens, the boot value).
pub fn strong_random() -> u128 {
    let mut bytes = [0u8; 16];
    // SAFETY: a buffer of its stated length.
    if !unsafe { pg_sys::pg_strong_random(bytes.as_mut_ptr().cast(), bytes.len()) } {
        // No strong randomness: the clocks and the pid still make a value no copy shares.
        let mixed = (wall_now() as u128) << 64
            | (SystemClock.monotonic() as u128) << 32
            | u128::from(std::process::id());
        return mixed;
    }
    u128::from_le_bytes(bytes)
}

/// This backend's proc number (its index among the server's PGPROCs): `MyProc->pgprocno` up to
/// 16, `MyProcNumber` from 17 on.
pub fn my_proc_number() -> i64 {
    // SAFETY: plain reads of this process's own identity, set before any SQL runs.
    #[cfg(any(feature = "pg15", feature = "pg16"))]
    unsafe {
        if pg_sys::MyProc.is_null() {
            return -1;
        }
        i64::from((*pg_sys::MyProc).pgprocno)
    }
    #[cfg(not(any(feature = "pg15", feature = "pg16")))]
    unsafe {
        i64::from(pg_sys::MyProcNumber)
    }
}
