//! Node-id leases for application processes (docs/FLEETS.md, "Applications"): a process that is
//! not a pg_snowflake server takes a node id of the fleet's registry through a member server,
//! which runs the core's procedures (`snowflake_core::registry::lease`: the claim, heartbeat,
//! release and retirement a server's renewer runs) over a connection it opens itself with its
//! own `pg_snowflake.registry`. The rules are the core's; here are the rights, the arguments and
//! the words.
//!
//! Rights: membership in the role `snowflake_lease` (made by the extension's script, with no
//! members), checked at each call, never PUBLIC; a lease is renewed or released only with its
//! token. The registry's connection string and libpq's causes, which name its host and user,
//! go to the server log only (`LeaseRegistryFailed`).

use crate::error::{OrReport, RegistryError, SnowflakeError};
use crate::gucs;
use crate::registry::client::{self, Sql};
use crate::registry::libpq::{Conn, Failure};
use crate::registry::member;
use pgrx::prelude::*;
use snowflake_core::clock::{Clock, SystemClock};
use snowflake_core::registry::lease::{self, Acquisition, Asked, Renewed};
use snowflake_core::registry::table::ClaimOutcome;
use snowflake_core::registry::{self, Identity, Token};

/// The role whose members may take a lease.
const LEASE_ROLE: &std::ffi::CStr = c"snowflake_lease";

/// The longest application label (characters).
const MAX_LABEL_CHARS: usize = 100;

/// Refuses a caller that is not a member of `snowflake_lease` (a superuser is).
fn check_right() {
    // SAFETY: a NUL-terminated name, missing_ok; the user id of the current role.
    let granted = unsafe {
        let role = pg_sys::get_role_oid(LEASE_ROLE.as_ptr(), true);
        role != pg_sys::InvalidOid && pg_sys::has_privs_of_role(pg_sys::GetUserId(), role)
    };
    if !granted {
        // SAFETY: the current user's name, copied at once; missing_ok.
        let role = unsafe {
            let name = pg_sys::GetUserNameFromId(pg_sys::GetUserId(), true);
            if name.is_null() {
                String::from("?")
            } else {
                std::ffi::CStr::from_ptr(name)
                    .to_string_lossy()
                    .into_owned()
            }
        };
        SnowflakeError::from(RegistryError::LeaseNotGranted { role }).report();
    }
}

/// The failure `failure` of `action`, told to the caller without its cause, which goes to the
/// server log only.
fn failed(action: &'static str, failure: Failure) -> SnowflakeError {
    SnowflakeError::from(RegistryError::Failed {
        action,
        cause: failure.message,
    })
    .report_server_only();
    RegistryError::LeaseRegistryFailed { action }.into()
}

/// A connection to the registry, and what the member knows for a procedure on it: the registry's
/// clock read, and refused beyond the clock margin.
fn connect(label: String, action: &'static str) -> (Conn, Asked) {
    let conninfo = gucs::registry()
        .ok_or(RegistryError::NotConfigured)
        .or_report();
    let settings = gucs::registry_settings();
    let conn = Conn::connect(&conninfo, registry::exchange_deadline_ms(settings.lease_ms))
        .map_err(|e| failed(action, e))
        .or_report();
    let sent = SystemClock.wall();
    let registry_now = client::clock(&conn)
        .map_err(|e| failed(action, e))
        .or_report();
    let received = SystemClock.wall();
    let offset = registry::clock_offset(sent, received, registry_now);
    if offset.abs() > settings.max_clock_skew_ms {
        SnowflakeError::from(RegistryError::ClockSkew {
            offset_ms: offset,
            max_ms: settings.max_clock_skew_ms,
        })
        .report();
    }
    let layout = gucs::layout();
    let asked = Asked {
        label,
        layout: layout.describe(),
        max_node: layout.max_node(),
        lease_ms: settings.lease_ms,
        margin_ms: settings.max_clock_skew_ms,
        now: received,
        offset_ms: offset,
    };
    (conn, asked)
}

/// The lease the arguments name, or the error that says which is not one.
fn identity(node_id: i32, token: &str, generation: i64) -> (u32, Identity) {
    let bad = |what| -> ! { SnowflakeError::from(RegistryError::LeaseArgument { what }).report() };
    let Ok(node) = u32::try_from(node_id) else {
        bad("the node id is negative")
    };
    let Ok(Token(token)) = token.parse::<Token>() else {
        bad("the token is not 32 hex digits")
    };
    if generation < 1 {
        bad("the generation is not positive")
    }
    (node, Identity { token, generation })
}

/// Takes a node id of the fleet's registry for an application named `label`: the lowest free
/// one, under a fresh token, its IDs above `floor_ms` and up to `ceiling_ms` (Unix ms) until a
/// renewal raises the ceiling; with the fleet's layout to make them with.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_unsafe)]
fn snowflake_lease_acquire(
    label: &str,
) -> TableIterator<
    'static,
    (
        name!(node_id, i32),
        name!(token, String),
        name!(generation, i64),
        name!(floor_ms, Option<i64>),
        name!(ceiling_ms, i64),
        name!(lease_ms, i64),
        name!(epoch_ms, i64),
        name!(unit_ms, i64),
        name!(time_bits, i32),
        name!(node_bits, i32),
        name!(sequence_bits, i32),
    ),
