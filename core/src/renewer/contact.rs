//! One contact of the renewer with the registry, written once: the clock read and checked, the
//! high-water mark the contact records, then a heartbeat of the claim held or a claim of the
//! id [`Node::claimant`] wants, with the claim's intent written before the registry commits,
//! and each answer handed to [`Memory`] and [`Node`]. The round ([`Renewer::round`]) runs it on
//! the [`Parties`] its server hands it: the extension's SQL session (`client::Sql`) and shared
//! memory, or the fleet model's (`node/tests/model/fleet.rs`) in-memory table and members, so the
//! model runs the contact that ships. What the caller then says (logs, the registry status it
//! shows) it reads from the [`Contact`] the round returns.

use super::memory::{GivenUp, Memory};
#[cfg(doc)]
use super::Renewer;
use crate::node::{Claim, Node};
use crate::registry::table::{
    self, ClaimOutcome, Grant, Heartbeat, HeartbeatRequest, Request, Retirement, Table,
};
use crate::registry::{self, Lease, Refusal, Want};

/// The settings one contact runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Settings {
    /// `pg_snowflake.registry_mode = fenced`.
    pub fenced: bool,
    pub lease_ms: i64,
    /// `pg_snowflake.max_clock_skew_ms`: a clock further from the registry's claims nothing
    /// and sends no heartbeat.
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
pub trait Member {
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
    /// it is busy (a renewal is being written): no claim this round.
    fn start_writing(&mut self) -> bool;
    /// Gives the role back.
    fn stop_writing(&mut self);
    /// Applies [`Node::intend`] for `claim` and writes the `Durable` it returns to the state
    /// file, as the writer: the claim's intent, before the registry commits it.
    fn intend(&mut self, claim: &Claim, fenced: bool) -> Result<(), Self::Failure>;
    /// Applies [`Node::lease_extended`] for `lease`, the heartbeat having found the mark at
    /// `before`.
    fn lease_extended(&mut self, lease: &Lease, fenced: bool, before: i64);
    /// Applies [`Node::disown`] (the registry found this server a copy of the live holder of
    /// its claim) and writes the `Durable` it returns, if any, to the state file, as the
    /// writer; a write that fails is left to the next reservation.
    fn disown(&mut self);
    /// A claim was refused because the holder of the id, under this server's own token, was
    /// connected or seen lately: [`Node::met_holder`] from now on.
    fn met_holder(&mut self);
    /// Keeps the retirement left pending (`Memory::retire_pending`) where a restarted
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
    /// busy (next round).
    Idle,
    /// A heartbeat extended the lease; the id given up for a fresh one, if its retirement was
    /// tried.
    Heartbeat {
        lease: Lease,
        retired: Option<(u32, Result<Retirement, F>)>,
    },
    /// The id `node` was taken over (by the server labelled `label`; `None`: retired).
    Lost { node: u32, label: Option<String> },
    /// A claim the registry granted; the id given up for it, if its retirement was tried.
    Granted {
        grant: Grant,
        claim: Claim,
        retired: Option<(u32, Result<Retirement, F>)>,
    },
    /// A claim the registry refused.
    Refused {
        node: u32,
        why: Refusal,
        /// The label of the server holding the id.
        label: String,
        last_seen: i64,
        layout: String,
    },
    /// No id of the layout (0 to `max`) is free.
    NoFreeId { max: u32 },
    /// The claim's intent could not be written ([`Member::intend`] failed): the registry rolled
    /// the claim back. The registry is fine and its session is kept; the disk is not.
    Unwritten,
}

/// Where one contact runs: a registry session and the server's side of it.
pub trait Session {
    type Failure;

    /// One [`contact`] under `settings`, `memory` the renewer's: the clock offset it read (ms)
    /// and what it came to.
    fn contact(
        &mut self,
        memory: &mut Memory,
        settings: &Settings,
    ) -> Result<(i64, Contact<Self::Failure>), Self::Failure>;
}

/// A registry session (`table`) and the server as a contact on it sees it (`member`): what the
/// extension and the fleet model hand the round for one contact.
pub struct Parties<T, M> {
    pub table: T,
    pub member: M,
}

impl<T, M> Session for Parties<T, M>
where
    T: Table,
    M: Member<Failure = T::Failure>,
{
    type Failure = T::Failure;

    fn contact(
        &mut self,
        memory: &mut Memory,
        settings: &Settings,
    ) -> Result<(i64, Contact<T::Failure>), T::Failure> {
        contact(&mut self.table, &mut self.member, memory, settings)
    }
}

