//! The issuing state: everything a server keeps in shared memory to make IDs, as one value with
//! one method per event. The extension holds one [`Issuer`] under its generator's lock
//! (`src/shmem.rs`) and calls these methods inside it; the fleet model (`node/tests/model.rs`)
//! holds one per member and calls the same methods. So the two rules every ID depends on are
//! written here once, and nowhere else decides with them:
//!
//! - **the gate**: IDs are made only while the node refuses nothing ([`Issuer::issuing`]); every
//!   way to an ID — the fast path ([`Issuer::next_one`]), a call ([`Issuer::allocate`]), the
//!   renewer keeping the reservation ahead ([`Issuer::keep_ahead`]) — passes it;
//! - **the fenced ceiling**: no reservation, and no ID of a wake, reaches past the ceiling the
//!   registry recorded for a fenced lease (`Node::ceiling`): the wake stops at it
//!   (`Limits::ceiling`, set here on every allocation) and the writer's turn is capped at it
//!   ([`Issuer::renewal_turn`]), a turn that would cover nothing more being reported fenced
//!   without a write.
//!
//! The writer's turn ([`Turn`]) is the one renewal (or rewrite) being written: taken under the
//! lock by one process (the renewer, or a backend standing in for it), written with no lock
//! held, and ended ([`Issuer::turn_ended`]) with how it went ([`Renewal`]). The node's
//! transitions are `Node`'s, the generator's rules the `Generator`'s: this type strings them
//! together and holds what the registry said last, for reporting ([`RegistryStatus`]).

use crate::clock::Clock;
use crate::error::Error;
use crate::generator::{Allocation, Generator, Limits};
use crate::layout::Layout;
use crate::node::{Claim, Durable, Held, Holding, Node, RegistryStatus, Release, Start};
use crate::registry::{Identity, Lease, Refusal};
use crate::renewer::memory::{GivenUp, Memory};
use crate::state_file::History;
use crate::wal_record::Record;

pub use crate::node::Refusing;

/// The issuing state: the generator, the node's identity, the registry's last word and the
/// writer's turn. Plain data (`#[repr(C)]`, `Copy`), kept in shared memory; read through its
/// accessors, changed only through its methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Issuer {
    /// First, so that the hot path reaches the steady clock at the value's own address.
    generator: Generator,
    node: Node,
    registry: RegistryStatus,
    /// Why the last turn failed, for the callers that waited for it.
    last_failure: RenewalFailure,
    /// The process whose turn it is (0: none), so that a turn is ended if its process exits
    /// without ending it.
    writer_pid: i32,
    /// The claim a promoted standby gave up for a fresh id, still to be retired
    /// (`Memory::retire_pending`), kept here so that a renewer's restart goes on trying
    /// (were it forgotten, the id would never be retired).
    retire_pending: Option<GivenUp>,
    /// The end of the lease (monotonic ms; `i64::MIN`: none) the renewer last published its
    /// claim held under: what a restarted renewer goes on under ([`Issuer::resumable`]).
    /// `registry`'s lease is what `snowflake_stats()` shows, and decides nothing.
    renewer_lease_ends_at: i64,
    /// IDs made while the ceiling had given way (available mode: heartbeats failed for about a
    /// lease, or between a release and the next claim): they may lie past the mark the registry
    /// holds, where a later holder of the id may repeat them. Counted from `past_mark_from` (the
    /// count of IDs issued when it gave way; `None`: bounded now) and summed in `past_mark`.
    past_mark: u64,
    past_mark_from: Option<u64>,
}

/// What a claim's intent changed, put back when it cannot be written
/// ([`Issuer::intent_unwritten`]).
#[derive(Clone, Copy, Debug)]
pub struct Before {
    node: Node,
    past_mark_from: Option<u64>,
}

/// Why a turn failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub enum RenewalFailure {
    /// The state file could not be written: this OS error number (0: none known).
    Io { errno: i32 },
    /// Fenced mode: the next reservation would pass the lease's ceiling (Unix ms).
    Fenced { ceiling: i64 },
}

/// How a turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Renewal {
    /// Durable (and confirmed by the synchronous standbys): IDs below `until` may be issued;
    /// the write took `took_ms` (slow writes lengthen the next reservations).
    Done { until: i64, took_ms: i64 },
    /// Not written: the callers waiting for it fail with this OS error (0: none known).
    Failed { errno: i32 },
    /// Not written: it would not reach past the fenced lease's ceiling (Unix ms).
    Fenced { ceiling: i64 },
    /// The writing process is being terminated before it knew: the turn is given back and the
    /// demand kept for the next writer.
    Abandoned,
    /// Given back unwritten on the ordinary path (a rewrite turn held while a claim was asked,
    /// then not needed): ended exactly as [`Renewal::Abandoned`] is, the demand kept for the
    /// next writer; only the name says it was no termination.
    GivenBack,
}

