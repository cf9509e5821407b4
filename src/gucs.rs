//! Every GUC of the extension: one private static each, defined in [`init`], read through a
//! typed accessor.
//!
//! What shapes the IDs — the node id and the layout (epoch, time unit, node and sequence bits) —
//! is PGC_POSTMASTER: letting it change under a running server would let one server's IDs carry
//! two identities or two meanings. Changing it means editing postgresql.conf and restarting, a
//! deliberate act that only the server's owner can do; no `SET` or `ALTER SYSTEM` by an ordinary
//! user reaches it. The generator's tunables are PGC_SIGHUP: server-wide (one generator serves
//! every session, so a per-session value would make no sense), changed in postgresql.conf and
//! applied by a reload.
//!
//! Postgres answers a value it refuses in postgresql.conf for an extension's setting with only a
//! WARNING, keeping the default. For the settings that shape IDs that default would be silently
//! wrong (an unset node, another layout), so [`init`] turns such a refusal into an error that
//! stops the server.

use crate::error::SnowflakeError;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting, PostgresGucEnum};
use snowflake_core::calendar::parse_epoch;
use snowflake_core::generator::Limits;
use snowflake_core::layout::{Layout, DEFAULT_LAYOUT, MAX_NODE_BITS, MAX_SEQ_BITS, MAX_UNIT_MS};
use std::ffi::{CStr, CString};
use std::sync::OnceLock;

/// The value of `pg_snowflake.node_id` that means "not set".
const NODE_UNSET: i32 = -1;
const DEFAULT_EPOCH: &CStr = c"2024-01-01 00:00:00+00";

static NODE_ID: GucSetting<i32> = GucSetting::<i32>::new(NODE_UNSET);
static BACKFILL_NODE_ID: GucSetting<i32> = GucSetting::<i32>::new(NODE_UNSET);
static EPOCH: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(DEFAULT_EPOCH));
static TIME_UNIT_MS: GucSetting<i32> = GucSetting::<i32>::new(DEFAULT_LAYOUT.unit_ms as i32);
static NODE_BITS: GucSetting<i32> = GucSetting::<i32>::new(DEFAULT_LAYOUT.node_bits as i32);
static SEQUENCE_BITS: GucSetting<i32> = GucSetting::<i32>::new(DEFAULT_LAYOUT.seq_bits as i32);
static MAX_BORROW_MS: GucSetting<i32> = GucSetting::<i32>::new(1_000);
static RESERVATION_MS: GucSetting<i32> = GucSetting::<i32>::new(1_000);
static SEQUENCE_SPREAD: GucSetting<i32> = GucSetting::<i32>::new(0);
static REGISTRY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static REGISTRY_MODE: GucSetting<RegistryMode> =
    GucSetting::<RegistryMode>::new(RegistryMode::Fenced);
static REGISTRY_LEASE_MS: GucSetting<i32> = GucSetting::<i32>::new(30_000);
static MAX_CLOCK_SKEW_MS: GucSetting<i32> = GucSetting::<i32>::new(5_000);
static FRESH_NODE_ID_ON_PROMOTION: GucSetting<bool> = GucSetting::<bool>::new(false);
static ADOPT_NEW_KEYS: GucSetting<AdoptNewKeys> =
    GucSetting::<AdoptNewKeys>::new(AdoptNewKeys::Off);

/// Whether the event trigger puts new serial and identity columns on the generator
/// (`pg_snowflake.adopt_new_keys`). An enum rather than a boolean: a value it refuses gets
/// Postgres' hint listing the values it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PostgresGucEnum)]
pub enum AdoptNewKeys {
    /// New columns keep their sequences (the default).
    #[name = c"off"]
    Off,
    /// Every serial, bigserial and identity column a CREATE TABLE or ALTER TABLE makes becomes
    /// bigint DEFAULT snowflake_nextval().
    #[name = c"on"]
    On,
}

/// What a server does when no heartbeat extends its registry lease (`pg_snowflake.registry_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PostgresGucEnum)]
pub enum RegistryMode {
    /// Stops issuing when the lease runs out; reservations never pass the ceiling the
    /// registry recorded.
    #[name = c"fenced"]
    Fenced,
    /// Keeps issuing under the id it holds; a takeover is found at the next contact.
    #[name = c"available"]
    Available,
}

