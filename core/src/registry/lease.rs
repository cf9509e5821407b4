//! Node-id leases for application processes: a process that is not a pg_snowflake server (a
//! Kafka producer, an outbox writer) holds a node id of the fleet's registry under the rules a
//! server holds one by, through the claim, heartbeat, release and retirement procedures of
//! [`table`], run here for it by a member server that reaches the registry (the extension's
//! `snowflake_lease_*` functions, over `client::Sql`). Nothing here decides anew: an
//! application is a claimant the rules already know.
//!
//! - It has no data directory and no state file: it claims the lowest free id ([`Want::Any`])
//!   with no identity of its own, under a fresh owner token drawn for each acquisition, which
//!   the process keeps in memory only (its proof of being the running holder: no other process,
//!   and no later start of the same program, carries it). Its boot value and place are drawn
//!   from the token, so that a heartbeat made by any member for it writes the same ones.
//! - It is always fenced: it stamps no ID past the ceiling ([`Acquired::ceiling`], then each
//!   [`Renewed::Extended`]'s) the registry recorded as the id's mark before answering, a lease
//!   past the member's clock. A later holder of the id starts above that mark
//!   ([`Grant::floor`]), whatever the application's clock or link did meanwhile.
//! - It keeps no registry session between calls (each call is one connection of the member),
//!   so it never holds the id's advisory lock: its row is live while its lease runs, and only
//!   that long. An application whose lease ran out (killed, cut off, its member gone) is
//!   retired by the next acquisition ([`Applications::lapsed`], then [`table::retire`], which
//!   checks that the lease ran out), and its id is handed out again once the registry's clock
//!   is past its mark by the clock margin, the next holder above that mark.
//! - Its rows are told from servers' by their system identifier, [`APPLICATION_SYSTEM`]: no
//!   PostgreSQL cluster draws 0. A server's row is never retired by an application's
//!   acquisition.

#[cfg(doc)]
use super::table::Grant;
use super::table::{self, ClaimOutcome, Heartbeat, HeartbeatRequest, Lowering, Request, Table};
use super::{lead_room_ms, own_mark, Claimant, Identity, Lease, Want};

/// The system identifier an application's row records: no cluster's.
pub const APPLICATION_SYSTEM: u64 = 0;

/// The registry's table as an application's acquisition reads it: the rows of applications
/// whose lease ran out, to retire before the claim.
pub trait Applications: Table {
    /// The node ids of live rows recorded under [`APPLICATION_SYSTEM`] whose lease ran out on
    /// the registry's clock: candidates only; [`table::retire`] decides each.
    fn lapsed(&mut self) -> Result<Vec<u32>, Self::Failure>;
}

/// What the member knows when it runs an application's procedure.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Asked {
    /// How the application is named in the registry (its label and the member's).
    pub label: String,
    /// The fleet's layout, described (the member's, which the registry checked at its claim).
    pub layout: String,
    /// The highest node id of the layout.
    pub max_node: u32,
    /// The registry's lease (`pg_snowflake.registry_lease_ms`).
    pub lease_ms: i64,
    /// The clock margin (`pg_snowflake.max_clock_skew_ms`).
    pub margin_ms: i64,
    /// The member's wall clock when it read the registry's (Unix ms).
    pub now: i64,
    /// The member's clock less the registry's (ms), within the margin.
    pub offset_ms: i64,
}

/// An application's lease as an acquisition granted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Acquired {
    pub node: u32,
    pub identity: Identity,
    /// The id's mark before this claim (Unix ms; `i64::MIN`: a new id): the application's IDs
    /// lie above it.
    pub floor: i64,
    /// The mark the registry recorded (Unix ms): no ID of the application's lies past it.
    pub ceiling: i64,
}

/// How an acquisition ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Acquisition {
    Granted(Acquired),
    /// Every id of the layout is held, or retired and not free yet.
    NoFreeId,
    /// The registry refused (another layout in the registry than the member's: the fleet's
    /// claim then refuses the member too).
    Refused(ClaimOutcome),
}

/// What one renewal found.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Renewed {
    /// The lease is extended: the new ceiling (Unix ms), and whether the mark was still the
    /// one the application's lease wrote last (`own`: a release may bring it down;
    /// [`own_mark`]).
    Extended { ceiling: i64, own: bool },
    /// The row no longer names this lease: retired (its lease ran out), or another's.
    Lost { label: Option<String> },
}

/// The boot value and place an application's row records: drawn from its token, so that every
/// member writes the same for it.
pub fn boot_of(token: u128) -> u64 {
    (token as u64) ^ ((token >> 64) as u64)
}

/// The mark a claim or renewal at `asked.now` records: a lease past the member's clock.
fn ceiling(asked: &Asked) -> i64 {
    Lease::ceiling_for(asked.now, i64::MIN, asked.lease_ms, 0)
}