/// A writer's turn: the reservation to write and the identity to write with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Turn {
    /// The reservation's end (Unix ms).
    pub until: i64,
    pub node: u32,
    pub history: History,
    pub identity: Option<Identity>,
    /// Capped at the fenced lease's ceiling, the reservation would cover nothing more than the
    /// durable one: the writer writes nothing and ends the turn [`Renewal::Fenced`].
    pub fenced: bool,
}

impl Turn {
    /// How this turn ends without a write, when it has nothing to write ([`Turn::fenced`]).
    pub fn unwritten(&self) -> Option<Renewal> {
        self.fenced.then_some(Renewal::Fenced {
            ceiling: self.until,
        })
    }
}

impl Issuer {
    /// The issuing state a server starts with (`Node::start` decided the node and the floor).
    pub const fn start(start: &Start) -> Issuer {
        Issuer {
            generator: Generator::resume(start.floor),
            node: start.node,
            registry: RegistryStatus::NONE,
            last_failure: RenewalFailure::Io { errno: 0 },
            writer_pid: 0,
            retire_pending: None,
            renewer_lease_ends_at: i64::MIN,
            past_mark: 0,
            past_mark_from: None,
        }
    }

    /// How many IDs this server made while no ceiling bounded them in available mode
    /// ([`Node::gives_way`]): IDs that may lie past the mark the registry holds for their
    /// node id, available mode's one risk (`snowflake_stats().ids_past_mark`).
    pub fn ids_past_mark(&self) -> u64 {
        let issued = self.generator.stats().issued;
        self.past_mark + self.past_mark_from.map_or(0, |from| issued - from)
    }

    /// The ceiling gives way (available mode), and the IDs made from now on are counted until
    /// a heartbeat records a mark above them.
    fn give_way(&mut self) {
        if self.node.gives_way {
            self.node.ceiling = i64::MAX;
            self.past_mark_from
                .get_or_insert(self.generator.stats().issued);
        }
    }

    pub const fn node(&self) -> &Node {
        &self.node
    }

    pub const fn generator(&self) -> &Generator {
        &self.generator
    }

    pub const fn registry(&self) -> &RegistryStatus {
        &self.registry
    }

    /// Why the last turn failed, for a caller that waited for it.
    pub const fn last_failure(&self) -> RenewalFailure {
        self.last_failure
    }

    /// The gate: whether IDs may be made now.
    #[inline(always)]
    pub fn issuing(&self) -> bool {
        self.node.refusing == Refusing::Nothing
    }

    /// The generator's limits with the node's ceiling (no wake past the fenced lease's).
    #[inline(always)]
    fn limits(&self, limits: &Limits) -> Limits {
        Limits {
            ceiling: self.node.ceiling,
            ..*limits
        }
    }

    // -----------------------------------------------------------------------------------------
    // Making IDs.

    /// The next ID's time, sequence and node id in the common case (`Generator::next_one`, at
    /// the wall clock read after the gate, one reading), or `None`, having changed nothing,
    /// when the gate is closed or [`Issuer::allocate`] must decide. The extension's fast path.
    #[inline(always)]
    pub fn next_one(
        &mut self,
        layout: &Layout,
        clock: &mut impl Clock,
        limits: &Limits,
    ) -> Option<(i64, u32, u32)> {
        if !self.issuing() {
            return None;
        }
        let wall = clock.wall();
        let (time, seq) = self
            .generator
            .next_one(layout, self.node.id, wall, limits)?;
        Some((time, seq, self.node.id))
    }

    /// Up to `want` IDs of `layout` (`Generator::allocate`), with the node id they carry; or,
    /// with the gate closed, why no ID may be made (nothing changed).
    #[inline(always)]
    pub fn allocate(
        &mut self,
        layout: &Layout,
        clock: &mut impl Clock,
        limits: &Limits,
        want: u64,
    ) -> Result<(u32, Result<Allocation, Error>), Refusing> {
        if !self.issuing() {
            return Err(self.node.refusing);
        }
        let limits = self.limits(limits);
        let node = self.node.id;
        Ok((
            node,
            self.generator.allocate(layout, node, clock, &limits, want),
        ))
    }

    /// Keeps the reservation ahead of the clock between calls (`Generator::keep_ahead`), while
    /// IDs may be made: not without a node id, not before the registry's claim, and not in a
    /// data directory that awaits its state file after pg_upgrade (it keeps the marker file
    /// until the old one is copied in: no reservation may replace it). Returns how long the
    /// renewer may sleep before its next round of the loop: a quarter of the reservation,
    /// between 10 ms and a second.
    pub fn keep_ahead(
        &mut self,
        layout: &Layout,
        limits: &Limits,
        clock: &mut impl Clock,
        active_since: i64,
    ) -> i64 {
        if self.issuing() {
            self.generator
                .keep_ahead(layout, limits, clock, active_since);
        }
        (self.generator.effective_reservation_ms(limits) / 4).clamp(10, 1_000)
    }

