//! Replaying pg_snowflake's WAL record: the custom resource manager's registration and its
//! redo, desc and identify callbacks. A replayed reservation raises the generator's floor in
//! shared memory and this server's state file ([`replay_reservation`]), so a standby, once
//! promoted, issues only IDs above everything its primary reserved. The record is written by
//! `store.rs`; its bytes are the core's `wal_record`.

use super::store::{self, RMGR_ID, XLOG_RESERVATION};
use crate::error::SnowflakeError;
use crate::gucs;
use crate::shmem::{self, Handle};
use pgrx::pg_sys;
use pgrx::prelude::*;
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
    let decoded = unsafe { &*(*record).record };
    let info = decoded.header.xl_info & !(pg_sys::XLR_INFO_MASK as u8);
    if info != XLOG_RESERVATION {
        return None;
    }
    let bytes = unsafe {
        std::slice::from_raw_parts(
            decoded.main_data.cast::<u8>(),
            decoded.main_data_len as usize,
        )
    };
    wal_record::decode(bytes)
}

#[pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    match unsafe { record_reservation(record) } {
        Some(record) => {
            // Redo runs only where the resource manager is registered: a preloaded library.
            let shm = shmem::get().unwrap_or_else(|e| e.report_fatal());
            replay_reservation(shm, &record).unwrap_or_else(|e| e.report_fatal())
        }
        None => SnowflakeError::UnknownWalRecord.report_fatal(),
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
        let claim = r.claim.map_or_else(String::new, |c| {
            format!("; claim {:032x} generation {}", c.token, c.generation)
        });
        let text = format!(
            "until {}; layout {}; node {node}{claim}\0",
            r.until,
            r.layout.describe()
        );
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

/// The redo of a reservation: raise the floor, and keep this server's state file up with it
/// (written after releasing the lock; only the startup process replays, one record after
/// another). A reservation of another node id than this server's goes into its history as
/// well; one made under a registry claim of this server's node id (or, with the node id the
/// registry's to assign, of any) hands the claim on, so that once promoted this server
/// continues it. A reservation of another layout than this server's stops the replay.
fn replay_reservation(shm: Handle, record: &wal_record::Record) -> Result<(), SnowflakeError> {
    let wal_record::Record {
        until,
        layout,
        node,
        claim,
    } = *record;
    layout.check_same(gucs::layout())?;
    let configured = gucs::configured_node();
    let raised = shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
        let raised = shared.generator.observe_reservation(until);
        let own = configured.or((shared.claim.is_some() || claim.is_some()).then_some(shared.node));
        let inherits = claim.is_some() && (configured.is_none() || node == configured);
        if inherits {
            if let Some(node) = node {
                if shared.claim.is_some() && node != shared.node {
                    shared.history.add(Some(shared.node), until);
                }
                shared.node = node;
            }
            shared.claim = claim;
        } else if node.is_none() || node != own {
            shared.history.add(node, until);
        }
        let own = if inherits { node } else { own };
        let durable = shared.generator.reserved_until();
        (raised || inherits).then_some((durable, shared.history, own, shared.claim))
    });
    if let Some((durable, history, own, claim)) = raised {
        store::write_state_file(&layout, durable, own, &history, claim)?;
    }
    Ok(())
}
