//! Replaying pg_snowflake's WAL record: the custom resource manager's registration and its
//! redo, desc and identify callbacks. A replayed reservation raises the generator's floor in
//! shared memory and this server's state file, and hands on its node id and claim
//! ([`replay_reservation`]; the rules are the core's `Node::replay`), so a standby, once
//! promoted, issues only IDs above everything its primary reserved. The record is written by
//! `store.rs`; its bytes are the core's `wal_record`. A replayed backfill record raises the
//! backfill's ceiling in this server's file (`backfill.rs`).

use super::backfill::{self, XLOG_BACKFILL};
use super::store::{self, RMGR_ID, XLOG_RESERVATION};
use crate::error::SnowflakeError;
use crate::gucs;
use crate::shmem::{self, Handle};
use pgrx::pg_sys;
use pgrx::prelude::*;
use snowflake_core::registry::Token;
use snowflake_core::wal_record;
use std::ffi::{c_char, CStr};

const RMGR_NAME: &CStr = c"pg_snowflake";

/// Registers the WAL resource manager. Only valid from `_PG_init` while preloading.
pub fn register() {
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

/// The reservation carried by one of our WAL records: until, and the layout, node id (`None` in
/// a record of 0.3.0) and registry claim it was made under.
///
/// # Safety
/// `record` is a decoded record of our resource manager, as Postgres passes to redo and desc.
unsafe fn record_reservation(record: *mut pg_sys::XLogReaderState) -> Option<wal_record::Record> {
    let (info, bytes) = unsafe { info_and_payload(record) };
    if info != XLOG_RESERVATION {
        return None;
    }
    wal_record::decode(bytes)
}

/// The backfill ceiling carried by one of our WAL records, if it is one.
///
/// # Safety
/// As [`record_reservation`].
unsafe fn record_backfill(
    record: *mut pg_sys::XLogReaderState,
) -> Option<snowflake_core::backfill::Record> {
    let (info, bytes) = unsafe { info_and_payload(record) };
    if info != XLOG_BACKFILL {
        return None;
    }
    snowflake_core::backfill::decode(bytes)
}

/// A record's type and payload.
///
/// # Safety
/// As [`record_reservation`]; the payload lives as long as the record.
unsafe fn info_and_payload<'a>(record: *mut pg_sys::XLogReaderState) -> (u8, &'a [u8]) {
    let decoded = unsafe { &*(*record).record };
    let info = decoded.header.xl_info & !(pg_sys::XLR_INFO_MASK as u8);
    let bytes = unsafe {
        std::slice::from_raw_parts(
            decoded.main_data.cast::<u8>(),
            decoded.main_data_len as usize,
        )
    };
    (info, bytes)
}

#[pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    match unsafe { record_reservation(record) } {
        Some(record) => {
            // Redo runs only where the resource manager is registered: a preloaded library.
            let shm = shmem::get().unwrap_or_else(|e| e.report_fatal());
            replay_reservation(shm, &record).unwrap_or_else(|e| e.report_fatal())
        }
        None => match unsafe { record_backfill(record) } {
            Some(ceiling) => backfill::replay(&ceiling).unwrap_or_else(|e| e.report_fatal()),
            None => SnowflakeError::UnknownWalRecord.report_fatal(),
        },
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn describe(
    buf: pg_sys::StringInfo,
    record: *mut pg_sys::XLogReaderState,
) {
    if let Some(r) = unsafe { record_reservation(record) } {
        let node = r
            .node
            .map_or_else(|| "not recorded".to_string(), |node| node.to_string());
        let claim = r.identity.map_or_else(String::new, |c| {
            format!("; claim {} generation {}", Token(c.token), c.generation)
        });
        let text = format!(
            "until {}; layout {}; node {node}{claim}\0",
            r.until,
            r.layout.describe()
        );
        unsafe { pg_sys::appendStringInfoString(buf, text.as_ptr().cast()) };
    } else if let Some(r) = unsafe { record_backfill(record) } {
        let text = format!(
            "backfill node {}; ceiling {}; layout {}\0",
            r.node,
            r.ceiling,
            r.layout.describe()
        );
        unsafe { pg_sys::appendStringInfoString(buf, text.as_ptr().cast()) };
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn identify(info: u8) -> *const c_char {
    let info = info & !(pg_sys::XLR_INFO_MASK as u8);
    if info == XLOG_RESERVATION {
        c"RESERVATION".as_ptr()
    } else if info == XLOG_BACKFILL {
        c"BACKFILL".as_ptr()
    } else {
        std::ptr::null()
    }
}

/// The redo of a reservation: the identity's transition (`Node::replay`: the floor, the
/// history, a claim handed on) under the lock, then this server's state file written with what
/// it says, before the next record (after releasing the lock; only the startup process
/// replays, one record after another). A reservation of another layout than this server's
/// stops the replay.
fn replay_reservation(shm: Handle, record: &wal_record::Record) -> Result<(), SnowflakeError> {
    record.layout.check_same(gucs::layout())?;
    let configured = gucs::configured_node();
    let durable = shm.exclusive(|issuer| issuer.replay(record, configured));
    if let Some(durable) = durable {
        store::write_state_file(&record.layout, &durable)
            .map_err(|e| SnowflakeError::state_file_write(e.raw_os_error().unwrap_or(0)))?;
    }
    Ok(())
}