    // -----------------------------------------------------------------------------------------
    // The writer's turn.

    /// The due renewal, for process `pid` (the renewer: `by_renewer`, or a backend standing in
    /// for it), if one is due and no turn is taken; capped at the fenced lease's ceiling.
    pub fn renewal_turn(&mut self, by_renewer: bool, pid: i32) -> Option<Turn> {
        let wanted = self.generator.start_renewal(by_renewer)?;
        if wanted > self.node.ceiling {
            self.give_way();
        }
        let until = wanted.min(self.node.ceiling);
        let fenced = until <= self.generator.reserved_until();
        Some(self.turn(until, fenced, pid))
    }

    /// The durable reservation written again as it is, with what now goes with it (a registry
    /// claim's pin), for the renewer's process `pid`: `None` while a turn is taken.
    pub fn rewrite_turn(&mut self, pid: i32) -> Option<Turn> {
        let until = self.generator.start_rewrite()?;
        Some(self.turn(until, false, pid))
    }

    fn turn(&mut self, until: i64, fenced: bool, pid: i32) -> Turn {
        self.writer_pid = pid;
        Turn {
            until,
            node: self.node.id,
            history: self.node.history,
            identity: self.node.identity,
            fenced,
        }
    }

    /// The turn ended as `renewal` says.
    pub fn turn_ended(&mut self, renewal: Renewal) {
        self.writer_pid = 0;
        match renewal {
            Renewal::Done { until, took_ms } => self.generator.renewal_done(until, took_ms),
            Renewal::Failed { errno } => {
                self.last_failure = RenewalFailure::Io { errno };
                self.generator.renewal_failed();
            }
            Renewal::Fenced { ceiling } => {
                self.last_failure = RenewalFailure::Fenced { ceiling };
                self.generator.renewal_failed();
            }
            // Both leave the demand to the next writer, the same way.
            Renewal::Abandoned | Renewal::GivenBack => self.generator.renewal_abandoned(),
        }
    }

    /// Process `pid` exits: its turn, if it has one, is given back (abandoned); returns whether
    /// it had one.
    pub fn writer_exited(&mut self, pid: i32) -> bool {
        let had = self.generator.renewing() && self.writer_pid == pid;
        if had {
            self.turn_ended(Renewal::Abandoned);
        }
        had
    }

    /// A renewer process starts: a turn its predecessor left is given back (not one of a
    /// backend standing in, still writing: `Generator::renewer_started`).
    pub fn renewer_started(&mut self) {
        self.generator.renewer_started();
    }

    // -----------------------------------------------------------------------------------------
    // The node's transitions (`Node`'s rules), with what the registry status shows of them.

    /// A reservation record replayed (`Node::replay`): what the state file must say, if that
    /// changed.
    pub fn replay(&mut self, record: &Record, configured: Option<u32>) -> Option<Durable> {
        self.node.replay(&mut self.generator, record, configured)
    }

    /// The registry decided a claim for this server (`Node::intend`): its intent, and the state
    /// before it, for [`Issuer::intent_unwritten`]. The claim's ceiling bounds the IDs again.
    pub fn intend(&mut self, claim: &Claim, fenced: bool) -> (Durable, Before) {
        let before = Before {
            node: self.node,
            past_mark_from: self.past_mark_from,
        };
        let ceiling = self.node.ceiling;
        let intent = self.node.intend(&mut self.generator, claim, fenced);
        self.bounded_by(claim.lease.ceiling, ceiling);
        (intent, before)
    }

    /// The intent could not be written to the state file, so the registry's transaction of the
    /// claim rolls back: the node is again as it was `before` ([`Issuer::intend`]). Else its
    /// next claim would come from the intent's identity, a new token the registry never
    /// recorded, and be refused as another server's; and a lost history would pass for found.
    /// (The reservation the claim's floor raised stays raised: raising one is always safe.)
    pub fn intent_unwritten(&mut self, before: Before) {
        self.node = before.node;
        self.past_mark_from = before.past_mark_from;
    }

    /// A ceiling the registry recorded as the mark bounds the IDs again: those made past the
    /// mark since the ceiling gave way are counted, unless the reservation already reaches past
    /// this one too (read before more was made): then the ceiling stays given way, and they
    /// are counted until a mark above them is recorded.
    fn bounded_by(&mut self, ceiling: i64, given_way: i64) {
        let Some(from) = self.past_mark_from else {
            return;
        };
        if self
            .generator
            .issued_below()
            .max(self.generator.reserved_until())
            > ceiling
        {
            self.node.ceiling = given_way;
        } else {
            self.past_mark += self.generator.stats().issued - from;
            self.past_mark_from = None;
        }
    }

