//! Where a reservation is kept: written by [`reserve`] (the state file, then the WAL record,
//! flushed and confirmed by the synchronous standbys) and read at start-up ([`start_state`]:
//! the file is the authority then; WAL redo raises it during recovery, `redo.rs`). The bytes of
//! both are the core's (`state_file`, `wal_record`). A damaged or unreadable file stops the
//! server with an error saying how to recover: it never silently resets the generator.
//! pg_basebackup copies the file; pg_upgrade does not (see [`load`]).

use crate::error::{SnowflakeError, STATE_FILE};
use crate::gucs;
use crate::pg::xlog_register_data;
use pgrx::pg_sys;
use snowflake_core::issuer::Issuer;
use snowflake_core::layout::Layout;
use snowflake_core::node::{Boot, Durable, Found, Node, Settings, Switch};
use snowflake_core::registry::Identity;
use snowflake_core::state_file::{self, History, Reservation, State};
use snowflake_core::wal_record;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

const STATE_FILE_TMP: &str = "pg_snowflake.state.tmp";
/// The file that makes a server start as a standby (PostgreSQL 12 and later).
const STANDBY_SIGNAL: &str = "standby.signal";
/// Where a damaged state file is moved when a registry is to assign the node id (the state
/// file then holds `state_file::HISTORY_LOST_MARKER` until the first claim).
const STATE_FILE_DAMAGED: &str = "pg_snowflake.state.damaged";
/// Where a binary-upgrade start moves a reservation the new cluster wrote itself (see [`load`]).
const STATE_FILE_BEFORE_UPGRADE: &str = "pg_snowflake.state.before-upgrade";
/// The directory pg_upgrade (PostgreSQL 15 and later) keeps in the *new* data directory while it
/// runs, `--check` included.
const PG_UPGRADE_OUTPUT_DIR: &str = "pg_upgrade_output.d";

/// pg_snowflake's custom WAL resource manager id (128..255 are for extensions; 128 is the
/// "experimental" id). A clash with another extension's id is reported by Postgres at start-up.
/// Not yet entered on the PostgreSQL wiki's list of custom resource managers
/// (https://wiki.postgresql.org/wiki/CustomWALResourceManagers): to do at the first release
/// outside this repository.
pub const RMGR_ID: u8 = 191;
/// The record type "reservation" (payload: `snowflake_core::wal_record`); the other,
/// "backfill", is `backfill::XLOG_BACKFILL`.
pub const XLOG_RESERVATION: u8 = 0x10;

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

/// Durably records that IDs of `layout` and `node` may be issued up to (not including) `until`
/// (Unix ms), with the node ids used here before (`history`): the state file, then the WAL
/// record, flushed, then — with synchronous replication
/// (`synchronous_standby_names`) — the wait until the synchronous standbys have flushed it too,
/// so that an ID handed out under it is covered on a standby that may be promoted, even if it
/// was only returned by a SELECT and never stored. Called by the renewer with no lock held;
/// the caller has checked that the server is not in recovery, where WAL cannot be written.
pub fn reserve(
    layout: &Layout,
    until: i64,
    node: u32,
    history: &History,
    identity: Option<Identity>,
) -> Result<Reserved, std::io::Error> {
    replace_state_file(&state_line(layout, until, Some(node), history, identity))?;
    let (mut buffer, len) = wal_record::encode(until, layout, node, identity);
    let payload = &mut buffer[..len];
    // SAFETY: the payload outlives XLogInsert, which copies it into the WAL. XLogFlush and
    // SyncRepWaitForLSN take the position XLogInsert returned. SyncRepWaitForLSN returns early
    // when the process is told to terminate (it warns; a backend writing for itself holds
    // interrupts, `renew::renew_here`, so the warning cannot end it inside; the renewer may end
    // there, and its writer's turn ends abandoned on its way out); it waits
    // only while synchronous_commit asks for a standby, which the renewer forces on and a
    // backend writing its own reservation sets for the write (`renew::renew_here`); with
    // `commit = false` it waits for the standbys' flush (not apply).
    unsafe {
        pg_sys::XLogBeginInsert();
        xlog_register_data(payload);
        let end = pg_sys::XLogInsert(RMGR_ID, XLOG_RESERVATION);
        pg_sys::XLogFlush(end);
        pg_sys::SyncRepWaitForLSN(end, false);
        if pg_sys::ProcDiePending != 0 {
            return Ok(Reserved::Interrupted);
        }
    }
    Ok(Reserved::Confirmed)
}

/// Whether the control file says the server was shut down cleanly before this start (read as
/// shared memory is made, before recovery rewrites it): not a crash, not a copy of a running
/// server (pg_basebackup, a snapshot, a cloned VM), not a standby. Its state is the fifth
/// 32-bit word of `global/pg_control` on every major (after the system identifier and two
/// version numbers), `DB_SHUTDOWNED` being 1 (`catalog/pg_control.h`). Unreadable: no.
fn stopped_cleanly() -> bool {
    const DB_SHUTDOWNED: u32 = 1;
    let mut head = [0u8; 20];
    File::open("global/pg_control")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok_and(|()| {
            u32::from_ne_bytes([head[16], head[17], head[18], head[19]]) == DB_SHUTDOWNED
        })
}

