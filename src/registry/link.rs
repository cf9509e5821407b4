//! The renewer's registry link, as the extension keeps it: the connection and what is said of
//! each round. The core's `Renewer` runs a round ([`Link::round`], once per round of the
//! renewer's loop, between renewals): what is due when, the order contact → pin → publish, the
//! clock check, and one contact (`snowflake_core::renewer::contact`: what it asks, and what each
//! answer does to the server's identity and to what the renewer remembers) are the core's, and
//! the fleet model runs them too. The round runs over the server as `member.rs` hands it over
//! (the registry session the link keeps, shared memory under its lock, the state file); this
//! file keeps the connection, and after the round says and shows what its contact came to. A registry that
//! does not answer costs the renewer at most `client::TIMEOUT_MS` per exchange; backends stand in
//! for a renewer that is silent that long (`shmem::Handle::renewer_running`).

use super::client::Sql;
use super::libpq::{Conn, Failure};
use super::member::{warn_write_failed, Connection, InRound};
use crate::error::{RegistryError, SnowflakeError};
use crate::gucs::{self, RegistryMode};
use crate::shmem::Handle;
use pgrx::{pg_guard, pg_sys};
use snowflake_core::clock::{Clock, SystemClock};
use snowflake_core::registry::table::{self, Retirement};
use snowflake_core::renewer::contact::{self, Contact};
use snowflake_core::renewer::Renewer;
use snowflake_core::retry::LogThrottle;

/// A failure to reach the registry is logged at most once in this long.
const UNREACHABLE_LOG_INTERVAL_MS: i64 = 10_000;

/// The renewer's registry link: its connection, and the core's `Renewer` (what it knows of its
/// claim and when its next contact is due, whose rounds the fleet model runs too).
pub struct Link {
    connection: Connection,
    /// What is said of failing to reach the registry, or to write the state file.
    unreachable_log: LogThrottle,
    renewer: Renewer,
}

impl Link {
    /// The renewer's registry link at its start. In available mode a renewer restarted under a
    /// claim its predecessor held goes on under it (`Node::resumable`), registry or not: its
    /// first contact is a heartbeat. Otherwise, and in fenced mode always, it claims. Either
    /// way it goes on retiring the id its predecessor gave up on a promotion.
    pub fn new(conninfo: String, shm: Handle) -> Link {
        let available = gucs::registry_settings().mode == RegistryMode::Available;
        let state = shm.shared(|issuer| issuer.renewer_restarted(available));
        Link {
            connection: Connection {
                conninfo,
                conn: None,
                host: 0,
            },
            unreachable_log: LogThrottle::new(UNREACHABLE_LOG_INTERVAL_MS),
            renewer: Renewer::new(state),
        }
    }

    /// One round of the core's `Renewer` (a claim or a heartbeat if one is due, the pin, what
    /// may be made published), then what its contact came to said and shown, and a failure to
    /// reach the registry said. Returns how long the renewer may sleep before its next round
    /// (ms).
    pub fn round(&mut self, shm: Handle) -> i64 {
        let registry = gucs::registry_settings();
        let settings = contact::Settings {
            fenced: registry.mode == RegistryMode::Fenced,
            lease_ms: registry.lease_ms,
            max_clock_skew_ms: registry.max_clock_skew_ms,
            configured: gucs::configured_node(),
            fresh_on_promotion: registry.fresh_on_promotion,
        };
        let was_refused = self.renewer.state.refused;
        let mut in_round = InRound::new(
            &mut self.connection,
            &mut self.unreachable_log,
            shm,
            was_refused,
        );
        let round = self.renewer.round(&mut in_round, &settings);
        let (unwritten, warn_refusal) = (in_round.unwritten, in_round.warn_refusal);
        match round.contact {
            // Rolled back: the registry is fine, the disk is not; said as a failed write.
            Some(Contact::Unwritten) => {
                warn_write_failed(&mut self.unreachable_log, unwritten.unwrap_or(0));
            }
            Some(contact) => say(contact, warn_refusal),
            None => {}
        }
        match round.failure {
            Some(failure) => {
                if let Some(not_logged) = self.unreachable_log.due(SystemClock.monotonic()) {
                    SnowflakeError::from(RegistryError::Unreachable {
                        cause: failure.message,
                        not_logged,
                    })
                    .report_warning();
                }
            }
            None if round.contacted => self.unreachable_log.reset(),
            None => {}
        }
        round.sleep_ms
    }
}

/// What a contact came to, said in the log (`warn_refusal`: a refusal not warned of before;
/// shared memory's registry status already shows it: `InRound::shown`).
fn say(contacted: Contact<Failure>, warn_refusal: bool) {
    match contacted {
        Contact::Skewed | Contact::Idle | Contact::Unwritten => {}
        Contact::Heartbeat { retired, .. } => report_retired(retired),
        Contact::Lost { node, label } => {
            SnowflakeError::from(RegistryError::ClaimLost { node, label }).report_warning();
        }
        Contact::Granted {
            grant,
            claim,
            retired,
        } => {
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
            if warn_refusal {
                let refused = RegistryError::refused(node, why, label, last_seen, || layout);
                SnowflakeError::from(refused).report_warning();
            }
        }
        Contact::NoFreeId { max } => {
            SnowflakeError::from(RegistryError::NoFreeNodeId { max }).report_warning();
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
