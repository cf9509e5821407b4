//! The renewer's side of the registry: claims the node id before the first ID, renews the lease
//! with heartbeats, checks the clock at every contact, and says in shared memory whether IDs
//! may be made ([`Holder::turn`], once per turn of the renewer's loop, between renewals). What
//! each outcome does to the server's identity is the core's (`snowflake_core::node::Node`'s
//! transitions, one locked call each), and so is what the renewer remembers between contacts
//! (`snowflake_core::node::holder::HolderState`, one call per outcome, which the fleet model
//! makes too); this file talks and logs. A heartbeat that finds the id
//! taken over closes its session and claims again at the next contact. A
//! registry that does not answer costs the renewer at most `client::TIMEOUT_MS` per exchange;
//! backends stand in for a renewer that is silent that long (`shmem::Handle::renewer_running`).

use super::client::{self, Sql};
use super::libpq::{Conn, Failure};
use crate::error::{RegistryError, SnowflakeError};
use crate::gucs::{self, RegistryMode};
use crate::reservation::renew::{self, Renewal};
use crate::shmem::{Handle, Shared};
use pgrx::{pg_guard, pg_sys};
use snowflake_core::clock::{wall_now, Clock, SystemClock};
use snowflake_core::node::holder::HolderState;
use snowflake_core::node::Taken;
use snowflake_core::registry::table::{self, Claimed, Decided, Heartbeat, Request, Retirement};
use snowflake_core::registry::{self, Claimant, Lease, Refusal};
use snowflake_core::retry::LogThrottle;

/// A failure to reach the registry is logged at most once in this long.
const UNREACHABLE_LOG_INTERVAL_MS: i64 = 10_000;

/// The renewer's registry side: its connection, and what it knows of its claim (the core's
/// `HolderState`, which the fleet model drives too).
pub struct Holder {
    conninfo: String,
    conn: Option<Conn>,
    /// Of a registry named with its standbys, the host last reached: the next connection tries
    /// it first.
    host: usize,
    state: HolderState,
    /// The clock is off by more than the limit (the offset).
    skewed: Option<i64>,
    next_contact: i64,
    unreachable_log: LogThrottle,
}

impl Holder {
    /// The renewer's registry side at its start. In available mode a renewer restarted under a
    /// claim its predecessor held goes on under it (`Node::resumable`), registry or not: its
    /// first contact is a heartbeat. Otherwise, and in fenced mode always, it claims.
    pub fn new(conninfo: String, shm: Handle) -> Holder {
        let resumed = (gucs::registry_settings().mode == RegistryMode::Available)
            .then(|| {
                shm.locked(pg_sys::LWLockMode::LW_SHARED, |shared| {
                    let lease = Lease {
                        ends_at: shared.registry.lease_ends_at,
                        ceiling: shared.node.ceiling,
                    };
                    shared.node.resumable(lease)
                })
            })
            .flatten();
        Holder {
            conninfo,
            conn: None,
            host: 0,
            state: resumed.map_or_else(HolderState::new, HolderState::resumed),
            skewed: None,
            next_contact: i64::MIN,
            unreachable_log: LogThrottle::new(UNREACHABLE_LOG_INTERVAL_MS),
        }
    }

    /// Contacts the registry if it is time (a claim, or a heartbeat), then updates what shared
    /// memory says about issuing. Returns how long the renewer may sleep before the next
    /// contact is due (ms).
    pub fn turn(&mut self, shm: Handle) -> i64 {
        let settings = gucs::registry_settings();
        let now = SystemClock.monotonic();
        if now >= self.next_contact {
            let interval = registry::heartbeat_interval_ms(settings.lease_ms);
            self.next_contact = now + self.state.next_contact_in(interval);
            if let Err(failure) = self.contact(shm, &settings) {
                self.conn = None;
                if let Some(not_logged) = self.unreachable_log.due(now) {
                    SnowflakeError::from(RegistryError::Unreachable {
                        cause: failure.message,
                        not_logged,
                    })
                    .report_warning();
                }
            } else {
                self.unreachable_log.reset();
            }
        }
        if self.state.pin_due() {
            self.pin(shm);
        }
        self.publish(shm, settings.mode);
        if self.state.pin_due() {
            return 10;
        }
        (self.next_contact - SystemClock.monotonic()).clamp(10, 1_000)
    }

