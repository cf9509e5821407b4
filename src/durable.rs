//! Durable reservations: the generator's high-water mark, written ahead of use so that no
//! restart, crash or failover can make the server issue an ID twice. This module writes them
//! (state file and WAL record) and reads the state file at start-up; replaying the WAL record
//! is `wal_redo.rs`'s, the bytes of both are the core's (`state_file`, `wal_record`).
//!
//! A reservation "until T" promises that no ID at time T or later has been issued. It is kept in
//! two places, both written before any ID it covers is handed out:
//!
//! - the state file `pg_snowflake.state` in the data directory, replaced atomically (write a
//!   temporary file, fsync it, rename it over the old one, fsync the directory). On start-up the
//!   generator resumes from it: this covers clean restarts and crashes. pg_basebackup copies it;
//!   pg_upgrade does not (see [`load`]).
//! - a WAL record of pg_snowflake's own resource manager (custom WAL resource managers, id
//!   [`RMGR_ID`]). Its redo raises the generator's floor and rewrites the state file, so a
//!   streaming standby tracks the primary's reservations and, once promoted, issues only IDs
//!   above them. The record is flushed, and with synchronous replication waited for on the
//!   synchronous standbys, before the reservation counts: so every ID handed out, even one only
//!   returned by a SELECT and never stored, is covered on a standby that may be promoted.
//!
//! Both are written by the renewer (`renewer.rs`) ahead of need and with no lock held; see
//! `snowflake_core::generator` for when.
//!
//! The file is the authority at start-up; the WAL raises it during recovery. A damaged or
//! unreadable file stops the server with an error saying how to recover: it never silently
//! resets the generator.

use crate::error::SnowflakeError;
use pgrx::pg_sys;
use snowflake_core::layout::Layout;
use snowflake_core::state_file::{self, State};
use snowflake_core::wal_record;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;

/// The state file, relative to the data directory (every Postgres process's working directory).
pub const STATE_FILE: &str = "pg_snowflake.state";
const STATE_FILE_TMP: &str = "pg_snowflake.state.tmp";

/// pg_snowflake's custom WAL resource manager id (128..255 are for extensions; 128 is the
/// "experimental" id). A clash with another extension's id is reported by Postgres at start-up.
pub const RMGR_ID: u8 = 191;
/// The one record type: "reservation" (payload: `snowflake_core::wal_record`).
pub const XLOG_RESERVATION: u8 = 0x10;

/// Where the generator starts, according to the data directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// No state file: a server that never issued an ID with this extension.
    Fresh,
    /// Continue above this reservation (Unix ms).
    After(i64),
    /// pg_upgrade made this directory and the old one's file was not copied in: refuse to
    /// issue until it is.
    AwaitingCarry,
}

/// How a reservation written by [`reserve`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserved {
    /// In the state file, in the flushed WAL and, with synchronous replication, on the
    /// synchronous standbys: it counts.
    Confirmed,
    /// The process was told to terminate while waiting for the synchronous standbys: the
    /// reservation may not be on them, so it must not count.
    Interrupted,
}

/// Durably records that IDs of `layout` may be issued up to (not including) `until` (Unix ms):
/// the state file, then the WAL record, flushed, then — with synchronous replication
/// (`synchronous_standby_names`) — the wait until the synchronous standbys have flushed it too,
/// so that an ID handed out under it is covered on a standby that may be promoted, even if it
/// was only returned by a SELECT and never stored. Called by the renewer with no lock held;
/// the caller has checked that the server is not in recovery, where WAL cannot be written.
pub fn reserve(layout: &Layout, until: i64) -> Result<Reserved, std::io::Error> {
    let mut buffer = [0u8; state_file::MAX_LEN];
    replace_state_file(state_file::format(layout, until, &mut buffer))?;
    let mut payload = wal_record::encode(until, layout);
    // SAFETY: the payload outlives XLogInsert, which copies it into the WAL. XLogFlush and
    // SyncRepWaitForLSN take the position XLogInsert returned. SyncRepWaitForLSN returns early
    // only when the process is told to terminate (it warns and sets ProcDiePending); it waits
    // only while synchronous_commit asks for a standby, which the renewer forces on and a
    // backend writing its own reservation sets for the write (`renewal::renew_here`); with
    // `commit = false` it waits for the standbys' flush (not apply).
    unsafe {
        pg_sys::XLogBeginInsert();
        register_data(&mut payload);
        let end = pg_sys::XLogInsert(RMGR_ID, XLOG_RESERVATION);
        pg_sys::XLogFlush(end);
        pg_sys::SyncRepWaitForLSN(end, false);
        if pg_sys::ProcDiePending != 0 {
            return Ok(Reserved::Interrupted);
        }
    }
    Ok(Reserved::Confirmed)
}

