//! The renewer's side of the registry, as the extension runs it: the core's `Renewer` runs a round
//! ([`Holder::round`], once per round of the renewer's loop, between renewals) over this file's
//! registry session (`client::Sql`), shared memory and state file. What is due when, the order
//! contact → pin → publish and the clock check are the core's (`snowflake_core::renewer`), and so
//! is one contact (`snowflake_core::renewer::contact`): what it asks, and what each answer does to the
//! server's identity (`Node`'s transitions, through [`Server`], one locked call each) and to what
//! the renewer remembers (`Memory`); the fleet model runs both. This file connects, and says
//! and shows what a contact came to. A registry that does not answer costs the renewer at most
//! `client::TIMEOUT_MS` per exchange; backends stand in for a renewer that is silent that long
//! (`shmem::Handle::renewer_running`).

use super::client::{self, Sql};
use super::libpq::{Conn, Failure};
use crate::error::{RegistryError, SnowflakeError};
use crate::gucs::{self, RegistryMode};
use crate::reservation::renew::{self, Renewal};
use crate::shmem::Handle;
use pgrx::{pg_guard, pg_sys};
use snowflake_core::clock::{wall_now, Clock, SystemClock};
use snowflake_core::node::{Claim, Holding, Node};
use snowflake_core::registry::table::{self, Retirement};
use snowflake_core::registry::{self, Lease};
use snowflake_core::renewer::contact::{self, Contact};
use snowflake_core::renewer::memory::{GivenUp, Memory};
use snowflake_core::renewer::{self, Renewer};
use snowflake_core::retry::LogThrottle;

/// A failure to reach the registry is logged at most once in this long.
const UNREACHABLE_LOG_INTERVAL_MS: i64 = 10_000;

/// The renewer's registry side: its connection, and the core's `Renewer` (what it knows of its
/// claim and when its next contact is due, whose rounds the fleet model runs too).
pub struct Holder {
    link: Link,
    renewer: Renewer,
}

/// The registry session and what is said of failing to reach it.
struct Link {
    conninfo: String,
    conn: Option<Conn>,
    /// Of a registry named with its standbys, the host last reached: the next connection tries
    /// it first.
    host: usize,
    unreachable_log: LogThrottle,
}

impl Holder {
    /// The renewer's registry side at its start. In available mode a renewer restarted under a
    /// claim its predecessor held goes on under it (`Node::resumable`), registry or not: its
    /// first contact is a heartbeat. Otherwise, and in fenced mode always, it claims. Either
    /// way it goes on retiring the id its predecessor gave up on a promotion.
    pub fn new(conninfo: String, shm: Handle) -> Holder {
        let available = gucs::registry_settings().mode == RegistryMode::Available;
        let state = shm.shared(|issuer| issuer.renewer_restarted(available));
        Holder {
            link: Link {
                conninfo,
                conn: None,
                host: 0,
                unreachable_log: LogThrottle::new(UNREACHABLE_LOG_INTERVAL_MS),
            },
            renewer: Renewer::new(state),
        }
    }

    /// One round of the core's `Renewer` (a claim or a heartbeat if one is due, the pin, what
    /// may be made published), with a failure to reach the registry said. Returns how long the
    /// renewer may sleep before its next round (ms).
    pub fn round(&mut self, shm: Handle) -> i64 {
        let registry = gucs::registry_settings();
        let settings = contact::Settings {
            fenced: registry.mode == RegistryMode::Fenced,
            lease_ms: registry.lease_ms,
            max_clock_skew_ms: registry.max_clock_skew_ms,
            configured: gucs::configured_node(),
            fresh_on_promotion: registry.fresh_on_promotion,
        };
        let round = self.renewer.round(
            &mut InRound {
                link: &mut self.link,
                shm,
            },
            &settings,
        );
        match round.failure {
            Some(failure) => {
                if let Some(not_logged) = self.link.unreachable_log.due(SystemClock.monotonic()) {
                    SnowflakeError::from(RegistryError::Unreachable {
                        cause: failure.message,
                        not_logged,
                    })
                    .report_warning();
                }
            }
            None if round.contacted => self.link.unreachable_log.reset(),
            None => {}
        }
        round.sleep_ms
    }
}

