//! The server as the core's renewer sees it, for the registry's link (`link.rs`): as its round
//! runs over it ([`InRound`], a `renewer::Server`: the registry session for a contact, the pin,
//! the publication) and as one contact sees it ([`ServerSide`], a `contact::Member`: shared
//! memory under its lock, the state file written as the one writer, its names and a new token).
//! With the registry session's connection ([`Connection`]). Each of its calls is one locked call
//! of a core transition; the fleet model's counterpart is `core/src/node/tests/model/member.rs`.

use super::client::{self, Sql};
use super::libpq::{Conn, Failure};
use crate::error::SnowflakeError;
use crate::gucs;
use crate::reservation::renew::{self, Renewal};
use crate::shmem::Handle;
use pgrx::pg_sys;
use snowflake_core::clock::{wall_now, Clock, SystemClock};
use snowflake_core::node::{Claim, Holding, Node};
use snowflake_core::registry::{self, Lease};
use snowflake_core::renewer;
use snowflake_core::renewer::contact::{self, Contact, Parties};
use snowflake_core::renewer::memory::GivenUp;
use snowflake_core::retry::LogThrottle;

/// The registry session's connection.
pub(super) struct Connection {
    pub(super) conninfo: String,
    pub(super) conn: Option<Conn>,
    /// Of a registry named with its standbys, the host last reached: the next connection tries
    /// it first.
    pub(super) host: usize,
}

impl Connection {
    /// The connection, made anew (`true`) when there is none or it failed: its exchanges bounded
    /// by `lease_ms`, its keepalives set, the registry's table brought up to date.
    pub(super) fn connect(&mut self, lease_ms: i64) -> Result<(&Conn, bool), Failure> {
        let new = !self.conn.as_ref().is_some_and(Conn::is_ok);
        if new {
            self.conn = None;
            let timeout = registry::exchange_deadline_ms(lease_ms);
            let (conn, host) = Conn::connect_from(&self.conninfo, timeout, self.host)?;
            self.host = host;
            client::keep_alive(&conn, lease_ms)?;
            conn.query(client::UPGRADE, &[])?;
            self.conn = Some(conn);
        }
        let conn = self.conn.as_ref().expect("connected above");
        Ok((conn, new))
    }
}

/// The server as the core's `Renewer` runs a round over it (`renewer::Server`): the registry
/// session, shared memory under its lock, the state file.
pub(super) struct InRound<'a> {
    connection: &'a mut Connection,
    /// Where a failed write of the state file is said.
    log: &'a mut LogThrottle,
    shm: Handle,
    /// The claim's intent could not be written (the errno): the claim was rolled back.
    pub(super) unwritten: Option<i32>,
    /// The claim before this round's was refused, and warned of.
    was_refused: bool,
    /// This round's refusal is one to warn of: the first, or for another reason than the last.
    pub(super) warn_refusal: bool,
}

impl<'a> InRound<'a> {
    pub(super) fn new(
        connection: &'a mut Connection,
        log: &'a mut LogThrottle,
        shm: Handle,
        was_refused: bool,
    ) -> Self {
        InRound {
            connection,
            log,
            shm,
            unwritten: None,
            was_refused,
            warn_refusal: false,
        }
    }
}

impl renewer::Server for InRound<'_> {
    type Failure = Failure;
    type Session<'s>
        = Parties<Sql<'s>, ServerSide<'s>>
    where
        Self: 's;

    fn monotonic(&mut self) -> i64 {
        SystemClock.monotonic()
    }

    fn session_lost(&mut self) -> bool {
        self.connection
            .conn
            .as_ref()
            .is_some_and(|conn| !conn.still_open())
    }

    fn session(&mut self, lease_ms: i64) -> Result<(Self::Session<'_>, bool), Failure> {
        let (conn, new) = self.connection.connect(lease_ms)?;
        let member = ServerSide {
            shm: self.shm,
            role: None,
            unwritten: &mut self.unwritten,
        };
        Ok((
            Parties {
                table: Sql(conn),
                member,
            },
            new,
        ))
    }

    fn end_session(&mut self) {
        self.connection.conn = None;
    }

    fn pin(&mut self) -> bool {
        pin(self.shm, self.log)
    }

    fn publish(&mut self, holding: Holding, skewed: bool, fenced: bool, now: i64) {
        let changed = self
            .shm
            .exclusive(|issuer| issuer.publish(holding, skewed, fenced, now));
        if changed {
            self.shm.broadcast_renewed();
        }
    }

    fn shown(&mut self, contact: &Contact<Failure>) {
        let was_refused = self.was_refused;
        self.warn_refusal = self.shm.exclusive(|issuer| match contact {
            Contact::Lost { label, .. } => {
                issuer.lost(label.as_deref().unwrap_or(""));
                false
            }
            Contact::Granted { claim, .. } => {
                issuer.taken(claim.lease.ends_at);
                false
            }
            Contact::Refused {
                node,
                why,
                label,
                last_seen,
                ..
            } => {
                let warn =
                    !was_refused || issuer.registry().refusal.map(|(_, was, _)| was) != Some(*why);
                issuer.refused(*node, *why, *last_seen, label);
                warn
            }
            Contact::NoFreeId { .. } => {
                issuer.no_free_id();
                false
            }
            Contact::Skewed | Contact::Idle | Contact::Unwritten | Contact::Heartbeat { .. } => {
                false
            }
        });
    }
}