/// The error of a failed state-file write, from its OS error number (0: unknown).
pub fn write_error_from_errno(errno: i32) -> SnowflakeError {
    write_error(&if errno == 0 {
        std::io::Error::other("unknown error")
    } else {
        std::io::Error::from_raw_os_error(errno)
    })
}

fn write_error(e: &std::io::Error) -> SnowflakeError {
    SnowflakeError::StateFileIo {
        action: "write",
        path: STATE_FILE,
        cause: e.to_string(),
    }
}

/// Hands the record's payload to the WAL insertion in progress. The one place that knows how the
/// signature of `XLogRegisterData` differs between PostgreSQL majors: `(char *, int)` in 15,
/// `(char *, uint32)` in 16 and 17, `(const void *, uint32)` in 18.
///
/// # Safety
/// Between `XLogBeginInsert` and `XLogInsert`; `payload` outlives the `XLogInsert`.
unsafe fn register_data(payload: &mut [u8; wal_record::LEN]) {
    // `as _`: the length's type is the major's, int or uint32; the record's length fits either.
    #[cfg(not(feature = "pg18"))]
    unsafe {
        pg_sys::XLogRegisterData(
            payload.as_mut_ptr().cast::<std::ffi::c_char>(),
            wal_record::LEN as _,
        )
    };
    #[cfg(feature = "pg18")]
    unsafe {
        pg_sys::XLogRegisterData(payload.as_ptr().cast(), wal_record::LEN as u32)
    };
}

/// Where the generator starts, from the state file. A file written under another layout than
/// `configured` is refused: IDs of two layouts do not mix.
///
/// pg_upgrade builds a new data directory without our file. While it runs (binary-upgrade
/// mode), a missing file is replaced by the core's upgrade marker, so that the upgraded server
/// refuses to issue IDs until the old directory's file is copied over it, rather than forget
/// every ID the old server issued.
pub fn load(configured: &Layout) -> Result<Start, SnowflakeError> {
    let bytes = match fs::read(STATE_FILE) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            // SAFETY: a plain read of a flag the postmaster sets from its command line.
            if unsafe { pg_sys::IsBinaryUpgrade } {
                replace_state_file(state_file::UPGRADE_MARKER).map_err(|e| write_error(&e))?;
                return Ok(Start::AwaitingCarry);
            }
            return Ok(Start::Fresh);
        }
        Err(e) => {
            return Err(SnowflakeError::StateFileIo {
                action: "read",
                path: STATE_FILE,
                cause: e.to_string(),
            })
        }
    };
    match state_file::parse(&bytes) {
        Ok(State::Reservation { until, layout }) => {
            state_file::check_layout(&layout, configured)?;
            Ok(Start::After(until))
        }
        Ok(State::AwaitingCarry) => Ok(Start::AwaitingCarry),
        Err(reason) => Err(SnowflakeError::StateFileDamaged {
            path: STATE_FILE,
            reason,
        }),
    }
}

/// Replaces the state file with a reservation until `until`, atomically and durably.
pub fn write_state_file(layout: &Layout, until: i64) -> Result<(), SnowflakeError> {
    let mut buffer = [0u8; state_file::MAX_LEN];
    replace_state_file(state_file::format(layout, until, &mut buffer)).map_err(|e| write_error(&e))
}

/// Writes `contents` to a temporary file, fsyncs it, renames it over the state file and fsyncs
/// the directory.
fn replace_state_file(contents: &[u8]) -> Result<(), std::io::Error> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(STATE_FILE_TMP)?;
    file.write_all(contents)?;
    file.sync_all()?;
    fs::rename(STATE_FILE_TMP, STATE_FILE)?;
    File::open(".").and_then(|dir| dir.sync_all())
}