/// Where this data directory lies (`Boot::place`): this host, as its host name and machine id
/// name it, and the directory's device and inode (the postmaster's working directory). Measured
/// at each start, written nowhere, so that no copy of the data directory carries it. A directory
/// that cannot be measured gets a place of its own for this start: it then passes for no
/// planned restart, and waits as a restart from a crash does.
fn place() -> u64 {
    use std::os::unix::fs::MetadataExt;
    let host = ["/proc/sys/kernel/hostname", "/etc/machine-id"]
        .map(|path| {
            fs::read_to_string(path)
                .unwrap_or_default()
                .trim()
                .to_string()
        })
        .join("\n");
    match fs::metadata(".") {
        Ok(directory) => Boot::place_of(&host, directory.dev(), directory.ino()),
        Err(_) => crate::pg::strong_random() as u64,
    }
}

impl SnowflakeError {
    /// The error of a failed state-file write, from its OS error number (0: unknown).
    pub fn state_file_write(errno: i32) -> SnowflakeError {
        let cause = if errno == 0 {
            std::io::Error::other("unknown error")
        } else {
            std::io::Error::from_raw_os_error(errno)
        };
        SnowflakeError::StateFileIo {
            action: "write",
            path: STATE_FILE,
            cause: cause.to_string(),
        }
    }
}

fn write_error(e: &std::io::Error) -> SnowflakeError {
    SnowflakeError::state_file_write(e.raw_os_error().unwrap_or(0))
}

/// What the shared region starts with (`shmem::init`'s callback): the generator and the
/// identity resumed from the state file (`Node::start` decides; this reads and checks the
/// file), for this server's layout and node id. Stops the server when the file cannot say —
/// unless a registry is to assign the node id (`pg_snowflake.node_id` unset): then a damaged
/// file is moved aside and the server starts with its history lost, which only a registry that
/// has seen this server before gives an id to (`registry::vouched`): the state file says so
/// (`state_file::HISTORY_LOST_MARKER`) until the first claim replaces it, across restarts.
pub fn start_state() -> Issuer {
    let settings = Settings {
        configured: gucs::configured_node(),
        registry: gucs::registry().is_some(),
    };
    let assigned = settings.registry && settings.configured.is_none();
    if upgrading_into_this_directory() {
        super::backfill::mark_if_missing().unwrap_or_else(|e| e.report_fatal());
    }
    let found = match load(gucs::layout()) {
        Err(SnowflakeError::StateFileDamaged { reason, .. }) if assigned => {
            let moved = fs::rename(STATE_FILE, STATE_FILE_DAMAGED)
                .and_then(|()| replace_state_file(state_file::HISTORY_LOST_MARKER));
            match moved {
                Ok(()) => {
                    SnowflakeError::DamagedStateFileMovedAside {
                        path: STATE_FILE,
                        aside: STATE_FILE_DAMAGED,
                        reason,
                    }
                    .report_log();
                    Found::Damaged
                }
                Err(e) => write_error(&e).report_fatal(),
            }
        }
        Ok(Found::Damaged) if !assigned => SnowflakeError::StateFileDamaged {
            path: STATE_FILE,
            reason: format!(
                "it says that the one before it was damaged (moved to \"{STATE_FILE_DAMAGED}\"), \
                 and no node id has been claimed since"
            ),
        }
        .report_fatal(),
        Ok(found) => found,
        Err(e) => e.report_fatal(),
    };
    let boot = Boot {
        // Drawn anew at each start of shared memory (a crash restart's too), never on disk.
        value: crate::pg::strong_random() as u64,
        after_clean_stop: stopped_cleanly(),
        place: place(),
    };
    let start = Node::start(&found, settings, Path::new(STANDBY_SIGNAL).exists(), boot);
    if let Some(Switch {
        from,
        to,
        lead_dropped,
    }) = start.switched
    {
        SnowflakeError::NodeSwitched {
            from,
            to,
            lead_dropped,
        }
        .report_log();
    }
    // The node id changed: the file says so (with the old one in the history) before anything
    // else happens, so that a standby's later records of the new id find it there.
    if let Some(durable) = start.rewrite {
        write_state_file(gucs::layout(), &durable)
            .unwrap_or_else(|e| write_error(&e).report_fatal());
    }
    Issuer::start(&start)
}

