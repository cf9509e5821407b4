//! One contact of the renewer with the registry, written once: the clock read and checked, the
//! high-water mark the contact records, then a heartbeat of the claim held or a claim of the
//! id [`Node::claimant`] wants, with the claim's intent written before the registry commits,
//! and each answer handed to [`HolderState`] and [`Node`]. The extension's
//! `src/registry/holder.rs` runs it over SQL (`client::Sql`) and shared memory; the fleet
//! model (`tests/model.rs`) over its in-memory table and members, so the model runs the
//! contact that ships. What the extension then says (logs, the registry status it shows) it
//! reads from the [`Contact`] returned.

use super::holder::{GivenUp, HolderState};
use super::{Claim, Node};
use crate::registry::table::{
    self, ClaimOutcome, Grant, Heartbeat, RenewRequest, Request, Retirement, Table,
};
use crate::registry::{self, Lease, Refusal};

/// The settings one contact runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Settings {
    /// `pg_snowflake.registry_mode = fenced`.
    pub fenced: bool,
    pub lease_ms: i64,
    /// `pg_snowflake.max_clock_skew_ms`: a clock further from the registry's claims nothing
    /// and renews nothing.
    pub max_clock_skew_ms: i64,
    /// `pg_snowflake.node_id`, if set.
    pub configured: Option<u32>,
    /// `pg_snowflake.fresh_node_id_on_promotion`.
    pub fresh_on_promotion: bool,
}

/// How the server is named to the registry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Names {
    /// `cluster_name`, host and port.
    pub label: String,
    /// The cluster's system identifier.
    pub system: u64,
    /// Its layout, described.
    pub layout: String,
    /// The highest node id of its layout.
    pub max_node: u32,
}

/// The server's side of a contact, as the extension (shared memory under its lock, the state
/// file) or the fleet model keeps it. `Failure` is the registry table's: an intent that could
/// not be written fails the claim, which is rolled back.
pub trait Host {
    type Failure;

    /// The wall clock (Unix ms).
    fn wall(&mut self) -> i64;
    /// The monotonic clock (ms).
    fn monotonic(&mut self) -> i64;
    /// The node, and how far its IDs may reach already (Unix ms): the later of the generator's
    /// durable reservation and the time a call would issue at now
    /// ([`Issuer::reaches`](crate::issuer::Issuer::reaches)).
    fn state(&mut self) -> (Node, i64);
    /// The contact read the registry's clock `offset` ms from this server's, at wall time
    /// `sent`.
    fn clock_read(&mut self, offset: i64, sent: i64);
    /// Takes the role of the one writer of the state file for a claim's intent; `false` when
    /// it is busy (a renewal is being written): no claim this turn.
    fn start_writing(&mut self) -> bool;
    /// Gives the role back.
    fn stop_writing(&mut self);
    /// Applies [`Node::intend`] for `taken` and writes the `Durable` it returns to the state
    /// file, as the writer: the claim's intent, before the registry commits it.
    fn intend(&mut self, taken: &Claim, fenced: bool) -> Result<(), Self::Failure>;
    /// Applies [`Node::lease_renewed`] for `lease`, the heartbeat having found the mark at
    /// `before`.
    fn lease_renewed(&mut self, lease: &Lease, fenced: bool, before: i64);
    /// Applies [`Node::disown`] (the registry found this server a copy of the live holder of
    /// its claim) and writes the `Durable` it returns, if any, to the state file, as the
    /// writer; a write that fails is left to the next reservation.
    fn disown(&mut self);
    /// A claim was refused because the holder of the id, under this server's own token, was
    /// connected or seen lately: [`Node::met_holder`] from now on.
    fn met_holder(&mut self);
    /// Keeps the retirement left pending (`HolderState::retire_pending`) where a restarted
    /// renewer finds it (`Issuer::retirement_pending`).
    fn retirement_pending(&mut self, given_up: Option<GivenUp>);
    /// How this server is named to the registry.
    fn names(&mut self) -> Names;
    /// A new owner token (128 random bits).
    fn new_token(&mut self) -> u128;
}