/// The layout built from the settings at start-up; inherited by every backend.
static LAYOUT: OnceLock<Layout> = OnceLock::new();

/// Defines the GUCs, builds the layout and reserves the `pg_snowflake.` prefix. Called from
/// `_PG_init` while `shared_preload_libraries` is being processed (Postgres refuses
/// PGC_POSTMASTER GUCs later). `now_unix_ms` is the clock, for the layout's checks.
pub fn init(now_unix_ms: i64) -> Result<(), SnowflakeError> {
    let layout = define_layout(now_unix_ms)?;
    let _ = LAYOUT.set(layout);

    let configured = configured_text(c"pg_snowflake.node_id");
    GucRegistry::define_int_guc(
        c"pg_snowflake.node_id",
        c"Sets this server's node id, which every snowflake ID it makes carries.",
        c"Must differ on every server whose IDs may ever meet. -1 (the default) means unset: \
          snowflake_nextval() then refuses to make IDs. The range follows pg_snowflake.node_bits.",
        &NODE_ID,
        NODE_UNSET,
        layout.max_node().min(i32::MAX as u32) as i32,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    check_int("pg_snowflake.node_id", configured, NODE_ID.get(), || {
        format!(
            "Node ids run from 0 to {}; -1 leaves the node unset.",
            layout.max_node()
        )
    })?;

    let configured = configured_text(c"pg_snowflake.backfill_node_id");
    GucRegistry::define_int_guc(
        c"pg_snowflake.backfill_node_id",
        c"Sets the node id that snowflake_nextval_at() stamps IDs for past instants with.",
        c"A node id no server or application ever uses for live IDs, distinct per server, as \
          node_id is. -1 (the default) means unset: snowflake_nextval_at() then refuses. The \
          range follows pg_snowflake.node_bits.",
        &BACKFILL_NODE_ID,
        NODE_UNSET,
        layout.max_node().min(i32::MAX as u32) as i32,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    check_int(
        "pg_snowflake.backfill_node_id",
        configured,
        BACKFILL_NODE_ID.get(),
        || {
            format!(
                "Node ids run from 0 to {}; -1 leaves the backfill node id unset.",
                layout.max_node()
            )
        },
    )?;

    GucRegistry::define_int_guc(
        c"pg_snowflake.max_borrow_ms",
        c"Sets how far the generator may run ahead of the clock under overload before callers wait.",
        c"When more IDs are asked for than a tick holds (4096 per ms by default), the generator \
          borrows the next tick. Once it has borrowed this far ahead, snowflake_nextval() waits \
          for the clock instead. 0 never borrows. A clock stepping back never causes waiting.",
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
    GucRegistry::define_int_guc(
        c"pg_snowflake.sequence_spread",
        c"Starts each tick's sequence at an offset cycling through 0 to this value minus 1.",
        c"Without it, IDs made at low rates all have sequence 0 and the same low bits, so id % N \
          puts them all in one bucket. With N here (e.g. 16), id % N spreads evenly. Costs up to \
          N - 1 sequence numbers of each tick's capacity. 0 or 1: off.",
        &SEQUENCE_SPREAD,
        0,
        65_536,
        GucContext::Sighup,
        GucFlags::default(),
    );
    define_registry();
    define_adopt_new_keys();
    // SAFETY: called from _PG_init with a static, NUL-terminated name.
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(c"pg_snowflake".as_ptr()) };
    Ok(())
}

/// Defines the node-id registry's settings (`src/registry/`).
fn define_registry() {
    GucRegistry::define_string_guc(
        c"pg_snowflake.registry",
        c"Sets the connection string of the node-id registry database (empty: no registry).",
        c"With it, this server claims its node id from the registry before making IDs, keeps a \
          lease on it and checks its clock against the registry's. Readable by superusers only: \
          it may hold a password (a password file works as for any libpq client).",
        &REGISTRY,
        GucContext::Postmaster,
        GucFlags::SUPERUSER_ONLY,
    );
    GucRegistry::define_enum_guc(
        c"pg_snowflake.registry_mode",
        c"Sets what the server does when it cannot renew its node id's lease: fenced or available.",
        c"fenced (the default) stops making IDs once the lease has run out, so two servers never \
          make IDs under one node id; available keeps making them and finds a takeover at the \
          next contact with the registry.",
        &REGISTRY_MODE,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_snowflake.registry_lease_ms",
        c"Sets how long a node id's lease in the registry lasts without a heartbeat.",
        c"The server renews it three times per lease. A server gone silent for this long may \
          have its node id taken over.",
        &REGISTRY_LEASE_MS,
        1_000,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"pg_snowflake.max_clock_skew_ms",
        c"Sets how far this server's clock may be from the registry's before it stops making IDs.",
        c"Checked at every claim and heartbeat, with the registry's clock corrected by half the \
          round trip. Also the margin by which a retired node id's last reservation must lie in \
          the registry's past before the id is handed out again.",
        &MAX_CLOCK_SKEW_MS,
        10,
        86_400_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_bool_guc(
        c"pg_snowflake.fresh_node_id_on_promotion",
        c"Makes a promoted standby take a fresh node id from the registry instead of its primary's.",
        c"For asynchronous replication, whose standby may not have every reservation its primary \
          made: a fresh node id owes nothing to the primary's IDs, whatever the clocks say. The \
          primary's id is retired. Needs pg_snowflake.node_id unset.",
        &FRESH_NODE_ID_ON_PROMOTION,
        GucContext::Sighup,
        GucFlags::default(),
    );
}

/// Defines `pg_snowflake.adopt_new_keys` (`src/sql/adopt_new_keys.rs`). PGC_USERSET, so that a
/// database's owner can turn it on with ALTER DATABASE … SET and a migration can turn it off
/// for itself with SET LOCAL: the trigger only changes columns the role running the DDL has just
/// made, on tables it owns, so restricting who may set it would protect nothing.
fn define_adopt_new_keys() {
    GucRegistry::define_enum_guc(
        c"pg_snowflake.adopt_new_keys",
        c"Puts every serial, bigserial and identity column that CREATE TABLE or ALTER TABLE makes on snowflake_nextval().",
        c"on: the extension's event trigger turns each such column into bigint DEFAULT \
          snowflake_nextval() and drops the sequence it no longer needs, logging each change. \
          Set it per database with ALTER DATABASE … SET; tables listed in \
          snowflake_adopt_exclusions are left alone.",
        &ADOPT_NEW_KEYS,
        GucContext::Userset,
        GucFlags::default(),
    );
}

/// Whether new serial and identity columns are to be put on the generator; off where the
/// library was not preloaded (there the setting does not exist, and snowflake_nextval() could
/// not fill the columns anyway).
pub fn adopt_new_keys() -> bool {
    LAYOUT.get().is_some() && ADOPT_NEW_KEYS.get() == AdoptNewKeys::On
}

/// Defines the layout settings and builds the layout from them.
fn define_layout(now_unix_ms: i64) -> Result<Layout, SnowflakeError> {
    let configured_epoch = configured_text(c"pg_snowflake.epoch");
    GucRegistry::define_string_guc(
        c"pg_snowflake.epoch",
        c"Sets the instant (UTC) the time field of snowflake IDs counts from.",
        c"A UTC timestamp such as '2024-01-01 00:00:00+00', not in the future. All servers whose \
          IDs meet must use the same layout.",
        &EPOCH,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    for (name, short, setting, min, max) in [
        (
            c"pg_snowflake.time_unit_ms",
            c"Sets the milliseconds per tick of the time field of snowflake IDs.",
            &TIME_UNIT_MS,
            1,
            MAX_UNIT_MS as i32,
        ),
        (
            c"pg_snowflake.node_bits",
            c"Sets how many bits of snowflake IDs hold the node id.",
            &NODE_BITS,
            0,
            MAX_NODE_BITS as i32,
        ),
        (
            c"pg_snowflake.sequence_bits",
            c"Sets how many bits of snowflake IDs hold the sequence number within a tick.",
            &SEQUENCE_BITS,
            1,
            MAX_SEQ_BITS as i32,
        ),
    ] {
        let configured = configured_text(name);
        GucRegistry::define_int_guc(
            name,
            short,
            c"Part of the ID layout: the time field takes the bits left of 63. All servers whose \
              IDs meet must use the same layout.",
            setting,
            min,
            max,
            GucContext::Postmaster,
            GucFlags::default(),
        );
        let name = name.to_str().unwrap_or("pg_snowflake");
        check_int(name, configured, setting.get(), || {
            format!("It must be a whole number from {min} to {max}.")
        })?;
    }

    let epoch_text = EPOCH.get().map_or_else(
        || DEFAULT_EPOCH.to_string_lossy().into_owned(),
        |text| text.to_string_lossy().into_owned(),
    );
    let epoch = parse_epoch(&epoch_text).map_err(|reason| SnowflakeError::InvalidSetting {
        name: "pg_snowflake.epoch",
        value: configured_epoch.unwrap_or_else(|| epoch_text.clone()),
        reason,
    })?;
    let (time_unit_ms, node_bits, sequence_bits) =
        (TIME_UNIT_MS.get(), NODE_BITS.get(), SEQUENCE_BITS.get());
    Ok(Layout::new(
        epoch,
        i64::from(time_unit_ms),
        node_bits as u32,
        sequence_bits as u32,
        now_unix_ms,
    )?)
}

/// An integer setting's value must be what postgresql.conf said, if it said anything.
fn check_int(
    name: &'static str,
    configured: Option<String>,
    value: i32,
    reason: impl FnOnce() -> String,
) -> Result<(), SnowflakeError> {
    match configured {
        Some(text) if text.trim().parse::<i64>() != Ok(i64::from(value)) => {
            Err(SnowflakeError::InvalidSetting {
                name,
                value: text,
                reason: reason(),
            })
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

/// The node id as `pg_snowflake.node_id` sets it (`None`: unset).
pub fn configured_node() -> Option<u32> {
    u32::try_from(read(&NODE_ID)).ok()
}

/// The backfill node id as `pg_snowflake.backfill_node_id` sets it (`None`: unset).
pub fn backfill_node() -> Option<u32> {
    u32::try_from(read(&BACKFILL_NODE_ID)).ok()
}

/// The registry's connection string, if one is set.
pub fn registry() -> Option<String> {
    REGISTRY
        .get()
        .map(|text| text.to_string_lossy().into_owned())
        .filter(|text| !text.trim().is_empty())
}

/// The registry's settings as currently configured.
#[derive(Clone, Copy, Debug)]
pub struct RegistrySettings {
    pub mode: RegistryMode,
    pub fresh_on_promotion: bool,
    pub lease_ms: i64,
    pub max_clock_skew_ms: i64,
}

pub fn registry_settings() -> RegistrySettings {
    RegistrySettings {
        mode: REGISTRY_MODE.get(),
        fresh_on_promotion: FRESH_NODE_ID_ON_PROMOTION.get(),
        lease_ms: i64::from(read(&REGISTRY_LEASE_MS)),
        max_clock_skew_ms: i64::from(read(&MAX_CLOCK_SKEW_MS)),
    }
}

/// This server's layout; the default layout where the library was not preloaded (then the
/// layout settings do not exist).
pub fn layout() -> &'static Layout {
    LAYOUT.get().unwrap_or(&DEFAULT_LAYOUT)
}

/// This server's layout where the library was preloaded, read through one pointer (the hot
/// path's: `layout()` selects each field it reads from the default too).
#[inline(always)]
pub fn preloaded_layout() -> Option<&'static Layout> {
    LAYOUT.get()
}

/// The generator's tunables as currently configured.
pub fn limits() -> Limits {
    Limits {
        max_borrow_ms: i64::from(read(&MAX_BORROW_MS)),
        reservation_ms: i64::from(read(&RESERVATION_MS)),
        sequence_spread: read(&SEQUENCE_SPREAD) as u32,
        // Not a setting: the core's `Issuer::limits` sets the node's ceiling under the lock;
        // no wake without it.
        ceiling: i64::MIN,
    }
}

/// An integer setting's current value, read without pgrx's per-read thread check (a thread-local
/// look-up: a tenth of the instructions of an ID, for the four settings each ID reads). Sound
/// because Postgres runs extension code on one thread only: every caller here is a SQL function
/// (whose own pgrx guard has checked the thread) or the renewer's main loop.
#[inline]
fn read(setting: &GucSetting<i32>) -> i32 {
    // SAFETY: a plain int that the GUC machinery writes on this same thread, between
    // statements (at a reload); nothing else holds a reference to it.
    unsafe { *setting.as_ptr() }
}
