//! Durable reservations: the generator's high-water mark, written ahead of use so that no
//! restart, crash or failover can make the server issue an ID twice.
//!
//! A reservation "until T" promises that no ID at time T or later has been issued. It is kept in
//! two places, both written before any ID it covers is handed out:
//!
//! - the state file `pg_snowflake.state` in the data directory, replaced atomically (write a
//!   temporary file, fsync it, rename it over the old one, fsync the directory). On start-up the
//!   generator resumes from it: this covers clean restarts and crashes. pg_basebackup copies it.
//! - a WAL record of pg_snowflake's own resource manager (Postgres 15 custom WAL resource
//!   managers, id [`RMGR_ID`]). Its redo raises the generator's floor and rewrites the state file,
//!   so a streaming standby tracks the primary's reservations and, once promoted, issues only
//!   IDs above them. The record needs no flush of its own: WAL is replayed in order, and every
//!   row carrying a covered ID is written to the WAL after the record, so a standby that has the
//!   row has the reservation too.
//!
//! The file is the authority at start-up; the WAL raises it during recovery. A damaged or
//! unreadable file stops the server with an error saying how to recover: it never silently
//! resets the generator.

use crate::error::SnowflakeError;
use crate::shmem;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::{c_char, CStr};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;

/// The state file, relative to the data directory (every Postgres process's working directory).
pub const STATE_FILE: &str = "pg_snowflake.state";
const STATE_FILE_TMP: &str = "pg_snowflake.state.tmp";
const FORMAT_TAG: &str = "pg_snowflake reservation v1";

/// pg_snowflake's custom WAL resource manager id (128..255 are for extensions; 128 is the
/// "experimental" id). A clash with another extension's id is reported by Postgres at start-up.
pub const RMGR_ID: u8 = 191;
const RMGR_NAME: &CStr = c"pg_snowflake";
/// The one record type: "reservation", carrying the reserved-until time as 8 little-endian bytes.
const XLOG_RESERVATION: u8 = 0x10;

/// Registers the WAL resource manager. Only valid from `_PG_init` while preloading.
pub fn register_wal_resource_manager() {
    static mut RMGR: pg_sys::RmgrData = pg_sys::RmgrData {
        rm_name: RMGR_NAME.as_ptr(),
        rm_redo: Some(redo),
        rm_desc: Some(describe),
        rm_identify: Some(identify),
        rm_startup: None,
        rm_cleanup: None,
        rm_mask: None,
        rm_decode: None,
    };
    // SAFETY: called once, from _PG_init in the postmaster; Postgres copies the struct.
    unsafe { pg_sys::RegisterCustomRmgr(RMGR_ID, &raw mut RMGR) };
}

/// Durably records that IDs may be issued up to (not including) `until` (Unix ms). Called under
/// the generator's lock, once per reservation (by default once a second of issued time).
pub fn reserve(until: i64) -> Result<(), SnowflakeError> {
    write_state_file(until)?;
    let mut payload = until.to_le_bytes();
    // SAFETY: the payload outlives XLogInsert, which copies it into the WAL. Callers have checked
    // that the server is not in recovery, where WAL cannot be written.
    unsafe {
        pg_sys::XLogBeginInsert();
        pg_sys::XLogRegisterData(payload.as_mut_ptr().cast::<c_char>(), payload.len() as i32);
        pg_sys::XLogInsert(RMGR_ID, XLOG_RESERVATION);
    }
    Ok(())
}

/// The reservation recorded in the state file, or `None` if there is no file (a server that
/// never issued an ID with this extension).
pub fn load() -> Result<Option<i64>, SnowflakeError> {
    match fs::read(STATE_FILE) {
        Ok(bytes) => {
            parse_state(&bytes)
                .map(Some)
                .map_err(|reason| SnowflakeError::StateFileDamaged {
                    path: STATE_FILE,
                    reason,
                })
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SnowflakeError::StateFileIo {
            action: "read",
            path: STATE_FILE,
            cause: e.to_string(),
        }),
    }
}

/// Replaces the state file atomically and durably.
pub fn write_state_file(until: i64) -> Result<(), SnowflakeError> {
    let io_error = |e: std::io::Error| SnowflakeError::StateFileIo {
        action: "write",
        path: STATE_FILE,
        cause: e.to_string(),
    };
    let mut buffer = [0u8; 128];
    let text = format_state(until, &mut buffer);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(STATE_FILE_TMP)
        .map_err(io_error)?;
    file.write_all(text).map_err(io_error)?;
    file.sync_all().map_err(io_error)?;
    fs::rename(STATE_FILE_TMP, STATE_FILE).map_err(io_error)?;
    File::open(".")
        .and_then(|dir| dir.sync_all())
        .map_err(io_error)
}