/// What one contact came to, for the extension to say and show.
#[derive(Clone, Debug, PartialEq)]
pub enum Contact<F> {
    /// The clock is further from the registry's than the limit: nothing asked.
    Skewed,
    /// Nothing to ask: no claim may be made now (`Node::may_claim`), or the writer's role was
    /// busy (next turn).
    Idle,
    /// The lease is renewed; the id given up for a fresh one, if its retirement was tried.
    Renewed {
        lease: Lease,
        retired: Option<(u32, Result<Retirement, F>)>,
    },
    /// The id `node` was taken over (by `holder`; `None`: retired).
    Lost { node: u32, holder: Option<String> },
    /// A claim the registry granted; the id given up for it, if its retirement was tried.
    Granted {
        decided: Grant,
        taken: Claim,
        retired: Option<(u32, Result<Retirement, F>)>,
    },
    /// A claim the registry refused.
    Refused {
        node: u32,
        why: Refusal,
        holder: String,
        last_seen: i64,
        layout: String,
    },
    /// No id of the layout (0 to `max`) is free.
    NoFreeId { max: u32 },
}

/// One contact on `table`'s session: what it came to, and the clock offset it read (`None`:
/// the clock could not be read). A failed exchange fails the contact: the session is to be
/// dropped (`HolderState::keeps_session` says when a contact that did not fail drops it too).
pub fn contact<T, H>(
    table: &mut T,
    host: &mut H,
    holder: &mut HolderState,
    settings: &Settings,
) -> Result<Contact<T::Failure>, T::Failure>
where
    T: Table,
    H: Host<Failure = T::Failure>,
{
    let (sent_mono, sent) = (host.monotonic(), host.wall());
    let registry_now = table.clock()?;
    let offset = registry::clock_offset(sent, host.wall(), registry_now);
    host.clock_read(offset, sent);
    if offset.abs() > settings.max_clock_skew_ms {
        return Ok(Contact::Skewed);
    }
    let (node, reaches) = host.state();
    // In both modes the mark covers every ID the holder may make until the lease ends (the
    // reservations stop at it until then), so that a later holder starts above them.
    let high_water = Lease::ceiling_for(sent, reaches, settings.lease_ms);
    let Some(held) = holder.held else {
        let at = At {
            sent_mono,
            offset,
            high_water,
            reaches,
        };
        return claim(table, host, holder, settings, node, &at);
    };
    let lease_ms = settings.lease_ms;
    let renewal = RenewRequest {
        lease_ms,
        high_water,
        clock_offset_ms: offset,
        boot: node.boot,
    };
    let beat = table::heartbeat(table, holder.needs_lock, held.node, held.identity, &renewal)?;
    Ok(match beat {
        Heartbeat::Renewed { locked, before } => {
            let lease = Lease::granted(sent_mono, high_water, lease_ms);
            holder.renewed(lease, locked);
            host.lease_renewed(&lease, settings.fenced, before);
            let retired = retire_given_up(table, host, holder);
            Contact::Renewed { lease, retired }
        }
        Heartbeat::Lost { holder: taker } => {
            holder.lost();
            Contact::Lost {
                node: held.node,
                holder: taker,
            }
        }
    })
}

/// What a contact read before its claim.
struct At {
    /// When it was sent (monotonic ms): the lease counts from then.
    sent_mono: i64,
    /// This server's clock less the registry's (ms).
    offset: i64,
    /// The high-water mark it records.
    high_water: i64,
    /// How far its IDs may reach already (Unix ms; [`Host::state`]).
    reaches: i64,
}