/// Acquires a node id for an application under the fresh token `token`: the applications whose
/// lease ran out retired first (each in its own transaction, as an operator's retirement), then
/// the lowest free id claimed as a new server without a state file would claim it.
pub fn acquire<T: Applications>(
    table: &mut T,
    asked: &Asked,
    token: u128,
) -> Result<Acquisition, T::Failure> {
    for node in table.lapsed()? {
        // Refused (its lease renewed meanwhile, or a session holds it): left as it is.
        table::retire(table, node)?;
    }
    let boot = boot_of(token);
    let claimant = Claimant {
        identity: None,
        wanted: Want::Any,
        reserved: i64::MIN,
        history_lost: false,
        patient: false,
        boot,
        after_clean_stop: false,
        met_holder: false,
        mark: None,
        place: boot,
    };
    let request = Request {
        label: asked.label.clone(),
        system: APPLICATION_SYSTEM,
        layout: asked.layout.clone(),
        max_node: asked.max_node,
        lease_ms: asked.lease_ms,
        high_water: ceiling(asked),
        ahead_of_floor_ms: lead_room_ms(asked.lease_ms, asked.margin_ms),
        clock_offset_ms: asked.offset_ms,
        margin_ms: asked.margin_ms,
        recorded_node: None,
        new_token: token,
        boot,
        place: boot,
        used_before: Vec::new(),
        used_until: i64::MIN,
    };
    // No intent to write: the application keeps its lease in memory, and a claim whose answer
    // is lost is a lease it never uses (its row lapses and is retired).
    Ok(
        match table::claim(table, &claimant, &request, |_| Ok(()))? {
            ClaimOutcome::Granted(grant) => Acquisition::Granted(Acquired {
                node: grant.node,
                identity: grant.identity,
                floor: grant.floor,
                ceiling: grant.mark,
            }),
            ClaimOutcome::NoFreeId => Acquisition::NoFreeId,
            refused => Acquisition::Refused(refused),
        },
    )
}

/// Renews the lease of `node` under `identity`, whose ceiling was `last_ceiling` (the mark its
/// claim or last renewal wrote): one heartbeat ([`table::heartbeat`], the row decides).
pub fn renew<T: Table>(
    table: &mut T,
    asked: &Asked,
    node: u32,
    identity: Identity,
    last_ceiling: i64,
) -> Result<Renewed, T::Failure> {
    let boot = boot_of(identity.token);
    let request = HeartbeatRequest {
        lease_ms: asked.lease_ms,
        high_water: ceiling(asked),
        clock_offset_ms: asked.offset_ms,
        boot,
        place: boot,
    };
    Ok(
        match table::heartbeat(table, false, node, identity, &request)? {
            Heartbeat::Extended { before, .. } => Renewed::Extended {
                // What this renewal asked the mark to cover, never below what the lease had:
                // not the mark it found, which a joiner's IDs under the id may have raised.
                ceiling: request.high_water.max(last_ceiling),
                own: own_mark(Some(last_ceiling), before, request.high_water).is_some(),
            },
            Heartbeat::Lost { label } => Renewed::Lost { label },
        },
    )
}

/// Releases the lease of `node` under `identity` on the application's clean exit
/// ([`table::release`]): with `lower` (the ceiling its last renewal wrote, while that mark was its
/// own, and the time of its last ID, Unix ms), the mark comes down towards that ID, if the
/// registry's mark is still that ceiling; else it stays. Never below the time of that renewal
/// (the ceiling less `lease_ms`): the application says where its IDs end, and a last ID below
/// its floor (a client that made none and said so wrongly) must not bring the mark below the
/// previous holder's IDs; the floor lies before every claim and renewal of the lease (an id is
/// handed out again only once the registry's clock is past its mark and the margin). `None` if
/// the row is not this lease's any more.
pub fn release<T: Table>(
    table: &mut T,
    node: u32,
    identity: Identity,
    lower: Option<(i64, i64)>,
    lease_ms: i64,
) -> Result<Option<bool>, T::Failure> {
    let lowering = lower.map(|(from, last)| Lowering {
        from,
        mark: lowered_to(from, last, lease_ms),
    });
    table::release(table, node, identity, lowering, i64::MIN)
}

/// Where a release from the ceiling `from` brings the mark for a last ID at `last`: that ID,
/// but never above the ceiling nor below the renewal that wrote it.
pub fn lowered_to(from: i64, last: i64, lease_ms: i64) -> i64 {
    last.max(from.saturating_sub(lease_ms)).min(from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boot_value_is_the_tokens_alone() {
        assert_eq!(boot_of(0), 0);
        assert_eq!(boot_of(1 << 64 | 1), 0);
        assert_ne!(boot_of(3 << 64 | 1), boot_of(1 << 64 | 1));
    }

    #[test]
    fn a_release_lowers_the_mark_to_the_last_id_within_the_lease() {
        // The last ID a second before the ceiling: the mark comes down to it.
        assert_eq!(lowered_to(10_000, 9_000, 3_000), 9_000);
        // A last ID before the renewal (none made since, or a wrong one): the renewal's time.
        assert_eq!(lowered_to(10_000, 0, 3_000), 7_000);
        assert_eq!(lowered_to(10_000, i64::MIN, 3_000), 7_000);
        // A last ID past the ceiling: the ceiling.
        assert_eq!(lowered_to(10_000, 12_000, 3_000), 10_000);
    }
}