    /// Writes the new claim into the state file and the WAL (for the standbys) before any ID
    /// is made under it, as the one writer of the moment (`renew::claim_rewrite`: after a
    /// stand-in's renewal in progress, if any); tried again on the next turn if it cannot be.
    fn pin(&mut self, shm: Handle) {
        let Some(claim) = renew::claim_rewrite(shm) else {
            return;
        };
        match renew::renew(claim) {
            Renewal::Done { .. } => self.state.pinned(),
            Renewal::Failed { errno } => self.warn_write_failed(errno),
            Renewal::Fenced { .. } | Renewal::Abandoned => {}
        }
    }

    /// One claim or heartbeat, with the clock check, on the open connection (made anew when
    /// the last one failed).
    fn contact(&mut self, shm: Handle, settings: &gucs::RegistrySettings) -> Result<(), Failure> {
        let conn = match self.conn.take() {
            Some(conn) if conn.is_ok() => conn,
            _ => {
                self.state.new_session();
                // An exchange may take a third of the lease: a registry that hangs (stopped,
                // not down) is given up in time to renew the lease on the next try.
                let timeout = (settings.lease_ms / 3).clamp(500, client::TIMEOUT_MS);
                let (conn, host) = Conn::connect_from(&self.conninfo, timeout, self.host)?;
                self.host = host;
                client::keep_alive(&conn, settings.lease_ms)?;
                conn
            }
        };
        let result = self.exchange(&conn, shm, settings);
        if self.state.keeps_session() {
            self.conn = Some(conn);
        }
        result
    }

