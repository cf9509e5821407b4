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
use crate::layout::Layout;
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
/// The one record type: "reservation", carrying the reserved-until time and the layout as
/// little-endian integers (until, epoch, unit: 8 bytes each; node and sequence bits: 4 each).
const XLOG_RESERVATION: u8 = 0x10;
const RECORD_LEN: usize = 32;

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

/// Durably records that IDs of `layout` may be issued up to (not including) `until` (Unix ms).
/// Called under the generator's lock, once per reservation (by default once a second of issued
/// time).
pub fn reserve(layout: &Layout, until: i64) -> Result<(), SnowflakeError> {
    write_state_file(layout, until)?;
    let mut payload = [0u8; RECORD_LEN];
    payload[..8].copy_from_slice(&until.to_le_bytes());
    payload[8..16].copy_from_slice(&layout.epoch_unix_ms.to_le_bytes());
    payload[16..24].copy_from_slice(&layout.unit_ms.to_le_bytes());
    payload[24..28].copy_from_slice(&layout.node_bits.to_le_bytes());
    payload[28..32].copy_from_slice(&layout.seq_bits.to_le_bytes());
    // SAFETY: the payload outlives XLogInsert, which copies it into the WAL. Callers have checked
    // that the server is not in recovery, where WAL cannot be written.
    unsafe {
        pg_sys::XLogBeginInsert();
        register_data(&mut payload);
        pg_sys::XLogInsert(RMGR_ID, XLOG_RESERVATION);
    }
    Ok(())
}

/// Hands the record's payload to the WAL insertion in progress. The one place that knows how the
/// signature of `XLogRegisterData` differs between PostgreSQL majors.
///
/// # Safety
/// Between `XLogBeginInsert` and `XLogInsert`; `payload` outlives the `XLogInsert`.
unsafe fn register_data(payload: &mut [u8; RECORD_LEN]) {
    #[cfg(not(feature = "pg18"))]
    unsafe {
        pg_sys::XLogRegisterData(payload.as_mut_ptr().cast::<c_char>(), RECORD_LEN as i32)
    };
    #[cfg(feature = "pg18")]
    unsafe {
        pg_sys::XLogRegisterData(payload.as_ptr().cast(), RECORD_LEN as u32)
    };
}

/// The reservation recorded in the state file, or `None` if there is no file (a server that
/// never issued an ID with this extension). A file written under another layout than
/// `configured` is refused: IDs of two layouts do not mix.
pub fn load(configured: &Layout) -> Result<Option<i64>, SnowflakeError> {
    let bytes = match fs::read(STATE_FILE) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(SnowflakeError::StateFileIo {
                action: "read",
                path: STATE_FILE,
                cause: e.to_string(),
            })
        }
    };
    let (until, recorded) =
        parse_state(&bytes).map_err(|reason| SnowflakeError::StateFileDamaged {
            path: STATE_FILE,
            reason,
        })?;
    check_layout(&recorded, configured)?;
    Ok(Some(until))
}

/// Refuses a reservation made under another layout than this server's.
pub fn check_layout(recorded: &Layout, configured: &Layout) -> Result<(), SnowflakeError> {
    if recorded == configured {
        Ok(())
    } else {
        Err(SnowflakeError::LayoutChanged {
            recorded: recorded.describe(),
            configured: configured.describe(),
        })
    }
}

/// Replaces the state file atomically and durably.
pub fn write_state_file(layout: &Layout, until: i64) -> Result<(), SnowflakeError> {
    let io_error = |e: std::io::Error| SnowflakeError::StateFileIo {
        action: "write",
        path: STATE_FILE,
        cause: e.to_string(),
    };
    let mut buffer = [0u8; 192];
    let text = format_state(layout, until, &mut buffer);
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

/// The state file's one line, `<tag> until=<unix ms> layout=<epoch>/<unit>/<node>/<seq>
/// check=<hex>`, written into `buffer` without allocating (this runs under the generator's lock).
fn format_state<'a>(layout: &Layout, until: i64, buffer: &'a mut [u8; 192]) -> &'a [u8] {
    let capacity = buffer.len();
    let mut cursor = &mut buffer[..];
    write!(
        cursor,
        "{FORMAT_TAG} until={until} layout={}/{}/{}/{}",
        layout.epoch_unix_ms, layout.unit_ms, layout.node_bits, layout.seq_bits
    )
    .expect("the state line fits in 192 bytes");
    let body_len = capacity - cursor.len();
    let check = checksum(&buffer[..body_len]);
    let mut cursor = &mut buffer[body_len..];
    writeln!(cursor, " check={check:016x}").expect("the state line fits in 192 bytes");
    let written = capacity - cursor.len();
    &buffer[..written]
}

/// Reads a state file's contents back; any deviation from the format is an error.
fn parse_state(bytes: &[u8]) -> Result<(i64, Layout), String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "it is not text".to_string())?;
    let line = text
        .strip_suffix('\n')
        .ok_or_else(|| "it does not end with a newline (truncated?)".to_string())?;
    let (body, check) = line
        .rsplit_once(" check=")
        .ok_or_else(|| "it has no check field".to_string())?;
    if check != format!("{:016x}", checksum(body.as_bytes())) {
        return Err("its check value does not match its contents".into());
    }
    let rest = body
        .strip_prefix(FORMAT_TAG)
        .and_then(|r| r.strip_prefix(" until="))
        .ok_or_else(|| format!("it does not start with \"{FORMAT_TAG} until=\""))?;
    let (until, layout) = rest
        .split_once(" layout=")
        .ok_or_else(|| "it has no layout field".to_string())?;
    let until: i64 = until
        .parse()
        .map_err(|_| format!("\"{until}\" is not a time"))?;
    let fields: Vec<i64> = layout
        .split('/')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| format!("\"{layout}\" is not a layout"))?;
    let [epoch, unit, node_bits, seq_bits] = fields[..] else {
        return Err(format!("\"{layout}\" is not a layout"));
    };
    let layout = Layout::from_parts(epoch, unit, node_bits as u32, seq_bits as u32)
        .map_err(|e| format!("its layout is invalid: {}", e.detail().unwrap_or_default()))?;
    Ok((until, layout))
}