    /// The registry found this server a copy of its claim's holder (`Node::disown`).
    pub fn disown(&mut self) -> Option<Durable> {
        self.node.disown(&self.generator)
    }

    /// A claim met the holder of this server's own claim live (`Node::met_holder`).
    pub fn met_holder(&mut self) {
        self.node.met_holder = true;
    }

    /// A heartbeat extended the lease (`Node::lease_extended`).
    pub fn lease_extended(&mut self, lease: &Lease, fenced: bool, before: i64) {
        let ceiling = self.node.ceiling;
        self.node.lease_extended(lease, fenced, before);
        self.registry.lease_ends_at = lease.ends_at;
        self.bounded_by(lease.ceiling, ceiling);
    }

    /// The claim a restarted renewer may go on under (`Node::resumable`), with the lease its
    /// predecessor last had.
    pub fn resumable(&self) -> Option<Held> {
        self.node.resumable(Lease {
            ends_at: self.renewer_lease_ends_at,
            ceiling: self.node.ceiling,
        })
    }

    /// What a restarted renewer starts from: its predecessor's claim to go on under, in
    /// available mode (`Node::resumable`; in fenced mode it claims), and the retirement it
    /// left pending.
    pub fn renewer_restarted(&self, available: bool) -> Memory {
        Memory {
            held: available.then(|| self.resumable()).flatten(),
            retire_pending: self.retire_pending,
            ..Memory::new()
        }
    }

    /// The retirement a contact left pending (`Memory::retire_pending`).
    pub fn retirement_pending(&mut self, given_up: Option<GivenUp>) {
        self.retire_pending = given_up;
    }

    /// The renewer stops holding a fenced claim (`Node::release`).
    pub fn release(&mut self) -> Option<Release> {
        let release = self.node.release(&self.generator)?;
        if release.lower.is_some() && self.node.gives_way {
            self.past_mark_from
                .get_or_insert(self.generator.stats().issued);
        }
        Some(release)
    }

    /// Whether the IDs made now are counted as past the mark ([`Issuer::ids_past_mark`]).
    pub fn past_the_mark(&self) -> bool {
        self.past_mark_from.is_some()
    }

    /// Says whether IDs may be made (`Node::publish`); returns whether that changed.
    pub fn publish(&mut self, holding: Holding, skewed: bool, fenced: bool, now: i64) -> bool {
        let changed = self.node.publish(holding, skewed, fenced, now);
        if let Holding::Held { lease, .. } = holding {
            self.renewer_lease_ends_at = lease.ends_at;
        }
        if fenced {
            // Fenced mode counts nothing: it makes no ID without a grant.
            if let Some(from) = self.past_mark_from.take() {
                self.past_mark += self.generator.stats().issued - from;
            }
        } else if self.node.ceiling == i64::MAX {
            // Available mode without a ceiling (switched from fenced mode without a grant):
            // nothing bounds its IDs by a mark, so each is counted until a heartbeat's does.
            self.past_mark_from
                .get_or_insert(self.generator.stats().issued);
        }
        changed
    }

    /// The node and the durable reservation, as a contact reads them.
    pub fn state(&self) -> (Node, i64) {
        (self.node, self.generator.reserved_until())
    }

    /// The node, and how far its IDs may reach already reading `clock` now
    /// (`Generator::reaches`): what a contact records its mark above.
    pub fn reaches(&self, clock: &mut impl Clock) -> (Node, i64) {
        (self.node, self.generator.reaches(clock))
    }

    // -----------------------------------------------------------------------------------------
    // What the registry said, for reporting.

    /// A contact read the registry's clock: this clock minus it, at `sent` (Unix ms).
    pub fn clock_read(&mut self, offset_ms: i64, sent: i64) {
        self.registry.clock_offset_ms = offset_ms;
        self.registry.last_contact = sent;
    }

    /// A claim was taken, its lease ending at `lease_ends_at` (monotonic ms).
    pub fn taken(&mut self, lease_ends_at: i64) {
        self.registry.lease_ends_at = lease_ends_at;
        self.registry.refusal = None;
    }

    /// The claim of `node` was refused, held by the server labelled `label` (last seen at Unix
    /// ms `last_seen`).
    pub fn refused(&mut self, node: u32, why: Refusal, last_seen: i64, label: &str) {
        self.registry.refusal = Some((node, why, last_seen));
        self.registry.set_label(label);
    }

    /// The node id was taken over by the server labelled `label`.
    pub fn lost(&mut self, label: &str) {
        self.registry.set_label(label);
    }

    /// No node id was free: no refusal to show.
    pub fn no_free_id(&mut self) {
        self.registry.refusal = None;
    }
}

#[cfg(test)]
mod tests;