/// Writes the new claim into the state file and the WAL (for the standbys) before any ID is
/// made under it, as the one writer of the moment (`renew::rewrite_turn`: after a stand-in's
/// renewal in progress, if any); whether it was written (if not, the next round tries again).
fn pin(shm: Handle, log: &mut LogThrottle) -> bool {
    let Some(turn) = renew::rewrite_turn(shm) else {
        return false;
    };
    match renew::renew(turn) {
        Renewal::Done { .. } => true,
        Renewal::Failed { errno } => {
            warn_write_failed(log, errno);
            false
        }
        Renewal::Fenced { .. } | Renewal::Abandoned | Renewal::GivenBack => false,
    }
}

/// The state file could not be written (`errno`): a WARNING, at most one in a while.
pub(super) fn warn_write_failed(log: &mut LogThrottle, errno: i32) {
    if let Some(not_logged) = log.due(SystemClock.monotonic()) {
        SnowflakeError::ReservationsFailing {
            cause: SnowflakeError::state_file_write(errno).message().text,
            not_logged,
        }
        .report_warning();
    }
}

/// The server as a contact sees it (`renewer::contact::Member`): shared memory under its lock,
/// the state file written as the one writer, its names and a new token.
pub(super) struct ServerSide<'a> {
    shm: Handle,
    /// The writer's turn, held while a claim is asked.
    role: Option<renew::Turn>,
    /// The intent could not be written (the errno): the claim was rolled back.
    unwritten: &'a mut Option<i32>,
}

impl contact::Member for ServerSide<'_> {
    type Failure = Failure;

    fn wall(&mut self) -> i64 {
        wall_now()
    }

    fn monotonic(&mut self) -> i64 {
        SystemClock.monotonic()
    }

    fn state(&mut self) -> (Node, i64) {
        self.shm.snapshot().reaches(&mut SystemClock)
    }

    fn clock_read(&mut self, offset: i64, sent: i64) {
        self.shm.exclusive(|issuer| {
            issuer.clock_read(offset, sent);
        });
    }

    fn start_writing(&mut self) -> bool {
        self.role = renew::rewrite_turn(self.shm);
        self.role.is_some()
    }

    fn stop_writing(&mut self) {
        if let Some(role) = self.role.take() {
            role.give_back();
        }
    }

    fn intend(&mut self, claim: &Claim, fenced: bool) -> Result<(), Failure> {
        let (durable, before) = self.shm.exclusive(|issuer| issuer.intend(claim, fenced));
        let role = self
            .role
            .as_ref()
            .expect("the writer's turn is held while a claim is asked");
        role.write_state_file(&durable).map_err(|e| {
            self.shm.exclusive(|issuer| {
                issuer.intent_unwritten(before);
            });
            *self.unwritten = Some(e.raw_os_error().unwrap_or(0));
            Failure {
                message: format!("could not record the claim in the state file: {e}"),
                sqlstate: None,
            }
        })
    }

    fn lease_extended(&mut self, lease: &Lease, fenced: bool, before: i64) {
        self.shm.exclusive(|issuer| {
            issuer.lease_extended(lease, fenced, before);
        });
    }

    fn retirement_pending(&mut self, given_up: Option<GivenUp>) {
        self.shm.exclusive(|issuer| {
            issuer.retirement_pending(given_up);
        });
    }

    fn met_holder(&mut self) {
        self.shm.exclusive(|issuer| issuer.met_holder());
    }

    fn disown(&mut self) {
        let durable = self.shm.exclusive(|issuer| issuer.disown());
        if let (Some(durable), Some(role)) = (durable, self.role.as_ref()) {
            // Left to the next reservation if it fails: the claim is forgotten here already.
            let _ = role.write_state_file(&durable);
        }
    }

    fn names(&mut self) -> contact::Names {
        let layout = gucs::layout();
        contact::Names {
            label: label(),
            // SAFETY: reads the control file data, which every server process has.
            system: unsafe { pg_sys::GetSystemIdentifier() },
            layout: layout.describe(),
            max_node: layout.max_node(),
        }
    }

    fn new_token(&mut self) -> u128 {
        crate::pg::strong_random()
    }
}

/// How this server is named in the registry: `cluster_name` if set, and its host and port.
pub(crate) fn label() -> String {
    let setting = |name: &std::ffi::CStr| {
        // SAFETY: a NUL-terminated name; missing_ok; the value is copied at once.
        let value = unsafe { pg_sys::GetConfigOption(name.as_ptr(), true, false) };
        if value.is_null() {
            String::new()
        } else {
            unsafe { std::ffi::CStr::from_ptr(value) }
                .to_string_lossy()
                .into_owned()
        }
    };
    let mut host = [0u8; 256];
    // SAFETY: a buffer of its stated length.
    let host = if unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len()) } == 0 {
        let end = host.iter().position(|&b| b == 0).unwrap_or(host.len());
        String::from_utf8_lossy(&host[..end]).into_owned()
    } else {
        "?".into()
    };
    let place = format!("{host}:{}", setting(c"port"));
    match setting(c"cluster_name") {
        name if name.is_empty() => place,
        name => format!("{name} ({place})"),
    }
}