> {
    check_right();
    if label.trim().is_empty()
        || label.chars().count() > MAX_LABEL_CHARS
        || label.chars().any(char::is_control)
    {
        SnowflakeError::from(RegistryError::LeaseArgument {
            what: "the label is empty, longer than 100 characters, or has control characters",
        })
        .report();
    }
    const ACTION: &str = "acquire a node-id lease";
    let named = format!("{label} (application via {})", member::label());
    let acquire = || {
        let (conn, asked) = connect(named.clone(), ACTION);
        lease::acquire(&mut Sql(&conn), &asked, crate::pg::strong_random()).map(|a| (a, asked))
    };
    // The registry ends an acquisition's transaction once idle past its limit, as a release's
    // (below), and a busy machine can stall this backend that long between two statements. An
    // acquisition is tried once more on a new connection, under a fresh token: the first, rolled
    // back, took nothing; or, committed with its answer lost, it is a lease no one renews, whose
    // row lapses and is retired like any other.
    let (acquired, asked) = acquire()
        .or_else(|first| {
            SnowflakeError::from(RegistryError::Failed {
                action: ACTION,
                cause: first.message,
            })
            .report_server_only();
            acquire()
        })
        .map_err(|e| failed(ACTION, e))
        .or_report();
    let layout = gucs::layout();
    let granted = match acquired {
        Acquisition::Granted(granted) => granted,
        Acquisition::NoFreeId => SnowflakeError::from(RegistryError::NoFreeNodeId {
            max: layout.max_node(),
        })
        .report(),
        Acquisition::Refused(ClaimOutcome::Refused {
            node,
            why,
            label,
            last_seen,
        }) => SnowflakeError::from(RegistryError::refused(node, why, label, last_seen, || {
            layout.describe()
        }))
        .report(),
        Acquisition::Refused(_) => SnowflakeError::from(RegistryError::NoFreeNodeId {
            max: layout.max_node(),
        })
        .report(),
    };
    TableIterator::once((
        granted.node as i32,
        Token(granted.identity.token).to_string(),
        granted.identity.generation,
        (granted.floor > i64::MIN).then_some(granted.floor),
        granted.ceiling,
        asked.lease_ms,
        layout.epoch_unix_ms,
        layout.unit_ms,
        layout.time_bits as i32,
        layout.node_bits as i32,
        layout.seq_bits as i32,
    ))
}

/// Renews the lease on `node_id` under `token` and `generation`, whose ceiling is `ceiling_ms`:
/// its new ceiling, and whether the registry's mark was still the one this lease wrote
/// (`mark_own`: false once anyone else raised it; a release then leaves it where it is).
#[pg_extern(volatile, parallel_unsafe)]
fn snowflake_lease_renew(
    node_id: i32,
    token: &str,
    generation: i64,
    ceiling_ms: i64,
) -> TableIterator<'static, (name!(ceiling_ms, i64), name!(mark_own, bool))> {
    check_right();
    let (node, identity) = identity(node_id, token, generation);
    const ACTION: &str = "renew a node-id lease";
    let (conn, asked) = connect(String::new(), ACTION);
    let renewed = lease::renew(&mut Sql(&conn), &asked, node, identity, ceiling_ms)
        .map_err(|e| failed(ACTION, e))
        .or_report();
    match renewed {
        Renewed::Extended { ceiling, own } => TableIterator::once((ceiling, own)),
        Renewed::Lost { label } => {
            SnowflakeError::from(RegistryError::LeaseLost { node, label }).report()
        }
    }
}

/// Releases the lease on `node_id` under `token` and `generation` at the application's clean
/// exit: with `ceiling_ms` (its ceiling, while `mark_own` held) and `last_ms` (the time of its
/// last ID, Unix ms), the registry's mark comes down to that ID if it is still that ceiling;
/// else it stays. True if released, false if the registry holds the lease no more.
#[pg_extern(volatile, parallel_unsafe)]
fn snowflake_lease_release(
    node_id: Option<i32>,
    token: Option<&str>,
    generation: Option<i64>,
    ceiling_ms: default!(Option<i64>, "NULL"),
    last_ms: default!(Option<i64>, "NULL"),
) -> bool {
    check_right();
    // Not STRICT (the last two may be NULL): the first three are checked here.
    let (Some(node_id), Some(token), Some(generation)) = (node_id, token, generation) else {
        SnowflakeError::from(RegistryError::LeaseArgument {
            what: "the node id, token or generation is NULL",
        })
        .report()
    };
    let (node, identity) = identity(node_id, token, generation);
    const ACTION: &str = "release a node-id lease";
    let lower = ceiling_ms.zip(last_ms);
    let release = || {
        let (conn, asked) = connect(String::new(), ACTION);
        lease::release(&mut Sql(&conn), node, identity, lower, asked.lease_ms)
    };
    // The registry ends a release's transaction idle past a quarter second (a stalled member
    // must not hold the table's lock from the fleet's heartbeats), and a busy machine can stall
    // this backend that long between two statements: an application's clean exit would then
    // fail, its mark left at its ceiling. A release is a compare-and-set of the row's mark, so
    // it is tried once more on a new connection; repeated after a commit whose answer was lost,
    // it finds the mark already where it set it and leaves it there.
    release()
        .or_else(|first| {
            SnowflakeError::from(RegistryError::Failed {
                action: ACTION,
                cause: first.message,
            })
            .report_server_only();
            release()
        })
        .map_err(|e| failed(ACTION, e))
        .or_report()
        .is_some()
}

extension_sql_file!(
    "../../sql/install/lease_functions.sql",
    name = "lease_functions",
    requires = [
        snowflake_lease_acquire,
        snowflake_lease_renew,
        snowflake_lease_release
    ],
);