/// The server as the core's `Renewer` runs a round over it (`renewer::Server`): the registry
/// session, shared memory under its lock, the state file.
struct InRound<'a> {
    link: &'a mut Link,
    shm: Handle,
}

impl renewer::Server for InRound<'_> {
    type Failure = Failure;

    fn monotonic(&mut self) -> i64 {
        SystemClock.monotonic()
    }

    fn session_lost(&mut self) -> bool {
        self.link
            .conn
            .as_ref()
            .is_some_and(|conn| !conn.still_open())
    }

    fn contact(
        &mut self,
        state: &mut Memory,
        settings: &contact::Settings,
    ) -> Result<Option<i64>, Failure> {
        let conn = match self.link.conn.take() {
            Some(conn) if conn.is_ok() => conn,
            _ => {
                state.new_session();
                let timeout = registry::exchange_deadline_ms(settings.lease_ms);
                let (conn, host) =
                    Conn::connect_from(&self.link.conninfo, timeout, self.link.host)?;
                self.link.host = host;
                client::keep_alive(&conn, settings.lease_ms)?;
                conn.query(client::UPGRADE, &[])?;
                conn
            }
        };
        let result = self.exchange(&conn, state, settings);
        if result.is_ok() && state.keeps_session() {
            self.link.conn = Some(conn);
        }
        result
    }

    fn pin(&mut self) -> bool {
        pin(self.shm, &mut self.link.unreachable_log)
    }

    fn publish(&mut self, holding: Holding, skewed: bool, fenced: bool, now: i64) {
        let changed = self
            .shm
            .exclusive(|issuer| issuer.publish(holding, skewed, fenced, now));
        if changed {
            self.shm.broadcast_renewed();
        }
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
fn warn_write_failed(log: &mut LogThrottle, errno: i32) {
    if let Some(not_logged) = log.due(SystemClock.monotonic()) {
        SnowflakeError::ReservationsFailing {
            cause: SnowflakeError::state_file_write(errno).message().text,
            not_logged,
        }
        .report_warning();
    }
}

impl InRound<'_> {
    /// One contact (`renewer::contact`: the clock check, a heartbeat or a claim, each answer to
    /// the core's `Memory` and `Node`) on `conn`, then what it came to said and shown;
    /// the clock offset it read, if any.
    fn exchange(
        &mut self,
        conn: &Conn,
        state: &mut Memory,
        settings: &contact::Settings,
    ) -> Result<Option<i64>, Failure> {
        let was_refused = state.refused;
        let mut member = Member {
            shm: self.shm,
            role: None,
            unwritten: None,
            offset: None,
        };
        let contacted = contact::contact(&mut Sql(conn), &mut member, state, settings);
        if let Some(errno) = member.unwritten {
            // Rolled back: the registry is fine, the disk is not; said as a failed write.
            warn_write_failed(&mut self.link.unreachable_log, errno);
            return Ok(member.offset);
        }
        show(self.shm, contacted?, was_refused);
        Ok(member.offset)
    }
}

/// What a contact came to, said in the log and shown in shared memory's registry status
/// (`was_refused`: the claim before it was refused, and warned of).
fn show(shm: Handle, contacted: Contact<Failure>, was_refused: bool) {
    match contacted {
        Contact::Skewed | Contact::Idle => {}
        Contact::Heartbeat { retired, .. } => report_retired(retired),
        Contact::Lost { node, label } => {
            SnowflakeError::from(RegistryError::ClaimLost {
                node,
                label: label.clone(),
            })
            .report_warning();
            shm.exclusive(|issuer| {
                issuer.lost(label.as_deref().unwrap_or(""));
            });
        }
        Contact::Granted {
            grant,
            claim,
            retired,
        } => {
            shm.exclusive(|issuer| {
                issuer.taken(claim.lease.ends_at);
            });
            SnowflakeError::from(RegistryError::ClaimOutcome {
                node: claim.node,
                generation: claim.identity.generation,
                floor: (claim.floor > i64::MIN).then_some(claim.floor),
                how: grant.how,
            })
            .report_log();
            if let Some((node, stray)) = &grant.stray {
                SnowflakeError::from(RegistryError::StrayLayout {
                    node: *node,
                    stray: stray.clone(),
                    fleet: gucs::layout().describe(),
                })
                .report_warning();
            }
            report_retired(retired);
        }
        Contact::Refused {
            node,
            why,
            label,
            last_seen,
            layout,
        } => {
            let warn = !was_refused
                || shm.snapshot().registry().refusal.map(|(_, was, _)| was) != Some(why);
            if warn {
                let refused =
                    RegistryError::refused(node, why, label.clone(), last_seen, || layout);
                SnowflakeError::from(refused).report_warning();
            }
            shm.exclusive(|issuer| {
                issuer.refused(node, why, last_seen, &label);
            });
        }
        Contact::NoFreeId { max } => {
            SnowflakeError::from(RegistryError::NoFreeNodeId { max }).report_warning();
            shm.exclusive(|issuer| {
                issuer.no_free_id();
            });
        }
    }
}