/// One contact on `table`'s session: the clock offset it read (ms) and what it came to. A
/// failed exchange fails the contact: the session is to be dropped ([`Memory::keeps_session`]
/// says when a contact that did not fail drops it too).
pub fn contact<T, M>(
    table: &mut T,
    member: &mut M,
    memory: &mut Memory,
    settings: &Settings,
) -> Result<(i64, Contact<T::Failure>), T::Failure>
where
    T: Table,
    M: Member<Failure = T::Failure>,
{
    let (sent_mono, sent) = (member.monotonic(), member.wall());
    let registry_now = table.clock()?;
    let offset = registry::clock_offset(sent, member.wall(), registry_now);
    member.clock_read(offset, sent);
    let contact = if offset.abs() > settings.max_clock_skew_ms {
        Contact::Skewed
    } else {
        ask(table, member, memory, settings, sent_mono, sent, offset)?
    };
    Ok((offset, contact))
}

/// The contact past its clock check: a claim if no claim is held, else a heartbeat.
fn ask<T, M>(
    table: &mut T,
    member: &mut M,
    memory: &mut Memory,
    settings: &Settings,
    sent_mono: i64,
    sent: i64,
    offset: i64,
) -> Result<Contact<T::Failure>, T::Failure>
where
    T: Table,
    M: Member<Failure = T::Failure>,
{
    let (node, reaches) = member.state();
    // In both modes the mark covers every ID the holder may make until the lease ends (the
    // reservations stop at it until then), so that a later holder starts above them: a lease
    // past the clock, never a lease past a lead the IDs already have (the mark a crash leaves
    // is where the next restart resumes).
    let room = registry::lead_room_ms(settings.lease_ms, settings.max_clock_skew_ms);
    let high_water = Lease::ceiling_for(sent, reaches, settings.lease_ms, room);
    let Some(held) = memory.held else {
        let at = At {
            sent_mono,
            offset,
            high_water,
            reaches,
        };
        return claim(table, member, memory, settings, node, &at);
    };
    let lease_ms = settings.lease_ms;
    let request = HeartbeatRequest {
        lease_ms,
        high_water,
        clock_offset_ms: offset,
        boot: node.boot,
        place: node.place,
    };
    let beat = table::heartbeat(table, memory.needs_lock, held.node, held.identity, &request)?;
    Ok(match beat {
        Heartbeat::Extended { locked, before } => {
            let lease = Lease::granted(sent_mono, high_water, lease_ms);
            memory.extended(lease, locked);
            member.lease_extended(&lease, settings.fenced, before);
            let retired = retire_given_up(table, member, memory);
            Contact::Heartbeat { lease, retired }
        }
        Heartbeat::Lost { label } => {
            memory.lost();
            Contact::Lost {
                node: held.node,
                label,
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
    /// How far its IDs may reach already (Unix ms; [`Member::state`]).
    reaches: i64,
}

/// Claims the id `node` wants, its intent written by `member` before the registry commits.
fn claim<T, M>(
    table: &mut T,
    member: &mut M,
    memory: &mut Memory,
    settings: &Settings,
    node: Node,
    at: &At,
) -> Result<Contact<T::Failure>, T::Failure>
where
    T: Table,
    M: Member<Failure = T::Failure>,
{
    if !node.may_claim() {
        return Ok(Contact::Idle);
    }
    let sent_mono = at.sent_mono;
    let (claimant, recorded) = node.claimant(
        settings.configured,
        settings.fresh_on_promotion,
        at.reaches,
        memory.patient(sent_mono, settings.lease_ms),
    );
    // A promoted standby claiming a fresh id gives up the claim it inherited.
    let given_up = node
        .identity
        .map(|identity| GivenUp {
            node: node.id,
            identity,
        })
        .filter(|_| claimant.identity.is_none());
    let request = request(member, settings, &node, at, recorded, claimant.wanted);
    if !member.start_writing() {
        return Ok(Contact::Idle);
    }
    let mut unwritten = false;
    let claimed = table::claim(table, &claimant, &request, |grant| {
        let intended = member.intend(
            &Claim::of(grant, sent_mono, settings.lease_ms),
            settings.fenced,
        );
        unwritten = intended.is_err();
        intended
    });
    // Found to be a copy of its claim's live holder: the claim is not this server's, and no
    // later claim of it may pass for the holder's restart (a refused copy that kept the token
    // could take the id in the second its holder's renewer restarts, and lock the holder out).
    if let Ok(ClaimOutcome::Refused { why, .. }) = &claimed {
        if why.found_a_copy() {
            member.disown();
        }
        if why.met_holder() {
            member.met_holder();
        }
    }
    member.stop_writing();
    if unwritten {
        return Ok(Contact::Unwritten);
    }
    let mut contact = answered(memory, settings, at, request, claimed?);
    if let Contact::Granted { claim, retired, .. } = &mut contact {
        if let Some(old) = given_up.filter(|old| old.node != claim.node) {
            memory.retire_pending = Some(old);
        }
        *retired = retire_given_up(table, member, memory);
    }
    Ok(contact)
}

/// What a claim asks of the registry: how `member` is named, the lease and mark it asks for,
/// and the node ids it used before (`recorded`: the one its state file names; `wanted`: what
/// it wants).
fn request<M: Member>(
    member: &mut M,
    settings: &Settings,
    node: &Node,
    at: &At,
    recorded: Option<u32>,
    wanted: Want,
) -> Request {
    let names = member.names();
    Request {
        label: names.label,
        system: names.system,
        layout: names.layout,
        max_node: names.max_node,
        lease_ms: settings.lease_ms,
        high_water: at.high_water,
        ahead_of_floor_ms: registry::lead_room_ms(settings.lease_ms, settings.max_clock_skew_ms),
        clock_offset_ms: at.offset,
        margin_ms: settings.max_clock_skew_ms,
        recorded_node: recorded,
        new_token: member.new_token(),
        boot: node.boot,
        place: node.place,
        used_before: registry::used_before(node.history.named(), wanted),
        used_until: node.history.until,
    }
}

/// What the registry's answer to `request` does to `memory` (a grant held, to be pinned; a
/// refusal retried at every contact), and what the contact came to (a grant's retirement of
/// the claim given up for it, if any, is the caller's).
fn answered<F>(
    memory: &mut Memory,
    settings: &Settings,
    at: &At,
    request: Request,
    outcome: ClaimOutcome,
) -> Contact<F> {
    match outcome {
        ClaimOutcome::Granted(grant) => {
            // The registry recorded the mark this claimant asked for, or the room past a lead
            // past the floor it resumes above if that is higher: every ID it may make is
            // covered, and none of them a lease past a floor already ahead of its clock. A
            // crash restart resumes at the mark its crashed run left; a mark a lease past that
            // floor would be the next restart's floor, and a crash loop would stamp its IDs a
            // lease further ahead of the clock at every crash.
            let room = registry::lead_room_ms(settings.lease_ms, settings.max_clock_skew_ms);
            assert!(
                grant.mark > grant.floor
                    && grant.mark <= at.high_water.max(grant.floor.saturating_add(room)),
                "a claim from {} recorded the mark {}, asked for {}",
                grant.floor,
                grant.mark,
                at.high_water
            );
            let claim = Claim::of(&grant, at.sent_mono, settings.lease_ms);
            memory.taken(claim.node, claim.identity, claim.lease);
            Contact::Granted {
                grant,
                claim,
                retired: None,
            }
        }
        ClaimOutcome::Refused {
            node,
            why,
            label,
            last_seen,
        } => {
            if why == Refusal::OpenSession {
                memory.waits_for_session(at.sent_mono);
            } else {
                memory.refused();
            }
            Contact::Refused {
                node,
                why,
                label,
                last_seen,
                layout: request.layout,
            }
        }
        ClaimOutcome::NoFreeId => {
            memory.refused();
            Contact::NoFreeId {
                max: request.max_node,
            }
        }
    }
}

/// Retires the claim a promoted standby gave up for a fresh id, once its primary is gone; kept
/// pending while its lease still runs (tried again at the next heartbeat, by this renewer or
/// the next: `member` keeps it); ended when the id has been claimed again since (it is the new
/// holder's).
fn retire_given_up<T, M>(
    table: &mut T,
    member: &mut M,
    memory: &mut Memory,
) -> Option<(u32, Result<Retirement, T::Failure>)>
where
    T: Table,
    M: Member<Failure = T::Failure>,
{
    let old = memory.retire_pending?;
    let retired = table::retire_claim(table, old.node, old.identity);
    // Given up only once done, once no live row is left, or once the id is claimed again: a
    // lease still running, a primary still connected, or an exchange that failed, is tried
    // again.
    let again = !matches!(
        retired,
        Ok(Retirement::Retired { .. } | Retirement::NoLiveRow | Retirement::ClaimedAgain { .. })
    );
    memory.retire_pending = again.then_some(old);
    member.retirement_pending(memory.retire_pending);
    Some((old.node, retired))
}