    fn exchange(
        &mut self,
        conn: &Conn,
        shm: Handle,
        settings: &gucs::RegistrySettings,
    ) -> Result<(), Failure> {
        let (sent_mono, sent) = (SystemClock.monotonic(), wall_now());
        let registry_now = client::clock(conn)?;
        let offset = registry::clock_offset(sent, wall_now(), registry_now);
        self.skewed = (offset.abs() > settings.max_clock_skew_ms).then_some(offset);
        shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
            shared.registry.clock_offset_ms = offset;
            shared.registry.last_contact = sent;
        });
        if self.skewed.is_some() {
            return Ok(());
        }
        let state = shm.snapshot();
        let fenced = settings.mode == RegistryMode::Fenced;
        let reserved = state.generator.reserved_until();
        let high_water = if fenced {
            Lease::ceiling_for(sent, reserved, settings.lease_ms)
        } else {
            reserved
        };
        let Some(held) = self.state.held else {
            return self.claim(conn, shm, settings, sent_mono, offset, high_water);
        };
        let beat = table::heartbeat(
            &mut Sql(conn),
            self.state.needs_lock,
            held.node,
            held.identity,
            settings.lease_ms,
            high_water,
            offset,
        )?;
        match beat {
            Heartbeat::Renewed { locked } => {
                let lease = Lease::granted(sent_mono, high_water, settings.lease_ms);
                self.state.renewed(lease, locked);
                shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
                    shared.node.lease_renewed(&lease, fenced);
                    shared.registry.lease_ends_at = lease.ends_at;
                });
                if let Some(old) = self.state.retire_pending {
                    self.state.retire_pending = retire_inherited(conn, old).then_some(old);
                }
            }
            Heartbeat::Lost { holder } => {
                SnowflakeError::from(RegistryError::ClaimLost {
                    node: held.node,
                    holder: holder.clone(),
                })
                .report_warning();
                shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
                    shared.registry.set_label(holder.as_deref().unwrap_or(""));
                });
                self.state.lost();
                self.next_contact = SystemClock.monotonic();
            }
        }
        Ok(())
    }

    /// Claims a node id: the registry decides (`registry::table::claim`, `registry::decide`); a claim
    /// taken is written to the state file before the registry commits it (its intent, so that
    /// a restart in between knows the generation it claimed), holding the writer's role, and
    /// pinned before the first ID (`pin`, next turn).
    fn claim(
        &mut self,
        conn: &Conn,
        shm: Handle,
        settings: &gucs::RegistrySettings,
        sent_mono: i64,
        offset: i64,
        high_water: i64,
    ) -> Result<(), Failure> {
        let state = shm.snapshot();
        if !state.node.may_claim() {
            return Ok(());
        }
        let (claimant, recorded) = state.node.claimant(
            gucs::configured_node(),
            settings.fresh_on_promotion,
            state.generator.reserved_until(),
            self.state.patient(sent_mono, settings.lease_ms),
        );
        // A promoted standby claiming a fresh id gives up the one it inherited.
        let given_up = state.node.claim.map(|_| state.node.id);
        let given_up = given_up.filter(|_| claimant.identity.is_none());
        let request = request(&state, &claimant, recorded, settings, high_water, offset);
        let Some(claimed) =
            self.claim_recorded(conn, shm, settings, &claimant, &request, sent_mono)
        else {
            return Ok(());
        };
        match claimed? {
            Claimed::Taken(decided) => {
                self.taken(conn, shm, &decided, sent_mono, settings.lease_ms, given_up)
            }
            Claimed::Refused {
                node,
                why,
                holder,
                last_seen,
            } => self.refused(shm, node, why, holder, last_seen, &request.layout),
            Claimed::NoFreeId => self.no_free_id(shm, request.max_node),
        }
        Ok(())
    }

    /// The registry's answer to a claim whose intent, if it grants one, is written to the state
    /// file before it commits, holding the writer's role; `None` when the role is busy (a
    /// renewal is being written: next turn) or the state file could not be written (said; the
    /// registry rolled the claim back).
    fn claim_recorded(
        &mut self,
        conn: &Conn,
        shm: Handle,
        settings: &gucs::RegistrySettings,
        claimant: &Claimant,
        request: &Request,
        sent_mono: i64,
    ) -> Option<Result<Claimed, Failure>> {
        let role = renew::claim_rewrite(shm)?;
        let fenced = settings.mode == RegistryMode::Fenced;
        let mut unwritten = None;
        let claimed = table::claim(&mut Sql(conn), claimant, request, |decided| {
            let taken = Taken::of(decided, sent_mono, settings.lease_ms);
            let durable = shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
                shared.node.claimed(&mut shared.generator, &taken, fenced)
            });
            role.write_state_file(&durable).map_err(|e| {
                unwritten = Some(e.raw_os_error().unwrap_or(0));
                Failure {
                    message: format!("could not record the claim in the state file: {e}"),
                    sqlstate: None,
                }
            })
        });
        role.release();
        if let Some(errno) = unwritten {
            // Rolled back: the registry is fine, the disk is not; said as a failed write.
            self.warn_write_failed(errno);
            return None;
        }
        Some(claimed)
    }

    /// A claim the registry granted: its lease in shared memory, logged and remembered; the id
    /// `given_up` for it (a promoted standby's inherited one) retired once its primary is gone.
    fn taken(
        &mut self,
        conn: &Conn,
        shm: Handle,
        decided: &Decided,
        sent_mono: i64,
        lease_ms: i64,
        given_up: Option<u32>,
    ) {
        let taken = Taken::of(decided, sent_mono, lease_ms);
        shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
            shared.registry.lease_ends_at = taken.lease.ends_at;
            shared.registry.refusal = None;
        });
        SnowflakeError::from(RegistryError::Claimed {
            node: taken.node,
            generation: taken.identity.generation,
            floor: (taken.floor > i64::MIN).then_some(taken.floor),
            how: decided.how,
        })
        .report_log();
        self.state.taken(taken.node, taken.identity, taken.lease);
        if let Some(old) = given_up.filter(|&old| old != taken.node) {
            self.state.retire_pending = retire_inherited(conn, old).then_some(old);
        }
    }

    /// A claim the registry refused: warned of once (until a claim is taken, or the refusal
    /// changes), and left in shared memory for the calls' errors (`layout`: this server's,
    /// described). A session under this server's own label is waited for a while
    /// (`HolderState::waits_for_session`).
    fn refused(
        &mut self,
        shm: Handle,
        node: u32,
        why: Refusal,
        holder: String,
        last_seen: i64,
        layout: &str,
    ) {
        let changed = shm.snapshot().registry.refusal.map(|(_, was, _)| was) != Some(why);
        if !self.state.refused || changed {
            let refused =
                RegistryError::refused(node, why, holder.clone(), last_seen, || layout.into());
            SnowflakeError::from(refused).report_warning();
        }
        if why == Refusal::OpenSession {
            self.state.waits_for_session(SystemClock.monotonic());
        } else {
            self.state.refused();
        }
        shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
            shared.registry.refusal = Some((node, why, last_seen));
            shared.registry.set_label(&holder);
        });
    }

    /// No id of the layout (0 to `max`) is free.
    fn no_free_id(&mut self, shm: Handle, max: u32) {
        self.state.refused();
        SnowflakeError::from(RegistryError::NoFreeNodeId { max }).report_warning();
        shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
            shared.registry.refusal = None;
        });
    }

    /// The state file could not be written (`errno`): a WARNING, at most one in a while.
    fn warn_write_failed(&mut self, errno: i32) {
        if let Some(not_logged) = self.unreachable_log.due(SystemClock.monotonic()) {
            SnowflakeError::ReservationsFailing {
                cause: SnowflakeError::state_file_write(errno).message().text,
                not_logged,
            }
            .report_warning();
        }
    }

    /// Says in shared memory whether IDs may be made (`Node::publish`), and wakes the callers
    /// waiting for it.
    fn publish(&self, shm: Handle, mode: RegistryMode) {
        let holding = self.state.holding();
        let now = SystemClock.monotonic();
        let fenced = mode == RegistryMode::Fenced;
        let skewed = self.skewed.is_some();
        let changed = shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
            shared.node.publish(holding, skewed, fenced, now)
        });
        if changed {
            shm.broadcast_renewed();
        }
    }
}