/// How long the renewer's exit may spend telling the registry its release (ms): a shutdown
/// waits for it.
const RELEASE_TIMEOUT_MS: i64 = 1_000;

/// Makes the renewer release its claim when it exits (a shutdown, an error, a terminated
/// renewer; not a crash, which leaves the claim for the next start to wait on): the registry's
/// row says so, so that the server's next start takes the id back at once, and in fenced mode
/// its reservations stop at the durable one and the registry's mark comes down to it
/// (`Node::release`). Called once, at the renewer's start.
pub fn release_on_exit() {
    #[pg_guard]
    unsafe extern "C-unwind" fn release(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
        let (Ok(shm), Some(conninfo)) = (crate::shmem::get(), gucs::registry()) else {
            return;
        };
        let released = shm.exclusive(|issuer| issuer.release());
        let Some(released) = released else { return };
        // Interrupts are held off on the way out: the waits end by their time-out alone.
        let outcome = Conn::connect(&conninfo, RELEASE_TIMEOUT_MS).and_then(|conn| {
            table::release(
                &mut Sql(&conn),
                released.node,
                released.identity,
                released.lower,
                released.covers,
            )
        });
        match outcome {
            Ok(Some(lowered)) => SnowflakeError::from(RegistryError::Release {
                node: released.node,
                lowered_to: released.lower.filter(|_| lowered).map(|l| l.mark),
            })
            .report_log(),
            // Taken over meanwhile: the row is the new holder's.
            Ok(None) => {}
            // The mark stays a lease ahead: the next claim resumes there, as after a crash.
            Err(failure) => SnowflakeError::from(RegistryError::Failed {
                action: "release the claim in the pg_snowflake registry",
                cause: failure.message,
            })
            .report_log(),
        }
    }
    // SAFETY: registers a callback that runs while shared memory is still attached.
    unsafe { pg_sys::before_shmem_exit(Some(release), pg_sys::Datum::from(0)) };
}

/// Says how the retirement of the node id a promoted standby gave up for a fresh one went
/// (`renewer::contact` tries it once the primary is gone): retired, or kept by a primary still
/// connected, or failed; nothing while its lease runs (tried again), when it has no live row,
/// or once the id was claimed again (its new holder's).
fn report_retired(retired: Option<(u32, Result<Retirement, Failure>)>) {
    let Some((node, retired)) = retired else {
        return;
    };
    let outcome = match retired {
        Ok(Retirement::Retired { high_water }) => RegistryError::Retired { node, high_water },
        Ok(
            Retirement::LeaseRuns { .. } | Retirement::NoLiveRow | Retirement::ClaimedAgain { .. },
        ) => return,
        Ok(Retirement::Connected { label }) => RegistryError::RetireLive { node, label },
        Err(failure) => RegistryError::Failed {
            action: "retire the primary's node id in the pg_snowflake registry",
            cause: failure.message,
        },
    };
    SnowflakeError::from(outcome).report_log();
}

/// The server as a contact sees it (`renewer::contact::Member`): shared memory under its lock,
/// the state file written as the one writer, its names and a new token.
struct Member {
    shm: Handle,
    /// The writer's turn, held while a claim is asked.
    role: Option<renew::Turn>,
    /// The intent could not be written (the errno): the claim was rolled back.
    unwritten: Option<i32>,
    /// The clock offset the contact read (ms), if it read the registry's clock.
    offset: Option<i64>,
}

impl contact::Member for Member {
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
        self.offset = Some(offset);
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
            self.unwritten = Some(e.raw_os_error().unwrap_or(0));
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
fn label() -> String {
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