/// The state file's one line, `<tag> until=<unix ms> check=<hex>`, written into `buffer`
/// without allocating (this runs under the generator's lock).
fn format_state(until: i64, buffer: &mut [u8; 128]) -> &[u8] {
    let mut cursor = &mut buffer[..];
    let capacity = cursor.len();
    writeln!(
        cursor,
        "{FORMAT_TAG} until={until} check={:016x}",
        checksum(until)
    )
    .expect("the state line fits in 128 bytes");
    let written = capacity - cursor.len();
    &buffer[..written]
}

/// Reads a state file's contents back; any deviation from the format is an error.
fn parse_state(bytes: &[u8]) -> Result<i64, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "it is not text".to_string())?;
    let line = text
        .strip_suffix('\n')
        .ok_or_else(|| "it does not end with a newline (truncated?)".to_string())?;
    let rest = line
        .strip_prefix(FORMAT_TAG)
        .and_then(|r| r.strip_prefix(" until="))
        .ok_or_else(|| format!("it does not start with \"{FORMAT_TAG} until=\""))?;
    let (until, check) = rest
        .split_once(" check=")
        .ok_or_else(|| "it has no check field".to_string())?;
    let until: i64 = until
        .parse()
        .map_err(|_| format!("\"{until}\" is not a time"))?;
    if check != format!("{:016x}", checksum(until)) {
        return Err("its check value does not match its contents".into());
    }
    Ok(until)
}

/// FNV-1a over the reservation's bytes: enough to tell a damaged file from a good one.
fn checksum(until: i64) -> u64 {
    until
        .to_le_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// The reservation carried by one of our WAL records.
///
/// # Safety
/// `record` is a decoded record of our resource manager, as Postgres passes to redo and desc.
unsafe fn record_reservation(record: *mut pg_sys::XLogReaderState) -> Option<i64> {
    let decoded = unsafe { &*(*record).record };
    let info = decoded.header.xl_info & !(pg_sys::XLR_INFO_MASK as u8);
    if info != XLOG_RESERVATION || decoded.main_data_len != 8 {
        return None;
    }
    let bytes = unsafe { std::slice::from_raw_parts(decoded.main_data.cast::<u8>(), 8) };
    Some(i64::from_le_bytes(bytes.try_into().ok()?))
}

#[pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    match unsafe { record_reservation(record) } {
        Some(until) => shmem::replay_reservation(until).unwrap_or_else(|e| e.report_fatal()),
        None => SnowflakeError::UnknownWalRecord.report_fatal(),
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn describe(
    buf: pg_sys::StringInfo,
    record: *mut pg_sys::XLogReaderState,
) {
    if let Some(until) = unsafe { record_reservation(record) } {
        let text = format!("until {until}\0");
        unsafe { pg_sys::appendStringInfoString(buf, text.as_ptr().cast()) };
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn identify(info: u8) -> *const c_char {
    if info & !(pg_sys::XLR_INFO_MASK as u8) == XLOG_RESERVATION {
        c"RESERVATION".as_ptr()
    } else {
        std::ptr::null()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn formatted(until: i64) -> Vec<u8> {
        let mut buffer = [0u8; 128];
        format_state(until, &mut buffer).to_vec()
    }

    #[test]
    fn state_round_trips_over_the_whole_range() {
        for until in [
            i64::MIN,
            -1,
            0,
            1,
            1_704_067_200_000,
            3_903_090_455_552,
            i64::MAX,
        ] {
            assert_eq!(parse_state(&formatted(until)), Ok(until));
        }
    }

    #[test]
    fn state_line_is_readable() {
        let line = String::from_utf8(formatted(1_704_067_201_000)).unwrap();
        assert!(line.starts_with("pg_snowflake reservation v1 until=1704067201000 check="));
        assert!(line.ends_with('\n'));
    }

    #[test]
    fn damaged_state_is_refused_with_a_reason() {
        let good = formatted(1_704_067_201_000);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![], "does not end with a newline"),
            (
                good[..good.len() - 1].to_vec(),
                "does not end with a newline",
            ),
            (good[..20].to_vec(), "does not end with a newline"),
            (b"hello\n".to_vec(), "does not start with"),
            (vec![0xff, 0xfe, b'\n'], "not text"),
            (
                String::from_utf8(good.clone())
                    .unwrap()
                    .replace("until=1704067201000", "until=1704067209000")
                    .into_bytes(),
                "check value does not match",
            ),
            (
                b"pg_snowflake reservation v1 until=x check=0\n".to_vec(),
                "is not a time",
            ),
            (
                b"pg_snowflake reservation v1 until=5\n".to_vec(),
                "no check field",
            ),
        ];
        for (bytes, reason) in cases {
            let err = parse_state(&bytes).unwrap_err();
            assert!(err.contains(reason), "{bytes:?}: {err}");
        }
    }
}