/// How long the renewer's exit may spend telling the registry its release (ms): a shutdown
/// waits for it.
const RELEASE_TIMEOUT_MS: i64 = 1_000;

/// Makes the renewer release its fenced claim when it exits (a shutdown, an error, a
/// terminated renewer; not a crash, which resumes at the mark): its reservations stop at the
/// durable one, and the registry's mark comes down to it (`Node::release`). Called once, at
/// the renewer's start.
pub fn release_on_exit() {
    #[pg_guard]
    unsafe extern "C-unwind" fn release(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
        let (Ok(shm), Some(conninfo)) = (crate::shmem::get(), gucs::registry()) else {
            return;
        };
        if gucs::registry_settings().mode != RegistryMode::Fenced {
            return;
        }
        let released = shm.locked(pg_sys::LWLockMode::LW_EXCLUSIVE, |shared| {
            shared.node.release(&shared.generator)
        });
        let Some(released) = released else { return };
        // Interrupts are held off on the way out: the waits end by their time-out alone.
        let outcome = Conn::connect(&conninfo, RELEASE_TIMEOUT_MS).and_then(|conn| {
            table::release(
                &mut Sql(&conn),
                released.node,
                released.claim,
                released.mark,
            )
        });
        match outcome {
            Ok(true) => SnowflakeError::from(RegistryError::Released {
                node: released.node,
                mark: released.mark,
            })
            .report_log(),
            // Taken over meanwhile: the row is the new holder's.
            Ok(false) => {}
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

/// Retires the node id a promoted standby inherited and gave up for a fresh one, once its
/// primary is gone: neither connected (then it keeps the id, and that is logged) nor within
/// its lease. Returns whether to try again at the next heartbeat (the lease still runs).
fn retire_inherited(conn: &Conn, node: u32) -> bool {
    let outcome = match table::retire(&mut Sql(conn), node) {
        Ok(Retirement::Retired { high_water }) => RegistryError::Retired { node, high_water },
        Ok(Retirement::LeaseRuns { .. }) => return true,
        Ok(Retirement::Connected { holder }) => RegistryError::RetireLive { node, holder },
        Ok(Retirement::NoLiveRow) => return false,
        Err(failure) => RegistryError::Failed {
            action: "retire the primary's node id in the pg_snowflake registry",
            cause: failure.message,
        },
    };
    SnowflakeError::from(outcome).report_log();
    false
}

/// What this server tells the registry with a claim for `claimant` (`recorded`: the node id of
/// its state file; `high_water` and `offset`: this contact's mark and clock offset).
fn request(
    state: &Shared,
    claimant: &Claimant,
    recorded: Option<u32>,
    settings: &gucs::RegistrySettings,
    high_water: i64,
    offset: i64,
) -> Request {
    let layout = gucs::layout();
    let fenced = settings.mode == RegistryMode::Fenced;
    Request {
        label: label(),
        // SAFETY: reads the control file data, which every server process has.
        system: unsafe { pg_sys::GetSystemIdentifier() },
        layout: layout.describe(),
        max_node: layout.max_node(),
        lease_ms: settings.lease_ms,
        high_water,
        ahead_of_floor_ms: if fenced { settings.lease_ms } else { 0 },
        clock_offset_ms: offset,
        margin_ms: settings.max_clock_skew_ms,
        recorded_node: recorded,
        new_token: new_token(),
        used_before: registry::used_before(state.node.history.named(), claimant.wanted),
        used_until: state.node.history.until,
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

/// 128 random bits from the server's strong random source.
fn new_token() -> u128 {
    let mut bytes = [0u8; 16];
    // SAFETY: a buffer of its stated length.
    if !unsafe { pg_sys::pg_strong_random(bytes.as_mut_ptr().cast(), bytes.len()) } {
        // No strong randomness: the clocks and the pid still make a token no copy shares.
        let mixed = (wall_now() as u128) << 64
            | (SystemClock.monotonic() as u128) << 32
            | u128::from(std::process::id());
        return mixed;
    }
    u128::from_le_bytes(bytes)
}
