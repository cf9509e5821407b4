//! Every GUC of the extension: one private static each, defined in [`init`], read through a
//! typed accessor.
//!
//! What shapes the IDs (the node id) is PGC_POSTMASTER: letting it change under a running server
//! would let one server's IDs carry two identities. Changing it means editing postgresql.conf and
//! restarting, a deliberate act that only the server's owner can do; no `SET` or `ALTER SYSTEM`
//! by an ordinary user reaches it. The generator's tunables are PGC_SIGHUP: server-wide (one
//! generator serves every session, so a per-session value would make no sense), changed in
//! postgresql.conf and applied by a reload.

use crate::error::SnowflakeError;
use crate::generator::Limits;
use crate::layout::DEFAULT_LAYOUT;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::CStr;

/// The value of `pg_snowflake.node_id` that means "not set".
const NODE_UNSET: i32 = -1;

static NODE_ID: GucSetting<i32> = GucSetting::<i32>::new(NODE_UNSET);
static MAX_BORROW_MS: GucSetting<i32> = GucSetting::<i32>::new(1_000);
static RESERVATION_MS: GucSetting<i32> = GucSetting::<i32>::new(1_000);

/// Defines the GUCs and reserves the `pg_snowflake.` prefix. Called from `_PG_init` while
/// `shared_preload_libraries` is being processed (Postgres refuses PGC_POSTMASTER GUCs later).
///
/// A value in postgresql.conf that Postgres refuses (out of range, not a number) only earns a
/// WARNING from Postgres and leaves the default; for the node id that would silently mean
/// "unset", so it is returned as an error instead, and the server does not start.
pub fn init() -> Result<(), SnowflakeError> {
    let configured = configured_text(c"pg_snowflake.node_id");
    GucRegistry::define_int_guc(
        c"pg_snowflake.node_id",
        c"Sets this server's node id, which every snowflake ID it makes carries.",
        c"Must differ on every server whose IDs may ever meet. -1 (the default) means unset: \
          snowflake_nextval() then refuses to make IDs.",
        &NODE_ID,
        NODE_UNSET,
        DEFAULT_LAYOUT.max_node() as i32,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_snowflake.max_borrow_ms",
        c"Sets how far the generator may run ahead of the clock under overload before callers wait.",
        c"When more IDs are asked for than a millisecond holds (4096), the generator borrows the \
          next millisecond. Once it has borrowed this far ahead, snowflake_nextval() waits for the \
          clock instead. 0 never borrows. A clock stepping back never causes waiting.",
        &MAX_BORROW_MS,
        0,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"pg_snowflake.reservation_ms",
        c"Sets how far ahead of the IDs being made each durable reservation reaches.",
        c"Before making an ID past its last reservation, the generator durably records a new one \
          this far ahead (a small file and a WAL record). Larger means fewer writes; after a \
          restart, IDs continue from the last reservation.",
        &RESERVATION_MS,
        1,
        600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    // SAFETY: called from _PG_init with a static, NUL-terminated name.
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(c"pg_snowflake".as_ptr()) };

    match configured {
        Some(value) if NODE_ID.get() == NODE_UNSET && value.trim() != NODE_UNSET.to_string() => {
            Err(SnowflakeError::InvalidNodeSetting { value })
        }
        _ => Ok(()),
    }
}

/// The text a not-yet-defined setting was given in the configuration, if any.
fn configured_text(name: &CStr) -> Option<String> {
    // SAFETY: a NUL-terminated name; with missing_ok, NULL means "not set anywhere". The result
    // points into the GUC's own storage and is copied before anything can change it.
    let value = unsafe { pgrx::pg_sys::GetConfigOption(name.as_ptr(), true, false) };
    (!value.is_null()).then(|| {
        unsafe { CStr::from_ptr(value) }
            .to_string_lossy()
            .into_owned()
    })
}

/// This server's node id, or [`SnowflakeError::NodeUnset`].
pub fn node_id() -> Result<u32, SnowflakeError> {
    u32::try_from(NODE_ID.get()).map_err(|_| SnowflakeError::NodeUnset)
}

/// The generator's tunables as currently configured.
pub fn limits() -> Limits {
    Limits {
        max_borrow_ms: i64::from(MAX_BORROW_MS.get()),
        reserve_ahead_ms: i64::from(RESERVATION_MS.get()),
    }
}