/// Claims the id `node` wants, its intent written by `host` before the registry commits.
fn claim<T, H>(
    table: &mut T,
    host: &mut H,
    holder: &mut HolderState,
    settings: &Settings,
    node: Node,
    at: &At,
) -> Result<Contact<T::Failure>, T::Failure>
where
    T: Table,
    H: Host<Failure = T::Failure>,
{
    if !node.may_claim() {
        return Ok(Contact::Idle);
    }
    let sent_mono = at.sent_mono;
    let (claimant, recorded) = node.claimant(
        settings.configured,
        settings.fresh_on_promotion,
        at.reaches,
        holder.patient(sent_mono, settings.lease_ms),
    );
    // A promoted standby claiming a fresh id gives up the claim it inherited.
    let given_up = node
        .claim
        .map(|claim| GivenUp {
            node: node.id,
            claim,
        })
        .filter(|_| claimant.identity.is_none());
    let names = host.names();
    let request = Request {
        label: names.label,
        system: names.system,
        layout: names.layout,
        max_node: names.max_node,
        lease_ms: settings.lease_ms,
        high_water: at.high_water,
        ahead_of_floor_ms: settings.lease_ms,
        clock_offset_ms: at.offset,
        margin_ms: settings.max_clock_skew_ms,
        recorded_node: recorded,
        new_token: host.new_token(),
        boot: node.boot,
        used_before: registry::used_before(node.history.named(), claimant.wanted),
        used_until: node.history.until,
    };
    if !host.start_writing() {
        return Ok(Contact::Idle);
    }
    let claimed = table::claim(table, &claimant, &request, |decided| {
        host.intend(
            &Claim::of(decided, sent_mono, settings.lease_ms),
            settings.fenced,
        )
    });
    // Found to be a copy of its claim's live holder: the claim is not this server's, and no
    // later claim of it may pass for the holder's restart (a refused copy that kept the token
    // could take the id in the second its holder's renewer restarts, and lock the holder out).
    if let Ok(ClaimOutcome::Refused { why, .. }) = &claimed {
        if why.found_a_copy() {
            host.disown();
        }
        if why.met_holder() {
            host.met_holder();
        }
    }
    host.stop_writing();
    Ok(match claimed? {
        ClaimOutcome::Granted(decided) => {
            let taken = Claim::of(&decided, sent_mono, settings.lease_ms);
            holder.taken(taken.node, taken.identity, taken.lease);
            if let Some(old) = given_up.filter(|old| old.node != taken.node) {
                holder.retire_pending = Some(old);
            }
            let retired = retire_given_up(table, host, holder);
            Contact::Granted {
                decided,
                taken,
                retired,
            }
        }
        ClaimOutcome::Refused {
            node,
            why,
            holder: by,
            last_seen,
        } => {
            if why == Refusal::OpenSession {
                holder.waits_for_session(sent_mono);
            } else {
                holder.refused();
            }
            Contact::Refused {
                node,
                why,
                holder: by,
                last_seen,
                layout: request.layout,
            }
        }
        ClaimOutcome::NoFreeId => {
            holder.refused();
            Contact::NoFreeId {
                max: request.max_node,
            }
        }
    })
}

/// Retires the claim a promoted standby gave up for a fresh id, once its primary is gone; kept
/// pending while its lease still runs (tried again at the next heartbeat, by this renewer or
/// the next: `host` keeps it); ended when the id has been claimed again since (it is the new
/// holder's).
fn retire_given_up<T, H>(
    table: &mut T,
    host: &mut H,
    holder: &mut HolderState,
) -> Option<(u32, Result<Retirement, T::Failure>)>
where
    T: Table,
    H: Host<Failure = T::Failure>,
{
    let old = holder.retire_pending?;
    let retired = table::retire_claim(table, old.node, old.claim);
    // Given up only once done, once no live row is left, or once the id is claimed again: a
    // lease still running, a primary still connected, or an exchange that failed, is tried
    // again.
    let again = !matches!(
        retired,
        Ok(Retirement::Retired { .. } | Retirement::NoLiveRow | Retirement::ClaimedAgain { .. })
    );
    holder.retire_pending = again.then_some(old);
    host.retirement_pending(holder.retire_pending);
    Some((old.node, retired))
}