/// What the data directory's state file holds: a reservation written under another layout than
/// `configured` is refused (IDs of two layouts do not mix).
///
/// pg_upgrade builds a new data directory without our file. While it runs into this directory
/// (binary-upgrade mode, its output directory here), a missing file is replaced by the core's
/// upgrade marker, so that the upgraded server
/// refuses to issue IDs until the old directory's file is copied over it, rather than forget
/// every ID the old server issued. A file this new cluster wrote itself (started, and called,
/// before pg_upgrade: its system identifier is this cluster's, and pg_upgrade's output
/// directory is here) is no such record: it is moved aside and the marker written.
fn load(configured: &Layout) -> Result<Found, SnowflakeError> {
    let bytes = match fs::read(STATE_FILE) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            if upgrading_into_this_directory() {
                return await_old_state_file();
            }
            return Ok(Found::Nothing);
        }
        Err(e) => {
            return Err(SnowflakeError::StateFileIo {
                action: "read",
                path: STATE_FILE,
                cause: e.to_string(),
            })
        }
    };
    let recorded = match state_file::parse(&bytes) {
        Ok(State::Reservation(recorded)) => recorded,
        Ok(State::AwaitingOldStateFile) => return Ok(Found::AwaitingOldStateFile),
        Ok(State::HistoryLost) => return Ok(Found::Damaged),
        Err(reason) => {
            return Err(SnowflakeError::StateFileDamaged {
                path: STATE_FILE,
                reason,
            })
        }
    };
    recorded.layout.check_same(configured)?;
    if upgrading_into_this_directory() && recorded.system == Some(system_identifier()) {
        fs::rename(STATE_FILE, STATE_FILE_BEFORE_UPGRADE).map_err(|e| write_error(&e))?;
        SnowflakeError::OwnReservationMovedAside {
            path: STATE_FILE,
            aside: STATE_FILE_BEFORE_UPGRADE,
        }
        .report_log();
        return await_old_state_file();
    }
    Ok(Found::Reservation(recorded))
}

/// Writes the upgrade marker: the server refuses IDs until the old state file is copied in.
fn await_old_state_file() -> Result<Found, SnowflakeError> {
    replace_state_file(state_file::UPGRADE_MARKER).map_err(|e| write_error(&e))?;
    Ok(Found::AwaitingOldStateFile)
}

/// Whether pg_upgrade runs with this data directory as its new one: binary-upgrade mode (the
/// old cluster is started so too), pg_upgrade's output directory here, and — where the server's
/// log tells — this server's log inside it. pg_upgrade writes both clusters' server logs into
/// the *new* directory's `pg_upgrade_output.d`, and leaves that directory behind after a failed
/// run or with `--retain`: an old directory that keeps one from an earlier upgrade into it must
/// not be marked (it would refuse IDs on rollback, and the marker would be copied on). Where
/// the log is not a file of a `pg_upgrade_output.d` (a logging collector's pipe), the directory
/// alone decides, as before.
fn upgrading_into_this_directory() -> bool {
    // SAFETY: a plain read of a flag the postmaster sets from its command line.
    let binary_upgrade = unsafe { pg_sys::IsBinaryUpgrade };
    if !binary_upgrade || !Path::new(PG_UPGRADE_OUTPUT_DIR).is_dir() {
        return false;
    }
    let Ok(log) = fs::read_link("/proc/self/fd/2") else {
        return true;
    };
    let in_some_output_dir = log
        .components()
        .any(|part| part.as_os_str() == PG_UPGRADE_OUTPUT_DIR);
    if !in_some_output_dir {
        return true;
    }
    fs::canonicalize(PG_UPGRADE_OUTPUT_DIR).is_ok_and(|ours| log.starts_with(ours))
}

/// This cluster's system identifier (from its control file, read before shared memory is set
/// up).
fn system_identifier() -> u64 {
    // SAFETY: reads the control file data, which every server process has from start-up.
    unsafe { pg_sys::GetSystemIdentifier() }
}

/// The state line of a reservation written by this cluster.
fn state_line(
    layout: &Layout,
    until: i64,
    node: Option<u32>,
    history: &History,
    identity: Option<Identity>,
) -> Vec<u8> {
    let mut buffer = [0u8; state_file::MAX_LEN];
    let reservation = Reservation {
        until,
        layout: *layout,
        node,
        history: *history,
        system: Some(system_identifier()),
        identity,
    };
    state_file::format(&reservation, &mut buffer).to_vec()
}

/// Replaces the state file with what an identity's transition says it must hold, atomically
/// and durably (no WAL record: what a standby needs comes with the reservations).
pub fn write_state_file(layout: &Layout, durable: &Durable) -> Result<(), std::io::Error> {
    let Durable {
        until,
        node,
        history,
        identity,
    } = durable;
    replace_state_file(&state_line(layout, *until, *node, history, *identity))
}

/// Writes `contents` to a temporary file, fsyncs it, renames it over the state file and fsyncs
/// the directory.
fn replace_state_file(contents: &[u8]) -> Result<(), std::io::Error> {
    replace_file(STATE_FILE, STATE_FILE_TMP, contents)
}

/// Writes `contents` to `tmp`, fsyncs it, renames it over `path` and fsyncs the directory (the
/// state file's and the backfill's file's way of being replaced).
pub fn replace_file(path: &str, tmp: &str, contents: &[u8]) -> Result<(), std::io::Error> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(tmp)?;
    file.write_all(contents)?;
    file.sync_all()?;
    fs::rename(tmp, path)?;
    File::open(".").and_then(|dir| dir.sync_all())
}