/// FNV-1a over the line's bytes: enough to tell a damaged file from a good one.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The reservation carried by one of our WAL records: until, and the layout it was made under.
///
/// # Safety
/// `record` is a decoded record of our resource manager, as Postgres passes to redo and desc.
unsafe fn record_reservation(record: *mut pg_sys::XLogReaderState) -> Option<(i64, Layout)> {
    let decoded = unsafe { &*(*record).record };
    let info = decoded.header.xl_info & !(pg_sys::XLR_INFO_MASK as u8);
    if info != XLOG_RESERVATION || decoded.main_data_len as usize != RECORD_LEN {
        return None;
    }
    let bytes = unsafe { std::slice::from_raw_parts(decoded.main_data.cast::<u8>(), RECORD_LEN) };
    let i64_at = |at: usize| i64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default());
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default());
    let layout = Layout::from_parts(i64_at(8), i64_at(16), u32_at(24), u32_at(28)).ok()?;
    Some((i64_at(0), layout))
}

#[pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    match unsafe { record_reservation(record) } {
        Some((until, layout)) => {
            shmem::replay_reservation(&layout, until).unwrap_or_else(|e| e.report_fatal())
        }
        None => SnowflakeError::UnknownWalRecord.report_fatal(),
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn describe(
    buf: pg_sys::StringInfo,
    record: *mut pg_sys::XLogReaderState,
) {
    if let Some((until, layout)) = unsafe { record_reservation(record) } {
        let text = format!("until {until}; layout {}\0", layout.describe());
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
    use crate::layout::DEFAULT_LAYOUT;

    fn formatted(layout: &Layout, until: i64) -> Vec<u8> {
        let mut buffer = [0u8; 192];
        format_state(layout, until, &mut buffer).to_vec()
    }

    /// A line with a correct check value, whatever its body says.
    fn with_check(body: &str) -> Vec<u8> {
        format!("{body} check={:016x}\n", checksum(body.as_bytes())).into_bytes()
    }

    #[test]
    fn state_round_trips_over_the_whole_range() {
        let seconds = Layout::from_parts(1_700_000_000_000, 1000, 22, 9).unwrap();
        for layout in [DEFAULT_LAYOUT, seconds] {
            for until in [
                i64::MIN,
                -1,
                0,
                1,
                1_704_067_200_000,
                3_903_090_455_552,
                i64::MAX,
            ] {
                assert_eq!(parse_state(&formatted(&layout, until)), Ok((until, layout)));
            }
        }
    }

    #[test]
    fn state_line_is_readable() {
        let line = String::from_utf8(formatted(&DEFAULT_LAYOUT, 1_704_067_201_000)).unwrap();
        assert!(line.starts_with(
            "pg_snowflake reservation v1 until=1704067201000 layout=1704067200000/1/10/12 check="
        ));
        assert!(line.ends_with('\n'));
    }

    #[test]
    fn a_reservation_of_another_layout_is_refused() {
        let other = Layout::from_parts(DEFAULT_LAYOUT.epoch_unix_ms, 10, 10, 12).unwrap();
        assert_eq!(
            check_layout(&other, &DEFAULT_LAYOUT),
            Err(SnowflakeError::LayoutChanged {
                recorded: other.describe(),
                configured: DEFAULT_LAYOUT.describe()
            })
        );
        assert_eq!(check_layout(&DEFAULT_LAYOUT, &DEFAULT_LAYOUT), Ok(()));
    }

    #[test]
    fn damaged_state_is_refused_with_a_reason() {
        let good = formatted(&DEFAULT_LAYOUT, 1_704_067_201_000);
        let changed = String::from_utf8(good.clone())
            .unwrap()
            .replace("until=1704067201000", "until=1704067209000");
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![], "does not end with a newline"),
            (
                good[..good.len() - 1].to_vec(),
                "does not end with a newline",
            ),
            (good[..20].to_vec(), "does not end with a newline"),
            (b"hello\n".to_vec(), "no check field"),
            (vec![0xff, 0xfe, b'\n'], "not text"),
            (changed.into_bytes(), "check value does not match"),
            (with_check("hello"), "does not start with"),
            (
                with_check("pg_snowflake reservation v1 until=5"),
                "no layout field",
            ),
            (
                with_check("pg_snowflake reservation v1 until=x layout=0/1/10/12"),
                "is not a time",
            ),
            (
                with_check("pg_snowflake reservation v1 until=5 layout=0/1/10"),
                "is not a layout",
            ),
            (
                with_check("pg_snowflake reservation v1 until=5 layout=0/0/10/12"),
                "its layout is invalid",
            ),
        ];
        for (bytes, reason) in cases {
            let err = parse_state(&bytes).unwrap_err();
            assert!(err.contains(reason), "{bytes:?}: {err}");
        }
    }
}
